"""A timed call of the thread pool, and how it is abandoned (private).

A :class:`_Task` is one call: what to run, the claims its parties race for, how it
ended. :class:`_Abandoning` is the part of :class:`~nous_tools._engine._pool.WorkerPool`
that decides a task's end at its deadline (or at a cancellation, or a shutdown):
it counts the worker abandoned, sends it ``ToolCancelled`` and cancels what the
task started. The design is in :mod:`nous_tools._engine._pool`.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
import typing as t

from nous_tools._engine._outcome import SHUT_DOWN, TIMED_OUT, Outcome
from nous_tools._engine._pool_worker import (
    _allocate_lock,
    _clear_async_exc,
    _install_quiet_unraisable_hook,
    _set_async_exc,
    _Worker,
)
from nous_tools._util._scope import Scope
from nous_tools.errors import ToolCancelled

__all__: list[str] = []


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
        pool: _Abandoning,
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


class _Abandoning:
    """The part of :class:`~nous_tools._engine._pool.WorkerPool` that abandons
    tasks and cancels scopes (the pool's state is set by its ``__init__``)."""

    max_workers: int
    _name: str
    _lock: threading.Lock
    _queue: queue.SimpleQueue[_Task | None]
    _idle: list[_Worker]
    _healthy: int
    _abandoned: int
    _timed_out: int
    _shutdown: bool
    _resends: queue.SimpleQueue[_Worker] | None

    if t.TYPE_CHECKING:

        def _try_spawn(self) -> None: ...  # the pool's threads (_pool_threads)

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
            # No call before the release: CPython delivers an asynchronous exception
            # (Ctrl-C, ToolCancelled) only as a call returns, at a function's start or
            # a backward jump, so one landing here cannot skip it (a ``get`` could).
            if "finish" in claims and claims["finish"] is mine:
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
