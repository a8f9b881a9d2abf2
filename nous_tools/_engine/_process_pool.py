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
  forkserver is not running yet, the child's module is added to its preload
  list, so a new child is a fork of a server that has already imported
  ``nous_tools``: a few milliseconds instead of the whole import.
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
  call; anything else -- a message a helper thread wrote -- is a stray: it is
  discarded and logged, and the child that wrote it out of turn is replaced
  (after the call; if it wrote while idle, when it is next taken). A copy a tool
  forked that returns into the child's loop leaves at once: its original answers.
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
  are not handed between threads. A session also sends calls *ahead* to busy
  children, to wait in their pipes (``_process_session`` says how, and what a
  call sent ahead keeps of the rules above), so a child never waits for the
  caller between two calls of a batch.
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

The parts: :class:`ProcessPool` (here) runs one call and holds the pool's state;
``_process_batch`` runs submitted calls (drivers), ``_process_session`` the
calls a batch's own thread reads (sessions, calls sent ahead), ``_process_keeper``
lends children to calls and takes them back, starts and reaps them,
``_process_handle`` is the parent's end of one child (its pipe, the wait, the
kill) and ``_process_child`` what runs in the child.
"""

from __future__ import annotations

import collections
import collections.abc as c
import itertools
import os
import threading
import typing as t

from nous_tools._engine import _isolation, _pipe
from nous_tools._engine._outcome import QUEUE_TIMED_OUT, RAISED, SHUT_DOWN, TIMED_OUT
from nous_tools._engine._process_batch import _Batches
from nous_tools._engine._process_handle import _ENDED, _LATE, _Child, _Gate, _wait_reply
from nous_tools._engine._process_session import _Call
from nous_tools._util._clock import monotonic
from nous_tools.errors import SandboxLimitReached

if t.TYPE_CHECKING:
    from nous_tools._engine._fence import Confinement
    from nous_tools.run_context import RunContext
    from nous_tools.tool import Tool

__all__ = ["QUEUE_TIMED_OUT", "ProcessPool", "check_option", "default_workers", "empty_stats"]


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


class ProcessPool(_Batches):
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
        confinement: Confinement | None = None,
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
        self._confinement = confinement  # the sandbox's fence every child enters

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
        cancelled: threading.Event | None = None,
    ) -> tuple[str, t.Any]:
        """Run one attempt of ``tool`` in a child; kill the child at its deadline
        (on :func:`~nous_tools._util._clock.monotonic`'s clock), or as soon as
        ``cancelled`` (the caller's ``ctx.cancelled``) is set.

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
            answer = _wait_reply(child, seq, ends, on_event, on_request, gate, cancelled)
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
        outcome = _isolation.decode_reply(reply)
        # A child that reached a limit of its sandbox is replaced, not reused.
        spent = outcome[0] == RAISED and type(outcome[1]) is SandboxLimitReached
        self._release(child, stray, retire=spent)
        return outcome

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
