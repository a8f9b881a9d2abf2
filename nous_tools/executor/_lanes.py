"""Batches run by lanes (private): helper threads that each take the next call.

:func:`run_lanes`: the batch of ``run_jobs`` with a ``run`` of its own (a registry's, ``execute_tool_calls``'),
where the caller and up to ``limit - 1`` lane threads run one job at a time; and
:class:`_Tally`, a batch's ``on_progress``.
"""

from __future__ import annotations

import collections.abc as c
import contextvars
import threading
import typing as t

from nous_tools._util._log import log as _log
from nous_tools._util._scope import Scope, here, interrupts
from nous_tools._util._text import safe_str as _safe_str
from nous_tools.errors import ToolError
from nous_tools.results import Err
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool

if t.TYPE_CHECKING:
    from nous_tools._engine._pool import WorkerPool


class _Tally:
    """A batch's ``on_progress``: called with ``(done, total, result)`` as each call
    ends (and ``(0, total, None)`` first), one call at a time, in the thread that saw
    the call end. A callback that raises is logged, never the batch's problem."""

    __slots__ = ("callback", "done", "lock", "total")

    def __init__(self, callback: c.Callable[[int, int, t.Any], object], total: int) -> None:
        self.callback = callback
        self.total = total
        self.done = 0
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            self._tell(None)

    def ended(self, result: t.Any) -> None:
        with self.lock:
            self.done += 1
            self._tell(result)

    def _tell(self, result: t.Any) -> None:  # with the lock
        try:
            self.callback(self.done, self.total, result)
        except BaseException as exc:
            if interrupts(exc):
                raise
            _log.warning(
                "on_progress callback %r raised %s; ignored",
                self.callback,
                type(exc).__name__,
                exc_info=True,
            )


def could_not_run(tool: object, exc: BaseException) -> Err:
    """The result of a batch's call whose lane raised ``exc`` (a bug of ours, or a
    registry's ``run``)."""
    return Err(
        ToolError(
            f"Tool '{getattr(tool, 'name', 'unknown')}' could not be run: "
            f"{type(exc).__name__}: {_safe_str(exc)}",
            original_error=exc,
        )
    )


def run_lanes(
    pool: WorkerPool,
    jobs: c.Sequence[tuple[Tool, t.Any, str | None] | Err],
    todo: list[int],
    results: list[t.Any],
    ctx: RunContext[t.Any] | None,
    batch: Scope,
    runner: c.Callable[[Tool, t.Any, RunContext[t.Any] | None, str | None], t.Any],
    limit: int,
    tally: _Tally | None = None,
) -> None:
    """The caller and up to ``limit - 1`` lane threads (``limit``: at most
    ``max_workers``) take jobs one at a time and run each with ``runner``."""
    lock = threading.Lock()
    finished = threading.Event()
    state = [0, 0]  # the next job to claim, the jobs claimed and not yet ended

    def drain(caller: bool = False) -> None:
        while True:
            with lock:
                if batch.cancelled or state[0] >= len(todo):
                    if state[1] == 0:
                        finished.set()
                    return
                i = todo[state[0]]
                state[0] += 1
                state[1] += 1
            tool, arguments, call_id = t.cast(tuple[Tool, t.Any, "str | None"], jobs[i])
            try:
                try:
                    results[i] = runner(tool, arguments, ctx, call_id)
                except BaseException as exc:
                    if caller and interrupts(exc):
                        raise  # the caller's Ctrl-C, or its own cancellation
                    results[i] = could_not_run(tool, exc)
                if tally is not None:
                    tally.ended(results[i])
            finally:
                with lock:
                    state[1] -= 1
                    if state[1] == 0 and (batch.cancelled or state[0] >= len(todo)):
                        finished.set()

    try:
        for _ in range(min(len(todo), limit) - 1):
            try:
                pool.start_lane(drain, batch)
            except RuntimeError:  # no thread to be had: fewer lanes
                break
        saved = here.scope
        here.scope = batch
        try:
            contextvars.copy_context().run(drain, True)  # the caller is a lane too
        finally:
            here.scope = saved
        finished.wait()
    except BaseException:
        pool.cancel(batch)
        raise
