"""``execute_many``'s batch, coordinated by its caller (private).

:class:`Batches`, what :class:`~nous_tools.ToolExecutor` runs a batch with: a batch run from
the caller's thread without a thread per call — each call's approval, validation
and conversion in the caller, its timed first attempt handed to a pool worker or a
child process and not awaited, the ends and deadlines taken as they come; a call
that needs a thread of its own runs whole in a lane.
"""

from __future__ import annotations

import collections
import collections.abc as c
import contextlib
import contextvars
import functools
import heapq
import queue
import threading
import typing as t

from nous_tools._engine import _reporting
from nous_tools._engine._pool import TIMED_OUT
from nous_tools._util._clock import monotonic
from nous_tools._util._scope import Scope, here, interrupts
from nous_tools._util._text import safe_str as _safe_str
from nous_tools.backend import ProcessBackend
from nous_tools.errors import ToolError
from nous_tools.executor._attempts import (
    _NO_CAP,
    Attempts,
    _Failure,
    _internal_error,
    _log_signal,
    _progress,
)
from nous_tools.executor._call import Calls
from nous_tools.executor._handoff import _PENDING, _RETRY, HandOffs, _Job
from nous_tools.executor._lanes import _Tally, could_not_run
from nous_tools.results import Err, Result
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool

#: The longest a batch's caller in the main thread waits at once. A SIGINT that
#: arrives just as a thread enters a blocking wait (after Python last looked for
#: signals) is handled only when that wait ends: the caller of a batch, woken by a
#: worker at the very moment it starts waiting, would see Ctrl-C only at the next
#: deadline. Waiting in slices bounds that delay.
_SIGNAL_SLICE = 0.05


class _Batch:
    """Where a batch run by :meth:`Batches.run` stands."""

    __slots__ = (
        "ahead",
        "channels",
        "ctx",
        "deadlines",
        "direct",
        "enter",
        "jobs",
        "lanes",
        "notify",
        "pending",
        "results",
        "run",
        "scope",
        "session",
        "straight",
        "tally",
        "timers",
        "waiting",
    )

    def __init__(
        self,
        jobs: c.Sequence[tuple[Tool, t.Any, str | None] | Err],
        todo: list[int],
        results: list[t.Any],
        ctx: RunContext[t.Any] | None,
        scope: Scope,
        tally: _Tally | None = None,
    ) -> None:
        self.jobs = jobs
        self.pending = collections.deque(todo)  # calls not started yet, in order
        self.results = results
        self.ctx = ctx
        self.scope = scope
        self.notify: queue.SimpleQueue[t.Any] = queue.SimpleQueue()  # ended tasks and lanes
        self.waiting: dict[t.Any, _Job] = {}  # task -> the call whose first attempt it runs
        self.deadlines: list[tuple[float, int, t.Any]] = []  # a heap of (deadline, i, task)
        self.lanes = 0  # calls (or their retries) running in lanes
        self.tally = tally  # on_progress, told of each call that ends
        # What the running first attempts report (see _reporting): their channels,
        # and when each wants to be served again.
        self.channels: dict[_reporting.Channel, _Job] = {}
        self.timers: dict[_reporting.Channel, float] = {}
        # Process calls whose replies the caller reads itself while it waits for
        # nothing else (see ProcessPool.session); off for good once it must.
        self.session: t.Any = None
        self.direct = True
        self.ahead: Tool | None = None  # the tool of the last call handed to the session
        # A caller's own way to run a call whole (a registry's), the calls it lets go
        # straight to the pipeline, and what it sets up in each call's context.
        self.run: c.Callable[[Tool, t.Any, RunContext[t.Any] | None, str | None], t.Any] | None
        self.run = None
        self.straight: c.Callable[[Tool], bool] | None = None
        self.enter: c.Callable[[int], object] | None = None


class Batches:
    """The batch of :meth:`~nous_tools.ToolExecutor.execute_many`, coordinated by its
    caller: it composes the pipeline's steps — a call's :class:`Calls` entry (its
    timed first attempt handed off by :class:`HandOffs`), the retries of
    :class:`Attempts` — and is composed by none of them."""

    def __init__(
        self, attempts: Attempts, hand_offs: HandOffs, calls: Calls, journaled: bool
    ) -> None:
        self._attempts = attempts
        self._hand_offs = hand_offs
        self._calls = calls
        self._pool = attempts.pool
        self._journaled = journaled  # a journaled executor's calls run whole, in lanes

    def run(
        self,
        jobs: c.Sequence[tuple[Tool, t.Any, str | None] | Err],
        todo: list[int],
        results: list[t.Any],
        ctx: RunContext[t.Any] | None,
        batch: Scope,
        limit: int,
        tally: _Tally | None = None,
        *,
        run: c.Callable[[Tool, t.Any, RunContext[t.Any] | None, str | None], t.Any] | None = None,
        straight: c.Callable[[Tool], bool] | None = None,
        enter: c.Callable[[int], object] | None = None,
    ) -> None:
        """``execute_many``'s batch, run from the caller's thread without a thread per call.

        For each call in turn, while fewer than ``limit`` (at most ``max_workers``) of the batch's calls
        run: approval, validation and conversion in the caller, in a copy of its
        ``contextvars`` context made for that call (where all the call's signals are
        sent), then its timed first attempt handed to a pool worker
        (:meth:`WorkerPool.submit`), not awaited. The caller then waits for whichever
        ends first — a task's ``notify`` queue, or the earliest deadline, at which the
        task is abandoned as ``execute`` would. A call that needs a thread of its own
        (an inline or process-isolated tool, an approval handler to ask, a tool whose
        attempts may wait for a ``max_concurrency`` slot) runs whole in a lane, and so do the attempts after a first one that failed and may be
        retried (``retry_wait`` sleeps there); a lane reports to the same queue, and
        so does what a running first attempt reports (progress, log lines: see
        :mod:`nous_tools._engine._reporting`), which the caller delivers as it comes.

        With ``run`` (a registry's batch), a call runs whole in a lane through
        ``run(tool, arguments, ctx, call_id)`` unless ``straight(tool)`` says the
        executor's pipeline is all ``run`` would do for it; ``enter(i)`` is called in
        the context of call ``i`` before anything of it runs.
        """
        state = _Batch(jobs, todo, results, ctx, batch, tally)
        state.run, state.straight, state.enter = run, straight, enter
        saved = here.scope
        here.scope = batch  # the calls' tasks are the batch's children
        try:
            # The loop lives in a function of its own, and every handler here: in
            # CPython 3.11 an exception raised by the eval breaker at a loop's backward
            # jump can skip the try statement around that loop in the same function
            # (gh-107901), but never the one around the call.
            self._coordinate(state, limit)
        except BaseException:
            self._pool.cancel(batch)
            if state.session is not None:
                state.session.close()  # the children of its stopped calls
            if state.waiting:  # their signals and log lines, off the interrupted caller's path
                self._wind_down(list(state.waiting.items()), batch)
            raise
        finally:
            here.scope = saved
            if state.session is not None:
                state.session.close()

    def _coordinate(self, state: _Batch, limit: int) -> None:
        """:meth:`run`'s loop: start calls while there is room, then take the
        next call that ends or whose deadline passes, until every call has ended."""
        main = threading.current_thread() is threading.main_thread()
        gated = isinstance(state.ctx, RunContext) and state.ctx.approval_gated
        while True:
            self._start_calls(state, limit, gated)
            if not state.waiting and not state.lanes:
                return
            # Abandon the calls whose deadlines have passed; wait for the next end or
            # the next deadline, whichever comes first.
            timeout = self._expire(state)
            if not state.waiting and not state.lanes:
                continue
            if state.timers:  # a channel wants serving again (a held progress update)
                timeout = self._serve_due(state, timeout)
            if main and (timeout is None or timeout > _SIGNAL_SLICE):
                timeout = _SIGNAL_SLICE
            session = state.session
            if session is not None and session.open:
                if (
                    (session.running or session.done)
                    and len(state.waiting) == session.holds()
                    and not state.lanes
                    and not state.timers
                ):  # only its own process calls are under way: read their pipes
                    self._read_session(state, session, timeout)
                    continue
                session.detach()  # other work to wait for: drivers take its calls
                state.direct = False
            self._take_next(state, timeout)

    def _start_calls(self, state: _Batch, limit: int, gated: bool) -> None:
        """Start the batch's next calls while fewer than ``limit`` run: each in a
        copy of the caller's context, its timed first attempt handed off, or the
        call run whole in a lane."""
        jobs, pending, waiting = state.jobs, state.pending, state.waiting
        while (
            pending
            and (len(waiting) + state.lanes < limit or self._ahead(state, jobs[pending[0]]))
            and not state.scope.cancelled
        ):
            i = pending.popleft()
            tool, arguments, call_id = t.cast(tuple[Tool, t.Any, "str | None"], jobs[i])
            job = _Job(i, contextvars.copy_context(), state.notify)
            if state.enter is not None:
                job.context.run(state.enter, i)
            if isinstance(tool, Tool) and self._runs_whole(state, tool, job, gated):
                job.tool = tool
                whole = functools.partial(self._whole, state, tool, arguments, call_id)
                state.lanes += self._in_lane(job, whole, state.results, state.scope, state.tally)
                continue
            if job.process is not None and state.direct:
                job.session = self._session_of(state, job.process)
                state.ahead = tool
            result = job.context.run(self._call, tool, arguments, state.ctx, call_id, job)
            if result is _PENDING:
                task = job.task
                waiting[task] = job
                heapq.heappush(state.deadlines, (task.deadline, i, task))
                if job.channel is not None:
                    state.channels[job.channel] = job
            else:
                state.lanes += self._job_ended(job, result, state.results, state.scope, state)

    def _runs_whole(self, state: _Batch, tool: Tool, job: _Job, gated: bool) -> bool:
        """Whether a batch's call runs whole in a lane (it needs a thread of its own)
        rather than having its first attempt handed off."""
        return (
            tool.timeout is None
            or not (self._on_threads(tool) or self._in_children(tool, state.ctx, job))
            or (tool.approval == "ask" and not gated)
            or (tool._limits is not None and tool._limits.in_lane)
            or self._journaled
            or (state.straight is not None and not state.straight(tool))
        )

    def _whole(self, state: _Batch, tool: Tool, arguments: t.Any, call_id: str | None) -> Result:
        """A batch's call run whole, in its lane: through the caller's ``run`` (a
        registry's), or the pipeline's entry."""
        if state.run is not None:
            return t.cast(Result, state.run(tool, arguments, state.ctx, call_id))
        return self._calls.job(tool, arguments, state.ctx, call_id)

    def _expire(self, state: _Batch) -> float | None:
        """End the calls whose deadlines have passed (their tasks abandoned as
        ``execute`` would); how long until the next deadline (None: none)."""
        pool, waiting, deadlines = self._pool, state.waiting, state.deadlines
        timeout: float | None = None
        while deadlines:
            deadline, _, task = deadlines[0]
            if task not in waiting:
                heapq.heappop(deadlines)  # it has ended
                continue
            timeout = deadline - monotonic()
            if timeout > 0:
                break
            heapq.heappop(deadlines)
            timeout = None
            if task.pool is pool:
                job = waiting.pop(task)
                pool.forget(task)
                outcome = pool.expire(task)
            else:  # a process call, at the end of its wait for a child
                outcome = task.pool.expire(task)
                if outcome is None:
                    continue  # a child runs it: its end comes on the queue
                job = waiting.pop(task)
                pool.forget(task)
            state.lanes += self._job_ended(job, outcome, state.results, state.scope, state)
        return timeout

    def _serve_due(self, state: _Batch, timeout: float | None) -> float | None:
        """Serve the channels whose time has come; ``timeout`` shortened to the
        next one's."""
        now = monotonic()
        for channel, again in list(state.timers.items()):
            if again <= now:
                self._serve(state, channel)
        if state.timers:
            soonest = max(0.0, min(state.timers.values()) - now)
            if timeout is None or soonest < timeout:
                timeout = soonest
        return timeout

    def _read_session(self, state: _Batch, session: t.Any, timeout: float | None) -> None:
        """Wait for the batch's own process calls on their pipes (nothing else is
        under way), and take the one that ends."""
        ended = session.wait(_NO_CAP if timeout is None else timeout)
        if ended is not None and ended in state.waiting:
            self._pool.forget(ended)
            job = state.waiting.pop(ended)
            outcome = ended.pool.outcome(ended)
            state.lanes += self._job_ended(job, outcome, state.results, state.scope, state)

    def _take_next(self, state: _Batch, timeout: float | None) -> None:
        """Wait up to ``timeout`` for what comes next on the batch's queue — a lane
        that ended, a running attempt's report, a task's end — and take it."""
        try:
            item = state.notify.get(True, timeout)
        except queue.Empty:
            return  # a deadline (abandoned next round), or a Ctrl-C to look for
        if type(item) is _Job:  # a lane ended
            state.lanes -= 1
            if state.tally is not None:
                state.tally.ended(state.results[item.index])
        elif type(item) is _reporting.Channel:  # a running attempt reported
            self._serve(state, item)
        else:
            job = state.waiting.pop(item, None)
            if job is not None:  # else: ended at its deadline already
                self._pool.forget(item)
                outcome = item.pool.outcome(item)
                state.lanes += self._job_ended(job, outcome, state.results, state.scope, state)

    @staticmethod
    def _serve(state: _Batch, channel: _reporting.Channel) -> None:
        """Deliver what a batch call's running first attempt reported, in the call's
        context; note when its channel wants serving again."""
        job = state.channels.get(channel)
        if job is None:  # the call has ended: its channel was finished then
            state.timers.pop(channel, None)
            return
        again = job.context.run(channel.serve)
        if again is None:
            state.timers.pop(channel, None)
        else:
            state.timers[channel] = again

    def _call(
        self,
        tool: Tool,
        arguments: t.Any,
        ctx: RunContext[t.Any] | None,
        call_id: str | None,
        job: _Job,
    ) -> t.Any:
        """``ToolExecutor.execute`` for a batch's call, in the batch's caller: a result, or
        ``_PENDING`` when its first attempt was handed to a worker."""
        try:
            return self._calls.entry(tool, arguments, ctx, call_id, job=job)
        except BaseException as exc:  # a bug of ours must not reach the caller either
            if interrupts(exc):
                raise
            return _internal_error(tool, exc)

    @staticmethod
    def _ahead(state: _Batch, job: t.Any) -> bool:
        """Whether the batch hands over one more call beyond its ``limit``: a call of
        the tool whose calls its session runs, when that call would go ahead to a busy
        child at once (quick calls: see ``_Session.room``)."""
        session = state.session
        return (
            session is not None
            and state.direct
            and type(job) is tuple
            and job[0] is state.ahead
            and session.room()
        )

    @staticmethod
    def _session_of(state: _Batch, process: ProcessBackend) -> t.Any:
        """The batch's session with ``process``'s children (one pool per batch)."""
        session = state.session
        if session is None:
            session = state.session = process.pool.session()
            if session is None:  # no poll(2) here
                state.direct = False
                return None
        return session if session.pool is process.pool else None

    def _job_ended(
        self, job: _Job, outcome: t.Any, results: list[t.Any], batch: Scope, state: _Batch
    ) -> int:
        """Record a batch call's result, or start its retries in a lane; the number
        of lanes started (0 or 1). ``outcome`` is the pool's, or a result already."""
        result = (
            job.context.run(self._hand_offs.finish_hand_off, job, outcome)
            if type(outcome) is tuple
            else outcome
        )
        if job.channel is not None:
            state.channels.pop(job.channel, None)
            state.timers.pop(job.channel, None)
        if result is not _RETRY:
            results[job.index] = result
            if state.tally is not None:
                state.tally.ended(result)
            return 0
        failure = t.cast(_Failure, job.failure)

        def retries() -> Result:
            return self._attempts.retry(
                job.tool, job.arguments, job.ctx, failure, job.total, job.call_id
            )

        return self._in_lane(job, retries, results, batch, state.tally)

    def _in_lane(
        self,
        job: _Job,
        run: c.Callable[[], Result],
        results: list[t.Any],
        batch: Scope,
        tally: _Tally | None = None,
    ) -> int:
        """Run ``run()`` for a batch's call in a lane, in the call's context; the lane
        puts ``job`` on the batch's queue when it ends. The number of lanes started:
        0 when no thread could be had (the call is then an ``Err`` saying so)."""
        i = job.index

        def lane() -> None:
            try:
                results[i] = run()
            except BaseException as exc:
                results[i] = could_not_run(job.tool, exc)
            finally:
                job.notify.put(job)

        try:
            self._pool.start_lane(lane, batch, context=job.context)
        except RuntimeError as exc:  # no thread to be had
            results[i] = Err(
                ToolError(
                    f"Tool '{getattr(job.tool, 'name', 'unknown')}' could not be run: "
                    f"no thread could be started ({_safe_str(exc)})",
                    original_error=exc,
                )
            )
            if tally is not None:
                tally.ended(results[i])
            return 0
        return 1

    def _wind_down(self, waiting: list[tuple[t.Any, _Job]], batch: Scope) -> None:
        """After an interrupted batch (its scope cancelled): the end of each call that
        was waiting for a worker — its signals and log lines, as ``execute`` gives
        them for a cancelled call — in a lane, off the interrupted caller's path."""

        def lane() -> None:
            for task, job in waiting:
                outcome = task.pool.expire(task)  # (a process call: stopped already)
                if outcome is None:
                    outcome = (TIMED_OUT, None, None)
                job.context.run(self._hand_offs.finish_hand_off, job, outcome)

        with contextlib.suppress(RuntimeError):
            self._pool.start_lane(lane, batch)

    def _in_children(self, tool: Tool, ctx: RunContext[t.Any] | None, job: _Job) -> bool:
        """Whether a batch hands ``tool``'s first attempt straight to child processes
        (sets ``job.process``): its backend is a :class:`ProcessBackend`, nobody
        listens to what the tool reports and its context cannot be asked questions
        (such a call runs in a lane, whose thread delivers the reports and answers
        the questions)."""
        backend = self._attempts.backend_of(tool)
        if type(backend) is not ProcessBackend:
            return False
        if tool.sandbox is not None or (
            isinstance(ctx, RunContext) and ctx.sandbox is not None and ctx.sandbox.enforced
        ):
            return False  # confined children: its own pool, through the lane's _timed
        if tool.takes_ctx and (
            _progress.receivers
            or _log_signal.receivers
            or (
                isinstance(ctx, RunContext)
                and (
                    ctx._channel is not None or ctx.sampler is not None or ctx.elicitor is not None
                )
            )
        ):
            return False
        job.process = backend
        return True

    def _on_threads(self, tool: Tool) -> bool:
        """Whether ``tool``'s timed attempts run on this executor's worker threads
        (a batch hands those straight to the pool; any other backend runs them in a
        lane, through ``Attempts._timed``)."""
        return self._attempts.on_threads(self._attempts.backend_of(tool))
