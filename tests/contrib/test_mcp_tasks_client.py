"""MCP Tasks, the client side: :class:`MCPServer` runs a task tool and hands out
:class:`TaskHandle` values.

The slow tests run the official ``@modelcontextprotocol/server-everything`` (npm,
pinned in ``tests/everything/package.json`` and its lock file, installed with
``npm ci`` into a cache directory once per lock file, as the conformance suite is)
over stdio: its ``simulate-research-query`` tool requires task execution (protocol
2025-11-25 tasks: ``tasks/get``, ``tasks/result``, ``tasks/cancel``), reports a
``pollInterval`` of 1 s and, asked an ambiguous query, elicits a clarification
while the task is ``input_required``.

The fast tests cover the pure parts (reading either wire shape of a task, the poll
interval, which tools run as tasks) with no server at all. What server-everything
cannot provoke, the flat answers of the 2026-07-28 ``io.modelcontextprotocol/tasks``
extension (questions inline in ``tasks/get``, answered with ``tasks/update``; a
failed task's inline error), is played by a tiny stdio fake,
``tests/support/mcp_tasks_v2_fake.py``.
"""

from __future__ import annotations

import collections.abc as c
import json
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import npm_cache
import pytest

from nous_tools.approval import Edit
from nous_tools.contrib.mcp import MCPServer, TaskHandle, TaskStatus, _task_client
from nous_tools.results import Ok
from nous_tools.run_context import RunContext

HERE = Path(__file__).resolve().parents[1] / "everything"
FAKE = Path(__file__).resolve().parents[1] / "support" / "mcp_tasks_v2_fake.py"
TOOL = "simulate-research-query"


# -- the pure parts ----------------------------------------------------------------------


def test_a_task_of_protocol_2025_11_25_is_read_with_its_poll_interval():
    raw = {
        "task": {
            "taskId": "t1",
            "status": "working",
            "ttl": 300000,
            "pollInterval": 1000,
            "statusMessage": "Gathering sources...",
        }
    }
    status = _task_client.parse_task(raw)
    assert status == TaskStatus("t1", "working", "Gathering sources...", 1.0)
    assert not status.done


def test_a_task_of_the_2026_extension_is_read_flat_with_its_inline_result():
    raw = {
        "resultType": "complete",
        "taskId": "t2",
        "status": "completed",
        "pollIntervalMs": 250,
        "result": {"content": [{"type": "text", "text": "done"}]},
    }
    status = _task_client.parse_task(raw, expected_id="t2")
    assert status.done and status.poll_interval == 0.25
    assert status.result is not None
    assert status.result.content == [types.TextContent(type="text", text="done")]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "must be an object"),
        ({"task": {"status": "working"}}, "no taskId"),
        ({"taskId": "t", "status": "sleeping"}, "unknown status 'sleeping'"),
        ({"taskId": "other", "status": "working"}, "the server answered 'other'"),
    ],
)
def test_a_task_answer_that_is_not_one_is_a_clear_error(raw, message):
    with pytest.raises(ValueError, match=message):
        _task_client.parse_task(raw, expected_id="t")


def test_the_poll_interval_is_the_servers_at_least_the_floor_and_none_past_the_deadline():
    status = TaskStatus("t", "working", poll_interval=1.0)
    assert _task_client.poll_interval(status, None) == 1.0
    assert _task_client.poll_interval(status, 0.3) is None  # the call's deadline comes first
    assert _task_client.poll_interval(status, -1.0) is None
    assert _task_client.poll_interval(TaskStatus("t", "working"), None) == _task_client.DEFAULT_POLL
    assert _task_client.poll_interval(TaskStatus("t", "working", poll_interval=0.0001), None) == (
        _task_client.MIN_POLL
    )
    assert _task_client.poll_interval(TaskStatus("t", "working", poll_interval=3600.0), None) == (
        3600.0
    )


def test_a_tools_definition_says_whether_it_runs_as_a_task():
    def tool(support: str | None) -> types.Tool:
        execution = None if support is None else types.ToolExecution(task_support=support)
        return types.Tool(name="x", input_schema={"type": "object"}, execution=execution)

    assert _task_client.task_support(tool("required")) == "required"
    assert _task_client.task_support(tool("optional")) == "optional"
    assert _task_client.task_support(tool("forbidden")) == "forbidden"
    assert _task_client.task_support(tool(None)) == "forbidden"


def test_a_handle_is_rebuilt_from_its_id_and_refuses_a_bad_one():
    server = MCPServer.stdio("true", name="never-started")
    handle = server.task("abc", TOOL)
    assert handle == TaskHandle(server=server, id="abc", tool_name=TOOL)
    with pytest.raises(ValueError, match="non-empty string"):
        server.task("")
    with pytest.raises(ValueError, match="ttl must be a positive number"):
        server.call_tool(TOOL, {}, as_task=True, ttl=0)
    with pytest.raises(ValueError, match="timeout must be"):
        handle.result(timeout=-1)


def test_a_failed_task_of_the_2026_extension_carries_its_error():
    raw = {"taskId": "t", "status": "failed", "error": {"code": -32603, "message": "boom"}}
    status = _task_client.parse_task(raw)
    assert status.error == types.ErrorData(code=-32603, message="boom")
    with pytest.raises(ValueError, match="inputRequests must be an object"):
        _task_client.parse_task({"taskId": "t", "status": "input_required", "inputRequests": []})


# -- the 2026-07-28 extension's wire, played by a fake (server-everything cannot) -------


@pytest.fixture
def fake(tmp_path: Path) -> c.Iterator[tuple[MCPServer, Path]]:
    log = tmp_path / "requests.jsonl"
    server = MCPServer.stdio(sys.executable, [str(FAKE)], env={"FAKE_LOG": str(log)}, mode="legacy")
    with server:
        yield server, log


def _methods(log: Path) -> list[str]:
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [line["method"] for line in lines if "method" in line and "id" in line]


def test_extension_questions_are_answered_by_the_handler_through_tasks_update(fake):
    server, log = fake
    asked = []

    def handler(request: Any) -> Edit:
        asked.append(request.message)
        return Edit({"colour": "red"})

    result = server.call("ask", {}, RunContext.new(approval_handler=handler), timeout=10)
    assert result == Ok("colour: red")
    assert asked == ["Which colour?"]
    assert _methods(log)[-4:] == ["tools/call", "tasks/get", "tasks/update", "tasks/get"]


def test_extension_failed_task_is_the_tools_error_not_a_lost_connection(fake):
    server, _ = fake
    result = server.call("fail", {}, timeout=10)
    assert not isinstance(result, Ok)
    assert "tool 'fail' failed: no (error -32000)" in str(result.reason)


# -- against the official server-everything -----------------------------------------------


@pytest.fixture(scope="module")
def everything_js() -> Path:
    """The installed server's entry point (installed now when it is not yet)."""
    try:
        target = npm_cache.installed("mcp-everything", HERE)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    return target / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.fixture
def everything(everything_js: Path) -> c.Iterator[MCPServer]:
    with MCPServer.stdio("node", [str(everything_js), "stdio"], name="everything") as server:
        yield server


def _statuses(server: MCPServer) -> dict[str, str]:
    """Every task the server knows, by id (``tasks/list``)."""

    async def listing(client: Any) -> Any:
        return await _task_client._request(client, "tasks/list", {}, 10.0)

    raw = server._run(listing, timeout=10.0)
    return {task["taskId"]: task["status"] for task in raw["tasks"]}


@pytest.mark.slow
def test_everything_research_query_returns_its_result_through_call(everything):
    started = time.monotonic()
    result = everything.call(TOOL, {"topic": "tides"}, timeout=60)
    assert isinstance(result, Ok), result
    assert result.value.startswith("# Research Report: tides")
    assert time.monotonic() - started >= 3.5  # four stages of 1 s: it did wait
    assert set(_statuses(everything).values()) == {"completed"}  # one task, run once


@pytest.mark.slow
def test_everything_research_query_as_a_tool_of_tools(everything):
    (tool,) = [tool for tool in everything.tools() if tool.name == TOOL]
    result = tool.function(RunContext.new(), topic="tides")
    assert isinstance(result, Ok) and "Research Report: tides" in result.value


@pytest.mark.slow
def test_everything_asks_through_the_approval_handler_while_input_required(everything):
    asked = []

    def handler(request: Any) -> Edit:
        asked.append(request)
        return Edit({"interpretation": "historical"})

    ctx = RunContext.new(approval_handler=handler)
    result = everything.call(TOOL, {"topic": "tides", "ambiguous": True}, ctx, timeout=60)
    assert isinstance(result, Ok), result
    assert result.value.startswith("# Research Report: tides (historical)")
    assert len(asked) == 1 and asked[0].name == TOOL
    assert "multiple interpretations" in asked[0].message


@pytest.mark.slow
def test_everything_call_at_its_deadline_cancels_the_task(everything):
    with pytest.raises(TimeoutError, match="did not answer 'simulate-research-query' in time"):
        everything.call(TOOL, {"topic": "tides"}, timeout=1.5)
    assert list(_statuses(everything).values()) == ["cancelled"]


@pytest.mark.slow
def test_everything_as_task_handle_status_then_result_from_its_id(everything):
    handle = everything.call_tool(TOOL, {"topic": "tides"}, as_task=True)
    assert isinstance(handle, TaskHandle) and handle.id
    first = handle.status()
    assert first.status == "working" and first.poll_interval == 1.0
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.5)  # not done yet: the task goes on
    again = everything.task(handle.id, TOOL)  # e.g. in another request
    result = again.result(timeout=60)
    assert isinstance(result, Ok) and result.value.startswith("# Research Report: tides")
    assert handle.status().status == "completed"


@pytest.mark.slow
def test_everything_as_task_handle_cancel(everything):
    handle = everything.call_tool(TOOL, {"topic": "tides"}, as_task=True)
    handle.cancel()
    status = handle.status()
    assert status.status == "cancelled" and status.done
