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

import collections.abc as c
import contextvars
import threading
import typing as t

import attrs

from nous_tools._engine import _admission, _pool
from nous_tools._engine._journal import check_journal
from nous_tools._engine._pool import Hook
from nous_tools._engine._process_pool import check_option
from nous_tools._util._log import log as _safe_log
from nous_tools._util._scope import Scope, here, interrupts
from nous_tools._util._text import safe_str as _safe_str
from nous_tools.backend import Backend, ProcessBackend, ThreadBackend, check_backend
from nous_tools.errors import ToolError
from nous_tools.executor._attempts import Attempts, _internal_error
from nous_tools.executor._batch import Batches
from nous_tools.executor._call import Calls
from nous_tools.executor._call import _arguments_error as _arguments_error
from nous_tools.executor._handoff import HandOffs
from nous_tools.executor._lanes import _Tally, run_lanes
from nous_tools.results import Err, Ok, Result
from nous_tools.run_context import RunContext
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

# The value and reason types of the results (execute's overloads).
_T = t.TypeVar("_T")
_E = t.TypeVar("_E")
_R = t.TypeVar("_R")


@attrs.frozen(slots=True)
class ToolCall:
    """A neutral tool call: the provider's call ``id``, the tool ``name`` and its ``arguments``."""

    id: str | None
    name: str
    arguments: t.Any = attrs.field(
        factory=dict, metadata={"description": "The arguments, a mapping (default: empty)."}
    )


class ToolExecutor:
    """Runs tools: approval, validation, attempts with retries, deadlines and signals.

    ``max_workers`` bounds concurrent timed attempts (default 32, or ``cpus + 4`` up
    to 64 on a bigger machine, so a model's turn of dozens of calls does not run in
    waves; workers start as calls need them, an idle one is reused first), however many callers and batches run at once; ``max_abandoned`` (default 64,
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
        _check_max_result_chars(max_result_chars)
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
        self._journal = journal
        self._compose(bool(log_exception_text))

    def _compose(self, log_exception_text: bool) -> None:
        """The pipeline, step by step (``docs/concepts/pipeline.md``): each step is
        given the next and calls it once; a batch composes them."""
        attempts = Attempts(
            self._threads,
            self._process_backend,
            self._backends,
            self._default,
            self._admission,
            self._queue_timeout,
            log_exception_text,
        )
        hand_offs = HandOffs(attempts)
        calls = Calls(attempts, hand_offs, self._admission, self._journal, self._max_result_chars)
        self._attempts = attempts
        self._calls = calls
        self._batches = Batches(attempts, hand_offs, calls, journaled=self._journal is not None)
        # A registry's ways in (its own fast path of execute, and execute_approved).
        self._execute = calls.entry
        self._shielded = calls.shielded
        self._run_with = calls.guarded

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
    def log_exception_text(self) -> bool:
        """Whether a failed tool's exception text goes into its error-level log line
        (as Nous does), not to the debug level only."""
        return self._attempts.log_exception_text

    @log_exception_text.setter
    def log_exception_text(self, value: bool) -> None:
        self._attempts.log_exception_text = bool(value)

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
            return self._calls.shielded(tool, arguments, ctx, call_id, False, wait=wait)
        try:
            if wait is None:  # a keyword fewer to pass on the common call
                return self._calls.entry(tool, arguments, ctx, call_id)
            return self._calls.entry(tool, arguments, ctx, call_id, wait=wait)
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
        return self._calls.guarded(tool, arguments, ctx, call_id, True, None, wait)

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
        straight: c.Callable[[Tool], bool] | None = None,
        enter: c.Callable[[int], object] | None = None,
    ) -> list[t.Any]:
        """Run prepared ``(tool, arguments, call_id)`` jobs concurrently; an ``Err``
        in ``jobs`` is its own result. ``run`` replaces :meth:`execute` per job,
        except for a job whose tool ``straight(tool)`` lets go straight to this
        executor's pipeline (``run`` would do nothing more for it), which is handed to
        a worker as in :meth:`execute_many`; ``enter(i)`` is called in job ``i``'s
        context first (to set its ``contextvars``). ``on_progress`` is told of each
        job that ends (see :meth:`execute_many`).
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
        runner = run if run is not None else self._calls.job
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
            _run_one(jobs, todo[0], results, ctx, runner, enter, tally)
            return results
        parent = here.scope
        batch = Scope(parent.deadline if parent is not None else None, shared=True)
        if parent is not None and not parent.adopt(batch):
            _never_started(jobs, results, tally)
            return results
        # In a pool worker (a tool running a batch), the batch's own bookkeeping is
        # the library's code: no cancellation lands in it. Cancelling the attempt
        # cancels the batch through its scope; ToolCancelled is raised on return.
        batched = run is None or straight is not None
        token = _pool.shield() if batched else None
        try:
            if batched:
                self._batches.run(
                    jobs,
                    todo,
                    results,
                    ctx,
                    batch,
                    limit,
                    tally,
                    run=run,
                    straight=straight,
                    enter=enter,
                )
            else:
                run_lanes(self._pool, jobs, todo, results, ctx, batch, runner, limit, tally)
        finally:
            if parent is not None:
                parent.release(batch)
            if token is not None:
                _pool.unshield(token)
        _never_started(jobs, results, tally)
        return results

    def stats(self) -> dict[str, int]:
        """Workers and calls: ``workers``, ``idle``, ``busy`` (= ``running``),
        ``abandoned``, ``completed``, ``timed_out``, ``saturated``, ``pending``;
        and the child processes of ``isolation="process"`` under ``process_``
        (``process_workers``, ``process_idle``, ``process_busy``,
        ``process_killed``, ``process_died``, ...: see ``docs/how-to/process-isolation.md``);
        and each other backend's figures under its name (``ray_timed_out``, ...).
        A backend whose ``stats()`` raises is logged and left out."""
        figures = self._pool.stats()
        for key, value in self._process_backend.stats().items():
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
        self._process_backend.shutdown(wait)
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


def _check_max_result_chars(value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(
            "ToolExecutor option 'max_result_chars' must be an int >= 1 or None (no "
            f"limit), got {value!r}"
        )


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


def _run_one(
    jobs: c.Sequence[tuple[Tool, t.Any, str | None] | Err],
    i: int,
    results: list[t.Any],
    ctx: RunContext[t.Any] | None,
    runner: c.Callable[[Tool, t.Any, RunContext[t.Any] | None, str | None], t.Any],
    enter: c.Callable[[int], object] | None,
    tally: _Tally | None,
) -> None:
    """A batch of one job, run by its caller (``enter``: in a context of its own,
    as a batch's calls are)."""
    tool, arguments, call_id = t.cast(tuple[Tool, t.Any, "str | None"], jobs[i])
    if enter is None:
        results[i] = runner(tool, arguments, ctx, call_id)
    else:
        context = contextvars.copy_context()
        context.run(enter, i)
        results[i] = context.run(runner, tool, arguments, ctx, call_id)
    if tally is not None:
        tally.ended(results[i])


def _never_started(
    jobs: c.Sequence[tuple[Tool, t.Any, str | None] | Err],
    results: list[t.Any],
    tally: _Tally | None,
) -> None:
    """The result of each job a cancelled batch never started."""
    for i, result in enumerate(results):
        if result is None:
            results[i] = _cancelled_before_start(jobs[i])
            if tally is not None:
                tally.ended(results[i])


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
        return executor._calls.shielded(tool, arguments, ctx, call_id, False, wait=wait)
    try:
        if wait is None:  # a keyword fewer to pass on the most common call
            return executor._calls.entry(tool, arguments, ctx, call_id)
        return executor._calls.entry(tool, arguments, ctx, call_id, wait=wait)
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
