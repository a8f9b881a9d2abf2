"""Promises that hold under adversity (issue 11): the pool's books, deadlines of
nested calls, batches under Ctrl-C, capacity, hostile signal receivers and input.

Every test synchronises with Events; time bounds are generous margins past a
deadline (a 0.2 s deadline must return well before 2 s), never a bet on speed.
"""

from __future__ import annotations

import _thread
import asyncio
import json
import logging
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import typing as t

import pytest
import tenacity

from nous_tools import (
    Err,
    Ok,
    RunContext,
    SandboxPolicy,
    Tool,
    ToolCall,
    ToolCancelled,
    ToolExecutor,
    ToolTimeout,
    signals,
)

MARGIN = 0.5  # seconds past a deadline that still counts as "at the deadline"


def make(fn: t.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("retries", 0)
    return Tool.from_function(fn, **options)


def wait_until(predicate: t.Callable[[], bool], seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def _in_finalizer(frame: t.Any) -> bool:
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or code.co_filename.endswith(("weakref.py", "_weakrefset.py")):
            return True
        frame = frame.f_back
    return False


class _Sigint:
    """Route SIGINT (and ``_thread.interrupt_main``) to a handler that raises
    ``KeyboardInterrupt`` only while ``armed``: the test decides where Ctrl-C may land."""

    def __init__(self) -> None:
        self.armed = False
        self.raised = 0
        self._previous: t.Any = None

    def _handler(self, signum: int, frame: t.Any) -> None:
        # Not inside a finalizer or weakref callback: Python swallows what is raised
        # there (a Ctrl-C landing in one is lost in any program, not ours to test).
        if self.armed and not _in_finalizer(frame):
            self.raised += 1
            raise KeyboardInterrupt

    def __enter__(self) -> _Sigint:
        self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        self.armed = False
        signal.signal(signal.SIGINT, self._previous)


# 1. no interleaving of cancellations and Ctrl-C corrupts the books ---------------


def _stacks() -> str:
    """Where the library's threads are (to explain a failure)."""
    import traceback

    frames = sys._current_frames()
    return "\n".join(
        f"{thread.name}:\n" + "".join(traceback.format_stack(frames[thread.ident])[-4:])
        for thread in threading.enumerate()
        if thread.name.startswith("nous-tools") and thread.ident in frames
    )


def _storm(seconds: float, seed: int) -> tuple[int, int, int]:
    """A storm of nested timed calls and Ctrl-C on one executor for ``seconds``; its
    books are checked (every check an assertion, whatever the storm's size), and it
    returns how many calls it made, how many Ctrl-C interrupted and how many answered."""
    rng = random.Random(seed)
    executor = ToolExecutor(max_workers=4, max_abandoned=1000)
    stop_sampling = threading.Event()
    samples: list[dict[str, int]] = []

    def inner(ctx: RunContext, spin: int, wait: float) -> int:
        for _ in range(spin):  # a Python loop: ToolCancelled lands here
            pass
        ctx.cancelled.wait(wait)
        return spin

    inner_tool = make(inner, timeout=0.05)

    def outer(ctx: RunContext, spin: int, wait: float) -> t.Any:
        result = executor.execute(inner_tool, {"spin": spin, "wait": wait})
        # A second nested call, so cancellations also land between two of them.
        executor.execute(inner_tool, {"spin": spin // 2, "wait": 0.0})
        return result.unwrap()

    outers = [make(outer, timeout=timeout) for timeout in (0.001, 0.003, 0.008, 0.02)]

    def sample() -> None:
        while not stop_sampling.wait(0.002):
            samples.append(executor.stats())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    done = threading.Event()
    main = threading.main_thread().ident
    assert main is not None

    def interrupter() -> None:
        irng = random.Random(seed + 1)
        while not done.wait(irng.uniform(0.0005, 0.004)):
            if irng.random() < 0.5:
                _thread.interrupt_main()
            else:
                signal.pthread_kill(main, signal.SIGINT)

    calls = outcomes = interrupted = 0
    with _Sigint() as sigint:
        storm = threading.Thread(target=interrupter, daemon=True)
        storm.start()
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                tool = rng.choice(outers)
                arguments = {"spin": rng.randrange(0, 20_000), "wait": rng.uniform(0, 0.01)}
                calls += 1
                try:
                    sigint.armed = True
                    result = executor.execute(tool, arguments)
                    sigint.armed = False
                    outcomes += isinstance(result, (Ok, Err))
                except KeyboardInterrupt:
                    sigint.armed = False
                    interrupted += 1
        finally:
            done.set()
            storm.join()
            sigint.armed = False
            time.sleep(0.05)  # signals still in flight reach our (disarmed) handler
    stop_sampling.set()
    sampler.join()
    try:
        # Never negative, never above capacity (overflow workers serve nested calls).
        for stats in samples:
            assert stats["busy"] >= 0 and stats["abandoned"] >= 0 and stats["idle"] >= 0
            assert stats["workers"] >= 0 and stats["pending"] >= 0
        settled = wait_until(lambda: executor.stats()["abandoned"] == 0, 20)
        stats = executor.stats()
        assert settled, (stats, _stacks())
        assert wait_until(lambda: executor.stats()["busy"] == 0, 20), executor.stats()
        assert executor.stats()["workers"] <= executor.max_workers
        # A healthy call runs at once: it neither waits for capacity nor saturates.
        healthy = make(lambda: "ok", name="healthy", timeout=10)
        began = time.monotonic()
        answer = executor.execute(healthy, {})
        assert answer == Ok("ok"), (answer, executor.stats(), _stacks())
        assert time.monotonic() - began < 2.0, (time.monotonic() - began, executor.stats())
        assert stats["timed_out"] > 0
    finally:
        executor.shutdown(wait=False)
    return calls, interrupted, outcomes


def _judged(counts: tuple[int, int, int]) -> bool:
    """A storm big enough to have tested something: calls made, interrupted, answered."""
    calls, interrupted, outcomes = counts
    return calls > 200 and interrupted > 10 and outcomes > 100


def test_a_storm_of_nested_timeouts_and_ctrl_c_leaves_the_books_balanced() -> None:
    counts = _storm(seconds=4.0, seed=20261203)
    assert _judged(counts), counts


@pytest.mark.slow
def test_a_long_storm_of_nested_timeouts_and_ctrl_c_leaves_the_books_balanced() -> None:
    for seed in range(3):
        counts = _storm(seconds=12.0, seed=seed)
        assert _judged(counts), counts


# 2. a nested call's timeout is terminal for the outer call too ------------------


def test_a_nested_timeout_escaping_a_tool_is_terminal_not_retried(
    executor: ToolExecutor,
) -> None:
    release = threading.Event()
    runs: list[int] = []
    inner = make(lambda: release.wait(10), name="inner", timeout=0.05)

    def outer() -> t.Any:
        runs.append(1)
        return executor.execute(inner, {}).unwrap()

    try:
        result = executor.execute(make(outer, retries=2, timeout=10), {})
    finally:
        release.set()
    assert runs == [1]
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert isinstance(result.reason, TimeoutError)  # ToolTimeout is a TimeoutError


# 3. an outer deadline reaches nested calls -------------------------------------


def test_an_outer_deadline_cancels_the_nested_call_and_its_side_effect_never_happens(
    executor: ToolExecutor,
) -> None:
    side_effects: list[str] = []
    inner_started = threading.Event()
    inner_cancelled = threading.Event()
    seen: dict[str, t.Any] = {}

    def inner(ctx: RunContext) -> str:
        seen["deadline"] = ctx.deadline
        inner_started.set()
        try:
            if ctx.cancelled.wait(5):
                return "cancelled"
            side_effects.append("charged")  # must never happen after the outer deadline
            return "done"
        finally:  # ToolCancelled lands as soon as the wait returns: look on the way out
            if ctx.cancelled.is_set():
                inner_cancelled.set()

    def outer(ctx: RunContext) -> t.Any:
        seen["outer_deadline"] = ctx.deadline
        # on_timeout="abandon": only ctx.cancelled tells it (the interrupt is tested below)
        return executor.execute(make(inner, timeout=30, on_timeout="abandon"), {}).unwrap()

    began = time.monotonic()
    result = executor.execute(make(outer, timeout=0.2), {})
    elapsed = time.monotonic() - began
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert elapsed < 0.2 + MARGIN
    assert inner_started.is_set()
    assert inner_cancelled.wait(MARGIN * 4), "the nested call's ctx.cancelled was never set"
    assert seen["deadline"] <= seen["outer_deadline"]  # min(its own 30 s, the outer's)
    time.sleep(0.05)
    assert side_effects == []
    assert wait_until(lambda: executor.stats()["abandoned"] == 0)


def test_a_nested_python_loop_is_interrupted_when_the_outer_attempt_is_cancelled(
    executor: ToolExecutor,
) -> None:
    looping = threading.Event()
    stopped = threading.Event()

    def inner() -> None:
        looping.set()
        try:
            while True:
                pass
        except ToolCancelled:
            stopped.set()
            raise

    def outer() -> t.Any:
        return executor.execute(make(inner, timeout=30), {})

    result = executor.execute(make(outer, timeout=0.2), {})
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert looping.is_set()
    assert stopped.wait(5), "ToolCancelled never reached the nested worker"
    assert wait_until(lambda: executor.stats()["abandoned"] == 0)


# 4. Ctrl-C during a batch stops it ---------------------------------------------


def test_ctrl_c_during_a_batch_starts_no_new_call_and_cancels_the_running_ones() -> None:
    started: list[int] = []
    cancelled: list[int] = []
    lock = threading.Lock()
    two_running = threading.Event()

    def job(ctx: RunContext, n: int) -> int:
        with lock:
            started.append(n)
            if len(started) == 2:
                two_running.set()
        try:
            ctx.cancelled.wait(10)
        finally:  # ToolCancelled lands as soon as the wait returns: look on the way out
            if ctx.cancelled.is_set():
                with lock:
                    cancelled.append(n)
        return n

    tool = make(job, timeout=30, on_timeout="abandon")  # ctx.cancelled is what it sees

    main = threading.main_thread().ident
    assert main is not None

    def press_ctrl_c() -> None:  # a real SIGINT, as a terminal sends it
        two_running.wait(10)
        signal.pthread_kill(main, signal.SIGINT)

    with ToolExecutor(max_workers=2) as executor:
        threading.Thread(target=press_ctrl_c, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            executor.execute_many([(tool, {"n": n}) for n in range(16)])
        at_interrupt = len(started)
        assert wait_until(lambda: len(cancelled) == at_interrupt, 5), (started, cancelled)
        time.sleep(0.1)  # give a lane that kept going the time to start another call
        assert len(started) == at_interrupt == 2, started
        assert wait_until(lambda: executor.stats()["busy"] == 0)


# 5. max_workers bounds every batch together ------------------------------------


def test_concurrent_batches_never_exceed_max_workers_together() -> None:
    lock = threading.Lock()
    running = [0, 0]  # now, peak

    def job(n: int) -> int:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return n

    tool = make(job, timeout=30)
    results: list[list[t.Any]] = []

    with ToolExecutor(max_workers=4) as executor:

        def batch() -> None:
            results.append(executor.execute_many([(tool, {"n": n}) for n in range(6)]))

        threads = [threading.Thread(target=batch) for _ in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert len(results) == 10
    assert all(result == [Ok(n) for n in range(6)] for result in results)
    assert 1 <= running[1] <= 4, running


def test_a_batch_inside_a_tool_cannot_deadlock_a_full_pool() -> None:
    leaf = make(lambda n: n, name="leaf", timeout=30)
    with ToolExecutor(max_workers=2) as executor:

        def fan_out() -> list[t.Any]:
            return [r.unwrap() for r in executor.execute_many([(leaf, {"n": n}) for n in range(4)])]

        outer = make(fan_out, timeout=30)
        results = executor.execute_many([(outer, {}) for _ in range(4)])
    assert results == [Ok([0, 1, 2, 3])] * 4


# 6. signal receivers are isolated for every BaseException ----------------------


class _Custom(BaseException):
    pass


_RAISED = [RuntimeError("r"), asyncio.CancelledError(), _Custom(), ToolCancelled()]
_SIGNALS = {
    "start": signals.tool_execute_start,
    "stop": signals.tool_execute_stop,
    "exception": signals.tool_execute_exception,
    "timeout": signals.tool_execute_timeout,
}


@pytest.mark.parametrize("raised", _RAISED, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("name", list(_SIGNALS))
def test_a_receiver_raising_any_base_exception_changes_no_outcome(
    executor: ToolExecutor, name: str, raised: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    signal_ = _SIGNALS[name]
    runs: list[int] = []
    heard: list[str] = []
    release = threading.Event()

    def hostile(sender: t.Any, **kwargs: t.Any) -> None:
        raise raised

    def listener(sender: t.Any, **kwargs: t.Any) -> None:
        heard.append(name)

    if name in ("start", "stop"):

        def body() -> str:
            runs.append(1)
            return "done"

        tool = make(body, name="charge", timeout=5)
        expected: t.Any = Ok("done")
    else:

        def body() -> str:
            runs.append(1)
            release.wait(5)
            return "late"

        tool = make(body, name="charge", timeout=0.05)
        expected = ToolTimeout
    signal_.connect(hostile)
    signal_.connect(listener)
    try:
        result = executor.execute(tool, {})
    finally:
        signal_.disconnect(hostile)
        signal_.disconnect(listener)
        release.set()
    if expected is ToolTimeout:
        assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    else:
        assert result == expected
    assert runs == [1]
    assert heard == [name]
    assert any(
        "raised" in r.getMessage() and type(raised).__name__ in r.getMessage()
        for r in caplog.records
    )


def test_a_receiver_raising_keyboard_interrupt_outside_the_main_thread_is_isolated(
    executor: ToolExecutor,
) -> None:
    def hostile(sender: t.Any, **kwargs: t.Any) -> None:
        raise KeyboardInterrupt

    box: list[t.Any] = []
    tool = make(lambda: 1, name="one", timeout=5)
    signals.tool_execute_stop.connect(hostile)
    try:
        thread = threading.Thread(target=lambda: box.append(executor.execute(tool, {})))
        thread.start()
        thread.join(10)
    finally:
        signals.tool_execute_stop.disconnect(hostile)
    assert box == [Ok(1)]


# 7. hostile input on the command line --------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    ['{"n": 1' + "0" * 5000 + "}", '{"n": ' + "[" * 100_000 + "]" * 100_000 + "}"],
    ids=["huge-integer", "deep-array"],
)
def test_hostile_json_on_the_command_line_is_a_one_line_usage_error(
    tmp_path: t.Any, arguments: str
) -> None:
    (tmp_path / "hostile_tools.py").write_text(
        textwrap.dedent(
            """
            def count(n) -> int:
                return 1
            """
        )
    )
    (tmp_path / "args.json").write_text(arguments)
    proc = subprocess.run(
        [sys.executable, "-m", "nous_tools", "run", "hostile_tools:count", "--args", "@args.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot be read" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


# 8. options that could never work are refused at construction ------------------


def test_a_timeout_beyond_what_the_platform_can_wait_is_refused_naming_the_option() -> None:
    with pytest.raises(ValueError, match="Tool option 'timeout' must be at most"):
        Tool.from_function(lambda: 1, name="huge", timeout=1e10)
    assert Tool.from_function(lambda: 1, name="big", timeout=1e9).timeout == 1e9


def test_max_abandoned_zero_is_refused_since_no_timed_call_could_run() -> None:
    with pytest.raises(ValueError, match="max_abandoned"):
        ToolExecutor(max_abandoned=0)


# 9. nothing the tool raises is rendered past the deadline in the caller ---------


def test_an_exception_whose_str_hangs_does_not_hold_the_caller_past_the_deadline(
    executor: ToolExecutor,
) -> None:
    release = threading.Event()

    class Slow(Exception):
        def __str__(self) -> str:
            release.wait(10)
            return "slow"

    def raises() -> None:
        raise Slow

    began = time.monotonic()
    try:
        result = executor.execute(make(raises, timeout=0.3), {})
    finally:
        release.set()
    assert time.monotonic() - began < 0.3 + MARGIN
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)


# 11. low: hostile values never escape ------------------------------------------


@pytest.mark.parametrize("timeout", [None, 5.0], ids=["inline", "worker"])
@pytest.mark.parametrize("raised", [KeyboardInterrupt, ToolCancelled])
def test_an_exception_whose_str_raises_an_interrupt_is_still_an_err(
    executor: ToolExecutor, timeout: float | None, raised: type[BaseException]
) -> None:
    class Nasty(Exception):
        def __str__(self) -> str:
            raise raised

    def raises() -> None:
        raise Nasty

    thread_result: list[t.Any] = []
    # In a thread: a KeyboardInterrupt raised by code in the main thread would be
    # the user's own Ctrl-C, which must propagate.
    worker = threading.Thread(
        target=lambda: thread_result.append(executor.execute(make(raises, timeout=timeout), {}))
    )
    worker.start()
    worker.join(10)
    (result,) = thread_result
    assert isinstance(result, Err) and "Nasty whose str() raised" in result.reason.message


@pytest.mark.parametrize("path", [b"..", None, 3, b"/etc"])
def test_sandbox_allows_is_false_for_values_that_are_not_text_paths(path: object) -> None:
    policy = SandboxPolicy.new("workspace_write")
    assert policy.allows_write(path) is False
    assert policy.allows_read(path) is False


def test_a_broken_iterator_of_calls_gives_an_err_in_its_place_and_keeps_the_rest(
    executor: ToolExecutor,
) -> None:
    tool = make(lambda n: n, name="n", timeout=5)

    def calls() -> t.Iterator[t.Any]:
        yield (tool, {"n": 1})
        yield (tool, {"n": 2})
        raise RuntimeError("the generator broke")

    results = executor.execute_many(calls())
    assert results[:2] == [Ok(1), Ok(2)]
    (broken,) = results[2:]
    assert isinstance(broken, Err) and "the iterable raised RuntimeError" in broken.reason.message


def test_a_raising_resolve_and_an_unreadable_item_are_errs_of_their_own(
    executor: ToolExecutor,
) -> None:
    tool = make(lambda n: n, name="n", timeout=5)

    def resolve(name: str) -> Tool:
        if name == "bad":
            raise LookupError("registry down")
        return tool

    class Unreadable:
        def __iter__(self) -> t.Iterator[t.Any]:
            raise OSError("cannot read")

    results = executor.execute_many(
        [ToolCall("1", "bad", {}), Unreadable(), ToolCall("2", "n", {"n": 2})],  # type: ignore[list-item]
        resolve=resolve,
    )
    first, second, third = results
    assert isinstance(first, Err) and "LookupError: registry down" in first.reason.message
    assert isinstance(second, Err) and "OSError" in second.reason.message
    assert third == Ok(2)


# retry_on ------------------------------------------------------------------------


def test_retry_on_exception_classes_narrows_which_failures_are_retried(
    executor: ToolExecutor,
) -> None:
    runs: list[str] = []

    def charge(kind: str) -> str:
        runs.append(kind)
        if kind == "refused" and len(runs) == 1:
            raise ConnectionRefusedError("try again")
        if kind == "declined":
            raise ValueError("card declined")
        return "charged"

    tool = make(charge, retries=3, retry_on=(ConnectionRefusedError,), timeout=5)
    assert executor.execute(tool, {"kind": "refused"}) == Ok("charged")
    assert runs == ["refused", "refused"]
    runs.clear()
    result = executor.execute(tool, {"kind": "declined"})
    assert isinstance(result, Err) and result.reason.attempt == 1
    assert runs == ["declined"]  # a ValueError is not in retry_on: never re-run


def test_retry_on_takes_a_tenacity_strategy(executor: ToolExecutor) -> None:
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        raise OSError(11, "busy") if len(runs) < 3 else KeyError("no")

    strategy = tenacity.retry_if_exception(lambda e: isinstance(e, OSError) and e.errno == 11)
    result = executor.execute(make(flaky, retries=5, retry_on=strategy, timeout=None), {})
    assert isinstance(result, Err) and isinstance(result.reason.original_error, KeyError)
    assert len(runs) == 3


def test_retry_on_that_is_neither_classes_nor_a_strategy_is_refused() -> None:
    with pytest.raises(TypeError, match="retry_on"):
        make(lambda: 1, retry_on=("ConnectionError",))
    with pytest.raises(TypeError, match="retry_on"):
        make(lambda: 1, retry_on=42)


def test_a_tool_is_retried_once_by_default(executor: ToolExecutor) -> None:
    runs: list[int] = []

    def flaky() -> None:
        runs.append(1)
        raise RuntimeError("always")

    result = executor.execute(Tool.from_function(flaky, timeout=None), {})
    assert isinstance(result, Err) and result.reason.attempt == 2
    assert len(runs) == 2


def test_the_error_log_line_carries_no_exception_text_by_default(
    executor: ToolExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    def read(path: str) -> str:
        with open(path) as file:
            return file.read()

    caplog.set_level(logging.DEBUG, logger="nous_tools")
    executor.execute(make(read, timeout=5), {"path": "/no/such/secret-path"})
    above_debug = [r for r in caplog.records if r.levelno > logging.DEBUG]
    assert above_debug and all("secret-path" not in r.getMessage() for r in above_debug)
    assert any(
        "secret-path" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG
    )
    assert json.dumps([r.getMessage() for r in above_debug])  # plain text, serialisable


def test_a_result_whose_repr_hangs_is_written_for_a_model_within_a_bound() -> None:
    from nous_tools import format_tool_result
    from nous_tools._util._text import RENDER_SECONDS

    release = threading.Event()

    class Hangs:
        def __repr__(self) -> str:
            release.wait(30)
            return "never"

    began = time.monotonic()
    try:
        text = format_tool_result(Ok(Hangs()), "slow")
    finally:
        release.set()
    assert time.monotonic() - began < RENDER_SECONDS + MARGIN * 4
    assert text.startswith("<Hangs object (it could not be written")


def test_a_broken_iterable_given_to_a_registry_batch_keeps_the_calls_read_so_far() -> None:
    from nous_tools import Registry

    registry = Registry([make(lambda n: n, name="n", timeout=5)])

    class Unreadable:
        def __iter__(self) -> t.Iterator[t.Any]:
            raise OSError("cannot read")

    def calls() -> t.Iterator[t.Any]:
        yield ("n", {"n": 1})
        yield Unreadable()
        yield ("n", {"n": 3})
        raise RuntimeError("the generator broke")

    results = registry.execute_many(calls())
    assert results[0] == Ok(1) and results[2] == Ok(3)
    assert isinstance(results[1], Err) and "OSError" in results[1].reason.message
    assert isinstance(results[3], Err) and "RuntimeError" in results[3].reason.message
