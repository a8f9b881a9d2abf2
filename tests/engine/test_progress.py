"""ctx.report_progress and ctx.log (issue 24): where they are delivered, in what
order, how often, and what happens to bad input and to calls nobody listens to.

Every event must be delivered from the thread that called ``execute`` (like every
other signal), in the order the tool reported it, before the attempt's ``stop``.
Nothing here waits on the clock to be lucky: tools that must overlap with something
synchronise on ``threading.Event``s, and the coalescing bound is computed from the
time the call took.
"""

from __future__ import annotations

import collections.abc as c
import contextvars
import threading
import time
import typing as t

import pytest

from nous_tools import (
    Err,
    NeedsApproval,
    Ok,
    Registry,
    RunContext,
    Tool,
    ToolCall,
    ToolExecutor,
    ToolTimeout,
    execute_tool_calls,
    signals,
)
from nous_tools._engine import _reporting as reporting

WAIT = 30.0

_SIGNALS = (
    ("start", signals.tool_execute_start),
    ("stop", signals.tool_execute_stop),
    ("exception", signals.tool_execute_exception),
    ("timeout", signals.tool_execute_timeout),
    ("progress", signals.tool_progress),
    ("log", signals.tool_log),
)

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


class Events:
    """Every signal, in order: (name, sender's name, thread ident, measurements,
    metadata, the caller's request_id context variable as the receiver saw it)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int, dict[str, t.Any], dict[str, t.Any], str]] = []
        self._lock = threading.Lock()
        self._receivers: list[tuple[t.Any, t.Any]] = []

    def connect(self) -> None:
        for name, signal in _SIGNALS:

            def receiver(sender: t.Any, *, measurements: t.Any, metadata: t.Any, _n=name) -> None:
                with self._lock:
                    self.seen.append(
                        (
                            _n,
                            sender.name,
                            threading.get_ident(),
                            dict(measurements),
                            dict(metadata),
                            request_id.get(),
                        )
                    )

            signal.connect(receiver)
            self._receivers.append((signal, receiver))

    def disconnect(self) -> None:
        for signal, receiver in self._receivers:
            signal.disconnect(receiver)

    def of(self, *names: str) -> list[tuple[str, dict[str, t.Any]]]:
        return [(name, metadata) for name, _, _, _, metadata, _ in self.seen if name in names]

    def reports(self) -> list[tuple[t.Any, ...]]:
        """``("p", progress, total, message)`` and ``("l", level, message, data)``, in order."""
        found: list[tuple[t.Any, ...]] = []
        for name, _, _, _, meta, _ in self.seen:
            if name == "progress":
                found.append(("p", meta["progress"], meta["total"], meta["message"]))
            elif name == "log":
                found.append(("l", meta["level"], meta["message"], meta["data"]))
        return found


@pytest.fixture
def events() -> c.Iterator[Events]:
    recorder = Events()
    recorder.connect()
    yield recorder
    recorder.disconnect()


def steps(ctx: RunContext[t.Any]) -> str:
    """Two progress updates and a log line between them, far enough apart in time
    that none is coalesced (the pause is ``ctx.cancelled.wait``: it ends at the
    deadline too)."""
    ctx.report_progress(1, 2, "first")
    ctx.cancelled.wait(reporting.PROGRESS_INTERVAL * 1.5)
    ctx.log("info", "halfway", step=1)
    ctx.report_progress(2, 2, "second")
    return "done"


EXPECTED = [
    ("p", 1, 2, "first"),
    ("l", "info", "halfway", {"step": 1}),
    ("p", 2, 2, "second"),
]


# -- where and in what order -----------------------------------------------------------


@pytest.mark.parametrize("timeout", [None, WAIT], ids=["inline", "worker-thread"])
def test_progress_and_log_arrive_in_order_from_the_callers_thread_before_stop(
    executor: ToolExecutor, events: Events, timeout: float | None
) -> None:
    tool = Tool.from_function(steps, timeout=timeout)
    token = request_id.set("req-7")
    try:
        result = executor.execute(tool, {}, RunContext.new(), call_id="call_1")
    finally:
        request_id.reset(token)
    assert result == Ok("done")
    assert events.reports() == EXPECTED
    assert [name for name, *_ in events.seen] == ["start", "progress", "log", "progress", "stop"]
    me = threading.get_ident()
    assert {ident for _, _, ident, *_ in events.seen} == {me}
    assert {seen_id for *_, seen_id in events.seen} == {"req-7"}  # the caller's contextvars
    for _, meta in events.of("progress", "log"):
        assert (meta["tool_name"], meta["call_id"], meta["attempt"]) == ("steps", "call_1", 1)
    progress = next(m for name, _, _, m, _, _ in events.seen if name == "progress")
    assert set(progress) == {"progress", "total", "system_time"}


def test_each_attempt_reports_under_its_own_attempt_number(
    executor: ToolExecutor, events: Events
) -> None:
    def flaky(ctx: RunContext[t.Any]) -> str:
        ctx.report_progress(ctx.retry)
        if ctx.retry == 0:
            raise ConnectionError("reset")
        return "ok"

    assert executor.execute(Tool.from_function(flaky, timeout=WAIT, retries=1), {}) == Ok("ok")
    names = [name for name, *_ in events.seen]
    assert names == ["start", "progress", "exception", "start", "progress", "stop"]
    assert [meta["attempt"] for _, meta in events.of("progress")] == [1, 2]


def test_a_nested_call_made_with_the_tools_ctx_reports_under_the_call_that_made_it(
    executor: ToolExecutor, events: Events
) -> None:
    inner = Tool.from_function(steps, timeout=WAIT)

    def outer(ctx: RunContext[t.Any]) -> str:
        ctx.report_progress(0, 1, "outer begins")
        ctx.cancelled.wait(reporting.PROGRESS_INTERVAL * 1.5)
        nested = executor.execute(inner, {}, ctx)
        return f"outer: {nested.value}"

    tool = Tool.from_function(outer, timeout=WAIT)
    assert executor.execute(tool, {}, call_id="call_9") == Ok("outer: done")
    assert events.reports() == [("p", 0, 1, "outer begins"), *EXPECTED]
    me = threading.get_ident()
    reported = [entry for entry in events.seen if entry[0] in ("progress", "log")]
    assert {(sender, ident) for _, sender, ident, *_ in reported} == {("outer", me)}
    assert {meta["call_id"] for *_, meta, _ in reported} == {"call_9"}
    outer_stop = max(i for i, entry in enumerate(events.seen) if entry[:2] == ("stop", "outer"))
    assert all(i < outer_stop for i, entry in enumerate(events.seen) if entry in reported)


def test_reports_from_a_thread_the_tool_starts_are_delivered_by_the_caller(
    executor: ToolExecutor, events: Events
) -> None:
    def fan_out(ctx: RunContext[t.Any]) -> str:
        helper = threading.Thread(target=ctx.log, args=("notice", "from a helper thread"))
        helper.start()
        helper.join()
        return "joined"

    assert executor.execute(Tool.from_function(fan_out, timeout=WAIT), {}) == Ok("joined")
    assert events.reports() == [("l", "notice", "from a helper thread", {})]
    assert {ident for _, _, ident, *_ in events.seen} == {threading.get_ident()}


def test_events_reported_before_a_deadline_come_before_the_timeout_and_later_ones_never(
    executor: ToolExecutor, events: Events
) -> None:
    reported = threading.Event()
    release = threading.Event()
    after: list[str] = []

    def slow(ctx: RunContext[t.Any]) -> str:
        ctx.report_progress(1, 10, "started")
        reported.set()
        release.wait(WAIT)
        ctx.report_progress(9, 10, "too late")
        after.append("reported after the deadline")
        return "late"

    tool = Tool.from_function(slow, timeout=0.5, on_timeout="abandon")
    try:
        result = executor.execute(tool, {})
    finally:
        release.set()
    assert reported.is_set()
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert [name for name, *_ in events.seen] == ["start", "progress", "exception", "timeout"]
    assert events.reports() == [("p", 1, 10, "started")]


def test_a_batch_delivers_each_calls_reports_from_the_callers_thread_before_its_stop(
    executor: ToolExecutor, events: Events
) -> None:
    # One tool a call, so that each stop (whose sender is the tool) names its call.
    tools = {
        f"steps{i}": Tool.from_function(steps, name=f"steps{i}", timeout=WAIT) for i in range(3)
    }
    calls = [ToolCall(f"c{i}", f"steps{i}", {}) for i in range(3)]
    results = executor.execute_many(calls, resolve=tools.__getitem__)
    assert results == [Ok("done")] * 3
    me = threading.get_ident()
    assert {ident for _, _, ident, *_ in events.seen} == {me}
    assert [name for name, *_ in events.seen].count("stop") == 3
    for call in calls:
        mine = [
            (i, name, meta)
            for i, (name, _, _, _, meta, _) in enumerate(events.seen)
            if name in ("progress", "log") and meta["call_id"] == call.id
        ]
        assert [
            ("p", meta["progress"]) if name == "progress" else ("l", meta["level"])
            for _, name, meta in mine
        ] == [("p", 1), ("l", "info"), ("p", 2)]
        # Every report of the call comes before its stop; another call's reports may
        # come between them (the calls run at once), none of its own after.
        (stop,) = [
            i
            for i, (name, sender, *_) in enumerate(events.seen)
            if name == "stop" and sender == call.name
        ]
        assert mine[-1][0] < stop


# -- how often -------------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [None, WAIT], ids=["inline", "worker-thread"])
def test_a_tight_loop_of_reports_is_coalesced_and_its_last_value_always_delivered(
    executor: ToolExecutor, events: Events, timeout: float | None
) -> None:
    n = 100_000

    def busy(ctx: RunContext[t.Any]) -> int:
        for i in range(1, n + 1):
            ctx.report_progress(i, n)
        return n

    began = time.monotonic()
    assert executor.execute(Tool.from_function(busy, timeout=timeout), {}) == Ok(n)
    took = time.monotonic() - began
    delivered = [meta["progress"] for _, meta in events.of("progress")]
    # One update per interval at most, plus the first and the last: whatever the
    # machine's speed, the bound follows from the time the call took.
    assert len(delivered) <= took / reporting.PROGRESS_INTERVAL + 2
    assert delivered[0] == 1 and delivered[-1] == n
    assert delivered == sorted(delivered)


def test_log_lines_over_the_rate_are_dropped_and_counted_in_a_warning(
    executor: ToolExecutor, events: Events
) -> None:
    n = 20_000

    def noisy(ctx: RunContext[t.Any]) -> int:
        for i in range(n):
            ctx.log("debug", "tick", i=i)
        return n

    began = time.monotonic()
    assert executor.execute(Tool.from_function(noisy, timeout=WAIT), {}) == Ok(n)
    took = time.monotonic() - began
    lines = [meta for _, meta in events.of("log")]
    ticks = [meta for meta in lines if meta["message"] == "tick"]
    drops = [meta for meta in lines if meta["level"] == "warning"]
    assert len(ticks) <= reporting.LOG_BURST + took * reporting.LOG_RATE + 1
    assert [meta["data"]["i"] for meta in ticks[: reporting.LOG_BURST]] == list(
        range(reporting.LOG_BURST)
    )
    assert drops and "dropped" in drops[-1]["message"]
    assert len(ticks) + sum(meta["data"]["dropped"] for meta in drops) == n


# -- nobody listening, bad input -------------------------------------------------------


def test_without_listeners_a_tool_gets_no_channel_and_reporting_is_a_no_op(
    executor: ToolExecutor,
) -> None:
    assert not (signals.tool_progress.receivers or signals.tool_log.receivers)
    seen: list[object] = []

    def quiet(ctx: RunContext[t.Any]) -> str:
        seen.append(ctx._channel)
        ctx.report_progress(1, 2)
        ctx.log("info", "nobody hears this")
        return "ok"

    for timeout in (None, WAIT):
        assert executor.execute(Tool.from_function(quiet, timeout=timeout), {}) == Ok("ok")
    assert seen == [None, None]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda ctx: ctx.report_progress("half"), "progress must be a number, got str"),
        (lambda ctx: ctx.report_progress(True), "progress must be a number, got bool"),
        (lambda ctx: ctx.report_progress(float("nan")), "finite number >= 0"),
        (lambda ctx: ctx.report_progress(5, 4), r"total \(4\) is below progress \(5\)"),
        (lambda ctx: ctx.report_progress(1, "10"), "total must be a number or None"),
        (lambda ctx: ctx.report_progress(1, 2, 3), "message must be a str or None"),
        (lambda ctx: ctx.log("verbose", "x"), "level must be one of 'debug', 'info'"),
        (lambda ctx: ctx.log("info", 42), "message must be a str"),
    ],
)
def test_bad_reports_raise_value_error_in_the_tool_whether_or_not_anyone_listens(
    call: c.Callable[[RunContext[t.Any]], None], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        call(RunContext.new())


def test_a_bad_report_fails_only_its_own_call(executor: ToolExecutor, events: Events) -> None:
    def careless(ctx: RunContext[t.Any]) -> str:
        ctx.report_progress(3, 2)
        return "unreachable"

    good = Tool.from_function(steps, timeout=WAIT)
    bad = Tool.from_function(careless, timeout=WAIT, retries=0)
    results = executor.execute_many([(bad, {}), (good, {})])
    assert isinstance(results[0], Err)
    assert isinstance(results[0].reason.original_error, ValueError)
    assert "below progress" in results[0].reason.message
    assert results[1] == Ok("done")
    assert executor.execute(good, {}) == Ok("done")


def test_log_data_is_passed_as_is_to_receivers_and_rendered_with_repr_for_people(
    executor: ToolExecutor, events: Events
) -> None:
    thing = object()

    def logs(ctx: RunContext[t.Any]) -> str:
        ctx.log("warning", "odd", count=2, thing=thing)
        return "ok"

    executor.execute(Tool.from_function(logs, timeout=None), {})
    ((_, meta),) = events.of("log")
    assert meta["data"] == {"count": 2, "thing": thing}
    assert reporting.wire_data(meta["data"]) == {"count": 2}
    assert reporting.shown_data(meta["data"]) == f"count=2 thing={thing!r}"


# -- batches: on_progress --------------------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, object]] = []
        self.threads: set[int] = set()
        self.busy = threading.Lock()

    def __call__(self, done: int, total: int, result: object) -> None:
        assert self.busy.acquire(blocking=False), "on_progress was called concurrently"
        try:
            self.calls.append((done, total, result))
            self.threads.add(threading.get_ident())
        finally:
            self.busy.release()


def test_on_progress_reaches_total_with_a_validation_failure_an_ask_tool_a_timeout_and_a_rate_limit() -> (
    None
):
    release = threading.Event()
    registry = Registry()

    @registry.register
    @Tool.from_function
    def add(a: int, b: int) -> int:
        return a + b

    registry.register(Tool(name="delete", function=lambda: "deleted", approval="ask"))
    registry.register(
        Tool(name="hang", function=lambda: release.wait(WAIT), timeout=0.3, on_timeout="abandon")
    )
    registry.register(Tool(name="limited", function=lambda: "once", rate_limit="1/hour"))
    counter = Counter()
    calls = [
        {"id": "1", "type": "function", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}},
        {"id": "2", "type": "function", "function": {"name": "add", "arguments": '{"a":"x"}'}},
        {"id": "3", "type": "function", "function": {"name": "delete", "arguments": "{}"}},
        {"id": "4", "type": "function", "function": {"name": "hang", "arguments": "{}"}},
        {"id": "5", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
        {"id": "6", "type": "function", "function": {"name": "add", "arguments": "{oops"}},
        {"id": "7", "type": "function", "function": {"name": "limited", "arguments": "{}"}},
        {"id": "8", "type": "function", "function": {"name": "limited", "arguments": "{}"}},
    ]
    with ToolExecutor(max_workers=4) as executor:
        registry.executor = executor
        try:
            results = execute_tool_calls(registry, calls, on_progress=counter)
        finally:
            release.set()
    assert counter.calls[0] == (0, 8, None)
    assert [done for done, _, _ in counter.calls] == list(range(9))
    assert {total for _, total, _ in counter.calls} == {8}
    reported = [result for _, _, result in counter.calls[1:]]
    assert sorted(map(id, reported)) == sorted(map(id, results.results))
    kinds = {type(result).__name__ for result in reported}
    assert kinds == {"Ok", "Err", "NeedsApproval"}
    assert isinstance(results[1], Err) and "Invalid arguments" in results[1].reason.message
    assert isinstance(results[2], NeedsApproval)
    assert isinstance(results[3], Err) and isinstance(results[3].reason, ToolTimeout)
    limited = [results[6], results[7]]
    assert sorted(type(r.reason).__name__ for r in limited if isinstance(r, Err)) == ["RateLimited"]


@pytest.mark.parametrize("through", ["executor", "registry"])
def test_execute_many_tells_on_progress_of_every_call_one_at_a_time(through: str) -> None:
    release = threading.Event()
    hang = Tool(name="hang", function=lambda: release.wait(WAIT), timeout=0.3, on_timeout="abandon")
    add = Tool.from_function(lambda a, b: a + b, name="add", timeout=WAIT)
    inline = Tool.from_function(lambda: "inline", name="inline", timeout=None)
    ask = Tool(name="ask", function=lambda: "asked", approval="ask")
    counter = Counter()
    with ToolExecutor(max_workers=4) as executor:
        try:
            if through == "executor":
                results: list[t.Any] = executor.execute_many(
                    [
                        (add, {"a": 1, "b": 2}),
                        (add, {"a": "x"}),
                        (hang, {}),
                        (inline, {}),
                        (ask, {}),
                    ],
                    on_progress=counter,
                )
            else:
                registry = Registry([add, hang, inline, ask], executor=executor)
                results = registry.execute_many(
                    [("add", {"a": 1, "b": 2}), ("add", {"a": "x"}), ("hang", {}),
                     ("inline", {}), ("ask", {}), ("missing", {})],
                    on_progress=counter,
                )  # fmt: skip
        finally:
            release.set()
    total = len(results)
    assert counter.calls[0] == (0, total, None)
    assert [done for done, _, _ in counter.calls] == list(range(total + 1))
    assert sorted(map(id, (r for _, _, r in counter.calls[1:]))) == sorted(map(id, results))


def test_an_on_progress_that_raises_is_logged_and_the_batch_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(done: int, total: int, result: object) -> None:
        raise RuntimeError("progress bar broke")

    add = Tool.from_function(lambda a: a, name="echo", timeout=WAIT)
    with ToolExecutor(max_workers=2) as executor:
        results = executor.execute_many([(add, {"a": 1}), (add, {"a": 2})], on_progress=broken)
    assert results == [Ok(1), Ok(2)]
    assert "on_progress callback" in caplog.text


def test_a_thread_backend_of_its_own_delivers_reports_while_the_tool_runs(events: Events) -> None:
    from nous_tools import ThreadBackend

    reported = threading.Event()
    seen_first = threading.Event()

    def waits(ctx: RunContext[t.Any]) -> str:
        ctx.report_progress(1, 2, "first")
        reported.set()
        # delivered by the caller while this attempt still runs
        assert seen_first.wait(WAIT), "the first report was not delivered while running"
        return "ok"

    def on_progress(sender: t.Any, **kwargs: t.Any) -> None:
        seen_first.set()

    signals.tool_progress.connect(on_progress)
    try:
        with ToolExecutor(backends={"mine": ThreadBackend(2)}) as executor:
            tool = Tool.from_function(waits, timeout=WAIT, backend="mine")
            assert executor.execute(tool, {}) == Ok("ok")
    finally:
        signals.tool_progress.disconnect(on_progress)
    assert events.reports() == [("p", 1, 2, "first")]


@pytest.mark.parametrize("how", ["execute", "execute_many"])
def test_a_worker_threads_reports_are_delivered_while_it_still_runs(
    executor: ToolExecutor, how: str
) -> None:
    delivered = threading.Event()

    def waits(ctx: RunContext[t.Any]) -> str:
        ctx.report_progress(1)
        # the caller must deliver it now, not when the attempt ends
        return "live" if delivered.wait(WAIT) else "only at the end"

    def on_progress(sender: t.Any, **kwargs: t.Any) -> None:
        delivered.set()

    tool = Tool.from_function(waits, timeout=WAIT)
    other = Tool.from_function(lambda: "other", name="other", timeout=WAIT)
    signals.tool_progress.connect(on_progress)
    try:
        if how == "execute":
            results = [executor.execute(tool, {})]
        else:
            results = executor.execute_many([(tool, {}), (other, {})])
    finally:
        signals.tool_progress.disconnect(on_progress)
    assert results[0] == Ok("live")


# -- a child process (isolation="process") ------------------------------------------------


def in_a_child(ctx: RunContext[t.Any], n: int = 2) -> int:
    """Module level, so a child process can import it: steps, a log line with data
    that JSON can and cannot hold, and a helper thread that reports after the call."""
    import os

    ctx.report_progress(1, n, "first")
    ctx.cancelled.wait(reporting.PROGRESS_INTERVAL * 1.5)
    ctx.log("info", "from the child", pid=os.getpid(), thing=object())
    for step in range(2, n + 1):
        ctx.report_progress(step, n, f"step {step}")  # held, then replaced: the last goes
    late = threading.Timer(0.5, ctx.log, args=("error", "after the call"))
    late.daemon = True
    late.start()
    return os.getpid()


def test_a_process_isolated_tool_reports_over_its_pipe_in_order_before_stop(
    executor: ToolExecutor, events: Events
) -> None:
    import os

    tool = Tool.from_function(in_a_child, timeout=WAIT, isolation="process")
    result = executor.execute(tool, {"n": 5}, call_id="call_p")
    assert isinstance(result, Ok) and result.value != os.getpid()
    names = [name for name, *_ in events.seen]
    assert names[0] == "start" and names[-1] == "stop"
    reports = events.reports()
    assert reports[:3] == [
        ("p", 1, 5, "first"),
        ("l", "info", "from the child", {"pid": result.value}),  # the object() stayed there
        ("p", 2, 5, "step 2"),  # past the interval: sent at once
    ]
    assert reports[-1] == ("p", 5, 5, "step 5")  # held, then sent before the reply
    steps = [report[1] for report in reports[2:]]
    assert steps == sorted(steps) and len(steps) == len(set(steps))
    assert {ident for _, _, ident, *_ in events.seen} == {threading.get_ident()}
    assert {meta["call_id"] for _, meta in events.of("progress", "log")} == {"call_p"}
    # The helper thread's line, sent after the call ended, never arrives (nor in the next call).
    events.seen.clear()
    again = executor.execute(tool, {"n": 1}, call_id="call_q")
    assert isinstance(again, Ok)
    assert "after the call" not in [meta["message"] for _, meta in events.of("log")]


def test_a_process_isolated_tool_nobody_listens_to_sends_nothing(executor: ToolExecutor) -> None:
    assert not (signals.tool_progress.receivers or signals.tool_log.receivers)
    tool = Tool.from_function(in_a_child, timeout=WAIT, isolation="process")
    assert isinstance(executor.execute(tool, {}), Ok)
    import pickle

    from nous_tools._engine import _isolation

    # the request asks the child to report only when someone listens
    assert "report" not in pickle.loads(_isolation._context_bytes(RunContext.new()))


def test_a_process_isolated_call_nested_in_a_worker_thread_reports_under_its_caller(
    executor: ToolExecutor, events: Events
) -> None:
    child = Tool.from_function(in_a_child, timeout=WAIT, isolation="process")

    def outer(ctx: RunContext[t.Any]) -> int:
        result = executor.execute(child, {"n": 2}, ctx)
        assert isinstance(result, Ok)
        return t.cast(int, result.value)

    result = executor.execute(Tool.from_function(outer, timeout=WAIT), {}, call_id="call_o")
    assert isinstance(result, Ok)
    reported = [entry for entry in events.seen if entry[0] in ("progress", "log")]
    assert {(sender, ident) for _, sender, ident, *_ in reported} == {
        ("outer", threading.get_ident())
    }
    assert events.reports()[:2] == [
        ("p", 1, 2, "first"),
        ("l", "info", "from the child", {"pid": result.value}),
    ]
    assert events.reports()[-1] == ("p", 2, 2, "step 2")
