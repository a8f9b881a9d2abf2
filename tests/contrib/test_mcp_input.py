"""A served tool's questions (``Question``, ``ctx.ask_all``, ``key=``, ``ctx.roots``) on
the wire: named and asked together in one 2026-07-28 round, one after another to a
2025-11-25 client, and in a task as its ``inputRequests``; a served registry on
127.0.0.1, asked by raw HTTP and by the SDK's client."""

from __future__ import annotations

import json
import time
import typing as t

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from nous_tools import Question, Registry, RunContext, tool
from nous_tools.contrib.mcp import serve_http_in_thread

WAIT = 30.0
VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
EVERYTHING = {"elicitation": {}, "sampling": {}, "roots": {}}
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@tool(timeout=10, retries=0)
def greet_named(ctx: RunContext) -> str:
    answer = ctx.elicit("What is your name?", FORM, key="user_name")
    return f"Hello, {(answer.content or {}).get('name')}!"


def _three(ctx: RunContext) -> str:
    answers = ctx.ask_all(
        {
            "user_name": Question.elicit("What is your name?", FORM),
            "greeting": Question.sample("Generate a greeting", max_tokens=50),
            "client_roots": Question.roots(),
        }
    )
    name = (answers["user_name"].content or {}).get("name")
    roots = ", ".join(f"{root.name}={root.uri}" for root in answers["client_roots"])
    return f"{answers['greeting']} {name}; roots: {roots}"


@tool(timeout=10, retries=0)
def gather(ctx: RunContext) -> str:
    return _three(ctx)


@tool(timeout=10, retries=0)
def where(ctx: RunContext) -> str:
    return ", ".join(root.uri for root in ctx.roots())


@tool(timeout=120, retries=0, task="optional")
def gather_in_task(ctx: RunContext) -> str:
    return _three(ctx)


NOTE = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}


@tool(timeout=120, retries=0, task="optional", ask_before_task=True)
def name_then_task(ctx: RunContext) -> str:
    """Its first question comes in rounds; the second waits in the task."""
    name = ctx.elicit("What is your name?", FORM, key="user_name")
    note = ctx.elicit("Anything to add?", NOTE, key="note")
    return f"{(name.content or {}).get('name')}: {(note.content or {}).get('note')}"


@tool(timeout=120, retries=0, approval="ask", ask_before_task=True)
def approved_first(ctx: RunContext) -> str:
    """Approved, then its first question, in rounds; then a task."""
    return "done: " + str(ctx.elicit("Why?", NOTE, key="why").content)


@pytest.fixture(scope="module")
def url() -> t.Iterator[str]:
    tools = [greet_named, gather, where, gather_in_task, name_then_task, approved_first]
    with serve_http_in_thread(Registry(tools)) as running:
        yield running.url


def _rpc(
    url: str, method: str, params: dict[str, t.Any], capabilities: dict[str, t.Any]
) -> tuple[int, dict[str, t.Any]]:
    """The HTTP status and the response (the last message of an SSE stream)."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    elif "taskId" in params:
        headers["Mcp-Name"] = params["taskId"]
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    response = httpx2.post(url, json=body, headers=headers, timeout=WAIT)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        lines = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return response.status_code, json.loads([x for x in lines if x.strip()][-1])
    return response.status_code, response.json()


def _call(url: str, name: str, **extra: t.Any) -> dict[str, t.Any]:
    status, reply = _rpc(url, "tools/call", {"name": name, "arguments": {}, **extra}, EVERYTHING)
    assert status == 200, reply
    result: dict[str, t.Any] = reply["result"]
    return result


ALICE = {"action": "accept", "content": {"name": "Alice"}}
HELLO = {
    "role": "assistant",
    "content": {"type": "text", "text": "Hello there!"},
    "model": "test-model",
    "stopReason": "endTurn",
}
ROOTS = {"roots": [{"uri": "file:///work", "name": "work"}]}


def test_a_named_question_is_asked_under_its_key_and_may_be_answered_by_name(url):
    asked = _call(url, "greet_named")
    assert asked["resultType"] == "input_required"
    assert list(asked["inputRequests"]) == ["user_name"]
    assert asked["inputRequests"]["user_name"]["method"] == "elicitation/create"
    # a first call that carries the answer under the question's name completes; keys
    # the tool did not ask for are ignored
    extra = {"unknown": {"action": "accept", "content": {"x": 1}}}
    done = _call(url, "greet_named", inputResponses={"user_name": ALICE, **extra})
    assert done["content"][0]["text"] == "Hello, Alice!"


def test_questions_asked_together_go_in_one_round_and_a_partial_answer_asks_the_rest(url):
    asked = _call(url, "gather")
    requests = asked["inputRequests"]
    assert {key: request["method"] for key, request in requests.items()} == {
        "user_name": "elicitation/create",
        "greeting": "sampling/createMessage",
        "client_roots": "roots/list",
    }
    partial = _call(
        url,
        "gather",
        inputResponses={"user_name": ALICE, "greeting": HELLO},
        requestState=asked["requestState"],
    )
    assert list(partial["inputRequests"]) == ["client_roots"]  # the answers so far kept
    done = _call(
        url,
        "gather",
        inputResponses={"client_roots": ROOTS},
        requestState=partial["requestState"],
    )
    assert done["content"][0]["text"] == "Hello there! Alice; roots: work=file:///work"


def test_an_answer_of_the_wrong_kind_is_asked_for_again(url):
    asked = _call(url, "gather")
    again = _call(
        url,
        "gather",
        inputResponses={"user_name": ALICE, "greeting": HELLO, "client_roots": ALICE},
        requestState=asked["requestState"],
    )
    assert list(again["inputRequests"]) == ["client_roots"]


def test_roots_from_a_client_without_the_roots_capability_is_error_32021(url):
    status, reply = _rpc(url, "tools/call", {"name": "where", "arguments": {}}, {})
    assert status == 400
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"]["requiredCapabilities"] == {"roots": {}}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_client_answers_every_question_at_either_revision(url, mode):
    """2026-07-28 (auto): one round with three input requests; 2025-11-25 (legacy):
    three server-to-client requests, one after another."""
    seen: list[str] = []

    async def elicit(context: t.Any, params: t.Any) -> types.ElicitResult:
        seen.append("elicitation/create")
        return types.ElicitResult(action="accept", content={"name": "Bo"})

    async def sample(context: t.Any, params: t.Any) -> types.CreateMessageResult:
        seen.append("sampling/createMessage")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="Hi!"), model="test-model"
        )

    async def roots(context: t.Any) -> types.ListRootsResult:
        seen.append("roots/list")
        return types.ListRootsResult(roots=[types.Root(uri="file:///home/bo", name="home")])

    async def main() -> str:
        async with Client(
            url,
            mode=mode,
            elicitation_callback=elicit,
            sampling_callback=sample,
            list_roots_callback=roots,
            read_timeout_seconds=WAIT,
        ) as client:
            result = await client.call_tool("gather", {})
            assert not result.is_error
            block = result.content[0]
            assert isinstance(block, types.TextContent)
            return block.text

    assert anyio.run(main) == "Hi! Bo; roots: home=file:///home/bo"
    assert sorted(seen) == ["elicitation/create", "roots/list", "sampling/createMessage"]
    if mode == "legacy":  # asked in the order the tool named them
        assert seen == ["elicitation/create", "sampling/createMessage", "roots/list"]


def test_questions_asked_together_in_a_task_wait_in_its_input_requests(url):
    capabilities = {**EVERYTHING, "extensions": {TASKS: {}}}
    status, created = _rpc(
        url, "tools/call", {"name": "gather_in_task", "arguments": {}}, capabilities
    )
    assert status == 200 and created["result"]["resultType"] == "task"
    task_id = created["result"]["taskId"]
    deadline = time.monotonic() + WAIT
    while True:
        _, got = _rpc(url, "tasks/get", {"taskId": task_id}, capabilities)
        if got["result"]["status"] == "input_required":
            break
        assert time.monotonic() < deadline, got
        time.sleep(0.05)
    assert sorted(got["result"]["inputRequests"]) == ["client_roots", "greeting", "user_name"]
    answers = {"user_name": ALICE, "greeting": HELLO, "client_roots": ROOTS}
    _, updated = _rpc(
        url, "tasks/update", {"taskId": task_id, "inputResponses": answers}, capabilities
    )
    assert updated["result"]["resultType"] == "complete"
    while got["result"]["status"] != "completed":
        assert time.monotonic() < deadline, got
        time.sleep(0.05)
        _, got = _rpc(url, "tasks/get", {"taskId": task_id}, capabilities)
    text = got["result"]["result"]["content"][0]["text"]
    assert text == "Hello there! Alice; roots: work=file:///work"


def _until(url: str, task_id: str, status: str, capabilities: dict[str, t.Any]) -> dict[str, t.Any]:
    deadline = time.monotonic() + WAIT
    while True:
        _, got = _rpc(url, "tasks/get", {"taskId": task_id}, capabilities)
        if got["result"]["status"] == status:
            result: dict[str, t.Any] = got["result"]
            return result
        assert time.monotonic() < deadline, got
        time.sleep(0.05)


def test_an_ask_before_task_tool_asks_in_rounds_then_the_answering_round_creates_the_task(url):
    capabilities = {**EVERYTHING, "extensions": {TASKS: {}}}
    params = {"name": "name_then_task", "arguments": {}}
    _, first = _rpc(url, "tools/call", params, capabilities)
    asked = first["result"]
    assert asked["resultType"] == "input_required" and "taskId" not in asked
    assert list(asked["inputRequests"]) == ["user_name"]
    answered = {
        **params,
        "inputResponses": {"user_name": ALICE},
        "requestState": asked["requestState"],
    }
    _, second = _rpc(url, "tools/call", answered, capabilities)
    created = second["result"]
    assert created["resultType"] == "task"
    assert "requestState" not in created and "inputRequests" not in created
    waiting = _until(url, created["taskId"], "input_required", capabilities)
    assert list(waiting["inputRequests"]) == ["note"]  # the later question, in the task
    note = {"action": "accept", "content": {"note": "hi"}}
    update = {"taskId": created["taskId"], "inputResponses": {"note": note}}
    _rpc(url, "tasks/update", update, capabilities)
    done = _until(url, created["taskId"], "completed", capabilities)
    assert done["result"]["content"][0]["text"] == "Alice: hi"


def test_an_ask_before_task_tool_called_without_the_extension_asks_in_rounds_only(url):
    params = {"name": "name_then_task", "arguments": {}}
    asked = _call(url, "name_then_task")
    assert list(asked["inputRequests"]) == ["user_name"]
    again = _call(
        url,
        "name_then_task",
        inputResponses={"user_name": ALICE},
        requestState=asked["requestState"],
    )
    assert list(again["inputRequests"]) == ["note"]
    note = {"action": "accept", "content": {"note": "hi"}}
    done = _call(
        url, params["name"], inputResponses={"note": note}, requestState=again["requestState"]
    )
    assert done["content"][0]["text"] == "Alice: hi"


def test_ask_before_task_is_a_strict_bool():
    from nous_tools import Tool

    assert Tool(name="x", function=len).ask_before_task is False
    with pytest.raises(TypeError, match="ask_before_task"):
        Tool(name="x", function=len, ask_before_task="yes")


def test_an_ask_before_task_tool_is_approved_and_asked_in_rounds_then_becomes_a_task(url):
    capabilities = {**EVERYTHING, "extensions": {TASKS: {}}}
    params: dict[str, t.Any] = {"name": "approved_first", "arguments": {}}
    _, first = _rpc(url, "tools/call", params, capabilities)
    assert list(first["result"]["inputRequests"]) == ["nous_tools.approval"]
    yes = {"action": "accept", "content": {}}
    state = first["result"]["requestState"]
    answered = {**params, "inputResponses": {"nous_tools.approval": yes}, "requestState": state}
    _, second = _rpc(url, "tools/call", answered, capabilities)
    assert list(second["result"]["inputRequests"]) == ["why"]  # approved; its question
    why = {"action": "accept", "content": {"note": "because"}}
    state = second["result"]["requestState"]
    _, third = _rpc(
        url,
        "tools/call",
        {**params, "inputResponses": {"why": why}, "requestState": state},
        capabilities,
    )
    assert third["result"]["resultType"] == "task"
    done = _until(url, third["result"]["taskId"], "completed", capabilities)
    assert done["result"]["content"][0]["text"] == "done: {'note': 'because'}"
