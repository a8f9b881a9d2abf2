"""Worker lifecycle hooks (issue 16): ``on_worker_start``, ``after_task`` and
``on_worker_exit`` run in the pool's threads, never change an outcome, never wedge
the pool, and reach workers whose attempts were abandoned at their deadlines."""

from __future__ import annotations

import collections
import logging
import sqlite3
import threading
import time
import typing as t
import weakref

import pytest

from nous_tools import Err, Ok, RunContext, ToolExecutor, ToolTimeout, tool


class Hooks:
    """Records (hook, thread id) for every hook call."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.calls: list[tuple[str, int]] = []
        self.changed = threading.Condition(self.lock)

    def hook(self, name: str) -> t.Callable[[], None]:
        def record() -> None:
            with self.lock:
                self.calls.append((name, threading.get_ident()))
                self.changed.notify_all()

        return record

    def options(self) -> dict[str, t.Any]:
        return {
            "on_worker_start": self.hook("start"),
            "after_task": self.hook("after"),
            "on_worker_exit": self.hook("exit"),
        }

    def of(self, thread: int) -> list[str]:
        with self.lock:
            return [name for name, ident in self.calls if ident == thread]

    def wait_for(self, predicate: t.Callable[[], bool], timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        with self.lock:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.changed.wait(remaining)
            return True


def test_hooks_run_in_the_worker_thread_around_each_task() -> None:
    hooks = Hooks()

    @tool(timeout=5)
    def where() -> int:
        return threading.get_ident()

    with ToolExecutor(max_workers=1, **hooks.options()) as executor:
        first = executor.execute(where)
        second = executor.execute(where)
        assert isinstance(first, Ok) and first == second  # one worker, reused
        worker = first.value
        assert worker != threading.get_ident()
        assert hooks.wait_for(lambda: len(hooks.calls) >= 3)
    assert hooks.of(worker) == ["start", "after", "after", "exit"]  # exit: before shutdown returned
    assert hooks.of(threading.get_ident()) == []


def test_after_task_runs_after_the_caller_has_its_outcome() -> None:
    release = threading.Event()
    entered = threading.Event()

    def after() -> None:
        entered.set()
        release.wait(20)

    @tool(timeout=5)
    def quick() -> str:
        return "done"

    executor = ToolExecutor(max_workers=2, after_task=after)
    try:
        assert executor.execute(quick) == Ok("done")  # returns while the hook still waits
        assert entered.wait(10)
        assert not release.is_set()
        assert executor.execute(quick) == Ok("done")  # another worker takes the next call
    finally:
        release.set()
        executor.shutdown()


def test_an_idle_worker_keeps_no_value_its_tool_returned() -> None:
    """Once the caller has its outcome, the worker holds nothing of it: a big value
    lives as long as the caller keeps it, not until the worker's next task."""

    class Payload:
        pass

    idle = threading.Event()

    @tool(timeout=5)
    def make() -> Payload:
        return Payload()

    with ToolExecutor(max_workers=1, after_task=idle.set) as executor:
        result = executor.execute(make)
        assert isinstance(result, Ok)
        gone = weakref.ref(result.value)
        del result
        assert idle.wait(20)  # the worker finished its task (after_task runs after that)
        assert gone() is None


def test_a_raising_hook_is_logged_and_changes_no_outcome(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> None:
        raise RuntimeError("hook failed")

    def exits() -> None:
        raise SystemExit(3)

    @tool(timeout=5, retries=0)
    def double(n: int) -> int:
        return 2 * n

    @tool(timeout=5, retries=0)
    def fails() -> None:
        raise ValueError("the tool's own")

    with (
        caplog.at_level(logging.ERROR, logger="nous_tools"),
        ToolExecutor(
            max_workers=2, on_worker_start=broken, after_task=exits, on_worker_exit=broken
        ) as executor,
    ):
        results = [executor.execute(double, {"n": i}) for i in range(50)]
        failed = executor.execute(fails)
        batch = executor.execute_many([(double, {"n": i}) for i in range(20)])
        figures = executor.stats()
    assert results == [Ok(2 * i) for i in range(50)]
    assert batch == [Ok(2 * i) for i in range(20)]
    assert isinstance(failed, Err) and "the tool's own" in failed.reason.message
    assert figures["workers"] <= 2 and figures["abandoned"] == 0
    assert "the worker hook on_worker_start" in caplog.text
    assert "the worker hook after_task" in caplog.text


def test_an_abandoned_worker_runs_after_task_then_on_worker_exit_in_its_own_thread() -> None:
    hooks = Hooks()
    worker: list[int] = []

    @tool(timeout=0.3, retries=0)
    def spins(ctx: RunContext) -> None:
        worker.append(threading.get_ident())
        while True:  # a Python loop: ToolCancelled lands here
            time.sleep(0.005)

    with ToolExecutor(max_workers=2, **hooks.options()) as executor:
        result = executor.execute(spins, {}, RunContext.new())
        assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
        assert hooks.wait_for(lambda: ("exit", worker[0]) in hooks.calls)
        assert hooks.of(worker[0]) == ["start", "after", "exit"]
        assert executor.stats()["abandoned"] == 0


def test_shutdown_waits_for_the_exit_hooks_of_its_workers() -> None:
    hooks = Hooks()
    gate = threading.Barrier(2, timeout=20)  # two calls at once: two workers

    @tool(timeout=20)
    def meet() -> int:
        gate.wait()
        return threading.get_ident()

    executor = ToolExecutor(max_workers=2, **hooks.options())
    results = executor.execute_many([(meet, {}), (meet, {})])
    threads = set()
    for result in results:
        assert isinstance(result, Ok)
        threads.add(result.value)
    assert len(threads) == 2
    executor.shutdown(wait=True)
    for ident in threads:
        assert hooks.of(ident)[-1] == "exit"


def test_hooks_run_in_the_lanes_that_run_inline_tools_of_a_batch() -> None:
    hooks = Hooks()
    both = threading.Barrier(2, timeout=20)
    ran_in: list[int] = []

    @tool(timeout=None)
    def together() -> int:
        ran_in.append(threading.get_ident())
        both.wait()  # two at once: one of them runs in a lane, not in the caller
        return 1

    with ToolExecutor(max_workers=4, **hooks.options()) as executor:
        assert executor.execute_many([(together, {}), (together, {})]) == [Ok(1), Ok(1)]
        lanes = {ident for ident in ran_in if ident != threading.get_ident()}
        assert lanes
        for lane in lanes:
            assert hooks.wait_for(lambda lane=lane: hooks.of(lane)[:2] == ["start", "after"])
    assert hooks.of(threading.get_ident()) == []


def test_a_thread_bound_sqlite_connection_per_worker() -> None:
    """The pattern the hooks exist for: an object that may only be used in the
    thread that made it (sqlite3), one per worker, closed when the worker ends."""
    local = threading.local()
    opened: collections.Counter[str] = collections.Counter()

    def open_db() -> None:
        local.db = sqlite3.connect(":memory:")
        opened["open"] += 1

    def close_db() -> None:
        local.db.close()
        opened["closed"] += 1

    @tool(timeout=5)
    def query(n: int) -> int:
        return int(local.db.execute("select ? * 2", (n,)).fetchone()[0])

    with ToolExecutor(max_workers=2, on_worker_start=open_db, on_worker_exit=close_db) as ex:
        assert ex.execute_many([(query, {"n": i}) for i in range(30)]) == [
            Ok(2 * i) for i in range(30)
        ]
    # Workers have run their exit hook when shutdown returns; the lanes of the batch
    # leave just after (they are told to at shutdown, and do not take long).
    deadline = time.monotonic() + 20
    while opened["closed"] < opened["open"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert opened["open"] == opened["closed"] >= 1
