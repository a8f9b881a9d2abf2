"""The backend seam (issue 16): ``ToolExecutor(backend=..., backends=...)``,
``Tool(backend=...)``, and what a backend may and may not change about a call."""

from __future__ import annotations

import logging
import threading
import time
import typing as t

import pytest

from nous_tools import Err, Ok, RunContext, Tool, ToolError, ToolExecutor, ToolTimeout, tool
from nous_tools.backend import (
    NOT_SENT,
    Backend,
    ProcessBackend,
    ThreadBackend,
    not_sent,
    raised,
    returned,
    timed_out,
)


class Recording:
    """A backend that records each attempt and answers from a script (or runs the
    tool in the calling thread when the script is empty)."""

    def __init__(self, *answers: t.Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[Tool, dict[str, t.Any], RunContext[t.Any] | None, float]] = []
        self.threads: list[int] = []
        self.shut = False

    def run(self, tool: Tool, arguments: t.Any, ctx: t.Any, deadline: float) -> t.Any:
        self.calls.append((tool, dict(arguments), ctx, deadline))
        self.threads.append(threading.get_ident())
        if self.answers:
            answer = self.answers.pop(0)
            if isinstance(answer, BaseException):
                raise answer
            return answer
        args = (ctx,) if ctx is not None else ()
        return returned(tool.function(*args, **arguments))

    def stats(self) -> dict[str, int]:
        return {"attempts": len(self.calls)}

    def shutdown(self, wait: bool = True) -> None:
        self.shut = True


def test_the_built_in_backends_satisfy_the_protocol() -> None:
    threads, processes = ThreadBackend(max_workers=1), ProcessBackend(max_workers=1)
    try:
        assert isinstance(threads, Backend)
        assert isinstance(processes, Backend)
        assert isinstance(Recording(), Backend)
    finally:
        threads.shutdown()
        processes.shutdown()


def test_tool_backend_option_is_checked_at_construction() -> None:
    def f() -> int:
        return 1

    assert Tool.from_function(f, backend="ray").backend == "ray"
    assert Tool.from_function(f).backend is None
    with pytest.raises(ValueError, match="'backend' must be a backend's name"):
        Tool.from_function(f, backend="")
    with pytest.raises(ValueError, match="'backend' must be a backend's name"):
        Tool.from_function(f, backend=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a timeout"):
        Tool.from_function(f, backend="ray", timeout=None)
    with pytest.raises(ValueError, match="disagree"):
        Tool.from_function(f, backend="ray", isolation="process")
    assert Tool.from_function(f, backend="process", isolation="process").backend == "process"


def test_executor_refuses_reserved_unknown_and_malformed_backends() -> None:
    for reserved in ("thread", "process", "default"):
        with pytest.raises(ValueError, match="reserved"):
            ToolExecutor(backends={reserved: Recording()})
    with pytest.raises(TypeError, match="has no run"):
        ToolExecutor(backends={"x": object()})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="names 'nope'"):
        ToolExecutor(backend="nope")
    with pytest.raises(TypeError, match="must be a mapping"):
        ToolExecutor(backends=[("x", Recording())])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'after_task' must be callable"):
        ToolExecutor(after_task=3)  # type: ignore[arg-type]


def test_a_tool_naming_a_backend_runs_there_with_the_attempts_context() -> None:
    remote = Recording()

    @tool(timeout=5, backend="remote", retries=0)
    def heavy(ctx: RunContext, n: int) -> int:
        assert not ctx.cancelled.is_set()
        return n * ctx.deps["factor"]

    @tool(timeout=5)
    def cheap(n: int) -> int:
        return n + 1

    with ToolExecutor(max_workers=2, backends={"remote": remote}) as executor:
        before = time.monotonic()
        assert executor.execute(heavy, {"n": 4}, RunContext.new({"factor": 10})) == Ok(40)
        assert executor.execute(cheap, {"n": 4}) == Ok(5)
        assert executor.stats()["completed"] == 1  # cheap: on the worker threads
    assert len(remote.calls) == 1
    sent_tool, arguments, ctx, deadline = remote.calls[0]
    assert sent_tool is heavy and arguments == {"n": 4}
    assert ctx is not None and ctx.retry == 0 and ctx.deps == {"factor": 10}
    assert ctx.deadline == deadline and before + 4 < deadline <= time.monotonic() + 5
    assert remote.shut  # the executor owns the backends it was given


def test_approval_validation_and_conversion_stay_in_the_caller() -> None:
    remote = Recording()
    asked: list[int] = []

    @tool(timeout=5, backend="remote", approval="ask", retries=0)
    def guarded(n: int) -> int:
        return n

    def handler(request: t.Any) -> str:
        asked.append(threading.get_ident())
        return "approve"

    with ToolExecutor(backends={"remote": remote}) as executor:
        ctx = RunContext.new(approval_handler=handler)
        bad = executor.execute(guarded, {"n": "not a number"}, ctx)
        assert isinstance(bad, Err) and "Invalid arguments" in bad.reason.message
        assert asked == [threading.get_ident()]
        assert remote.calls == []  # validation failed here: nothing was sent
        assert executor.execute(guarded, {"n": 3}, ctx) == Ok(3)
    assert len(remote.calls) == 1
    assert remote.calls[0][1] == {"n": 3}


def test_signals_are_sent_from_the_callers_thread(recorder: t.Any) -> None:
    seen: list[int] = []

    def receiver(sender: t.Any, **kw: t.Any) -> None:
        seen.append(threading.get_ident())

    from nous_tools import signals

    signals.tool_execute_stop.connect(receiver)
    try:
        remote = Recording()

        @tool(timeout=5, backend="remote")
        def f() -> str:
            return "x"

        with ToolExecutor(backends={"remote": remote}) as executor:
            assert executor.execute(f) == Ok("x")
    finally:
        signals.tool_execute_stop.disconnect(receiver)
    assert seen == [threading.get_ident()]
    assert recorder.names == ["start", "stop"]


def test_a_backend_timeout_is_terminal_and_never_retried(recorder: t.Any) -> None:
    remote = Recording(timed_out(), returned("never"))

    @tool(timeout=2, backend="remote", retries=3)
    def slow() -> str:
        return "late"

    with ToolExecutor(backends={"remote": remote}) as executor:
        result = executor.execute(slow)
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert result.reason.timeout == 2.0
    assert len(remote.calls) == 1
    assert recorder.names == ["start", "exception", "timeout"]


def test_a_raised_exception_is_retried_by_the_executor_with_the_next_retry_index() -> None:
    remote = Recording(raised(ConnectionError("flaky")), returned("second time"))

    @tool(timeout=5, backend="remote", retries=2)
    def flaky(ctx: RunContext) -> str:
        return "unused"

    with ToolExecutor(backends={"remote": remote}) as executor:
        assert executor.execute(flaky, {}, RunContext.new()) == Ok("second time")
    assert [call[2].retry for call in remote.calls if call[2] is not None] == [0, 1]


def test_a_died_worker_is_never_retried() -> None:
    from nous_tools import ChildProcessDied

    remote = Recording(raised(ChildProcessDied("the worker died")), returned("no"))

    @tool(timeout=5, backend="remote", retries=2)
    def fragile() -> str:
        return "unused"

    with ToolExecutor(backends={"remote": remote}) as executor:
        result = executor.execute(fragile)
    assert isinstance(result, Err) and isinstance(result.reason.original_error, ChildProcessDied)
    assert "the worker died" in result.reason.message
    assert len(remote.calls) == 1


def test_an_attempt_not_sent_is_an_err_with_the_backends_message_never_retried() -> None:
    remote = Recording(not_sent("the argument 'x' cannot be pickled"), returned("no"))

    @tool(timeout=5, backend="remote", retries=2)
    def f(x: int) -> int:
        return x

    with ToolExecutor(backends={"remote": remote}) as executor:
        result = executor.execute(f, {"x": 1})
    assert isinstance(result, Err) and isinstance(result.reason, ToolError)
    assert result.reason.message == (
        "Tool 'f' could not be sent to its backend: the argument 'x' cannot be pickled"
    )
    assert len(remote.calls) == 1


def test_an_unknown_backend_name_is_an_err_naming_it_and_the_known_ones() -> None:
    @tool(timeout=5, backend="ray", retries=2)
    def f() -> int:
        return 1

    with ToolExecutor() as executor:
        result = executor.execute(f)
    assert isinstance(result, Err)
    assert "'ray'" in result.reason.message and "'thread'" in result.reason.message
    assert "backends=" in result.reason.message


def test_a_backend_that_raises_gives_an_err_not_an_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    remote = Recording(RuntimeError("backend bug"))

    @tool(timeout=5, backend="remote", retries=2)
    def f() -> int:
        return 1

    with (
        caplog.at_level(logging.ERROR, logger="nous_tools"),
        ToolExecutor(backends={"remote": remote}) as executor,
    ):
        result = executor.execute(f)
    assert isinstance(result, Err)
    assert "RuntimeError: backend bug" in result.reason.message
    assert len(remote.calls) == 1
    assert "raised from run()" in caplog.text


def test_a_default_backend_object_takes_the_timed_attempts_and_inline_stays_inline() -> None:
    remote = Recording()

    @tool(timeout=5)
    def timed() -> int:
        return threading.get_ident()

    @tool(timeout=None)
    def inline() -> int:
        return threading.get_ident()

    with ToolExecutor(backend=remote) as executor:
        assert executor.execute(timed) == Ok(threading.get_ident())  # Recording runs it here
        assert executor.execute(inline) == Ok(threading.get_ident())
        figures = executor.stats()
    assert len(remote.calls) == 1
    assert figures["default_attempts"] == 1 and figures["completed"] == 0


def test_stats_lists_each_backend_under_its_name_and_shutdown_reaches_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(Recording):
        def stats(self) -> dict[str, int]:
            raise RuntimeError("no stats")

        def shutdown(self, wait: bool = True) -> None:
            raise RuntimeError("no shutdown")

    first, broken = Recording(), Broken()
    executor = ToolExecutor(backends={"first": first, "broken": broken})
    with caplog.at_level(logging.ERROR, logger="nous_tools"):
        figures = executor.stats()
        executor.shutdown()
    assert figures["first_attempts"] == 0
    assert not any(key.startswith("broken_") for key in figures)
    assert {"workers", "process_workers"} <= set(figures)
    assert first.shut
    assert "stats() of backend 'broken'" in caplog.text
    assert "shutdown() of backend 'broken'" in caplog.text
    assert set(executor.backends) == {"thread", "process", "first", "broken"}


def test_the_executors_on_timeout_default_reaches_the_thread_backend() -> None:
    with ToolExecutor(on_timeout="abandon") as executor:
        assert executor.on_timeout == "abandon"
        executor.on_timeout = "interrupt"
        assert executor.backends["thread"].on_timeout == "interrupt"  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="on_timeout"):
            executor.on_timeout = "kill"


def test_an_abandoned_nested_call_into_another_executor_is_counted_by_that_executor() -> None:
    """Cancelling a scope cancels its children with their own pool's books."""
    started = threading.Event()

    @tool(timeout=30, retries=0)
    def inner(ctx: RunContext) -> str:
        started.set()
        while True:  # a Python loop: ToolCancelled lands here
            time.sleep(0.01)

    with ToolExecutor(max_workers=2) as outer_ex, ToolExecutor(max_workers=2) as inner_ex:

        @tool(timeout=0.5, retries=0)
        def outer(ctx: RunContext) -> t.Any:
            return inner_ex.execute(inner, {}, ctx)

        result = outer_ex.execute(outer, {}, RunContext.new())
        assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
        assert started.is_set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            a, b = outer_ex.stats(), inner_ex.stats()
            if a["abandoned"] == 0 and b["abandoned"] == 0 and b["busy"] == 0:
                break
            time.sleep(0.02)
        a, b = outer_ex.stats(), inner_ex.stats()
        assert (a["abandoned"], b["abandoned"]) == (0, 0)
        assert a["workers"] <= 2 and b["workers"] <= 2
        assert b["timed_out"] == 1  # the inner call's timeout is counted where it ran
        # and both pools still work
        assert inner_ex.execute(Tool.from_function(lambda: 1, name="one", timeout=5)) == Ok(1)
        assert outer_ex.execute(Tool.from_function(lambda: 2, name="two", timeout=5)) == Ok(2)


def test_not_sent_is_the_kind_the_executor_reports_as_not_started() -> None:
    assert not_sent("x") == (NOT_SENT, "x", None)


def test_ctrl_c_while_a_backend_waits_propagates_from_execute() -> None:
    """A backend stops its attempt and re-raises when the caller is interrupted;
    the executor lets the user's Ctrl-C through (this test runs in the main thread)."""
    remote = Recording(KeyboardInterrupt())

    @tool(timeout=5, backend="remote", retries=2)
    def f() -> int:
        return 1

    with ToolExecutor(backends={"remote": remote}) as executor, pytest.raises(KeyboardInterrupt):
        executor.execute(f)
    assert len(remote.calls) == 1


def test_a_backend_that_was_shut_down_gives_executor_shutdown() -> None:
    from nous_tools import ExecutorShutdown
    from nous_tools.backend import shut_down

    remote = Recording(shut_down())

    @tool(timeout=5, backend="remote")
    def f() -> int:
        return 1

    with ToolExecutor(backends={"remote": remote}) as executor:
        result = executor.execute(f)
    assert isinstance(result, Err) and isinstance(result.reason, ExecutorShutdown)


def test_a_backend_answer_that_is_not_an_outcome_is_an_err_naming_the_backend() -> None:
    remote = Recording("done", ("finished", 1, None))

    @tool(timeout=5, backend="remote", retries=0)
    def f() -> int:
        return 1

    with ToolExecutor(backends={"remote": remote}) as executor:
        first, second = executor.execute(f), executor.execute(f)
    for result in (first, second):
        assert isinstance(result, Err)
        assert "backend 'remote' answered" in result.reason.message


def test_a_batch_sends_each_call_to_its_backend_and_the_rest_to_the_worker_threads() -> None:
    # A batch hands timed calls straight to the worker threads only when those are
    # where the call belongs: a named backend, or a default backend object, gets its own.
    remote, default = Recording(), Recording()

    @tool(timeout=5, backend="remote")
    def heavy(n: int) -> int:
        return n * 10

    @tool(timeout=5, backend="thread")
    def pinned(n: int) -> int:
        return n + 1

    @tool(timeout=5)
    def plain(n: int) -> int:
        return n - 1

    with ToolExecutor(max_workers=2, backends={"remote": remote}) as executor:
        results = executor.execute_many([(heavy, {"n": 1}), (plain, {"n": 1}), (heavy, {"n": 2})])
        assert results == [Ok(10), Ok(0), Ok(20)]
        assert executor.stats()["completed"] == 1  # plain, on the worker threads
    assert sorted(args["n"] for _, args, _, _ in remote.calls) == [1, 2]

    with ToolExecutor(max_workers=2, backend=default) as executor:
        assert executor.execute_many([(plain, {"n": 5}), (pinned, {"n": 5})]) == [Ok(4), Ok(6)]
        assert executor.stats()["completed"] == 1  # pinned names the worker threads
    assert [args for _, args, _, _ in default.calls] == [{"n": 5}]
