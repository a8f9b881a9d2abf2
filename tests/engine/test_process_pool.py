"""``isolation="process"``: the reusable, killable process pool (issue 15, part 1).

Real child processes, no mocks. Tools talk back to the test through files in
``tmp_path`` (a child cannot set a ``threading.Event`` of ours); every wait is a
bounded poll for a state, never a sleep that hopes the machine was quick.
"""

from __future__ import annotations

import collections.abc as c
import ctypes
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types
import typing as t

import freezegun
import pytest

from nous_tools import (
    ChildProcessDied,
    ContextUpdate,
    Err,
    ExecutorSaturated,
    ExecutorShutdown,
    Ok,
    RunContext,
    Tool,
    ToolError,
    ToolExecutor,
    ToolTimeout,
)

MARGIN = 2.0  # seconds past a deadline that still counts as "at the deadline" on a noisy box
PATIENCE = 30.0  # seconds to wait for a state that should come much sooner


def isolated(fn: c.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("retries", 0)
    options.setdefault("timeout", 30)
    return Tool.from_function(fn, isolation="process", **options)


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for(condition: c.Callable[[], bool], within: float = PATIENCE) -> bool:
    end = time.monotonic() + within
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def gone(pid: int) -> bool:
    return wait_for(lambda: not alive(pid))


@pytest.fixture
def executor() -> c.Iterator[ToolExecutor]:
    with ToolExecutor(max_workers=4, process_workers=2) as ex:
        yield ex


# -- tools (module-level: the child imports them by name) ---------------------------


def my_pid() -> int:
    return os.getpid()


def write_then_wait(started: str, late: str, delay: float) -> str:
    """Say "started" (with our pid), wait, then do the side effect."""
    pathlib.Path(started).write_text(str(os.getpid()))
    time.sleep(delay)
    pathlib.Path(late).write_text("side effect")
    return "wrote"


def spawn_grandchild_then_hang(pidfile: str) -> None:
    """Start a grandchild that would live a minute, record its pid, then hang."""
    grandchild = subprocess.Popen(["sleep", "60"])
    tmp = pidfile + ".tmp"
    pathlib.Path(tmp).write_text(f"{os.getpid()} {grandchild.pid}")
    os.replace(tmp, pidfile)
    time.sleep(60)


def wait_for_release(started: str, release: str) -> str:
    pathlib.Path(started).touch()
    end = time.monotonic() + 25
    while not os.path.exists(release):
        if time.monotonic() > end:
            return "never released"
        time.sleep(0.01)
    return "released"


def exit_with(code: int, counter: str) -> None:
    with open(counter, "a") as f:
        f.write("ran\n")
    os._exit(code)


def segfault() -> None:
    ctypes.string_at(0)


def with_context(ctx: RunContext[t.Any], x: int) -> tuple[t.Any, ...]:
    return (ctx.retry, ctx.deps, ctx.deadline, ctx.cancelled.is_set(), x, os.getpid())


def raise_with_a_lock() -> None:
    raise ValueError(threading.Lock())


class TwoArgError(Exception):
    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a} and {b}")


def raise_two_arg_error() -> None:
    raise TwoArgError(1, 2)


def return_a_lock() -> t.Any:
    return threading.Lock()


def return_a_child_only_class() -> t.Any:
    module = types.ModuleType("only_in_the_child")
    exec("class Thing:\n    pass\n", module.__dict__)
    sys.modules[module.__name__] = module
    return module.Thing()


def with_update(key: str) -> Ok:
    return Ok("done", ContextUpdate().set(key, os.getpid()))


def rendezvous(mine: str, other: str) -> str:
    """Both calls must run at once: each waits for the other's file."""
    pathlib.Path(mine).write_text("here")
    end = time.monotonic() + 20
    while not os.path.exists(other):
        if time.monotonic() > end:
            return "alone"
        time.sleep(0.01)
    return "together"


def fail(message: str) -> None:
    raise RuntimeError(message)


@pytest.fixture
def ghost() -> c.Iterator[types.ModuleType]:
    """A module that exists in this process only: what it defines pickles here
    (by reference) but cannot be unpickled in a child."""
    module = types.ModuleType("nous_tools_test_ghost")
    exec(
        "def ghost_tool(**kwargs):\n    return 1\nclass Ghost:\n    pass\n",
        module.__dict__,
    )
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


# -- reuse --------------------------------------------------------------------------


def test_consecutive_calls_reuse_the_same_child(executor: ToolExecutor) -> None:
    first = executor.execute(isolated(my_pid), {})
    second = executor.execute(isolated(my_pid), {})
    third = executor.execute(isolated(with_context), {"x": 1}, RunContext.new({}))
    assert isinstance(first, Ok) and isinstance(second, Ok) and isinstance(third, Ok)
    assert first.value != os.getpid()
    assert second.value == first.value
    assert third.value[-1] == first.value  # another tool, the same child
    figures = executor.stats()
    assert figures["process_completed"] == 3
    assert figures["process_killed"] == figures["process_died"] == 0


def test_a_tool_exception_comes_back_and_the_child_serves_on(executor: ToolExecutor) -> None:
    pid = executor.execute(isolated(my_pid), {}).unwrap()
    result = executor.execute(isolated(fail, retries=1), {"message": "nope"})
    assert isinstance(result, Err)
    assert result.reason.message == "Tool execution failed: RuntimeError: nope"
    assert isinstance(result.reason.original_error, RuntimeError)
    assert result.reason.attempt == 2  # an ordinary exception is retried, as in a thread
    assert "raise RuntimeError(message)" in str(result.reason.original_error.__cause__)
    assert executor.execute(isolated(my_pid), {}) == Ok(pid)


def test_a_ctx_tool_sees_retry_deadline_and_deps_as_in_a_thread(executor: ToolExecutor) -> None:
    before = time.monotonic()
    result = executor.execute(
        isolated(with_context, timeout=20), {"x": 7}, RunContext.new({"user": "ada"})
    )
    retry, deps, deadline, cancelled, x, pid = result.unwrap()
    assert (retry, deps, cancelled, x) == (0, {"user": "ada"}, False, 7)
    assert pid != os.getpid()
    assert before + 20 - MARGIN <= deadline <= time.monotonic() + 20  # one clock in both


def test_an_ok_with_a_context_update_comes_back_unchanged(executor: ToolExecutor) -> None:
    result = executor.execute(isolated(with_update), {"key": "pid"})
    assert isinstance(result, Ok) and result.value == "done"
    assert result.update is not None
    child = result.update.apply({})["pid"]
    assert child != os.getpid()


def test_two_calls_run_in_two_children_at_once(
    executor: ToolExecutor, tmp_path: pathlib.Path
) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    results = executor.execute_many(
        [
            (isolated(rendezvous), {"mine": a, "other": b}),
            (isolated(rendezvous), {"mine": b, "other": a}),
        ]
    )
    assert results == [Ok("together"), Ok("together")]


# -- the kill -----------------------------------------------------------------------


def test_the_child_is_killed_at_the_deadline_so_a_late_side_effect_never_happens(
    executor: ToolExecutor, tmp_path: pathlib.Path
) -> None:
    executor.execute(isolated(my_pid), {})  # warm: the attempt starts at once
    started, late = tmp_path / "started", tmp_path / "late"
    tool = isolated(write_then_wait, timeout=1.0)
    began = time.monotonic()
    result = executor.execute(tool, {"started": str(started), "late": str(late), "delay": 3.0})
    took = time.monotonic() - began
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert 1.0 <= took < 1.0 + MARGIN
    child = int(started.read_text())
    assert gone(child), "the child must be killed, not left to finish"
    assert not late.exists()  # and a dead child writes nothing, ever
    figures = executor.stats()
    assert (figures["process_killed"], figures["process_timed_out"]) == (1, 1)


def test_a_grandchild_the_tool_started_dies_with_the_child(
    executor: ToolExecutor, tmp_path: pathlib.Path
) -> None:
    executor.execute(isolated(my_pid), {})  # warm
    pidfile = tmp_path / "pids"
    result = executor.execute(
        isolated(spawn_grandchild_then_hang, timeout=1.5), {"pidfile": str(pidfile)}
    )
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    child, grandchild = map(int, pidfile.read_text().split())
    assert gone(child)
    assert gone(grandchild), "the kill must reach the child's whole process group"


def test_ctrl_c_while_waiting_kills_the_child_and_its_grandchild_then_reraises(
    executor: ToolExecutor, tmp_path: pathlib.Path
) -> None:
    assert threading.current_thread() is threading.main_thread()
    pidfile = tmp_path / "pids"
    main = threading.main_thread().ident
    assert main is not None

    def press_ctrl_c_once_the_grandchild_runs() -> None:
        if wait_for(pidfile.exists):
            signal.pthread_kill(main, signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c_once_the_grandchild_runs)
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            executor.execute(isolated(spawn_grandchild_then_hang), {"pidfile": str(pidfile)})
    finally:
        presser.join()
    child, grandchild = map(int, pidfile.read_text().split())
    assert gone(child) and gone(grandchild)
    assert executor.stats()["process_killed"] == 1
    assert isinstance(executor.execute(isolated(my_pid), {}), Ok)  # the pool goes on


def test_the_spare_started_in_the_background_serves_the_call_after_a_kill(
    tmp_path: pathlib.Path,
) -> None:
    with ToolExecutor(process_workers=1) as executor:
        first = executor.execute(isolated(my_pid), {}).unwrap()
        pool = executor._processes
        assert wait_for(lambda: len(pool.pids()) == 2), "a spare is started in the background"
        (spare,) = set(pool.pids()) - {first}
        started, late = tmp_path / "started", tmp_path / "late"
        killed = executor.execute(
            isolated(write_then_wait, timeout=1.0),
            {"started": str(started), "late": str(late), "delay": 30.0},
        )
        assert isinstance(killed, Err) and isinstance(killed.reason, ToolTimeout)
        assert int(started.read_text()) == first  # the most recently used child ran it
        after = executor.execute(isolated(my_pid), {})
        assert after == Ok(spare), "the call after a kill takes the ready spare"
        assert gone(first)
        # ... and a new spare replaces the one taken
        assert wait_for(lambda: len(pool.pids()) == 2 and first not in pool.pids())


class Hog:
    """The one child of a ``process_workers=1`` executor, busy until released."""

    def __init__(self, executor: ToolExecutor, tmp_path: pathlib.Path) -> None:
        self.started, self.release = tmp_path / "hog-started", tmp_path / "hog-release"
        self.outcome: list[object] = []
        self.thread = threading.Thread(
            target=lambda: self.outcome.append(
                executor.execute(
                    isolated(wait_for_release),
                    {"started": str(self.started), "release": str(self.release)},
                )
            )
        )

    def __enter__(self) -> Hog:
        self.thread.start()
        assert wait_for(self.started.exists)  # the one worker is busy (the spare may not run)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.touch()
        self.thread.join()
        assert self.outcome == [Ok("released")]  # the running call was not disturbed


def test_a_call_that_waits_past_its_queue_timeout_never_starts_and_is_not_a_timeout(
    tmp_path: pathlib.Path,
) -> None:
    with ToolExecutor(process_workers=1) as executor:
        executor.execute(isolated(my_pid), {})  # warm
        queued = tmp_path / "queued"
        with Hog(executor, tmp_path):
            result = executor.execute(
                isolated(write_then_wait, timeout=0.3),  # queue_timeout: the timeout
                {"started": str(queued), "late": str(queued), "delay": 0},
            )
        assert isinstance(result, Err) and isinstance(result.reason, ExecutorSaturated)
        assert not isinstance(result.reason, ToolTimeout)
        assert result.reason.message == (
            "Tool 'write_then_wait' was not started: no child process came free within its "
            "queue_timeout of 0.3 s (process_workers=1, all busy)"
        )
        assert not queued.exists()
        figures = executor.stats()
        assert figures["process_not_started"] == 1
        assert figures["process_timed_out"] == figures["process_killed"] == 0


def test_a_process_calls_timeout_counts_from_when_a_child_takes_it(
    tmp_path: pathlib.Path,
) -> None:
    with ToolExecutor(process_workers=1) as executor:
        executor.execute(isolated(my_pid), {})  # warm
        holder: list[t.Any] = []
        tool = isolated(with_context, timeout=2.0, queue_timeout=60)
        with Hog(executor, tmp_path):
            caller = threading.Thread(
                target=lambda: holder.append(executor.execute(tool, {"x": 1}, RunContext.new({})))
            )
            caller.start()
            assert wait_for(lambda: executor.stats()["process_pending"] == 1)
            time.sleep(3.0)  # the call waits longer than its whole timeout ...
            released = time.monotonic()
        caller.join(PATIENCE)
        (result,) = holder
        assert isinstance(result, Ok), result  # ... and still runs, with all of it
        deadline = result.value[2]
        assert deadline > released + 2.0  # ctx.deadline: from when the child took it


def test_queue_timeout_is_the_tools_else_the_executors_else_the_timeout(
    tmp_path: pathlib.Path,
) -> None:
    def message(result: object) -> str:
        assert isinstance(result, Err) and isinstance(result.reason, ExecutorSaturated)
        return result.reason.message

    with ToolExecutor(process_workers=1, queue_timeout=0.2) as executor:
        assert executor.queue_timeout == 0.2
        executor.execute(isolated(my_pid), {})
        with Hog(executor, tmp_path):
            by_executor = executor.execute(isolated(my_pid, timeout=30), {})
            by_tool = executor.execute(isolated(my_pid, timeout=30, queue_timeout=0.3), {})
    assert "queue_timeout of 0.2 s" in message(by_executor)
    assert "queue_timeout of 0.3 s" in message(by_tool)
    assert ToolExecutor(process_workers=1).queue_timeout is None  # each tool's timeout


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "5"])
def test_queue_timeout_is_checked_at_construction(bad: object) -> None:
    with pytest.raises((ValueError, TypeError), match="'queue_timeout'"):
        isolated(my_pid, queue_timeout=bad)
    with pytest.raises((ValueError, TypeError), match="ToolExecutor option 'queue_timeout'"):
        ToolExecutor(queue_timeout=bad)  # type: ignore[arg-type]


def hang_after_note(started: str, late: str) -> None:
    pathlib.Path(started).write_text(str(os.getpid()))
    time.sleep(30)
    pathlib.Path(late).write_text("side effect")


@pytest.mark.parametrize("where", ["queued", "running"])
def test_a_nested_process_call_never_outlives_the_enclosing_attempt(
    where: str, tmp_path: pathlib.Path
) -> None:
    started, late = tmp_path / "started", tmp_path / "late"
    inner = isolated(hang_after_note, timeout=60, queue_timeout=60)
    nested: list[t.Any] = []
    with ToolExecutor(process_workers=1) as executor:
        executor.execute(isolated(my_pid), {})  # warm

        def outer() -> str:
            nested.append(executor.execute(inner, {"started": str(started), "late": str(late)}))
            return "outer done"

        enclosing = Tool.from_function(outer, timeout=1.0, on_timeout="abandon", retries=0)
        if where == "queued":
            with Hog(executor, tmp_path):
                result = executor.execute(enclosing, {})
                assert wait_for(lambda: bool(nested))  # by the enclosing deadline, not 60 s
        else:
            result = executor.execute(enclosing, {})
            assert wait_for(lambda: bool(nested))
            assert gone(int(started.read_text())), "killed at the enclosing deadline"
    # The nested call ends at the enclosing deadline, so the enclosing tool may just
    # finish in time itself: either way, nothing ran past that deadline.
    assert result == Ok("outer done") or isinstance(result.reason, ToolTimeout)
    (inner_result,) = nested
    assert isinstance(inner_result, Err) and isinstance(inner_result.reason, ToolTimeout)
    assert started.exists() == (where == "running")
    assert not late.exists()


# -- batches: process calls handed to the pool, no thread per call -------------------


def test_a_batchs_process_calls_each_get_their_whole_timeout_however_long_they_queue(
    tmp_path: pathlib.Path,
) -> None:
    # Five calls of 0.5 s on one child: the last waits about 2 s, longer than its
    # 1.5 s timeout, which counts only once a child has it.
    with ToolExecutor(process_workers=1) as executor:
        executor.execute(isolated(my_pid), {})
        tool = isolated(write_then_wait, timeout=1.5, queue_timeout=60)
        calls = [
            (
                tool,
                {"started": str(tmp_path / f"s{i}"), "late": str(tmp_path / f"l{i}"), "delay": 0.5},
            )
            for i in range(5)
        ]
        assert executor.execute_many(calls) == [Ok("wrote")] * 5
        figures = executor.stats()
        assert figures["process_timed_out"] == figures["process_not_started"] == 0


def test_a_batch_call_that_waits_past_its_queue_timeout_is_not_started(
    tmp_path: pathlib.Path,
) -> None:
    with ToolExecutor(process_workers=1) as executor:
        executor.execute(isolated(my_pid), {})
        with Hog(executor, tmp_path):  # no child for the batch at all
            results = executor.execute_many([(isolated(my_pid, queue_timeout=0.3), {})] * 2)
        for result in results:
            assert isinstance(result, Err) and isinstance(result.reason, ExecutorSaturated)
            assert "was not started" in result.reason.message
        assert executor.stats()["process_not_started"] == 2


def test_a_batch_call_queued_behind_the_batchs_own_running_call_is_not_started_in_time(
    tmp_path: pathlib.Path,
) -> None:
    started, late = tmp_path / "started", tmp_path / "late"
    with ToolExecutor(process_workers=1) as executor:
        executor.execute(isolated(my_pid), {})
        long = isolated(write_then_wait, timeout=30)
        results = executor.execute_many(
            [
                (long, {"started": str(started), "late": str(late), "delay": 3.0}),
                (isolated(my_pid, queue_timeout=0.3), {}),
            ]
        )
    assert results[0] == Ok("wrote")
    assert isinstance(results[1], Err) and isinstance(results[1].reason, ExecutorSaturated)


def test_a_batchs_process_call_is_killed_at_its_deadline_and_a_crash_is_its_own(
    tmp_path: pathlib.Path,
) -> None:
    started, late = tmp_path / "started", tmp_path / "late"
    with ToolExecutor(process_workers=3) as executor:
        executor.execute(isolated(my_pid), {})
        results = executor.execute_many(
            [
                (
                    isolated(write_then_wait, timeout=0.5),
                    {"started": str(started), "late": str(late), "delay": 30},
                ),
                (isolated(segfault), {}),
                (isolated(my_pid), {}),
            ]
        )
        killed, crashed, fine = results
        assert isinstance(killed, Err) and isinstance(killed.reason, ToolTimeout)
        assert gone(int(started.read_text()))
        assert not late.exists()
        assert isinstance(crashed, Err)
        assert isinstance(crashed.reason.original_error, ChildProcessDied)
        assert isinstance(fine, Ok) and fine.value != os.getpid()
        figures = executor.stats()
        assert (figures["process_killed"], figures["process_died"]) == (1, 1)


def test_a_batch_mixing_threads_and_processes_gets_every_result_in_order(
    tmp_path: pathlib.Path,
) -> None:
    release = threading.Event()

    def in_a_thread() -> str:
        release.wait(20)
        return "thread"

    threading.Timer(0.2, release.set).start()
    with ToolExecutor(max_workers=4, process_workers=2) as executor:
        pid = isolated(my_pid)
        results = executor.execute_many(
            [(pid, {}), (Tool.from_function(in_a_thread, timeout=30), {}), (pid, {}), (pid, {})]
        )
        assert results[1] == Ok("thread")
        assert all(isinstance(r, Ok) and r.value != os.getpid() for r in results[::2])
        assert executor.stats()["process_completed"] == 3


def test_ctrl_c_during_a_batch_kills_its_process_calls_then_reraises(
    tmp_path: pathlib.Path,
) -> None:
    assert threading.current_thread() is threading.main_thread()
    pidfiles = [tmp_path / "a", tmp_path / "b"]
    main = threading.main_thread().ident
    assert main is not None

    def press_ctrl_c_once_both_run() -> None:
        if wait_for(lambda: all(p.exists() for p in pidfiles)):
            signal.pthread_kill(main, signal.SIGINT)

    with ToolExecutor(process_workers=2) as executor:
        presser = threading.Thread(target=press_ctrl_c_once_both_run)
        presser.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                executor.execute_many(
                    [(isolated(spawn_grandchild_then_hang), {"pidfile": str(p)}) for p in pidfiles]
                )
        finally:
            presser.join()
        for pidfile in pidfiles:
            child, grandchild = map(int, pidfile.read_text().split())
            assert gone(child) and gone(grandchild)
        assert wait_for(lambda: executor.stats()["process_killed"] == 2)
        assert isinstance(executor.execute(isolated(my_pid), {}), Ok)  # the pool goes on
        assert executor.stats()["process_busy"] == 0


def test_deadlines_hold_in_real_time_inside_freeze_time(
    executor: ToolExecutor, tmp_path: pathlib.Path
) -> None:
    from nous_tools._util._clock import monotonic as real_monotonic  # freezegun leaves it alone

    executor.execute(isolated(my_pid), {})
    started, late = tmp_path / "started", tmp_path / "late"
    with freezegun.freeze_time("2026-01-01"):
        began = real_monotonic()
        result = executor.execute(
            isolated(write_then_wait, timeout=0.5),
            {"started": str(started), "late": str(late), "delay": 30.0},
        )
        took = real_monotonic() - began
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert 0.5 <= took < 0.5 + MARGIN


# -- recycling ----------------------------------------------------------------------


def test_max_tasks_per_child_replaces_a_child_after_that_many_attempts() -> None:
    with ToolExecutor(process_workers=1, max_tasks_per_child=2) as executor:
        pids = [executor.execute(isolated(my_pid), {}).unwrap() for _ in range(5)]
        assert pids[0] == pids[1] != pids[2]
        assert pids[2] == pids[3] != pids[4]
        assert pids[0] != pids[4]
        assert gone(pids[0]) and gone(pids[2])
        assert executor.stats()["process_recycled"] == 2


# -- children that die ----------------------------------------------------------------


def test_a_child_that_exits_gives_an_err_naming_its_exit_code_and_is_never_retried(
    executor: ToolExecutor, tmp_path: pathlib.Path
) -> None:
    counter = tmp_path / "runs"
    result = executor.execute(isolated(exit_with, retries=2), {"code": 3, "counter": str(counter)})
    assert isinstance(result, Err) and isinstance(result.reason, ToolError)
    died = result.reason.original_error
    assert isinstance(died, ChildProcessDied) and died.exitcode == 3
    assert "exited with code 3" in result.reason.message
    assert "'exit_with'" in result.reason.message
    assert counter.read_text() == "ran\n"  # one attempt: a crash is terminal
    assert isinstance(executor.execute(isolated(my_pid), {}), Ok)
    assert executor.stats()["process_died"] == 1


def test_a_segfault_gives_an_err_naming_the_signal_and_the_pool_goes_on(
    executor: ToolExecutor,
) -> None:
    result = executor.execute(isolated(segfault), {})
    assert isinstance(result, Err)
    died = result.reason.original_error
    assert isinstance(died, ChildProcessDied) and died.exitcode == -signal.SIGSEGV
    assert "killed by signal SIGSEGV" in result.reason.message
    assert not alive(t.cast(int, died.pid))
    assert isinstance(executor.execute(isolated(my_pid), {}), Ok)


def test_a_child_killed_from_outside_while_idle_is_replaced_unseen(
    executor: ToolExecutor,
) -> None:
    pid = executor.execute(isolated(my_pid), {}).unwrap()
    os.kill(pid, signal.SIGKILL)
    assert gone(pid)
    result = executor.execute(isolated(my_pid), {})
    assert isinstance(result, Ok) and result.value != pid
    assert wait_for(lambda: executor.stats()["process_died"] == 1)  # counted as died, not a stray
    assert executor.stats()["process_strays"] == 0


# -- what must pickle -------------------------------------------------------------------


def message(result: object) -> str:
    assert isinstance(result, Err) and isinstance(result.reason, ToolError), result
    return result.reason.message


def test_a_function_that_does_not_pickle_is_named(executor: ToolExecutor) -> None:
    text = message(executor.execute(isolated(lambda: 1, name="closure"), {}))
    assert "Tool 'closure' cannot run in a child process" in text
    assert (
        "the function 'test_a_function_that_does_not_pickle_is_named.<locals>.<lambda>' cannot be pickled"
        in text
    )
    assert "module-level function" in text


def test_an_argument_that_does_not_pickle_is_named(executor: ToolExecutor) -> None:
    text = message(
        executor.execute(isolated(fail, validate_args=False), {"message": threading.Lock()})
    )
    assert "the argument 'message' (_thread.lock) cannot be pickled" in text


def test_deps_that_do_not_pickle_are_named(executor: ToolExecutor) -> None:
    ctx = RunContext.new({"lock": threading.Lock()})
    text = message(executor.execute(isolated(with_context), {"x": 1}, ctx))
    assert "the context's deps (dict) cannot be pickled" in text


def test_a_result_that_does_not_pickle_is_named(executor: ToolExecutor) -> None:
    text = message(executor.execute(isolated(return_a_lock), {}))
    assert "the tool's result (_thread.lock) cannot be pickled" in text


def test_an_exception_that_does_not_pickle_is_named(executor: ToolExecutor) -> None:
    text = message(executor.execute(isolated(raise_with_a_lock), {}))
    assert "the exception the tool raised (ValueError: <unlocked _thread.lock" in text
    assert "cannot be pickled" in text


def test_a_result_that_does_not_unpickle_in_the_parent_is_named(executor: ToolExecutor) -> None:
    text = message(executor.execute(isolated(return_a_child_only_class), {}))
    assert "the tool's result (only_in_the_child.Thing) could not be unpickled" in text
    assert "in the parent process: ModuleNotFoundError" in text
    assert isinstance(executor.execute(isolated(my_pid), {}), Ok)  # the child is fine


def test_an_exception_that_does_not_unpickle_in_the_parent_is_named(
    executor: ToolExecutor,
) -> None:
    text = message(executor.execute(isolated(raise_two_arg_error), {}))
    assert "the exception the tool raised (TwoArgError: 1 and 2)" in text
    assert "could not be unpickled in the parent process: TypeError" in text


def test_a_function_or_argument_the_child_cannot_load_is_named(
    executor: ToolExecutor, ghost: types.ModuleType
) -> None:
    text = message(executor.execute(isolated(ghost.ghost_tool, name="ghost"), {}))
    assert "the function of tool 'ghost' could not be loaded in the child process" in text
    assert "ModuleNotFoundError" in text
    text = message(
        executor.execute(isolated(fail, validate_args=False), {"message": ghost.Ghost()})
    )
    assert "the arguments could not be unpickled in the child process" in text
    assert isinstance(executor.execute(isolated(my_pid), {}), Ok)


# -- options, stats, shutdown, exit ------------------------------------------------------


@pytest.mark.parametrize("option", ["process_workers", "max_tasks_per_child"])
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_process_options_are_checked_at_construction(option: str, bad: object) -> None:
    with pytest.raises(ValueError, match=f"ToolExecutor option '{option}' must be an int >= 1"):
        ToolExecutor(**{option: bad})  # type: ignore[arg-type]


def test_no_child_starts_before_the_first_process_call() -> None:
    with ToolExecutor(process_workers=3) as executor:
        figures = executor.stats()
        assert figures["process_workers"] == figures["process_started"] == 0
        assert figures["process_max_workers"] == 3
        assert executor._processes.pids() == []


def test_shutdown_leaves_no_child_process(tmp_path: pathlib.Path) -> None:
    executor = ToolExecutor(process_workers=2)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    executor.execute_many(
        [
            (isolated(rendezvous), {"mine": a, "other": b}),
            (isolated(rendezvous), {"mine": b, "other": a}),
        ]
    )
    assert wait_for(lambda: len(executor._processes.pids()) == 3)  # two and a spare
    pids = executor._processes.pids()
    executor.shutdown(wait=True)
    assert [pid for pid in pids if alive(pid)] == []
    figures = executor.stats()
    assert (figures["process_workers"], figures["process_busy"]) == (0, 0)
    result = executor.execute(isolated(my_pid), {})
    assert isinstance(result, Err) and isinstance(result.reason, ExecutorShutdown)


def test_shutdown_without_wait_returns_at_once_and_the_running_call_still_answers(
    tmp_path: pathlib.Path,
) -> None:
    executor = ToolExecutor(process_workers=1)
    started, release = tmp_path / "started", tmp_path / "release"
    outcome: list[object] = []
    caller = threading.Thread(
        target=lambda: outcome.append(
            executor.execute(
                isolated(wait_for_release), {"started": str(started), "release": str(release)}
            )
        )
    )
    caller.start()
    try:
        assert wait_for(started.exists)
        pids = executor._processes.pids()
        began = time.monotonic()
        executor.shutdown(wait=False)
        assert time.monotonic() - began < MARGIN
    finally:
        release.touch()
        caller.join()
    assert outcome == [Ok("released")]
    assert all(gone(pid) for pid in pids), "the children end in the background"


def test_a_hung_process_tool_does_not_keep_the_interpreter_alive(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "hang.py"
    pidfile = tmp_path / "pids"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, threading, time
            sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})
            from nous_tools import Tool, execute
            from test_process_pool import spawn_grandchild_then_hang, wait_for

            if __name__ == "__main__":
                hung = Tool.from_function(
                    spawn_grandchild_then_hang, isolation="process", timeout=120, retries=0
                )
                threading.Thread(
                    target=execute, args=(hung, {{"pidfile": {str(pidfile)!r}}}), daemon=True
                ).start()
                import os
                assert wait_for(lambda: os.path.exists({str(pidfile)!r}))
                print("leaving")
            """
        )
    )
    began = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "leaving"
    assert took < 30, "a child hung for 120 s must not keep the interpreter alive"
    child, grandchild = map(int, pidfile.read_text().split())
    assert gone(child) and gone(grandchild)


def test_an_idle_child_never_keeps_the_interpreter_alive_whatever_the_atexit_order(
    tmp_path: pathlib.Path,
) -> None:
    """multiprocessing joins its live children at exit (``_exit_function``). A library
    that registers that hook again after the pool started (Celery's worker does) puts
    it before the pool's own atexit hook: the idle children must still be gone first."""
    script = tmp_path / "late_hook.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import atexit, sys
            sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})
            import multiprocessing.util
            from nous_tools import Tool, ToolExecutor
            from test_process_pool import my_pid

            if __name__ == "__main__":
                executor = ToolExecutor(process_workers=1)  # never shut down
                tool = Tool.from_function(my_pid, isolation="process", timeout=60, retries=0)
                print(executor.execute(tool, {{}}).unwrap())
                atexit.register(multiprocessing.util._exit_function)  # runs before ours
                print("leaving")
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    child, leaving = done.stdout.split()
    assert leaving == "leaving"
    assert gone(int(child))


# -- a storm ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_storm_of_kills_crashes_and_calls_leaves_the_pool_whole(
    tmp_path: pathlib.Path,
) -> None:
    """Eight threads mix returning, raising, timing out and crashing calls on a
    three-child pool; every call gets its own right outcome, and afterwards the
    pool is idle, its counts add up and no child is left once it shuts down."""
    executor = ToolExecutor(max_workers=8, process_workers=3, max_tasks_per_child=7)
    seen: set[int] = set()
    lock = threading.Lock()
    failures: list[str] = []

    def lane(i: int) -> None:
        for k in range(25):
            which = (i + k) % 4
            if which == 0:
                result = executor.execute(isolated(my_pid), {})
                if isinstance(result, Ok):
                    with lock:
                        seen.add(result.value)
                else:
                    failures.append(f"pid: {result}")
            elif which == 1:
                result = executor.execute(isolated(fail), {"message": "x"})
                if not (isinstance(result, Err) and result.reason.message.endswith(": x")):
                    failures.append(f"fail: {result}")
            elif which == 2:
                started = tmp_path / f"s{i}-{k}"
                result = executor.execute(  # waits as long as it must: every hang runs
                    isolated(write_then_wait, timeout=0.2, queue_timeout=30),
                    {"started": str(started), "late": str(started), "delay": 30},
                )
                if not (isinstance(result, Err) and isinstance(result.reason, ToolTimeout)):
                    failures.append(f"hang: {result}")
            else:
                result = executor.execute(isolated(segfault, timeout=10), {})
                ok = isinstance(result, Err) and (
                    isinstance(result.reason.original_error, ChildProcessDied)
                )
                if not ok:
                    failures.append(f"segfault: {result}")

    threads = [threading.Thread(target=lane, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    figures = executor.stats()
    assert figures["process_busy"] == figures["process_pending"] == 0
    assert figures["process_died"] >= 50
    pids = executor._processes.pids()
    executor.shutdown(wait=True)
    assert [pid for pid in seen | set(pids) if alive(pid)] == []
