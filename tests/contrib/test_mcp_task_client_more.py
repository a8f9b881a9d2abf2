"""MCP Tasks, the client's leftovers (issue 38): no orphaned task when a call's
deadline passes while the task is being created, a task's status messages reported
as the calling tool's progress, and the poll interval (the server's, never polled
faster, never slept past the call's deadline).

The wire is played by a tiny stdio fake, ``tests/support/mcp_task_client_fake.py``
(a real subprocess, started and stopped by each test), which logs every request
it reads with the time it read it.
"""

from __future__ import annotations

import collections.abc as c
import itertools
import json
import sys
import time
import typing as t
from pathlib import Path

import pytest

from nous_tools import Ok, Registry, signals
from nous_tools.contrib.mcp import MCPServer, TaskStatus, _task_client

FAKE = Path(__file__).resolve().parents[1] / "support" / "mcp_task_client_fake.py"
WAIT = 30.0


@pytest.fixture
def fake(tmp_path: Path) -> c.Iterator[tuple[MCPServer, Path]]:
    log = tmp_path / "requests.jsonl"
    log.touch()
    server = MCPServer.stdio(
        sys.executable, [str(FAKE)], env={"FAKE_LOG": str(log)}, mode="legacy", name="fake"
    )
    with server:
        yield server, log


def _requests(log: Path) -> list[dict[str, t.Any]]:
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [line for line in lines if "method" in line and "id" in line]


def _gets(log: Path) -> list[float]:
    return [line["at"] for line in _requests(log) if line["method"] == "tasks/get"]


# -- the poll interval -------------------------------------------------------------------


def test_the_poll_interval_is_the_servers_however_long_and_none_once_the_deadline_is_nearer():
    def wait(interval: float | None, left: float | None) -> float | None:
        return _task_client.poll_interval(TaskStatus("t", "working", poll_interval=interval), left)

    assert wait(1.0, None) == 1.0
    assert wait(3600.0, None) == 3600.0  # never faster than the server asks
    assert wait(None, None) == _task_client.DEFAULT_POLL
    assert wait(0.0001, None) == _task_client.MIN_POLL  # slower than asked is allowed
    assert wait(1.0, 5.0) == 1.0
    # the next look would come after the call's deadline: none is due
    assert wait(1.0, 0.3) is None
    assert wait(60.0, 1.0) is None
    assert wait(1.0, 0.0) is None


def test_tasks_get_is_never_sent_faster_than_the_servers_interval(fake):
    server, log = fake
    result = server.call("patient", {"interval_ms": 200, "polls": 4}, timeout=WAIT)
    assert result == Ok("done")
    gets = _gets(log)
    assert len(gets) == 4
    gaps = [later - earlier for earlier, later in itertools.pairwise(gets)]
    assert min(gaps) >= 0.2 - 0.005, gaps  # (the clocks' granularity)


def test_a_call_whose_deadline_comes_before_the_next_poll_ends_without_polling(fake):
    server, log = fake
    began = time.monotonic()
    with pytest.raises(TimeoutError, match="did not answer 'patient' in time"):
        server.call("patient", {"interval_ms": 60_000, "polls": 1}, timeout=1.0)
    assert time.monotonic() - began < WAIT
    methods = [line["method"] for line in _requests(log)]
    assert "tasks/get" not in methods
    assert methods[-1] == "tasks/cancel"  # the task it created is cancelled


# -- status messages as progress ---------------------------------------------------------


def test_a_tasks_status_messages_are_reported_as_the_calling_tools_progress(fake):
    server, _ = fake
    seen: list[tuple[str, float, float | None, str | None]] = []

    def on_progress(sender: t.Any, *, measurements: t.Any, metadata: t.Any) -> None:
        seen.append((sender.name, metadata["progress"], metadata["total"], metadata["message"]))

    registry = Registry()
    registry.register_mcp(server, trusted=True)
    signals.tool_progress.connect(on_progress)
    try:
        assert registry.execute_approved("progress", {}) == Ok("done")
    finally:
        signals.tool_progress.disconnect(on_progress)
    assert seen == [
        ("progress", 1.0, None, "starting"),
        ("progress", 2.0, None, "30 % done"),  # said twice, reported once
        ("progress", 3.0, None, "60 % done"),
        ("progress", 4.0, None, "90 % done"),
    ]


# -- a deadline during the creation ------------------------------------------------------


def _cancelled_ids(log: Path) -> list[str]:
    """The task ids of the ``tasks/cancel`` requests, once there is one (30 s at most)."""
    deadline = time.monotonic() + WAIT
    while True:
        cancels = [line for line in _requests(log) if line["method"] == "tasks/cancel"]
        if cancels:
            return [line["params"]["taskId"] for line in cancels]
        assert time.monotonic() < deadline, "the task created late was never cancelled"
        time.sleep(0.05)


def test_a_task_created_after_the_call_gave_up_is_cancelled_when_its_id_comes(fake):
    server, log = fake
    with pytest.raises(TimeoutError, match="did not answer 'slow_create' in time"):
        server.call("slow_create", {}, timeout=0.3)  # the creation is answered after 1 s
    assert _cancelled_ids(log) == ["t1"]
    # the connection is as good as before
    assert server.call("patient", {"interval_ms": 20, "polls": 1}, timeout=WAIT) == Ok("done")


def test_a_task_handle_whose_creation_times_out_leaves_no_task_running(fake):
    server, log = fake
    with pytest.raises(TimeoutError, match=r"did not answer within 0\.3 s"):
        server.call_tool("slow_create", {}, as_task=True, timeout=0.3)
    assert _cancelled_ids(log) == ["t1"]
