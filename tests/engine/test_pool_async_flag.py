"""The pool never leaves CPython's "an asynchronous exception is pending" flag
raised with nothing pending.

Withdrawing a cancellation that was not delivered (``PyThreadState_SetAsyncExc``
with NULL) raises that interpreter-wide flag, and only a thread that takes an
exception lowers it. While it stays raised, every thread checks for pending work at
every call and loop; on CPython 3.11 a thread under ``sys.settrace`` (a debugger,
coverage, hypothesis after a failing example) spins for ever at the next function
it enters. The pool used to withdraw at every worker's exit and at every nested
call in a worker, so a traced program hung after a pool shut down.

Each scenario runs in a fresh interpreter (the flag is process state), then makes a
traced call; the scenario passes when that call returns. Only CPython 3.11 hangs on
a raised flag; elsewhere these pass either way.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_TRACED_CALL = """
import sys

def _tracer(frame, event, arg):
    return _tracer

def _entered():
    return "entered"

sys.settrace(_tracer)
try:
    result = _entered()
finally:
    sys.settrace(None)
print(result)
"""


def _run(scenario: str) -> str:
    """Run ``scenario`` then a traced call in a fresh interpreter; its output."""
    code = textwrap.dedent(scenario) + _TRACED_CALL
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a traced call after the scenario never returned (the flag stayed raised)")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_traced_call_after_the_pool_shut_down_returns() -> None:
    out = _run(
        """
        from nous_tools._engine._pool import WorkerPool
        from nous_tools._engine._outcome import RETURNED
        from nous_tools._util._clock import monotonic

        pool = WorkerPool(2)
        outcome = pool.run(lambda: "ran", (), {}, monotonic() + 60)
        assert outcome[0] == RETURNED, outcome
        pool.shutdown(wait=True)  # its workers leave
        """
    )
    assert out.split() == ["entered"]


def test_a_traced_call_after_a_nested_call_in_a_worker_returns() -> None:
    out = _run(
        """
        from nous_tools import Ok, Registry, Tool

        def inner() -> str:
            \"\"\"The nested tool.\"\"\"
            return "inner"

        def outer() -> str:
            \"\"\"Calls the nested tool from its worker (the executor shields it).\"\"\"
            result = registry.execute("inner", {})
            assert isinstance(result, Ok), result
            return result.value

        registry = Registry(
            [Tool.from_function(inner, timeout=30), Tool.from_function(outer, timeout=30)]
        )
        result = registry.execute("outer", {})
        assert isinstance(result, Ok), result
        print(result.value)
        """
    )
    assert out.split() == ["inner", "entered"]


def test_a_traced_call_after_a_cancelled_worker_left_returns() -> None:
    # A tool held in C when its deadline passes: the cancellation waits until it
    # wakes, lands, and its worker retires (and leaves, with the pool).
    out = _run(
        """
        import threading
        from nous_tools._engine._pool import WorkerPool
        from nous_tools._engine._outcome import TIMED_OUT
        from nous_tools._util._clock import monotonic

        pool = WorkerPool(1)
        started, release, left = threading.Event(), threading.Event(), threading.Event()

        def held():
            started.set()
            try:
                release.wait(60)
            finally:
                left.set()

        outcome = pool.run(held, (), {}, monotonic() + 0.2)
        assert outcome[0] == TIMED_OUT, outcome
        release.set()
        assert left.wait(60)
        pool.shutdown(wait=True)
        print("timed out")
        """
    )
    assert out.split() == ["timed", "out", "entered"]


def test_withdraw_own_leaves_nothing_pending_and_the_flag_lowered() -> None:
    out = _run(
        """
        import threading
        from nous_tools._engine._pool_worker import _Worker, withdraw_own

        def in_a_thread():
            me = _Worker()
            me.ident = threading.get_ident()
            withdraw_own(me)
            for _ in range(1000):  # checks for pending exceptions: none lands
                pass
            print("withdrawn")

        thread = threading.Thread(target=in_a_thread)
        thread.start()
        thread.join()
        """
    )
    assert out.split() == ["withdrawn", "entered"]
