"""The pipeline of SPEC section 2, ported from the behaviours Nous's own tests check."""

from __future__ import annotations

import itertools
import logging
import threading
import time
import typing as t

import pytest
import tenacity

from nous_tools import (
    ContextUpdate,
    Edit,
    Err,
    Ok,
    RunContext,
    Tool,
    ToolDenied,
    ToolError,
    ToolExecutor,
    ToolTimeout,
    execute,
    tool,
)


def make(fn: t.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("timeout", None)
    return Tool.from_function(fn, **options)


# -- calling convention ------------------------------------------------------


def test_ctx_taking_tool_sees_deps_and_first_attempt_retry_zero(executor: ToolExecutor) -> None:
    def lookup(ctx: RunContext[dict[str, str]], key: str) -> tuple[str, int]:
        return ctx.deps[key], ctx.retry

    result = executor.execute(make(lookup), {"key": "db"}, RunContext.new({"db": "postgres"}))
    assert result == Ok(("postgres", 0))


def test_arity_free_tool_runs_without_ctx(executor: ToolExecutor) -> None:
    result = executor.execute(make(lambda: "pong", name="ping"), {}, RunContext.new())
    assert result == Ok("pong")


def test_from_function_detects_takes_ctx() -> None:
    def with_ctx(ctx, x: int) -> int:  # type: ignore[no-untyped-def]
        return x

    def annotated(c: RunContext[t.Any], x: int) -> int:
        return x

    def without(x: int) -> int:
        return x

    assert Tool.from_function(with_ctx).takes_ctx is True
    assert Tool.from_function(annotated).takes_ctx is True
    assert Tool.from_function(without).takes_ctx is False
    assert "ctx" not in Tool.from_function(with_ctx).parameters["properties"]  # type: ignore[index]


def test_timed_ctx_tool_sees_deadline_and_cancel_event(executor: ToolExecutor) -> None:
    def probe(ctx: RunContext[t.Any]) -> tuple[bool, bool]:
        return ctx.deadline is not None, ctx.cancelled.is_set()

    assert executor.execute(make(probe, timeout=5), {}) == Ok((True, False))


def test_none_arguments_count_as_empty(executor: ToolExecutor) -> None:
    assert executor.execute(make(lambda: 1, name="one"), None) == Ok(1)


def test_kwargs_tool_receives_every_argument(executor: ToolExecutor) -> None:
    def anything(**kwargs: t.Any) -> dict[str, t.Any]:
        return kwargs

    assert executor.execute(make(anything), {"a": 1, "b": [2]}) == Ok({"a": 1, "b": [2]})


# -- validation --------------------------------------------------------------


def test_missing_required_field_never_runs_the_tool(executor: ToolExecutor) -> None:
    ran = []

    def greet(name: str) -> str:
        ran.append(name)
        return name

    result = executor.execute(make(greet), {})
    assert isinstance(result, Err)
    assert ran == []
    assert result.reason.original_error == ("missing_required", ["name"])
    assert result.reason.message == "Invalid arguments for 'greet': Missing required fields: name"
    assert result.reason.attempt == 1


def test_type_mismatch_is_reported_in_nous_words(executor: ToolExecutor) -> None:
    def count(n: int) -> int:
        return n

    result = executor.execute(make(count), {"n": "three"})
    assert isinstance(result, Err)
    assert "Type mismatch: n: expected integer, got string" in result.reason.message
    assert result.reason.original_error == ("type_mismatch", [("n", "integer", "string")])


def test_nested_paths_name_the_field(executor: ToolExecutor) -> None:
    schema = {
        "type": "object",
        "properties": {
            "filter": {"type": "object", "properties": {"min": {"type": "integer"}}},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    search = Tool(name="search", function=lambda **kw: kw, parameters=schema, timeout=None)
    result = executor.execute(search, {"filter": {"min": "low"}, "tags": ["a", 2]})
    assert isinstance(result, Err)
    assert "filter.min: expected integer, got string" in result.reason.message
    assert "tags[1]: expected string, got integer" in result.reason.message


def test_validate_args_false_skips_validation(executor: ToolExecutor) -> None:
    def count(n: int) -> t.Any:
        return n

    assert executor.execute(make(count, validate_args=False), {"n": "x"}) == Ok("x")


def test_valid_arguments_pass_through(executor: ToolExecutor) -> None:
    def add(a: int, b: int = 2) -> int:
        return a + b

    assert executor.execute(make(add), {"a": 1}) == Ok(3)


def test_non_mapping_arguments_get_an_err_naming_the_type(executor: ToolExecutor) -> None:
    result = executor.execute(make(lambda: 1, name="one"), ["a", "b"])  # type: ignore[arg-type]
    assert isinstance(result, Err)
    assert "expected a mapping" in result.reason.message and "list" in result.reason.message


def test_non_string_argument_names_get_a_clear_err(executor: ToolExecutor) -> None:
    def anything(**kwargs: t.Any) -> t.Any:
        return kwargs

    result = executor.execute(make(anything, retries=3), {1: "x"})  # type: ignore[dict-item]
    assert isinstance(result, Err)
    assert "argument names must be strings" in result.reason.message


# -- retries -----------------------------------------------------------------


def test_flaky_tool_succeeds_on_second_attempt_and_logs_it(
    executor: ToolExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("transient")
        return "ok"

    caplog.set_level(logging.DEBUG, logger="nous_tools")
    assert executor.execute(make(flaky, retries=2), {}) == Ok("ok")
    assert len(calls) == 2
    assert "failed (attempt 1/3), will retry" in caplog.text
    assert "succeeded on retry attempt 2" in caplog.text
    retry_record = next(r for r in caplog.records if "will retry" in r.getMessage())
    assert retry_record.levelno == logging.WARNING
    success_record = next(r for r in caplog.records if "succeeded on retry" in r.getMessage())
    assert success_record.levelno == logging.INFO


def test_always_failing_tool_ends_after_all_attempts_keeping_the_exception(
    executor: ToolExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    boom = RuntimeError("boom")

    def broken() -> None:
        raise boom

    result = executor.execute(make(broken, retries=2), {})
    assert isinstance(result, Err)
    assert isinstance(result.reason, ToolError)
    assert result.reason.attempt == 3
    assert result.reason.original_error is boom
    assert result.reason.message == "Tool execution failed: RuntimeError: boom"
    final = next(r for r in caplog.records if "failed after all" in r.getMessage())
    assert final.levelno == logging.ERROR
    text = final.getMessage()
    assert "failed after all 3 attempt(s)" in text
    assert "Error: Tool execution failed (RuntimeError)" in text
    assert "Error type: RuntimeError" in text
    assert "boom" not in text  # the exception's text goes to the debug level only
    assert "Error type: RuntimeError" in text


def test_retries_zero_means_one_attempt_and_no_will_retry(
    executor: ToolExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    calls = []

    def broken() -> None:
        calls.append(1)
        raise ValueError("no")

    result = executor.execute(make(broken, retries=0), {})
    assert isinstance(result, Err) and result.reason.attempt == 1
    assert calls == [1]
    assert "will retry" not in caplog.text
    assert "failed after all 1 attempt(s)" in caplog.text


def test_ctx_retry_counts_attempts_from_zero(executor: ToolExecutor) -> None:
    seen: list[int] = []

    def flaky(ctx: RunContext[t.Any]) -> str:
        seen.append(ctx.retry)
        if ctx.retry < 2:
            raise OSError("again")
        return "done"

    assert executor.execute(make(flaky, retries=2), {}) == Ok("done")
    assert seen == [0, 1, 2]


def test_ctx_retry_counts_attempts_in_workers_too(executor: ToolExecutor) -> None:
    seen: list[int] = []

    def flaky(ctx: RunContext[t.Any]) -> str:
        seen.append(ctx.retry)
        if ctx.retry < 1:
            raise OSError("again")
        return "done"

    assert executor.execute(make(flaky, retries=1, timeout=5), {}) == Ok("done")
    assert seen == [0, 1]


def test_returned_err_is_not_retried(executor: ToolExecutor) -> None:
    calls = []

    def refuses() -> Err:
        calls.append(1)
        return Err("not today")

    assert executor.execute(make(refuses, retries=3), {}) == Err("not today")
    assert calls == [1]


def test_retry_wait_strategy_is_honoured_between_attempts(executor: ToolExecutor) -> None:
    starts: list[float] = []

    def broken() -> None:
        starts.append(time.monotonic())
        raise ValueError("x")

    wait = tenacity.wait_fixed(0.2)
    result = executor.execute(make(broken, retries=2, retry_wait=wait), {})
    assert isinstance(result, Err) and result.reason.attempt == 3
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert len(gaps) == 2
    assert all(gap >= 0.2 for gap in gaps)  # a sleep is never shorter than asked


def test_base_exception_is_never_retried(executor: ToolExecutor) -> None:
    calls = []

    def exits() -> None:
        calls.append(1)
        raise SystemExit(3)

    result = executor.execute(make(exits, retries=3), {})
    assert isinstance(result, Err) and isinstance(result.reason, ToolError)
    assert isinstance(result.reason.original_error, SystemExit)
    assert calls == [1]


def test_keyboard_interrupt_in_an_inline_attempt_propagates(executor: ToolExecutor) -> None:
    def ctrl_c() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        executor.execute(make(ctrl_c), {})


def test_keyboard_interrupt_inside_a_worker_is_an_err(executor: ToolExecutor) -> None:
    def ctrl_c() -> None:
        raise KeyboardInterrupt

    result = executor.execute(make(ctrl_c, timeout=5, retries=2), {})
    assert isinstance(result, Err)
    assert isinstance(result.reason.original_error, KeyboardInterrupt)


def test_returned_value_is_wrapped_in_ok_including_none(executor: ToolExecutor) -> None:
    assert executor.execute(make(lambda: None, name="nothing"), {}) == Ok(None)


# -- timeouts ----------------------------------------------------------------


def test_timeout_returns_at_the_deadline_and_is_never_retried(executor: ToolExecutor) -> None:
    runs = []
    release = threading.Event()

    def slow() -> str:
        runs.append(1)
        release.wait(5)
        return "late"

    began = time.monotonic()
    result = executor.execute(make(slow, timeout=0.1, retries=3), {})
    elapsed = time.monotonic() - began
    release.set()
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert result.reason.timeout == 0.1
    assert str(result.reason) == "Tool 'slow' timed out after 0.1 s"
    assert elapsed < 1.0
    assert runs == [1]


def test_tool_raising_timeout_error_is_terminal(executor: ToolExecutor) -> None:
    calls = []

    def socket_read() -> None:
        calls.append(1)
        raise TimeoutError("read timed out")

    result = executor.execute(make(socket_read, retries=3, timeout=7), {})
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert result.reason.timeout == 7
    assert calls == [1]


def test_late_context_update_of_a_timed_out_call_is_discarded(executor: ToolExecutor) -> None:
    release = threading.Event()

    def slow() -> Ok[str]:
        release.wait(5)
        return Ok("late", ContextUpdate().set("k", 1))

    result = executor.execute(make(slow, timeout=0.05), {})
    release.set()
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)


# -- approval ----------------------------------------------------------------


def _gated(**options: t.Any) -> tuple[Tool, list[dict[str, t.Any]]]:
    ran: list[dict[str, t.Any]] = []

    def delete(path: str) -> str:
        ran.append({"path": path})
        return f"deleted {path}"

    options.setdefault("approval", "ask")
    return make(delete, **options), ran


def test_auto_tool_runs_without_consulting_the_handler(executor: ToolExecutor) -> None:
    asked = []
    tool_, ran = _gated(approval="auto")
    ctx = RunContext.new(approval_handler=lambda req: asked.append(req) or "reject")
    assert executor.execute(tool_, {"path": "a"}, ctx) == Ok("deleted a")
    assert asked == []
    assert ran == [{"path": "a"}]


def test_gated_tool_without_handler_is_rejected_and_never_runs(
    executor: ToolExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    tool_, ran = _gated()
    result = executor.execute(tool_, {"path": "a"}, RunContext.new())
    assert isinstance(result, Err) and "requires approval" in result.reason.message
    assert "no approval_handler" in caplog.text
    assert ran == []


def test_requires_approval_keyword_means_ask() -> None:
    tool_ = Tool(name="x", function=lambda: 1, requires_approval=True)
    assert tool_.approval == "ask" and tool_.requires_approval


def test_handler_approve_runs_with_original_arguments(executor: ToolExecutor) -> None:
    requests = []
    tool_, ran = _gated()

    def handler(req: t.Any) -> str:
        requests.append(req)
        return "approve"

    result = executor.execute(tool_, {"path": "a"}, RunContext.new(approval_handler=handler))
    assert result == Ok("deleted a")
    assert ran == [{"path": "a"}]
    (req,) = requests
    assert (req.name, req.id, dict(req.arguments), req.tool) == (
        "delete",
        None,
        {"path": "a"},
        tool_,
    )


def test_handler_reject_never_runs_the_tool(executor: ToolExecutor) -> None:
    tool_, ran = _gated()
    ctx = RunContext.new(approval_handler=lambda req: "reject")
    result = executor.execute(tool_, {"path": "a"}, ctx)
    assert isinstance(result, Err)
    assert "rejected by the approval handler" in result.reason.message
    assert ran == []


def test_handler_edit_runs_with_edited_arguments(executor: ToolExecutor) -> None:
    tool_, ran = _gated()
    ctx = RunContext.new(approval_handler=lambda req: Edit({"path": "safe"}))
    assert executor.execute(tool_, {"path": "a"}, ctx) == Ok("deleted safe")
    assert ran == [{"path": "safe"}]


def test_edited_arguments_are_validated(executor: ToolExecutor) -> None:
    tool_, ran = _gated()
    ctx = RunContext.new(approval_handler=lambda req: Edit({"path": 5}))
    result = executor.execute(tool_, {"path": "a"}, ctx)
    assert isinstance(result, Err)
    assert "Type mismatch: path: expected string, got integer" in result.reason.message
    assert ran == []


@pytest.mark.parametrize("answer", [None, "yes", True, 1, {"edit": {}}, ("edit", {})])
def test_garbage_handler_answer_is_a_rejection_logging_its_type(
    executor: ToolExecutor, caplog: pytest.LogCaptureFixture, answer: object
) -> None:
    tool_, ran = _gated()
    ctx = RunContext.new(approval_handler=lambda req: answer)
    result = executor.execute(tool_, {"path": "secret-path"}, ctx)
    assert isinstance(result, Err)
    assert ran == []
    assert "expected 'approve'" in caplog.text
    assert type(answer).__name__ in caplog.text
    assert "secret-path" not in caplog.text


def test_raising_handler_is_a_rejection_keeping_the_exception(executor: ToolExecutor) -> None:
    tool_, ran = _gated()
    boom = RuntimeError("handler broke")

    def handler(req: t.Any) -> str:
        raise boom

    result = executor.execute(tool_, {"path": "a"}, RunContext.new(approval_handler=handler))
    assert isinstance(result, Err) and result.reason.original_error is boom
    assert ran == []


def test_approval_gated_context_runs_without_asking(executor: ToolExecutor) -> None:
    tool_, ran = _gated()
    ctx = RunContext.new(approval_gated=True)
    assert executor.execute(tool_, {"path": "a"}, ctx) == Ok("deleted a")
    assert ran == [{"path": "a"}]


def test_deny_tool_never_runs(executor: ToolExecutor) -> None:
    tool_, ran = _gated(approval="deny")
    ctx = RunContext.new(approval_gated=True, approval_handler=lambda req: "approve")
    result = executor.execute(tool_, {"path": "a"}, ctx)
    assert isinstance(result, Err) and isinstance(result.reason, ToolDenied)
    assert ran == []


def test_approval_runs_once_not_per_retry(executor: ToolExecutor) -> None:
    asked = []
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OSError("again")
        return "ok"

    ctx = RunContext.new(approval_handler=lambda req: asked.append(1) or "approve")
    assert executor.execute(make(flaky, approval="ask", retries=2), {}, ctx) == Ok("ok")
    assert asked == [1]


# -- context updates and results ---------------------------------------------


def test_tool_returning_ok_with_update_passes_it_through(executor: ToolExecutor) -> None:
    update = ContextUpdate().set("seen", True)
    result = executor.execute(make(lambda: Ok(1, update), name="u"), {})
    assert result == Ok(1, update)
    assert isinstance(result, Ok) and result.update is update


def test_module_level_execute_uses_a_default_executor() -> None:
    assert execute(make(lambda: 2, name="two", timeout=1), {}) == Ok(2)


def test_execute_rejects_a_non_tool_with_an_err(executor: ToolExecutor) -> None:
    result = executor.execute(len, {})  # type: ignore[arg-type]
    assert isinstance(result, Err) and "expects a Tool" in result.reason.message


def test_decorator_with_options_builds_a_tool() -> None:
    @tool(timeout=2, retries=0, approval="ask", tags=["fs"])
    def remove(path: str) -> None:
        """Remove a file.

        More detail here.
        """

    assert isinstance(remove, Tool)
    assert (remove.timeout, remove.retries, remove.approval, remove.tags) == (
        2.0,
        0,
        "ask",
        ("fs",),
    )
    assert remove.description == "Remove a file."
