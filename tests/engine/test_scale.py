"""Issue 15, parts 3 to 5: what the faster paths must still do.

Batches hand timed attempts straight to pool workers, idle workers sleep on a bell
of their own, attempt contexts are copied field by field, tools with identical
schemas share a validator, the registry changes its table in place and the package
imports its heavy parts when they are first needed. Speed itself is measured in
``benchmarks/compare.py``, never here: these tests pin behaviour, synchronised
with Events and Barriers, with generous margins.
"""

from __future__ import annotations

import contextvars
import subprocess
import sys
import threading
import time
import typing as t

import attrs
import pytest

from nous_tools import (
    Edit,
    Err,
    ExecutorShutdown,
    Ok,
    Registry,
    RunContext,
    Tool,
    ToolExecutor,
    ToolTimeout,
    signals,
)
from nous_tools._engine._pool import DEFAULT_MIN_WORKERS, default_max_workers
from nous_tools._util._event import AttemptCancelled
from nous_tools.run_context import for_attempt
from nous_tools.sandbox import SandboxPolicy
from nous_tools.schema._validation import ArgumentValidator, shared_validator
from nous_tools.usage import Usage

MARGIN = 0.5  # seconds past a deadline that still counts as "at the deadline"


def make(fn: t.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("retries", 0)
    return Tool.from_function(fn, **options)


# -- attempt contexts and their cancel events ----------------------------------------


def test_an_attempt_context_is_the_context_with_only_the_attempts_fields_changed() -> None:
    handler = lambda request: "approve"  # noqa: E731
    ctx = RunContext.new(
        {"k": 1},
        retry=3,
        usage=Usage(requests=2),
        approval_handler=handler,
        approval_gated=True,
        sandbox=SandboxPolicy.new("read_only"),
    )
    event = AttemptCancelled()
    copied = for_attempt(ctx, 1, 12.5, event)
    expected = attrs.evolve(ctx, retry=1, deadline=12.5, cancelled=event)
    assert type(copied) is RunContext
    for field in attrs.fields(RunContext):  # every field, so a new one cannot be missed
        assert getattr(copied, field.name) is getattr(expected, field.name), field.name
    kept = for_attempt(ctx, 0, None, None)
    assert kept.cancelled is ctx.cancelled and kept.deadline is None and kept.retry == 0


def test_an_attempt_context_of_a_subclass_keeps_its_class() -> None:
    @attrs.frozen(slots=True, eq=False)
    class MyContext(RunContext[t.Any]):
        extra: int = 7

    ctx = MyContext(deps={"k": 1})
    copied = for_attempt(ctx, 2, 1.0, None)
    assert type(copied) is MyContext and copied.extra == 7 and copied.retry == 2


def test_the_cancel_event_of_an_attempt_is_a_threading_event() -> None:
    event = AttemptCancelled()
    assert isinstance(event, threading.Event)
    assert not event.is_set()
    assert event.wait(0.01) is False
    event.set()
    assert event.is_set() and event.wait() is True
    event.clear()
    assert not event.is_set()


def test_the_cancel_event_wakes_a_waiter_when_set_from_another_thread() -> None:
    event = AttemptCancelled()
    waiting = threading.Event()
    woke: list[bool] = []

    def waiter() -> None:
        waiting.set()
        woke.append(event.wait(10))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(5)
    time.sleep(0.01)  # let it reach the wait (a set before the wait is seen too)
    event.set()
    thread.join(5)
    assert woke == [True]


def test_threads_racing_to_make_the_cancel_events_condition_share_one() -> None:
    def first_use(event: AttemptCancelled, barrier: threading.Barrier, made: list[object]) -> None:
        barrier.wait(5)
        made.append(event._condition())

    for _ in range(50):
        event, barrier = AttemptCancelled(), threading.Barrier(4)
        made: list[object] = []
        threads = [
            threading.Thread(target=first_use, args=(event, barrier, made)) for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(5)
        assert len(made) == 4 and all(cond is made[0] for cond in made)


def test_the_cancel_event_set_before_anyone_waits_is_seen_by_every_wait() -> None:
    event = AttemptCancelled()
    event.set()
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(event.wait(5))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert results == [True] * 4


def test_a_ctx_tools_deadline_passing_sets_its_cancel_event(executor: ToolExecutor) -> None:
    seen: list[threading.Event] = []
    ended = threading.Event()

    def waits(ctx: RunContext[t.Any]) -> str:
        seen.append(ctx.cancelled)
        try:
            return "cancelled" if ctx.cancelled.wait(10) else "late"
        finally:
            ended.set()

    result = executor.execute(make(waits, timeout=0.1, on_timeout="abandon"), {})
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert ended.wait(5)
    assert isinstance(seen[0], AttemptCancelled) and seen[0].is_set()


# -- validators shared by schema -------------------------------------------------------


def test_tools_with_identical_schemas_share_one_compiled_validator() -> None:
    def first(query: str, limit: int = 10) -> list[str]:
        return []

    def second(query: str, limit: int = 10) -> list[str]:
        return []

    one, two = Tool.from_function(first), Tool.from_function(second)
    assert one.validator is not None and one.validator is two.validator
    assert isinstance(one.validator, ArgumentValidator)
    assert two.validator.validate({"query": 3}) is not None  # still validates


def test_schemas_that_differ_in_order_or_type_get_validators_of_their_own() -> None:
    base = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"const": 1}}}
    reordered = {"type": "object", "properties": {"b": {"const": 1}, "a": {"type": "integer"}}}
    other_type = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"const": True}}}
    validator = shared_validator(base)
    assert shared_validator(dict(base)) is validator
    assert shared_validator(reordered) is not validator
    other = shared_validator(other_type)
    assert other is not validator
    assert validator.validate({"b": True}) is not None  # 1 is not True in JSON Schema
    assert other.validate({"b": True}) is None


def test_a_schema_with_a_registry_gets_a_validator_of_its_own() -> None:
    import referencing

    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert shared_validator(schema, registry=referencing.Registry()) is not shared_validator(
        schema, registry=referencing.Registry()
    )


# -- the registry ------------------------------------------------------------------------


def test_registering_replaces_in_place_and_unregistering_returns_the_tool() -> None:
    registry = Registry()
    first = registry.register(make(lambda: 1, name="t", timeout=None))
    second = registry.register(make(lambda: 2, name="t", timeout=None))
    assert registry.lookup("t") is second and first not in registry and second in registry
    assert registry.unregister("t") is second
    assert registry.unregister("t") is None
    assert len(registry) == 0 and registry.all() == []


def test_readers_see_a_whole_table_while_another_thread_registers() -> None:
    registry = Registry()
    tools = [make(lambda: 1, name=f"tool_{i:05d}", timeout=None) for i in range(3000)]
    done = threading.Event()
    problems: list[str] = []

    def read() -> None:
        while not done.is_set():
            listed = registry.all()
            names = [tool.name for tool in listed]
            if names != sorted(names):
                problems.append("not sorted")
            for tool in listed:
                if registry.lookup(tool.name) is not tool:
                    problems.append(f"lookup of {tool.name} lost it")
            if len(registry.names()) < len(listed):
                problems.append("the table shrank")

    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    try:
        for tool in tools:
            registry.register(tool)
    finally:
        done.set()
        for reader in readers:
            reader.join(10)
    assert problems == []
    assert registry.all() == tools


# -- the default executor's size ---------------------------------------------------------


def test_the_default_size_runs_a_fan_out_of_thirty_two_calls_at_once() -> None:
    """A model's turn of I/O-bound calls (some of them hung until their deadline)
    does not run in waves: 32 calls by default, on any machine."""
    assert default_max_workers() >= DEFAULT_MIN_WORKERS == 32
    together = threading.Barrier(32)

    def meet(n: int) -> int:
        together.wait(10)  # breaks (an Err) unless all of them run at the same time
        return n

    tool = make(meet, timeout=30)
    with ToolExecutor() as executor:
        assert executor.max_workers >= 32
        results = executor.execute_many([(tool, {"n": n}) for n in range(32)])
        assert executor.stats()["workers"] <= 32  # started as the calls needed them
    assert results == [Ok(n) for n in range(32)]


def test_the_default_pool_starts_only_the_workers_its_calls_need() -> None:
    tool = make(lambda: "ok", name="quick", timeout=30)
    with ToolExecutor() as executor:
        for _ in range(20):
            assert executor.execute(tool, {}) == Ok("ok")  # one at a time
        assert executor.stats()["workers"] == 1  # the idle worker, reused


# -- batches: timed attempts handed straight to workers ----------------------------------


def test_a_batch_of_timed_calls_starts_no_lane() -> None:
    tool = make(lambda n: n, name="double", timeout=30)
    lanes: list[object] = []
    with ToolExecutor(max_workers=4) as executor:
        start_lane = executor._pool.start_lane

        def counting(*args: t.Any, **kwargs: t.Any) -> None:
            lanes.append(args)
            start_lane(*args, **kwargs)

        executor._pool.start_lane = counting  # type: ignore[method-assign]
        results = executor.execute_many([(tool, {"n": n}) for n in range(32)])
        inline = make(lambda n: n, name="inline", timeout=None)
        assert executor.execute_many([(inline, {"n": 1}), (inline, {"n": 2})]) == [Ok(1), Ok(2)]
    assert results == [Ok(n) for n in range(32)]
    assert len(lanes) == 2  # the two inline calls only


def test_a_batch_of_inline_tools_still_runs_them_at_the_same_time() -> None:
    together = threading.Barrier(4)

    def meet(n: int) -> int:
        together.wait(10)
        return n

    tool = make(meet, timeout=None)
    with ToolExecutor(max_workers=4) as executor:
        results = executor.execute_many([(tool, {"n": n}) for n in range(4)])
    assert results == [Ok(n) for n in range(4)]


_CALL: contextvars.ContextVar[str] = contextvars.ContextVar("call", default="")
_REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="")


def test_a_batch_sends_each_calls_signals_from_the_caller_in_a_context_of_its_own() -> None:
    """start marks the call in a context variable; stop must find its own call there
    (not a neighbour's), in the caller's thread, with the caller's variables."""
    caller = threading.get_ident()
    seen: list[tuple[str, str, int, str, str]] = []
    lock = threading.Lock()

    def on_start(sender: Tool, *, measurements: t.Any, metadata: t.Any) -> None:
        _CALL.set(sender.name)
        with lock:
            seen.append(("start", sender.name, threading.get_ident(), _CALL.get(), _REQUEST.get()))

    def on_stop(sender: Tool, *, measurements: t.Any, metadata: t.Any) -> None:
        with lock:
            seen.append(("stop", sender.name, threading.get_ident(), _CALL.get(), _REQUEST.get()))

    def tool_sees() -> tuple[str, str]:
        return _REQUEST.get(), _CALL.get()

    tools = [make(tool_sees, name=f"call_{i}", timeout=30) for i in range(6)]
    signals.tool_execute_start.connect(on_start)
    signals.tool_execute_stop.connect(on_stop)
    token = _REQUEST.set("request-42")
    try:
        with ToolExecutor(max_workers=3) as executor:
            results = executor.execute_many([(tool, {}) for tool in tools])
    finally:
        _REQUEST.reset(token)
        signals.tool_execute_start.disconnect(on_start)
        signals.tool_execute_stop.disconnect(on_stop)
    # The tool runs in a copy of the call's context: the caller's variable, and the
    # mark its start signal made.
    assert results == [Ok(("request-42", f"call_{i}")) for i in range(6)]
    assert len(seen) == 12
    for kind, name, thread, call, request in seen:
        assert thread == caller, (kind, name)
        assert call == name and request == "request-42", (kind, name, call)
    assert _CALL.get() == ""  # the caller's own context is untouched


def test_a_batch_retries_a_failing_call_and_approves_and_validates_it_once() -> None:
    attempts: list[int] = []
    asked: list[str] = []

    def flaky(ctx: RunContext[t.Any], n: int) -> int:
        attempts.append(ctx.retry)
        if ctx.retry == 0:
            raise ConnectionError("first attempt fails")
        return n

    def handler(request: t.Any) -> t.Any:
        asked.append(request.name)
        return Edit({"n": 5})

    retried = make(flaky, name="flaky", timeout=30, retries=2)
    asking = make(lambda n: n, name="asking", timeout=30, approval="ask")
    ctx = RunContext.new(approval_handler=handler)
    with ToolExecutor(max_workers=2) as executor:
        results = executor.execute_many(
            [(retried, {"n": 1}), (asking, {"n": 2}), (retried, {"n": "x"})], ctx
        )
    assert results[0] == Ok(1)
    assert results[1] == Ok(5)
    assert isinstance(results[2], Err) and "Invalid arguments" in results[2].reason.message
    assert attempts == [0, 1]  # the invalid call never ran; the first one ran twice
    assert asked == ["asking"]


def test_a_batch_call_past_its_deadline_times_out_at_the_deadline() -> None:
    release = threading.Event()
    hang = make(lambda: release.wait(10), name="hang", timeout=0.2)
    quick = make(lambda: "quick", name="quick", timeout=30)
    with ToolExecutor(max_workers=4) as executor:
        began = time.monotonic()
        try:
            results = executor.execute_many([(hang, {}), (quick, {})])
        finally:
            release.set()
        elapsed = time.monotonic() - began
    assert isinstance(results[0], Err) and isinstance(results[0].reason, ToolTimeout)
    assert results[1] == Ok("quick")
    assert elapsed < 0.2 + MARGIN


def test_a_batch_on_a_full_pool_runs_every_call_in_order_of_results() -> None:
    tool = make(lambda n: n * 2, timeout=30)
    with ToolExecutor(max_workers=2) as executor:
        results = executor.execute_many([(tool, {"n": n}) for n in range(25)])
        stats = executor.stats()
    assert results == [Ok(n * 2) for n in range(25)]
    assert stats["workers"] <= 2


def test_a_batch_after_shutdown_gives_each_timed_call_an_err() -> None:
    tool = make(lambda: 1, timeout=30)
    executor = ToolExecutor(max_workers=2)
    executor.shutdown()
    results = executor.execute_many([(tool, {}), (tool, {})])
    assert all(isinstance(r, Err) and isinstance(r.reason, ExecutorShutdown) for r in results)


# -- idle workers --------------------------------------------------------------------------


def test_sequential_calls_reuse_the_one_worker_that_was_idle_last() -> None:
    tool = make(lambda: 1, timeout=30)
    with ToolExecutor(max_workers=6) as executor:
        for _ in range(200):
            assert executor.execute(tool, {}) == Ok(1)
        stats = executor.stats()
    assert stats["workers"] == 1 and stats["completed"] == 200


def test_shutdown_wakes_the_idle_workers_and_they_end() -> None:
    together = threading.Barrier(4)
    tool = make(lambda: together.wait(10), timeout=30)
    executor = ToolExecutor(max_workers=4)
    executor.execute_many([(tool, {}) for _ in range(4)])  # four workers, all idle now
    assert executor.stats()["workers"] == 4
    executor.shutdown(wait=True)
    deadline = time.monotonic() + 5
    while executor.stats()["workers"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert executor.stats()["workers"] == 0


# -- start-up --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "heavy", ["jsonschema", "referencing", "regex", "jsonschema_rs", "tenacity", "cattrs"]
)
def test_importing_the_package_leaves_the_heavy_parts_for_later(heavy: str) -> None:
    code = (
        "import sys, nous_tools\n"
        f"print({heavy!r} in sys.modules)\n"
        "def echo(text: str) -> str:\n"
        "    return text\n"
        "tool = nous_tools.Tool.from_function(echo)\n"
        "print(nous_tools.execute(tool, {'text': 3}).reason.message)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.splitlines()
    assert out[0] == "False"
    assert (
        out[1] == "Invalid arguments for 'echo': Type mismatch: text: expected string, got integer"
    )
