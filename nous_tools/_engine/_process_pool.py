"""A reusable, killable pool of child processes for ``isolation="process"`` (private).

A thread cannot be killed in CPython; a process can. Process-isolated attempts
run in children that are started once and reused, and the one child whose
attempt passes its deadline is killed, with everything it started.

How it works:

* **Children.** Each child is a ``multiprocessing`` process started with the
  ``forkserver`` method (``spawn`` where there is none): never a ``fork`` of the
  parent, which is multi-threaded and could be forked while another thread holds
  a lock. The child first makes itself the leader of a new session and process
  group (``os.setsid``), then answers requests on its own pipe: one request in
  (the pickled function, arguments and context), one reply out. When the
  forkserver is not running yet, this module is added to its preload list, so a
  new child is a fork of a server that has already imported ``nous_tools``:
  a few milliseconds instead of the whole import.
* **One caller, one child.** A call takes an idle child (the most recently used
  one, so consecutive calls reuse the same process; a new child waits below
  the used ones), writes its request to the
  child's pipe and waits, until the deadline, for the reply or for the child's
  exit. No shared queue and no manager thread sit between the caller and the
  child: the caller itself notices the deadline, and it kills at once.
* **The kill.** At the deadline (or when the caller gets ``KeyboardInterrupt``
  while it waits) the caller sends ``SIGKILL`` to the child's whole process
  group (``os.killpg``), so the grandchildren it started die with it, and
  returns. A process that left the group (its own ``setsid``, a daemon) is out
  of reach. A child that dies by itself (a segfault, ``os._exit``, the OOM
  killer) gives :class:`~nous_tools.errors.ChildProcessDied` naming its exit
  code or signal; the pool goes on.
* **Framed messages.** Every message on a child's pipe carries the sequence
  number of the call it belongs to, and its kind (:mod:`nous_tools._engine._pipe`
  describes the frames and how to add kinds: progress and log events during a
  call, requests the parent answers). A caller takes only the reply of its own
  call; anything else -- a forked copy's second reply, a message a helper
  thread wrote -- is a stray: it is discarded and logged, and the child that
  wrote it out of turn is replaced (after the call; at once if it is idle).
* **Spares.** A background thread (the *keeper*) starts children and reaps
  ended ones. It keeps one idle child ready beyond the children in use (at most
  ``max_workers + 1`` processes, at most ``max_workers`` attempts at once), so a
  kill, a crash or a recycle never makes the next call wait for a start-up.
  A child a caller waits for is started at once; a spare, and the reaping of an
  ended child, wait until no attempt runs (at most ``_SETTLE``, 50 ms): on a
  small machine a start-up beside a running attempt slows that attempt down
  several times. A new child runs one warm-up request before it says it is
  ready, so its first real attempt does not pay for first touches of memory it
  shares copy-on-write with the forkserver. ``max_tasks_per_child`` ends a child
  after that many attempts; a fresh one takes its place.
* **Ending a child** (recycle, shutdown) closes its pipe, so it leaves its loop
  and exits normally, then kills its process group: processes a tool left
  running in the background end with the child that started them.
* **Deadlines.** Called with a ``budget`` (the executor does), an attempt's
  deadline starts when a child takes it: the timeout counts the tool's run. The
  wait for a free child (and a start-up) is bounded by ``queue_timeout``; a call
  that waited that long never started and says so (:data:`QUEUE_TIMED_OUT`). An
  enclosing attempt's deadline bounds both. The deadline travels in the call's
  frame and is the tool's ``ctx.deadline``. Without a budget (``ProcessBackend.run``,
  the plain ``Backend``), the deadline counts from submission. Deadlines run on
  the real monotonic clock, so they hold inside ``freezegun.freeze_time``.
* **Batches** (:meth:`ProcessPool.submit`) hand calls over without a thread each:
  a *session* lets the batch's caller write requests to free children and read the
  replies itself while it waits for nothing else; otherwise *drivers* (at most
  ``max_workers`` pool threads) take submitted calls in turn. Either way a child
  that answers goes on at once with the next waiting call, so consecutive calls
  are not handed between threads.
* **Exit.** Children are killed by an ``atexit`` hook that runs before
  ``multiprocessing``'s own (and by a ``multiprocessing`` finalizer that runs
  first inside it, whatever order the hooks were registered in), so a hung or
  idle child never keeps the interpreter alive,
  and the keeper is a daemon thread. Children are not ``daemon`` processes, so a
  tool may start processes of its own (``multiprocessing`` forbids that to
  daemons); they are in the child's group and die with it.

Why not pebble or loky (the issue asked): loky cannot kill the worker of one
task at its deadline (its timeout is an idle timeout; only the whole executor
can be terminated). pebble's ``ProcessPool`` does kill per task, but its
manager thread checks deadlines every 0.1 s (``CONSTS.sleep_unit``), so a kill
lands up to 100 ms late, where the target is 10 ms; it stops a worker with
``SIGTERM`` first, which a tool can catch or ignore; it counts a timeout from
when a worker picks the task up, not from submission, on the ``time.time()``
clock (which ``freezegun`` freezes); and its workers stay in the parent's
process group, so grandchildren survive the kill. Patching those from outside
would mean reaching into its private manager, for a pool whose whole
mechanism here is a pipe per child, one ``poll`` and one ``killpg``.
"""

from __future__ import annotations

import atexit
import collections
import collections.abc as c
import contextlib
import itertools
import math
import os
import signal
import threading
import time
import typing as t
import weakref

from nous_tools._engine import _isolation, _pipe
from nous_tools._engine._pool import RAISED, SHUT_DOWN, TIMED_OUT
from nous_tools._util._clock import monotonic
from nous_tools._util._log import log as _safe_log
from nous_tools._util._scope import Scope, here
from nous_tools.errors import ChildProcessDied

if t.TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from nous_tools.run_context import RunContext
    from nous_tools.tool import Tool

__all__ = ["QUEUE_TIMED_OUT", "ProcessPool", "check_option", "default_workers", "empty_stats"]

_log = _safe_log

_GROUPS = hasattr(os, "setsid") and hasattr(os, "killpg")
_SIGKILL: int = getattr(signal, "SIGKILL", signal.SIGTERM)
_START_TIMEOUT = 60.0  # seconds a child may take to import and say it is ready
_EXIT_GRACE = 1.0  # seconds an ended or dying child gets to exit before its group is killed
_SETTLE = 0.05  # seconds background work waits for running attempts to finish
_MAX_WAIT = 86_400.0  # one poll(2) at most (its timeout is an int of milliseconds)
_DRIVER_IDLE = 30.0  # seconds an idle driver waits for another submitted call
_REFILL = 0.02  # seconds between a session's looks for idle children for its queued calls

#: Outcome kind: no child came free within the call's ``queue_timeout``, so the
#: tool never started (value: ``(queue_timeout, max_workers)``).
QUEUE_TIMED_OUT = "queue_timed_out"

_REPLY = "reply"  # a submitted call's end: the child's reply, decoded by the caller
_POLLIN = 1  # select.POLLIN (the same everywhere poll(2) exists)
_CALL_PREFIX = 17  # the bytes of a call frame before its request: seq, kind, deadline
_LATE = object()  # _wait_reply: the deadline passed
_ENDED = object()  # _wait_reply: the child ended without answering


def default_workers() -> int:
    """The default ``process_workers``: the CPUs this process may use, at least 2, at most 8."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(8, max(2, cpus))


def check_option(owner: str, option: str, value: object) -> None:
    """Raise ``ValueError`` naming ``option`` unless ``value`` is None or an int >= 1."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{owner} option {option!r} must be an int >= 1 or None, got {value!r}")


def _child_main(conn: Connection) -> None:
    """A child's life: lead a new process group, say so, then serve calls until
    the parent closes the pipe."""
    if _GROUPS:
        with contextlib.suppress(OSError):
            os.setsid()
    with contextlib.suppress(Exception):
        _isolation.warm_up()
    events = _isolation.events = _isolation.Events(conn)  # every frame it writes, whole
    events.ready(str(os.getpgrp()).encode() if _GROUPS else b"0")
    run = _isolation.run_request
    unframe = _pipe.unframe
    parts = _pipe.call_parts
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        call = unframe(message)
        if call is None or call[1] != _pipe.CALL:
            continue  # only the parent writes to this end, and only calls
        events.begin(call[0])
        deadline, request = parts(call[2])
        events.reply(run(request, deadline))


class _Gate:
    """Whether a call is still on, for the answers written to its child from other
    threads: closed when the call ends, under the lock the writers take."""

    __slots__ = ("lock", "open")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = True

    def close(self) -> None:
        with self.lock:
            self.open = False


def _answer(
    child: _Child,
    seq: int,
    kind: int,
    payload: bytes,
    on_request: c.Callable[[int, bytes], bytes],
    gate: _Gate,
) -> None:
    """Answer a child's question in a thread of its own; the answer is written only
    while the call is on (a killed or finished call's child gets nothing)."""

    def run() -> None:
        try:
            answer = on_request(kind, payload)
        except BaseException:  # on_request packs what it raises; this is its own failure
            _log.exception("nous_tools: answering a child's question failed")
            return
        with gate.lock:
            if gate.open:
                with contextlib.suppress(OSError, ValueError):
                    child.conn.send_bytes(_pipe.frame(seq, _pipe.ANSWER, answer))

    threading.Thread(target=run, name="nous-tools-child-question", daemon=True).start()


class _Child:
    """One child process, its end of the pipe, and how many attempts it ran."""

    __slots__ = ("conn", "group", "pid", "poller", "process", "sentinel", "tasks", "unread")

    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.pid: int | None = None
        self.sentinel = -1
        self.group = False  # True once the child leads its own process group
        self.tasks = 0
        self.poller: t.Any = None
        self.unread = False  # found readable while idle: a message out of turn, or its end

    def started(self) -> None:
        self.pid = self.process.pid
        self.sentinel = self.process.sentinel
        try:
            import select

            poller = select.poll()
            poller.register(self.conn.fileno(), select.POLLIN)
            poller.register(self.sentinel, select.POLLIN)
            self.poller = poller
        except (ImportError, AttributeError):  # no poll(2): use multiprocessing's wait
            self.poller = None

    def wait(self, timeout: float) -> tuple[bool, bool]:
        """Wait up to ``timeout`` seconds: (the pipe is readable, the child exited)."""
        end = monotonic() + timeout
        while True:
            remaining = min(max(0.0, end - monotonic()), _MAX_WAIT)
            if self.poller is not None:
                # poll(2) counts whole milliseconds: wait the whole ones there and
                # sleep the last fraction, so a kill is not a millisecond late.
                milliseconds = math.floor(remaining * 1000)
                if milliseconds == 0 and remaining > 0:
                    time.sleep(remaining)
                events = self.poller.poll(milliseconds)
                fds = {fd for fd, _ in events}
                readable, exited = self.conn.fileno() in fds, self.sentinel in fds
            else:
                from multiprocessing.connection import wait

                ready = wait([self.conn, self.sentinel], remaining)
                readable, exited = self.conn in ready, self.sentinel in ready
            if readable or exited or monotonic() >= end:
                return readable, exited

    def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the child to exit."""
        from multiprocessing.connection import wait

        return bool(wait([self.sentinel], timeout))

    def kill(self) -> None:
        """SIGKILL the child's process group (the child and what it started).

        The group's id is the child's pid, and it cannot be reused while any
        member lives, so this never hits a stranger; when the group is gone
        (ESRCH), there is no one left to kill. (The forkserver, the children's
        real parent, reaps a child as soon as it dies: its bare pid is no safe
        target once it has exited, its group id is.)"""
        if self.group and self.pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, _SIGKILL)
            return
        with contextlib.suppress(Exception):
            self.process.kill()

    def describe_exit(self) -> str:
        code = self.process.exitcode
        if code is None:
            return "closed its pipe without answering"
        if code < 0:
            try:
                return f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with code {code}"


_pools: weakref.WeakSet[ProcessPool] = weakref.WeakSet()
_hook_lock = threading.Lock()
_hooked = False


def _kill_all_at_exit() -> None:
    for pool in list(_pools):
        pool._kill_everything()


def empty_stats(max_workers: int) -> dict[str, int]:
    """The figures of a pool that has not started a child yet."""
    return {
        "workers": 0,
        "idle": 0,
        "busy": 0,
        "starting": 0,
        "pending": 0,
        "started": 0,
        "completed": 0,
        "timed_out": 0,
        "killed": 0,
        "died": 0,
        "recycled": 0,
        "strays": 0,
        "start_failures": 0,
        "not_started": 0,
        "max_workers": max_workers,
    }


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
        pool: ProcessPool,
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


class _Sent:
    """A call a session sent: the child running it, its deadline, a stray seen."""

    __slots__ = ("call", "child", "ends", "stray")

    def __init__(self, call: _Call, child: _Child, ends: float) -> None:
        self.call, self.child, self.ends, self.stray = call, child, ends, False


class _Session:
    """Submitted calls whose replies one thread reads itself (a batch's
    coordinator, while it waits for nothing else): it sends each call to a child
    and polls those children's pipes, so no driver thread stands between it and
    them. A child that answers goes on at once with the session's next queued
    call. Only its owner's thread uses it; the pool's lock guards what a call
    shares with :meth:`_Call.stop` (which may come from another thread).
    :meth:`detach` hands everything to the pool's drivers when the owner must
    wait for something else; :meth:`close` settles what is left at the end."""

    __slots__ = ("open", "poller", "pool", "queued", "running", "sentinels")

    def __init__(self, pool: ProcessPool) -> None:
        import select

        self.pool = pool
        self.open = True
        self.poller = select.poll()
        self.running: dict[int, _Sent] = {}  # by the child's pipe fd
        self.sentinels: dict[int, int] = {}  # a child's sentinel fd -> its pipe fd
        self.queued: collections.deque[_Call] = collections.deque()

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
        fd = child.conn.fileno()
        self.running[fd] = _Sent(call, child, ends)
        self.sentinels[child.sentinel] = fd
        self.poller.register(fd, _POLLIN)
        self.poller.register(child.sentinel, _POLLIN)

    def _drop(self, fd: int) -> None:
        child = self.running.pop(fd).child
        del self.sentinels[child.sentinel]
        self.poller.unregister(fd)
        self.poller.unregister(child.sentinel)

    def wait(self, timeout: float) -> _Call | None:
        """Wait up to ``timeout`` seconds for one of the running calls to end (its
        reply, its child's end, or its deadline: the child is killed); that call,
        or None. Queued calls take idle children first."""
        if self.queued:
            self._fill()
        running = self.running
        until = monotonic() + timeout
        while running:
            now = monotonic()
            soonest = min(sent.ends for sent in running.values())
            if soonest <= now:
                for fd, sent in running.items():
                    if sent.ends <= now:
                        return self._late(fd)
            if until <= now:
                return None
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
            if not events and self.queued:
                self._fill()
        return None

    def _read(self, fd: int) -> _Call | None:
        """A running call's pipe is readable (or its child ended): its end, or None
        (an event or a stray, read and dropped)."""
        sent = self.running[fd]
        call, child = sent.call, sent.child
        try:
            message = child.conn.recv_bytes()
        except (EOFError, OSError):
            message = None
        if message is not None:
            parsed = _pipe.unframe(message)
            if parsed is not None and parsed[0] == call.seq and parsed[1] in _pipe.REPLY_KINDS:
                return self._answered(fd, parsed[2])
            if parsed is not None and parsed[0] == call.seq and parsed[1] in _pipe.EVENT_KINDS:
                return None  # nobody listens (a listener's call runs in a lane)
            sent.stray = True
            _log.warning(
                "nous_tools: child process %s wrote to its pipe out of turn (%s, while "
                "it served call %s); discarded, and the child will be replaced",
                child.pid,
                _pipe.describe(message),
                call.seq,
            )
            return None
        self._drop(fd)  # the child ended without answering
        pool = self.pool
        with pool._lock:
            stopped = call.ended is not None
            call.child = None
        if stopped:
            pool._end(child, "interrupted")
        else:
            call.end((RAISED, pool._died(child, call.tool)))
        return call

    def _answered(self, fd: int, reply: memoryview) -> _Call:
        sent = self.running[fd]
        call, child, stray = sent.call, sent.child, sent.stray
        pool = self.pool
        following: _Call | None = None
        with pool._lock:
            stopped = call.ended is not None  # stop() killed the child, or is about to
            call.child = None
            if not stopped:
                call.ended = (_REPLY, reply)
                following = pool._answered(child, stray, self.queued)
                if following is not None:
                    following.child = child
        self._drop(fd)
        if stopped:
            pool._end(child, "interrupted")
            return call
        if following is not None:
            self.send(following, child)
        return call

    def _late(self, fd: int) -> _Call:
        """A running call's deadline passed: kill its child, end it as timed out."""
        sent = self.running[fd]
        call, child = sent.call, sent.child
        child.kill()  # first: the kill is at the deadline, the bookkeeping after
        self._drop(fd)
        pool = self.pool
        with pool._lock:
            stopped = call.ended is not None
            call.child = None
        pool._end(child, "interrupted" if stopped else "timed_out")
        call.end((TIMED_OUT, None))
        return call

    def _fill(self) -> None:
        """Queued calls take idle children (they appear as spares start)."""
        pool = self.pool
        while self.queued:
            with pool._lock:
                if pool._waiting or pool._shutdown:
                    return
                child = pool._pop_idle()
                if child is None:
                    return
                call = self.queued.popleft()
                call.waiting = False
                call.child = child
            self.send(call, child)

    def detach(self) -> None:
        """The owner must wait for something else: drivers take over what runs
        (waiting for its reply) and what is queued (waiting for a child)."""
        self.open = False
        pool = self.pool
        for fd in list(self.running):
            sent = self.running[fd]
            self._drop(fd)
            with pool._lock:
                sent.call.session = None
            pool._adopt(sent.call, sent.child, sent.ends, sent.stray)
        while self.queued:
            with pool._lock:
                if not self.queued:
                    break
                call = self.queued.popleft()
                call.session = None
            call.waiting = False
            if not pool._redo(call):  # shut down: it never starts
                call.end((SHUT_DOWN, None))

    def close(self) -> None:
        """The owner is done (its batch ended, or was interrupted and its calls
        stopped): settle every child the session still holds."""
        if self.running or self.queued:
            self.detach()
        self.open = False


class ProcessPool:
    """Child processes that run process-isolated attempts, reused, killed at deadlines.

    ``max_workers`` (default :func:`default_workers`) bounds the attempts that run
    at once; one more child is kept ready as a spare. ``max_tasks_per_child``
    (default None: no limit) replaces a child after that many attempts. Nothing
    starts until the first :meth:`run`.
    """

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        max_tasks_per_child: int | None = None,
        name: str = "nous-tools-process",
    ) -> None:
        check_option("ProcessPool", "max_workers", max_workers)
        check_option("ProcessPool", "max_tasks_per_child", max_tasks_per_child)
        if max_workers is None:
            max_workers = default_workers()
        self.max_workers = max_workers
        self.max_tasks_per_child = max_tasks_per_child
        self._name = name
        self._lock = threading.Lock()
        self._free = threading.Condition(self._lock)  # callers: a child is idle, or a start failed
        self._work = threading.Condition(self._lock)  # the keeper: start or end children
        self._children: set[_Child] = set()  # every child not yet reaped
        self._idle: list[_Child] = []
        self._busy: set[_Child] = set()
        self._ending: list[_Child] = []  # for the keeper to reap
        self._starting = 0
        self._waiting = 0  # callers waiting for a child
        self._fresh = 0  # ... of which began waiting after the last failed start
        self._start_error: str | None = None
        self._failures = 0
        self._counts = dict.fromkeys(
            (
                "started",
                "completed",
                "timed_out",
                "killed",
                "died",
                "recycled",
                "strays",
                "start_failures",
                "not_started",
            ),
            0,
        )
        # Submitted calls (a batch's) waiting for a driver, and the drivers.
        self._submitted: collections.deque[_Call] = collections.deque()
        self._queued = threading.Condition(self._lock)  # idle drivers: a call was submitted
        self._drivers = 0  # driver threads alive
        self._sleeping = 0  # ... of which wait for a call and have not been woken
        self._keeper: threading.Thread | None = None
        self._settling = False  # the keeper waits for running attempts to finish
        self._shutdown = False
        self._exiting = False
        self._numbers = itertools.count(1)
        self._calls = itertools.count(1)  # each call's sequence number, on the pipe
        self._mp: t.Any = None

    # -- running ---------------------------------------------------------------

    def run(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any] | None,
        deadline: float,
        on_event: c.Callable[[int, memoryview], object] | None = None,
        on_request: c.Callable[[int, bytes], bytes] | None = None,
        *,
        budget: float | None = None,
        queue_timeout: float | None = None,
    ) -> tuple[str, t.Any]:
        """Run one attempt of ``tool`` in a child; kill the child at its deadline
        (on :func:`~nous_tools._util._clock.monotonic`'s clock).

        Without ``budget``, ``deadline`` is the attempt's, counted from submission:
        the wait for a child is inside it. With ``budget`` (seconds), the attempt's
        deadline is set when a child takes the call, ``budget`` later, and
        ``deadline`` only bounds it (an enclosing attempt's deadline; ``math.inf``
        for none); ``ctx.deadline`` in the child is that deadline. ``queue_timeout``
        (seconds, or None: until ``deadline``) bounds the wait for a child.

        Returns ``(kind, value)``: ``RETURNED`` and the value, ``RAISED`` and the
        exception (:class:`ChildProcessDied` when the child died), ``TIMED_OUT``,
        :data:`QUEUE_TIMED_OUT` and ``(queue_timeout, max_workers)`` (no child came
        free in time: the tool never started), ``SHUT_DOWN``, or ``UNPICKLABLE``
        and a message naming what could not cross (or that no child could be
        started). ``ctx`` is passed to the tool (first, positionally) when it is not
        None. A ``KeyboardInterrupt`` (or any exception) raised in the caller while
        it waits kills the child, then propagates.

        The events the child sends during the call (:data:`nous_tools._engine._pipe.EVENT_KINDS`:
        what its tool reports, see :class:`nous_tools._engine._isolation.Events`) are
        handed to ``on_event(kind, payload)`` as they arrive, in this thread (what
        it raises is logged and dropped); without ``on_event`` they are dropped.
        The child's questions (:data:`nous_tools._engine._pipe.REQUEST_KINDS`: its tool's
        ``ctx.sample``/``ctx.elicit``) go to ``on_request(kind, payload) -> answer``,
        in a thread of its own (an answer may take a person's time; the deadline
        still holds), and the answer is written back while the call is on.
        Anything else on the pipe that is not this call's reply is a stray:
        discarded, logged, and the child is replaced after the call.
        """
        if budget is not None and budget <= 0:
            return self._expired()
        try:
            request = _isolation.encode_request(tool, arguments, ctx)
        except _isolation.Unpicklable as exc:
            return _isolation.UNPICKLABLE, str(exc)
        seq = next(self._calls)
        message = _pipe.call_frame(seq, request)
        queue_until = None if queue_timeout is None else monotonic() + queue_timeout
        while True:
            taken = self._take(deadline, queue_until, queue_timeout)
            if type(taken) is tuple:
                return taken
            child = t.cast(_Child, taken)
            if budget is not None:  # the attempt's deadline starts now
                ends = monotonic() + budget
                if ends > deadline:
                    ends = deadline
                _pipe.set_deadline(message, ends)
            else:
                ends = deadline
            try:
                child.conn.send_bytes(message)
                break
            except OSError:  # it died while idle: the tool never started; take another
                self._end(child, "died")
            except BaseException:
                self._end(child, "interrupted")
                raise
        gate = _Gate() if on_request is not None else None
        try:
            answer = self._wait_reply(child, seq, ends, on_event, on_request, gate)
        except BaseException:  # KeyboardInterrupt in the caller: kill as at a deadline
            self._end(child, "interrupted")
            raise
        finally:
            if gate is not None:
                gate.close()  # a late answer never reaches the child's next call
        if answer is _LATE:
            self._end(child, "timed_out")
            return TIMED_OUT, None
        if answer is _ENDED:
            return RAISED, self._died(child, tool)
        reply, stray = t.cast("tuple[memoryview, bool]", answer)
        self._release(child, stray)
        return _isolation.decode_reply(reply)

    def _wait_reply(
        self,
        child: _Child,
        seq: int,
        deadline: float,
        on_event: c.Callable[[int, memoryview], object] | None,
        on_request: c.Callable[[int, bytes], bytes] | None = None,
        gate: _Gate | None = None,
    ) -> object:
        """Wait until ``deadline`` for call ``seq``'s reply on ``child``'s pipe:
        ``(reply, stray)`` (stray: something else came on the pipe meanwhile),
        :data:`_LATE` (the deadline passed) or :data:`_ENDED` (the child ended
        without answering). Events of the call go to ``on_event``; its requests
        (``ctx.sample``, ``ctx.elicit``) to ``on_request``, answered in a thread of
        their own while ``gate`` is open. Counts nothing, kills nothing: the caller
        decides."""
        stray = False
        while True:
            readable, exited = child.wait(deadline - monotonic())
            if not readable and not exited:
                return _LATE
            try:
                message = child.conn.recv_bytes() if readable else None
            except (EOFError, OSError):
                message = None
            if message is None:  # the child ended without answering
                return _ENDED
            parsed = _pipe.unframe(message)
            if parsed is not None and parsed[0] == seq:
                kind = parsed[1]
                if kind in _pipe.REPLY_KINDS:
                    return parsed[2], stray
                if kind in _pipe.EVENT_KINDS:
                    if on_event is not None:
                        self._event(on_event, kind, parsed[2])
                    continue
                if kind in _pipe.REQUEST_KINDS and on_request is not None and gate is not None:
                    _answer(child, seq, kind, bytes(parsed[2]), on_request, gate)
                    continue
            stray = True
            _log.warning(
                "nous_tools: child process %s wrote to its pipe out of turn (%s, while "
                "it served call %s); discarded, and the child will be replaced",
                child.pid,
                _pipe.describe(message),
                seq,
            )

    @staticmethod
    def _event(
        on_event: c.Callable[[int, memoryview], object], kind: int, payload: memoryview
    ) -> None:
        """Hand a call's event to its handler; what the handler raises is logged."""
        try:
            on_event(kind, payload)
        except Exception:
            _log.exception(
                "nous_tools: the handler of a child's event (kind %s) raised; ignored", kind
            )

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
                if call.queue_until < call.cap:
                    self._counts["not_started"] += 1
                    call.ended = (QUEUE_TIMED_OUT, (call.queue_timeout, self.max_workers))
                else:
                    self._counts["timed_out"] += 1
                    call.ended = (TIMED_OUT, None)
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
        answer = self._wait_reply(child, call.seq, ends, None)
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
        self, child: _Child, stray: bool, queue: collections.deque[_Call] | None = None
    ) -> _Call | None:  # with the lock
        """A submitted call's child answered: the next call of ``queue`` (default:
        the submitted calls) it serves at once (it stays busy), or None when it is
        released."""
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
            self._counts["completed"] += 1
            child.tasks += 1
            following = queue.popleft()
            following.waiting = False
            return following
        self._put_back(child, stray, True)
        return None

    def _release(self, child: _Child, stray: bool = False, *, counted: bool = True) -> None:
        """An attempt ended with a reply: the child goes idle, or is recycled, or
        (``stray``: it wrote out of turn) replaced. ``counted=False``: the child
        was taken and given back unused."""
        with self._lock:
            self._put_back(child, stray, counted)

    def _put_back(self, child: _Child, stray: bool, counted: bool) -> None:  # with the lock
        self._busy.discard(child)
        if counted:
            self._counts["completed"] += 1
            child.tasks += 1
        limit = self.max_tasks_per_child
        if stray or self._shutdown or (limit is not None and child.tasks >= limit):
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
        mp = self._mp
        parent_end, child_end = mp.Pipe(duplex=True)
        process = mp.Process(
            target=_child_main,
            args=(child_end,),
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
        with self._lock:
            exiting = self._exiting
        if exiting:
            child.kill()
            raise _StartFailed("the interpreter is exiting")
        readable, _ = child.wait(_START_TIMEOUT)
        try:
            answer = parent_end.recv_bytes() if readable else None
        except (EOFError, OSError):
            answer = None
        ready = _pipe.unframe(answer) if answer is not None else None
        if answer is None:
            exited = child.wait_exit(_EXIT_GRACE if readable else 0)
            child.kill()
            process.join(_EXIT_GRACE)
            with self._lock:
                self._children.discard(child)
            parent_end.close()
            if not readable and not exited:
                raise _StartFailed(f"the child process was not ready after {_START_TIMEOUT:g} s")
            raise _StartFailed(
                f"the child process {child.describe_exit()} while starting (a script that "
                'uses isolation="process" must guard its top-level code with '
                '`if __name__ == "__main__":`; see the child\'s traceback above)'
            )
        child.group = (
            _GROUPS
            and ready is not None
            and ready[:2] == (0, _pipe.READY)
            and ready[2] == str(process.pid).encode()
        )
        return child

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

    # -- state -----------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Children and attempts: ``workers`` (live children: ``idle`` + ``busy`` +
        ``starting``), ``pending`` (callers waiting for a child), ``started``,
        ``completed`` (attempts that answered), ``timed_out`` (attempts past their
        deadline: killed, or still queued when it passed), ``killed``, ``died``,
        ``recycled``, ``strays`` (children replaced because they wrote to their pipe
        out of turn), ``start_failures``, ``not_started`` (calls that waited past
        their ``queue_timeout``) and ``max_workers``."""
        with self._lock:
            figures = empty_stats(self.max_workers)
            figures.update(self._counts)
            figures["idle"] = len(self._idle)
            figures["busy"] = len(self._busy)
            figures["starting"] = self._starting
            figures["workers"] = len(self._idle) + len(self._busy) + self._starting
            figures["pending"] = self._waiting
            return figures

    def pids(self) -> list[int]:
        """The process ids of the live children, idle and busy (for diagnostics)."""
        with self._lock:
            return sorted(ch.pid for ch in (*self._idle, *self._busy) if ch.pid is not None)

    def shutdown(self, wait: bool = True) -> None:
        """Accept no more attempts and end every child. With ``wait``, wait for the
        running attempts (each ends by its deadline) and until every child has
        exited; without, children end in the background. Idempotent."""
        with self._lock:
            self._shutdown = True
            self._ending.extend(self._idle)
            self._idle.clear()
            self._free.notify_all()
            self._work.notify_all()
            self._queued.notify_all()
            keeper = self._keeper
            unstarted = list(self._submitted)
        for call in unstarted:  # no driver takes them now: they never start
            call.stop(SHUT_DOWN)
        if wait and keeper is not None and keeper is not threading.current_thread():
            keeper.join()

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
    """Have the forkserver import this module before it forks children, so a
    child does not import ``nous_tools`` itself. Only before the server starts,
    and keeping whatever preload list is already set (private attributes, read
    defensively: if they are not there, children import on their own)."""
    try:
        from multiprocessing import forkserver

        server = getattr(forkserver, "_forkserver", None)
        if server is None or getattr(server, "_forkserver_pid", 0) is not None:
            return
        preload = list(getattr(server, "_preload_modules", ["__main__"]))
        if __name__ not in preload:
            context.set_forkserver_preload([*preload, __name__])
    except Exception:
        pass
