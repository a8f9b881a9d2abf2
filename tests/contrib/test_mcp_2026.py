"""The served registry on the 2026-07-28 protocol, over Streamable HTTP, request by
request as a client sends them (the wire, not an SDK client): what the conformance
suite's run alone would not pin down."""

from __future__ import annotations

import json
import typing as t

import httpx2
import pytest

import nous_tools
from nous_tools import Registry, RunContext, Tool, tool
from nous_tools.contrib.mcp import _peer, serve_http_in_thread
from nous_tools.errors import SamplingUnavailable

WAIT = 30.0
VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}

SCHEMA_2020_12: dict[str, t.Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object"}},
    "properties": {
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def _greet(region: str, name: str = "there") -> str:
    return f"Hello {name}, from {region}"


def _contact(**kwargs: t.Any) -> str:
    return "ok"


@tool(timeout=5, retries=0)
def summarise(ctx: RunContext) -> str:
    return ctx.sample("Summarise this.", max_tokens=20)


@tool(timeout=5, retries=0)
def summarise_or_not(ctx: RunContext) -> str:
    try:
        return ctx.sample("Summarise this.", max_tokens=20)
    except SamplingUnavailable:
        return "no model: the text as it is"


@tool(timeout=5)
def chatty(ctx: RunContext) -> str:
    ctx.log("warning", "something to say")
    return "done"


@pytest.fixture(scope="module")
def url():
    registry = Registry(
        [
            Tool(
                name="greet",
                function=_greet,
                timeout=5,
                parameters={
                    "type": "object",
                    "properties": {
                        "region": {"type": "string", "x-mcp-header": "Region"},
                        "name": {"type": "string"},
                    },
                    "required": ["region"],
                },
            ),
            Tool(name="contact", function=_contact, timeout=5, parameters=SCHEMA_2020_12),
            summarise,
            summarise_or_not,
            chatty,
        ]
    )
    with serve_http_in_thread(registry) as running:
        yield running.url


def _post(
    url: str, method: str, params: dict[str, t.Any], headers: dict[str, str] | None = None
) -> tuple[int, dict[str, t.Any]]:
    """The HTTP status and the response (the last message of an SSE stream)."""
    status, messages = _exchange(url, method, params, headers)
    return status, messages[-1]


def _exchange(
    url: str,
    method: str,
    params: dict[str, t.Any],
    headers: dict[str, str] | None = None,
    meta: dict[str, t.Any] | None = None,
) -> tuple[int, list[dict[str, t.Any]]]:
    """The HTTP status and every JSON-RPC message the server sent back, in order."""
    sent = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    if method == "tools/call":
        sent["Mcp-Name"] = params["name"]
    elif method == "resources/read":
        sent["Mcp-Name"] = params["uri"]
    elif method == "prompts/get":
        sent["Mcp-Name"] = params["name"]
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": method,
        "params": {**params, "_meta": {**META, **(meta or {})}},
    }
    response = httpx2.post(url, json=body, headers={**sent, **(headers or {})}, timeout=WAIT)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = [
            json.loads(line[5:])
            for line in response.text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
        return response.status_code, messages
    return response.status_code, [response.json()]


def test_discover_names_the_server_and_its_version(url):
    status, reply = _post(url, "server/discover", {})
    assert status == 200
    assert reply["result"]["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "nous-tools",
        "version": nous_tools.__version__,
    }


def test_a_listed_input_schema_keeps_the_json_schema_2020_12_keywords(url):
    status, reply = _post(url, "tools/list", {})
    assert status == 200
    listed = {tool["name"]: tool["inputSchema"] for tool in reply["result"]["tools"]}
    assert listed["contact"] == SCHEMA_2020_12
    assert listed["greet"]["properties"]["region"]["x-mcp-header"] == "Region"


@pytest.mark.parametrize("header", ["eu-west", "=?base64?ZXUtd2VzdA==?="])
def test_a_call_whose_param_header_matches_its_argument_runs(url, header):
    arguments = {"region": "eu-west"}
    status, reply = _post(
        url, "tools/call", {"name": "greet", "arguments": arguments}, {"Mcp-Param-Region": header}
    )
    assert status == 200
    assert reply["result"]["content"][0]["text"] == "Hello there, from eu-west"


@pytest.mark.parametrize(
    "headers",
    [
        {"Mcp-Param-Region": "us-east"},  # another value than the body's
        {},  # the header left out, the value in the body
        {"Mcp-Param-Region": "=?base64?ZXUtd2VzdA?="},  # base64 without its padding
        {"Mcp-Param-Region": "=?base64?ZXUt!!d2VzdA==?="},  # not base64
    ],
)
def test_a_call_whose_param_header_disagrees_with_its_argument_is_refused(url, headers):
    arguments = {"region": "eu-west"}
    status, reply = _post(url, "tools/call", {"name": "greet", "arguments": arguments}, headers)
    assert status == 400
    assert reply["error"]["code"] == -32020  # header mismatch; the tool did not run


def test_a_call_that_needs_sampling_from_a_client_without_it_is_error_32021(url):
    """SEP-2575: the client learns which capability the call needs (HTTP 400)."""
    status, reply = _post(url, "tools/call", {"name": "summarise", "arguments": {}})
    assert status == 400
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"]["requiredCapabilities"] == {"sampling": {}}


def test_a_tool_that_carries_on_without_sampling_answers_as_usual(url):
    status, reply = _post(url, "tools/call", {"name": "summarise_or_not", "arguments": {}})
    assert status == 200
    assert reply["result"]["content"][0]["text"] == "no model: the text as it is"


def test_log_lines_go_only_to_a_request_that_asked_for_a_level(url):
    params = {"name": "chatty", "arguments": {}}
    _, quiet = _exchange(url, "tools/call", params)
    assert [m.get("method") for m in quiet] == [None]
    assert quiet[-1]["result"]["content"][0]["text"] == "done"
    _, told = _exchange(
        url, "tools/call", params, meta={"io.modelcontextprotocol/logLevel": "info"}
    )
    assert [m.get("method") for m in told] == ["notifications/message", None]
    assert told[0]["params"]["data"] == "something to say"


@tool(timeout=5, retries=0)
def ask_name(ctx: RunContext) -> str:
    answer = ctx.elicit("Your name?", {"type": "object", "properties": {"n": {"type": "string"}}})
    return f"Hello, {(answer.content or {}).get('n')}"


@pytest.fixture(scope="module")
def asking_url():
    with serve_http_in_thread(Registry([ask_name])) as running:
        yield running.url


ELICITING = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


def test_an_edited_request_state_is_refused_and_an_expired_one_asks_again(asking_url, monkeypatch):
    params: dict[str, t.Any] = {"name": "ask_name", "arguments": {}}
    status, first = _exchange(asking_url, "tools/call", params, meta=ELICITING)
    [key] = first[-1]["result"]["inputRequests"]
    state = first[-1]["result"]["requestState"]
    answered = {**params, "inputResponses": {key: {"action": "accept", "content": {"n": "Ann"}}}}
    _, done = _exchange(
        asking_url, "tools/call", {**answered, "requestState": state}, meta=ELICITING
    )
    assert done[-1]["result"]["content"][0]["text"] == "Hello, Ann"
    edited = state[:-1] + ("0" if state[-1] != "0" else "1")
    status, refused = _exchange(
        asking_url, "tools/call", {**answered, "requestState": edited}, meta=ELICITING
    )
    assert (status, refused[-1]["error"]["code"]) == (400, -32602)
    monkeypatch.setattr(_peer, "STATE_TTL", -60.0)  # every state has expired
    _, again = _exchange(
        asking_url, "tools/call", {**answered, "requestState": state}, meta=ELICITING
    )
    assert again[-1]["result"]["resultType"] == "input_required"


@pytest.mark.parametrize(
    ("method", "key"),
    [
        ("tools/list", "tools"),
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    ],
)
def test_every_list_answers_with_caching_hints_and_no_prompts_or_resources(url, method, key):
    """SEP-2549: a list says how long it may be cached and by whom. A tool runner serves
    no prompts and no resources: their lists are empty."""
    status, reply = _post(url, method, {})
    assert status == 200
    result = reply["result"]
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")
    assert (result[key] == []) == (key != "tools")


def test_reading_a_resource_is_not_found(url):
    _, reply = _post(url, "resources/read", {"uri": "file:///etc/passwd"})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"] == {"uri": "file:///etc/passwd"}


def test_getting_a_prompt_is_unknown(url):
    _, reply = _post(url, "prompts/get", {"name": "summarise"})
    assert reply["error"]["code"] == -32602
    assert "Unknown prompt" in reply["error"]["message"]
