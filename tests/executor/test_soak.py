"""The soak: many threads, one executor, a steady mix of every kind of outcome.

Each caller thread runs a fixed cycle of calls: tools that return, raise, fail
once and then succeed on their retry, hang past a 0.05 s deadline, and ask for
an approval that the handler refuses. The test then holds the executor to its
books: every call got its own result of the right kind, ``stats()``, the
signals and the log records add up to the calls made, the thread count returns
to its baseline after ``shutdown()``, and traced memory does not grow between
10% and 100% of the calls.

The hanging tool waits on ``ctx.cancelled``, so it ends as soon as its
deadline passes and its abandoned worker exits: nothing depends on sleeping.
The full soak (16 threads x 5,000 calls) is behind the ``slow`` marker
(``make slow``); a reduced one (8 x 300) runs in the normal suite.
"""

from __future__ import annotations

import collections
import gc
import logging
import threading
import time
import tracemalloc
import typing as t

import attrs
import pytest

from nous_tools import (
    Err,
    ExecutorSaturated,
    Ok,
    RunContext,
    Tool,
    ToolError,
    ToolExecutor,
    ToolTimeout,
    signals,
)

HANG_TIMEOUT = 0.05  # the deadline of the hanging tool, seconds
HEALTHY_TIMEOUT = 30.0  # a deadline no healthy call comes near, even on a loaded box
DRAIN_LIMIT = 30.0  # bound on waiting for abandoned workers and threads to end
MEMORY_BOUND = 2 * 1024 * 1024  # bytes of traced growth allowed from 10% to 100% of calls

#: One cycle of calls; thread n starts the cycle at offset n, so kinds interleave.
CYCLE = ("ok", "raise", "ok", "retry", "reject", "ok", "hang", "raise", "retry", "reject")


class _Boom(Exception):
    pass


@attrs.define
class SoakFigures:
    """What a soak run measured, for assertions and for the README."""

    threads: int
    calls_per_thread: int
    seconds: float = 0.0
    kinds: collections.Counter[str] = attrs.field(factory=collections.Counter)
    mismatches: list[str] = attrs.field(factory=list)
    stats: dict[str, int] = attrs.field(factory=dict)
    signals: collections.Counter[str] = attrs.field(factory=collections.Counter)
    logs: collections.Counter[str] = attrs.field(factory=collections.Counter)
    memory_at_10: int = 0
    memory_at_100: int = 0
    baseline_threads: int = 0
    peak_threads: int = 0
    threads_after: int = 0
    left_behind: list[str] = attrs.field(factory=list)
    guarded_runs: int = 0
    handler_calls: int = 0

    @property
    def calls(self) -> int:
        return self.threads * self.calls_per_thread

    @property
    def growth(self) -> int:
        return self.memory_at_100 - self.memory_at_10

    def summary(self) -> str:
        return (
            f"soak: {self.threads} threads x {self.calls_per_thread} calls = {self.calls} calls "
            f"in {self.seconds:.1f} s; kinds {dict(sorted(self.kinds.items()))}; "
            f"stats {self.stats}; traced memory {self.memory_at_10 / 1024:.0f} KiB at 10% -> "
            f"{self.memory_at_100 / 1024:.0f} KiB at 100% (growth {self.growth:+,} bytes); "
            f"threads {self.baseline_threads} before, peak {self.peak_threads}, "
            f"{self.threads_after} after shutdown"
        )


class _CountingHandler(logging.Handler):
    """Counts records by level name; keeps none (pytest's capture would keep them all)."""

    def __init__(self, counts: collections.Counter[str]) -> None:
        super().__init__(logging.DEBUG)
        self.counts = counts
        self._counting = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        record.getMessage()  # format like a real handler would
        with self._counting:
            self.counts[record.levelname] += 1


def _wait_until(predicate: t.Callable[[], bool], limit: float = DRAIN_LIMIT) -> bool:
    """Poll ``predicate`` until it holds or ``limit`` seconds pass (a bound, not a sleep)."""
    end = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def run_soak(threads: int, calls_per_thread: int, *, max_workers: int) -> SoakFigures:
    figures = SoakFigures(threads, calls_per_thread)
    lock = threading.Lock()

    def echo(x: int) -> int:
        return x

    def fail(x: int) -> None:
        raise _Boom(f"boom {x}")

    def flaky(ctx: RunContext[t.Any], x: int) -> int:
        if ctx.retry == 0:
            raise _Boom(f"first attempt of {x}")
        return x

    def hang(ctx: RunContext[t.Any], x: int) -> int:
        ctx.cancelled.wait(HEALTHY_TIMEOUT)  # ends at the deadline, when the executor cancels
        return x

    def guarded(x: int) -> int:
        with lock:
            figures.guarded_runs += 1
        return x

    def refuse(request: t.Any) -> str:
        with lock:
            figures.handler_calls += 1
        return "reject"

    tools = {
        "ok": Tool.from_function(echo, timeout=HEALTHY_TIMEOUT, retries=0),
        "raise": Tool.from_function(fail, timeout=HEALTHY_TIMEOUT, retries=0),
        "retry": Tool.from_function(flaky, timeout=HEALTHY_TIMEOUT, retries=1),
        "hang": Tool.from_function(hang, timeout=HANG_TIMEOUT, retries=2),
        "reject": Tool.from_function(guarded, timeout=HEALTHY_TIMEOUT, approval="ask"),
    }
    ctx = RunContext.new({}, approval_handler=refuse)

    def right_kind(kind: str, x: int, result: t.Any) -> bool:
        if kind in ("ok", "retry"):
            return type(result) is Ok and result.value == x and result.update is None
        reason = getattr(result, "reason", None)
        if type(result) is not Err or not isinstance(reason, ToolError):
            return False
        if kind == "raise":
            cause = reason.original_error
            return isinstance(cause, _Boom) and cause.args == (f"boom {x}",)
        if kind == "hang":
            return type(reason) is ToolTimeout and reason.timeout == HANG_TIMEOUT
        return "rejected by the approval handler" in reason.message  # reject

    def caller(ex: ToolExecutor, n: int, first: int, last: int) -> None:
        kinds: collections.Counter[str] = collections.Counter()
        bad: list[str] = []
        peak = 0
        for i in range(first, last):
            peak = max(peak, threading.active_count())
            kind = CYCLE[(i + n) % len(CYCLE)]
            x = n * calls_per_thread + i  # unique per call: results cannot cross
            try:
                result = ex.execute(tools[kind], {"x": x}, ctx)
            except BaseException as exc:  # execute must never raise
                result = f"raised {type(exc).__name__}: {exc}"
            kinds[kind] += 1
            if isinstance(result, Err) and isinstance(result.reason, ExecutorSaturated):
                kinds["saturated"] += 1
            if not right_kind(kind, x, result) and len(bad) < 10:
                bad.append(f"{kind} x={x}: {result!r}")
        with lock:
            figures.kinds.update(kinds)
            figures.mismatches.extend(bad)
            figures.peak_threads = max(figures.peak_threads, peak)

    def phase(ex: ToolExecutor, first: int, last: int) -> None:
        workers = [
            threading.Thread(target=caller, args=(ex, n, first, last), name=f"soak-{n}")
            for n in range(threads)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(DRAIN_LIMIT * 10)
        assert not any(w.is_alive() for w in workers), "a soak caller did not finish"

    def settle(ex: ToolExecutor) -> int:
        """Wait for every abandoned worker to end, then measure traced memory."""
        assert _wait_until(lambda: ex.stats()["abandoned"] == 0), ex.stats()
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    def on_signal(name: str) -> t.Callable[..., None]:
        def receive(sender: t.Any, **kwargs: t.Any) -> None:
            with lock:
                figures.signals[name] += 1

        return receive

    receivers = [
        (signals.tool_execute_start, on_signal("start")),
        (signals.tool_execute_stop, on_signal("stop")),
        (signals.tool_execute_exception, on_signal("exception")),
        (signals.tool_execute_timeout, on_signal("timeout")),
    ]
    logger = logging.getLogger("nous_tools")
    handler = _CountingHandler(figures.logs)
    saved = (logger.level, logger.propagate)
    for sig, receiver in receivers:
        sig.connect(receiver)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    gc.collect()
    before = set(threading.enumerate())
    figures.baseline_threads = len(before)
    tenth = max(1, calls_per_thread // 10)
    tracemalloc.start()
    began = time.monotonic()
    try:
        ex = ToolExecutor(max_workers=max_workers, max_abandoned=10_000)
        try:
            phase(ex, 0, tenth)
            figures.memory_at_10 = settle(ex)
            phase(ex, tenth, calls_per_thread)
            figures.memory_at_100 = settle(ex)
            figures.stats = ex.stats()
        finally:
            ex.shutdown(wait=True)
        figures.seconds = time.monotonic() - began

        # Threads of earlier tests (a Ray client, a Celery pool) may end or start
        # meanwhile: what counts is that none of the soak's callers and none of the
        # executor's threads (workers, lanes, the cancel resender) is left.
        def newcomers() -> list[str]:
            return [
                t.name
                for t in threading.enumerate()
                if t not in before and t.name.startswith(("nous-tools", "soak-"))
            ]

        _wait_until(lambda: not newcomers())
        figures.left_behind = newcomers()
        figures.threads_after = threading.active_count()
    finally:
        tracemalloc.stop()
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        for sig, receiver in receivers:
            sig.disconnect(receiver)
    return figures


def check(figures: SoakFigures, memory_bound: int = MEMORY_BOUND) -> None:
    kinds, stats = figures.kinds, figures.stats
    ok, raised, retried = kinds["ok"], kinds["raise"], kinds["retry"]
    hung, rejected = kinds["hang"], kinds["reject"]

    # every call got its own result, of the right kind
    assert figures.mismatches == []
    assert ok + raised + retried + hung + rejected == figures.calls
    assert min(ok, raised, retried, hung, rejected) > 0
    assert figures.guarded_runs == 0  # a refused tool never ran
    assert figures.handler_calls == rejected  # and only it consulted the handler

    # stats() adds up to the calls made
    assert stats["completed"] == ok + raised + 2 * retried  # attempts that ended in a worker
    assert stats["timed_out"] == hung
    assert stats["saturated"] == kinds["saturated"] == 0
    assert stats["abandoned"] == 0 and stats["busy"] == 0 and stats["pending"] == 0
    assert stats["idle"] == stats["workers"] <= stats["max_workers"]

    # so do the signals and the log records
    attempts = ok + raised + 2 * retried + hung
    assert figures.signals == {
        "start": attempts,
        "stop": ok + retried,
        "exception": raised + retried + hung,
        "timeout": hung,
    }
    assert figures.logs == {"ERROR": raised + hung, "WARNING": retried, "INFO": retried}

    # no thread is left behind, and memory does not grow with the number of calls
    assert figures.left_behind == []
    assert figures.growth < memory_bound, figures.summary()


def test_a_reduced_soak_of_8_threads_x_300_calls_keeps_its_books() -> None:
    figures = run_soak(8, 300, max_workers=4)
    print(figures.summary())
    check(figures, memory_bound=MEMORY_BOUND // 8)  # fewer calls, so a tighter bound


@pytest.mark.slow
def test_a_soak_of_16_threads_x_5000_mixed_calls_keeps_its_books() -> None:
    figures = run_soak(16, 5_000, max_workers=8)
    print(figures.summary())
    check(figures)
