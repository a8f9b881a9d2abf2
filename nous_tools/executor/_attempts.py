"""One attempt of a call, and the retries after a first failure (private).

:class:`Attempts`, step 5 of :class:`~nous_tools.ToolExecutor`'s chain: an attempt's
signals, the attempt itself (inline, on the worker threads, in child processes or
on another backend: :meth:`Attempts._timed`), its outcome read into a result or a
:class:`_Failure`, and the retries tenacity drives (step 5 of the pipeline in
``docs/concepts/pipeline.md``).
"""

from __future__ import annotations

import collections.abc as c
import queue
import threading
import time
import traceback
import typing as t

from nous_tools import signals as _signals
from nous_tools._engine import _admission, _isolation, _pool, _reporting
from nous_tools._engine._pool import RAISED, RETURNED, SATURATED, SHUT_DOWN, TIMED_OUT
from nous_tools._engine._process_pool import QUEUE_TIMED_OUT
from nous_tools._util._clock import monotonic
from nous_tools._util._event import AttemptCancelled
from nous_tools._util._log import log as _log
from nous_tools._util._scope import here, interrupts
from nous_tools._util._text import safe_str as _safe_str
from nous_tools.backend import Backend, ProcessBackend, ThreadBackend
from nous_tools.errors import (
    ElicitationUnavailable,
    ExecutorSaturated,
    ExecutorShutdown,
    OutcomeUnknown,
    RootsUnavailable,
    SamplingUnavailable,
    SandboxLimitReached,
    SandboxUnavailable,
    SandboxViolation,
    ToolError,
    ToolTimeout,
)
from nous_tools.results import Err, Ok, Result
from nous_tools.results import ok_fast as _ok
from nous_tools.run_context import _NEVER_CANCELLED, RunContext
from nous_tools.run_context import for_attempt as _for_attempt
from nous_tools.run_context import with_channel as _with_channel
from nous_tools.tool import Tool

if t.TYPE_CHECKING:
    from nous_tools._engine._admission import Slot
    from nous_tools._engine._pool import WorkerPool


_NO_CAP = float("inf")  # a process call's bound when no enclosing attempt sets one

#: The outcome kinds a backend may answer (see nous_tools.backend).
_KINDS = frozenset((RETURNED, RAISED, TIMED_OUT, SATURATED, SHUT_DOWN, _isolation.UNPICKLABLE))

_start = _signals.tool_execute_start
_stop = _signals.tool_execute_stop
_exception = _signals.tool_execute_exception
_timeout = _signals.tool_timeout
_progress = _signals.tool_progress
_log_signal = _signals.tool_log
_send = _signals.send


class _Failure:
    """An attempt that raised: retried while attempts remain and ``retry_on`` agrees.
    ``text`` is the exception's ``str()``, rendered where the attempt ran."""

    __slots__ = ("attempt", "error", "text", "will_retry")

    def __init__(self, error: BaseException, attempt: int, text: str, will_retry: bool) -> None:
        self.error = error
        self.attempt = attempt
        self.text = text
        self.will_retry = will_retry


#: What a retry cannot mend: nowhere to ask, and what a sandbox refused or lacks.
_NEVER_RETRIED = (
    OutcomeUnknown,
    SamplingUnavailable,
    ElicitationUnavailable,
    RootsUnavailable,
    SandboxViolation,
    SandboxLimitReached,
    SandboxUnavailable,
)


def _should_retry(tool: Tool, exc: BaseException, attempt: int) -> bool:
    """Whether the tool's ``retry_on`` lets ``exc`` (from ``attempt``) be retried.
    ``ctx.sample``/``ctx.elicit`` with nowhere to go is never retried."""
    if isinstance(exc, _NEVER_RETRIED):
        return False
    retry_on = tool.retry_on
    if retry_on is None:
        return True
    if isinstance(retry_on, tuple):
        return isinstance(exc, retry_on)
    import tenacity  # imported at the first retry, not with the package

    state = tenacity.RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
    state.attempt_number = attempt
    state.set_exception((type(exc), exc, exc.__traceback__))
    try:
        return bool(retry_on(state))
    except Exception:
        _log.warning("retry_on strategy of tool '%s' raised; the failure is not retried", tool.name)
        return False


class _Retry(Exception):
    """Carries a :class:`_Failure` through tenacity."""

    def __init__(self, failure: _Failure) -> None:
        self.failure = failure


def _internal_error(tool: object, exc: BaseException) -> Err:
    name = getattr(tool, "name", "unknown")
    _log.error("Internal error while executing tool '%s'", name, exc_info=True)
    return Err(
        ToolError(
            f"Tool '{name}' could not be executed: internal error "
            f"{type(exc).__name__}: {_safe_str(exc)}",
            tool_name=name if isinstance(name, str) else None,
            original_error=exc,
        )
    )


def _not_started(tool: Tool, attempt: int, kind: str, value: t.Any) -> ToolError:
    """The error of an attempt that never started, or could not cross to a child
    process or its backend: ``kind`` and ``value`` are the backend's outcome."""
    if kind == _isolation.UNPICKLABLE:
        where = (
            "cannot run in a child process"
            if tool.backend is None and tool.isolation == "process"
            else "could not be sent to its backend"
        )
        error: ToolError = ToolError(
            f"Tool '{tool.name}' {where}: {value}",
            tool_name=tool.name,
            attempt=attempt,
        )
    elif kind == QUEUE_TIMED_OUT:
        waited, workers = value
        error = ExecutorSaturated(
            f"Tool '{tool.name}' was not started: no child process came free within its "
            f"queue_timeout of {waited:g} s (process_workers={workers}, all busy)",
            tool_name=tool.name,
            attempt=attempt,
        )
    elif kind == SATURATED:
        stuck, cap = value
        error = ExecutorSaturated(
            f"Tool '{tool.name}' was not started: {stuck} worker(s) are stuck past their "
            f"deadlines, at the cap max_abandoned={cap}",
            tool_name=tool.name,
            attempt=attempt,
        )
    else:
        assert kind == SHUT_DOWN, kind
        error = ExecutorShutdown(
            f"Tool '{tool.name}' was not started: the ToolExecutor was shut down",
            tool_name=tool.name,
            attempt=attempt,
        )
    return error


#: ``attrs.evolve(ctx, retry=, deadline=[, cancelled=])``, field by field.
_with_attempt = _for_attempt


class Attempts:
    """Step 5 of :class:`~nous_tools.ToolExecutor`'s pipeline: one attempt of a call
    on its backend (inline, the worker threads, child processes, another backend),
    its outcome read into a result or a :class:`_Failure`, and the retries after a
    first failure. It calls nothing back: what runs an attempt is a backend."""

    def __init__(
        self,
        threads: ThreadBackend,
        process: ProcessBackend,
        backends: dict[str, Backend],
        default: Backend,
        admission: _admission.Admission,
        queue_timeout: float | None,
        log_exception_text: bool,
    ) -> None:
        self._threads = threads
        self.pool: WorkerPool = threads.pool
        self._process_backend = process
        self._backends = backends
        self._default = default
        self._admission = admission
        self._queue_timeout = queue_timeout
        self.log_exception_text = log_exception_text

    @property
    def on_timeout(self) -> str:
        """The executor's ``on_timeout``, for tools that set none of their own."""
        return self._threads.on_timeout

    def backend_of(self, tool: Tool) -> Backend | None:
        """The backend ``tool``'s timed attempts go to (None: it names one this
        executor does not have)."""
        name = tool.backend
        if name is None:
            return self._default if tool.isolation == "thread" else self._process_backend
        return self._backends.get(name)

    def on_threads(self, backend: Backend | None) -> bool:
        """Whether ``backend`` is this executor's worker threads."""
        return backend is self._threads

    def slotted(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        attempt: int,
        total: int,
        call_id: str | None,
    ) -> Result | _Failure:
        """One attempt of a ``max_concurrency`` tool: it waits for a slot until its
        deadline (which the wait counts towards), runs holding it, then frees it."""
        slot = self._admission.slot(tool, t.cast(int, tool.max_concurrency), call_id)
        if isinstance(slot, Err):
            return slot
        try:
            return self.attempt(
                tool,
                arguments,
                ctx,
                attempt,
                total,
                call_id,
                deadline=slot.deadline,
                waited=slot if slot.waited is not None else None,
            )
        finally:
            slot.release()

    def retry(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        first: _Failure,
        total: int,
        call_id: str | None = None,
    ) -> Result:
        """Attempts 2..total, driven by tenacity (entered only after a first failure
        that may be retried)."""
        import tenacity  # imported at the first retry, not with the package

        step = self.slotted if tool.max_concurrency is not None else self.attempt
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(total),
            wait=tool.retry_wait if tool.retry_wait is not None else tenacity.wait_none(),
            retry=tenacity.retry_if_exception_type(_Retry),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    number = attempt.retry_state.attempt_number
                    if number == 1:
                        raise _Retry(first)
                    outcome = step(tool, arguments, ctx, number, total, call_id)
                    if type(outcome) is _Failure:
                        if outcome.will_retry:
                            raise _Retry(outcome)
                        return self.final_failure(tool, outcome)
                    if type(outcome) is Ok:
                        _log.info("Tool '%s' succeeded on retry attempt %d", tool.name, number)
                    return t.cast(Result, outcome)
        except _Retry as final:
            return self.final_failure(tool, final.failure)
        raise AssertionError("unreachable: tenacity ended without an outcome")

    def final_failure(self, tool: Tool, failure: _Failure) -> Err:
        exc = failure.error
        kind = type(exc).__name__
        # The class name, then what the exception says: KeyError(2) is "KeyError: 2".
        # Never a traceback.
        text = failure.text
        message = (
            f"Tool execution failed: {kind}: {text}" if text else f"Tool execution failed: {kind}"
        )
        self._log_failure(tool, failure.attempt, message, kind, failure.text)
        return Err(
            ToolError(message, tool_name=tool.name, attempt=failure.attempt, original_error=exc)
        )

    def _log_failure(self, tool: Tool, attempts: int, message: str, kind: str, text: str) -> None:
        """The final-failure log line (SPEC 2.4): at error level the tool, the attempt
        count and the class; the exception's text at debug level only, unless
        ``log_exception_text`` asks for Nous's full wording."""
        if self.log_exception_text:
            _log.error(
                "Tool '%s' failed after all %d attempt(s). Error: %s. Error type: %s",
                tool.name,
                attempts,
                message,
                kind,
            )
            return
        _log.error(
            "Tool '%s' failed after all %d attempt(s). Error: Tool execution failed (%s). "
            "Error type: %s",
            tool.name,
            attempts,
            kind,
            kind,
        )
        _log.debug("Tool '%s' failure text: %s", tool.name, text)

    def attempt(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        attempt: int,
        total: int,
        call_id: str | None = None,
        *,
        deadline: float | None = None,
        waited: Slot | None = None,
    ) -> Result | _Failure:
        """One attempt: its signals, the call (inline or in a worker), its outcome.
        ``deadline``: a timed attempt's, when the call set it already (a wait for a
        ``max_concurrency`` slot counts towards it); ``waited``: that slot, when the
        attempt waited for it (a timeout then says how long it waited, how long it ran)."""
        emit = bool(_start.receivers or _stop.receivers or _exception.receivers)
        channel: _reporting.Channel | None = None
        if (
            tool.takes_ctx
            and ctx._channel is None
            and (_progress.receivers or _log_signal.receivers)
        ):
            # Someone listens to what the tool reports: a channel of this attempt's own
            # (a nested call made with an attempt's ctx reports into that one instead).
            channel = _reporting.signal_channel(tool, call_id, attempt)
            ctx = _with_channel(ctx, channel)
            emit = True  # the attempt's end goes through read_end, after the channel's
        timeout = tool.timeout
        if emit and timeout is not None and deadline is None:
            # The deadline runs from here: a start receiver that takes its time (they
            # run in this thread) eats into the attempt's timeout, never stretches it.
            deadline = monotonic() + timeout
        began = self.send_start(tool, attempt, total, call_id) if emit else 0
        text: str | None = None
        if timeout is None:
            if tool.takes_ctx:
                scope = here.scope
                if scope is not None:  # nested in a timed attempt: its deadline and cancel
                    ctx = _with_attempt(ctx, attempt - 1, scope.deadline, scope.event)
                elif ctx.retry != attempt - 1:
                    ctx = _with_attempt(ctx, attempt - 1)
                call_args: tuple[t.Any, ...] = (ctx,)
            else:
                call_args = ()
            token = here.worker  # in a pool worker, inside a shielded nested call?
            if token is not None and not token.shield:
                token = None
            try:
                if token is not None:  # the tool itself may be cancelled, not our code
                    _pool.unshield(token)
                value = tool.function(*call_args, **arguments)
            except Exception as exc:
                kind, value = RAISED, exc
            except BaseException as exc:
                if interrupts(exc):
                    raise  # the user's Ctrl-C, or this thread's attempt was cancelled
                kind, value = RAISED, exc
            else:
                if token is not None:
                    _pool.shield()
                    token = None
                if not emit:
                    return value if type(value) is Ok or type(value) is Err else _ok(value)
                kind = RETURNED
            finally:
                if token is not None:
                    _pool.shield()
        else:
            kind, value, text = self._timed(
                tool, arguments, ctx, attempt, timeout, deadline, channel
            )
            if kind == RETURNED and not emit:
                if type(value) is Ok or type(value) is Err or isinstance(value, (Ok, Err)):
                    return value
                return _ok(value)
        if channel is not None:
            channel.finish()  # what the tool reported, before the attempt's end
        duration = time.perf_counter_ns() - began if emit else 0
        return self.read_end(
            tool, arguments, attempt, total, timeout, kind, value, text, duration, waited
        )

    @staticmethod
    def send_start(tool: Tool, attempt: int, total: int, call_id: str | None) -> int:
        """Send an attempt's ``start`` signal (when it has receivers); the attempt's
        start on ``perf_counter_ns``, for its duration."""
        if _start.receivers:
            start_metadata: dict[str, t.Any] = {
                "tool_name": tool.name,
                "tool_module": tool.module,
                "attempt": attempt,
                "max_retries": total,
                "has_timeout": tool.timeout is not None,
            }
            if call_id is not None:  # the model's tool-call id (for tracing)
                start_metadata["call_id"] = call_id
            _send(
                _start,
                tool,
                {"system_time": time.time_ns(), "monotonic_time": time.monotonic_ns()},
                start_metadata,
            )
        return time.perf_counter_ns()

    def read_end(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        attempt: int,
        total: int,
        timeout: float | None,
        kind: str,
        value: t.Any,
        text: str | None,
        duration: int,
        waited: Slot | None = None,
    ) -> Result | _Failure:
        """An attempt's outcome: its result or failure, and its signals and log lines.
        ``waited``: the ``max_concurrency`` slot the attempt waited for, if it did."""
        if kind == RETURNED:
            if type(value) is Ok or type(value) is Err or isinstance(value, (Ok, Err)):
                result = value
            else:
                result = _ok(value)
            if _stop.receivers:
                _send(
                    _stop,
                    tool,
                    {"duration": duration, "attempt": attempt},
                    {"tool_name": tool.name, "attempt": attempt, "success": True},
                )
            return result
        if kind == RAISED:
            if text is None:
                text = _safe_str(value)
            return self.on_raised(tool, arguments, value, text, attempt, total, duration)
        if kind == TIMED_OUT:
            return self._timed_out(tool, attempt, t.cast(float, timeout), duration, waited)
        error = _not_started(tool, attempt, kind, value)
        _log.error("%s", error.message)
        if _exception.receivers:
            self._send_exception(tool, attempt, duration, False, type(error), error, [])
        return Err(error)

    def _timed(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        attempt: int,
        timeout: float,
        deadline: float | None = None,
        channel: _reporting.Channel | None = None,
    ) -> tuple[str, t.Any, t.Any]:
        if deadline is None:
            deadline = monotonic() + timeout
        own = deadline
        scope = here.scope
        if scope is not None and scope.deadline is not None and scope.deadline < deadline:
            deadline = scope.deadline  # nested: never later than the enclosing attempt's
        # Only the attempt goes to the backend; everything else stayed here.
        name = tool.backend
        if name is None:
            backend = self._default if tool.isolation == "thread" else self._process_backend
        else:
            found = self._backends.get(name)
            if found is None:
                return (_isolation.UNPICKLABLE, self._no_backend(name), None)
            backend = found
        if backend is self._threads:  # the common case, straight to the pool
            cancelled: threading.Event | None = None
            if tool.takes_ctx:
                cancelled = AttemptCancelled()  # its Condition is made only if it is used
                call_args: tuple[t.Any, ...] = (
                    _with_attempt(ctx, attempt - 1, deadline, cancelled),
                )
            else:
                call_args = ()
            on_timeout = tool.on_timeout or self.on_timeout
            if channel is None:
                return self.pool.run(
                    tool.function,
                    call_args,
                    arguments if type(arguments) is dict else dict(arguments),
                    deadline,
                    cancelled=cancelled,
                    interrupt=on_timeout == "interrupt",
                )
            return self.pool.run_watched(  # the caller delivers what the tool reports
                tool.function,
                call_args,
                arguments if type(arguments) is dict else dict(arguments),
                deadline,
                t.cast("queue.SimpleQueue[t.Any]", channel.inbox),
                channel.serve,
                cancelled=cancelled,
                interrupt=on_timeout == "interrupt",
            )
        return self._elsewhere(tool, arguments, ctx, attempt, timeout, own, deadline, backend)

    def _elsewhere(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        attempt: int,
        timeout: float,
        own: float,
        deadline: float,
        backend: Backend,
    ) -> tuple[str, t.Any, t.Any]:
        """:meth:`_timed` on a backend other than the worker threads: the child
        processes (whose timeout counts from when a child takes the call; ``own``:
        the attempt's own deadline, ``deadline`` capped by an enclosing attempt's) or
        another backend, whose bug is an outcome, never an exception."""
        name = tool.backend
        scope = here.scope
        actx = (
            _with_attempt(ctx, attempt - 1, deadline, threading.Event()) if tool.takes_ctx else None
        )
        if type(backend) is ProcessBackend:  # its timeout counts from when a child takes it
            cap = scope.deadline if scope is not None and scope.deadline is not None else _NO_CAP
            return backend._attempt(
                tool,
                arguments,
                actx,
                cap,
                own - monotonic(),
                self.queue_for(tool, timeout),
                ctx.sandbox,
                # The caller's cancellation kills the child, as the deadline does.
                None if ctx.cancelled is _NEVER_CANCELLED else ctx.cancelled,
            )
        try:
            outcome = backend.run(tool, arguments, actx, deadline)
        except BaseException as exc:  # a backend's bug: an outcome, never an exception
            if interrupts(exc):
                raise
            _log.error("nous_tools: backend %r raised from run()", name, exc_info=True)
            return (
                _isolation.UNPICKLABLE,
                f"its backend {name or 'default'!r} failed: {type(exc).__name__}: {_safe_str(exc)}",
                None,
            )
        if type(outcome) is not tuple or len(outcome) != 3 or outcome[0] not in _KINDS:
            return (
                _isolation.UNPICKLABLE,
                f"its backend {name or 'default'!r} answered {type(outcome).__name__}, not an "
                "outcome (see nous_tools.backend)",
                None,
            )
        return outcome

    def queue_for(self, tool: Tool, timeout: float) -> float:
        """How long a process-run attempt of ``tool`` waits for a free child."""
        return tool.queue_timeout or self._queue_timeout or timeout

    def _no_backend(self, name: str) -> str:
        return (
            f"it names the backend {name!r}, which this ToolExecutor does not have (it has "
            f"{', '.join(repr(n) for n in sorted(self._backends))}): pass it as "
            f"ToolExecutor(backends={{{name!r}: ...}})"
        )

    def on_raised(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        exc: BaseException,
        text: str,
        attempt: int,
        total: int,
        duration: int,
    ) -> Result | _Failure:
        if isinstance(exc, TimeoutError):
            # A socket timeout, say, or a nested call's ToolTimeout that the tool let
            # escape: terminal like a deadline, never retried.
            timeout = tool.timeout or 0.0
            if _exception.receivers:
                self._send_exception(tool, attempt, duration, False, "timeout", "timeout", None)
            if _timeout.receivers:
                _send(_timeout, tool, {"timeout": timeout}, {"tool_name": tool.name})
            _log.error(
                "Tool '%s' raised %s on attempt %d; terminal, not retried",
                tool.name,
                type(exc).__name__,
                attempt,
            )
            return Err(
                ToolTimeout(
                    f"Tool '{tool.name}' timed out: {text}",
                    tool_name=tool.name,
                    timeout=tool.timeout,
                    attempt=attempt,
                    original_error=exc,
                )
            )
        if not isinstance(exc, Exception):
            # SystemExit, GeneratorExit, KeyboardInterrupt in a worker: never retried.
            if _exception.receivers:
                self._send_exception(
                    tool, attempt, duration, False, type(exc), exc, exc.__traceback__
                )
            return _Failure(exc, attempt, text, False)
        if isinstance(exc, TypeError) and any(type(k) is not str for k in arguments):
            return Err(
                ToolError(
                    f"Invalid arguments for '{tool.name}': argument names must be strings",
                    tool_name=tool.name,
                    attempt=attempt,
                    original_error=exc,
                )
            )
        will_retry = attempt < total and _should_retry(tool, exc, attempt)
        if _exception.receivers:
            self._send_exception(
                tool, attempt, duration, will_retry, type(exc), exc, exc.__traceback__
            )
        if will_retry:
            _log.warning(
                "Tool '%s' failed (attempt %d/%d), will retry. Error type: %s",
                tool.name,
                attempt,
                total,
                type(exc).__name__,
            )
        return _Failure(exc, attempt, text, will_retry)

    def _timed_out(
        self,
        tool: Tool,
        attempt: int,
        timeout: float,
        duration: int,
        waited: Slot | None = None,
    ) -> Err:
        """The ``Err(ToolTimeout)`` of an attempt past its deadline; when it waited for
        a ``max_concurrency`` slot first, its message says how long it waited and how
        long it ran (the wait counts towards the timeout)."""
        if _exception.receivers:
            self._send_exception(tool, attempt, duration, False, "timeout", "timeout", None)
        if _timeout.receivers:
            _send(_timeout, tool, {"timeout": timeout}, {"tool_name": tool.name})
        if waited is not None:
            error = ToolTimeout(
                _admission.waited_text(tool, waited),
                tool_name=tool.name,
                timeout=timeout,
                attempt=attempt,
                waited=waited.waited,
            )
            _log.error("%s, on attempt %d; terminal, not retried", error.message, attempt)
            return Err(error)
        _log.error(
            "Tool '%s' timed out after %s s on attempt %d; terminal, not retried",
            tool.name,
            timeout,
            attempt,
        )
        return Err(ToolTimeout(tool_name=tool.name, timeout=timeout, attempt=attempt))

    @staticmethod
    def _send_exception(
        tool: Tool,
        attempt: int,
        duration: int,
        will_retry: bool,
        kind: object,
        reason: object,
        tb: t.Any,
    ) -> None:
        metadata: dict[str, t.Any] = {
            "tool_name": tool.name,
            "attempt": attempt,
            "will_retry": will_retry,
            "kind": kind,
            "reason": reason,
        }
        if tb is not None:
            metadata["stacktrace"] = tb if isinstance(tb, list) else traceback.extract_tb(tb)
        _send(_exception, tool, {"duration": duration}, metadata)
