"""MCP Tasks across replicas (issue 38): two real ``nous-tools serve`` processes over
Streamable HTTP on one real PostgreSQL journal, as behind a load balancer. A task
created through one is polled through the other until it completes; it is visible
only to the identity (``Authorization``) that created it, through either; a cancel
through the other stops the process-isolated task the first runs and reads as
cancelled through both; and a SIGKILL of the replica running a task leaves it failed
(outcome unknown) through the other, which never runs it again. A task waiting on a
question through one reads ``input_required`` with it through the other, which takes
the answer (``tasks/update``) to the tool."""

from __future__ import annotations

import collections.abc as c
import signal
import subprocess
import time
import typing as t
from pathlib import Path

import pytest
from servers import served_http

from tests.contrib.test_mcp_tasks import _rpc, _settled, _wait_for

pytestmark = pytest.mark.slow

SUPPORT = Path(__file__).resolve().parents[1] / "support"
WAIT = 30.0
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}
ELICITING = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {
        "elicitation": {},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    },
}


@pytest.fixture(scope="module")
def dsn() -> c.Iterator[str]:
    from servers import postgres_server

    with postgres_server() as server:
        yield f"host={server['host']} user={server['user']} dbname={server['name']}"


def _replica(dsn: str, markers: Path) -> t.ContextManager[tuple[subprocess.Popen[str], str]]:
    """One ``nous-tools serve`` of ``mcp_replica_tools`` on the journal ``dsn``."""
    env = {"NOUS_TEST_REPLICA_DSN": dsn, "NOUS_TEST_REPLICA_MARKERS": str(markers)}
    return served_http("mcp_replica_tools:registry", env=env, wait=WAIT)


@pytest.fixture(scope="module")
def markers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("markers")


@pytest.fixture(scope="module")
def replicas(dsn: str, markers: Path) -> t.Iterator[tuple[str, str]]:
    with _replica(dsn, markers) as (_, a), _replica(dsn, markers) as (_, b):
        yield a, b


def _start(url: str, name: str, arguments: dict[str, t.Any], headers: dict[str, str]) -> str:
    created = _rpc(url, "tools/call", {"name": name, "arguments": arguments}, headers=headers)
    assert created["result"]["resultType"] == "task", created
    return t.cast(str, created["result"]["taskId"])


def _get(url: str, task_id: str, headers: dict[str, str]) -> dict[str, t.Any]:
    return _rpc(url, "tasks/get", {"taskId": task_id}, headers=headers)


def _still(path: Path, quiet: float = 1.0) -> float:
    """Wait (at most WAIT) until ``path`` stops growing for ``quiet`` seconds; when it
    last grew, as seconds from now (negative)."""
    deadline = time.monotonic() + WAIT
    size = path.stat().st_size
    grew = time.monotonic()
    while time.monotonic() - grew < quiet:
        assert time.monotonic() < deadline, f"{path.name} kept growing"
        time.sleep(0.1)
        now = path.stat().st_size
        if now != size:
            size, grew = now, time.monotonic()
    return grew - time.monotonic()


def test_a_task_created_through_one_replica_is_polled_through_the_other_to_its_result(
    replicas: tuple[str, str], markers: Path
) -> None:
    a, b = replicas
    task_id = _start(a, "wait_for_gate", {"marker": "polled", "gate": "polled-gate"}, ALICE)
    _wait_for(markers / "polled")
    working = _get(b, task_id, ALICE)["result"]
    assert working["status"] == "working" and working["taskId"] == task_id, working
    (markers / "polled-gate").write_text("open")
    done = _settled(b, task_id, headers=ALICE)
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "gate said open"
    assert _settled(a, task_id, headers=ALICE)["result"] == done["result"]
    # tasks/cancel of a terminal task through either: acknowledged, and it stays completed
    assert _rpc(b, "tasks/cancel", {"taskId": task_id}, headers=ALICE)["result"]["resultType"] == (
        "complete"
    )
    assert _get(b, task_id, ALICE)["result"]["status"] == "completed"
    assert _get(a, task_id, ALICE)["result"]["status"] == "completed"
    assert (markers / "polled").read_text() == "started\n"


def test_a_task_polled_through_the_other_replica_right_after_its_creation_is_known(
    replicas: tuple[str, str], markers: Path
) -> None:
    a, b = replicas
    for n in range(5):  # a client behind a load balancer polls at once, elsewhere
        gate = {"marker": f"at-once-{n}", "gate": f"at-once-{n}-gate"}
        task_id = _start(a, "wait_for_gate", gate, ALICE)
        answer = _get(b, task_id, ALICE)
        assert answer.get("result", {}).get("status") == "working", answer
        (markers / gate["gate"]).write_text("open")
        assert _settled(b, task_id, headers=ALICE)["status"] == "completed"


def test_a_task_is_visible_through_any_replica_to_its_identity_only(
    replicas: tuple[str, str], markers: Path
) -> None:
    a, b = replicas
    task_id = _start(a, "wait_for_gate", {"marker": "mine", "gate": "mine-gate"}, ALICE)
    _wait_for(markers / "mine")
    for url in (a, b):
        for other in (BOB, {}):
            for method in ("tasks/get", "tasks/cancel"):
                refused = _rpc(url, method, {"taskId": task_id}, headers=other)
                assert refused["error"]["code"] == -32602, (url, other, method, refused)
    assert _get(b, task_id, ALICE)["result"]["status"] == "working"  # bob's cancel did nothing
    (markers / "mine-gate").write_text("open")
    assert _settled(b, task_id, headers=ALICE)["status"] == "completed"


def test_a_cancel_through_the_other_replica_kills_the_task_and_reads_cancelled_on_both(
    replicas: tuple[str, str], markers: Path
) -> None:
    a, b = replicas
    task_id = _start(a, "tick", {"marker": "ticks"}, ALICE)
    ticks = markers / "ticks"
    _wait_for(ticks)
    ack = _rpc(b, "tasks/cancel", {"taskId": task_id}, headers=ALICE)["result"]
    asked = time.monotonic()
    assert ack["resultType"] == "complete" and "status" not in ack, ack
    assert _get(b, task_id, ALICE)["result"]["status"] == "cancelled"
    seen = _settled(a, task_id, headers=ALICE)  # A reads the request and cancels it
    print(f"\nreplica A saw the cancel after {time.monotonic() - asked:.2f} s")
    assert seen["status"] == "cancelled", seen
    last_tick = _still(ticks)  # the child process is killed: no tick after it
    size = ticks.stat().st_size
    print(f"the last tick came {time.monotonic() + last_tick - asked:.2f} s after the cancel")
    time.sleep(1.0)
    assert ticks.stat().st_size == size, "the task's child process kept running"
    for url in (a, b):
        assert _get(url, task_id, ALICE)["result"]["status"] == "cancelled"
        again = _rpc(url, "tasks/cancel", {"taskId": task_id}, headers=ALICE)["result"]
        assert again["resultType"] == "complete" and "status" not in again


def test_our_client_creates_a_task_through_one_replica_and_reads_it_through_the_other(
    replicas: tuple[str, str], markers: Path
) -> None:
    from nous_tools import Ok
    from nous_tools.contrib.mcp import MCPServer

    a, b = replicas
    with MCPServer.http(a, headers=ALICE) as on_a, MCPServer.http(b, headers=ALICE) as on_b:
        arguments = {"marker": "client", "gate": "client-gate"}
        created = on_a.call_tool("wait_for_gate", arguments, as_task=True)
        _wait_for(markers / "client")
        handle = on_b.task(created.id, "wait_for_gate")
        assert handle.status().status == "working"
        (markers / "client-gate").write_text("open")
        assert handle.result(timeout=WAIT) == Ok("gate said open")
        assert created.status().status == "completed"


def test_a_cancel_through_the_replica_running_the_task_reads_cancelled_through_the_other(
    replicas: tuple[str, str], markers: Path
) -> None:
    a, b = replicas
    task_id = _start(a, "wait_for_gate", {"marker": "local", "gate": "local-gate"}, ALICE)
    _wait_for(markers / "local")
    assert _rpc(a, "tasks/cancel", {"taskId": task_id}, headers=ALICE)["result"]["resultType"] == (
        "complete"
    )
    assert _get(a, task_id, ALICE)["result"]["status"] == "cancelled"
    assert _get(b, task_id, ALICE)["result"]["status"] == "cancelled"
    time.sleep(1.0)  # the tool saw ctx.cancelled and ended: its record completed
    assert _get(b, task_id, ALICE)["result"]["status"] == "cancelled"
    assert (markers / "local").read_text() == "started\n"


def test_a_sigkill_of_the_replica_running_a_task_leaves_it_failed_never_run_again(
    dsn: str, tmp_path: Path
) -> None:
    with _replica(dsn, tmp_path) as (b_process, b):
        with _replica(dsn, tmp_path) as (a_process, a):
            task_id = _start(a, "wait_for_gate", {"marker": "runs", "gate": "gate"}, ALICE)
            _wait_for(tmp_path / "runs")
            assert _get(b, task_id, ALICE)["result"]["status"] == "working"
            a_process.send_signal(signal.SIGKILL)
            a_process.wait(WAIT)
            killed = time.monotonic()
        died = _settled(b, task_id, headers=ALICE)
        print(f"\nreplica B said failed {time.monotonic() - killed:.2f} s after the SIGKILL")
        assert died["status"] == "failed", died
        assert "outcome unknown" in died["error"]["message"], died
        assert "result" not in died
        (tmp_path / "gate").write_text("open")  # were it run again, it would finish now
        cancel = _rpc(b, "tasks/cancel", {"taskId": task_id}, headers=ALICE)["result"]
        assert cancel["resultType"] == "complete"
        time.sleep(1.0)
        assert _get(b, task_id, ALICE)["result"]["status"] == "failed"
        assert b_process.poll() is None
    assert (tmp_path / "runs").read_text() == "started\n"  # it ran once, on A only


def test_a_question_asked_through_one_replica_is_answered_through_the_other(
    replicas: tuple[str, str], markers: Path
) -> None:
    a, b = replicas
    call = {"name": "ask_colour", "arguments": {"marker": "asked"}}
    created = _rpc(a, "tools/call", call, meta=ELICITING, headers=ALICE)["result"]
    assert created["resultType"] == "task", created
    task_id = created["taskId"]
    deadline = time.monotonic() + WAIT
    while (there := _get(b, task_id, ALICE)["result"])["status"] != "input_required":
        assert there["status"] == "working" and time.monotonic() < deadline, there
        time.sleep(0.05)
    here = _get(a, task_id, ALICE)["result"]
    assert here["status"] == "input_required"
    assert there["inputRequests"] == here["inputRequests"]
    [(key, question)] = there["inputRequests"].items()
    assert key == "colour" and question["method"] == "elicitation/create"
    assert question["params"]["message"] == "Your favourite colour?"
    answer = {"colour": {"action": "accept", "content": {"colour": "teal"}}}
    update = {"taskId": task_id, "inputResponses": answer}
    refused = _rpc(b, "tasks/update", update, meta=ELICITING, headers=BOB)
    assert refused["error"]["code"] == -32602  # not bob's task
    acked = _rpc(b, "tasks/update", update, meta=ELICITING, headers=ALICE)["result"]
    answered = time.monotonic()
    assert acked["resultType"] == "complete", acked
    done = _settled(b, task_id, meta=ELICITING, headers=ALICE)
    print(f"\nthe task answered through B completed {time.monotonic() - answered:.2f} s later")
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "you like teal (accept)"
    assert _settled(a, task_id, meta=ELICITING, headers=ALICE)["result"] == done["result"]
    assert (markers / "asked").read_text() == "started\n"  # asked once, answered once
