"""A batch's process calls whose replies its own thread reads (private).

:class:`_Call` is one submitted call (a scope of the batch that submitted it).
A :class:`_Session` lets the batch's thread send its calls to children and read
their replies itself, with no thread between: :meth:`_Session.wait` polls the
pipes of the children it holds. A child that answers goes on at once with the
session's next call, and a busy child gets one more call *ahead* (a
:data:`~nous_tools._engine._pipe.QUEUED` frame), which waits in its pipe and is
taken by the child itself when the call before ends, so a child never waits for
the parent between two calls of a batch. The design is in
:mod:`nous_tools._engine._process_pool`.

A call sent ahead keeps every promise of a call that waits for a child: its
deadline starts when the child takes it (the child sets it, and says so before
anything else of the call: in the reply to the call before, or in a notice); a
child takes it only while its wait for a child (``queue_timeout``) is not over,
and when it is over the call never started (it is answered when the child says
so: at the latest when the call before ends); when the call before is killed at
its deadline or its child dies, the call ahead, which that child never took,
goes back to the front of the queue as never started (it runs elsewhere, or is
answered as not started when its wait is over) -- never lost, never run twice.
"""

from __future__ import annotations

import collections
import collections.abc as c
import contextlib
import math
import os
import struct
import time
import typing as t

from nous_tools._engine import _pipe
from nous_tools._engine._outcome import QUEUE_TIMED_OUT, RAISED, SHUT_DOWN, TIMED_OUT
from nous_tools._engine._process_handle import _MAX_WAIT, _Child
from nous_tools._util._clock import monotonic
from nous_tools._util._log import log as _log
from nous_tools._util._scope import Scope
from nous_tools.errors import ChildProcessDied

if t.TYPE_CHECKING:
    from nous_tools._engine._process_batch import _Batches
    from nous_tools.tool import Tool

__all__: list[str] = []

_REFILL = 0.02  # seconds between a session's looks for idle children for its queued calls
_AHEAD = 32  # calls sent ahead to a busy child, at most
_REFILL_AT = 2  # a busy child gets calls ahead when no more than this many wait in its pipe
_AHEAD_BYTES = 48 * 1024  # ... and their bytes, well within a pipe's buffer (never a blocked write)
_AHEAD_SHARE = (
    0.25  # a call goes ahead when the calls before it should end within this share of its wait
)
_PACE_WEIGHT = 0.2  # the weight of the latest call in the running mean of how long calls run
_EXIT_WAIT = 1.0  # seconds a killed child gets to exit before its pipe is read to the end

_REPLY = "reply"  # a submitted call's end: the child's reply, decoded by the caller
_POLLIN = 1  # select.POLLIN (the same everywhere poll(2) exists)
_CALL_PREFIX = 17  # the bytes of a call frame before its request: seq, kind, deadline
_UNKNOWN = math.inf  # a call sent ahead whose killed child could not be read to the end


class _Call(Scope):
    """A submitted call (see :meth:`ProcessPool.submit`): a scope of the batch
    that submitted it, so cancelling the batch stops it. Its fields are written
    under the pool's lock; ``ended`` is decided once, by whoever comes first."""

    __slots__ = (
        "budget",
        "cap",
        "child",
        "ended",
        "notify",
        "pool",
        "queue_timeout",
        "queue_until",
        "request",
        "seq",
        "session",
        "tool",
        "waiting",
    )

    def __init__(
        self,
        pool: _Batches,
        tool: Tool,
        seq: int,
        request: bytes,
        cap: float,
        budget: float,
        queue_until: float,
    ) -> None:
        super().__init__(min(cap, queue_until))  # when its caller looks at it (expire)
        self.pool = pool
        self.tool = tool
        self.seq = seq
        self.request = request
        self.cap = cap  # no attempt runs past it (the enclosing deadline; inf: none)
        self.budget = budget  # seconds the attempt may run once a child has it
        self.queue_until = queue_until
        self.queue_timeout = 0.0
        self.notify: c.Callable[[t.Any], object] = _ignore
        self.waiting = True  # in the pool's queue: no driver has it yet
        self.child: _Child | None = None  # the child running it
        self.ended: tuple[str, t.Any] | None = None
        self.session: _Session | None = None  # whose thread reads its reply, if not a driver's

    def end(self, outcome: tuple[str, t.Any]) -> None:
        """Decide the call's end, unless it has one; tell its caller."""
        with self.pool._lock:
            if self.ended is not None:
                return
            self.ended = outcome
        self.notify(self)

    def stop(self, kind: str, value: t.Any = None) -> None:
        """Cancel the call (its batch was cancelled): one still waiting never
        starts; a running one's child is killed (its driver then takes it out
        of service). Its end is ``(kind, value)`` unless it had one already."""
        pool = self.pool
        with pool._lock:
            if self.ended is not None:
                return
            self.ended = (kind, value)
            if self.waiting:
                self.waiting = False
                queue = pool._submitted if self.session is None else self.session.queued
                with contextlib.suppress(ValueError):  # (not queued yet: it never will be)
                    queue.remove(self)
            child = self.child
        if child is not None:
            child.kill()
        self.notify(self)


def _ignore(_: object) -> None:
    pass


_LENGTH = struct.Struct("!i")  # a multiprocessing message's header: its length
_LONG = struct.Struct("!Q")  # ... after a length of -1: the length of a message of 2 GiB or more
_READ = 1 << 16  # bytes read from a child's pipe at once (all the replies waiting there)


def _message(buffer: bytearray) -> bytes | None:
    """The first whole ``multiprocessing`` message in ``buffer``, taken out of it, or
    None when none is whole yet (the pipe is read in chunks: many replies a read)."""
    if len(buffer) < 4:
        return None
    (size,) = _LENGTH.unpack_from(buffer)
    start = 4
    if size == -1:
        if len(buffer) < 12:
            return None
        (size,) = _LONG.unpack_from(buffer, 4)
        start = 12
    end = start + size
    if len(buffer) < end:
        return None
    message = bytes(buffer[start:end])
    del buffer[:end]
    return message


def _whole(buffer: bytearray) -> bool:
    """Whether ``buffer`` holds a whole message."""
    if len(buffer) < 4:
        return False
    size = int(_LENGTH.unpack_from(buffer)[0])
    if size == -1:
        return len(buffer) >= 12 and len(buffer) >= 12 + int(_LONG.unpack_from(buffer, 4)[0])
    return len(buffer) >= 4 + size


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` whole (several ``multiprocessing`` messages in one write)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_SAID = 1.0  # seconds of grace past the latest a child must have said whether it took a call


def _said_by(call: _Call) -> float:
    """The latest a child must have said what became of ``call``, sent ahead to it
    and taken after its last reply: it takes it before its wait ends, or not at all,
    and its attempt ends by its deadline (plus :data:`_SAID`)."""
    wait_end = min(call.queue_until, call.cap)
    return min(call.cap, wait_end + call.budget) + _SAID


def _unstarted(pool: _Batches, call: _Call) -> tuple[str, t.Any]:  # with the lock
    """The end of a submitted call whose wait for a child is over: it never started
    (:data:`QUEUE_TIMED_OUT`, or ``TIMED_OUT`` at the enclosing deadline)."""
    if call.queue_until < call.cap:
        pool._counts["not_started"] += 1
        return QUEUE_TIMED_OUT, (call.queue_timeout, pool.max_workers)
    pool._counts["timed_out"] += 1
    return TIMED_OUT, None


class _Sent:
    """A child a session holds: the call it runs (or was sent ahead and has not
    said it took: ``taken`` False, ``ends`` :func:`_said_by`), that call's deadline, a stray
    seen, and the calls sent ahead behind it, in order."""

    __slots__ = ("ahead", "buffer", "bytes", "call", "child", "ends", "stray", "taken")

    def __init__(self, call: _Call, child: _Child, ends: float) -> None:
        self.call, self.child, self.ends, self.stray = call, child, ends, False
        self.taken = True
        self.ahead: collections.deque[_Call] = collections.deque()
        self.bytes = 0  # of the requests sent ahead (a bound: taken ones are not subtracted)
        self.buffer = bytearray()  # read from its pipe, not yet taken as messages


class _Session:
    """Submitted calls whose replies one thread reads itself (a batch's
    coordinator, while it waits for nothing else): it sends each call to a child
    and polls those children's pipes, so no driver thread stands between it and
    them. A child that answers goes on at once with the session's next queued
    call, and a busy child holds up to :data:`_AHEAD` more calls in its pipe. Only
    its owner's thread uses it; the pool's lock guards what a call shares with
    :meth:`_Call.stop` (which may come from another thread). :meth:`detach` hands
    everything to the pool's drivers when the owner must wait for something else;
    :meth:`close` settles what is left at the end. A *driven* session (``open``
    False) is a driver's, for one child that holds calls sent ahead: it tells each
    call's caller of its end (``notify``) and gives calls that must wait again to
    the drivers."""

    __slots__ = (
        "done",
        "driven",
        "hint",
        "open",
        "pace",
        "poller",
        "pool",
        "queued",
        "running",
        "sentinels",
    )

    def __init__(self, pool: _Batches, *, driven: bool = False) -> None:
        import select

        self.pool = pool
        self.open = not driven
        self.driven = driven
        self.poller = select.poll()
        self.running: dict[int, _Sent] = {}  # by the child's pipe fd
        self.sentinels: dict[int, int] = {}  # a child's sentinel fd -> its pipe fd
        self.queued: collections.deque[_Call] = collections.deque()
        self.done: collections.deque[_Call] = collections.deque()  # ended, not returned yet
        self.pace: float | None = None  # how long its calls run (a running mean), once known
        self.hint = 0.0  # the queue_timeout of the call it sent ahead last

    def holds(self) -> int:
        """The calls the session holds: running, sent ahead, queued, ended not returned."""
        held = len(self.queued) + len(self.done)
        for sent in self.running.values():
            held += 1 + len(sent.ahead)
        return held

    def _depth(self, wait: float) -> int:
        """How many calls may wait in a busy child's pipe, for a call that may wait
        ``wait`` more seconds: as many as should end, with the one running, within
        :data:`_AHEAD_SHARE` of that (one until the session knows how long its calls
        run), at most :data:`_AHEAD`."""
        if self.pace is None:
            return 1
        if self.pace <= 0:
            return _AHEAD
        return min(_AHEAD, int(_AHEAD_SHARE * wait / self.pace))

    def room(self) -> bool:
        """Whether one more call handed over now would go ahead to a busy child at
        once, beyond those queued (so a batch may hand over more than its usual
        number of calls: they wait in pipes, where their wait is expected short)."""
        if self.pace is None or not self.open or self.pool.max_tasks_per_child is not None:
            return False
        depth = self._depth(self.hint)
        free = 0
        for sent in self.running.values():
            if not sent.stray and len(sent.ahead) < depth:
                free += depth - len(sent.ahead)
        return free > len(self.queued)

    def send(self, call: _Call, child: _Child) -> None:
        """Send ``call`` to ``child`` (taken for it, busy): its deadline starts now."""
        pool = self.pool
        with pool._lock:
            if call.ended is not None:  # stopped before it was sent: the child goes back
                call.child = None
                pool._put_back(child, False, False)
                return
        message = _pipe.call_frame(call.seq, call.request)
        call.request = b""
        ends = monotonic() + call.budget
        if ends > call.cap:
            ends = call.cap
        _pipe.set_deadline(message, ends)
        try:
            child.conn.send_bytes(message)
        except OSError:  # it died while idle: the tool never started; a driver takes it
            with pool._lock:
                call.child = None
                call.session = None
            pool._end(child, "died")
            call.request = bytes(message[_CALL_PREFIX:])
            if not pool._redo(call):
                call.end((SHUT_DOWN, None))
            return
        self._hold(_Sent(call, child, ends))

    def _hold(self, sent: _Sent) -> None:
        fd = sent.child.conn.fileno()
        self.running[fd] = sent
        self.sentinels[sent.child.sentinel] = fd
        self.poller.register(fd, _POLLIN)
        self.poller.register(sent.child.sentinel, _POLLIN)
        if self.queued and self.open:
            self._send_ahead(sent)

    def _send_ahead(self, sent: _Sent) -> None:
        """Send queued calls to ``sent``'s child, to wait in its pipe (see
        :data:`~nous_tools._engine._pipe.QUEUED`): the child takes each when the call
        before it ends. As many as :meth:`_depth` allows, in one write, once no
        more than :data:`_REFILL_AT` wait there (a write wakes a child that waits:
        one write for many calls)."""
        pool = self.pool
        if sent.stray or pool.max_tasks_per_child is not None or len(sent.ahead) > _REFILL_AT:
            return  # (a stray: the child will be replaced, no call must be stranded in it)
        calls: list[_Call] = []
        frames: list[bytes | bytearray] = []
        size = sent.bytes if sent.ahead else 0
        now = monotonic()
        with pool._lock:
            if pool._waiting or pool._shutdown:
                return  # (a caller of run() waiting for a child goes first)
            queued = self.queued
            while queued:
                call = queued[0]
                wait = min(call.queue_until, call.cap) - now
                if len(sent.ahead) + len(calls) >= self._depth(wait):
                    break
                size += len(call.request)
                if size > _AHEAD_BYTES:
                    break
                queued.popleft()
                call.waiting = False
                calls.append(call)
                message = _pipe.queued_frame(
                    call.seq, call.request, call.cap, call.budget, min(call.queue_until, call.cap)
                )
                frames.append(_LENGTH.pack(len(message)))
                frames.append(message)
        if not calls:
            return
        self.hint = calls[-1].queue_timeout
        try:
            _write_all(sent.child.conn.fileno(), b"".join(frames))
        except OSError:  # the child died: its end comes through poll; the calls wait on
            self._never_started(calls)
            return
        sent.ahead.extend(calls)
        sent.bytes = size

    def _drop(self, fd: int) -> _Sent:
        sent = self.running.pop(fd)
        del self.sentinels[sent.child.sentinel]
        self.poller.unregister(fd)
        self.poller.unregister(sent.child.sentinel)
        return sent

    def _finished(self, call: _Call) -> None:
        """``call`` ended here (its ``ended`` is set): its caller hears of it."""
        if self.driven:
            call.notify(call)
        else:
            self.done.append(call)

    def wait(self, timeout: float) -> _Call | None:
        """Wait up to ``timeout`` seconds for one of the calls to end (its reply,
        its child's end, or its deadline: the child is killed); that call, or None.
        Queued calls take idle children first, then go ahead to busy ones."""
        if self.done:
            return self.done.popleft()
        if self.queued:
            self._fill()
        running = self.running
        until = monotonic() + timeout
        while running:
            for fd in [fd for fd, sent in running.items() if sent.buffer and _whole(sent.buffer)]:
                if fd in running:  # replies read already, with an earlier one
                    ended = self._read(fd)
                    if ended is not None:
                        return ended
            if self.done:
                return self.done.popleft()
            now = monotonic()
            soonest = min(sent.ends for sent in running.values())
            if soonest <= now:
                for fd, sent in running.items():
                    if sent.ends <= now:
                        return self._late(fd)
            if until <= now:
                break
            wait = (soonest if soonest < until else until) - now
            if self.queued and wait > _REFILL:
                wait = _REFILL  # look for idle children for them now and then
            milliseconds = math.floor(min(wait, _MAX_WAIT) * 1000)
            if milliseconds == 0:
                time.sleep(wait)  # poll(2) counts whole milliseconds: a kill is not late
            events = self.poller.poll(milliseconds)
            for fd, _ in events:
                fd = self.sentinels.get(fd, fd)
                if fd in running:
                    ended = self._read(fd)
                    if ended is not None:
                        return ended
            if self.done:
                return self.done.popleft()
            if not events and self.queued:
                self._fill()
        return self.done.popleft() if self.done else None

    def _read(self, fd: int) -> _Call | None:
        """A held child's pipe is readable (or the child ended): a call that ended,
        or None (an event, a notice or a stray, read)."""
        sent = self.running[fd]
        call, child = sent.call, sent.child
        message = _message(sent.buffer)
        if message is None:  # (only when poll said so: the read does not block)
            try:
                data = os.read(fd, _READ)
            except OSError:
                data = b""
            if data:
                sent.buffer += data
                message = _message(sent.buffer)
                if message is None:
                    return None  # not whole yet: the rest comes
        if message is not None:
            parsed = _pipe.unframe(message)
            if parsed is not None and parsed[0] == call.seq:
                kind = parsed[1]
                if sent.taken and kind in _pipe.REPLY_KINDS:
                    return self._answered(fd, kind, parsed[2])
                if sent.taken and kind in _pipe.EVENT_KINDS:
                    return None  # nobody listens (a listener's call runs in a lane)
                if not sent.taken and kind in _pipe.NOTICE_KINDS:
                    self._next(fd, _pipe.deadline_of(kind, parsed[2]))
                    return None
            sent.stray = True
            _log.warning(
                "nous_tools: child process %s wrote to its pipe out of turn (%s, while "
                "it served call %s); discarded, and the child will be replaced",
                child.pid,
                _pipe.describe(message),
                call.seq,
            )
            return None
        self._drop(fd)  # the child ended without answering (everything it said is read)
        pool = self.pool
        with pool._lock:
            stopped = call.ended is not None
            call.child = None
        if not sent.taken:  # it ended between two calls: none of them started
            pool._died(child, call.tool)
            sent.ahead.appendleft(call)
            self._never_started(sent.ahead)
            return None
        if stopped:
            pool._end(child, "interrupted")
        else:
            call.end((RAISED, pool._died(child, call.tool)))
        self._never_started(sent.ahead)
        return call

    def _answered(self, fd: int, kind: int, payload: memoryview) -> _Call:
        """The reply of the call ``fd``'s child runs: that call ends; the child goes
        on with the first call sent ahead (which it took, or will say whether it
        takes), or with the next queued call, or goes back to the pool."""
        sent = self.running[fd]
        call, child, stray, ahead = sent.call, sent.child, sent.stray, sent.ahead
        following, deadline, reply = _pipe.next_parts(kind, payload)
        ran = monotonic() - (sent.ends - call.budget)  # (at least: the start is at most that)
        pace = self.pace
        self.pace = ran if pace is None else pace + _PACE_WEIGHT * (ran - pace)
        pool = self.pool
        queued: _Call | None = None
        with pool._lock:
            stopped = call.ended is not None  # stop() killed the child, or is about to
            call.child = None
            if not stopped:
                call.ended = (_REPLY, reply)
                if not ahead:  # (anything it wrote after its reply is out of turn)
                    queued = pool._answered(child, stray or bool(sent.buffer), self.queued)
                    if queued is not None:
                        queued.child = child
                else:
                    pool._counts["completed"] += 1
                    child.tasks += 1
        if stopped:
            self._drop(fd)
            child.kill()  # (stop() kills it too), before its pipe is read to the end
            self._let_go(child, sent, {following: deadline} if following else {})
            pool._end(child, "interrupted")
            return call
        if not ahead:
            self._drop(fd)
            if queued is not None:
                self.send(queued, child)
            return call
        sent.call = ahead.popleft()
        if following == sent.call.seq:  # the child took it, and says how
            self._next(fd, deadline)
        else:  # the child takes it by itself, and says so
            sent.taken, sent.ends = False, _said_by(sent.call)
            if self.queued and self.open:
                self._send_ahead(sent)
        return call

    def _next(self, fd: int, deadline: float) -> None:
        """``fd``'s child took the call sent ahead that it serves now (``sent.call``)
        after the one before: it started and runs until ``deadline``, or (NaN) it
        did not start, its wait being over, and the child goes on with the next."""
        sent = self.running[fd]
        call, child = sent.call, sent.child
        pool = self.pool
        started = not math.isnan(deadline)
        with pool._lock:
            stopped = call.ended is not None
            if not stopped:
                if started:
                    call.child = child
                else:
                    call.ended = _unstarted(pool, call)
        if started and not stopped:
            sent.taken, sent.ends = True, deadline
            call.request = b""
            if self.queued and self.open:
                self._send_ahead(sent)
            return
        self._finished(call)
        if started:  # stopped while it waited in the pipe: its child goes
            self._drop(fd)
            child.kill()
            self._let_go(child, sent)
            pool._end(child, "interrupted")
        elif sent.ahead:  # the child takes the next one by itself, and says so
            sent.call = sent.ahead.popleft()
            sent.taken, sent.ends = False, _said_by(sent.call)
            if self.queued and self.open:
                self._send_ahead(sent)
        else:
            self._drop(fd)
            stray = sent.stray or bool(sent.buffer)
            with pool._lock:
                queued = pool._answered(child, stray, self.queued, counted=False)
                if queued is not None:
                    queued.child = child
            if queued is not None:
                self.send(queued, child)

    def _late(self, fd: int) -> _Call | None:
        """A running call's deadline passed: kill its child, end it as timed out. (A
        call the child has not said it took, past :func:`_said_by`: unless the child
        has written since, it is out of order: killed, and the call never started.)"""
        sent = self.running[fd]
        call, child = sent.call, sent.child
        pool = self.pool
        if not sent.taken:
            if (sent.buffer and _whole(sent.buffer)) or child.conn.poll():
                return self._read(fd)  # (it did say: the caller was late to read it)
            child.kill()
            self._drop(fd)
            sent.ahead.appendleft(call)
            self._let_go(child, sent)
            pool._end(child, "interrupted")
            return self.done.popleft() if self.done else None
        child.kill()  # first: the kill is at the deadline, the bookkeeping after
        self._drop(fd)
        with pool._lock:
            stopped = call.ended is not None
            call.child = None
        call.end((TIMED_OUT, None))
        self._let_go(child, sent)
        pool._end(child, "interrupted" if stopped else "timed_out")
        return call

    def _let_go(self, child: _Child, sent: _Sent, known: dict[int, float] | None = None) -> None:
        """``child`` was killed with calls sent ahead in its pipe (``sent.ahead``): read
        what it said of them before it ended, and end each call as that says, or
        queue it again when the child never took it (see :meth:`_settle`).
        ``known``: what the last reply said (a call's ``seq`` and its deadline)."""
        ahead = sent.ahead
        if not ahead:
            return
        fates: dict[int, t.Any] = dict(known or {})
        seqs = {call.seq for call in ahead}
        if not child.wait_exit(_EXIT_WAIT):
            for seq in seqs:
                fates.setdefault(seq, _UNKNOWN)
        else:
            buffer = sent.buffer
            fd = child.conn.fileno()
            with contextlib.suppress(OSError):  # (read to the end)
                os.set_blocking(fd, False)  # what it wrote before it died, no more
                while data := os.read(fd, _READ):
                    buffer += data
            while (message := _message(buffer)) is not None:  # (a message cut short: not)
                parsed = _pipe.unframe(message)
                if parsed is None:
                    continue
                seq, kind, payload = parsed
                if kind in _pipe.REPLY_KINDS:
                    following, deadline, result = _pipe.next_parts(kind, payload)
                    if seq in seqs:
                        fates[seq] = result  # it even answered
                    if following in seqs:
                        fates[following] = deadline
                elif seq in seqs and kind in _pipe.NOTICE_KINDS:
                    fates[seq] = _pipe.deadline_of(kind, payload)
        for call in reversed(ahead):  # (those queued again keep their order)
            self._settle(call, fates.get(call.seq), child)

    def _never_started(self, calls: c.Sequence[_Call]) -> None:
        for call in reversed(calls):  # (they keep their order, first in line)
            self._requeue(call)

    def _settle(self, call: _Call, fate: t.Any, child: _Child) -> None:
        """End a call sent ahead to ``child``, which was killed, as its fate says:
        None (never taken: it waits again, :meth:`_requeue`), NaN (not started),
        a reply (it ran and answered), a deadline (it had started: it died with
        the child) or :data:`_UNKNOWN` (the child could not be read to the end)."""
        if fate is None:
            self._requeue(call)
            return
        pool = self.pool
        with pool._lock:
            if call.ended is None:
                if isinstance(fate, memoryview):
                    pool._counts["completed"] += 1
                    call.ended = (_REPLY, fate)
                elif math.isnan(fate):
                    call.ended = _unstarted(pool, call)
            ended = call.ended is not None
        if ended:
            self._finished(call)
            return
        how = "had started" if fate != _UNKNOWN else "may have started"
        died = ChildProcessDied(
            f"the child process (pid {child.pid}) running tool '{call.tool.name}' was "
            f"killed at the deadline of the call before it, when this call {how}",
            pid=child.pid,
            exitcode=child.process.exitcode,
        )
        call.end((RAISED, died))
        if not self.driven:
            self.done.append(call)

    def _requeue(self, call: _Call) -> None:
        """A call sent ahead that its child never took: it never started. It waits
        for a child again, first in line (or ends as not started when its wait is
        over); a driven session gives it to the drivers."""
        pool = self.pool
        with pool._lock:
            if call.ended is None and monotonic() >= min(call.queue_until, call.cap):
                call.ended = _unstarted(pool, call)
            ended = call.ended is not None
            if not ended:
                call.child = None
                if self.open:
                    call.waiting = True
                    self.queued.appendleft(call)
                    return
                call.session = None
        if ended:
            self._finished(call)
        elif not pool._redo(call):
            call.end((SHUT_DOWN, None))
            if not self.driven:
                self.done.append(call)

    def _fill(self) -> None:
        """Queued calls take idle children (they appear as spares start), then go
        ahead to busy ones."""
        pool = self.pool
        while self.queued:
            with pool._lock:
                if pool._waiting or pool._shutdown:
                    return
                child = pool._pop_idle()
                if child is None:
                    break
                call = self.queued.popleft()
                call.waiting = False
                call.child = child
            self.send(call, child)
        for sent in list(self.running.values()):
            if not self.queued:
                return
            self._send_ahead(sent)

    def detach(self) -> None:
        """The owner must wait for something else: drivers take over what runs
        (waiting for its reply; a child holding calls sent ahead goes whole to a
        driver) and what is queued (waiting for a child); calls that ended are told."""
        self.open = False
        pool = self.pool
        for fd in list(self.running):
            sent = self._drop(fd)
            with pool._lock:
                sent.call.session = None
                for call in sent.ahead:
                    call.session = None
            if sent.taken and not sent.ahead and not sent.buffer:
                pool._adopt(sent.call, sent.child, sent.ends, sent.stray)
            else:
                pool._adopt_ahead(sent)
        while self.queued:
            with pool._lock:
                if not self.queued:
                    break
                call = self.queued.popleft()
                call.session = None
            call.waiting = False
            if not pool._redo(call):  # shut down: it never starts
                call.end((SHUT_DOWN, None))
        while self.done:
            call = self.done.popleft()
            call.notify(call)

    def close(self) -> None:
        """The owner is done (its batch ended, or was interrupted and its calls
        stopped): settle every child the session still holds."""
        if self.running or self.queued or self.done:
            self.detach()
        self.open = False

    def drive(self) -> None:
        """A driven session's life (in its driver): until its child has no call,
        wait for each end and tell that call's caller."""
        while self.running:
            ended = self.wait(_MAX_WAIT)
            if ended is not None:
                ended.notify(ended)
