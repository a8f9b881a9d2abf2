"""MCP Tasks (the ``io.modelcontextprotocol/tasks`` extension) served by real
``nous-tools serve`` processes over Streamable HTTP at 2026-07-28, on the wire: a task's
lifecycle, the required-task error, who sees a task, a restart on the same journal
(slow), and a cancel that stops a process-isolated task (slow)."""

from __future__ import annotations

import signal
import subprocess
import time
import typing as t
from pathlib import Path

import httpx2
import pytest
from servers import served_http

SUPPORT = Path(__file__).resolve().parents[1] / "support"
WAIT = 30.0
VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
DECLARING = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
}
PLAIN = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _served(
    env: dict[str, str] | None = None,
) -> t.ContextManager[tuple[subprocess.Popen[str], str]]:
    return served_http("mcp_task_tools:registry", env=env, wait=WAIT)


def _rpc(
    url: str,
    method: str,
    params: dict[str, t.Any],
    meta: dict[str, t.Any] = DECLARING,
    headers: dict[str, str] | None = None,
) -> dict[str, t.Any]:
    """The JSON-RPC response (its last message, when the server streams)."""
    sent = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    if method == "tools/call":
        sent["Mcp-Name"] = params["name"]
    elif "taskId" in params:
        sent["Mcp-Name"] = params["taskId"]
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    response = httpx2.post(url, json=body, headers={**sent, **(headers or {})}, timeout=WAIT)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        import json

        lines = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return t.cast("dict[str, t.Any]", json.loads(lines[-1]))
    return t.cast("dict[str, t.Any]", response.json())


def _call(url: str, name: str, arguments: dict[str, t.Any], **kw: t.Any) -> dict[str, t.Any]:
    return _rpc(url, "tools/call", {"name": name, "arguments": arguments}, **kw)


def _settled(url: str, task_id: str, **kw: t.Any) -> dict[str, t.Any]:
    deadline = time.monotonic() + WAIT
    while True:
        answer = _rpc(url, "tasks/get", {"taskId": task_id}, **kw)["result"]
        if answer["status"] in ("completed", "failed", "cancelled"):
            return t.cast("dict[str, t.Any]", answer)
        assert time.monotonic() < deadline, answer
        time.sleep(0.05)


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + WAIT
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never started"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def url() -> t.Iterator[str]:
    with _served() as (_, url):
        yield url


def test_a_task_is_created_polled_and_completes_with_its_result(url, tmp_path) -> None:
    listed = {tool["name"]: tool for tool in _rpc(url, "tools/list", {})["result"]["tools"]}
    assert listed["count_slowly"]["_meta"][TASKS] == {"taskSupport": "optional"}
    assert listed["must_be_a_task"]["_meta"][TASKS] == {"taskSupport": "required"}
    assert TASKS not in listed["quick"].get("_meta", {})
    created = _call(url, "count_slowly", {"marker": "m", "seconds": 0.3})["result"]
    assert created["resultType"] == "task" and created["status"] == "working"
    assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= set(created)
    assert "result" not in created
    done = _settled(url, created["taskId"])
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "counted for 0.3 s"
    # a sync tool stays sync, and a client without the extension gets a sync result
    assert _call(url, "quick", {})["result"]["content"][0]["text"] == "quick"
    plain = _call(url, "count_slowly", {"marker": "m", "seconds": 0}, meta=PLAIN)["result"]
    assert plain["resultType"] == "complete" and "taskId" not in plain


def test_a_required_task_tool_refuses_a_client_without_the_extension(url) -> None:
    error = _call(url, "must_be_a_task", {}, meta=PLAIN)["error"]
    assert error["code"] == -32021
    assert TASKS in error["data"]["requiredCapabilities"]["extensions"]
    created = _call(url, "must_be_a_task", {})["result"]
    assert _settled(url, created["taskId"])["result"]["content"][0]["text"] == "ran as a task"
    for method in ("tasks/get", "tasks/cancel"):
        assert _rpc(url, method, {"taskId": created["taskId"]}, meta=PLAIN)["error"]["code"] == (
            -32021
        )


def test_unknown_and_foreign_tasks_are_invalid_params(url) -> None:
    assert _rpc(url, "tasks/get", {"taskId": "no-such-task"})["error"]["code"] == -32602
    assert _rpc(url, "tasks/cancel", {"taskId": "no-such-task"})["error"]["code"] == -32602
    mine = {"Authorization": "Bearer someone-0123456789"}
    theirs = {"Authorization": "Bearer someone-else-0123456789"}
    created = _call(url, "count_slowly", {"marker": "v", "seconds": 0}, headers=mine)["result"]
    task_id = created["taskId"]
    assert _settled(url, task_id, headers=mine)["status"] == "completed"
    for method in ("tasks/get", "tasks/cancel"):
        answer = _rpc(url, method, {"taskId": task_id}, headers=theirs)
        assert answer["error"]["code"] == -32602, answer
    assert _rpc(url, "tasks/get", {"taskId": task_id})["error"]["code"] == -32602  # anonymous
    # the removed v1 methods are not served
    assert _rpc(url, "tasks/list", {})["error"]["code"] == -32601


def test_cancel_settles_a_running_task_as_cancelled_and_is_idempotent(url) -> None:
    task_id = _call(url, "count_slowly", {"marker": "c", "seconds": 60})["result"]["taskId"]
    for _ in range(2):  # the second is on a terminal task: the same empty ack
        ack = _rpc(url, "tasks/cancel", {"taskId": task_id})["result"]
        assert ack["resultType"] == "complete"
        assert not {"taskId", "status", "result", "error"} & set(ack)
        assert _settled(url, task_id)["status"] == "cancelled"


def test_a_tasks_request_whose_mcp_name_is_another_task_is_refused(url) -> None:
    task_id = _call(url, "count_slowly", {"marker": "h", "seconds": 0})["result"]["taskId"]
    wrong = _rpc(url, "tasks/get", {"taskId": task_id}, headers={"Mcp-Name": "another"})
    assert wrong["error"]["code"] == -32020
    assert _settled(url, task_id)["status"] == "completed"


def test_a_task_asks_through_input_required_and_tasks_update(url) -> None:
    eliciting = {
        **DECLARING,
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": {TASKS: {}},
        },
    }
    task_id = _call(url, "ask_name", {}, meta=eliciting)["result"]["taskId"]
    deadline = time.monotonic() + WAIT
    while (waiting := _rpc(url, "tasks/get", {"taskId": task_id})["result"])["status"] != (
        "input_required"
    ):
        assert time.monotonic() < deadline, waiting
        time.sleep(0.05)
    [(key, request)] = waiting["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "What is your name?"
    ignored = _rpc(url, "tasks/update", {"taskId": task_id, "inputResponses": {"other": {}}})
    assert ignored["result"]["resultType"] == "complete"
    assert _rpc(url, "tasks/get", {"taskId": task_id})["result"]["status"] == "input_required"
    answer = {key: {"action": "accept", "content": {"name": "Ada"}}}
    _rpc(url, "tasks/update", {"taskId": task_id, "inputResponses": answer})
    done = _settled(url, task_id)
    assert done["result"]["content"][0]["text"] == "Hello, Ada!"
    # a client that cannot elicit: the tool's question fails, the task completes with the error
    task_id = _call(url, "ask_name", {})["result"]["taskId"]
    assert _settled(url, task_id)["result"]["isError"] is True


def _waiting(url: str, task_id: str, **kw: t.Any) -> dict[str, t.Any]:
    deadline = time.monotonic() + WAIT
    while True:
        answer = _rpc(url, "tasks/get", {"taskId": task_id}, **kw)["result"]
        if answer["status"] == "input_required":
            return t.cast("dict[str, t.Any]", answer)
        assert time.monotonic() < deadline, answer
        time.sleep(0.05)


def test_an_ask_tool_called_as_a_task_waits_in_it_for_its_approval(url) -> None:
    """The approval is the task's input request, answered by tasks/update; a declined
    one completes the task as an error and the tool does not run."""
    eliciting = {
        **DECLARING,
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": {TASKS: {}},
        },
    }
    for action, text in (("accept", "wiped"), ("decline", "rejected by the client")):
        created = _call(url, "wipe", {"marker": action}, meta=eliciting)["result"]
        assert created["resultType"] == "task"
        waiting = _waiting(url, created["taskId"], meta=eliciting)
        [(key, request)] = waiting["inputRequests"].items()
        assert key == "nous_tools.approval" and request["method"] == "elicitation/create"
        answer = {"action": action, "content": {}} if action == "accept" else {"action": action}
        update = {"taskId": created["taskId"], "inputResponses": {key: answer}}
        _rpc(url, "tasks/update", update, meta=eliciting)
        result = _settled(url, created["taskId"], meta=eliciting)["result"]
        assert text in result["content"][0]["text"]
        assert result.get("isError", False) is (action == "decline")
    plain = {**DECLARING}  # tasks, but no elicitation: nobody to approve it
    refused = _rpc(url, "tools/call", {"name": "wipe", "arguments": {"marker": "x"}}, meta=plain)
    assert refused["error"]["code"] == -32021


@pytest.mark.slow
def test_a_task_survives_a_restart_of_the_server_on_its_journal(tmp_path) -> None:
    env = {
        "NOUS_TEST_TASK_JOURNAL": str(tmp_path / "journal.sqlite"),
        "NOUS_TEST_TASK_MARKERS": str(tmp_path),
    }
    with _served(env) as (process, url):
        done = _call(url, "count_slowly", {"marker": "done", "seconds": 0})["result"]["taskId"]
        assert _settled(url, done)["status"] == "completed"
        running = _call(url, "count_slowly", {"marker": "running", "seconds": 60})["result"]
        _wait_for(tmp_path / "running")
        process.send_signal(signal.SIGKILL)
        process.wait(WAIT)
    with _served(env) as (_, url):
        died = _rpc(url, "tasks/get", {"taskId": running["taskId"]})["result"]
        assert died["status"] == "failed", died
        assert "outcome unknown" in died["error"]["message"]
        assert "result" not in died
        kept = _rpc(url, "tasks/get", {"taskId": done})["result"]
        assert kept["status"] == "completed"
        assert kept["result"]["content"][0]["text"] == "counted for 0 s"
        time.sleep(0.5)
        assert _rpc(url, "tasks/get", {"taskId": running["taskId"]})["result"]["status"] == "failed"
    # each ran once: the restarted server never ran the task that died again
    assert (tmp_path / "running").read_text() == "started\n"
    assert (tmp_path / "done").read_text() == "started\n"


@pytest.mark.slow
def test_cancel_stops_a_process_isolated_task(tmp_path) -> None:
    with _served({"NOUS_TEST_TASK_MARKERS": str(tmp_path)}) as (_, url):
        task_id = _call(url, "ticker", {"marker": "ticks"})["result"]["taskId"]
        marker = tmp_path / "ticks"
        _wait_for(marker)
        time.sleep(0.3)
        ack = _rpc(url, "tasks/cancel", {"taskId": task_id})["result"]
        assert ack["resultType"] == "complete" and "status" not in ack
        assert _settled(url, task_id)["status"] == "cancelled"
        time.sleep(1.0)  # the child may write a last tick as it is killed
        ticks = marker.stat().st_size
        time.sleep(1.0)
        assert marker.stat().st_size == ticks, "the task's child process kept running"
        again = _rpc(url, "tasks/cancel", {"taskId": task_id})["result"]
        assert again == {"resultType": "complete", **{k: again[k] for k in again if k == "_meta"}}


def test_our_client_runs_a_required_task_tool_of_our_server_as_a_task(url) -> None:
    """The two sides of the 2026-07-28 extension against each other: ``MCPServer``
    reads ``taskSupport`` from the tool's ``_meta``, creates the task, polls it and
    returns its result; a sync tool stays a plain call."""
    from nous_tools import Ok
    from nous_tools.contrib.mcp import MCPServer, TaskHandle

    with MCPServer.http(url) as server:
        assert server.call("must_be_a_task", {}, timeout=30) == Ok("ran as a task")
        assert server.call("quick", {}, timeout=30) == Ok("quick")
        handle = server.call_tool("count_slowly", {"marker": "ours", "seconds": 0.2}, as_task=True)
        assert isinstance(handle, TaskHandle) and handle.id
        assert handle.result(timeout=30) == Ok("counted for 0.2 s")
        assert handle.status().status == "completed"
