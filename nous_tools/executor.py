"""``ToolExecutor``: the pipeline every tool call goes through.

Approval → validation → conversion to the annotated types → attempts, in that
order; the first three run once per call, never again on a retry.

>>> from nous_tools import Err, Ok, RunContext, ToolExecutor, tool
>>> @tool(timeout=2, retries=0)
... def greet(ctx: RunContext, name: str) -> str:
...     return f"hello {name} from {ctx.deps['who']}"
>>> with ToolExecutor(max_workers=2) as executor:
...     match executor.execute(greet, {"name": "Ada"}, RunContext.new({"who": "us"})):
...         case Ok(value):
...             print(value)
...         case Err(reason):
...             print("failed:", reason)
hello Ada from us

``execute`` never raises for anything a tool, a handler, a signal receiver or
bad input does: it returns ``Err``. Only a ``KeyboardInterrupt`` in the
caller's own thread propagates (it is the user's Ctrl-C).
"""

from __future__ import annotations

import collections
import collections.abc as c
import contextlib
import contextvars
import heapq
import logging
import queue
import threading
import time
import traceback
import typing as t

import attrs

from nous_tools import signals as _signals
from nous_tools._engine import _admission, _isolation, _pool, _reporting
from nous_tools._engine._journal import UNJOURNALED, Claim, check_journal
from nous_tools._engine._journal import run as _journal_run
from nous_tools._engine._pool import RAISED, RETURNED, SATURATED, SHUT_DOWN, TIMED_OUT, Hook
from nous_tools._engine._process_pool import QUEUE_TIMED_OUT, check_option
from nous_tools._util._clock import monotonic
from nous_tools._util._log import log as _safe_log
from nous_tools._util._scope import Scope, here, interrupts
from nous_tools._util._text import safe_str as _safe_str
from nous_tools.approval._gate import check_approval
from nous_tools.backend import Backend, ProcessBackend, ThreadBackend, check_backend
from nous_tools.errors import (
    ElicitationUnavailable,
    ExecutorSaturated,
    ExecutorShutdown,
    SamplingUnavailable,
    ToolError,
    ToolTimeout,
)
from nous_tools.results import Err, Ok, Result
from nous_tools.results import _set_update as _set_ok_update
from nous_tools.results import _set_value as _set_ok_value
from nous_tools.results import ok_fast as _ok
from nous_tools.run_context import AttemptCancelled, RunContext
from nous_tools.run_context import for_attempt as _for_attempt
from nous_tools.run_context import with_channel as _with_channel
from nous_tools.tool import ON_TIMEOUT_MODES, Tool, queue_seconds

if t.TYPE_CHECKING:
    from nous_tools.journal._record import Journal

__all__ = [
    "ToolCall",
    "ToolExecutor",
    "default_executor",
    "execute",
    "execute_many",
    "set_default_executor",
]

_log = _safe_log
_logger = _log.logger
_DEBUG = logging.DEBUG
_new_ok = object.__new__

_BARE_CONTEXT: RunContext[t.Any] = RunContext()

_NO_CAP = float("inf")  # a process call's bound when no enclosing attempt sets one

# The value and reason types of the results (execute's overloads).
_T = t.TypeVar("_T")
_E = t.TypeVar("_E")
_R = t.TypeVar("_R")

#: The outcome kinds a backend may answer (see nous_tools.backend).
_KINDS = frozenset((RETURNED, RAISED, TIMED_OUT, SATURATED, SHUT_DOWN, _isolation.UNPICKLABLE))

_start = _signals.tool_execute_start
_stop = _signals.tool_execute_stop
_exception = _signals.tool_execute_exception
_timeout = _signals.tool_timeout
_progress = _signals.tool_progress
_log_signal = _signals.tool_log
_send = _signals.send


@attrs.frozen(slots=True)
class ToolCall:
    """A neutral tool call: the provider's call ``id``, the tool ``name`` and its ``arguments``."""

    id: str | None
    name: str
    arguments: t.Any = attrs.field(
        factory=dict, metadata={"description": "The arguments, a mapping (default: empty)."}
    )


class _Failure:
    """An attempt that raised: retried while attempts remain and ``retry_on`` agrees.
    ``text`` is the exception's ``str()``, rendered where the attempt ran."""

    __slots__ = ("attempt", "error", "text", "will_retry")

    def __init__(self, error: BaseException, attempt: int, text: str, will_retry: bool) -> None:
        self.error = error
        self.attempt = attempt
        self.text = text
        self.will_retry = will_retry


def _should_retry(tool: Tool, exc: BaseException, attempt: int) -> bool:
    """Whether the tool's ``retry_on`` lets ``exc`` (from ``attempt``) be retried.
    ``ctx.sample``/``ctx.elicit`` with nowhere to go is never retried."""
    if isinstance(exc, (SamplingUnavailable, ElicitationUnavailable)):
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


def _arguments_error(tool: Tool, arguments: object) -> Err:
    return Err(
        ToolError(
            f"Invalid arguments for '{tool.name}': expected a mapping (a JSON object), "
            f"got {type(arguments).__name__}",
            tool_name=tool.name,
            attempt=1,
            original_error=("invalid", [("(root)", f"not a mapping: {type(arguments).__name__}")]),
        )
    )


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


#: ``attrs.evolve(ctx, retry=, deadline=[, cancelled=])``, field by field.
_with_attempt = _for_attempt


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: The longest a batch's caller in the main thread waits at once. A SIGINT that
#: arrives just as a thread enters a blocking wait (after Python last looked for
#: signals) is handled only when that wait ends: the caller of a batch, woken by a
#: worker at the very moment it starts waiting, would see Ctrl-C only at the next
#: deadline. Waiting in slices bounds that delay.
_SIGNAL_SLICE = 0.05

#: A batch's call whose first attempt a worker runs (see ToolExecutor._run_batch).
_PENDING = _Marker("_PENDING")
#: A batch's call whose first attempt failed and that goes on with its retries.
_RETRY = _Marker("_RETRY")


class _Batch:
    """Where a batch run by :meth:`ToolExecutor._run_batch` stands."""

    __slots__ = (
        "channels",
        "ctx",
        "deadlines",
        "direct",
        "jobs",
        "lanes",
        "notify",
        "pending",
        "results",
        "scope",
        "session",
        "tally",
        "timers",
        "waiting",
    )

    def __init__(
        self,
        jobs: c.Sequence[tuple[Tool, t.Any, str | None] | Err],
        todo: list[int],
        results: list[t.Any],
        ctx: RunContext[t.Any] | None,
        scope: Scope,
        tally: _Tally | None = None,
    ) -> None:
        self.jobs = jobs
        self.pending = collections.deque(todo)  # calls not started yet, in order
        self.results = results
        self.ctx = ctx
        self.scope = scope
        self.notify: queue.SimpleQueue[t.Any] = queue.SimpleQueue()  # ended tasks and lanes
        self.waiting: dict[t.Any, _Job] = {}  # task -> the call whose first attempt it runs
        self.deadlines: list[tuple[float, int, t.Any]] = []  # a heap of (deadline, i, task)
        self.lanes = 0  # calls (or their retries) running in lanes
        self.tally = tally  # on_progress, told of each call that ends
        # What the running first attempts report (see _reporting): their channels,
        # and when each wants to be served again.
        self.channels: dict[_reporting.Channel, _Job] = {}
        self.timers: dict[_reporting.Channel, float] = {}
        # Process calls whose replies the caller reads itself while it waits for
        # nothing else (see ProcessPool.session); off for good once it must.
        self.session: t.Any = None
        self.direct = True


class _Job:
    """One call of a batch run by :meth:`ToolExecutor._run_batch`: where it stands."""

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


class ToolExecutor:
    """Runs tools: approval, validation, attempts with retries, deadlines and signals.

    ``max_workers`` bounds concurrent timed attempts (default ``min(32, cpus + 4)``
    but at least 8, so a batch of 8 runs at once; workers start as calls need
    them), however many callers and batches run at once; ``max_abandoned`` (default 64,
    at least 1) is how many workers may be stuck past their deadlines before new
    timed calls get ``Err(ExecutorSaturated)``; ``on_timeout`` (``"interrupt"`` or
    ``"abandon"``) is the default for tools that do not set their own.
    ``process_workers`` bounds the ``isolation="process"`` attempts that run at
    once (default: the usable CPUs, at least 2, at most 8), and
    ``max_tasks_per_child`` (default None: no limit) replaces a child process
    after that many attempts; child processes start on the first such attempt.
    A process-run attempt's timeout counts from when a child takes it; its wait
    for a free child is bounded by its tool's ``queue_timeout``, else this
    executor's ``queue_timeout`` (default None: the tool's timeout), and a call
    that waited that long gets ``Err(ExecutorSaturated)`` without running.
    ``log_exception_text=True`` puts a failed tool's exception text in its
    error-level log line, as Nous does (by default it goes to the debug level
    only, since exception texts often quote argument values). A context manager:
    leaving it calls :meth:`shutdown`.

    Backends (see :mod:`nous_tools.backend` and ``docs/how-to/scale-out.md``):
    ``backends`` maps names to :class:`~nous_tools.backend.Backend` objects that
    tools name with ``Tool(backend=...)``, beside the built-in ``"thread"`` (the
    worker threads) and ``"process"`` (the child processes); ``backend`` (a name,
    or a backend object) is where the timed attempts of tools that name none go
    (default ``"thread"``; ``isolation="process"`` tools always go to
    ``"process"``). The executor owns them all: :meth:`shutdown` shuts them down.
    ``on_worker_start``, ``after_task`` and ``on_worker_exit`` are hooks run in
    the worker threads (see :class:`~nous_tools.backend.ThreadBackend`), e.g.
    ``after_task=nous_tools.contrib.django.close_connections``.

    Limits (``docs/concepts/limits.md``): ``max_result_chars`` (default 100,000;
    None: no limit) is the longest text of a result a model gets, for tools that
    set none of their own; ``limits_storage`` (a ``limits`` storage URI such as
    ``"redis://host:6379"``, or a ``limits`` storage) holds the tools'
    ``rate_limit`` and ``max_calls_per_run`` counts where several processes share
    them (default None: this executor counts them in memory);
    ``rate_limit_strategy`` is the ``limits`` strategy of rates
    (``"fixed-window"``, ``"moving-window"`` or ``"sliding-window-counter"``).

    ``journal`` (a :class:`~nous_tools.Journal`) records each call that has a key —
    ``ctx.run_id`` and ``call_id`` — before its first attempt and after its last,
    so a repeat of the key replays the outcome instead of running the tool again
    (see :mod:`nous_tools.journal` and ``docs/concepts/journal.md``).
    """

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        max_abandoned: int = 64,
        on_timeout: str = "interrupt",
        process_workers: int | None = None,
        max_tasks_per_child: int | None = None,
        log_exception_text: bool = False,
        backend: str | Backend = "thread",
        backends: c.Mapping[str, Backend] | None = None,
        on_worker_start: Hook | None = None,
        after_task: Hook | None = None,
        on_worker_exit: Hook | None = None,
        max_result_chars: int | None = _admission.DEFAULT_MAX_RESULT_CHARS,
        limits_storage: t.Any = None,
        rate_limit_strategy: str = "fixed-window",
        journal: Journal | None = None,
        queue_timeout: float | None = None,
    ) -> None:
        _check_on_timeout(on_timeout)
        self._queue_timeout = queue_seconds("ToolExecutor", queue_timeout)
        check_journal("ToolExecutor", journal)
        if max_result_chars is not None and (
            isinstance(max_result_chars, bool)
            or not isinstance(max_result_chars, int)
            or max_result_chars < 1
        ):
            raise ValueError(
                "ToolExecutor option 'max_result_chars' must be an int >= 1 or None (no "
                f"limit), got {max_result_chars!r}"
            )
        self._max_result_chars: int | None = max_result_chars
        self._admission = _admission.Admission(limits_storage, rate_limit_strategy)
        check_option("ToolExecutor", "process_workers", process_workers)
        check_option("ToolExecutor", "max_tasks_per_child", max_tasks_per_child)
        named = self._check_backends(backend, backends)
        self._threads = ThreadBackend(
            max_workers,
            max_abandoned=max_abandoned,
            on_timeout=on_timeout,
            on_worker_start=on_worker_start,
            after_task=after_task,
            on_worker_exit=on_worker_exit,
        )
        self._pool = self._threads.pool
        # isolation="process": starts no process and no thread until first used
        self._process_backend = ProcessBackend(
            process_workers, max_tasks_per_child=max_tasks_per_child
        )
        self._processes = self._process_backend.pool
        self._backends: dict[str, Backend] = {
            "thread": self._threads,
            "process": self._process_backend,
            **named,
        }
        # where the timed attempts of tools that name no backend go
        self._default: Backend = (
            self._backends[backend] if isinstance(backend, str) else self._backends["default"]
        )
        self.log_exception_text = bool(log_exception_text)
        self._journal = journal

    @staticmethod
    def _check_backends(
        backend: str | Backend, backends: c.Mapping[str, Backend] | None
    ) -> dict[str, Backend]:
        """The named backends beside the built-in ones; ``backend``, when it is an
        object, is named ``"default"``. Raises ``ValueError``/``TypeError`` naming
        what is wrong."""
        named: dict[str, Backend] = {}
        if backends is not None:
            if not isinstance(backends, c.Mapping):
                raise TypeError(
                    "ToolExecutor option 'backends' must be a mapping of names to backends, "
                    f"got {type(backends).__name__}"
                )
            for name, value in backends.items():
                if not isinstance(name, str) or not name.strip():
                    raise ValueError(
                        f"ToolExecutor backend names must be non-empty str, got {name!r}"
                    )
                if name in ("thread", "process", "default"):
                    raise ValueError(
                        f"ToolExecutor backend name {name!r} is reserved (the built-in "
                        "'thread' and 'process', and 'default' for a backend object given "
                        "as 'backend')"
                    )
                check_backend(name, value)
                named[name] = value
        if isinstance(backend, str):
            if backend not in ("thread", "process") and backend not in named:
                raise ValueError(
                    f"ToolExecutor option 'backend' names {backend!r}, which is neither "
                    f"'thread', 'process' nor one of 'backends' ({', '.join(sorted(named)) or 'none given'})"
                )
        else:
            check_backend("default", backend)
            named["default"] = backend
        return named

    @property
    def on_timeout(self) -> str:
        """What happens to a worker thread at a deadline, for tools that set no
        ``on_timeout``: ``"interrupt"`` or ``"abandon"``."""
        return self._threads.on_timeout

    @on_timeout.setter
    def on_timeout(self, value: str) -> None:
        _check_on_timeout(value)
        self._threads.on_timeout = value

    @property
    def journal(self) -> Journal | None:
        """The call journal of this executor's calls, or None (see
        :mod:`nous_tools.journal`)."""
        return self._journal

    @property
    def backends(self) -> dict[str, Backend]:
        """The backends by name (a copy): ``"thread"``, ``"process"``, those given."""
        return dict(self._backends)

    @property
    def max_workers(self) -> int:
        """How many timed attempts run at once, across every caller and batch."""
        return self._pool.max_workers

    @property
    def max_abandoned(self) -> int:
        """How many workers may be stuck past their deadlines before new timed calls
        get ``Err(ExecutorSaturated)``."""
        return self._pool.max_abandoned

    @property
    def queue_timeout(self) -> float | None:
        """How long a process-run attempt of a tool that sets no ``queue_timeout``
        waits for a free child process (None: the tool's timeout)."""
        return self._queue_timeout

    @property
    def max_result_chars(self) -> int | None:
        """The longest text of a result a model gets, for tools that set no
        ``max_result_chars`` of their own (None: no limit)."""
        return self._max_result_chars

    @property
    def limits_storage(self) -> t.Any:
        """The ``limits`` storage that holds the rates and budgets shared with other
        processes, or None (this executor counts them in memory)."""
        return self._admission.storage

    # -- public API ------------------------------------------------------------

    # For type checkers: a Tool[P, R] gives Ok[R] | Err[ToolError]; a tool that
    # returns Ok/Err itself gives them through (see docs/concepts/types.md).
    @t.overload
    def execute(
        self,
        tool: Tool[..., Ok[_T]],
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Ok[_T] | Err[ToolError]: ...
    @t.overload
    def execute(  # type: ignore[overload-overlap]
        self,
        tool: Tool[..., Ok[_T] | Err[_E]],
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Ok[_T] | Err[ToolError | _E]: ...
    @t.overload
    def execute(  # type: ignore[overload-overlap]
        self,
        tool: Tool[..., Err[_E]],
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Err[ToolError | _E]: ...
    @t.overload
    def execute(
        self,
        tool: Tool[..., _R],
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Ok[_R] | Err[ToolError]: ...
    def execute(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Result:
        """Run ``tool`` with ``arguments`` (None counts as ``{}``) and return ``Ok`` or ``Err``.

        ``call_id`` is passed to an approval handler as ``ApprovalRequest.id``; with
        ``ctx.run_id`` it is the call's key in the executor's journal. ``wait``
        (seconds) is how long a journaled call waits for the outcome of the same
        call running elsewhere, rather than answering ``Err(CallInProgress)`` at once.
        For a type checker, a ``Tool[P, R]`` gives ``Ok[R] | Err[ToolError]`` (a tool
        that returns ``Ok``/``Err`` itself gives those through).
        """
        if here.nested:  # inside a pool worker: shield our own code from cancellation
            return self._shielded(tool, arguments, ctx, call_id, False, wait=wait)
        try:
            if wait is None:  # a keyword fewer to pass on the common call
                return self._execute(tool, arguments, ctx, call_id)
            return self._execute(tool, arguments, ctx, call_id, wait=wait)
        except BaseException as exc:  # a bug of ours must not reach the caller either
            if interrupts(exc):
                raise
            return _internal_error(tool, exc)

    def execute_approved(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Result:
        """Like :meth:`execute`, but without the approval step (step 1): the caller has
        already approved this call. Even a ``"deny"`` tool runs, as in Minga's
        ``execute_approved``; validation, attempts, signals and the journal are
        unchanged."""
        return self._shielded(tool, arguments, ctx, call_id, True, wait=wait)

    def _shielded(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any] | None,
        ctx: RunContext[t.Any] | None,
        call_id: str | None,
        skip_approval: bool,
        *,
        journal: t.Any = None,
        wait: float | None = None,
    ) -> Result:
        """:meth:`_execute` for a call made from inside a pool worker (a tool calling
        another): no asynchronous ``ToolCancelled`` lands in the library's code —
        a log handler's lock, a signal, the pool's books — only in the tools it
        runs inline; a cancellation that arrives meanwhile is raised on return."""
        token = _pool.shield()
        try:
            return self._execute(
                tool,
                arguments,
                ctx,
                call_id,
                skip_approval=skip_approval,
                shielded=True,
                journal=journal,
                wait=wait,
            )
        except BaseException as exc:  # a bug of ours must not reach the caller either
            if interrupts(exc):
                raise
            return _internal_error(tool, exc)
        finally:
            if token is not None:
                _pool.unshield(token)

    def _run_with(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any] | None,
        ctx: RunContext[t.Any] | None,
        call_id: str | None,
        skip_approval: bool,
        journal: t.Any,
        wait: float | None,
    ) -> Result:
        """:meth:`execute` (or :meth:`execute_approved`) with another journal than
        the executor's: a registry's, or a :class:`~nous_tools._engine._journal.Claim`."""
        if skip_approval or here.nested:
            return self._shielded(
                tool, arguments, ctx, call_id, skip_approval, journal=journal, wait=wait
            )
        try:
            return self._execute(tool, arguments, ctx, call_id, journal=journal, wait=wait)
        except BaseException as exc:  # a bug of ours must not reach the caller either
            if interrupts(exc):
                raise
            return _internal_error(tool, exc)

    def execute_many(
        self,
        calls: c.Iterable[tuple[Tool, c.Mapping[str, t.Any] | None] | ToolCall],
        ctx: RunContext[t.Any] | None = None,
        *,
        resolve: c.Callable[[str], Tool | None] | None = None,
        max_concurrency: int | None = None,
        on_progress: c.Callable[[int, int, Result | None], object] | None = None,
    ) -> list[Result]:
        """Run several calls concurrently (at most ``max_workers`` timed attempts at
        once, shared with every other caller, and at most ``max_concurrency`` of this
        batch's calls at once when given); results come back in input order and
        one call's failure never affects another's.

        A call is a ``(tool, arguments)`` pair or a :class:`ToolCall`; a
        ``ToolCall`` names its tool, found with ``resolve(name)``. A call that cannot
        be read, or whose ``resolve`` raises, is an ``Err`` of its own; an iterable
        that raises ends the list there, with an ``Err`` in its place. Ctrl-C while
        the batch runs starts no further call of it, cancels the running ones as at
        a deadline, and re-raises.

        ``on_progress(done, total, result)`` is called with ``(0, total, None)`` before
        the first call starts, then after every call that ends, with its result —
        every call counts, also one refused by approval or validation or one that
        timed out, so ``done`` always reaches ``total``. It is called one call at a
        time (never concurrently); what it raises is logged and ignored.
        """
        return self.run_jobs(
            _read_jobs(calls, lambda call: self._job(call, resolve)),
            ctx,
            max_concurrency=max_concurrency,
            on_progress=on_progress,
        )

    @staticmethod
    def _job(
        call: object, resolve: c.Callable[[str], Tool | None] | None
    ) -> tuple[Tool, t.Any, str | None] | Err:
        from nous_tools.errors import ToolNotFound

        try:
            if isinstance(call, ToolCall):
                found = resolve(call.name) if resolve is not None else None
                if found is None:
                    return Err(ToolNotFound(call.name))
                if not isinstance(found, Tool):
                    return Err(
                        ToolError(
                            f"execute_many: resolve({call.name!r}) returned "
                            f"{type(found).__name__}, not a Tool",
                            tool_name=call.name,
                        )
                    )
                return (found, call.arguments, call.id)
            tool, arguments = t.cast(tuple[t.Any, t.Any], call)
            return (tool, arguments, None)
        except (TypeError, ValueError):
            return Err(
                ToolError(
                    "execute_many expects (tool, arguments) pairs or ToolCalls, "
                    f"got {type(call).__name__}"
                )
            )
        except BaseException as exc:
            if interrupts(exc):
                raise
            return Err(
                ToolError(
                    f"execute_many could not read a call ({type(call).__name__}): "
                    f"{type(exc).__name__}: {_safe_str(exc)}",
                    original_error=exc,
                )
            )

    def run_jobs(
        self,
        jobs: c.Sequence[tuple[Tool, t.Any, str | None] | Err],
        ctx: RunContext[t.Any] | None,
        run: c.Callable[[Tool, t.Any, RunContext[t.Any] | None, str | None], t.Any] | None = None,
        *,
        max_concurrency: int | None = None,
        on_progress: c.Callable[[int, int, t.Any], object] | None = None,
    ) -> list[t.Any]:
        """Run prepared ``(tool, arguments, call_id)`` jobs concurrently; an ``Err``
        in ``jobs`` is its own result. ``run`` replaces :meth:`execute` per job;
        ``on_progress`` is told of each job that ends (see :meth:`execute_many`).
        The engine of :meth:`execute_many`, of :meth:`Registry.execute_many
        <nous_tools.Registry.execute_many>` and of ``execute_tool_calls``.

        The batch is a cancel scope, and at most ``max_workers`` of its jobs run at
        once (at most ``max_concurrency``, when given: ``ValueError`` unless it is an
        int >= 1); each job's timed attempts take pool workers like any other call, so
        ``max_workers`` bounds every batch and caller together. Without ``run``
        (``execute_many``) the caller hands each timed first attempt straight to a
        worker and waits for them all; with ``run``, or for a job that needs a
        thread of its own (an inline tool, a process-isolated one, an approval
        handler to ask, a retry), helper threads run the jobs (they take no
        capacity of their own). When the caller is interrupted (Ctrl-C, or
        the cancellation of the attempt it works for), no further job starts, the
        running ones are cancelled as at a deadline, and the interruption propagates.
        """
        limit = self._pool.max_workers
        if max_concurrency is not None:
            _check_batch_cap(max_concurrency)
            limit = min(limit, max_concurrency)
        runner = run if run is not None else self._run_job
        results: list[t.Any] = [job if isinstance(job, Err) else None for job in jobs]
        todo = [i for i, job in enumerate(jobs) if not isinstance(job, Err)]
        tally = _Tally(on_progress, len(jobs)) if on_progress is not None else None
        if tally is not None:
            tally.start()
            for result in results:
                if result is not None:  # a call that could not even be read
                    tally.ended(result)
        if not todo:
            return results
        if len(todo) == 1:
            i = todo[0]
            tool, arguments, call_id = t.cast(tuple[Tool, t.Any, "str | None"], jobs[i])
            results[i] = runner(tool, arguments, ctx, call_id)
            if tally is not None:
                tally.ended(results[i])
            return results
        parent = here.scope
        batch = Scope(parent.deadline if parent is not None else None, shared=True)
        if parent is not None and not parent.adopt(batch):
            for i, r in enumerate(results):
                if r is None:
                    results[i] = _cancelled_before_start(jobs[i])
                    if tally is not None:
                        tally.ended(results[i])
            return results
        # In a pool worker (a tool running a batch), the batch's own bookkeeping is
        # the library's code: no cancellation lands in it. Cancelling the attempt
        # cancels the batch through its scope; ToolCancelled is raised on return.
        token = _pool.shield() if run is None else None
        try:
            if run is None:
                self._run_batch(jobs, todo, results, ctx, batch, limit, tally)
            else:
                self._run_lanes(jobs, todo, results, ctx, batch, runner, limit, tally)
        finally:
            if parent is not None:
                parent.release(batch)
            if token is not None:
                _pool.unshield(token)
        for i, result in enumerate(results):
            if result is None:  # never started: the batch was cancelled
                results[i] = _cancelled_before_start(jobs[i])
                if tally is not None:
                    tally.ended(results[i])
        return results

    def _run_lanes(
        self,
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
        pool = self._pool
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
                        results[i] = Err(
                            ToolError(
                                f"Tool '{getattr(tool, 'name', 'unknown')}' could not be run: "
                                f"{type(exc).__name__}: {_safe_str(exc)}",
                                original_error=exc,
                            )
                        )
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

    def _run_batch(
        self,
        jobs: c.Sequence[tuple[Tool, t.Any, str | None] | Err],
        todo: list[int],
        results: list[t.Any],
        ctx: RunContext[t.Any] | None,
        batch: Scope,
        limit: int,
        tally: _Tally | None = None,
    ) -> None:
        """``execute_many``'s batch, run from the caller's thread without a thread per call.

        For each call in turn, while fewer than ``limit`` (at most ``max_workers``) of the batch's calls
        run: approval, validation and conversion in the caller, in a copy of its
        ``contextvars`` context made for that call (where all the call's signals are
        sent), then its timed first attempt handed to a pool worker
        (:meth:`WorkerPool.submit`), not awaited. The caller then waits for whichever
        ends first — a task's ``notify`` queue, or the earliest deadline, at which the
        task is abandoned as ``execute`` would. A call that needs a thread of its own
        (an inline or process-isolated tool, an approval handler to ask, a tool whose
        attempts may wait for a ``max_concurrency`` slot) runs whole in a lane, and so do the attempts after a first one that failed and may be
        retried (``retry_wait`` sleeps there); a lane reports to the same queue, and
        so does what a running first attempt reports (progress, log lines: see
        :mod:`nous_tools._engine._reporting`), which the caller delivers as it comes.
        """
        state = _Batch(jobs, todo, results, ctx, batch, tally)
        saved = here.scope
        here.scope = batch  # the calls' tasks are the batch's children
        try:
            # The loop lives in a function of its own, and every handler here: in
            # CPython 3.11 an exception raised by the eval breaker at a loop's backward
            # jump can skip the try statement around that loop in the same function
            # (gh-107901), but never the one around the call.
            self._coordinate(state, limit)
        except BaseException:
            self._pool.cancel(batch)
            if state.session is not None:
                state.session.close()  # the children of its stopped calls
            if state.waiting:  # their signals and log lines, off the interrupted caller's path
                self._wind_down(list(state.waiting.items()), batch)
            raise
        finally:
            here.scope = saved
            if state.session is not None:
                state.session.close()

    def _coordinate(self, state: _Batch, limit: int) -> None:
        """:meth:`_run_batch`'s loop: start calls while there is room, then take the
        next call that ends or whose deadline passes, until every call has ended."""
        pool = self._pool
        jobs, results, ctx, batch = state.jobs, state.results, state.ctx, state.scope
        pending, waiting, deadlines, notify = (
            state.pending,
            state.waiting,
            state.deadlines,
            state.notify,
        )
        main = threading.current_thread() is threading.main_thread()
        gated = isinstance(ctx, RunContext) and ctx.approval_gated
        journaled = self._journal is not None  # its calls run whole, in lanes
        while True:
            while pending and len(waiting) + state.lanes < limit and not batch.cancelled:
                i = pending.popleft()
                tool, arguments, call_id = t.cast(tuple[Tool, t.Any, "str | None"], jobs[i])
                job = _Job(i, contextvars.copy_context(), notify)
                if isinstance(tool, Tool) and (
                    tool.timeout is None
                    or not (self._on_threads(tool) or self._in_children(tool, ctx, job))
                    or (tool.approval == "ask" and not gated)
                    or (tool._limits is not None and tool._limits.in_lane)
                    or journaled
                ):
                    job.tool = tool

                    def whole(
                        tool: Tool = tool,
                        arguments: t.Any = arguments,
                        call_id: t.Any = call_id,
                    ) -> Result:
                        result: Result = self.execute(tool, arguments, ctx, call_id=call_id)
                        return result

                    state.lanes += self._in_lane(job, whole, results, batch, state.tally)
                    continue
                if job.process is not None and state.direct:
                    job.session = self._session_of(state, job.process)
                result = job.context.run(self._call, tool, arguments, ctx, call_id, job)
                if result is _PENDING:
                    task = job.task
                    waiting[task] = job
                    heapq.heappush(deadlines, (task.deadline, i, task))
                    if job.channel is not None:
                        state.channels[job.channel] = job
                else:
                    state.lanes += self._job_ended(job, result, results, batch, state)
            if not waiting and not state.lanes:
                return
            # Abandon the calls whose deadlines have passed; wait for the next end or
            # the next deadline, whichever comes first.
            timeout: float | None = None
            while deadlines:
                deadline, _, task = deadlines[0]
                if task not in waiting:
                    heapq.heappop(deadlines)  # it has ended
                    continue
                timeout = deadline - monotonic()
                if timeout > 0:
                    break
                heapq.heappop(deadlines)
                timeout = None
                if task.pool is pool:
                    job = waiting.pop(task)
                    pool.forget(task)
                    outcome = pool.expire(task)
                else:  # a process call, at the end of its wait for a child
                    outcome = task.pool.expire(task)
                    if outcome is None:
                        continue  # a child runs it: its end comes on the queue
                    job = waiting.pop(task)
                    pool.forget(task)
                state.lanes += self._job_ended(job, outcome, results, batch, state)
            if not waiting and not state.lanes:
                continue
            if state.timers:  # a channel wants serving again (a held progress update)
                now = monotonic()
                for channel, again in list(state.timers.items()):
                    if again <= now:
                        self._serve(state, channel)
                if state.timers:
                    soonest = max(0.0, min(state.timers.values()) - now)
                    if timeout is None or soonest < timeout:
                        timeout = soonest
            if main and (timeout is None or timeout > _SIGNAL_SLICE):
                timeout = _SIGNAL_SLICE
            session = state.session
            if session is not None and session.open:
                if (
                    session.running
                    and len(waiting) == len(session.running) + len(session.queued)
                    and not state.lanes
                    and not state.timers
                ):  # only its own process calls are under way: read their pipes
                    ended = session.wait(_NO_CAP if timeout is None else timeout)
                    if ended is not None and ended in waiting:
                        pool.forget(ended)
                        job = waiting.pop(ended)
                        outcome = ended.pool.outcome(ended)
                        state.lanes += self._job_ended(job, outcome, results, batch, state)
                    continue
                session.detach()  # other work to wait for: drivers take its calls
                state.direct = False
            try:
                item = notify.get(True, timeout)
            except queue.Empty:
                item = None  # a deadline (abandoned above), or a Ctrl-C to look for
            if item is None:
                pass
            elif type(item) is _Job:  # a lane ended
                state.lanes -= 1
                if state.tally is not None:
                    state.tally.ended(results[item.index])
            elif type(item) is _reporting.Channel:  # a running attempt reported
                self._serve(state, item)
            else:
                job = waiting.pop(item, None)  # type: ignore[arg-type]
                if job is not None:  # else: ended at its deadline already
                    pool.forget(item)
                    outcome = item.pool.outcome(item)
                    state.lanes += self._job_ended(job, outcome, results, batch, state)

    @staticmethod
    def _serve(state: _Batch, channel: _reporting.Channel) -> None:
        """Deliver what a batch call's running first attempt reported, in the call's
        context; note when its channel wants serving again."""
        job = state.channels.get(channel)
        if job is None:  # the call has ended: its channel was finished then
            state.timers.pop(channel, None)
            return
        again = job.context.run(channel.serve)
        if again is None:
            state.timers.pop(channel, None)
        else:
            state.timers[channel] = again

    def _call(
        self,
        tool: Tool,
        arguments: t.Any,
        ctx: RunContext[t.Any] | None,
        call_id: str | None,
        job: _Job,
    ) -> t.Any:
        """:meth:`execute` for a batch's call, in the batch's caller: a result, or
        ``_PENDING`` when its first attempt was handed to a worker."""
        try:
            return self._execute(tool, arguments, ctx, call_id, job=job)
        except BaseException as exc:  # a bug of ours must not reach the caller either
            if interrupts(exc):
                raise
            return _internal_error(tool, exc)

    def _hand_off(
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
        handed to a worker as :meth:`_timed` would run it, without waiting; then
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
        job.began = self._started(tool, 1, total, call_id) if emit else 0
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
        on_timeout = tool.on_timeout or self.on_timeout
        started = self._pool.submit(
            tool.function,
            call_args,
            arguments if type(arguments) is dict else dict(arguments),
            deadline,
            job.notify,
            cancelled=cancelled,
            interrupt=on_timeout == "interrupt",
        )
        if type(started) is tuple:  # refused: shut down, saturated, or cancelled
            return self._finish(job, started)
        job.task = started
        return _PENDING

    @staticmethod
    def _session_of(state: _Batch, process: ProcessBackend) -> t.Any:
        """The batch's session with ``process``'s children (one pool per batch)."""
        session = state.session
        if session is None:
            session = state.session = process.pool.session()
            if session is None:  # no poll(2) here
                state.direct = False
                return None
        return session if session.pool is process.pool else None

    def _hand_to_child(
        self,
        job: _Job,
        process: ProcessBackend,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        deadline: float,
    ) -> t.Any:
        """:meth:`_hand_off` for a call whose attempts run in child processes: handed
        to the pool's drivers, no thread of its own (as :meth:`_timed` would run it:
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
            queue_timeout=self._queue_for(tool, timeout),
            session=job.session,
        )
        if type(started) is tuple:  # refused: shut down, unpicklable, or cancelled
            return self._finish(job, started)
        job.task = started
        return _PENDING

    def _finish(self, job: _Job, outcome: tuple[str, t.Any, t.Any]) -> t.Any:
        """The end of a batch's first attempt, in the call's context: its result,
        signals and log lines, as :meth:`_attempt` and :meth:`_execute` would give
        them; ``_RETRY`` when the call goes on with a retry (``job.failure``)."""
        tool = job.tool
        try:
            kind, value, text = outcome
            if job.channel is not None:
                job.channel.finish()  # what the tool reported, before the attempt's end
            duration = time.perf_counter_ns() - job.began if job.emit else 0
            result = self._ended(
                tool, job.arguments, 1, job.total, tool.timeout, kind, value, text, duration
            )
            if type(result) is _Failure:
                if result.will_retry:
                    job.failure = result
                    return _RETRY
                return self._final_failure(tool, result)
            if job.debug is not None and type(result) is Ok:
                elapsed_ms = (time.perf_counter() - job.debug) * 1000
                _log.debug("Tool '%s' completed in %.1f ms", tool.name, elapsed_ms)
            return result
        except BaseException as exc:  # a bug of ours must not reach the caller either
            if interrupts(exc):
                raise
            return _internal_error(tool, exc)

    def _job_ended(
        self, job: _Job, outcome: t.Any, results: list[t.Any], batch: Scope, state: _Batch
    ) -> int:
        """Record a batch call's result, or start its retries in a lane; the number
        of lanes started (0 or 1). ``outcome`` is the pool's, or a result already."""
        result = job.context.run(self._finish, job, outcome) if type(outcome) is tuple else outcome
        if job.channel is not None:
            state.channels.pop(job.channel, None)
            state.timers.pop(job.channel, None)
        if result is not _RETRY:
            results[job.index] = result
            if state.tally is not None:
                state.tally.ended(result)
            return 0
        failure = t.cast(_Failure, job.failure)

        def retries() -> Result:
            return self._retry(job.tool, job.arguments, job.ctx, failure, job.total, job.call_id)

        return self._in_lane(job, retries, results, batch, state.tally)

    def _in_lane(
        self,
        job: _Job,
        run: c.Callable[[], Result],
        results: list[t.Any],
        batch: Scope,
        tally: _Tally | None = None,
    ) -> int:
        """Run ``run()`` for a batch's call in a lane, in the call's context; the lane
        puts ``job`` on the batch's queue when it ends. The number of lanes started:
        0 when no thread could be had (the call is then an ``Err`` saying so)."""
        i = job.index

        def lane() -> None:
            try:
                results[i] = run()
            except BaseException as exc:
                results[i] = Err(
                    ToolError(
                        f"Tool '{getattr(job.tool, 'name', 'unknown')}' could not be run: "
                        f"{type(exc).__name__}: {_safe_str(exc)}",
                        original_error=exc,
                    )
                )
            finally:
                job.notify.put(job)

        try:
            self._pool.start_lane(lane, batch, context=job.context)
        except RuntimeError as exc:  # no thread to be had
            results[i] = Err(
                ToolError(
                    f"Tool '{getattr(job.tool, 'name', 'unknown')}' could not be run: "
                    f"no thread could be started ({_safe_str(exc)})",
                    original_error=exc,
                )
            )
            if tally is not None:
                tally.ended(results[i])
            return 0
        return 1

    def _wind_down(self, waiting: list[tuple[t.Any, _Job]], batch: Scope) -> None:
        """After an interrupted batch (its scope cancelled): the end of each call that
        was waiting for a worker — its signals and log lines, as ``execute`` gives
        them for a cancelled call — in a lane, off the interrupted caller's path."""

        def lane() -> None:
            for task, job in waiting:
                outcome = task.pool.expire(task)  # (a process call: stopped already)
                if outcome is None:
                    outcome = (TIMED_OUT, None, None)
                job.context.run(self._finish, job, outcome)

        with contextlib.suppress(RuntimeError):
            self._pool.start_lane(lane, batch)

    def _run_job(
        self, tool: Tool, arguments: t.Any, ctx: RunContext[t.Any] | None, call_id: str | None
    ) -> Result:
        result: Result = self.execute(tool, arguments, ctx, call_id=call_id)
        return result

    def stats(self) -> dict[str, int]:
        """Workers and calls: ``workers``, ``idle``, ``busy`` (= ``running``),
        ``abandoned``, ``completed``, ``timed_out``, ``saturated``, ``pending``;
        and the child processes of ``isolation="process"`` under ``process_``
        (``process_workers``, ``process_idle``, ``process_busy``,
        ``process_killed``, ``process_died``, ...: see ``docs/how-to/process-isolation.md``);
        and each other backend's figures under its name (``ray_timed_out``, ...).
        A backend whose ``stats()`` raises is logged and left out."""
        figures = self._pool.stats()
        for key, value in self._processes.stats().items():
            figures[f"process_{key}"] = value
        for name, backend in self._backends.items():
            if name == "thread" or name == "process":
                continue
            try:
                for key, value in backend.stats().items():
                    figures[f"{name}_{key}"] = value
            except Exception:
                _log.exception("nous_tools: stats() of backend %r raised; left out", name)
        return figures

    def shutdown(self, wait: bool = True) -> None:
        """Stop the workers, the child processes and every other backend; with
        ``wait``, wait for healthy running calls (never for abandoned ones) and for
        the children to exit. Idempotent; ``execute`` afterwards runs inline tools
        as before and returns ``Err(ExecutorShutdown)`` for timed ones. A backend
        whose ``shutdown`` raises is logged; the others are still shut down."""
        self._pool.shutdown(wait)
        self._processes.shutdown(wait)
        for name, backend in self._backends.items():
            if name == "thread" or name == "process":
                continue
            try:
                backend.shutdown(wait)
            except Exception:
                _log.exception("nous_tools: shutdown() of backend %r raised", name)

    def __enter__(self) -> ToolExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown(wait=True)

    # -- the pipeline ----------------------------------------------------------

    def _execute(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any] | None,
        ctx: RunContext[t.Any] | None,
        call_id: str | None,
        *,
        skip_approval: bool = False,
        shielded: bool = False,
        job: _Job | None = None,
        journal: t.Any = None,
        wait: float | None = None,
    ) -> Result:
        """The pipeline. ``shielded``: called by :meth:`_shielded` (perhaps in a pool
        worker, whose shield an inline tool must leave). ``job``: a call of a batch
        (see :meth:`_run_batch`), whose timed first attempt is handed to a worker and
        not waited for here. ``journal``: None for the executor's own journal, a
        registry's journal, a :class:`Claim` (step 0 let the call go on: it is
        recorded around its attempts), or ``UNJOURNALED``; ``wait`` is passed to
        the journal's step 0."""
        if type(tool) is not Tool and not isinstance(tool, Tool):
            return Err(ToolError(f"execute expects a Tool, got {type(tool).__name__}"))
        if ctx is None:
            ctx = _BARE_CONTEXT
        elif not isinstance(ctx, RunContext):
            return Err(
                ToolError(
                    f"execute expects a RunContext or None as ctx, got {type(ctx).__name__}",
                    tool_name=tool.name,
                )
            )
        if arguments is None:
            arguments = {}
        # 0. the call journal (when there is one): answers a repeat, or lets it go on
        if journal is None:
            journal = self._journal
            if journal is not None:
                return _journal_run(
                    self, journal, tool, arguments, ctx, call_id, skip_approval, shielded, wait
                )
        elif journal is not UNJOURNALED and not isinstance(journal, Claim):
            return _journal_run(
                self, journal, tool, arguments, ctx, call_id, skip_approval, shielded, wait
            )
        # 1. approval (skipped for a call the caller has already approved)
        if tool.approval != "auto" and not skip_approval:
            approved = check_approval(tool, arguments, ctx, call_id)
            if isinstance(approved, Err):
                return approved
            arguments = approved
        # 2. validation
        if type(arguments) is not dict and not isinstance(arguments, c.Mapping):
            return _arguments_error(tool, arguments)
        validator = tool._validator
        until: float | None = None  # the first attempt's deadline, when it is already set
        if validator is not None or tool._converter is not None:
            timeout = tool.timeout
            if timeout is not None:  # validation and conversion count inside it
                until = monotonic() + timeout
            if validator is not None:
                failure = validator.validate(arguments)
                if failure is not None:
                    _log.warning("Invalid arguments for tool '%s'", tool.name)
                    return Err(
                        ToolError(
                            f"Invalid arguments for '{tool.name}': {failure.message}",
                            tool_name=tool.name,
                            attempt=1,
                            original_error=failure.original_error,
                        )
                    )
            # 2b. conversion to the annotated types (once per call, never per retry)
            converter = tool._converter
            if converter is not None:
                converted = converter.convert(tool.name, arguments)
                if isinstance(converted, Err):
                    return converted
                arguments = converted
            if until is not None and monotonic() >= until:
                return _checked_past_deadline(tool)
        # 3. admission: the tool's limits (docs/concepts/limits.md), once per call
        limits = tool._limits
        if limits is not None:
            if limits.admits:  # max_calls_per_run, rate_limit
                refused = self._admission.admit(tool, limits, ctx, call_id)
                if refused is not None:
                    return refused
            if limits.in_lane and (journal is None or journal is UNJOURNALED):
                return self._limited(tool, arguments, ctx, call_id, limits)
        # 4. the call journal: started, the attempts, completed (an admitted call only)
        if journal is not None and journal is not UNJOURNALED:
            return self._claimed(journal, tool, arguments, ctx, call_id, limits)
        # 5. attempts
        if job is not None and tool.timeout is not None:  # (on threads, or job.process)
            return self._hand_off(job, tool, arguments, ctx, call_id, tool.retries + 1, until)  # type: ignore[no-any-return]
        if _logger.isEnabledFor(_DEBUG):
            total = tool.retries + 1
            began = time.perf_counter()
            outcome = self._attempt(tool, arguments, ctx, 1, total, call_id, deadline=until)
            if type(outcome) is Ok:
                elapsed_ms = (time.perf_counter() - began) * 1000
                _log.debug("Tool '%s' completed in %.1f ms", tool.name, elapsed_ms)
        elif (
            tool.timeout is None
            and not tool.takes_ctx
            and not (_start.receivers or _stop.receivers or _exception.receivers)
            and not shielded
        ):
            # The most common call, inline and unobserved: attempt 1 as _attempt runs
            # it (which see), without its signals and a frame fewer.
            try:
                value = tool.function(**arguments)
            except Exception as exc:
                total = tool.retries + 1
                outcome = self._raised(tool, arguments, exc, _safe_str(exc), 1, total, 0)
            except BaseException as exc:
                if interrupts(exc):
                    raise  # the user's Ctrl-C, or this thread's attempt was cancelled
                total = tool.retries + 1
                outcome = self._raised(tool, arguments, exc, _safe_str(exc), 1, total, 0)
            else:
                kind = type(value)
                if kind is Ok or kind is Err:
                    return value  # type: ignore[no-any-return]
                result = _new_ok(Ok)  # Ok(value), as ok_fast builds it, a call fewer
                _set_ok_value(result, value)
                _set_ok_update(result, None)
                return result
        else:
            total = tool.retries + 1
            outcome = self._attempt(tool, arguments, ctx, 1, total, call_id, deadline=until)
        if type(outcome) is not _Failure:
            return outcome  # type: ignore[return-value]  # not a _Failure
        if not outcome.will_retry:
            return self._final_failure(tool, outcome)
        return self._retry(tool, arguments, ctx, outcome, total, call_id)

    def _limited(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        call_id: str | None,
        limits: _admission.ToolLimits,
    ) -> Result:
        """Step 4 for a tool whose attempts each hold a ``max_concurrency`` slot, or
        whose final result is checked (``on_result_overflow="error"``); see
        ``docs/concepts/limits.md``. Never a batch's hand-off: a batch runs such a
        call whole in a lane (:meth:`_coordinate`)."""
        total = tool.retries + 1
        began = time.perf_counter() if _logger.isEnabledFor(_DEBUG) else None
        if limits.max_concurrency is not None:
            outcome = self._slotted(tool, arguments, ctx, 1, total, call_id)
        else:
            outcome = self._attempt(tool, arguments, ctx, 1, total, call_id)
        if type(outcome) is _Failure:
            if outcome.will_retry:
                outcome = self._retry(tool, arguments, ctx, outcome, total, call_id)
            else:
                outcome = self._final_failure(tool, outcome)
        elif began is not None and type(outcome) is Ok:
            elapsed_ms = (time.perf_counter() - began) * 1000
            _log.debug("Tool '%s' completed in %.1f ms", tool.name, elapsed_ms)
        if limits.overflow_error and isinstance(outcome, Ok):
            limit = _admission.result_limit(tool, self._max_result_chars)
            too_large = _admission.overflow(tool, outcome, limit)
            if too_large is not None:
                return too_large
        return t.cast(Result, outcome)

    def _slotted(
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
            return self._attempt(
                tool, arguments, ctx, attempt, total, call_id, deadline=slot.deadline
            )
        finally:
            slot.release()

    def _claimed(
        self,
        claim: Claim,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        call_id: str | None,
        limits: _admission.ToolLimits | None,
    ) -> Result:
        """Steps 4 to 6 of a journaled call (after its admission): ``started``
        recorded, the attempts (holding their ``max_concurrency`` slots), then
        ``completed`` with the outcome. A call the journal cannot record as started
        does not run."""
        started = claim.start(tool, ctx)
        if not isinstance(started, RunContext):
            return started
        if limits is not None and limits.in_lane:
            result = self._limited(tool, arguments, started, call_id, limits)
        else:
            total = tool.retries + 1
            outcome = self._attempt(tool, arguments, started, 1, total, call_id)
            if type(outcome) is _Failure:
                if outcome.will_retry:
                    result = self._retry(tool, arguments, started, outcome, total, call_id)
                else:
                    result = self._final_failure(tool, outcome)
            else:
                result = t.cast(Result, outcome)
        claim.finish(tool, result)
        return result

    def _retry(
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

        step = self._slotted if tool.max_concurrency is not None else self._attempt
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
                        return self._final_failure(tool, outcome)
                    if type(outcome) is Ok:
                        _log.info("Tool '%s' succeeded on retry attempt %d", tool.name, number)
                    return t.cast(Result, outcome)
        except _Retry as final:
            return self._final_failure(tool, final.failure)
        raise AssertionError("unreachable: tenacity ended without an outcome")

    def _final_failure(self, tool: Tool, failure: _Failure) -> Err:
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

    def _attempt(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        attempt: int,
        total: int,
        call_id: str | None = None,
        *,
        deadline: float | None = None,
    ) -> Result | _Failure:
        """One attempt: its signals, the call (inline or in a worker), its outcome.
        ``deadline``: a timed attempt's, when the call set it already (a wait for a
        ``max_concurrency`` slot counts towards it)."""
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
            emit = True  # the attempt's end goes through _ended, after the channel's
        began = self._started(tool, attempt, total, call_id) if emit else 0
        timeout = tool.timeout
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
        return self._ended(tool, arguments, attempt, total, timeout, kind, value, text, duration)

    @staticmethod
    def _started(tool: Tool, attempt: int, total: int, call_id: str | None) -> int:
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

    def _ended(
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
    ) -> Result | _Failure:
        """An attempt's outcome: its result or failure, and its signals and log lines."""
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
            return self._raised(tool, arguments, value, text, attempt, total, duration)
        if kind == TIMED_OUT:
            return self._timed_out(tool, attempt, t.cast(float, timeout), duration)
        # The attempt never started (or could not cross to a child process).
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
                return self._pool.run(
                    tool.function,
                    call_args,
                    arguments if type(arguments) is dict else dict(arguments),
                    deadline,
                    cancelled=cancelled,
                    interrupt=on_timeout == "interrupt",
                )
            return self._pool.run_watched(  # the caller delivers what the tool reports
                tool.function,
                call_args,
                arguments if type(arguments) is dict else dict(arguments),
                deadline,
                t.cast("queue.SimpleQueue[t.Any]", channel.inbox),
                channel.serve,
                cancelled=cancelled,
                interrupt=on_timeout == "interrupt",
            )
        actx = (
            _with_attempt(ctx, attempt - 1, deadline, threading.Event()) if tool.takes_ctx else None
        )
        if type(backend) is ProcessBackend:  # its timeout counts from when a child takes it
            cap = scope.deadline if scope is not None and scope.deadline is not None else _NO_CAP
            return backend._attempt(
                tool, arguments, actx, cap, own - monotonic(), self._queue_for(tool, timeout)
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

    def _queue_for(self, tool: Tool, timeout: float) -> float:
        """How long a process-run attempt of ``tool`` waits for a free child."""
        return tool.queue_timeout or self._queue_timeout or timeout

    def _in_children(self, tool: Tool, ctx: RunContext[t.Any] | None, job: _Job) -> bool:
        """Whether a batch hands ``tool``'s first attempt straight to child processes
        (sets ``job.process``): its backend is a :class:`ProcessBackend`, nobody
        listens to what the tool reports and its context cannot be asked questions
        (such a call runs in a lane, whose thread delivers the reports and answers
        the questions)."""
        name = tool.backend
        if name is None:
            backend = self._default if tool.isolation == "thread" else self._process_backend
        else:
            backend = self._backends.get(name)  # type: ignore[assignment]
        if type(backend) is not ProcessBackend:
            return False
        if tool.takes_ctx and (
            _progress.receivers
            or _log_signal.receivers
            or (
                isinstance(ctx, RunContext)
                and (
                    ctx._channel is not None or ctx.sampler is not None or ctx.elicitor is not None
                )
            )
        ):
            return False
        job.process = backend
        return True

    def _on_threads(self, tool: Tool) -> bool:
        """Whether ``tool``'s timed attempts run on this executor's worker threads
        (a batch hands those straight to the pool; any other backend runs them in a
        lane, through :meth:`_timed`)."""
        name = tool.backend
        if name is None:
            return tool.isolation == "thread" and self._default is self._threads
        return self._backends.get(name) is self._threads

    def _no_backend(self, name: str) -> str:
        return (
            f"it names the backend {name!r}, which this ToolExecutor does not have (it has "
            f"{', '.join(repr(n) for n in sorted(self._backends))}): pass it as "
            f"ToolExecutor(backends={{{name!r}: ...}})"
        )

    def _raised(
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

    def _timed_out(self, tool: Tool, attempt: int, timeout: float, duration: int) -> Err:
        if _exception.receivers:
            self._send_exception(tool, attempt, duration, False, "timeout", "timeout", None)
        if _timeout.receivers:
            _send(_timeout, tool, {"timeout": timeout}, {"tool_name": tool.name})
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


def _read_jobs(
    calls: c.Iterable[object], job: c.Callable[[object], tuple[Tool, t.Any, str | None] | Err]
) -> list[tuple[Tool, t.Any, str | None] | Err]:
    """``execute_many``'s calls read into jobs with ``job(call)``; an iterable that
    raises ends the list there, with an ``Err`` in its place (the calls read so far
    still run)."""
    jobs: list[tuple[Tool, t.Any, str | None] | Err] = []
    try:
        for call in calls:
            jobs.append(job(call))
    except BaseException as exc:
        if interrupts(exc):
            raise
        jobs.append(
            Err(
                ToolError(
                    "execute_many could not read its calls: the iterable raised "
                    f"{type(exc).__name__}: {_safe_str(exc)}",
                    original_error=exc,
                )
            )
        )
    return jobs


def _check_on_timeout(value: object) -> None:
    if value not in ON_TIMEOUT_MODES:
        raise ValueError(
            f"ToolExecutor option 'on_timeout' must be one of "
            f"{', '.join(repr(m) for m in ON_TIMEOUT_MODES)}, got {value!r}"
        )


def _check_batch_cap(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"batch option 'max_concurrency' must be an int >= 1 or None, got {value!r}"
        )


def _checked_past_deadline(tool: Tool) -> Err:
    """The answer to a call whose validation and conversion outlasted its timeout
    (they count inside it): a timeout, and the tool never ran."""
    _log.error(
        "Tool '%s' timed out after %s s while its arguments were validated and converted; "
        "it did not run",
        tool.name,
        tool.timeout,
    )
    return Err(
        ToolTimeout(
            f"Tool '{tool.name}' timed out after {tool.timeout} s: validating and converting "
            "its arguments took the whole deadline, and the tool did not run",
            tool_name=tool.name,
            timeout=tool.timeout,
            attempt=1,
        )
    )


def _cancelled_before_start(job: object) -> Err:
    name = getattr(job[0], "name", None) if isinstance(job, tuple) else None
    return Err(
        ToolError(
            "the call was not started: the attempt that made it was cancelled",
            tool_name=name if isinstance(name, str) else None,
        )
    )


_default: ToolExecutor | None = None
_default_lock = threading.Lock()


def default_executor() -> ToolExecutor:
    """The process-wide executor behind :func:`execute`, created on first use."""
    global _default
    executor = _default
    if executor is None:
        with _default_lock:
            if _default is None:
                _default = ToolExecutor()
            executor = _default
    return executor


def set_default_executor(executor: ToolExecutor | None) -> ToolExecutor | None:
    """Make ``executor`` the process-wide default: what :func:`execute`,
    :func:`execute_many` and every :class:`~nous_tools.Registry` without an executor
    of its own run on from now on (None: a new one is made at the next use, as at
    first). Returns the executor it replaces, or None; that one is not shut down —
    the calls running on it finish there — so shut it down yourself if it is done.

    ``nous_tools.contrib.django.NousToolsConfig`` does this at Django's start, with
    an executor that closes the worker threads' database connections.
    """
    global _default
    if executor is not None and not isinstance(executor, ToolExecutor):
        raise TypeError(
            f"set_default_executor expects a ToolExecutor or None, got {type(executor).__name__}"
        )
    with _default_lock:
        previous, _default = _default, executor
    return previous


@t.overload
def execute(
    tool: Tool[..., Ok[_T]],
    arguments: c.Mapping[str, t.Any] | None = None,
    ctx: RunContext[t.Any] | None = None,
    *,
    call_id: str | None = None,
    wait: float | None = None,
) -> Ok[_T] | Err[ToolError]: ...
@t.overload
def execute(  # type: ignore[overload-overlap]
    tool: Tool[..., Ok[_T] | Err[_E]],
    arguments: c.Mapping[str, t.Any] | None = None,
    ctx: RunContext[t.Any] | None = None,
    *,
    call_id: str | None = None,
    wait: float | None = None,
) -> Ok[_T] | Err[ToolError | _E]: ...
@t.overload
def execute(  # type: ignore[overload-overlap]
    tool: Tool[..., Err[_E]],
    arguments: c.Mapping[str, t.Any] | None = None,
    ctx: RunContext[t.Any] | None = None,
    *,
    call_id: str | None = None,
    wait: float | None = None,
) -> Err[ToolError | _E]: ...
@t.overload
def execute(
    tool: Tool[..., _R],
    arguments: c.Mapping[str, t.Any] | None = None,
    ctx: RunContext[t.Any] | None = None,
    *,
    call_id: str | None = None,
    wait: float | None = None,
) -> Ok[_R] | Err[ToolError]: ...
def execute(
    tool: Tool,
    arguments: c.Mapping[str, t.Any] | None = None,
    ctx: RunContext[t.Any] | None = None,
    *,
    call_id: str | None = None,
    wait: float | None = None,
) -> Result:
    """Run ``tool`` on the process-wide default executor; see :meth:`ToolExecutor.execute`.

    For a type checker, a ``Tool[P, R]`` gives ``Ok[R] | Err[ToolError]``."""
    executor = _default
    if executor is None:
        executor = default_executor()
    # ToolExecutor.execute, a frame shorter (this is the most common call of all).
    if here.nested:
        return executor._shielded(tool, arguments, ctx, call_id, False, wait=wait)
    try:
        if wait is None:  # a keyword fewer to pass on the most common call
            return executor._execute(tool, arguments, ctx, call_id)
        return executor._execute(tool, arguments, ctx, call_id, wait=wait)
    except BaseException as exc:  # a bug of ours must not reach the caller either
        if interrupts(exc):
            raise
        return _internal_error(tool, exc)


def execute_many(
    calls: c.Iterable[tuple[Tool, c.Mapping[str, t.Any] | None] | ToolCall],
    ctx: RunContext[t.Any] | None = None,
    *,
    max_concurrency: int | None = None,
    on_progress: c.Callable[[int, int, Result | None], object] | None = None,
) -> list[Result]:
    """Run calls concurrently on the default executor; see :meth:`ToolExecutor.execute_many`."""
    return default_executor().execute_many(
        calls, ctx, max_concurrency=max_concurrency, on_progress=on_progress
    )
