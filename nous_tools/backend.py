"""Backends: where a timed attempt runs, and who stops it at its deadline.

A :class:`~nous_tools.ToolExecutor` does everything that decides *whether* and
*how* a tool runs in the caller's process — approval, validation, conversion to
the annotated types, retries, every signal — and hands each **timed attempt** to
a backend. The backend runs that one attempt and answers by the deadline; at the
deadline it stops the attempt (a worker thread is interrupted, a process is
killed) and answers "timed out". A timeout is terminal: the executor never runs
that attempt again, and a backend must never re-run it either. Attempts of tools
without a timeout run inline in the caller's thread, whatever the backend.

Built in: ``"thread"`` (:class:`ThreadBackend`, the executor's worker threads,
the default) and ``"process"`` (:class:`ProcessBackend`, its killable child
processes, which ``isolation="process"`` uses). In ``nous_tools.contrib``:
``RayBackend`` (``nous_tools.contrib.ray``) and ``CeleryBackend``
(``nous_tools.contrib.celery``). A tool names its backend (``Tool(backend="ray")``),
resolved through ``ToolExecutor(backends={"ray": RayBackend()})``; tools that name
none use the executor's ``backend`` (default ``"thread"``).

Writing one: any object with ``run``, ``stats`` and ``shutdown`` (see
:class:`Backend`). Here a backend that counts attempts and runs them on threads:

>>> from nous_tools import ToolExecutor, tool
>>> from nous_tools.backend import ThreadBackend
>>> class Counting:
...     def __init__(self) -> None:
...         self.threads, self.attempts = ThreadBackend(max_workers=2), 0
...     def run(self, tool, arguments, ctx, deadline):
...         self.attempts += 1
...         return self.threads.run(tool, arguments, ctx, deadline)
...     def stats(self):
...         return {"attempts": self.attempts}
...     def shutdown(self, wait=True):
...         self.threads.shutdown(wait)
>>> @tool(timeout=5, backend="counted")
... def double(x: int) -> int:
...     return 2 * x
>>> with ToolExecutor(backends={"counted": Counting()}) as executor:
...     print(executor.execute(double, {"x": 21}), executor.stats()["counted_attempts"])
Ok(value=42, update=None) 1

What a backend answers is an :data:`Outcome`, made with :func:`returned`,
:func:`raised`, :func:`timed_out`, :func:`not_sent` or :func:`shut_down`.
"""

from __future__ import annotations

import collections.abc as c
import os
import signal
import threading
import typing as t

from nous_tools._engine import _reporting
from nous_tools._engine._isolation import UNPICKLABLE
from nous_tools._engine._pool import (
    RAISED,
    RETURNED,
    SATURATED,
    SHUT_DOWN,
    TIMED_OUT,
    Hook,
    WorkerPool,
)
from nous_tools._engine._process_pool import ProcessPool, check_option
from nous_tools.errors import ChildProcessDied, SandboxLimitReached, SandboxUnavailable
from nous_tools.tool import ON_TIMEOUT_MODES

if t.TYPE_CHECKING:
    from nous_tools.run_context import RunContext
    from nous_tools.sandbox import SandboxPolicy
    from nous_tools.tool import Tool

__all__ = [
    "NOT_SENT",
    "RAISED",
    "RETURNED",
    "SATURATED",
    "SHUT_DOWN",
    "TIMED_OUT",
    "Backend",
    "Outcome",
    "ProcessBackend",
    "ThreadBackend",
    "not_sent",
    "raised",
    "returned",
    "shut_down",
    "timed_out",
]

#: The kind of outcome of an attempt that never started: something it needed
#: could not be sent to where it runs (an argument that does not pickle, a tool
#: longer than the backend accepts, an engine that cannot be reached). The value
#: is a message saying what; the executor's ``Err`` quotes it.
NOT_SENT = UNPICKLABLE

#: What :meth:`Backend.run` returns: ``(kind, value, text)``. ``kind`` is one of
#: :data:`RETURNED` (value: what the tool returned), :data:`RAISED` (value: the
#: exception the tool raised; text: its ``str()`` where it was rendered, or None),
#: :data:`TIMED_OUT` (the deadline passed and the attempt was stopped),
#: :data:`NOT_SENT` (value: a message), :data:`SATURATED` (value: ``(stuck, cap)``)
#: or :data:`SHUT_DOWN`. Plain tuples, so the thread backend pays nothing to make them.
Outcome = tuple[str, t.Any, str | None]


def returned(value: object) -> Outcome:
    """The tool returned ``value`` (an ``Ok``/``Err`` passes through unchanged)."""
    return (RETURNED, value, None)


def raised(error: BaseException, text: str | None = None) -> Outcome:
    """The tool raised ``error``; ``text`` is its ``str()`` if rendered where it ran.

    An ``Exception`` is retried while attempts remain (and ``retry_on`` agrees); a
    ``BaseException`` that is not one (``SystemExit``, a
    :class:`~nous_tools.errors.ChildProcessDied` for a worker that died) never is.
    """
    return (RAISED, error, text)


def timed_out() -> Outcome:
    """The deadline passed and the attempt was stopped (terminal, never retried)."""
    return (TIMED_OUT, None, None)


def not_sent(message: str) -> Outcome:
    """The attempt never started: ``message`` says what could not reach its worker."""
    return (NOT_SENT, message, None)


def shut_down() -> Outcome:
    """The backend was shut down and runs no more attempts."""
    return (SHUT_DOWN, None, None)


@t.runtime_checkable
class Backend(t.Protocol):
    """Runs one attempt of a tool by a deadline; stops it at the deadline.

    Only the attempt travels: approval, validation, conversion, retries and every
    signal stay in the caller's process, in the executor.
    """

    def run(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any] | None,
        deadline: float,
    ) -> Outcome:
        """Run one attempt: ``tool.function(ctx, **arguments)`` when ``ctx`` is not
        None (it is the attempt's context: ``retry``, ``deadline`` and ``cancelled``
        set), else ``tool.function(**arguments)``. Block until it ends or until
        ``deadline`` (a ``time.monotonic()`` value, submission and queueing count
        inside it), whichever is first. At the deadline stop the attempt (kill it
        where the engine can), never let the engine re-run it, and return
        :func:`timed_out` at once. An exception in the caller while it waits (Ctrl-C)
        must stop the attempt the same way, then propagate. Anything else that goes
        wrong is an outcome (:func:`raised`, :func:`not_sent`), never an exception."""
        ...

    def stats(self) -> dict[str, int]:
        """Counts for monitoring; the executor's ``stats()`` prefixes them with the
        backend's name."""
        ...

    def shutdown(self, wait: bool = True) -> None:
        """Run no more attempts; with ``wait``, wait for those under way (each ends by
        its deadline). Idempotent. The executor calls it from its own ``shutdown``."""
        ...


class ThreadBackend:
    """Worker threads under real-time deadlines: the default backend.

    ``max_workers`` (default 32, or ``cpus + 4`` up to 64; a bound: workers start as
    calls need them) bounds the attempts that run at
    once; ``max_abandoned`` (default 64) the workers stuck past their deadlines
    before new attempts get ``Err(ExecutorSaturated)``; ``on_timeout``
    (``"interrupt"`` or ``"abandon"``) is the default for tools that set none.

    A thread cannot be killed: at the deadline the attempt's ``ctx.cancelled`` is
    set and, with ``"interrupt"``, ``ToolCancelled`` is raised in the worker at its
    next Python bytecode; the worker is retired, never reused.

    The hooks run in the pool's threads (workers, and the lanes of
    ``execute_many``), like ``ThreadPoolExecutor``'s ``initializer``:
    ``on_worker_start()`` when a thread starts, ``after_task()`` after each task it
    ran (after the caller has its outcome; for an attempt abandoned at its
    deadline, when the thread has finished with it), ``on_worker_exit()`` when it
    ends. What a hook raises is logged and never changes an outcome or stops the
    thread; a hook that blocks holds its thread (and ``shutdown(wait=True)``).
    """

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        max_abandoned: int = 64,
        on_timeout: str = "interrupt",
        on_worker_start: Hook | None = None,
        after_task: Hook | None = None,
        on_worker_exit: Hook | None = None,
    ) -> None:
        if on_timeout not in ON_TIMEOUT_MODES:
            raise ValueError(
                f"option 'on_timeout' must be one of "
                f"{', '.join(repr(m) for m in ON_TIMEOUT_MODES)}, got {on_timeout!r}"
            )
        self.pool = WorkerPool(
            max_workers,
            max_abandoned=max_abandoned,
            on_worker_start=on_worker_start,
            after_task=after_task,
            on_worker_exit=on_worker_exit,
        )
        self.on_timeout = on_timeout
        self._run = self.pool.run

    def run(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any] | None,
        deadline: float,
    ) -> Outcome:
        """Run the attempt in a worker thread; see :meth:`Backend.run`."""
        interrupt = (tool.on_timeout or self.on_timeout) == "interrupt"
        kwargs = arguments if type(arguments) is dict else dict(arguments)
        if ctx is None:
            return self._run(tool.function, (), kwargs, deadline, interrupt=interrupt)
        # The engine put a Channel there (a RunContext names it a ReportSink).
        channel: _reporting.Channel | None = ctx._channel  # type: ignore[assignment]
        if channel is not None and channel.inbox is not None and channel.owned():
            # someone listens to this attempt's tool: its reports come as it runs
            return self.pool.run_watched(
                tool.function,
                (ctx,),
                kwargs,
                deadline,
                channel.inbox,
                channel.serve,
                cancelled=ctx.cancelled,
                interrupt=interrupt,
            )
        return self._run(
            tool.function, (ctx,), kwargs, deadline, cancelled=ctx.cancelled, interrupt=interrupt
        )

    def stats(self) -> dict[str, int]:
        """``workers``, ``idle``, ``busy`` (= ``running``), ``abandoned``,
        ``completed``, ``timed_out``, ``saturated``, ``pending``, ``max_workers``,
        ``max_abandoned``."""
        return self.pool.stats()

    def shutdown(self, wait: bool = True) -> None:
        """Idle workers exit; with ``wait``, wait for the healthy running ones (never
        for abandoned ones). Idempotent."""
        self.pool.shutdown(wait)

    def __repr__(self) -> str:
        return f"<ThreadBackend max_workers={self.pool.max_workers}>"


class ProcessBackend:
    """Reused child processes, each attempt's child **killed** at its deadline.

    What ``isolation="process"`` uses (see ``docs/how-to/process-isolation.md``):
    ``max_workers`` (default: the usable CPUs, at least 2, at most 8) attempts at
    once, ``max_tasks_per_child`` (default None) attempts before a child is
    replaced. The function, arguments, deps and result must pickle; what does not
    gets a clear ``Err``. Nothing starts until the first attempt.

    A :class:`~nous_tools.ToolExecutor` runs it with each attempt's timeout counted
    from when a child takes it and the wait for a child bounded by ``queue_timeout``
    (see ``docs/how-to/process-isolation.md``); :meth:`run`, the plain
    :class:`Backend` method, counts its ``deadline`` from submission.
    """

    def __init__(
        self, max_workers: int | None = None, *, max_tasks_per_child: int | None = None
    ) -> None:
        check_option("ProcessBackend", "max_workers", max_workers)
        check_option("ProcessBackend", "max_tasks_per_child", max_tasks_per_child)
        self.pool = ProcessPool(max_workers, max_tasks_per_child=max_tasks_per_child)
        self._max_tasks = max_tasks_per_child
        # The pools of confined children, one per set of policies, most recently
        # used last; at most _MAX_FENCED of them (the oldest is ended).
        self._fenced: dict[tuple[SandboxPolicy, ...], ProcessPool] = {}
        self._fenced_lock = threading.Lock()
        self._proven: dict[tuple[SandboxPolicy, ...], str] = {}  # ... under this test hook
        self._closed = False

    def run(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any] | None,
        deadline: float,
    ) -> Outcome:
        """Run the attempt in a child process; see :meth:`Backend.run`. What the tool
        reports comes over the pipe and is delivered here, in the caller's thread."""
        policies = fences(tool, ctx.sandbox if ctx is not None else None)
        pool = self.pool if not policies else self._pool_for(policies)
        if type(pool) is not ProcessPool:
            return t.cast(Outcome, pool)
        on_event, on_request = _handlers(ctx)
        kind, value = pool.run(tool, arguments, ctx, deadline, on_event, on_request)
        return _named(policies, kind, value)

    def _pool_for(self, policies: tuple[SandboxPolicy, ...]) -> ProcessPool | Outcome:
        """The pool whose children are confined to ``policies``, or the outcome of a
        call that cannot be: :class:`SandboxUnavailable` (never run unconfined)."""
        disabled = os.environ.get("NOUS_TOOLS_SANDBOX_DISABLE", "")  # the probe's test hook
        with self._fenced_lock:
            pool = self._fenced.pop(policies, None)
            if pool is not None:
                self._fenced[policies] = pool  # the most recently used, last
                if self._proven.get(policies) == disabled:  # proven, with the same hook
                    return pool
        missing = tuple(dict.fromkeys(m for p in policies for m in p.missing()))
        if missing:
            from nous_tools.sandbox._refusals import unavailable

            error = SandboxUnavailable(unavailable(policies[0], missing), missing=missing)
            return (RAISED, error, None)
        if pool is not None:
            self._proven[policies] = disabled
            return pool
        from nous_tools._engine._fence import confinement

        limit = self._max_tasks
        if any(p.cpu_seconds for p in policies) and os.geteuid() != 0:
            limit = 1  # a CPU limit cannot be raised again for the next call
        pool = ProcessPool(
            self.pool.max_workers,
            max_tasks_per_child=limit,
            name="nous-tools-sandboxed",
            confinement=confinement(policies),
        )
        ended: list[ProcessPool] = []
        with self._fenced_lock:
            if self._closed:
                ended.append(pool)
            else:
                found = self._fenced.setdefault(policies, pool)
                if found is not pool:
                    ended.append(pool)
                    pool = found
                self._proven[policies] = disabled
                while len(self._fenced) > _MAX_FENCED:
                    oldest = next(iter(self._fenced))
                    ended.append(self._fenced.pop(oldest))
                    self._proven.pop(oldest, None)
        for old in ended:
            old.shutdown(wait=False)
        return pool

    def _attempt(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any] | None,
        cap: float,
        budget: float,
        queue_timeout: float,
        sandbox: SandboxPolicy | None = None,
        cancelled: threading.Event | None = None,
    ) -> Outcome:
        """The executor's way in: the attempt may wait ``queue_timeout`` seconds for a
        free child, then runs ``budget`` seconds from when a child takes it, never
        past ``cap`` (an enclosing attempt's deadline; ``inf``: none), confined to
        ``sandbox`` (the call's context's) and the tool's own ``sandbox``."""
        policies = fences(tool, sandbox)
        pool = self.pool if not policies else self._pool_for(policies)
        if type(pool) is not ProcessPool:
            return t.cast(Outcome, pool)
        on_event, on_request = _handlers(ctx)
        kind, value = pool.run(
            tool,
            arguments,
            ctx,
            cap,
            on_event,
            on_request,
            budget=budget,
            queue_timeout=queue_timeout,
            cancelled=cancelled,
        )
        return _named(policies, kind, value) if policies else (kind, value, None)

    def stats(self) -> dict[str, int]:
        """``workers``, ``idle``, ``busy``, ``starting``, ``pending``, ``started``,
        ``completed``, ``timed_out``, ``killed``, ``died``, ``recycled``, ``strays``,
        ``start_failures``, ``not_started``, ``max_workers`` (confined children
        included; ``max_workers`` is each policy's)."""
        figures = self.pool.stats()
        with self._fenced_lock:
            pools = list(self._fenced.values())
        for pool in pools:
            for key, value in pool.stats().items():
                if key != "max_workers":
                    figures[key] += value
        return figures

    def shutdown(self, wait: bool = True) -> None:
        """End every child; with ``wait``, wait for running attempts and exits."""
        with self._fenced_lock:
            self._closed = True
            pools = list(self._fenced.values())
            self._fenced.clear()
        for pool in pools:
            pool.shutdown(wait)
        self.pool.shutdown(wait)

    def __repr__(self) -> str:
        return f"<ProcessBackend max_workers={self.pool.max_workers}>"


def _handlers(
    ctx: RunContext[t.Any] | None,
) -> tuple[c.Callable[[int, memoryview], object] | None, c.Callable[[int, bytes], bytes] | None]:
    """What a child's events and questions go to during an attempt: what the tool
    reports, to the context's channel (delivered in the caller's thread); its
    ``ctx.sample``/``ctx.elicit``, to the context's sampler and elicitor."""
    if ctx is None:
        return None, None
    channel: _reporting.Channel | None = ctx._channel  # type: ignore[assignment]
    on_event = _reporting.from_child(channel) if channel is not None else None
    on_request = None
    if ctx.sampler is not None or ctx.elicitor is not None:
        from nous_tools.asking import answer_for  # the tool's ctx.sample/ctx.elicit, asked here

        on_request = answer_for(ctx)
    return on_event, on_request


def check_backend(name: str, backend: object) -> None:
    """Raise ``TypeError`` unless ``backend`` has callable ``run``, ``stats`` and
    ``shutdown`` (what :class:`Backend` asks)."""
    missing = [m for m in ("run", "stats", "shutdown") if not callable(getattr(backend, m, None))]
    if missing:
        raise TypeError(
            f"backend {name!r} ({type(backend).__name__}) is not a Backend: it has no "
            f"{', '.join(missing)} method (a backend needs run, stats and shutdown)"
        )


#: The most sets of policies a ProcessBackend keeps confined children for at once.
_MAX_FENCED = 4


def fences(tool: Tool, sandbox: SandboxPolicy | None) -> tuple[SandboxPolicy, ...]:
    """The policies a process-isolated call of ``tool`` is confined to: the tool's
    own ``sandbox`` and the call's (the context's), each that needs a fence; both
    stack (a process must pass each). Empty: the call runs unconfined."""
    own = tool.sandbox
    if own is None:
        return (sandbox,) if sandbox is not None and sandbox.enforced else ()
    if sandbox is None or not sandbox.enforced or sandbox == own:
        return (own,) if own.enforced else ()
    return (own, sandbox) if own.enforced else (sandbox,)


def _named(policies: tuple[SandboxPolicy, ...], kind: str, value: t.Any) -> Outcome:
    """A confined child killed by the kernel for its CPU time: the limit, named."""
    if kind == RAISED and type(value) is ChildProcessDied:
        cpu = min((p.cpu_seconds for p in policies if p.cpu_seconds), default=None)
        killed = value.exitcode in (-signal.SIGKILL, -signal.SIGXCPU)
        if cpu is not None and killed:
            limit = SandboxLimitReached(f"cpu limit {cpu} s reached", limit="cpu_seconds")
            limit.__cause__ = value
            return (RAISED, limit, None)
    return (kind, value, None)
