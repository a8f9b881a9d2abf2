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

The parts: :class:`WorkerPool` (here) takes calls and waits for them;
``_pool_task`` holds a task and its abandonment, ``_pool_threads`` the workers'
and lanes' lives, ``_pool_worker`` a worker's record, bell and shield, and
``_outcome`` the kinds of outcome.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
import typing as t

from nous_tools._engine._outcome import (
    RAISED,
    RETURNED,
    SATURATED,
    SHUT_DOWN,
    TIMED_OUT,
    Outcome,
)
from nous_tools._engine._pool_task import _Task
from nous_tools._engine._pool_threads import Hook, _Threads
from nous_tools._engine._pool_worker import _ring, _Worker, shield, unshield
from nous_tools._util._clock import _Clock
from nous_tools._util._scope import here, in_worker

__all__ = [
    "RAISED",
    "RETURNED",
    "SATURATED",
    "SHUT_DOWN",
    "TIMED_OUT",
    "Hook",
    "Outcome",
    "WorkerPool",
    "in_worker",
    "shield",
    "unshield",
]

#: The longest wait a lock accepts; every deadline is checked against it at construction.
_WAIT_MAX = threading.TIMEOUT_MAX


#: The fewest workers a pool may grow to by default: a model's turn fans out to
#: dozens of I/O-bound calls (some of them hung until their deadline), and they
#: should not run in waves, even on a small machine.
DEFAULT_MIN_WORKERS = 32


def default_max_workers() -> int:
    """``max_workers`` when none is given: 32, or ``cpus + 4`` up to 64 on a machine
    with more CPUs (tools mostly wait on I/O). It is a bound, not a size: workers
    start only when calls need them, and an idle one is reused first."""
    return max(DEFAULT_MIN_WORKERS, min(64, (os.cpu_count() or 1) + 4))


class WorkerPool(_Threads):
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
