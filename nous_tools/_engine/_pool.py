"""Worker threads with hard deadlines (private).

The pool knows nothing of tools: it runs callables, each in a copy of the
submitting thread's ``contextvars`` context, under a deadline, and reports what
happened as a plain ``(kind, value, text)`` tuple. The executor turns that into
``Ok``/``Err`` and sends every signal from the caller's thread.

Design, and why:

* **One queue, workers that pull.** A timed call puts its task on a
  ``queue.SimpleQueue`` (one atomic C call) and waits on the task's ``done``
  lock with a timeout; an idle worker takes it, runs it and releases ``done``.
  A worker that takes a task while more wait and no worker is idle starts
  another worker (up to ``max_workers``), so a task never waits while capacity
  is free.
* **Books that no interruption can corrupt.** Two kinds of exception arrive at
  arbitrary bytecodes: ``KeyboardInterrupt`` in the main thread (Ctrl-C), and
  the ``ToolCancelled`` this pool sends to a worker whose task passed its
  deadline — which may land in the pool's own code when that worker's tool was
  itself waiting on a nested call. So the caller's side writes no counts at
  all: it creates its task, enqueues it, perhaps starts a thread, and waits.
  Whatever happens in between, the task is either still queued, running, or
  finished, and ``_abandon`` (idempotent) settles it. Each task has two claims,
  ``start`` and ``finish`` (``dict.setdefault`` is atomic), so exactly one
  party wins each race — a worker starting the task against a caller dropping
  it, a worker finishing it against a caller abandoning it — and a winner
  interrupted right after its claim can still tell that it won.
  Every count is changed under the pool's lock, by the winner, in one run of
  plain stores with no call between them (so nothing can land halfway); what a
  winner interrupted before counting leaves undone, the worker counts itself
  when it notices it lost. Threads register themselves when they start, so a
  ``Thread.start()`` cut short leaves nothing behind.
* **One cancellation per worker, delivered or cleared.** ``ToolCancelled`` is
  sent to a worker once, by the party that abandoned its task, under the lock;
  a worker that lost its task takes the lock before it exits and clears what
  has not been delivered, so the exception never lands in another task, in the
  books, or — after the thread ends — in a thread that reuses its id.
* **Deadlines reach nested work.** A task is a cancel scope (``_scope.Scope``):
  calls a tool makes from inside an attempt are its children, their deadline is
  at most the enclosing attempt's, and abandoning a task abandons its children.
  A batch is a scope too, so Ctrl-C during ``execute_many`` cancels its calls.
* **Real time.** ``Lock.acquire(timeout=...)`` waits in C on the real monotonic
  clock and the pool's clock is captured at import, so deadlines hold inside
  ``freezegun.freeze_time``.
* **What a deadline can stop.** CPython cannot kill a thread. At the deadline
  the caller returns, the task's ``cancelled`` event is set and (when asked)
  ``ToolCancelled`` is raised asynchronously in the worker, at its next Python
  bytecode: it stops a Python loop, not a blocking C call (``time.sleep``, a
  socket read) until that call returns. The worker is *abandoned*: never
  reused, not counted against ``max_workers``, and it exits when its task ends.
* **Never blocks exit.** Workers and lanes are daemon threads and the pool
  registers no ``atexit`` join, so a hung tool cannot keep a script alive.
* **Lifecycle hooks run where no cancellation can reach them.** The optional
  ``on_worker_start``, ``after_task`` and ``on_worker_exit`` run in the pool's own
  threads (workers and lanes): ``on_worker_start`` before the thread takes
  anything (nothing is sent to a worker before it has won a task);
  ``after_task`` after the task's outcome is handed over (the worker won
  ``finish``, so no cancellation is due) and, for a worker whose task was
  abandoned, only after its books are settled and it is marked gone (nothing is
  sent to a gone worker), followed by ``on_worker_exit``. A hook's outcome never
  reaches a task: what it raises is logged and dropped, and the thread goes on.
* **A task belongs to one pool.** Cancelling a scope cancels its children with
  their own pool's books, so a nested call into another executor's pool is
  abandoned, counted and retired by that pool.
"""

from __future__ import annotations

import _thread
import contextlib
import contextvars
import ctypes
import itertools
import os
import queue
import sys
import threading
import time
import typing as t

from nous_tools._util._clock import _Clock
from nous_tools._util._log import log as _log
from nous_tools._util._scope import Scope, here, in_worker
from nous_tools._util._text import safe_str
from nous_tools.errors import ToolCancelled

__all__ = ["RAISED", "RETURNED", "SATURATED", "SHUT_DOWN", "TIMED_OUT", "WorkerPool", "in_worker"]

RETURNED = "returned"  # value: what the callable returned
RAISED = "raised"  # value: the exception it raised; text: its str(), rendered in the worker
TIMED_OUT = "timed_out"
SATURATED = "saturated"  # value: (abandoned, cap)
SHUT_DOWN = "shut_down"

#: What :meth:`WorkerPool.run` returns: ``(kind, value, text)``.
Outcome = tuple[str, t.Any, t.Any]

#: A worker lifecycle hook: called with no argument in the pool's thread.
Hook = t.Callable[[], object]

# PyThreadState_SetAsyncExc(thread_id, exc) schedules ``exc`` in that thread;
# with exc=NULL it clears a scheduled exception that has not been delivered yet.
_set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
_clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)

#: Seconds an idle lane thread waits for another batch before it exits.
_LANE_IDLE_SECONDS = 30.0

#: The longest wait a lock accepts; every deadline is checked against it at construction.
_WAIT_MAX = threading.TIMEOUT_MAX


_allocate_lock = _thread.allocate_lock

_hook_lock = threading.Lock()
_hook_installed = False


def _install_quiet_unraisable_hook() -> None:
    """A ``ToolCancelled`` that lands in a finalizer or weakref callback (code that
    happened to run in the cancelled worker) is swallowed by Python and reported
    as "Exception ignored"; it is our own signal, not the program's error, so the
    hook installed here drops it and passes everything else on."""
    global _hook_installed
    if _hook_installed:
        return
    with _hook_lock:
        if _hook_installed:
            return
        previous = sys.unraisablehook

        def hook(unraisable: t.Any) -> None:
            if unraisable.exc_type is ToolCancelled:
                return
            current = previous
            current(unraisable)

        sys.unraisablehook = hook
        _hook_installed = True


class _Task(Scope):
    """One timed call: what to run, the tokens its parties race for, how it ended."""

    __slots__ = (
        "accounted",
        "args",
        "claims",
        "context",
        "done",
        "fn",
        "interrupt",
        "kwargs",
        "notify",
        "pool",
        "result",
        "worker",
    )

    def __init__(
        self,
        fn: t.Callable[..., t.Any],
        args: tuple[t.Any, ...],
        kwargs: dict[str, t.Any],
        deadline: float,
        event: threading.Event | None,
        interrupt: bool,
        pool: WorkerPool,
    ) -> None:
        self.pool = pool  # whose books count it, whoever cancels it
        self.cancelled = False
        self.children = None
        self.deadline = deadline
        self.event = event
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.context = contextvars.copy_context()
        self.interrupt = interrupt
        # Who won each race: "start" (the worker that runs it, or a caller that drops
        # it while queued) and "finish" (the worker that finishes it, or a party that
        # abandons it). dict.setdefault is atomic, and the winner can tell it won
        # even when it is interrupted right after.
        self.claims: dict[str, object] = {}
        self.result: Outcome = (TIMED_OUT, None, None)
        self.worker: _Worker | None = None
        self.accounted = False  # its abandonment has been counted
        # A batch waiting for several tasks at once (see submit): gets the task
        # right after its ``done`` is released, whoever releases it.
        self.notify: queue.SimpleQueue[t.Any] | None = None
        self.done = done = _allocate_lock()
        done.acquire()


class _Worker:
    """A worker thread's record; only its own thread and the lock-holder write it.

    ``lock`` guards the shield: ``shield`` counts how deep the thread is in the
    library's own code (a nested call), where no cancellation is delivered;
    ``cancelled`` is set when its task is abandoned and stays set.
    """

    __slots__ = (
        "abandoned",
        "asleep",
        "bell",
        "cancelled",
        "completed",
        "fd",
        "gone",
        "healthy",
        "ident",
        "lock",
        "shield",
        "thread",
    )

    def __init__(self) -> None:
        self.abandoned = False
        self.cancelled = False
        self.completed = 0
        self.gone = False
        self.healthy = False
        self.ident = 0
        self.lock = threading.Lock()
        self.shield = 0
        self.thread: threading.Thread | None = None
        # What it sleeps on while idle: an eventfd (see _ring), else a lock; and
        # whether it is (about to be) asleep there, so only a sleeper's bell is rung.
        self.asleep = False
        self.fd = _take_fd()
        self.bell: t.Any = None
        if self.fd < 0:
            self.bell = _allocate_lock()
            self.bell.acquire()


# Waking an idle worker. A thread that releases a lock while it holds the GIL
# wakes the sleeper only for it to find the GIL taken and sleep again: four
# context switches where two would do, which is most of a hand-off's cost on a
# busy core. ``os.eventfd_write`` releases the GIL around the system call that
# wakes the worker, so the worker takes the GIL at once (Linux; elsewhere, a lock).
# A worker's eventfd is never closed, only handed to the next worker when it ends:
# a caller that looked at an idle worker a moment too long ago may still ring its
# bell, and must not reach another file that took the number.
_eventfd = getattr(os, "eventfd", None)
_spare_fds: list[int] = []


def _take_fd() -> int:
    """An eventfd for a new worker (a spare one if any), or -1 where there is none."""
    try:
        return _spare_fds.pop()
    except IndexError:
        pass
    if _eventfd is None:
        return -1
    try:
        return int(_eventfd(0))  # EFD_CLOEXEC by default
    except OSError:  # out of descriptors: this worker sleeps on a lock
        return -1


def _ring(worker: _Worker) -> None:
    """Wake ``worker``, which is asleep or about to be (a spare wake-up is harmless:
    it looks at the queue again). Nobody else rings it for this sleep."""
    worker.asleep = False
    fd = worker.fd
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.eventfd_write(fd, 1)  # the GIL is released while the worker wakes
    else:
        with contextlib.suppress(RuntimeError):  # rung already
            worker.bell.release()


def _sleep(worker: _Worker) -> None:
    """Sleep until ``worker``'s bell rings (at once if it rang meanwhile)."""
    fd = worker.fd
    if fd >= 0:
        os.eventfd_read(fd)
    else:
        worker.bell.acquire()


def shield() -> _Worker | None:
    """Enter the library's own code in a pool worker: from here to :func:`unshield`
    no ``ToolCancelled`` is delivered asynchronously (it could land in the middle
    of a log handler holding its lock, or of our books). A cancellation that
    arrives meanwhile is raised, synchronously, when the shield is left. Returns
    the token for :func:`unshield`; None outside a pool worker (nothing to do)."""
    me: _Worker | None = here.worker
    if me is None:
        return None
    with me.lock:
        _clear_async_exc(me.ident, None)  # one sent a moment ago is re-raised on the way out
        me.shield += 1
    return me


def unshield(me: _Worker) -> None:
    """Leave a shield; raise ``ToolCancelled`` if the worker's attempt was cancelled
    meanwhile (or before) and this was the outermost shield."""
    with me.lock:
        me.shield -= 1
        cancelled = me.shield == 0 and me.cancelled
    if cancelled:
        raise ToolCancelled


#: The fewest workers a pool gets by default: a model's batch of parallel tool
#: calls (eight is a common upper end) runs at once even on a small machine.
DEFAULT_MIN_WORKERS = 8


def default_max_workers() -> int:
    """``max_workers`` when none is given: ``min(32, cpus + 4)`` as in
    ``ThreadPoolExecutor`` (tools mostly wait on I/O), but at least
    :data:`DEFAULT_MIN_WORKERS`. Workers start only when calls need them."""
    return max(DEFAULT_MIN_WORKERS, min(32, (os.cpu_count() or 1) + 4))


class WorkerPool:
    """Daemon worker threads that run callables under real-time deadlines."""

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        max_abandoned: int = 64,
        name: str = "nous-tools",
        on_worker_start: Hook | None = None,
        after_task: Hook | None = None,
        on_worker_exit: Hook | None = None,
    ) -> None:
        if max_workers is None:
            max_workers = default_max_workers()
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"option 'max_workers' must be an int >= 1, got {max_workers!r}")
        if (
            isinstance(max_abandoned, bool)
            or not isinstance(max_abandoned, int)
            or max_abandoned < 1
        ):
            raise ValueError(
                "option 'max_abandoned' must be an int >= 1 (at 0 no timed call could ever "
                f"run), got {max_abandoned!r}"
            )
        self.max_workers = max_workers
        self.max_abandoned = max_abandoned
        self._name = name
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._idle: list[_Worker] = []  # idle workers, the one idle last on top
        self._workers: set[_Worker] = set()  # registered and not yet gone
        self._healthy = 0  # registered workers that were never abandoned
        self._abandoned = 0  # abandoned workers still running
        self._completed = 0  # tasks completed by workers that are gone
        self._timed_out = 0
        self._saturated = 0
        self._shutdown = False
        self._counter = itertools.count(1)
        self._resends: queue.SimpleQueue[_Worker] | None = None
        self._lanes: queue.SimpleQueue[tuple[t.Any, ...] | None] = queue.SimpleQueue()
        self._idle_lanes: list[None] = []
        for option, hook in (
            ("on_worker_start", on_worker_start),
            ("after_task", after_task),
            ("on_worker_exit", on_worker_exit),
        ):
            if hook is not None and not callable(hook):
                raise TypeError(
                    f"option {option!r} must be callable or None, got {type(hook).__name__}"
                )
        self._on_start = on_worker_start
        self._after_task = after_task
        self._on_exit = on_worker_exit

    # -- running a call ----------------------------------------------------------

    def run(
        self,
        fn: t.Callable[..., t.Any],
        args: tuple[t.Any, ...],
        kwargs: dict[str, t.Any],
        deadline: float,
        *,
        cancelled: threading.Event | None = None,
        interrupt: bool = True,
    ) -> Outcome:
        """Run ``fn(*args, **kwargs)`` in a worker, waiting until ``deadline`` (on
        :func:`~nous_tools._util._clock.monotonic`'s clock) or the enclosing scope's deadline if earlier.

        At the deadline the task is abandoned: ``cancelled`` is set,
        ``ToolCancelled`` is raised in the worker when ``interrupt`` is true, the
        calls it made itself are abandoned too, and ``TIMED_OUT`` is returned at
        once. An exception raised in the caller while it waits (Ctrl-C, or the
        cancellation of the caller's own attempt) abandons the task the same way,
        then propagates.
        """
        if self._shutdown or self._abandoned >= self.max_abandoned:
            return self._refusal()
        # Nested work (``here.nested``) always runs in a scope, so a thread outside
        # every scope is a plain caller: it neither clamps nor adopts.
        parent = here.scope
        if parent is not None:
            limit = parent.deadline
            if limit is not None and limit < deadline:
                deadline = limit
            if deadline <= _Clock.monotonic():  # an enclosing attempt's deadline has passed already
                return self._expired()
        task = _Task(fn, args, kwargs, deadline, cancelled, interrupt, self)
        try:
            if parent is not None:
                if not parent.adopt(task):
                    return (TIMED_OUT, None, None)  # the enclosing attempt was cancelled
                self._enqueue(task, here.nested)
            else:
                self._enqueue(task, False)
            # The clock is read here, just before the wait, so time spent getting
            # here (a thread start, a wait for the GIL) is inside the deadline.
            # (_Clock.monotonic, not a module-level alias, which freezegun would patch.)
            wait = deadline - _Clock.monotonic()
            if wait > _WAIT_MAX:
                wait = _WAIT_MAX
            finished = task.done.acquire(True, wait if wait > 0.0 else 0.0)
        except BaseException:
            self._abandon(task, TIMED_OUT)
            raise
        finally:
            if parent is not None:
                parent.release(task)
        if finished:
            return task.result
        if self._abandon(task, TIMED_OUT):
            return (TIMED_OUT, None, None)
        task.done.acquire()  # it finished as the deadline passed: its worker is handing over
        return task.result

    def run_watched(
        self,
        fn: t.Callable[..., t.Any],
        args: tuple[t.Any, ...],
        kwargs: dict[str, t.Any],
        deadline: float,
        inbox: queue.SimpleQueue[t.Any],
        serve: t.Callable[[], float | None],
        *,
        cancelled: threading.Event | None = None,
        interrupt: bool = True,
    ) -> Outcome:
        """:meth:`run`, for a caller that also has messages to take while it waits.

        Anything put on ``inbox`` (other than the task, which the pool puts there when
        it ends) wakes the caller, who then calls ``serve()`` in its own thread;
        ``serve`` returns when it wants to be called again (a time on
        :func:`~nous_tools._util._clock.monotonic`'s clock) or None. Deadlines, the
        enclosing scope and an interruption of the caller work as in :meth:`run`.
        A caller with nothing to take uses :meth:`run`, which waits on one lock.
        """
        started = self.submit(
            fn, args, kwargs, deadline, inbox, cancelled=cancelled, interrupt=interrupt
        )
        if type(started) is tuple:
            return started
        task = t.cast(_Task, started)
        deadline = t.cast(float, task.deadline)  # the enclosing scope's, if earlier
        again: float | None = None
        try:
            while True:
                now = _Clock.monotonic()
                wait = deadline - now
                if again is not None and again - now < wait:
                    wait = again - now
                try:
                    item = inbox.get(True, min(wait, _WAIT_MAX)) if wait > 0.0 else None
                except queue.Empty:
                    item = None
                if item is task:
                    outcome = self.outcome(task)
                    break
                if item is None and _Clock.monotonic() >= deadline:
                    outcome = self.expire(task)
                    break
                again = serve()
        except BaseException:
            self._abandon(task, TIMED_OUT)
            raise
        finally:
            self.forget(task)
        return outcome

    def submit(
        self,
        fn: t.Callable[..., t.Any],
        args: tuple[t.Any, ...],
        kwargs: dict[str, t.Any],
        deadline: float,
        notify: queue.SimpleQueue[t.Any],
        *,
        cancelled: threading.Event | None = None,
        interrupt: bool = True,
    ) -> _Task | Outcome:
        """Start ``fn(*args, **kwargs)`` as :meth:`run` does, without waiting: for a
        caller that waits for several tasks at once (a batch's).

        Returns the task, or the outcome at once when it cannot start (shut down,
        saturated, the enclosing deadline passed or the scope cancelled). The task
        belongs to the scope this thread works in (``here.scope``), so cancelling that
        scope abandons it. ``notify`` gets the task as soon as it ends — finished, or
        abandoned by whoever abandons it — and the caller then takes its outcome with
        :meth:`outcome`; at the task's ``deadline`` (if it has not ended by then) the
        caller calls :meth:`expire`. A caller interrupted in between cancels its scope.
        """
        if self._shutdown or self._abandoned >= self.max_abandoned:
            return self._refusal()
        parent = here.scope
        if parent is not None:
            limit = parent.deadline
            if limit is not None and limit < deadline:
                deadline = limit
            if deadline <= _Clock.monotonic():
                return self._expired()
        task = _Task(fn, args, kwargs, deadline, cancelled, interrupt, self)
        task.notify = notify
        try:
            if parent is not None:
                if not parent.adopt(task):
                    parent.release(task)
                    return (TIMED_OUT, None, None)  # the enclosing scope was cancelled
                self._enqueue(task, here.nested)
            else:
                self._enqueue(task, False)
        except BaseException:
            self._abandon(task, TIMED_OUT)
            raise
        return task

    @staticmethod
    def outcome(task: _Task) -> Outcome:
        """The outcome of a submitted task that has ended (its ``notify`` said so)."""
        task.done.acquire()
        return task.result

    def expire(self, task: _Task) -> Outcome:
        """A submitted task whose deadline has passed: abandoned as :meth:`run` would
        at the deadline, unless it finished meanwhile (then its outcome)."""
        if self._abandon(task, TIMED_OUT):
            return (TIMED_OUT, None, None)
        task.done.acquire()  # it finished as the deadline passed: its worker is handing over
        return task.result

    def forget(self, task: _Task) -> None:
        """Drop a submitted task that has ended from its enclosing scope's books."""
        parent = here.scope
        if parent is not None:
            parent.release(task)

    def _enqueue(self, task: _Task, nested: bool) -> None:
        """Hand ``task`` to the workers: a nested call gets a worker of its own (it
        never waits for capacity); any other waits in the queue, and a worker is
        started when the queue holds more tasks than there are idle workers."""
        if nested:
            self._spawn(task)
            return
        tasks = self._queue
        tasks.put(task)
        idle = self._idle
        try:
            worker = idle[-1]  # the one idle last: its thread is warm
        except IndexError:
            if self._healthy < self.max_workers and tasks.qsize() > len(idle):
                self._spawn(None)
        else:
            if worker.asleep:  # (awake: it is looking at the queue, or was rung already)
                _ring(worker)  # it takes itself off the idle stack, then a queued task
        if self._shutdown:
            # Shut down meanwhile: the task may sit behind the workers' last look at
            # the queue, so drop it -- unless a worker has taken it already (then it
            # runs, this caller waits for it, and shutdown(wait=True) waits too).
            self._abandon(task, SHUT_DOWN)

    def _refusal(self) -> Outcome:
        """Why a call cannot start now: the pool is shut down, or saturated."""
        if self._shutdown:
            return (SHUT_DOWN, None, None)
        with self._lock:
            self._saturated += 1
        return (SATURATED, (self._abandoned, self.max_abandoned), None)

    def _expired(self) -> Outcome:
        """A call whose enclosing deadline passed before it could start."""
        with self._lock:
            self._timed_out += 1
        return (TIMED_OUT, None, None)

    def _abandon(self, task: _Task, kind: str) -> bool:
        """Decide ``task``'s outcome as ``kind`` unless it has finished; True when
        this call decided it. Idempotent: a second call returns False.

        ``SHUT_DOWN`` means "never started": it is decided only by the party that
        wins ``start`` (so it is never said of a task a worker has taken, which runs
        to its end); any other kind abandons the task whether it runs or not.

        Whoever claims ``finish`` releases ``done``, exactly once: the worker that
        ran the task, or the party that abandoned or dropped it — here in a
        ``finally``, so a Ctrl-C landing anywhere after the claim still wakes the
        task's waiter.
        """
        claims = task.claims
        mine = object()
        try:
            started = claims.setdefault("start", mine) is not mine  # False: never ran
            if started and kind == SHUT_DOWN:
                return False  # a worker took it first: it runs, and is waited for
            with self._lock:
                if claims.setdefault("finish", mine) is not mine:
                    return False  # it finished, or another party decided it
                task.cancelled = True
                task.result = (kind, None, None)
                if kind == TIMED_OUT:
                    self._timed_out += 1
                worker = task.worker
                if started and worker is not None:
                    self._count_abandoned(task)
                    if task.interrupt and not self._send_cancel(worker):
                        self._resend(worker)
                if task.event is not None:
                    task.event.set()
        finally:
            if claims.get("finish") is mine:
                task.done.release()
                if task.notify is not None:
                    task.notify.put(task)
        if not started:
            return True
        children = task.children
        if children:
            for child in list(children):
                self.cancel(child, kind)
        if self._shutdown:
            if not self._healthy:
                self._orphaned()  # its worker was the last healthy one
        elif self._queue.qsize() > len(self._idle) and self._healthy < self.max_workers:
            self._try_spawn()  # queued calls take the retired worker's place
        return True

    def _orphaned(self) -> None:
        """Shut down with no healthy worker left: nobody will ever take what is still
        queued, so each queued task is answered "not started" (``SHUT_DOWN``) now,
        not at its deadline. (Once shut down no worker enlists, so "no healthy
        worker" stays true; a task a worker took is not in the queue.)"""
        tasks = self._queue
        while True:
            try:
                task = tasks.get_nowait()
            except queue.Empty:
                return
            if task is not None:  # (None: a shutdown marker nobody needs now)
                self._abandon(task, SHUT_DOWN)

    def _send_cancel(self, worker: _Worker) -> bool:
        """Raise ``ToolCancelled`` in ``worker`` (with the lock); False when it must
        be tried again a moment later.

        CPython (before 3.12) gives a thread that is being started the id of the
        thread starting it until it runs, so a cancellation sent to a worker that
        is starting a thread at that moment would also reach the newborn. So none
        is sent while a thread is being started (``threading._limbo``), and one
        that reached two threads is withdrawn and sent again later. A worker that
        is gone is never sent anything: its id may belong to another thread now.
        """
        if worker.gone:
            return True
        with worker.lock:
            worker.cancelled = True
            if worker.shield:
                return True  # in the library's own code: raised when it leaves it
            if threading._limbo:  # type: ignore[attr-defined]
                return False
            if _set_async_exc(worker.ident, ToolCancelled) > 1:
                _clear_async_exc(worker.ident, None)
                return False
            _install_quiet_unraisable_hook()
            return True

    def _resend(self, worker: _Worker) -> None:
        """Have the cancellation of ``worker`` sent again shortly, off the caller's path
        (with the lock)."""
        resends = self._resends
        if resends is None:
            resends = self._resends = queue.SimpleQueue()
            threading.Thread(
                target=self._resender, args=(resends,), name=f"{self._name}-cancel", daemon=True
            ).start()
        resends.put(worker)

    def _resender(self, resends: queue.SimpleQueue[_Worker]) -> None:
        """Retry withheld cancellations; leave when there has been none for a while."""
        while True:
            try:
                worker = resends.get(timeout=1.0)
            except queue.Empty:
                with self._lock:
                    if resends.empty():
                        self._resends = None
                        return
                continue
            for _ in range(2000):  # about a second at most
                time.sleep(0.0005)
                with self._lock:
                    if self._send_cancel(worker):
                        break

    def _count_abandoned(self, task: _Task) -> None:
        """Count ``task``'s worker as abandoned, once (with the lock). Plain stores
        only, so an exception cannot land halfway."""
        if task.accounted:
            return
        worker = task.worker
        if worker is None:
            return
        task.accounted = True
        worker.abandoned = True
        self._abandoned += 1
        if worker.healthy:
            worker.healthy = False
            self._healthy -= 1

    def cancel(self, scope: Scope, kind: str = TIMED_OUT) -> None:
        """Cancel ``scope`` and everything under it: a task is abandoned as at its
        deadline; any other scope is marked cancelled (no new child starts)."""
        if type(scope) is _Task:
            scope.pool._abandon(scope, kind)  # with its own pool's books
            return
        stop = scope.stop
        if stop is not None:  # a process call: stopped by its own pool
            stop(kind)
            return
        scope.cancelled = True
        if scope.event is not None:
            scope.event.set()
        children = scope.children
        if children:
            for child in list(children):
                self.cancel(child, kind)

    # -- workers -----------------------------------------------------------------

    def _spawn(self, first: _Task | None) -> None:
        worker = _Worker()
        thread = threading.Thread(
            target=self._work,
            args=(worker, first),
            name=f"{self._name}-{next(self._counter)}",
            daemon=True,
        )
        worker.thread = thread
        thread.start()

    def _try_spawn(self) -> None:
        """Start a worker where one more would help; if the system refuses a thread,
        the next call tries again (the calls already queued wait as at capacity)."""
        with contextlib.suppress(Exception):
            self._spawn(None)

    def _next(self, me: _Worker) -> _Task | None:
        """The next queued task for worker ``me``, sleeping while there is none
        (None: shut down). An idle worker stands on the idle stack, where a caller
        that queues a task rings the bell of the one on top; only the worker itself
        ever takes itself off the stack, so no interruption of a caller can leave a
        worker asleep and forgotten."""
        tasks = self._queue
        idle = self._idle
        while True:
            try:
                return tasks.get_nowait()
            except queue.Empty:
                pass
            idle.append(me)
            # Asleep before looking again: a task queued after this look finds the
            # flag set and rings the bell; one queued before it is seen here.
            me.asleep = True
            if tasks.qsize():
                me.asleep = False
            else:
                _sleep(me)
                me.asleep = False
            idle.remove(me)

    def _work(self, me: _Worker, task: _Task | None) -> None:
        """A worker's life. Nothing is ever sent to it before it runs a task, so it
        registers itself safely; ``first`` is a nested call's task, run at once."""
        me.ident = threading.get_ident()
        here.nested = True
        here.worker = me
        with self._lock:
            if self._shutdown or (task is None and self._healthy >= self.max_workers):
                enlisted = False
            else:
                enlisted = True
                me.healthy = True
                self._healthy += 1
                self._workers.add(me)
        if not enlisted:
            if task is not None:
                self._abandon(task, SHUT_DOWN)
            if self._shutdown and not self._healthy:
                self._orphaned()  # it was to take what a caller queued just before shutdown
            return
        if self._on_start is not None:
            self._hook(self._on_start, "on_worker_start")
        after_task = self._after_task
        ran = False  # a task ran whose after_task hook has not
        tasks = self._queue
        idle = self._idle
        lost = False
        result: Outcome = (RETURNED, None, None)
        try:
            while True:
                if task is None:
                    if self._healthy > self.max_workers:  # an overflow worker: leave
                        with self._lock:
                            if self._healthy > self.max_workers:
                                break
                    task = self._next(me)
                    if task is None:
                        break  # shutdown
                    if tasks.qsize() and not self._shutdown:
                        try:  # more waiting: wake another idle worker, or start one
                            other = idle[-1]
                        except IndexError:
                            if self._healthy < self.max_workers:
                                self._try_spawn()
                        else:
                            if other.asleep:
                                _ring(other)
                if task.claims.setdefault("start", me) is not me:
                    task = None  # dropped while queued
                else:
                    # (No ``continue`` above: in CPython 3.11 an exception raised at
                    # such a jump can skip this try statement, gh-107901.)
                    task.worker = me  # only the worker that won it: it may be sent a cancel
                    here.scope = task
                    ran = True
                    try:
                        result = (
                            RETURNED,
                            task.context.run(task.fn, *task.args, **task.kwargs),
                            None,
                        )
                    except BaseException as exc:  # the callable's, handed to the caller
                        result = (RAISED, exc, safe_str(exc))  # rendered inside the deadline
                    here.scope = None
                    task.fn = task.args = task.kwargs = task.context = None  # type: ignore[assignment]
                    if task.claims.setdefault("finish", me) is not me:
                        lost = True  # abandoned at its deadline: retire, never reused
                        break
                    task.result = result
                    task.done.release()
                    if task.notify is not None:
                        task.notify.put(task)
                    me.completed += 1
                    task = None
                    if after_task is not None:  # it won ``finish``: no cancellation is due
                        self._hook(after_task, "after_task")
                    ran = False
        except ToolCancelled:
            # The cancellation sent because its task was abandoned. (Should one ever
            # arrive after it won its task, the caller still gets the result.)
            if task is not None and task.claims.get("finish") is me and task.done.locked():
                task.result = result
                with contextlib.suppress(RuntimeError):
                    task.done.release()
                    if task.notify is not None:
                        task.notify.put(task)
                lost = False
            else:
                lost = True
        here.scope = None
        # Leave: clear a cancellation sent and not yet delivered, then settle the books.
        while True:
            try:
                with self._lock:
                    _clear_async_exc(me.ident, None)
                    if lost and task is not None:
                        self._count_abandoned(task)  # if its abandoner could not
                    if not me.gone:
                        me.gone = True
                        if me.healthy:
                            me.healthy = False
                            self._healthy -= 1
                        if me.abandoned:
                            self._abandoned -= 1
                        self._completed += me.completed
                        self._workers.discard(me)
                        if me.fd >= 0:
                            _spare_fds.append(me.fd)  # to the next worker; never closed
                break
            except ToolCancelled:
                continue
        if self._shutdown and not self._healthy:
            self._orphaned()  # the last healthy worker: nobody else will take the queue
        # Gone: nothing is sent to this thread any more, so the hooks run undisturbed.
        if ran and after_task is not None:
            self._hook(after_task, "after_task")
        if self._on_exit is not None:
            self._hook(self._on_exit, "on_worker_exit")

    @staticmethod
    def _hook(hook: Hook, name: str) -> None:
        """Call a lifecycle hook; what it raises is logged and dropped."""
        try:
            hook()
        except BaseException:
            with contextlib.suppress(BaseException):
                _log.exception("nous_tools: the worker hook %s (%r) raised; ignored", name, hook)

    # -- lanes -------------------------------------------------------------------

    def start_lane(
        self,
        fn: t.Callable[[], None],
        scope: Scope,
        *,
        context: contextvars.Context | None = None,
    ) -> None:
        """Run ``fn()`` in a lane: a daemon thread that coordinates calls (a batch's),
        in ``context`` (default: a copy of the caller's), working in ``scope``, nested
        when the caller is. Lanes are reused; they are not workers and take no
        capacity."""
        job = (
            context if context is not None else contextvars.copy_context(),
            fn,
            scope,
            here.nested,
        )
        if len(self._idle_lanes) > self._lanes.qsize():
            self._lanes.put(job)
            return
        threading.Thread(
            target=self._lane,
            args=(job,),
            name=f"{self._name}-lane-{next(self._counter)}",
            daemon=True,
        ).start()

    def _lane(self, job: tuple[t.Any, ...] | None) -> None:
        if self._on_start is not None:  # a lane runs inline tools: the hooks apply
            self._hook(self._on_start, "on_worker_start")
        while job is not None:
            context, fn, scope, nested = job
            here.scope, here.nested = scope, nested
            with contextlib.suppress(BaseException):  # fn keeps its own errors
                context.run(fn)
            here.scope, here.nested = None, False
            if self._after_task is not None:
                self._hook(self._after_task, "after_task")
            job = None
            if self._shutdown:
                break
            self._idle_lanes.append(None)
            try:
                job = self._lanes.get(timeout=_LANE_IDLE_SECONDS)
            except queue.Empty:
                pass
            finally:
                self._idle_lanes.pop()
        if self._on_exit is not None:
            self._hook(self._on_exit, "on_worker_exit")

    # -- state -------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Counts of workers and calls: a snapshot taken under the pool's lock."""
        with self._lock:
            healthy = self._healthy
            idle = min(len(self._idle), healthy)
            completed = self._completed + sum(w.completed for w in self._workers)
            return {
                "workers": healthy,
                "idle": idle,
                "busy": healthy - idle,
                "running": healthy - idle,
                "abandoned": self._abandoned,
                "pending": self._queue.qsize(),
                "completed": completed,
                "timed_out": self._timed_out,
                "saturated": self._saturated,
                "max_workers": self.max_workers,
                "max_abandoned": self.max_abandoned,
            }

    @property
    def is_shutdown(self) -> bool:
        return self._shutdown

    def shutdown(self, wait: bool = True) -> None:
        """Stop accepting work; idle workers exit. With ``wait``, wait for healthy
        running work and for those workers' exit (their ``on_worker_exit`` hook);
        abandoned workers are never waited for. Idempotent."""
        with self._lock:
            self._shutdown = True
            workers = [w for w in self._workers if w.healthy]
            orphaned = not self._healthy
        if orphaned:
            self._orphaned()  # no worker left to take the queued calls
        for _ in workers:
            self._queue.put(None)
        for worker in list(self._idle):
            _ring(worker)  # it looks at the queue and finds its None
        for _ in range(len(self._idle_lanes)):
            self._lanes.put(None)
        if not wait:
            return
        me = threading.current_thread()
        for worker in workers:
            thread = worker.thread
            if thread is None or thread is me:
                continue
            while not worker.abandoned and thread.is_alive():
                thread.join(0.05)
