"""How the process pool keeps its children (private).

:class:`_Keeper` is the part of :class:`~nous_tools._engine._process_pool.ProcessPool`
that lends an idle child to a call and takes it back (idle again, recycled, or
ended: killed at a deadline, or dead by itself), and its *keeper* thread, which
starts children (spares included) and reaps ended ones; with the ``atexit`` hook
that kills every child, and the forkserver's preload. The design is in
:mod:`nous_tools._engine._process_pool`.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import threading
import typing as t
import weakref

from nous_tools._engine import _isolation, _pipe
from nous_tools._engine._outcome import QUEUE_TIMED_OUT, SHUT_DOWN, TIMED_OUT
from nous_tools._engine._process_child import _GROUPS, _child_main
from nous_tools._engine._process_handle import _MAX_WAIT, _Child
from nous_tools._util._clock import monotonic
from nous_tools._util._log import log as _log
from nous_tools.errors import ChildProcessDied

if t.TYPE_CHECKING:
    from nous_tools._engine._fence import Confinement
    from nous_tools.tool import Tool

__all__: list[str] = []

_START_TIMEOUT = 60.0  # seconds a child may take to import and say it is ready
_EXIT_GRACE = 1.0  # seconds an ended or dying child gets to exit before its group is killed
_SETTLE = 0.05  # seconds background work waits for running attempts to finish

_pools: weakref.WeakSet[_Keeper] = weakref.WeakSet()
_hook_lock = threading.Lock()
_hooked = False


def _kill_all_at_exit() -> None:
    for pool in list(_pools):
        pool._kill_everything()


class _Keeper:
    """The part of :class:`~nous_tools._engine._process_pool.ProcessPool` that
    keeps its children (the pool's state is set by its ``__init__``)."""

    max_workers: int
    max_tasks_per_child: int | None
    _name: str
    _lock: threading.Lock
    _free: threading.Condition
    _work: threading.Condition
    _children: set[_Child]
    _idle: list[_Child]
    _busy: set[_Child]
    _ending: list[_Child]
    _starting: int
    _waiting: int
    _fresh: int
    _start_error: str | None
    _failures: int
    _counts: dict[str, int]
    _keeper: threading.Thread | None
    _settling: bool
    _shutdown: bool
    _exiting: bool
    _numbers: itertools.count[int]
    _mp: t.Any
    _confinement: Confinement | None

    # -- lending children to calls, taking them back --------------------------------

    def _expired(self) -> tuple[str, t.Any]:
        """An attempt whose deadline passed before it could be handed to a child."""
        with self._lock:
            self._counts["timed_out"] += 1
        return TIMED_OUT, None

    def _take(
        self, deadline: float, queue_until: float | None = None, queue_timeout: float | None = None
    ) -> _Child | tuple[str, t.Any]:
        """An idle child, marked busy; or the ``(kind, value)`` that prevents it: the
        wait ends at ``queue_until`` (:data:`QUEUE_TIMED_OUT`) or at ``deadline``
        (``TIMED_OUT``), whichever comes first."""
        queued = queue_until is not None and queue_until < deadline
        until = t.cast(float, queue_until) if queued else deadline
        with self._lock:
            if self._keeper is None and not self._shutdown:
                self._start_keeper()
            failures = self._failures
            while True:
                if self._shutdown:
                    return SHUT_DOWN, None
                remaining = until - monotonic()
                if remaining <= 0:  # never hand a child an attempt that is already over
                    if queued:
                        self._counts["not_started"] += 1
                        return QUEUE_TIMED_OUT, (queue_timeout, self.max_workers)
                    self._counts["timed_out"] += 1
                    return TIMED_OUT, None
                child = self._pop_idle()
                if child is not None:
                    return child
                if self._failures != failures:
                    return (
                        _isolation.UNPICKLABLE,
                        f"no child process could be started: {self._start_error}",
                    )
                self._waiting += 1
                self._fresh += 1
                self._work.notify()
                try:
                    self._free.wait(min(remaining, _MAX_WAIT))
                finally:
                    self._waiting -= 1
                    if self._failures == failures:
                        self._fresh -= 1

    def _pop_idle(self) -> _Child | None:  # with the lock
        """An idle child, marked busy, or None (none, or ``max_workers`` busy)."""
        while self._idle and len(self._busy) < self.max_workers:
            child = self._idle.pop()
            if child.conn.poll():  # it died, or wrote out of turn, while idle
                child.unread = True  # the keeper reads which, and counts it
                self._ending.append(child)
                self._work.notify()
                continue
            self._busy.add(child)
            if not self._idle:
                self._work.notify()  # time for a new spare
            return child
        return None

    def _release(
        self, child: _Child, stray: bool = False, *, counted: bool = True, retire: bool = False
    ) -> None:
        """An attempt ended with a reply: the child goes idle, or is recycled
        (``retire``: it must not serve again), or (``stray``: it wrote out of turn)
        replaced. ``counted=False``: the child was taken and given back unused."""
        with self._lock:
            self._put_back(child, stray, counted, retire)

    def _put_back(
        self, child: _Child, stray: bool, counted: bool, retire: bool = False
    ) -> None:  # with the lock
        self._busy.discard(child)
        if counted:
            self._counts["completed"] += 1
            child.tasks += 1
        limit = self.max_tasks_per_child
        if retire or stray or self._shutdown or (limit is not None and child.tasks >= limit):
            if stray:
                self._counts["strays"] += 1
            elif not self._shutdown:
                self._counts["recycled"] += 1
            self._ending.append(child)
            self._work.notify()
        else:
            self._idle.append(child)
            self._free.notify()
        if self._settling and not self._busy:
            self._work.notify()

    def _end(self, child: _Child, why: str) -> None:
        """Take a busy child out of service for the keeper to reap: ``"timed_out"``
        and ``"interrupted"`` kill its group first (then count it killed), ``"died"``
        counts a child that ended by itself."""
        if why != "died":
            child.kill()  # first: the kill is at the deadline, the bookkeeping after
        with self._lock:
            self._busy.discard(child)
            if why == "died":
                self._counts["died"] += 1
            else:
                self._counts["killed"] += 1
                if why == "timed_out":
                    self._counts["timed_out"] += 1
            self._ending.append(child)
            self._work.notify()
            self._free.notify()

    def _died(self, child: _Child, tool: Tool) -> ChildProcessDied:
        """The child closed its pipe without a reply: wait briefly for its exit,
        kill what is left of its group, and describe how it ended."""
        exited = child.wait_exit(_EXIT_GRACE)
        child.kill()  # what is left of its group (and the child, if it lives on)
        child.process.join(_EXIT_GRACE)
        how = child.describe_exit()
        message = f"the child process (pid {child.pid}) running tool '{tool.name}' {how}"
        if exited:
            message += " before it answered"
        self._end(child, "died")
        return ChildProcessDied(message, pid=child.pid, exitcode=child.process.exitcode)

    # -- the keeper: starts spares, reaps ended children -------------------------

    def _start_keeper(self) -> None:  # with the lock
        global _hooked
        import multiprocessing
        import multiprocessing.util  # its atexit hook must run after ours

        with _hook_lock:
            if not _hooked:
                atexit.register(_kill_all_at_exit)  # registered later, so it runs first
                # ... unless a library registers multiprocessing's hook again later (a
                # Celery worker does): that hook joins every live child, so it must
                # find ours gone. Its own finalizers run before it joins anyone.
                multiprocessing.util.Finalize(None, _kill_all_at_exit, exitpriority=100)
                _hooked = True
        _pools.add(self)
        if "forkserver" in multiprocessing.get_all_start_methods():
            self._mp = multiprocessing.get_context("forkserver")
            _preload_in_forkserver(self._mp)
        else:
            self._mp = multiprocessing.get_context("spawn")
        keeper = threading.Thread(target=self._keep, name=f"{self._name}-keeper", daemon=True)
        keeper.start()
        self._keeper = keeper

    def _needs_child(self, urgent: bool = False) -> bool:  # with the lock
        """Whether to start a child: one a waiting caller needs (``urgent``), or
        that and a spare."""
        if self._shutdown:
            return False
        live = len(self._idle) + len(self._busy) + self._starting
        want = min(len(self._busy) + self._fresh, self.max_workers)
        if not urgent and self._start_error is None:
            want += 1  # the spare
        return live < want

    def _done(self) -> bool:  # with the lock
        return (
            self._shutdown
            and not self._busy
            and not self._ending
            and not self._idle
            and not self._starting
        )

    def _keep(self) -> None:
        """Start the children callers wait for at once; do the rest (spares,
        reaping) when no attempt runs, or after ``_SETTLE`` seconds: a start-up
        or a reap beside a running attempt slows it down on a small machine."""
        while True:
            with self._lock:
                settle_until: float | None = None
                while not self._done() and not self._needs_child(urgent=True):
                    if not (self._ending or self._needs_child()):
                        settle_until = None
                        self._work.wait()
                        continue
                    if not self._busy:
                        break
                    now = monotonic()
                    if settle_until is None:
                        settle_until = now + _SETTLE
                    elif now >= settle_until:
                        break
                    self._settling = True
                    self._work.wait(settle_until - now)
                self._settling = False
                if self._done():
                    if self._confinement is not None:
                        self._confinement.remove()
                    return
                ending, self._ending = self._ending, []
                start = self._needs_child()
                if start:
                    self._starting += 1
            if start:
                self._start_one()
            for child in ending:
                try:
                    self._reap(child)
                except Exception:  # never lose the keeper: it starts every child
                    _log.exception("nous_tools: could not reap child process %s", child.pid)
                    with self._lock:
                        self._children.discard(child)

    def _start_one(self) -> None:
        child: _Child | None = None
        error = ""
        try:
            child = self._spawn()
        except Exception as exc:
            error = str(exc) if isinstance(exc, _StartFailed) else _isolation._describe(exc)
            _log.error("nous_tools: could not start a child process: %s", error)
        with self._lock:
            self._starting -= 1
            if child is not None:
                self._counts["started"] += 1
                self._start_error = None
                if self._shutdown:
                    self._ending.append(child)
                else:
                    # At the bottom: calls take the most recently used child, so a
                    # warm child serves consecutive calls and the spare stays spare.
                    self._idle.insert(0, child)
                    self._free.notify()
            else:
                self._start_error = error
                self._failures += 1
                self._fresh = 0
                self._counts["start_failures"] += 1
                self._free.notify_all()

    def _spawn(self) -> _Child:
        child = self._launch()
        with self._lock:
            exiting = self._exiting
        if exiting:
            child.kill()
            raise _StartFailed("the interpreter is exiting")
        readable, _ = child.wait(_START_TIMEOUT)
        try:
            answer = child.conn.recv_bytes() if readable else None
        except (EOFError, OSError):
            answer = None
        ready = _pipe.unframe(answer) if answer is not None else None
        if answer is None:
            exited = self._end_unstarted(child, _EXIT_GRACE if readable else 0)
            if not readable and not exited:
                raise _StartFailed(f"the child process was not ready after {_START_TIMEOUT:g} s")
            raise _StartFailed(
                f"the child process {child.describe_exit()} while starting (a script that "
                'uses isolation="process" must guard its top-level code with '
                '`if __name__ == "__main__":`; see the child\'s traceback above)'
            )
        if ready is not None and ready[1] == _pipe.READY and bytes(ready[2][:1]) == b"!":
            self._end_unstarted(child, _EXIT_GRACE)
            why = bytes(ready[2][1:]).decode(errors="replace")
            raise _StartFailed(f"the child process could not enter its sandbox: {why}")
        child.group = (
            _GROUPS
            and ready is not None
            and ready[:2] == (0, _pipe.READY)
            and ready[2] == str(child.process.pid).encode()
        )
        return child

    def _launch(self) -> _Child:
        """Start a child process (known to the keeper from before its start, so the
        exit hook can kill it), not yet ready: its pipe's end is ``child.conn``."""
        mp = self._mp
        parent_end, child_end = mp.Pipe(duplex=True)
        process = mp.Process(
            target=_child_main,
            args=(child_end,) if self._confinement is None else (child_end, self._confinement),
            name=f"{self._name}-{next(self._numbers)}",
            daemon=False,  # a tool may start processes of its own; the exit hook kills us
        )
        child = _Child(process, parent_end)
        with self._lock:
            self._children.add(child)
        try:
            process.start()
        except BaseException:
            with self._lock:
                self._children.discard(child)
            parent_end.close()
            raise
        finally:
            child_end.close()
        child.started()
        return child

    def _end_unstarted(self, child: _Child, grace: float) -> bool:
        """End a child that did not start: give it ``grace`` seconds to exit, kill
        it, reap it, forget it. Whether it had exited by itself."""
        exited = child.wait_exit(grace)
        child.kill()
        child.process.join(_EXIT_GRACE)
        with self._lock:
            self._children.discard(child)
        child.conn.close()
        return exited

    def _reap(self, child: _Child) -> None:
        """End a child taken out of service: close its pipe (an idle child exits by
        itself), kill its group once it has exited (or if it has not), reap it."""
        if child.unread:
            self._read_unread(child)
        with contextlib.suppress(OSError):
            child.conn.close()
        child.wait_exit(_EXIT_GRACE)
        child.kill()  # leftovers in its group, or the child itself if it is stuck
        child.process.join(_EXIT_GRACE * 5)
        if child.process.exitcode is None:
            _log.warning("nous_tools: child process %s did not exit after SIGKILL", child.pid)
        else:
            child.process.close()
        if self._confinement is not None and child.pid is not None:
            self._confinement.release(child.pid)
        with self._lock:
            self._children.discard(child)

    def _read_unread(self, child: _Child) -> None:
        """A child found readable while idle: it died (its pipe's end), or it wrote
        out of turn (a message). Read which, without waiting, and count it."""
        conn = child.conn
        message: bytes | None = None
        try:
            os.set_blocking(conn.fileno(), False)  # a message cut short must not block us
            message = conn.recv_bytes()
        except EOFError:
            with self._lock:
                self._counts["died"] += 1
            return
        except OSError:  # a message cut short
            pass
        with self._lock:
            self._counts["strays"] += 1
        _log.warning(
            "nous_tools: child process %s wrote to its pipe out of turn (%s, while it was "
            "idle); discarded, and the child is replaced",
            child.pid,
            _pipe.describe(message),
        )

    def _kill_everything(self) -> None:
        """At interpreter exit: kill every child at once, running or not."""
        with self._lock:
            self._shutdown = True
            self._exiting = True
            children = list(self._children)
            self._work.notify_all()
            self._free.notify_all()
        for child in children:
            if child.pid is not None:
                child.kill()


class _StartFailed(Exception):
    """A child that could not be started; the message says why."""


def _preload_in_forkserver(context: t.Any) -> None:
    """Have the forkserver import the child's module (``_process_child``) before it
    forks children, so a child does not import ``nous_tools`` itself. Only before
    the server starts, and keeping whatever preload list is already set (private
    attributes, read defensively: if they are not there, children import on their
    own)."""
    try:
        from multiprocessing import forkserver

        server = getattr(forkserver, "_forkserver", None)
        if server is None or getattr(server, "_forkserver_pid", 0) is not None:
            return
        preload = list(getattr(server, "_preload_modules", ["__main__"]))
        module = _child_main.__module__
        if module not in preload:
            context.set_forkserver_preload([*preload, module])
    except Exception:
        pass
