"""The thread pool's threads: the workers' life, and lanes (private).

:class:`_Threads` is the part of :class:`~nous_tools._engine._pool.WorkerPool`
that starts workers, hands them queued tasks, runs the tasks and settles each
worker's books when it leaves; and the lanes, threads that coordinate a batch's
calls. The design is in :mod:`nous_tools._engine._pool`.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import queue
import threading
import typing as t

from nous_tools._engine._outcome import RAISED, RETURNED, SHUT_DOWN, Outcome
from nous_tools._engine._pool_task import _Abandoning, _Task
from nous_tools._engine._pool_worker import (
    _ring,
    _sleep,
    _spare_fds,
    _Worker,
    withdraw_own,
)
from nous_tools._util._log import log as _log
from nous_tools._util._scope import Scope, here
from nous_tools._util._text import safe_str
from nous_tools.errors import ToolCancelled

__all__ = ["Hook"]

#: A worker lifecycle hook: called with no argument in the pool's thread.
Hook = t.Callable[[], object]

#: Seconds an idle lane thread waits for another batch before it exits.
_LANE_IDLE_SECONDS = 30.0

#: A worker's outcome between tasks (it keeps no caller's value alive while idle).
_NOTHING: Outcome = (RETURNED, None, None)


class _Threads(_Abandoning):
    """The part of :class:`~nous_tools._engine._pool.WorkerPool` that runs its
    threads (the pool's state is set by its ``__init__``)."""

    _workers: set[_Worker]
    _completed: int
    _counter: itertools.count[int]
    _lanes: queue.SimpleQueue[tuple[t.Any, ...] | None]
    _idle_lanes: list[None]
    _on_start: Hook | None
    _after_task: Hook | None
    _on_exit: Hook | None

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
        result: Outcome = _NOTHING
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
                    result = _NOTHING  # the caller's now: not kept alive while idle
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
                    if me.cancelled:  # (sent only with the lock held: none comes now)
                        withdraw_own(me)
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
