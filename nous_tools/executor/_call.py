"""One call through the pipeline (private).

:class:`Calls`, the first step of :class:`~nous_tools.ToolExecutor`'s chain:
:meth:`Calls.entry`, the pipeline of one call — the journal's step 0 wrapping the
rest, approval, validation and conversion (inside the call's deadline), admission,
the journal's ``started``, the attempts (the next step,
:class:`~nous_tools.executor._attempts.Attempts`) and the journal's ``completed`` —
and the guard and shield a call made from inside a pool worker runs under.
"""

from __future__ import annotations

import collections.abc as c
import logging
import time
import typing as t

from nous_tools._engine import _admission, _pool
from nous_tools._engine._journal import UNJOURNALED, Claim, run_journaled
from nous_tools._util._clock import monotonic
from nous_tools._util._log import log as _log
from nous_tools._util._scope import here, interrupts
from nous_tools._util._text import safe_str as _safe_str
from nous_tools.approval._gate import check_approval
from nous_tools.errors import ToolError, ToolTimeout
from nous_tools.executor._attempts import (
    Attempts,
    _exception,
    _Failure,
    _internal_error,
    _start,
    _stop,
)
from nous_tools.executor._handoff import HandOffs, _Job
from nous_tools.results import Err, Ok, Result
from nous_tools.results import _set_update as _set_ok_update
from nous_tools.results import _set_value as _set_ok_value
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool

if t.TYPE_CHECKING:
    from nous_tools.journal._record import Journal

_logger = _log.logger
_DEBUG = logging.DEBUG
_new_ok = object.__new__

_BARE_CONTEXT: RunContext[t.Any] = RunContext()


def _arguments_error(tool: Tool, arguments: object) -> Err:
    return Err(
        ToolError(
            f"Invalid arguments for '{tool.name}': expected a mapping (a JSON object), "
            f"got {type(arguments).__name__}",
            tool_name=tool.name,
            attempt=1,
            original_error=("invalid", [("(root)", f"not a mapping: {type(arguments).__name__}")]),
        )
    )


def _checked_past_deadline(tool: Tool) -> Err:
    """The answer to a call whose validation and conversion outlasted its timeout
    (they count inside it): a timeout, and the tool never ran."""
    _log.error(
        "Tool '%s' timed out after %s s while its arguments were validated and converted; "
        "it did not run",
        tool.name,
        tool.timeout,
    )
    return Err(
        ToolTimeout(
            f"Tool '{tool.name}' timed out after {tool.timeout} s: validating and converting "
            "its arguments took the whole deadline, and the tool did not run",
            tool_name=tool.name,
            timeout=tool.timeout,
            attempt=1,
        )
    )


class Calls:
    """Steps 0 to 4 and 6 of one call (``docs/concepts/pipeline.md``): the entry
    (:meth:`guarded`, :meth:`entry`), the journal's step 0 wrapping the rest
    (:meth:`_gated`: approval, validation and conversion, admission, the journal's
    ``started``), then the attempts — :class:`Attempts`, or for a batch's timed
    call :class:`HandOffs` — each called once, none calling back."""

    def __init__(
        self,
        attempts: Attempts,
        hand_offs: HandOffs,
        admission: _admission.Admission,
        journal: Journal | None,
        max_result_chars: int | None,
    ) -> None:
        self._admission = admission
        self._journal = journal
        self._max_result_chars = max_result_chars
        self._attempts = attempts  # step 5
        self._hand_offs = hand_offs  # step 5 of a batch's timed call

    def job(
        self, tool: Tool, arguments: t.Any, ctx: RunContext[t.Any] | None, call_id: str | None
    ) -> Result:
        """One job of a batch run whole (in a lane): :meth:`run` of an unapproved,
        unjournaled-by-default call."""
        return self.guarded(tool, arguments, ctx, call_id, False, None, None)

    def shielded(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any] | None,
        ctx: RunContext[t.Any] | None,
        call_id: str | None,
        skip_approval: bool,
        *,
        journal: t.Any = None,
        wait: float | None = None,
    ) -> Result:
        """:meth:`entry` for a call made from inside a pool worker (a tool calling
        another): no asynchronous ``ToolCancelled`` lands in the library's code —
        a log handler's lock, a signal, the pool's books — only in the tools it
        runs inline; a cancellation that arrives meanwhile is raised on return."""
        token = _pool.shield()
        try:
            return self.entry(
                tool,
                arguments,
                ctx,
                call_id,
                skip_approval=skip_approval,
                shielded=True,
                journal=journal,
                wait=wait,
            )
        except BaseException as exc:  # a bug of ours must not reach the caller either
            if interrupts(exc):
                raise
            return _internal_error(tool, exc)
        finally:
            if token is not None:
                _pool.unshield(token)

    def guarded(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any] | None,
        ctx: RunContext[t.Any] | None,
        call_id: str | None,
        skip_approval: bool,
        journal: t.Any,
        wait: float | None,
    ) -> Result:
        """``ToolExecutor.execute`` (or ``execute_approved``) with ``journal`` as
        :meth:`entry` takes it: None for the executor's own, a registry's, or a
        :class:`~nous_tools._engine._journal.Claim`."""
        if here.nested:
            return self.shielded(
                tool, arguments, ctx, call_id, skip_approval, journal=journal, wait=wait
            )
        try:
            return self.entry(
                tool,
                arguments,
                ctx,
                call_id,
                skip_approval=skip_approval,
                journal=journal,
                wait=wait,
            )
        except BaseException as exc:  # a bug of ours must not reach the caller either
            if interrupts(exc):
                raise
            return _internal_error(tool, exc)

    def entry(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any] | None,
        ctx: RunContext[t.Any] | None,
        call_id: str | None,
        *,
        skip_approval: bool = False,
        shielded: bool = False,
        job: _Job | None = None,
        journal: t.Any = None,
        wait: float | None = None,
    ) -> Result:
        """The pipeline's entry and its step 0. ``shielded``: called by
        :meth:`shielded` (perhaps in a pool worker, whose shield an inline tool must
        leave). ``job``: a call of a batch (see ``Batches.run``), whose timed first
        attempt is handed to a worker and not waited for here. ``journal``: None for
        the executor's own journal, a registry's journal, a :class:`Claim` (step 0 let
        the call go on: it is recorded around its attempts), or ``UNJOURNALED``;
        ``wait`` is passed to the journal's step 0."""
        if type(tool) is not Tool and not isinstance(tool, Tool):
            return Err(ToolError(f"execute expects a Tool, got {type(tool).__name__}"))
        if ctx is None:
            ctx = _BARE_CONTEXT
        elif not isinstance(ctx, RunContext):
            return Err(
                ToolError(
                    f"execute expects a RunContext or None as ctx, got {type(ctx).__name__}",
                    tool_name=tool.name,
                )
            )
        if arguments is None:
            arguments = {}
        # 0. the call journal (when there is one) wraps the rest: it answers a repeat,
        # or runs the rest once with the claim that records the call
        if journal is None:
            journal = self._journal
        if journal is None or journal is UNJOURNALED:
            return self._gated(tool, arguments, ctx, call_id, skip_approval, shielded, job, None)
        if isinstance(journal, Claim):
            return self._gated(tool, arguments, ctx, call_id, skip_approval, shielded, job, journal)
        return run_journaled(
            self._gated, journal, tool, arguments, ctx, call_id, skip_approval, shielded, wait
        )

    def _gated(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        call_id: str | None,
        skip_approval: bool,
        shielded: bool,
        job: _Job | None,
        claim: Claim | None,
    ) -> Result:
        """Steps 1 to 6 of a call: approval, validation, admission, then its attempts
        (recorded through ``claim`` when the journal claimed the call)."""
        # 1. approval (skipped for a call the caller has already approved)
        if tool.approval != "auto" and not skip_approval:
            approved = check_approval(tool, arguments, ctx, call_id)
            if isinstance(approved, Err):
                return approved
            arguments = approved
        # 2. validation
        if type(arguments) is not dict and not isinstance(arguments, c.Mapping):
            return _arguments_error(tool, arguments)
        validator = tool._validator
        until: float | None = None  # the first attempt's deadline, when it is already set
        if validator is not None or tool._converter is not None:
            timeout = tool.timeout
            if timeout is not None:  # validation and conversion count inside it
                until = monotonic() + timeout
            if validator is not None:
                failure = validator.validate(arguments)
                if failure is not None:
                    # The model's error, answered to it: DEBUG, not the program's.
                    _log.debug("Invalid arguments for tool '%s'", tool.name)
                    return Err(
                        ToolError(
                            f"Invalid arguments for '{tool.name}': {failure.message}",
                            tool_name=tool.name,
                            attempt=1,
                            original_error=failure.original_error,
                        )
                    )
            # 2b. conversion to the annotated types (once per call, never per retry)
            converter = tool._converter
            if converter is not None:
                converted = converter.convert(tool.name, arguments)
                if isinstance(converted, Err):
                    return converted
                arguments = converted
            if until is not None and monotonic() >= until:
                return _checked_past_deadline(tool)
        # 3. admission: the tool's limits (docs/concepts/limits.md), once per call
        limits = tool._limits
        if limits is not None:
            if limits.admits:  # max_calls_per_run, rate_limit
                refused = self._admission.admit(tool, limits, ctx, call_id)
                if refused is not None:
                    return refused
            if limits.in_lane and claim is None:
                return self._limited(tool, arguments, ctx, call_id, limits)
        # 4. the call journal: started, the attempts, completed (an admitted call only)
        if claim is not None:
            return self._claimed(claim, tool, arguments, ctx, call_id, limits)
        # 5. attempts
        if job is not None and tool.timeout is not None:  # (on threads, or job.process)
            handed: Result = self._hand_offs.hand_off(  # (or _PENDING)
                job, tool, arguments, ctx, call_id, tool.retries + 1, until
            )
            return handed
        if _logger.isEnabledFor(_DEBUG):
            total = tool.retries + 1
            began = time.perf_counter()
            outcome = self._attempts.attempt(
                tool, arguments, ctx, 1, total, call_id, deadline=until
            )
            if type(outcome) is Ok:
                elapsed_ms = (time.perf_counter() - began) * 1000
                _log.debug("Tool '%s' completed in %.1f ms", tool.name, elapsed_ms)
        elif (
            tool.timeout is None
            and not tool.takes_ctx
            and not (_start.receivers or _stop.receivers or _exception.receivers)
            and not shielded
        ):
            # The most common call, inline and unobserved: attempt 1 as _attempt runs
            # it (which see), without its signals and a frame fewer.
            try:
                value = tool.function(**arguments)
            except Exception as exc:
                total = tool.retries + 1
                outcome = self._attempts.on_raised(
                    tool, arguments, exc, _safe_str(exc), 1, total, 0
                )
            except BaseException as exc:
                if interrupts(exc):
                    raise  # the user's Ctrl-C, or this thread's attempt was cancelled
                total = tool.retries + 1
                outcome = self._attempts.on_raised(
                    tool, arguments, exc, _safe_str(exc), 1, total, 0
                )
            else:
                kind = type(value)
                if kind is Ok or kind is Err:
                    return value  # type: ignore[no-any-return]
                result = _new_ok(Ok)  # Ok(value), as ok_fast builds it, a call fewer
                _set_ok_value(result, value)
                _set_ok_update(result, None)
                return result
        else:
            total = tool.retries + 1
            outcome = self._attempts.attempt(
                tool, arguments, ctx, 1, total, call_id, deadline=until
            )
        if type(outcome) is not _Failure:
            return outcome  # type: ignore[return-value]  # not a _Failure
        if not outcome.will_retry:
            return self._attempts.final_failure(tool, outcome)
        return self._attempts.retry(tool, arguments, ctx, outcome, total, call_id)

    def _limited(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        call_id: str | None,
        limits: _admission.ToolLimits,
    ) -> Result:
        """Step 4 for a tool whose attempts each hold a ``max_concurrency`` slot, or
        whose final result is checked (``on_result_overflow="error"``); see
        ``docs/concepts/limits.md``. Never a batch's hand-off: a batch runs such a
        call whole in a lane (``Batches._coordinate``)."""
        total = tool.retries + 1
        began = time.perf_counter() if _logger.isEnabledFor(_DEBUG) else None
        if limits.max_concurrency is not None:
            outcome = self._attempts.slotted(tool, arguments, ctx, 1, total, call_id)
        else:
            outcome = self._attempts.attempt(tool, arguments, ctx, 1, total, call_id)
        if type(outcome) is _Failure:
            if outcome.will_retry:
                outcome = self._attempts.retry(tool, arguments, ctx, outcome, total, call_id)
            else:
                outcome = self._attempts.final_failure(tool, outcome)
        elif began is not None and type(outcome) is Ok:
            elapsed_ms = (time.perf_counter() - began) * 1000
            _log.debug("Tool '%s' completed in %.1f ms", tool.name, elapsed_ms)
        if limits.overflow_error and isinstance(outcome, Ok):
            limit = _admission.result_limit(tool, self._max_result_chars)
            too_large = _admission.overflow(tool, outcome, limit)
            if too_large is not None:
                return too_large
        return t.cast(Result, outcome)

    def _claimed(
        self,
        claim: Claim,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        call_id: str | None,
        limits: _admission.ToolLimits | None,
    ) -> Result:
        """Steps 4 to 6 of a journaled call (after its admission): ``started``
        recorded, the attempts (holding their ``max_concurrency`` slots), then
        ``completed`` with the outcome. A call the journal cannot record as started
        does not run."""
        started = claim.start(tool, ctx)
        if not isinstance(started, RunContext):
            return started
        try:
            if limits is not None and limits.in_lane:
                result = self._limited(tool, arguments, started, call_id, limits)
            else:
                total = tool.retries + 1
                outcome = self._attempts.attempt(tool, arguments, started, 1, total, call_id)
                if type(outcome) is _Failure:
                    if outcome.will_retry:
                        result = self._attempts.retry(
                            tool, arguments, started, outcome, total, call_id
                        )
                    else:
                        result = self._attempts.final_failure(tool, outcome)
                else:
                    result = t.cast(Result, outcome)
        except BaseException:  # interrupted: the outcome is unknown (as after a crash)
            claim.abandon()
            raise
        claim.finish(tool, result)
        return result
