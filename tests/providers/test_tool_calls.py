"""Model tool calls in, tool results out (SPEC 7): provider shapes, per-call errors,
call order, context updates, approval, and what the model is told."""

from __future__ import annotations

import collections.abc as c
import contextvars
import json
import logging
import subprocess
import sys
import threading
import types
import typing as t

import pytest

from nous_tools import (
    ApprovalRequest,
    ContextUpdate,
    Err,
    NeedsApproval,
    Ok,
    Registry,
    RunContext,
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

WAIT = 5.0  # an upper bound for Events that a healthy run sets at once


def make(fn: c.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("timeout", None)
    return Tool.from_function(fn, **options)


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def chat(call_id: str, name: str, arguments: str) -> dict[str, t.Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.fixture
def registry(executor: ToolExecutor) -> Registry:
    return Registry([make(add)], executor=executor)


class Counter:
    """A tool function that counts its calls."""

    def __init__(self, value: t.Any = "ran") -> None:
        self.calls: list[dict[str, t.Any]] = []
        self.value = value

    def __call__(self, **kwargs: t.Any) -> t.Any:
        self.calls.append(kwargs)
        return self.value


# -- provider shapes -----------------------------------------------------------------


def test_openai_chat_completions_tool_calls_run(registry: Registry) -> None:
    result = execute_tool_calls(registry, [chat("call_1", "add", '{"a": 1, "b": 2}')])
    assert result.results == [Ok(3)]
    assert result.calls == [ToolCall("call_1", "add", {"a": 1, "b": 2})]


def test_openai_responses_function_call_items_use_call_id(registry: Registry) -> None:
    item = {
        "type": "function_call",
        "id": "fc_item_1",
        "call_id": "call_9",
        "name": "add",
        "arguments": '{"a": 2, "b": 2}',
    }
    result = execute_tool_calls(registry, [item])
    assert result.results == [Ok(4)]
    assert result.calls[0].id == "call_9"
    assert result.to_responses_items() == [
        {"type": "function_call_output", "call_id": "call_9", "output": "4"}
    ]


def test_anthropic_tool_use_blocks_take_input_as_a_mapping(registry: Registry) -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 5, "b": 6}}
    result = execute_tool_calls(registry, [block])
    assert result.results == [Ok(11)]
    assert result.to_anthropic_blocks() == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "11", "is_error": False}
    ]


def test_neutral_tool_calls_take_a_mapping_or_a_json_string(registry: Registry) -> None:
    result = execute_tool_calls(
        registry, [ToolCall("n1", "add", {"a": 1, "b": 1}), ToolCall("n2", "add", '{"a":2,"b":3}')]
    )
    assert result.results == [Ok(2), Ok(5)]
    assert result.calls[1] == ToolCall("n2", "add", {"a": 2, "b": 3})


def test_sdk_objects_are_read_through_their_attributes(registry: Registry) -> None:
    ns = types.SimpleNamespace
    chat_call = ns(id="c1", type="function", function=ns(name="add", arguments='{"a":1,"b":1}'))
    responses_item = ns(type="function_call", id="fc", call_id="c2", name="add", arguments="{}")
    anthropic_block = ns(type="tool_use", id="c3", name="add", input={"a": 3, "b": 3})
    result = execute_tool_calls(registry, [chat_call, responses_item, anthropic_block])
    assert [call.id for call in result.calls] == ["c1", "c2", "c3"]
    assert result.results[0] == Ok(2)
    assert isinstance(result.results[1], Err)  # {} misses a and b
    assert "Missing required fields: a, b" in result.results[1].reason.message
    assert result.results[2] == Ok(6)


def test_mixed_shapes_in_one_batch_keep_their_order(registry: Registry) -> None:
    calls: list[t.Any] = [
        {"type": "tool_use", "id": "a", "name": "add", "input": {"a": 1, "b": 0}},
        chat("b", "add", '{"a": 2, "b": 0}'),
        {"type": "function_call", "call_id": "c", "name": "add", "arguments": '{"a":3,"b":0}'},
        ToolCall("d", "add", {"a": 4, "b": 0}),
    ]
    result = execute_tool_calls(registry, calls)
    assert [r.value for r in result.results if isinstance(r, Ok)] == [1, 2, 3, 4]
    assert [m["tool_call_id"] for m in result.to_openai_messages()] == ["a", "b", "c", "d"]


def test_text_and_reasoning_items_of_a_response_are_skipped(registry: Registry) -> None:
    content = [
        {"type": "text", "text": "Let me add those."},
        {"type": "thinking", "thinking": "...", "signature": "x"},
        {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 1, "b": 2}},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]
    result = execute_tool_calls(registry, content)
    assert len(result) == 1
    assert result.results == [Ok(3)]


def test_an_unrecognised_item_is_an_err_of_its_own(registry: Registry) -> None:
    result = execute_tool_calls(
        registry, [{"type": "frobnicate", "id": "x1"}, 42, chat("ok", "add", '{"a":1,"b":1}')]
    )
    first, second, third = result.results
    assert isinstance(first, Err) and isinstance(first.reason, ToolError)
    assert "Tool call #1 could not be read" in first.reason.message
    assert "with type 'frobnicate'" in first.reason.message
    assert (
        isinstance(second, Err) and "Tool call #2 could not be read: int" in second.reason.message
    )
    assert third == Ok(2)
    assert result.calls[0].id == "x1"
    assert result.to_openai_messages()[0]["content"].startswith("Error: Tool call #1")


def test_a_call_without_a_name_is_an_err(registry: Registry) -> None:
    result = execute_tool_calls(registry, [{"id": "c", "type": "function", "function": {}}])
    assert isinstance(result.results[0], Err)
    assert "it has no tool name" in result.results[0].reason.message


def test_a_single_mapping_instead_of_a_list_is_a_type_error(registry: Registry) -> None:
    with pytest.raises(TypeError, match="list of tool calls"):
        execute_tool_calls(registry, chat("c", "add", "{}"))  # type: ignore[arg-type]


# -- per-call errors that run nothing ------------------------------------------------


def test_invalid_json_arguments_quote_line_and_column_and_run_nothing(
    executor: ToolExecutor,
) -> None:
    counter = Counter()
    registry = Registry([make(counter, name="count")], executor=executor)
    result = execute_tool_calls(registry, [chat("c1", "count", '{"a": }')])
    (err,) = result.results
    assert isinstance(err, Err) and type(err.reason) is ToolError
    assert err.reason.message == (
        "Invalid JSON arguments for 'count': Expecting value: line 1 column 7 (char 6)"
    )
    assert isinstance(err.reason.original_error, json.JSONDecodeError)
    assert counter.calls == []
    assert result.calls[0].arguments == '{"a": }'  # the raw text, as received


@pytest.mark.parametrize(
    "text",
    ['{"a": 1} trailing', '{"a": 1}}', '{"a": 1', "{'a': 1}", '{"a": NaN', "\ufeff{}"],
)
def test_invalid_json_arguments_get_json_loads_own_message(registry: Registry, text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as raised:
        json.loads(text)
    (err,) = execute_tool_calls(registry, [chat("c1", "add", text)]).results
    assert isinstance(err, Err)
    assert err.reason.message == f"Invalid JSON arguments for 'add': {raised.value}"


@pytest.mark.parametrize("text", ['{"a": 1, "b": 2}', ' {"a": 1, "b": 2}\n', '\t{"a":1,"b":2} '])
def test_json_arguments_read_as_json_loads_reads_them_whitespace_around_too(
    registry: Registry, text: str
) -> None:
    result = execute_tool_calls(registry, [chat("c1", "add", text)])
    assert result.calls[0].arguments == json.loads(text) == {"a": 1, "b": 2}
    assert isinstance(result.results[0], Ok) and result.results[0].value == 3


def test_invalid_json_on_a_later_line_names_that_line(registry: Registry) -> None:
    result = execute_tool_calls(registry, [chat("c1", "add", '{\n  "a": 1,\n  "b": \n}')])
    assert "line 4 column 1" in result.results[0].reason.message


def test_the_example_wording_of_an_invalid_json_error(registry: Registry) -> None:
    result = execute_tool_calls(registry, [chat("c1", "add", '{"a"')])
    assert result.results[0].reason.message.startswith("Invalid JSON arguments for 'add': ")
    result = execute_tool_calls(registry, [chat("c1", "add", "[1, ]")])
    assert result.results[0].reason.message == (
        "Invalid JSON arguments for 'add': Expecting value: line 1 column 5 (char 4)"
    )


@pytest.mark.parametrize(
    ("arguments", "got"),
    [("[1, 2]", "array"), ('"text"', "string"), ("3", "number"), ("true", "boolean"),
     ("null", "null")],
)  # fmt: skip
def test_json_that_is_not_an_object_is_an_err(registry: Registry, arguments: str, got: str) -> None:
    result = execute_tool_calls(registry, [chat("c1", "add", arguments)])
    (err,) = result.results
    assert isinstance(err, Err)
    assert err.reason.message == f"Invalid arguments for 'add': expected a JSON object, got {got}"


def test_anthropic_input_that_is_not_an_object_is_an_err(registry: Registry) -> None:
    block = {"type": "tool_use", "id": "t", "name": "add", "input": [1, 2]}
    (err,) = execute_tool_calls(registry, [block]).results
    assert isinstance(err, Err) and "expected a JSON object, got array" in err.reason.message


def test_empty_arguments_count_as_an_empty_object(executor: ToolExecutor) -> None:
    registry = Registry([make(lambda: "pong", name="ping")], executor=executor)
    result = execute_tool_calls(registry, [chat("c1", "ping", ""), chat("c2", "ping", "  ")])
    assert result.results == [Ok("pong"), Ok("pong")]


def test_an_unknown_tool_is_tool_not_found(registry: Registry) -> None:
    result = execute_tool_calls(registry, [chat("c1", "divide", "{not json")])
    (err,) = result.results
    assert isinstance(err, Err) and isinstance(err.reason, ToolNotFound)
    assert result.to_openai_messages()[0]["content"] == "Error: tool 'divide' not found"


def test_one_bad_call_does_not_stop_the_others(registry: Registry) -> None:
    result = execute_tool_calls(
        registry,
        [
            chat("1", "add", '{"a":1,"b":1}'),
            chat("2", "add", "{"),
            chat("3", "add", '{"a":0,"b":0}'),
        ],
    )
    assert [r.is_ok() for r in result.results] == [True, False, True]


# -- concurrency, order, context ---------------------------------------------------


def test_results_come_back_in_call_order_whatever_finishes_first(executor: ToolExecutor) -> None:
    second_done = threading.Event()
    finished: list[str] = []

    def first() -> str:
        assert second_done.wait(WAIT), "the calls did not run concurrently"
        finished.append("first")
        return "first"

    def second() -> str:
        finished.append("second")
        second_done.set()
        return "second"

    registry = Registry([make(first, timeout=WAIT * 2), make(second)], executor=executor)
    result = execute_tool_calls(registry, [chat("a", "first", "{}"), chat("b", "second", "{}")])
    assert finished == ["second", "first"]
    assert result.results == [Ok("first"), Ok("second")]
    assert [m["content"] for m in result.to_openai_messages()] == ["first", "second"]


def test_context_updates_apply_in_call_order_not_finish_order(executor: ToolExecutor) -> None:
    second_done = threading.Event()

    def note(text: str) -> Ok[str]:
        if text == "first":
            assert second_done.wait(WAIT)
        else:
            second_done.set()
        return Ok(text, ContextUpdate().append("log", text))

    registry = Registry([make(note)], executor=executor)
    ctx = RunContext.new({"log": ["start"]})
    result = execute_tool_calls(
        registry,
        [chat("1", "note", '{"text": "first"}'), chat("2", "note", '{"text": "second"}')],
        ctx,
    )
    assert result.context.deps == {"log": ["start", "first", "second"]}
    assert ctx.deps == {"log": ["start"]}  # the input context is left as it was


def test_the_default_context_is_a_new_run_context(registry: Registry) -> None:
    result = execute_tool_calls(registry, [])
    assert isinstance(result.context, RunContext)
    assert result.context.deps is None
    assert result.results == [] and result.all_ok


def test_a_timed_out_call_never_applies_its_update(executor: ToolExecutor) -> None:
    def slow(ctx: RunContext[t.Any]) -> Ok[str]:
        ctx.cancelled.wait(WAIT)
        return Ok("late", ContextUpdate().set("slow", "applied"))

    def quick() -> Ok[str]:
        return Ok("quick", ContextUpdate().set("quick", "applied"))

    def broken() -> Ok[str]:
        raise RuntimeError("broken")

    registry = Registry(
        [make(slow, timeout=0.1), make(quick), make(broken, retries=0)], executor=executor
    )
    result = execute_tool_calls(
        registry,
        [chat("s", "slow", "{}"), chat("q", "quick", "{}"), chat("b", "broken", "{}")],
        RunContext.new({}),
    )
    slow_result = result.results[0]
    assert isinstance(slow_result, Err) and isinstance(slow_result.reason, ToolTimeout)
    assert result.context.deps == {"quick": "applied"}
    assert result.to_openai_messages()[0]["content"] == (
        "Error: tool 'slow' timed out after 0.1 s and was not retried"
    )


def test_an_update_that_cannot_be_applied_is_skipped_with_a_warning(
    registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    registry.register(make(lambda: Ok(1, ContextUpdate().set("k", 1)), name="setter"))
    ctx = RunContext.new(deps=["not", "a", "mapping"])
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        result = execute_tool_calls(registry, [chat("c", "setter", "{}")], ctx)
    assert result.results[0].is_ok()  # the call succeeded; only its update is skipped
    assert result.context is ctx
    assert "could not be applied" in caplog.text


def test_tools_see_the_callers_contextvars_and_their_own_call(executor: ToolExecutor) -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
    barrier = threading.Barrier(2, timeout=WAIT)

    def who() -> str:
        barrier.wait()  # both calls in flight at once, in different threads
        call = current_tool_call()
        assert call is not None
        return f"{request_id.get()}:{call.id}"

    registry = Registry([make(who, timeout=WAIT * 2)], executor=executor)
    request_id.set("req-7")
    result = execute_tool_calls(registry, [chat("a", "who", "{}"), chat("b", "who", "{}")])
    assert result.results == [Ok("req-7:a"), Ok("req-7:b")]
    assert current_tool_call() is None


# -- the registry path: approval and advice -----------------------------------------


def test_the_approval_handler_receives_each_calls_id(executor: ToolExecutor) -> None:
    seen: list[ApprovalRequest] = []
    lock = threading.Lock()

    def handler(request: ApprovalRequest) -> str:
        with lock:
            seen.append(request)
        return "reject" if request.id == "call_2" else "approve"

    registry = Registry([make(Counter(), name="rm", approval="ask")], executor=executor)
    ctx = RunContext.new(approval_handler=handler)
    items = [
        {"type": "function_call", "call_id": "call_1", "name": "rm", "arguments": '{"p": 1}'},
        {"type": "function_call", "call_id": "call_2", "name": "rm", "arguments": '{"p": 2}'},
    ]
    result = execute_tool_calls(registry, items, ctx)
    assert sorted((r.id, r.name, dict(r.arguments)) for r in seen) == [
        ("call_1", "rm", {"p": 1}),
        ("call_2", "rm", {"p": 2}),
    ]
    ok, rejected = result.results
    assert ok == Ok("ran")
    assert isinstance(rejected, Err)
    assert result.to_responses_items()[1]["output"] == (
        "Error: tool 'rm' was rejected by the approval handler"
    )


def test_an_ask_tool_without_a_handler_comes_back_as_needs_approval(
    executor: ToolExecutor,
) -> None:
    counter = Counter()
    registry = Registry([make(add), make(counter, name="rm", approval="ask")], executor=executor)
    result = execute_tool_calls(
        registry, [chat("c1", "add", '{"a":1,"b":1}'), chat("c2", "rm", '{"path": "/tmp/x"}')]
    )
    done, pending = result.results
    assert done == Ok(2)
    assert isinstance(pending, NeedsApproval)
    assert pending.tool.name == "rm" and pending.arguments == {"path": "/tmp/x"}
    assert result.pending == [pending]
    assert counter.calls == []
    assert not result.all_ok
    # Pending calls are left out by default: a message would use up the call id.
    assert result.to_openai_messages() == [{"role": "tool", "tool_call_id": "c1", "content": "2"}]
    assert [b["tool_use_id"] for b in result.to_anthropic_blocks()] == ["c1"]
    assert [i["call_id"] for i in result.to_responses_items()] == ["c1"]
    content = f"Pending approval: tool 'rm' needs a person's approval (id {pending.id}); it has not run yet."
    assert result.to_openai_messages(include_pending=True)[1] == {
        "role": "tool",
        "tool_call_id": "c2",
        "content": content,
    }
    assert result.to_anthropic_blocks(include_pending=True)[1]["is_error"] is False
    assert registry.execute_approved(pending) == Ok("ran")


def test_an_ask_tool_runs_in_a_gated_context(executor: ToolExecutor) -> None:
    registry = Registry([make(Counter(), name="rm", approval="ask")], executor=executor)
    result = execute_tool_calls(
        registry, [chat("c", "rm", "{}")], RunContext.new(approval_gated=True)
    )
    assert result.results == [Ok("ran")]


def test_a_deny_tool_is_denied(executor: ToolExecutor) -> None:
    registry = Registry([make(Counter(), name="nuke", approval="deny")], executor=executor)
    result = execute_tool_calls(registry, [chat("c", "nuke", "{}")])
    assert isinstance(result.results[0], Err) and isinstance(result.results[0].reason, ToolDenied)
    assert (
        result.to_openai_messages()[0]["content"] == "Error: tool 'nuke' is denied and was not run"
    )


def test_registry_advice_applies(registry: Registry) -> None:
    registry.advice.register("before", "add", lambda args: {**args, "b": 100})
    result = execute_tool_calls(registry, [chat("c", "add", '{"a": 1, "b": 2}')])
    assert result.results == [Ok(101)]


def test_another_executor_runs_the_calls_with_the_registry_path(executor: ToolExecutor) -> None:
    counter = Counter()
    registry = Registry(
        [make(add, timeout=WAIT), make(counter, name="rm", approval="ask")], executor=executor
    )
    registry.advice.register("after", "add", lambda result: Ok(result.value * 10))
    with ToolExecutor(max_workers=2) as other:
        result = execute_tool_calls(
            registry,
            [chat("1", "add", '{"a": 1, "b": 2}'), chat("2", "rm", "{}")],
            executor=other,
        )
        assert other.stats()["completed"] >= 1
    assert result.results[0] == Ok(30)
    assert isinstance(result.results[1], NeedsApproval)
    assert counter.calls == []


# -- what the model is told ---------------------------------------------------------


def test_message_shapes_for_each_provider(executor: ToolExecutor) -> None:
    def fail() -> str:
        raise RuntimeError("timeout talking to API")

    registry = Registry(
        [make(add), make(lambda: {"temp": 21, "unit": "C"}, name="weather"), make(fail, retries=0)],
        executor=executor,
    )
    result = execute_tool_calls(
        registry,
        [chat("a", "add", '{"a":1,"b":2}'), chat("w", "weather", "{}"), chat("f", "fail", "{}")],
    )
    error = "Error: tool 'fail' failed: Tool execution failed: RuntimeError: timeout talking to API"
    assert result.to_openai_messages() == [
        {"role": "tool", "tool_call_id": "a", "content": "3"},
        {"role": "tool", "tool_call_id": "w", "content": '{"temp": 21, "unit": "C"}'},
        {"role": "tool", "tool_call_id": "f", "content": error},
    ]
    assert result.to_responses_items() == [
        {"type": "function_call_output", "call_id": "a", "output": "3"},
        {"type": "function_call_output", "call_id": "w", "output": '{"temp": 21, "unit": "C"}'},
        {"type": "function_call_output", "call_id": "f", "output": error},
    ]
    assert result.to_anthropic_blocks() == [
        {"type": "tool_result", "tool_use_id": "a", "content": "3", "is_error": False},
        {
            "type": "tool_result",
            "tool_use_id": "w",
            "content": '{"temp": 21, "unit": "C"}',
            "is_error": False,
        },
        {"type": "tool_result", "tool_use_id": "f", "content": error, "is_error": True},
    ]


def test_ok_content_is_the_string_or_json_with_safe_fallbacks() -> None:
    class Unrepresentable:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    assert format_tool_result(Ok("plain text")) == "plain text"
    assert format_tool_result(Ok(None)) == "null"
    assert format_tool_result(Ok({"ü": [1, 2.5, True]})) == '{"ü": [1, 2.5, true]}'
    assert format_tool_result(Ok({"when": {1, 2}})) == '{"when": [1, 2]}'
    assert format_tool_result(Ok({"what": object})) == '{"what": "<class \'object\'>"}'
    assert format_tool_result(Ok([Unrepresentable()])) == (
        '["<Unrepresentable object (its repr() raised)>"]'
    )
    cycle: list[t.Any] = []
    cycle.append(cycle)
    assert format_tool_result(Ok(cycle)) == "[[...]]"
    rows: dict[str, t.Any] = {"rows": [{"id": 1}]}
    rows["rows"][0]["parent"] = rows  # a cycle deep in plain data: its repr, as before
    assert format_tool_result(Ok(rows)) == "{'rows': [{'id': 1, 'parent': {...}}]}"
    assert format_tool_result(Ok({(1, 2): "tuple key"})) == "{(1, 2): 'tuple key'}"


def test_a_cyclic_result_is_its_repr_also_under_a_high_recursion_limit() -> None:
    # A cycle must be found at once, not followed as deep as the limit allows (past
    # what a thread's C stack takes): run apart, since a regression is a crash.
    script = (
        "import sys, threading\n"
        "sys.setrecursionlimit(200_000)\n"
        "from nous_tools import Ok, format_tool_result\n"
        "rows = {'rows': []}; rows['rows'].append(rows)\n"
        "worker = threading.Thread(target=lambda: print(format_tool_result(Ok(rows))))\n"
        "worker.start(); worker.join()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout) == (0, "{'rows': [{...}]}\n"), done.stderr


def test_err_content_for_a_returned_err() -> None:
    assert format_tool_result(Err("no such city"), "weather") == (
        "Error: tool 'weather' failed: no such city"
    )
    assert format_tool_result(Err(ToolError("quota exceeded")), "weather") == (
        "Error: tool 'weather' failed: quota exceeded"
    )
    assert format_tool_result(Err(ToolError("quota", tool_name="w"))) == (
        "Error: tool 'w' failed: quota"
    )
    assert format_tool_result(Err(ToolError("x" * 5000)), "w").endswith("…")
    assert len(format_tool_result(Err(ToolError("x" * 5000)), "w")) == 2000


SECRET = "sk-live-0123456789"


class AuthError(Exception):
    """Keeps the token in an attribute and prints it in its own __str__."""

    def __init__(self, token: str) -> None:
        super().__init__("authentication failed")
        self.token = token

    def __str__(self) -> str:
        return f"authentication failed for token {self.token}"


@pytest.mark.parametrize("timeout", [None, 5.0], ids=["inline", "worker"])
def test_the_model_gets_the_exception_type_and_its_message_never_a_traceback(
    executor: ToolExecutor, timeout: float | None
) -> None:
    def lookup(key: int) -> str:
        return {1: "one"}[key]

    def silent() -> str:
        raise ValueError()

    registry = Registry(
        [make(lookup, retries=0, timeout=timeout), make(silent, retries=0, timeout=timeout)],
        executor=executor,
    )
    result = execute_tool_calls(
        registry, [chat("k", "lookup", '{"key": 2}'), chat("s", "silent", "{}")]
    )
    first, second = result.results
    assert isinstance(first, Err) and isinstance(second, Err)
    assert first.reason.message == "Tool execution failed: KeyError: 2"
    assert second.reason.message == "Tool execution failed: ValueError"
    assert [m["content"] for m in result.to_openai_messages()] == [
        "Error: tool 'lookup' failed: Tool execution failed: KeyError: 2",
        "Error: tool 'silent' failed: Tool execution failed: ValueError",
    ]
    assert "Traceback" not in json.dumps(result.to_anthropic_blocks())


def test_errors_never_carry_a_stack_trace_or_a_secret_the_message_did_not(
    executor: ToolExecutor,
) -> None:
    def own_message(api_key: str) -> str:
        raise ValueError(f"bad key {api_key}")

    def extra_argument(api_key: str) -> str:
        raise ValueError("login failed", api_key)

    def attribute(api_key: str) -> str:
        raise AuthError(api_key)

    def no_message(api_key: str) -> str:
        raise RuntimeError(403, api_key)  # no message argument: named by its class

    def nested(api_key: str) -> str:
        try:
            raise ConnectionError(f"upstream said {api_key}")
        except ConnectionError as exc:
            raise RuntimeError("upstream failed") from exc

    tools = [own_message, extra_argument, attribute, no_message, nested]
    registry = Registry([make(fn, retries=0) for fn in tools], executor=executor)
    arguments = json.dumps({"api_key": SECRET})
    result = execute_tool_calls(
        registry, [chat(fn.__name__, fn.__name__, arguments) for fn in tools]
    )
    contents = [m["content"] for m in result.to_openai_messages()]
    assert contents == [
        f"Error: tool 'own_message' failed: Tool execution failed: ValueError: bad key {SECRET}",
        "Error: tool 'extra_argument' failed: Tool execution failed: ValueError: login failed",
        "Error: tool 'attribute' failed: Tool execution failed: AuthError: authentication failed",
        "Error: tool 'no_message' failed: Tool execution failed: RuntimeError",
        "Error: tool 'nested' failed: Tool execution failed: RuntimeError: upstream failed",
    ]
    everything = json.dumps(
        [result.to_openai_messages(), result.to_responses_items(), result.to_anthropic_blocks()]
    )
    assert "Traceback" not in everything
    assert 'File "' not in everything
    assert everything.count(SECRET) == 3  # only own_message's, in each of the three formats
    assert "ValueError(" not in everything and "AuthError(" not in everything


def test_an_err_wrapping_a_raw_exception_is_worded_by_its_message() -> None:
    assert format_tool_result(Err(OSError(2, "No such file", "/etc/secret")), "read") == (
        "Error: tool 'read' failed: [Errno 2] No such file"
    )
    assert format_tool_result(Err(ValueError()), "x") == "Error: tool 'x' failed: ValueError"
    # two arguments of an OSError are (errno, strerror) only when the first is an errno
    assert format_tool_result(Err(PermissionError("denied", SECRET)), "x") == (
        "Error: tool 'x' failed: denied"
    )


# -- the result object --------------------------------------------------------------


def test_the_result_object_is_a_sequence_of_results(registry: Registry) -> None:
    result = execute_tool_calls(
        registry, [chat("1", "add", '{"a":1,"b":1}'), chat("2", "add", '{"a":2,"b":2}')]
    )
    assert isinstance(result, ToolCallResults)
    assert len(result) == 2
    assert list(result) == [Ok(2), Ok(4)]
    assert result[1] == Ok(4)
    assert result.all_ok
    assert result.pending == []
    assert "Ok" in repr(result)


def test_an_observer_set_with_observe_calls_sees_each_whole_call_refused_ones_too() -> None:
    from nous_tools.providers._tool_calls import call_observer, observe_calls

    seen: list[tuple[str, str, object]] = []

    class Observer:
        def call_started(self, tool: t.Any, call: t.Any) -> object:
            return (tool.name, call.id)

        def call_ended(self, token: object, result: object) -> None:
            name, call_id = t.cast("tuple[str, str]", token)
            seen.append((name, call_id, type(result).__name__))

    def add(a: int, b: int) -> int:
        return a + b

    registry = Registry([Tool.from_function(add)])
    observer = Observer()
    previous = observe_calls(observer)
    try:
        assert call_observer() is observer
        calls = [
            {
                "id": "ok",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
            },
            {"id": "bad", "type": "function", "function": {"name": "add", "arguments": "{"}},
        ]
        execute_tool_calls(registry, calls)
    finally:
        assert observe_calls(previous) is observer
    assert sorted(seen) == [("add", "bad", "Err"), ("add", "ok", "Ok")]
    assert call_observer() is previous
