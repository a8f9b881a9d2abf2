"""Approvals across requests (issue 13, "Results out, and approvals across requests"):
``ToolCallResults.to_dict`` / ``from_dict`` / ``resolve``, with the SDKs' own types.

The whole loop runs for each provider — definitions → a response built offline with
``model_validate`` → ``execute_tool_calls`` → a pause on an ``ask`` tool →
``to_dict`` → JSON → ``from_dict`` → ``resolve`` → messages validated by the SDK's
request types — and every refusal is a ``ValueError`` that names why and uses
nothing up.
"""

from __future__ import annotations

import collections.abc as c
import datetime
import hashlib
import json
import os
import signal
import threading
import typing as t

import freezegun
import pydantic
import pytest
from anthropic.types import Message, MessageParam, ToolParam, ToolResultBlockParam
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionToolParam,
)
from openai.types.responses import (
    FunctionToolParam,
    Response,
    ResponseCustomToolCallOutputParam,
    ResponseInputItemParam,
    ResponseInputParam,
)
from openai.types.responses.response_input_item_param import FunctionCallOutput

from nous_tools import (
    ApprovalAlreadyUsed,
    BatchAlreadyResolved,
    ContextUpdate,
    Edit,
    Err,
    NeedsApproval,
    Ok,
    Registry,
    RunContext,
    SQLiteJournal,
    Tool,
    ToolCall,
    ToolCallResults,
    ToolDenied,
    ToolError,
    ToolExecutor,
    ToolNotFound,
    ToolTimeout,
    execute_tool_calls,
    format_tool_result,
)
from nous_tools.providers._tool_calls import current_tool_call

SECRET = "server-side secret"
WAIT = 5.0
PROVIDERS = ["openai", "responses", "anthropic"]

# -- checking values against the SDKs' request types -----------------------------------

_ADAPTERS: dict[object, pydantic.TypeAdapter[t.Any]] = {}


def _adapter(param_type: object) -> pydantic.TypeAdapter[t.Any]:
    adapter = _ADAPTERS.get(param_type)
    if adapter is None:  # kept alive: pydantic's lazy iterators need their validator
        adapter = _ADAPTERS[param_type] = pydantic.TypeAdapter(param_type)
    return adapter


def _materialise(value: t.Any) -> t.Any:
    if isinstance(value, dict):
        return {k: _materialise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, c.Iterator)):
        return [_materialise(v) for v in value]
    return value


def conforms(param_type: object, value: t.Any) -> None:
    """Fail unless ``value`` validates as ``param_type`` (strict) with nothing dropped."""
    validated = _materialise(_adapter(param_type).validate_python(value, strict=True))
    assert validated == value, f"{param_type} dropped or changed keys of {value!r}"


def accepted(param_type: object, value: t.Any) -> None:
    """Fail unless ``value`` validates as ``param_type`` (strict); extra keys allowed."""
    _materialise(_adapter(param_type).validate_python(value, strict=True))


# -- the tools -------------------------------------------------------------------------


def get_weather(city: str) -> dict[str, t.Any]:
    """Current weather for a city."""
    return {"city": city, "temp_c": 21}


class Deleter:
    """The ``ask`` tool: records what it deleted."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, path: str) -> str:
        with self.lock:
            self.paths.append(path)
        return f"deleted {path}"


def make(fn: c.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("timeout", None)
    return Tool.from_function(fn, **options)


@pytest.fixture
def deleted() -> Deleter:
    return Deleter()


@pytest.fixture
def registry(executor: ToolExecutor, deleted: Deleter) -> Registry:
    return Registry(
        [make(get_weather), make(deleted, name="delete_file", approval="ask")],
        executor=executor,
        name="agent",
    )


# -- model responses, built offline ----------------------------------------------------

Calls = list[tuple[str, str, dict[str, t.Any]]]


def model_response(provider: str, calls: Calls) -> object:
    """What ``provider``'s SDK returns for a turn with these tool calls (and the
    reasoning or thinking that comes with them)."""
    if provider == "openai":
        return ChatCompletion.model_validate(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1741569952,
                "model": "gpt-4.1",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "logprobs": None,
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": call_id,
                                    "type": "function",
                                    "function": {"name": name, "arguments": json.dumps(args)},
                                }
                                for call_id, name, args in calls
                            ],
                        },
                    }
                ],
            }
        )
    if provider == "responses":
        return Response.model_validate(
            {
                "id": "resp_1",
                "object": "response",
                "created_at": 1741476542,
                "model": "gpt-5",
                "status": "completed",
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "output": [
                    {"type": "reasoning", "id": "rs_1", "summary": []},
                    *(
                        {
                            "type": "function_call",
                            "id": f"fc_{call_id}",
                            "call_id": call_id,
                            "name": name,
                            "arguments": json.dumps(args),
                            "status": "completed",
                        }
                        for call_id, name, args in calls
                    ),
                ],
            }
        )
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
            "content": [
                {"type": "thinking", "thinking": "Let me do it.", "signature": "EqQBCg..."},
                *(
                    {"type": "tool_use", "id": call_id, "name": name, "input": args}
                    for call_id, name, args in calls
                ),
            ],
        }
    )


DEFINITION_TYPES = {
    "openai": ChatCompletionToolParam,
    "responses": FunctionToolParam,
    "anthropic": ToolParam,
}


def answer(provider: str, batch: ToolCallResults) -> list[tuple[str, str]]:
    """The results as ``provider`` wants them, each validated by the SDK's request
    type: ``(call id, content)`` per message, in order."""
    if provider == "openai":
        messages = batch.to_openai_messages()
        for message in messages:
            conforms(ChatCompletionToolMessageParam, message)
        return [(m["tool_call_id"], m["content"]) for m in messages]
    if provider == "responses":
        items = batch.to_responses_items()
        for item in items:
            conforms(ResponseInputItemParam, item)
            if item["type"] == "function_call_output":
                conforms(FunctionCallOutput, item)
            else:
                conforms(ResponseCustomToolCallOutputParam, item)
        return [(i["call_id"], i["output"]) for i in items]
    message = batch.to_anthropic_message()
    conforms(MessageParam, message)
    for block in message["content"]:
        conforms(ToolResultBlockParam, block)
        assert block["is_error"] == block["content"].startswith("Error:")
    return [(b["tool_use_id"], b["content"]) for b in message["content"]]


def conversation(provider: str, response: t.Any, batch: ToolCallResults) -> None:
    """Assemble the next request as the agent loop does and validate it whole."""
    if provider == "openai":
        messages: list[t.Any] = [{"role": "user", "content": "Clean up."}]
        messages.append(response.choices[0].message.model_dump(exclude_none=True))
        messages += batch.to_openai_messages()
        accepted(list[ChatCompletionMessageParam], messages)
    elif provider == "responses":
        items: list[t.Any] = [{"role": "user", "content": "Clean up."}]
        items += [item.model_dump(exclude_none=True) for item in response.output]
        items += batch.to_responses_items()
        accepted(ResponseInputParam, items)
    else:
        turns: list[t.Any] = [{"role": "user", "content": "Clean up."}]
        turns.append({"role": "assistant", "content": response.model_dump()["content"]})
        turns.append(batch.to_anthropic_message())
        accepted(list[MessageParam], turns)


WEATHER = ("c_weather", "get_weather", {"city": "Paris"})
DELETE = ("c_delete", "delete_file", {"path": "/tmp/x"})
UNKNOWN = ("c_unknown", "get_time", {})
WEATHER_TEXT = json.dumps({"city": "Paris", "temp_c": 21})


def paused(registry: Registry, provider: str = "openai", calls: Calls | None = None) -> t.Any:
    """A batch paused on ``delete_file``, as the JSON a browser holds."""
    response = model_response(provider, calls if calls is not None else [WEATHER, DELETE, UNKNOWN])
    batch = execute_tool_calls(registry, response)
    assert batch.pending
    return json.loads(json.dumps(batch.to_dict(SECRET)))


# -- the whole loop --------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_whole_loop_pauses_on_an_ask_tool_and_resumes_in_a_later_request(
    registry: Registry, deleted: Deleter, provider: str
) -> None:
    for definition in registry.tool_definitions(t.cast(t.Any, provider)):
        conforms(DEFINITION_TYPES[provider], definition)
    response = model_response(provider, [WEATHER, DELETE, UNKNOWN])

    first = execute_tool_calls(registry, response)
    assert first.provider == provider
    assert [type(r).__name__ for r in first] == ["Ok", "NeedsApproval", "Err"]
    before = answer(provider, first)
    assert [call_id for call_id, _ in before] == ["c_weather", "c_unknown"]  # pending left out
    wire = json.dumps(first.to_dict(secret=SECRET))

    # ... a later request, with the JSON the browser sent back
    batch = ToolCallResults.from_dict(json.loads(wire), registry, secret=SECRET)
    assert batch.provider == provider
    (pending,) = batch.pending
    assert (pending.call_id, pending.tool.name, pending.arguments) == DELETE
    assert deleted.paths == []

    resolved = batch.resolve({"c_delete": "approve"})
    assert resolved.pending == []
    assert deleted.paths == ["/tmp/x"]
    assert answer(provider, resolved) == [
        ("c_weather", WEATHER_TEXT),
        ("c_delete", "deleted /tmp/x"),
        ("c_unknown", "Error: tool 'get_time' not found"),
    ]
    # the finished results are exactly what the first request would have sent
    assert [m for m in answer(provider, resolved) if m[0] != "c_delete"] == before
    conversation(provider, response, resolved)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_rejection_answers_that_the_user_rejected_the_call(
    registry: Registry, deleted: Deleter, provider: str
) -> None:
    batch = ToolCallResults.from_dict(paused(registry, provider), registry, SECRET)
    resolved = batch.resolve({"c_delete": "reject"})
    assert answer(provider, resolved)[1] == (
        "c_delete",
        "Error: tool 'delete_file' was rejected by the user and did not run",
    )
    assert isinstance(resolved.results[1], Err)
    assert deleted.paths == []
    if provider == "anthropic":
        assert resolved.to_anthropic_blocks()[1]["is_error"] is True
    # the rejection used the approval up: the token inside the batch cannot run later
    assert isinstance(registry.execute_approved(batch.pending[0]).reason, ApprovalAlreadyUsed)


def test_an_edit_runs_the_same_tool_with_the_edited_arguments_and_uses_the_approval_up(
    registry: Registry, deleted: Deleter
) -> None:
    batch = ToolCallResults.from_dict(paused(registry), registry, SECRET)
    resolved = batch.resolve({"c_delete": Edit({"path": "/tmp/y"})})
    assert deleted.paths == ["/tmp/y"]
    assert resolved.to_openai_messages()[1] == {
        "role": "tool",
        "tool_call_id": "c_delete",
        "content": "deleted /tmp/y",
    }
    assert resolved.calls[1].arguments == {"path": "/tmp/x"}  # what the model asked for
    # the signed original can never run after the edit
    outcome = registry.execute_approved(batch.pending[0])
    assert isinstance(outcome, Err) and isinstance(outcome.reason, ApprovalAlreadyUsed)
    assert deleted.paths == ["/tmp/y"]


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ({}, "Missing required fields: path"),
        ({"path": 3}, "Type mismatch: path: expected string, got integer"),
        ({"path": datetime.date(2030, 1, 1)}, "cannot represent faithfully"),
        (["/tmp/y"], "must give the arguments as a mapping, got list"),
    ],
)
def test_an_edit_the_schema_refuses_is_a_value_error_and_uses_nothing_up(
    registry: Registry, deleted: Deleter, edit: t.Any, why: str
) -> None:
    batch = ToolCallResults.from_dict(paused(registry), registry, SECRET)
    with pytest.raises(ValueError, match="the edit of call 'c_delete'") as raised:
        batch.resolve({"c_delete": Edit(edit)})
    assert why in str(raised.value)
    assert deleted.paths == []
    batch.resolve({"c_delete": Edit({"path": "/tmp/fixed"})})  # the person corrects it
    assert deleted.paths == ["/tmp/fixed"]


def test_a_call_without_a_decision_stays_pending_and_the_rest_can_be_decided_later(
    registry: Registry, deleted: Deleter
) -> None:
    second = ("c_delete_2", "delete_file", {"path": "/tmp/z"})
    wire = paused(registry, "anthropic", [DELETE, WEATHER, second])
    batch = ToolCallResults.from_dict(wire, registry, SECRET)

    partly = batch.resolve({"c_delete_2": "approve"})
    assert [na.call_id for na in partly.pending] == ["c_delete"]
    assert partly.id != batch.id and partly.issued_at == batch.issued_at
    assert [b["tool_use_id"] for b in partly.to_anthropic_blocks()] == ["c_weather", "c_delete_2"]
    assert deleted.paths == ["/tmp/z"]

    later = json.loads(json.dumps(partly.to_dict(SECRET)))
    done = ToolCallResults.from_dict(later, registry, SECRET).resolve({"c_delete": "approve"})
    assert answer("anthropic", done) == [
        ("c_delete", "deleted /tmp/x"),
        ("c_weather", WEATHER_TEXT),
        ("c_delete_2", "deleted /tmp/z"),
    ]
    assert sorted(deleted.paths) == ["/tmp/x", "/tmp/z"]
    with pytest.raises(BatchAlreadyResolved):  # the first copy is used up
        ToolCallResults.from_dict(wire, registry, SECRET).resolve({"c_delete": "approve"})
    assert sorted(deleted.paths) == ["/tmp/x", "/tmp/z"]


def test_no_decisions_change_nothing_and_use_nothing_up(
    registry: Registry, deleted: Deleter
) -> None:
    batch = ToolCallResults.from_dict(paused(registry), registry, SECRET)
    same = batch.resolve({})
    assert same.id == batch.id and len(same.pending) == 1
    batch.resolve({"c_delete": "approve"})
    assert deleted.paths == ["/tmp/x"]


def test_approved_calls_run_in_the_given_context_and_their_updates_apply_in_call_order(
    executor: ToolExecutor,
) -> None:
    second_done = threading.Event()
    seen: dict[str, t.Any] = {}

    # The event reaches the tool in deps: a closure capturing it would have no
    # approval token (a token cannot tell two events apart; issue 21).
    def note(ctx: RunContext[t.Any], text: str) -> Ok[str]:
        call = current_tool_call()
        assert call is not None
        ctx.deps["seen"][text] = (ctx.deps["user"], call.id, ctx.approval_gated)
        if text == "first":  # the first call in order finishes last
            assert ctx.deps["second_done"].wait(WAIT)
        else:
            ctx.deps["second_done"].set()
        return Ok(text, ContextUpdate().append("notes", text))

    registry = Registry([make(note, approval="ask")], executor=executor)
    response = model_response(
        "anthropic", [("c1", "note", {"text": "first"}), ("c2", "note", {"text": "second"})]
    )
    wire = json.dumps(execute_tool_calls(registry, response).to_dict(SECRET))
    batch = ToolCallResults.from_dict(json.loads(wire), registry, SECRET)
    shared = {"seen": seen, "second_done": second_done}
    ctx = RunContext.new(deps={"user": "ann", "notes": [], **shared})
    resolved = batch.resolve({"c2": "approve", "c1": "approve"}, ctx)
    assert resolved.context.deps == {"user": "ann", "notes": ["first", "second"], **shared}
    assert seen == {"first": ("ann", "c1", True), "second": ("ann", "c2", True)}
    assert ctx.deps == {"user": "ann", "notes": [], **shared}  # never mutated


def test_a_batch_of_one_resolved_cuts_its_result_at_the_tools_limit_else_the_executors() -> None:
    def shout(text: str) -> str:
        return text * 50

    registry = Registry(
        [
            Tool.from_function(shout, name="own", approval="ask", max_result_chars=30),
            Tool.from_function(shout, name="theirs", approval="ask"),
        ],
        name="shop",
        executor=ToolExecutor(max_result_chars=60),
    )
    for name, limit in (("own", 30), ("theirs", 60)):
        wire = json.dumps(
            execute_tool_calls(registry, [ToolCall("c1", name, {"text": "ab"})]).to_dict(SECRET)
        )
        resolved = ToolCallResults.from_dict(json.loads(wire), registry, SECRET).resolve(
            {"c1": "approve"}
        )
        assert resolved.results == [Ok("ab" * 50)]
        content = resolved.to_dict(SECRET)["calls"][0]["output"]["content"]
        assert content == format_tool_result(Ok("ab" * 50), name, max_chars=limit)
        assert content != "ab" * 50


def test_a_batch_of_one_resolved_applies_its_calls_context_update() -> None:
    def note(text: str) -> Ok[str]:
        return Ok(text, ContextUpdate().append("notes", text))

    registry = Registry([Tool.from_function(note, approval="ask")], name="shop")
    wire = json.dumps(
        execute_tool_calls(registry, [ToolCall("c1", "note", {"text": "hi"})]).to_dict(SECRET)
    )
    batch = ToolCallResults.from_dict(json.loads(wire), registry, SECRET)
    ctx = RunContext.new(deps={"notes": []})
    resolved = batch.resolve({"c1": "approve"}, ctx)
    assert resolved.results == [Ok("hi", ContextUpdate().append("notes", "hi"))]
    assert resolved.context.deps == {"notes": ["hi"]}
    assert ctx.deps == {"notes": []}  # never mutated
    assert resolved.id != batch.id and resolved.issued_at == batch.issued_at
    assert resolved.calls == batch.calls and resolved.kinds == batch.kinds


# -- refusals --------------------------------------------------------------------------


def _rewrite_result(data: dict[str, t.Any]) -> None:
    data["calls"][0]["output"]["content"] = '{"city": "Paris", "temp_c": 40}'


def _error_to_success(data: dict[str, t.Any]) -> None:
    data["calls"][2]["output"]["is_error"] = False


def _pending_arguments(data: dict[str, t.Any]) -> None:
    data["calls"][1]["approval"]["arguments"]["path"] = "/etc/passwd"


def _call_arguments(data: dict[str, t.Any]) -> None:
    data["calls"][0]["arguments"]["city"] = "Rome"


def _model_arguments_added(data: dict[str, t.Any]) -> None:
    # a pending call carries the model's arguments only when the advice changed them
    data["calls"][1]["arguments"] = {"path": "/etc/passwd"}


def _call_removed(data: dict[str, t.Any]) -> None:
    del data["calls"][2]


def _calls_reordered(data: dict[str, t.Any]) -> None:
    data["calls"].reverse()


def _finished_made_pending(data: dict[str, t.Any]) -> None:
    data["calls"][2] = {**data["calls"][2], "output": data["calls"][0]["output"]}


def _younger(data: dict[str, t.Any]) -> None:
    data["issued_at"] += 3600


def _other_audience(data: dict[str, t.Any]) -> None:
    data["audience"] = "other"


def _other_provider(data: dict[str, t.Any]) -> None:
    data["provider"] = "anthropic"


def _other_id(data: dict[str, t.Any]) -> None:
    data["id"] = "0" * 32


TAMPERED = {
    "a finished result rewritten": _rewrite_result,
    "an error turned into a success": _error_to_success,
    "the pending call's arguments changed": _pending_arguments,
    "the call's arguments changed": _call_arguments,
    "other model arguments added to the pending call": _model_arguments_added,
    "a call removed": _call_removed,
    "the calls reordered": _calls_reordered,
    "a result copied onto another call": _finished_made_pending,
    "issued_at moved": _younger,
    "the audience changed": _other_audience,
    "the provider changed": _other_provider,
    "the batch id changed": _other_id,
}


@pytest.mark.parametrize("tamper", list(TAMPERED.values()), ids=list(TAMPERED))
def test_a_tampered_batch_is_refused_and_the_genuine_one_still_resolves(
    registry: Registry, deleted: Deleter, tamper: c.Callable[[dict[str, t.Any]], None]
) -> None:
    wire = paused(registry)
    tampered = json.loads(json.dumps(wire))
    tamper(tampered)
    with pytest.raises(ValueError, match=r"^tool call batch refused: the signature does not match"):
        ToolCallResults.from_dict(tampered, registry, SECRET)
    resolved = ToolCallResults.from_dict(wire, registry, SECRET).resolve({"c_delete": "approve"})
    assert deleted.paths == ["/tmp/x"]
    assert resolved.to_openai_messages()[0]["content"] == WEATHER_TEXT


def test_a_browser_cannot_reseal_a_changed_batch(registry: Registry) -> None:
    tampered = paused(registry)
    _rewrite_result(tampered)
    payload = {k: v for k, v in tampered.items() if k != "signature"}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    checksum = hashlib.sha256(b"nous-tools tool call batch v2\n" + canonical).hexdigest()
    with pytest.raises(ValueError, match="not signed"):
        ToolCallResults.from_dict({**tampered, "signature": f"sha256:{checksum}"}, registry, SECRET)
    with pytest.raises(ValueError, match="signature does not match"):
        ToolCallResults.from_dict(
            {**tampered, "signature": f"hmac-sha256:{checksum}"}, registry, SECRET
        )


def test_a_pending_token_swapped_for_another_genuine_one_is_refused(
    registry: Registry, deleted: Deleter
) -> None:
    wire = paused(registry)
    other = paused(registry, calls=[("c_delete", "delete_file", {"path": "/srv/everything"})])
    swapped = json.loads(json.dumps(wire))
    swapped["calls"][1]["approval"] = other["calls"][0]["approval"]
    with pytest.raises(ValueError, match="signature does not match"):
        ToolCallResults.from_dict(swapped, registry, SECRET)
    assert deleted.paths == []


def test_an_expired_batch_is_refused(registry: Registry) -> None:
    with freezegun.freeze_time("2030-01-01 12:00:00"):
        wire = paused(registry)
    with (
        freezegun.freeze_time("2030-01-02 12:00:01"),  # a day and a second later
        pytest.raises(ValueError, match=r"^tool call batch refused: the batch has expired"),
    ):
        ToolCallResults.from_dict(wire, registry, SECRET)
    with freezegun.freeze_time("2030-01-01 12:00:11"):
        with pytest.raises(ValueError, match="expired"):
            ToolCallResults.from_dict(wire, registry, SECRET, max_age=10)
        assert ToolCallResults.from_dict(wire, registry, SECRET, max_age=60).pending


def test_a_batch_of_another_registry_is_refused(registry: Registry, deleted: Deleter) -> None:
    wire = paused(registry)
    tools = registry.all()
    for other in (Registry(tools, name="billing"), Registry(tools)):
        with pytest.raises(ValueError, match="made for registry 'agent', not"):
            ToolCallResults.from_dict(wire, other, SECRET)
    assert deleted.paths == []


def test_unsigned_batches_are_refused_unless_the_caller_opts_in_for_trusted_storage(
    registry: Registry, deleted: Deleter
) -> None:
    batch = execute_tool_calls(registry, model_response("openai", [WEATHER, DELETE]))
    unsigned = json.loads(json.dumps(batch.to_dict()))
    assert unsigned["signature"].startswith("sha256:")
    with pytest.raises(ValueError, match="unsigned batches are refused"):
        ToolCallResults.from_dict(unsigned, registry)
    with pytest.raises(ValueError, match="not signed"):
        ToolCallResults.from_dict(unsigned, registry, SECRET)
    trusted = ToolCallResults.from_dict(unsigned, registry, allow_unsigned=True)
    trusted.resolve({"c_delete": "approve"})
    assert deleted.paths == ["/tmp/x"]
    _rewrite_result(unsigned)  # the checksum still catches corruption
    with pytest.raises(ValueError, match="signature does not match"):
        ToolCallResults.from_dict(unsigned, registry, allow_unsigned=True)


def test_a_signed_batch_needs_its_own_secret(registry: Registry) -> None:
    wire = paused(registry)
    with pytest.raises(ValueError, match="signed, but no secret"):
        ToolCallResults.from_dict(wire, registry)
    with pytest.raises(ValueError, match="signature does not match"):
        ToolCallResults.from_dict(wire, registry, "another secret")


def test_a_pending_call_whose_tool_is_now_denied_is_refused(registry: Registry) -> None:
    wire = paused(registry)
    registry.register(make(Deleter(), name="delete_file", approval="deny"))
    with pytest.raises(ValueError, match="call 'c_delete': approval for tool 'delete_file'"):
        ToolCallResults.from_dict(wire, registry, SECRET)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: d["calls"][1]["approval"], "the batch has no 'v'"),
        (lambda d: {**d["calls"][1]["approval"], "v": 2}, "the batch has no 'type'"),
        (lambda d: [d], "a batch must be a mapping, got list"),
        (lambda d: {**d, "v": 3}, "unknown batch version 3"),
        (lambda d: {k: v for k, v in d.items() if k != "calls"}, "the batch has no 'calls'"),
        (lambda d: {**d, "issued_at": "now"}, "'issued_at' must be int, got str"),
        (lambda d: {**d, "calls": {}}, "'calls' must be list, got dict"),
    ],
)
def test_a_malformed_batch_is_refused_naming_why(
    registry: Registry, change: c.Callable[[dict[str, t.Any]], t.Any], why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        ToolCallResults.from_dict(change(paused(registry)), registry, SECRET)


def test_a_replayed_batch_is_refused_and_runs_nothing(registry: Registry, deleted: Deleter) -> None:
    wire = paused(registry)
    ToolCallResults.from_dict(wire, registry, SECRET).resolve({"c_delete": "approve"})
    replay = ToolCallResults.from_dict(wire, registry, SECRET)  # still reads
    for decision in ("approve", "reject"):
        with pytest.raises(BatchAlreadyResolved, match="already resolved") as raised:
            replay.resolve({"c_delete": decision})
        assert isinstance(raised.value, ValueError)
    assert deleted.paths == ["/tmp/x"]


def test_of_two_concurrent_resolutions_of_one_batch_exactly_one_runs(
    registry: Registry, deleted: Deleter
) -> None:
    wire = paused(registry)
    barrier = threading.Barrier(2, timeout=WAIT)
    outcomes: list[str] = []

    def resolve() -> None:
        batch = ToolCallResults.from_dict(wire, registry, SECRET)
        barrier.wait()
        try:
            batch.resolve({"c_delete": "approve"})
            outcomes.append("resolved")
        except BatchAlreadyResolved:
            outcomes.append("refused")

    threads = [threading.Thread(target=resolve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 2)
    assert sorted(outcomes) == ["refused", "resolved"]
    assert deleted.paths == ["/tmp/x"]


@pytest.mark.parametrize(
    ("decisions", "why"),
    [
        ({"c_nope": "approve"}, r"unknown call id 'c_nope' \(waiting for a decision: 'c_delete'\)"),
        ({3: "approve"}, "unknown call id 3"),
        ({"c_weather": "approve"}, "call 'c_weather' is not waiting for approval"),
        ({"c_delete": "yes"}, "must be 'approve', 'reject' or an Edit, got 'yes'"),
        ({"c_delete": True}, "must be 'approve', 'reject' or an Edit, got bool"),
        ({"c_delete": {"path": "/tmp/y"}}, "or an Edit, got dict"),
    ],
)
def test_a_decision_that_cannot_be_applied_is_a_value_error_and_uses_nothing_up(
    registry: Registry, deleted: Deleter, decisions: dict[t.Any, t.Any], why: str
) -> None:
    batch = ToolCallResults.from_dict(paused(registry), registry, SECRET)
    with pytest.raises(ValueError, match=why):
        batch.resolve({"c_delete": "approve", **decisions} if "c_nope" in decisions else decisions)
    assert deleted.paths == []
    batch.resolve({"c_delete": "approve"})
    assert deleted.paths == ["/tmp/x"]


def test_resolve_needs_a_registry_and_a_mapping(registry: Registry) -> None:
    bare = ToolCallResults(results=[], calls=[], context=RunContext.new())
    with pytest.raises(ValueError, match="has no registry"):
        bare.resolve({})
    batch = ToolCallResults.from_dict(paused(registry), registry, SECRET)
    with pytest.raises(TypeError, match="expects a mapping"):
        batch.resolve([("c_delete", "approve")])  # type: ignore[arg-type]


# -- what crosses ----------------------------------------------------------------------


def test_finished_results_cross_as_exactly_the_text_a_model_gets(registry: Registry) -> None:
    boom = ValueError("login failed", "sk-secret")
    results: list[t.Any] = [
        Ok({"temp": 21}),
        Ok("plain text"),
        Err(ToolTimeout(tool_name="slow", timeout=2)),
        Err(ToolNotFound("ghost")),
        Err(ToolDenied("nuke")),
        Err(ToolError(f"Tool execution failed: {boom}", original_error=boom)),
        Err("a plain reason"),
        Err(ToolError("Tool call #8 could not be read: it has no tool name")),
        Ok("SELECT 1 -> 1 row"),
    ]
    calls = [
        ToolCall("c1", "get_weather", {"city": "Paris"}),
        ToolCall("c2", "echo", {}),
        ToolCall("c3", "slow", {}),
        ToolCall("c4", "ghost", {}),
        ToolCall("c5", "nuke", {}),
        ToolCall("c6", "login", {"user": "ann"}),
        ToolCall("c7", "picky", {"ids": (1, 2), "ratio": 1.0}),
        ToolCall("c8", "", '{"raw": '),
        ToolCall("c9", "run_sql", {"query": "SELECT 1"}),
    ]
    kinds = ["function"] * 8 + ["custom"]
    batch = ToolCallResults(
        results=results,
        calls=calls,
        context=RunContext.new(),
        kinds=kinds,
        registry=registry,
    )
    back = ToolCallResults.from_dict(
        json.loads(json.dumps(batch.to_dict(SECRET))), registry, SECRET
    )
    assert back.to_openai_messages() == batch.to_openai_messages()
    assert back.to_responses_items() == batch.to_responses_items()
    assert back.to_anthropic_blocks() == batch.to_anthropic_blocks()
    assert back.to_responses_items()[-1]["type"] == "custom_tool_call_output"
    assert [call.arguments for call in back.calls] == [call.arguments for call in calls]
    assert back.results[0] == Ok('{"temp": 21}')
    assert [r.is_ok() for r in back.results] == [r.is_ok() for r in results]
    assert "sk-secret" not in json.dumps(batch.to_dict(SECRET))
    # resolving a batch with nothing pending keeps the text as it was
    assert back.resolve({}).to_anthropic_blocks() == batch.to_anthropic_blocks()


def test_arguments_that_cannot_be_encoded_are_a_value_error_naming_the_call(
    registry: Registry,
) -> None:
    batch = ToolCallResults(
        results=[Ok("x")],
        calls=[ToolCall("c1", "when", {"at": datetime.date(2030, 1, 1)})],
        context=RunContext.new(),
        registry=registry,
    )
    with pytest.raises(ValueError, match="the arguments of call 'c1' cannot be encoded"):
        batch.to_dict(SECRET)


def test_the_provider_is_the_shape_the_calls_came_in(registry: Registry) -> None:
    for provider in PROVIDERS:
        assert execute_tool_calls(registry, model_response(provider, [WEATHER])).provider == (
            provider
        )
    chat = model_response("openai", [WEATHER])
    assert execute_tool_calls(registry, chat.choices[0].message).provider == "openai"  # type: ignore[attr-defined]
    mixed = [
        {"type": "tool_use", "id": "a", "name": "get_weather", "input": {"city": "Oslo"}},
        {"type": "function_call", "call_id": "b", "name": "get_weather", "arguments": "{}"},
    ]
    assert execute_tool_calls(registry, mixed).provider is None
    assert execute_tool_calls(registry, [ToolCall("a", "get_weather", {})]).provider is None
    assert execute_tool_calls(registry, None).provider is None


def test_a_pending_calls_approval_is_bound_by_the_batch_signature_alone(
    registry: Registry,
) -> None:
    wire = paused(registry)
    pending = wire["calls"][1]
    assert "arguments" not in pending  # carried once: by the approval
    approval = pending["approval"]
    # issued_at is carried only when the approval was made in another second than
    # the batch (a busy machine can cross a second between them)
    assert sorted(set(approval) - {"issued_at"}) == [
        "arguments",
        "description",
        "id",
        "tool_digest",
    ]
    assert approval.get("issued_at", wire["issued_at"]) >= wire["issued_at"]
    assert approval["arguments"] == {"path": "/tmp/x"}
    # not a token of its own: it means something only inside the signed batch
    with pytest.raises(ValueError, match="approval refused: the token has no tool name"):
        NeedsApproval.from_dict(approval, registry, SECRET)
    (na,) = ToolCallResults.from_dict(wire, registry, SECRET).pending
    assert (na.call_id, na.audience, na.arguments) == ("c_delete", "agent", {"path": "/tmp/x"})


def test_resolved_calls_are_traced_whole_with_their_call_ids(
    registry: Registry, deleted: Deleter
) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from nous_tools.contrib import opentelemetry as nous_otel

    second = ("c_delete_2", "delete_file", {"path": "/tmp/z"})
    wire = paused(registry, "openai", [DELETE, second])
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    nous_otel.instrument(provider)
    try:
        batch = ToolCallResults.from_dict(wire, registry, SECRET)
        batch.resolve({"c_delete": "approve", "c_delete_2": "reject"})
    finally:
        nous_otel.uninstrument()
    finished = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool ")]
    spans = {(span.attributes or {}).get("gen_ai.tool.call.id"): span for span in finished}
    assert len(finished) == 2  # one span per decided call, none for the rest
    assert sorted(spans) == ["c_delete", "c_delete_2"]  # type: ignore[type-var]
    assert "error.type" not in (spans["c_delete"].attributes or {})
    assert (spans["c_delete_2"].attributes or {})["error.type"] == "rejected"
    assert deleted.paths == ["/tmp/x"]


# -- resolved with a call journal ----------------------------------------------------


class Approved:
    """Two ``ask`` tools: ``fast`` returns at once; ``slow`` waits for ``fast``'s
    outcome to be journaled, then presses Ctrl-C (a real SIGINT) and waits to be
    cancelled."""

    def __init__(self) -> None:
        self.fast_runs = 0
        self.slow_runs = 0
        self.fast_recorded = threading.Event()
        self.slow_ended = threading.Event()

    def fast(self, n: int) -> str:
        self.fast_runs += 1
        return f"fast {n}"

    def slow(self, ctx: RunContext, n: int) -> str:
        self.slow_runs += 1
        try:
            assert self.fast_recorded.wait(WAIT)
            os.kill(os.getpid(), signal.SIGINT)  # the person presses Ctrl-C
            ctx.cancelled.wait(WAIT)
            return f"slow {n}"
        finally:
            self.slow_ended.set()


class TellingJournal(SQLiteJournal):
    """The SQLite journal, telling when ``fast``'s outcome is recorded."""

    def __init__(self, path: t.Any, approved: Approved) -> None:
        super().__init__(path)
        self.approved = approved

    def complete(self, record: t.Any, outcome: t.Any) -> bool:
        written = super().complete(record, outcome)
        if record.tool == "fast":
            self.approved.fast_recorded.set()
        return written


def test_a_ctrl_c_during_a_journaled_resolve_loses_no_finished_result(
    executor: ToolExecutor, tmp_path: t.Any
) -> None:
    approved = Approved()
    registry = Registry(
        [
            Tool.from_function(approved.fast, name="fast", approval="ask", timeout=WAIT),
            Tool.from_function(approved.slow, name="slow", approval="ask", timeout=WAIT),
        ],
        executor=executor,
        name="agent",
        journal=TellingJournal(tmp_path / "journal.db", approved),
    )
    ctx = RunContext.new(run_id="conversation-7")
    calls = [ToolCall("call_f", "fast", {"n": 1}), ToolCall("call_s", "slow", {"n": 2})]
    wire = json.loads(json.dumps(execute_tool_calls(registry, calls, ctx).to_dict(SECRET)))
    decisions = {"call_f": "approve", "call_s": "approve"}
    with pytest.raises(KeyboardInterrupt):
        ToolCallResults.from_dict(wire, registry, SECRET).resolve(decisions)
    assert approved.slow_ended.wait(WAIT)
    # The same decisions submitted again: the finished call's outcome, nothing run again.
    again = ToolCallResults.from_dict(wire, registry, SECRET).resolve(decisions)
    assert again.results[0] == Ok("fast 1")
    assert isinstance(again.results[1], Err)  # interrupted: in progress, or its stored Err
    assert (approved.fast_runs, approved.slow_runs) == (1, 1)


@pytest.fixture
def journaled_registry(executor: ToolExecutor, deleted: Deleter, tmp_path: t.Any) -> Registry:
    return Registry(
        [make(get_weather), make(deleted, name="delete_file", approval="ask")],
        executor=executor,
        name="agent",
        journal=SQLiteJournal(tmp_path / "journal.db"),
    )


def _paused(registry: Registry, *calls: ToolCall) -> dict[str, t.Any]:
    ctx = RunContext.new(run_id="conversation-8")
    result = execute_tool_calls(registry, list(calls), ctx)
    assert result.pending
    return t.cast(dict[str, t.Any], json.loads(json.dumps(result.to_dict(SECRET))))


DELETE_X = ToolCall("call_d", "delete_file", {"path": "/x"})
DELETE_Y = ToolCall("call_e", "delete_file", {"path": "/y"})


def test_a_journaled_batch_submitted_twice_returns_the_first_outcome(
    journaled_registry: Registry, deleted: Deleter
) -> None:
    wire = _paused(journaled_registry, DELETE_X, DELETE_Y)
    assert wire["run_id"] == "conversation-8"
    decisions: dict[str, t.Any] = {"call_d": "approve", "call_e": "reject"}
    first = ToolCallResults.from_dict(wire, journaled_registry, SECRET).resolve(decisions)
    again = ToolCallResults.from_dict(wire, journaled_registry, SECRET).resolve(decisions)
    assert first.to_openai_messages() == again.to_openai_messages()
    assert [m["content"] for m in again.to_openai_messages()] == [
        "deleted /x",
        "Error: tool 'delete_file' was rejected by the user and did not run",
    ]
    assert deleted.paths == ["/x"]


@pytest.mark.parametrize(
    "otherwise",
    [{"call_d": "reject"}, {"call_d": Edit({"path": "/z"})}],
    ids=["reject after approve", "edit after approve"],
)
def test_another_decision_for_a_decided_journaled_call_gets_the_first_outcome(
    journaled_registry: Registry, deleted: Deleter, otherwise: dict[str, t.Any]
) -> None:
    wire = _paused(journaled_registry, DELETE_X, DELETE_Y)
    ToolCallResults.from_dict(wire, journaled_registry, SECRET).resolve({"call_d": "approve"})
    batch = ToolCallResults.from_dict(wire, journaled_registry, SECRET)
    again = batch.resolve({**otherwise, "call_e": "approve"})
    assert again.results == [Ok("deleted /x"), Ok("deleted /y")]  # call_d: the first outcome
    assert deleted.paths == ["/x", "/y"]  # call_d ran once, as first decided


def test_an_edited_call_is_replayed_when_the_response_is_posted_again(
    journaled_registry: Registry, deleted: Deleter
) -> None:
    wire = _paused(journaled_registry, DELETE_X)
    edit = {"call_d": Edit({"path": "/safe"})}
    first = ToolCallResults.from_dict(wire, journaled_registry, SECRET).resolve(edit)
    again = ToolCallResults.from_dict(wire, journaled_registry, SECRET).resolve(edit)
    assert first.results == again.results == [Ok("deleted /safe")]
    reposted = execute_tool_calls(
        journaled_registry, [DELETE_X], RunContext.new(run_id="conversation-8")
    )
    assert reposted.results == [Ok("deleted /safe")]
    assert deleted.paths == ["/safe"]


def test_without_a_run_id_a_journaled_registry_keeps_batch_already_resolved(
    journaled_registry: Registry, deleted: Deleter
) -> None:
    result = execute_tool_calls(journaled_registry, [DELETE_X])
    wire = json.loads(json.dumps(result.to_dict(SECRET)))
    assert "run_id" not in wire
    ToolCallResults.from_dict(wire, journaled_registry, SECRET).resolve({"call_d": "approve"})
    with pytest.raises(BatchAlreadyResolved):
        ToolCallResults.from_dict(wire, journaled_registry, SECRET).resolve({"call_d": "approve"})
    assert deleted.paths == ["/x"]


@pytest.mark.parametrize("store", ["in memory", "the journal's own"])
@pytest.mark.parametrize("second", ["approve", "reject"])
def test_two_requests_racing_one_approval_run_it_once_and_both_answer_the_first_outcome(
    executor: ToolExecutor, tmp_path: t.Any, second: str, store: str
) -> None:
    """Two requests submit the same paused call at once (a double click; approve and
    reject from two tabs): the tool runs at most once, both get the outcome the journal
    records, and the journal holds a tool's outcome, never "approval already used" —
    whether the approval is redeemed before the record (a store of its own) or with it
    (``journal.approvals``, one transaction)."""
    for round_ in range(15):
        deleted = Deleter()
        journal = SQLiteJournal(tmp_path / f"race-{second}-{store}-{round_}.db")
        registry = Registry(
            [make(deleted, name="delete_file", approval="ask")],
            executor=executor,
            name="agent",
            journal=journal,
            approval_store=journal.approvals if store != "in memory" else None,
        )
        wire = _paused(registry, DELETE_X)
        barrier = threading.Barrier(2, timeout=WAIT)
        answers: list[t.Any] = [None, None]

        def submit(
            i: int,
            decision: str,
            wire: t.Any = wire,
            registry: Registry = registry,
            barrier: threading.Barrier = barrier,
            answers: list[t.Any] = answers,
        ) -> None:
            batch = ToolCallResults.from_dict(wire, registry, SECRET)
            barrier.wait()
            answers[i] = batch.resolve({"call_d": decision}).results[0]

        threads = [
            threading.Thread(target=submit, args=(0, "approve")),
            threading.Thread(target=submit, args=(1, second)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        record = registry.journal.get("conversation-8", "call_d")  # type: ignore[union-attr]
        assert record is not None and record.state == "completed"
        stored = record.result()
        text = format_tool_result(stored, "delete_file")
        assert "already used" not in text
        shown = [format_tool_result(answer, "delete_file") for answer in answers]
        assert shown == [text, text], (round_, shown, text)
        assert len(deleted.paths) <= 1
        assert (deleted.paths == ["/x"]) == stored.is_ok()
