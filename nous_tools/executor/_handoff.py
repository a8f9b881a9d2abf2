"""A batch call's first attempt, handed off and not awaited (private).

:class:`HandOffs`, step 5 of a batch's call in :class:`~nous_tools.ToolExecutor`'s chain: the timed first
attempt of a call of ``execute_many``'s batch (:mod:`nous_tools.executor._batch`),
handed to a pool worker or a child process as ``_timed`` would run it, without
waiting for it; :class:`_Job`, where such a call stands; and the end of that
attempt read into the call's result, signals and log lines (``finish_hand_off``).
"""

from __future__ import annotations

import collections.abc as c
import contextvars
import logging
import queue
import threading
import time
import typing as t

from nous_tools._engine import _reporting
from nous_tools._util._clock import monotonic
from nous_tools._util._event import AttemptCancelled
from nous_tools._util._log import log as _log
from nous_tools._util._scope import here, interrupts
from nous_tools.backend import ProcessBackend
from nous_tools.executor._attempts import (
    _NO_CAP,
    Attempts,
    _exception,
    _Failure,
    _internal_error,
    _log_signal,
    _progress,
    _start,
    _stop,
    _with_attempt,
)
from nous_tools.results import Ok
from nous_tools.run_context import RunContext
from nous_tools.run_context import with_channel as _with_channel
from nous_tools.tool import Tool

_logger = _log.logger


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: A batch's call whose first attempt a worker runs (see Batches.run).
_PENDING = _Marker("_PENDING")
#: A batch's call whose first attempt failed and that goes on with its retries.
_RETRY = _Marker("_RETRY")


class _Job:
    """One call of a batch run by ``Batches.run``: where it stands."""

    __slots__ = (
        "arguments",
        "began",
        "call_id",
        "channel",
        "context",
        "ctx",
        "debug",
        "emit",
        "failure",
        "index",
        "notify",
        "process",
        "session",
        "task",
        "tool",
        "total",
    )

    def __init__(self, index: int, context: contextvars.Context, notify: queue.SimpleQueue[t.Any]):
        self.index = index
        self.context = context  # the copy of the caller's context its signals are sent in
        self.notify = notify
        self.tool: t.Any = None
        self.arguments: t.Any = None
        self.ctx: t.Any = None
        self.call_id: str | None = None
        self.total = 1
        self.began = 0
        self.emit = False
        self.debug: float | None = None
        self.task: t.Any = None
        self.failure: _Failure | None = None
        self.channel: _reporting.Channel | None = None  # what its first attempt reports
        self.process: ProcessBackend | None = None  # its attempts' child processes, if any
        self.session: t.Any = None  # ... and the batch's session with them, if any


class HandOffs:
    """Attempt 1 of a batch's timed call, handed to a worker or a child process and
    not waited for (see ``executor._batch``); its end read as :class:`Attempts`
    reads an attempt's."""

    def __init__(self, attempts: Attempts) -> None:
        self._attempts = attempts

    def hand_off(
        self,
        job: _Job,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        call_id: str | None,
        total: int,
        until: float | None = None,
    ) -> t.Any:
        """Attempt 1 of a batch's timed call: its ``start`` signal, and the call
        handed to a worker as ``Attempts._timed`` would run it, without waiting; then
        ``_PENDING``, or the result when the pool refused it at once. ``until``:
        the deadline already set (when validation and conversion ran)."""
        job.tool, job.arguments, job.ctx, job.call_id, job.total = (
            tool,
            arguments,
            ctx,
            call_id,
            total,
        )
        job.debug = time.perf_counter() if _logger.isEnabledFor(logging.DEBUG) else None
        emit = bool(_start.receivers or _stop.receivers or _exception.receivers)
        attempt_ctx = ctx
        process = job.process
        if (
            tool.takes_ctx
            and ctx._channel is None
            and (_progress.receivers or _log_signal.receivers)
            and process is None
        ):
            # What the tool reports comes to the batch's queue (see _coordinate);
            # job.ctx stays without this channel: retries get channels of their own.
            job.channel = channel = _reporting.signal_channel(tool, call_id, 1, job.notify)
            attempt_ctx = _with_channel(ctx, channel)
            emit = True
        job.emit = emit
        job.began = self._attempts.send_start(tool, 1, total, call_id) if emit else 0
        deadline = monotonic() + t.cast(float, tool.timeout) if until is None else until
        scope = here.scope
        if process is not None:
            return self._hand_to_child(job, process, tool, arguments, attempt_ctx, deadline)
        if scope is not None and scope.deadline is not None and scope.deadline < deadline:
            deadline = scope.deadline  # nested: never later than the enclosing attempt's
        cancelled: threading.Event | None = None
        if tool.takes_ctx:
            cancelled = AttemptCancelled()
            call_args: tuple[t.Any, ...] = (_with_attempt(attempt_ctx, 0, deadline, cancelled),)
        else:
            call_args = ()
        on_timeout = tool.on_timeout or self._attempts.on_timeout
        started = self._attempts.pool.submit(
            tool.function,
            call_args,
            arguments if type(arguments) is dict else dict(arguments),
            deadline,
            job.notify,
            cancelled=cancelled,
            interrupt=on_timeout == "interrupt",
        )
        if type(started) is tuple:  # refused: shut down, saturated, or cancelled
            return self.finish_hand_off(job, started)
        job.task = started
        return _PENDING

    def _hand_to_child(
        self,
        job: _Job,
        process: ProcessBackend,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        deadline: float,
    ) -> t.Any:
        """:meth:`hand_off` for a call whose attempts run in child processes: handed
        to the pool's drivers, no thread of its own (as ``Attempts._timed`` would run it:
        its timeout counts from when a child takes it)."""
        scope = here.scope
        cap = scope.deadline if scope is not None and scope.deadline is not None else _NO_CAP
        actx = (
            _with_attempt(ctx, 0, min(cap, deadline), threading.Event()) if tool.takes_ctx else None
        )
        timeout = t.cast(float, tool.timeout)
        started = process.pool.submit(
            tool,
            arguments,
            actx,
            cap,
            job.notify.put,
            budget=deadline - monotonic(),
            queue_timeout=self._attempts.queue_for(tool, timeout),
            session=job.session,
        )
        if type(started) is tuple:  # refused: shut down, unpicklable, or cancelled
            return self.finish_hand_off(job, started)
        job.task = started
        return _PENDING

    def finish_hand_off(self, job: _Job, outcome: tuple[str, t.Any, t.Any]) -> t.Any:
        """The end of a batch's first attempt, in the call's context: its result,
        signals and log lines, as ``Attempts.attempt`` and ``Calls.entry`` would give
        them; ``_RETRY`` when the call goes on with a retry (``job.failure``)."""
        tool = job.tool
        try:
            kind, value, text = outcome
            if job.channel is not None:
                job.channel.finish()  # what the tool reported, before the attempt's end
            duration = time.perf_counter_ns() - job.began if job.emit else 0
            result = self._attempts.read_end(
                tool, job.arguments, 1, job.total, tool.timeout, kind, value, text, duration
            )
            if type(result) is _Failure:
                if result.will_retry:
                    job.failure = result
                    return _RETRY
                return self._attempts.final_failure(tool, result)
            if job.debug is not None and type(result) is Ok:
                elapsed_ms = (time.perf_counter() - job.debug) * 1000
                _log.debug("Tool '%s' completed in %.1f ms", tool.name, elapsed_ms)
            return result
        except BaseException as exc:  # a bug of ours must not reach the caller either
            if interrupts(exc):
                raise
            return _internal_error(tool, exc)
