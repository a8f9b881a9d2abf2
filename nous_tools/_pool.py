"""Worker threads with hard deadlines (private).

The pool knows nothing of tools: it runs zero-argument callables, each in a
copy of the submitting thread's ``contextvars`` context, and reports what
happened. The executor turns that into ``Ok``/``Err`` and sends every signal
from the caller's thread.

Design, and why:

* **Per-worker hand-off.** Each worker owns a ``wake`` lock. A timed call takes
  an idle worker, hands it the task and releases ``wake``; the worker releases
  the task's ``done`` lock when it finishes, and the caller waits on ``done``
  with a timeout. No shared queue and no ``Future`` sit between them, so a
  round trip is two lock releases and two wake-ups, and the pool's one lock
  is taken twice (take a worker; finish and go idle).
* **Real time.** ``Lock.acquire(timeout=...)`` waits in C on the real monotonic
  clock, and the pool's own clock is captured at import, so deadlines hold
  inside ``freezegun.freeze_time`` (which replaces ``time.monotonic``).
* **What a deadline can stop.** CPython cannot kill a thread. At the deadline
  the caller returns, the task's ``cancelled`` event is set, and (when asked)
  ``ToolCancelled`` is raised asynchronously in the worker. That exception
  lands at the worker's next Python bytecode: it stops a tight Python loop, or
  code that returns from a blocking call into Python, but not a blocking C call
  (``time.sleep``, a socket read, a C extension) until that call returns.
* **Retired, never reused.** A worker whose task timed out is *abandoned*: it
  never takes another task, is not counted against ``max_workers`` and exits
  when its task ends. The one asynchronous exception sent to it is either
  delivered inside the task, caught by the worker's loop, or cleared before the
  worker exits, so it never lands in another task or in the pool's bookkeeping.
* **Never blocks exit.** Workers are daemon threads and the pool registers no
  ``atexit`` join, so a hung tool cannot keep a script alive.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextvars
import ctypes
import itertools
import os
import threading
import typing as t

from ._clock import monotonic
from .errors import ToolCancelled

__all__ = ["Outcome", "WorkerPool", "monotonic"]


class Outcome(t.NamedTuple):
    """What happened to a task: ``kind`` is one of the constants below."""

    kind: str
    value: t.Any = None


RETURNED = "returned"  # value: what the callable returned
RAISED = "raised"  # value: the exception it raised
TIMED_OUT = "timed_out"
SATURATED = "saturated"  # value: (abandoned, cap)
SHUT_DOWN = "shut_down"

_PENDING, _DONE, _ABANDONED = 0, 1, 2

# What a worker does after its task: run the next one it was given, wait idle
# to be handed one, exit (shutdown or overflow), or retire (the task timed out).
_NEXT, _IDLE, _EXIT, _RETIRE = "next", "idle", "exit", "retire"

# PyThreadState_SetAsyncExc(thread_id, exc) schedules ``exc`` in that thread;
# with exc=NULL it clears a scheduled exception that has not been delivered yet.
_set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
_clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)

_local = threading.local()


def in_worker() -> bool:
    """True in a pool worker thread (a nested call must not wait for capacity)."""
    return getattr(_local, "worker", False)


class _Task:
    """One call: what to run, and (for the caller) how it ended."""

    __slots__ = ("args", "context", "done", "fn", "future", "kind", "kwargs", "state", "value")

    def __init__(
        self,
        fn: t.Callable[..., t.Any],
        args: tuple[t.Any, ...],
        kwargs: dict[str, t.Any],
        future: concurrent.futures.Future[t.Any] | None = None,
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.context = contextvars.copy_context()
        self.future = future
        self.state = _PENDING  # guarded by the pool's lock
        self.kind = RETURNED
        self.value: t.Any = None
        self.done = threading.Lock()
        self.done.acquire()


class _Worker:
    __slots__ = ("abandoned", "counted", "pool", "task", "thread", "wake")

    def __init__(self, pool: WorkerPool, name: str) -> None:
        self.pool = pool
        self.task: _Task | None = None
        self.abandoned = False
        self.counted = True  # False while it runs an unbounded task (a batch lane)
        self.wake = threading.Lock()
        self.wake.acquire()
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def _loop(self) -> None:
        _local.worker = True
        pool = self.pool
        try:
            task = self.task
            while task is not None:
                self.task = None
                kind, value = RETURNED, None
                try:
                    try:
                        value = task.context.run(task.fn, *task.args, **task.kwargs)
                    except BaseException as exc:  # the callable's, handed to the caller
                        kind, value = RAISED, exc
                except ToolCancelled:  # landed in the handler above
                    kind, value = RAISED, None
                task.fn = task.args = task.kwargs = task.context = None  # type: ignore[assignment]
                after = pool._finish(self, task, kind, value)
                if after is _RETIRE:
                    return  # the task timed out
                if task.future is not None:
                    if kind == RETURNED:
                        task.future.set_result(value)
                    else:
                        task.future.set_exception(value)
                task.done.release()
                if after is _IDLE:
                    self.wake.acquire()  # until a caller hands over a task (None: exit)
                task = self.task
        except ToolCancelled:
            # Delivered after the callable ended: the task timed out and this
            # worker is retired. It was the one exception ever sent to it.
            return
        finally:
            if self.abandoned:
                pool._abandoned_exited()


class WorkerPool:
    """Daemon worker threads that run callables under real-time deadlines."""

    def __init__(
        self, max_workers: int | None = None, *, max_abandoned: int = 64, name: str = "nous-tools"
    ) -> None:
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"option 'max_workers' must be an int >= 1, got {max_workers!r}")
        if (
            isinstance(max_abandoned, bool)
            or not isinstance(max_abandoned, int)
            or max_abandoned < 0
        ):
            raise ValueError(f"option 'max_abandoned' must be an int >= 0, got {max_abandoned!r}")
        self.max_workers = max_workers
        self.max_abandoned = max_abandoned
        self._name = name
        self._lock = threading.Lock()
        self._capacity = threading.Condition(self._lock)
        self._waiting = 0  # callers waiting for capacity
        self._idle: list[_Worker] = []
        self._workers: set[_Worker] = set()  # healthy: idle or busy
        self._pending: collections.deque[_Task] = collections.deque()
        self._busy = 0
        self._abandoned = 0
        self._completed = 0
        self._timed_out = 0
        self._saturated = 0
        self._shutdown = False
        self._counter = itertools.count(1)

    # -- workers (called with or without the lock as noted) ----------------------

    def _new_worker(self) -> _Worker:  # with the lock
        worker = _Worker(self, f"{self._name}-{next(self._counter)}")
        self._workers.add(worker)
        return worker

    def _free_capacity(self) -> None:  # with the lock
        if self._waiting:
            self._capacity.notify()

    def _take(self, deadline: float | None) -> _Worker | Outcome:
        """An idle or new worker, marked busy; or the Outcome that prevents it."""
        with self._lock:
            while True:
                if self._shutdown:
                    return Outcome(SHUT_DOWN)
                if deadline is not None and self._abandoned >= self.max_abandoned:
                    self._saturated += 1
                    return Outcome(SATURATED, (self._abandoned, self.max_abandoned))
                if self._idle:
                    self._busy += 1
                    worker = self._idle.pop()
                    worker.counted = True
                    return worker
                if self._busy < self.max_workers or in_worker():
                    self._busy += 1
                    return self._new_worker()
                remaining = None if deadline is None else deadline - monotonic()
                if remaining is not None and remaining <= 0:
                    self._timed_out += 1
                    return Outcome(TIMED_OUT)
                self._waiting += 1
                try:
                    self._capacity.wait(remaining)
                finally:
                    self._waiting -= 1

    def _start(self, worker: _Worker, task: _Task) -> None:
        worker.task = task
        if worker.thread.ident is not None:
            worker.wake.release()
            return
        try:
            worker.thread.start()
        except BaseException:
            with self._lock:
                if worker.counted:
                    self._busy -= 1
                self._workers.discard(worker)
                self._free_capacity()
            raise

    def _finish(self, worker: _Worker, task: _Task, kind: str, value: t.Any) -> str:
        """A worker's task ended: record it and go idle (before the caller is told,
        so a caller's next call finds this worker idle); see ``_NEXT`` and co.

        The state check and the bookkeeping share one critical section, so once
        a task is ``_DONE`` no caller can abandon it and no asynchronous
        exception can be on its way to this worker.
        """
        while True:
            try:
                with self._lock:
                    if task.state == _ABANDONED:
                        # An exception may have been sent and not delivered yet.
                        _clear_async_exc(threading.get_ident(), None)
                        return _RETIRE
                    task.state = _DONE
                    task.kind, task.value = kind, value
                    self._completed += 1
                    if self._pending:
                        worker.task = self._pending.popleft()
                        if not worker.counted:
                            worker.counted = True
                            self._busy += 1
                        return _NEXT
                    if worker.counted:
                        self._busy -= 1
                    self._free_capacity()
                    if self._shutdown or len(self._workers) > self.max_workers:
                        self._workers.discard(worker)  # shutting down, or an overflow worker
                        worker.task = None
                        return _EXIT
                    self._idle.append(worker)
                    return _IDLE
            except ToolCancelled:
                continue  # landed before the state check: look again

    def _abandoned_exited(self) -> None:
        with self._lock:
            self._abandoned -= 1

    # -- running ---------------------------------------------------------------

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
        """Run ``fn(*args, **kwargs)`` in a worker, waiting until ``deadline``
        (on :func:`monotonic`'s clock).

        At the deadline the task is abandoned: ``cancelled`` is set, ``ToolCancelled``
        is raised in the worker when ``interrupt`` is true, and ``TIMED_OUT`` is
        returned at once. A ``KeyboardInterrupt`` (or any exception) raised in the
        caller while it waits abandons the task the same way, then propagates.
        """
        taken = self._take(deadline)
        if type(taken) is Outcome:
            return taken
        worker = t.cast(_Worker, taken)
        task = _Task(fn, args, kwargs)
        try:
            self._start(worker, task)
            finished = task.done.acquire(True, max(0.0, deadline - monotonic()))
        except BaseException:  # KeyboardInterrupt in the caller: cancel as at a deadline
            self._abandon(worker, task, cancelled, interrupt)
            raise
        if finished or not self._abandon(worker, task, cancelled, interrupt):
            return Outcome(task.kind, task.value)
        return Outcome(TIMED_OUT)

    def _abandon(
        self,
        worker: _Worker,
        task: _Task,
        cancelled: threading.Event | None,
        interrupt: bool,
    ) -> bool:
        """Mark a running task abandoned; False if it had already finished."""
        with self._lock:
            if task.state == _DONE:
                return False
            task.state = _ABANDONED
            ident = worker.thread.ident
            if ident is None:  # never started: nothing runs, nothing to count
                self._workers.discard(worker)
                if worker.counted:
                    self._busy -= 1
                self._free_capacity()
                return True
            worker.abandoned = True
            if cancelled is not None:
                cancelled.set()
            if interrupt:
                _set_async_exc(ident, ToolCancelled)
            if worker.counted:
                self._busy -= 1
            self._abandoned += 1
            self._timed_out += 1
            self._workers.discard(worker)
            self._free_capacity()
        return True

    def submit(
        self, fn: t.Callable[..., t.Any], /, *args: t.Any, **kwargs: t.Any
    ) -> concurrent.futures.Future[t.Any]:
        """Run ``fn(*args, **kwargs)`` without a deadline; a ``Future`` holds the result.

        Like ``ThreadPoolExecutor.submit``: at most ``max_workers`` run at once and
        the rest wait in order. Raises ``RuntimeError`` after :meth:`shutdown`.
        """
        return self._submit(fn, args, kwargs, bounded=True)

    def submit_unbounded(self, fn: t.Callable[[], t.Any]) -> concurrent.futures.Future[t.Any]:
        """Like :meth:`submit`, but never waits for capacity: for threads that only
        coordinate other calls (a batch's lanes), whose own attempts are bounded."""
        return self._submit(fn, (), {}, bounded=False)

    def _submit(
        self,
        fn: t.Callable[..., t.Any],
        args: tuple[t.Any, ...],
        kwargs: dict[str, t.Any],
        *,
        bounded: bool,
    ) -> concurrent.futures.Future[t.Any]:
        future: concurrent.futures.Future[t.Any] = concurrent.futures.Future()
        future.set_running_or_notify_cancel()
        task = _Task(fn, args, kwargs, future)
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit to a WorkerPool after shutdown")
            worker: _Worker | None = None
            if self._idle:
                worker = self._idle.pop()
            elif not bounded or self._busy < self.max_workers or in_worker():
                worker = self._new_worker()
            else:
                self._pending.append(task)
            if worker is not None:
                worker.counted = bounded
                if bounded:
                    self._busy += 1
        if worker is not None:
            self._start(worker, task)
        return future

    # -- state -----------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Counts of workers and calls: a snapshot taken under the pool's lock."""
        with self._lock:
            return {
                "workers": len(self._workers),
                "idle": len(self._idle),
                "busy": self._busy,
                "running": self._busy,
                "abandoned": self._abandoned,
                "pending": len(self._pending),
                "completed": self._completed,
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
        running work (abandoned workers are never waited for). Idempotent."""
        with self._lock:
            self._shutdown = True
            idle, self._idle = self._idle, []
            for worker in idle:
                self._workers.discard(worker)
            busy = [w for w in self._workers if w.thread.ident is not None]
            self._capacity.notify_all()
        for worker in idle:
            worker.task = None
            worker.wake.release()
        if wait:
            me = threading.current_thread()
            for worker in busy:
                if worker.thread is not me and not worker.abandoned:
                    worker.thread.join()
