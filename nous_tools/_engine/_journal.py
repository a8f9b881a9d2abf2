"""The journal's steps in the pipeline (private).

Step 0, before approval (:func:`run_journaled`, :func:`peek`): the journal is read, and a
completed call replays its stored outcome, a conflict, a call in progress or one
whose outcome is unknown is answered — nothing below runs. Step 4, right before the
first attempt (:meth:`JournalClaim.start`): ``started`` is written, atomically and
durably. Step 6, after the last attempt (:meth:`JournalClaim.finish`): ``completed``
with the outcome. What a repeat of a key gets is the table of
``docs/concepts/journal.md``.

The journal's own exceptions never leave here: each is an ``Err(JournalUnavailable)``
naming why, and the call does not run (fail closed).
"""

from __future__ import annotations

import collections.abc as c
import logging
import time
import typing as t

import attrs

from nous_tools import signals as _signals
from nous_tools._util._clock import monotonic, wall
from nous_tools._util._log import log as _log
from nous_tools._util._text import safe_str
from nous_tools.approval._store import already_used
from nous_tools.errors import (
    ApprovalAlreadyUsed,
    CallInProgress,
    JournalConflict,
    JournalUnavailable,
    OutcomeUnknown,
    ToolError,
)
from nous_tools.journal import _leases
from nous_tools.journal._approvals import ApprovalTaken
from nous_tools.journal._wait import bounded
from nous_tools.results import Err

_logger = _log.logger
#: The least a completed record may wait for a lock, however little of the call's
#: deadline is left (the tool has run: its outcome is worth a short wait).
_LEAST_WAIT = 1.0

if t.TYPE_CHECKING:  # _record is imported at the first journaled call, not with the package
    from nous_tools.journal._record import JournalRecord
    from nous_tools.results import Result
    from nous_tools.run_context import RunContext
    from nous_tools.tool import Tool


class Rest(t.Protocol):
    """The rest of a call's pipeline after step 0 (``Calls._gated``, above the
    engine): steps 1 to 6, recorded through ``claim`` when the journal claimed the
    call (None: unjournaled). The journal step calls it once and never calls back."""

    def __call__(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        call_id: str | None,
        skip_approval: bool,
        shielded: bool,
        job: t.Any,
        claim: Claim | None,
        /,
    ) -> Result: ...


__all__ = [
    "UNJOURNALED",
    "Claim",
    "JournalClaim",
    "Rest",
    "check_journal",
    "peek",
    "resolve_call",
    "resolve_conflict",
    "run_journaled",
    "step0",
    "unjournaled",
]


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: ``journal=`` of a call the executor must not journal (it has no key, or the
#: journal already decided about it).
UNJOURNALED = _Marker("UNJOURNALED")


class Claim:
    """What the executor's pipeline is given as ``journal`` once step 0 has let a
    call go on: :meth:`start` right before the first attempt, :meth:`finish` after
    the last."""

    __slots__ = ()

    def start(self, tool: Tool, ctx: RunContext[t.Any]) -> RunContext[t.Any] | Result:
        """The context the attempts run in, or the call's result when it must not
        run (it was answered elsewhere meanwhile, or the journal failed)."""
        raise NotImplementedError

    def finish(self, tool: Tool, result: Result) -> None:
        """Record the call's outcome. Never raises."""
        raise NotImplementedError

    def abandon(self) -> None:
        """The call was started but will not finish here (the caller was interrupted):
        its outcome is unknown. Never raises."""


def check_journal(owner: str, journal: object) -> None:
    """``TypeError`` unless ``journal`` is None or has what a journal needs."""
    if journal is None or callable(getattr(journal, "_run_call", None)):
        return
    missing = [
        name for name in ("get", "start", "complete") if not callable(getattr(journal, name, None))
    ]
    grace = getattr(journal, "grace", None)
    if missing or type(grace) not in (int, float):
        lacking = ", ".join([*missing, *([] if type(grace) in (int, float) else ["grace"])])
        raise TypeError(
            f"{owner} option 'journal' must be a nous_tools.Journal (SQLiteJournal, "
            f"PostgresJournal, ...); {type(journal).__name__} has no {lacking}"
        )


class _Go:
    """Step 0's answer "run it": ``replace`` is the owner of an expired record
    that an ``idempotent=True`` call takes over (None: a new record)."""

    __slots__ = ("replace",)

    def __init__(self, replace: str | None) -> None:
        self.replace = replace


_RUNNING = _Marker("_RUNNING")


class _Call:
    """A call being decided: its journal, its key and what identifies it."""

    __slots__ = ("call_id", "decision", "digest", "journal", "run_id", "tool")

    def __init__(
        self,
        journal: t.Any,
        tool: Tool,
        run_id: str,
        call_id: str,
        digest: str,
        decision: str | None = None,
    ) -> None:
        self.journal = journal
        self.tool = tool
        self.run_id = run_id
        self.call_id = call_id
        self.digest = digest
        self.decision = decision


def _unavailable(call: _Call, doing: str, exc: BaseException) -> Err:
    from nous_tools.journal._record import Corrupt

    name = call.tool.name
    why = safe_str(exc) if isinstance(exc, Corrupt) else f"{type(exc).__name__}: {safe_str(exc)}"
    _log.error(
        "Call journal failed to %s the call of tool '%s' (%s); the call was not run",
        doing,
        name,
        type(exc).__name__,
    )
    return Err(
        JournalUnavailable(
            f"Tool '{name}' was not run: the call journal could not {doing} call "
            f"{call.call_id!r} of run {call.run_id!r} ({why})",
            tool_name=name,
            original_error=exc,
        )
    )


def _conflict(call: _Call, record: JournalRecord) -> JournalConflict:
    name = call.tool.name
    if record.tool != name:
        what = f"for tool '{record.tool}'"
        rule = "the same call id for another call never runs"
    elif record.digest != call.digest:
        what = "with other arguments"
        rule = "the same call id with other arguments never runs"
    else:
        what = f"with another decision ({_shown(record.decision)}, not {_shown(call.decision)})"
        rule = "a call is decided once"
    return JournalConflict(
        f"Tool '{name}' was not run: call {call.call_id!r} of run {call.run_id!r} is in "
        f"the call journal {what}; {rule}",
        tool_name=name,
    )


def _shown(decision: str | None) -> str:
    if decision is not None and decision.startswith("edit:"):
        return "edit"
    return str(decision)


def _in_progress(call: _Call) -> Err:
    name = call.tool.name
    return Err(
        CallInProgress(
            f"Tool '{name}' was not run: call {call.call_id!r} of run {call.run_id!r} is "
            "running elsewhere (its lease in the call journal is live); ask again later",
            tool_name=name,
        )
    )


def _used(call: _Call) -> Err:
    return already_used(call.tool.name)


def _unknown(call: _Call) -> Err:
    name = call.tool.name
    _log.warning("Call of tool '%s' has an unknown outcome in the call journal; not run", name)
    return Err(
        OutcomeUnknown(
            f"Tool '{name}' was not run: the outcome of an earlier attempt is unknown; "
            f"it was not run again (call {call.call_id!r} of run {call.run_id!r} started "
            "and never completed: a person finds out and settles it)",
            tool_name=name,
        )
    )


def replayed(tool: Tool, call_id: str | None, result: Result) -> Result:
    """``result`` as a replay: the ``tool_execute_replayed`` signal, sent from the
    caller's thread (no ``start``/``stop``: nothing ran)."""
    signal = _signals.tool_execute_replayed
    if signal.receivers:
        metadata: dict[str, t.Any] = {
            "tool_name": tool.name,
            "success": result.is_ok(),
        }
        if call_id is not None:
            metadata["call_id"] = call_id
        _signals.send(signal, tool, {"system_time": time.time_ns()}, metadata)
    if _logger.isEnabledFor(logging.DEBUG):
        _log.debug("Tool '%s': outcome replayed from the call journal", tool.name)
    return result


def _judge(call: _Call, record: JournalRecord | None, again: bool = True) -> Result | _Go | _Marker:
    """What the journal's ``record`` means for ``call`` (the table)."""
    from nous_tools.journal._record import Corrupt

    if record is None:
        return _Go(None)
    if record.tool != call.tool.name or record.digest != call.digest:
        return Err(_conflict(call, record))
    # A person's second submit with another decision gets the first decision's
    # outcome (or waits for it); it never runs the call otherwise.
    other_decision = (
        call.decision is not None
        and record.decision is not None
        and record.decision != call.decision
    )
    if record.state == "completed":
        try:
            result = record.result()
        except (Corrupt, ValueError) as exc:
            return _unavailable(call, "read", exc)
        return replayed(call.tool, call.call_id, result)
    if not record.unknown(_now(call.journal)):  # the one rule (JournalRecord.unknown)
        return _RUNNING
    if again:
        # A call of this process may have completed since the record was read (it
        # stops being held only after its outcome is written): read it once more.
        fresh = _read(call)
        if isinstance(fresh, Err):
            return fresh
        if fresh != record:
            return _judge(call, fresh, again=False)
    if call.tool.idempotent is True and not other_decision:
        return _Go(record.owner)
    return _unknown(call)


def _read(call: _Call) -> JournalRecord | Err | None:
    """The journal's record of ``call`` (None: none), or the ``Err`` of a journal
    that cannot be read."""
    try:
        return t.cast("JournalRecord | None", call.journal.get(call.run_id, call.call_id))
    except Exception as exc:
        return _unavailable(call, "read", exc)


def _now(journal: t.Any) -> float:
    """Now on ``journal``'s clock (its database server's), else this host's."""
    clock = getattr(journal, "clock", None)
    return float(clock()) if callable(clock) else wall()


def _check_wait(wait: object) -> float | None:
    if wait is None:
        return None
    if type(wait) not in (int, float) or not t.cast(float, wait) >= 0:
        raise ValueError(f"wait must be a number of seconds >= 0 or None, got {wait!r}")
    return float(t.cast(float, wait))


def decide(call: _Call, wait: float | None) -> Result | _Go:
    """Step 0: read the journal and judge; while the call runs elsewhere, wait up
    to ``wait`` seconds for its outcome (polling), then ``CallInProgress``."""
    deadline: float | None = None
    pause = 0.005
    while True:
        record = _read(call)
        if isinstance(record, Err):
            return record
        verdict = _judge(call, record)
        if verdict is not _RUNNING:
            return t.cast("Result | _Go", verdict)
        if not wait:
            return _in_progress(call)
        now = monotonic()
        if deadline is None:
            deadline = now + wait
        left = deadline - now
        if left <= 0:
            return _in_progress(call)
        assert record is not None
        until_expiry = max(record.lease_expires - _now(call.journal), 0.0) + 0.001
        time.sleep(min(left, pause, until_expiry))
        pause = min(pause * 2, 0.25)


def prepare(
    journal: t.Any,
    tool: Tool,
    arguments: object,
    run_id: str,
    call_id: object,
    decision: str | None = None,
) -> _Call | Err:
    """The call to decide about, or the ``Err`` for a call id that cannot be a key."""
    if type(call_id) is not str or not call_id:
        return Err(
            ToolError(
                f"Tool '{tool.name}' was not run: a journaled call needs a non-empty str "
                f"call_id, got {type(call_id).__name__}",
                tool_name=tool.name,
            )
        )
    from nous_tools.journal._record import arguments_digest

    digest = arguments_digest(tool.name, arguments)
    return _Call(journal, tool, run_id, call_id, digest, decision)


class JournalClaim(Claim):
    """A call step 0 let go on: ``started`` before its first attempt, ``completed``
    after its last."""

    __slots__ = ("approval", "call", "deadline", "record", "replace", "wait")

    def __init__(self, call: _Call, replace: str | None, wait: float | None = None) -> None:
        self.call = call
        self.replace = replace
        self.wait = wait  # how long to wait for the same call started meanwhile elsewhere
        self.record: JournalRecord | None = None
        self.deadline: float | None = None  # the call's, on the monotonic clock
        # The approval redeemed with the start record, in one transaction (redeems).
        self.approval: tuple[str, float | None] | None = None

    def redeems(self, store: object, approval_id: str, expires_at: float | None) -> bool:
        """When ``store`` is the journal's own (``journal.approvals``), have
        :meth:`start` redeem the approval in the transaction that records the start,
        and say True: the caller then claims nothing itself."""
        from nous_tools.journal._approvals import joins

        if not joins(store, self.call.journal):
            return False
        self.approval = (approval_id, expires_at)
        return True

    def start(self, tool: Tool, ctx: RunContext[t.Any]) -> RunContext[t.Any] | Result:
        call = self.call
        journal = call.journal
        from nous_tools.approval import tool_digest
        from nous_tools.journal._record import JournalRecord, idempotency_key, new_owner

        timeout = tool.timeout
        lease = float(journal.grace)
        if timeout:
            lease += timeout * (tool.retries + 1)
        clock = getattr(journal, "clock", wall)  # the journal's own clock, when it has one
        try:  # what the tool was, for the record (not compared: a deploy may change it)
            identity = tool_digest(tool)
        except (TypeError, ValueError):  # it captures values a digest cannot hold
            identity = ""
        now = clock()
        record = JournalRecord(
            run_id=call.run_id,
            call_id=call.call_id,
            tool=tool.name,
            digest=call.digest,
            state="started",
            owner=new_owner(),
            lease_expires=now + lease,
            started_at=now,
            decision=call.decision,
            tool_digest=identity,
        )
        # A lock held elsewhere is waited for within the call's own deadline.
        self.deadline = monotonic() + lease - float(journal.grace) if timeout else None
        for _ in range(3):
            # Held (renewed while it runs) before it is written: a reader in this
            # process must never see the record without knowing the call runs.
            _leases.hold(journal, record, lease)
            try:
                with bounded(lease - float(journal.grace) if timeout else None):
                    if self.approval is None:
                        found = journal.start(record, replace=self.replace)
                    else:
                        found = journal.start(record, replace=self.replace, approval=self.approval)
            except Exception as exc:
                _leases.release(record.owner)
                if isinstance(exc, ApprovalTaken):  # with another request's record
                    return self.lost()
                return _unavailable(call, "record the start of", exc)
            if found is None:
                self.record = record
                return attrs.evolve(ctx, idempotency_key=idempotency_key(call.run_id, call.call_id))
            # Another caller wrote it between step 0 and now: judge again.
            _leases.release(record.owner)
            verdict = _judge(call, found)
            if verdict is _RUNNING:
                if not self.wait:
                    return _in_progress(call)
                verdict = decide(call, self.wait)  # wait for its outcome, as step 0 would
            if not isinstance(verdict, _Go):
                return t.cast("Result", verdict)
            self.replace = verdict.replace
        return _in_progress(call)

    def lost(self) -> Result:
        """The answer of a call whose approval another request redeemed: the outcome
        the journal holds (or comes to hold) for it, whatever its decision — the
        journal's record wins — else ``ApprovalAlreadyUsed``."""
        return _winners_outcome(self.call, self.wait) or _used(self.call)

    def abandon(self) -> None:
        if self.record is not None:
            _leases.release(self.record.owner)

    def finish(self, tool: Tool, result: Result) -> None:
        record = self.record
        if record is None:
            return
        from nous_tools.journal._record import encode_outcome

        deadline = self.deadline
        wait = None if deadline is None else max(_LEAST_WAIT, deadline - monotonic())
        try:
            with bounded(wait):
                written = self.call.journal.complete(record, encode_outcome(result, tool.name))
        except Exception as exc:
            _leases.release(record.owner)
            _log.error(
                "Call journal failed to record the outcome of tool '%s' (%s); a repeat "
                "of the call will find its outcome unknown",
                tool.name,
                type(exc).__name__,
            )
            return
        _leases.release(record.owner)
        if not written:
            _log.warning(
                "Call journal: the call of tool '%s' was settled or taken over before its "
                "outcome was recorded; the journal keeps the other outcome",
                tool.name,
            )


def unjournaled(tool: Tool) -> bool:
    """Whether ``tool``'s calls are never journaled under their own id: its
    function's class says so (``_nous_unjournaled = True``), as a code tool's does
    — its nested calls are journaled each, and a paused program is no outcome to
    record (the same call again runs the program again, its calls replayed)."""
    return getattr(type(tool.function), "_nous_unjournaled", False) is True


def run_journaled(
    rest: Rest,
    journal: t.Any,
    tool: Tool,
    arguments: c.Mapping[str, t.Any],
    ctx: RunContext[t.Any],
    call_id: str | None,
    skip_approval: bool,
    shielded: bool,
    wait: float | None,
) -> Result:
    """Step 0 of a call on an executor or registry with a journal, wrapping the
    rest: the journaled answer of a repeat, or ``rest`` run once with the
    :class:`JournalClaim` that records it (unjournaled, for a call without a key)."""
    if unjournaled(tool):
        return rest(tool, arguments, ctx, call_id, skip_approval, shielded, None, None)
    hook = getattr(journal, "_run_call", None)
    if hook is not None:  # a journal that takes the whole call (a Cassette)
        return t.cast("Result", hook(rest, tool, arguments, ctx, call_id, skip_approval, shielded))
    run_id = ctx.run_id
    if run_id is None or call_id is None:
        return rest(tool, arguments, ctx, call_id, skip_approval, shielded, None, None)
    try:
        seconds = _check_wait(wait)
    except ValueError as exc:
        return Err(ToolError(f"Tool '{tool.name}' was not run: {exc}", tool_name=tool.name))
    call = prepare(journal, tool, arguments, run_id, call_id)
    if isinstance(call, Err):
        return call
    decided = decide(call, seconds)
    if type(decided) is not _Go:
        return t.cast("Result", decided)
    claim = JournalClaim(call, decided.replace, seconds)
    return rest(tool, arguments, ctx, call_id, skip_approval, shielded, None, claim)


def peek(
    journal: t.Any,
    tool: Tool,
    arguments: object,
    ctx: object,
    call_id: str | None,
    wait: float | None = None,
) -> Result | None:
    """Step 0 for a call that would not run now (an ``ask`` tool about to come back
    as ``NeedsApproval``): its journaled answer, or None to go on."""
    answer = step0(journal, tool, arguments, ctx, call_id, wait)
    return None if isinstance(answer, JournalClaim) else answer


def step0(
    journal: t.Any,
    tool: Tool,
    arguments: object,
    ctx: object,
    call_id: str | None,
    wait: float | None = None,
) -> Result | JournalClaim | None:
    """Step 0 of a journaled call: its journaled answer, the :class:`JournalClaim`
    to run it with, or None when the journal has no say (no journal, no key)."""
    from nous_tools.run_context import RunContext

    if journal is None or getattr(journal, "_run_call", None) is not None or unjournaled(tool):
        return None
    run_id = ctx.run_id if isinstance(ctx, RunContext) else None
    if run_id is None or call_id is None:
        return None
    try:
        seconds = _check_wait(wait)
    except ValueError as exc:
        return Err(ToolError(f"Tool '{tool.name}' was not run: {exc}", tool_name=tool.name))
    call = prepare(journal, tool, arguments, run_id, call_id)
    if isinstance(call, Err):
        return call
    decided = decide(call, seconds)
    if type(decided) is _Go:
        return JournalClaim(call, decided.replace, seconds)
    return t.cast("Result", decided)


# -- a paused batch's decisions (ToolCallResults.resolve) ---------------------------


def decision_text(decision: str, tool: Tool, edited: object) -> str:
    """How a person's decision is recorded: ``"approve"``, ``"reject"``, or
    ``"edit:<digest of the edited arguments>"``."""
    if decision == "edit":
        from nous_tools.journal._record import arguments_digest

        return "edit:" + arguments_digest(tool.name, edited)
    return decision


def resolve_conflict(
    journal: t.Any, tool: Tool, arguments: object, run_id: str, call_id: str, decision: str
) -> JournalConflict | None:
    """The conflict a decision would be with what the journal holds for its call
    (another decision, other arguments), or None. Checked for every decision of a
    batch before any runs; a journal that cannot be read is answered per call."""
    call = prepare(journal, tool, arguments, run_id, call_id, decision)
    if isinstance(call, Err):
        return None
    try:
        record = journal.get(run_id, call_id)
    except Exception:
        return None
    if record is None:
        return None
    if record.tool != tool.name or record.digest != call.digest:
        return _conflict(call, record)
    return None  # another decision: its call answers with the first decision's outcome


def resolve_call(
    journal: t.Any,
    tool: Tool,
    arguments: object,
    ctx: RunContext[t.Any],
    call_id: str,
    decision: str,
    go: c.Callable[[JournalClaim], Result],
    wait: float | None,
) -> Result:
    """One decided call of a paused batch: step 0 for its key and decision (a call
    decided before replays its outcome), then ``go(claim)`` runs it journaled."""
    assert ctx.run_id is not None
    try:
        seconds = _check_wait(wait)
    except ValueError as exc:
        return Err(ToolError(f"Tool '{tool.name}' was not run: {exc}", tool_name=tool.name))
    call = prepare(journal, tool, arguments, ctx.run_id, call_id, decision)
    if isinstance(call, Err):
        return call
    if seconds is None:
        # A person's submit that finds the call decided by another request and
        # still running (a double submit) waits for its outcome, as long as the
        # tool may run (one without a timeout: a few seconds), then CallInProgress.
        seconds = tool.timeout * (tool.retries + 1) if tool.timeout else _WINNER_PATIENCE
    decided = decide(call, seconds)
    if type(decided) is not _Go:
        return t.cast("Result", decided)
    claim = JournalClaim(call, decided.replace, seconds)
    result = go(claim)
    if (
        claim.record is None
        and isinstance(result, Err)
        and isinstance(result.reason, ApprovalAlreadyUsed)
    ):
        # Another request redeemed this approval first (the same decision or
        # another): the journal's record wins, and this one answers its outcome.
        return claim.lost()
    return result


#: How long a request that lost an approval's redeem waits for the winner's record.
_WINNER_PATIENCE = 5.0


def _winners_outcome(call: _Call, wait: float | None) -> Result | None:
    """The outcome the journal holds (or comes to hold) for a call whose approval
    another request redeemed: its record, whatever decision it carries, once the
    winner has written it (within :data:`_WINNER_PATIENCE`); waiting ``wait``
    seconds for it to complete. None when no record appears."""
    anyone = _Call(call.journal, call.tool, call.run_id, call.call_id, call.digest, None)
    end = monotonic() + _WINNER_PATIENCE
    pause = 0.005
    while True:
        record = _read(call)
        if isinstance(record, Err):
            return record
        if record is not None:
            break
        if monotonic() >= end:
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    decided = decide(anyone, wait)
    return None if type(decided) is _Go else t.cast("Result", decided)
