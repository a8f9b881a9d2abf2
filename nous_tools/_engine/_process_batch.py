"""Submitted calls of the process pool: a batch's, run without a thread each (private).

A submitted call (``_process_session._Call``, a scope of the batch that submitted
it) goes to a *session*, whose owner (the batch's own thread) sends calls to
children and reads their replies (:mod:`nous_tools._engine._process_session`), or
else to *drivers*, threads of the pool, which take the calls in turn.
:class:`_Batches` is the part of :class:`~nous_tools._engine._process_pool.ProcessPool`
that takes submitted calls (:meth:`_Batches.submit`). The design is in
:mod:`nous_tools._engine._process_pool`.
"""

from __future__ import annotations

import collections
import collections.abc as c
import itertools
import threading
import typing as t

from nous_tools._engine import _isolation, _pipe
from nous_tools._engine._outcome import RAISED, SHUT_DOWN, TIMED_OUT
from nous_tools._engine._process_handle import _ENDED, _LATE, _Child, _wait_reply
from nous_tools._engine._process_keeper import _Keeper
from nous_tools._engine._process_session import _REPLY, _Call, _Sent, _Session, _unstarted
from nous_tools._util._clock import monotonic
from nous_tools._util._log import log as _log
from nous_tools._util._scope import here

if t.TYPE_CHECKING:
    from nous_tools.run_context import RunContext
    from nous_tools.tool import Tool

__all__: list[str] = []

_DRIVER_IDLE = 30.0  # seconds an idle driver waits for another submitted call


class _Batches(_Keeper):
    """The part of :class:`~nous_tools._engine._process_pool.ProcessPool` that
    runs submitted calls (the pool's state is set by its ``__init__``)."""

    _submitted: collections.deque[_Call]
    _queued: threading.Condition
    _drivers: int
    _sleeping: int
    _calls: itertools.count[int]

    # -- submitted calls: a batch's, run by drivers -------------------------------

    def submit(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any] | None,
        deadline: float,
        notify: c.Callable[[t.Any], object],
        *,
        budget: float,
        queue_timeout: float,
        session: _Session | None = None,
    ) -> _Call | tuple[str, t.Any, None]:
        """Start one attempt as :meth:`run` with ``budget`` and ``queue_timeout``
        would, without waiting: for a caller that waits for several calls at once
        (a batch's coordinator, which hands calls over without a thread of its own
        per call). A *driver* thread of the pool takes the call, waits for a child,
        sends it, waits for the reply or kills the child at the deadline, then
        calls ``notify(call)`` (once, whoever decides the call's end). The caller
        then takes the outcome, decoded in its own thread, with :meth:`outcome`; at
        ``call.deadline`` (the end of its wait for a child) it calls :meth:`expire`,
        which answers a call still waiting and returns None for one a driver has.

        Returns the call, or ``(kind, value, None)`` at once when it cannot start
        (shut down, unpicklable, the enclosing scope cancelled or past its
        deadline). The call belongs to the scope this thread works in
        (``here.scope``): cancelling that scope stops it (:meth:`_Call.stop`).
        Its events are not delivered: a caller who listens runs the call itself.

        With a ``session`` (:meth:`session`), the call goes straight to an idle child
        when there is one, or waits for one of the session's own children, and the
        caller reads the reply itself (:meth:`_Session.wait`): no driver between.
        """
        if self._shutdown:
            return SHUT_DOWN, None, None
        if budget <= 0 or deadline <= monotonic():
            return (*self._expired(), None)
        try:
            request = _isolation.encode_request(tool, arguments, ctx)
        except _isolation.Unpicklable as exc:
            return _isolation.UNPICKLABLE, str(exc), None
        queue_until = monotonic() + queue_timeout
        call = _Call(self, tool, next(self._calls), request, deadline, budget, queue_until)
        call.queue_timeout = queue_timeout
        call.notify = notify
        parent = here.scope
        if parent is not None and not parent.adopt(call):
            parent.release(call)
            return TIMED_OUT, None, None  # the enclosing scope was cancelled
        if session is not None and session.open and self._direct(session, call):
            return call
        if not self._redo(call):
            return SHUT_DOWN, None, None
        return call

    def _redo(self, call: _Call) -> bool:
        """Queue ``call`` for the drivers (starting one if none is free); False when
        the pool is shut down (the call is not queued)."""
        start = False
        with self._lock:
            if self._shutdown:
                return False
            call.waiting = True
            self._submitted.append(call)
            if self._sleeping:
                self._sleeping -= 1
                self._queued.notify()
            elif self._drivers < self.max_workers:
                self._drivers += 1
                start = True
        if start:
            self._start_driver(None)
        return True

    def _adopt(self, call: _Call, child: _Child, ends: float, stray: bool) -> None:
        """A driver of its own for ``call``, already sent to ``child``: it waits for
        the reply (a session's owner had to wait for something else)."""
        with self._lock:
            self._drivers += 1
        self._start_driver((call, child, ends, stray))

    def _adopt_ahead(self, sent: _Sent) -> None:
        """A driver of its own for a child that holds a call sent ahead (or has not
        said whether it took one): it serves that child's calls as the session would
        have (a session's owner had to wait for something else)."""
        with self._lock:
            self._drivers += 1
        try:
            threading.Thread(
                target=self._drive_ahead,
                args=(sent,),
                name=f"{self._name}-driver-{next(self._numbers)}",
                daemon=True,
            ).start()
        except BaseException:
            with self._lock:
                self._drivers -= 1
            sent.child.kill()
            for call in (sent.call, *sent.ahead):
                call.stop(_isolation.UNPICKLABLE, "no thread could be started to wait for it")
            self._end(sent.child, "interrupted")
            raise

    def _drive_ahead(self, sent: _Sent) -> None:
        """:meth:`_adopt_ahead`'s driver: a driven session for ``sent``'s child, then
        an ordinary driver's life."""
        session = _Session(self, driven=True)
        try:
            session._hold(sent)
            session.drive()
        except BaseException as exc:  # a bug of ours: the calls still end
            _log.exception("nous_tools: a process call's driver failed")
            why = f"its driver failed: {_isolation._describe(exc)}"
            for held in list(session.running.values()):
                for call in (held.call, *held.ahead):
                    call.stop(_isolation.UNPICKLABLE, why)
        self._drive(None)

    def _start_driver(self, sent: tuple[_Call, _Child, float, bool] | None) -> None:
        try:
            threading.Thread(
                target=self._drive,
                args=(sent,),
                name=f"{self._name}-driver-{next(self._numbers)}",
                daemon=True,
            ).start()
        except BaseException:
            with self._lock:
                self._drivers -= 1
                stranded = list(self._submitted) if self._drivers == 0 else []
            for call in stranded:  # no driver runs to take them: answer them here
                call.stop(_isolation.UNPICKLABLE, "no thread could be started to run it")
            if sent is not None:
                sent[0].stop(_isolation.UNPICKLABLE, "no thread could be started to wait for it")
            raise

    def session(self) -> _Session | None:
        """A session for one thread that waits for several submitted calls at once
        and for nothing else meanwhile (see :meth:`submit`); None where there is no
        ``poll(2)`` (drivers run the calls)."""
        try:
            return _Session(self)
        except (ImportError, AttributeError):
            return None

    def _direct(self, session: _Session, call: _Call) -> bool:
        """Hand ``call`` to ``session``: on an idle child at once, or in the
        session's queue for its own children; False when it has none (a driver
        waits for a child for the call instead)."""
        with self._lock:
            child = None if self._shutdown or self._waiting else self._pop_idle()
            if child is None:
                if not session.running or self._shutdown:
                    return False
                call.session = session
                session.queued.append(call)
                return True
            call.session = session
            call.waiting = False
            call.child = child
        session.send(call, child)
        return True

    def outcome(self, call: _Call) -> tuple[str, t.Any, None]:
        """The outcome of a submitted call that has ended, decoded in this thread."""
        kind, value = t.cast("tuple[str, t.Any]", call.ended)
        if kind is _REPLY:
            kind, value = _isolation.decode_reply(value)
        return kind, value, None

    def expire(self, call: _Call) -> tuple[str, t.Any, None] | None:
        """A submitted call at ``call.deadline``: if it still waits for a driver, it
        never started and is answered now (:data:`QUEUE_TIMED_OUT`, or ``TIMED_OUT``
        at the enclosing deadline); if it has ended, its outcome; None while a
        driver has it (the driver answers through ``notify``)."""
        with self._lock:
            if call.ended is None:
                if not call.waiting:
                    return None
                if call.session is not None:
                    call.session.queued.remove(call)
                else:
                    self._submitted.remove(call)
                call.waiting = False
                call.ended = _unstarted(self, call)
        return self.outcome(call)

    @staticmethod
    def forget(call: _Call) -> None:
        """Drop a submitted call that has ended from its enclosing scope's books."""
        parent = here.scope
        if parent is not None:
            parent.release(call)

    def _drive(self, sent: tuple[_Call, _Child, float, bool] | None = None) -> None:
        """A driver's life: take submitted calls in turn and run each in a child;
        wait ``_DRIVER_IDLE`` seconds for more, then leave. A child that answered
        goes on at once with the next submitted call, when one waits and no caller
        of :meth:`run` does (no hand-over between threads on the way). ``sent``: a
        call already sent to a child, to wait for first (see :meth:`_adopt`)."""
        call: _Call | None = None
        child: _Child | None = None  # the child kept for ``call``
        if sent is not None:
            call, child = sent[0], sent[1]
        while True:
            if call is None:
                with self._lock:
                    while not self._submitted:
                        if self._shutdown:
                            self._drivers -= 1
                            return
                        self._sleeping += 1
                        if not self._queued.wait(_DRIVER_IDLE):
                            self._sleeping -= 1  # (a notified driver was counted off already)
                            if not self._submitted:
                                self._drivers -= 1
                                return
                    call = self._submitted.popleft()
                    call.waiting = False
            current = call
            try:
                call, child = self._serve(current, child, sent)
                sent = None
            except BaseException as exc:  # a bug of ours: the call still ends
                _log.exception("nous_tools: a process call's driver failed")
                why = f"its driver failed: {_isolation._describe(exc)}"
                current.stop(_isolation.UNPICKLABLE, why)
                call = child = None

    def _serve(
        self,
        call: _Call,
        child: _Child | None,
        sent: tuple[_Call, _Child, float, bool] | None = None,
    ) -> tuple[_Call | None, _Child | None]:
        """Run one submitted call (in its driver), on ``child`` when one was kept for
        it, and end it. Returns the next submitted call and the child kept busy for
        it, or ``(None, None)``. ``sent``: the call was sent already (to ``child``,
        with its deadline and whether a stray was seen)."""
        if sent is not None:
            return self._conclude(call, sent[1], sent[2], sent[3])
        message = _pipe.call_frame(call.seq, call.request)
        call.request = b""
        while True:
            if child is not None and monotonic() >= min(call.queue_until, call.cap):
                self._release(child, counted=False)  # its wait is over: as _take says
                child = None
            if child is None:
                taken = self._take(call.cap, call.queue_until, call.queue_timeout)
                if type(taken) is tuple:
                    call.end(taken)
                    return None, None
                child = t.cast(_Child, taken)
            ends = monotonic() + call.budget
            if ends > call.cap:
                ends = call.cap
            with self._lock:
                stopped = call.ended is not None
                if not stopped:
                    call.child = child
            if stopped:  # stopped while it waited: the child goes back, unused
                self._release(child, counted=False)
                return None, None
            _pipe.set_deadline(message, ends)
            try:
                child.conn.send_bytes(message)
                break
            except OSError:  # it died while idle: the tool never started; take another
                with self._lock:
                    call.child = None
                self._end(child, "died")
                child = None
        return self._conclude(call, child, ends, False)

    def _conclude(
        self, call: _Call, child: _Child, ends: float, stray_before: bool
    ) -> tuple[_Call | None, _Child | None]:
        """Wait for the reply of ``call``, sent to ``child``, until ``ends``; end it."""
        answer = _wait_reply(child, call.seq, ends, None)
        if answer is _LATE:
            child.kill()  # first: the kill is at the deadline, the bookkeeping after
        following: _Call | None = None
        with self._lock:
            stopped = call.ended is not None  # stop() killed the child, or is about to
            call.child = None
            answered = not stopped and answer is not _LATE and answer is not _ENDED
            if answered:
                reply, stray = t.cast("tuple[memoryview, bool]", answer)
                call.ended = (_REPLY, reply)
                following = self._answered(child, stray or stray_before)
        if answered:
            call.notify(call)
            return following, (child if following is not None else None)
        if stopped or answer is _LATE:
            self._end(child, "interrupted" if stopped else "timed_out")
            call.end((TIMED_OUT, None))  # (ignored when stopped: it has its end)
        else:
            call.end((RAISED, self._died(child, call.tool)))
        return None, None

    def _answered(
        self,
        child: _Child,
        stray: bool,
        queue: collections.deque[_Call] | None = None,
        *,
        counted: bool = True,
    ) -> _Call | None:  # with the lock
        """A submitted call's child answered: the next call of ``queue`` (default:
        the submitted calls) it serves at once (it stays busy), or None when it is
        released. ``counted=False``: the child ran nothing (a call sent ahead of it
        did not start)."""
        if queue is None:
            queue = self._submitted
        limit = self.max_tasks_per_child
        if (
            queue
            and not self._waiting
            and not stray
            and not self._shutdown
            and (limit is None or child.tasks + 1 < limit)
        ):
            if counted:
                self._counts["completed"] += 1
                child.tasks += 1
            following = queue.popleft()
            following.waiting = False
            return following
        self._put_back(child, stray, counted)
        return None
