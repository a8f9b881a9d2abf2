"""An asynchronous exception (Ctrl-C in the main thread, ``ToolCancelled`` in a
worker) lands only where CPython checks for one: right after a call returns, at a
function's start, at a loop's backward jump. These tests land one at each such
point of the pool's abandonment, in turn, and check that nobody is left waiting.

(A trace function that raises at an opcode stands in for the signal: CPython
delivers it the same way, as an exception raised by the instruction about to run.)
"""

from __future__ import annotations

import dis
import itertools
import sys
import threading
import types
import typing as t

import pytest

from nous_tools._engine._outcome import SHUT_DOWN, TIMED_OUT
from nous_tools._engine._pool import WorkerPool, _Task
from nous_tools._engine._pool_task import _Abandoning


def _check_points(code: types.CodeType) -> list[int]:
    """Offsets of the instructions CPython may run its eval-breaker check before:
    the one after each call, and each backward jump."""
    instructions = list(dis.get_instructions(code))
    points = []
    for before, instruction in itertools.pairwise(instructions):
        after_a_call = before.opname.startswith("CALL")  # CALL, CALL_KW, CALL_FUNCTION...
        if (
            after_a_call
            or "BACKWARD" in instruction.opname
            or instruction.opname == "JUMP_ABSOLUTE"
        ):
            points.append(instruction.offset)
    return sorted(set(points))


class _Interrupt:
    """Raise ``KeyboardInterrupt`` once, before the instruction at ``offset`` of
    ``code`` runs in this thread."""

    def __init__(self, code: types.CodeType, offset: int) -> None:
        self.code, self.offset, self.fired = code, offset, False

    def _trace(self, frame: types.FrameType, event: str, arg: object) -> t.Any:
        if frame.f_code is not self.code:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode" and frame.f_lasti == self.offset and not self.fired:
            self.fired = True
            frame.f_trace_opcodes = False
            sys.settrace(None)  # one interruption, then the code runs untraced
            raise KeyboardInterrupt
        return self._trace

    def __enter__(self) -> _Interrupt:
        sys.settrace(self._trace)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(None)


ABANDON = _Abandoning._abandon.__code__


def _started_task(pool: WorkerPool) -> _Task:
    """A task a worker has taken (its ``start`` claimed), still running."""
    task = _Task(lambda: None, (), {}, 0.0, threading.Event(), False, pool)
    task.claims["start"] = object()
    return task


@pytest.mark.skipif(sys.gettrace() is not None, reason="a tracer (coverage) is running")
@pytest.mark.parametrize("offset", _check_points(ABANDON))
@pytest.mark.parametrize("kind", [TIMED_OUT, SHUT_DOWN])
def test_an_interrupt_landing_anywhere_in_abandon_never_leaves_the_waiter_stuck(
    offset: int, kind: str
) -> None:
    pool = WorkerPool(1)
    try:
        for task in (_started_task(pool), _Task(lambda: None, (), {}, 0.0, None, False, pool)):
            with _Interrupt(ABANDON, offset) as interrupt:
                try:
                    pool._abandon(task, kind)
                except KeyboardInterrupt:
                    assert interrupt.fired
            finish = task.claims.get("finish")
            if finish is not None:  # the abandoner decided it: the waiter must wake
                assert not task.done.locked(), (offset, kind)
            assert pool.stats()["abandoned"] == 0
    finally:
        pool.shutdown(wait=False)


def test_the_check_points_are_found() -> None:
    # Guards the test above against a CPython whose opcode names it does not know.
    assert len(_check_points(ABANDON)) >= 8
