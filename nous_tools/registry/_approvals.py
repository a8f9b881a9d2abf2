"""Running what a person approved: a :class:`NeedsApproval` checked against the
registry (still the call that was approved, the tool registered under its name,
not ``"deny"``), answered by the journal when it holds the call, its approval
claimed once in the registry's store, and run with ``approval_gated=True``
through the registry's advice. :meth:`Registry.execute_approved` and
:meth:`Registry.run_approval` run it.
"""

from __future__ import annotations

import collections.abc as c
import typing as t

import attrs

from nous_tools._engine._journal import JournalClaim
from nous_tools._engine._journal import step0 as _step0
from nous_tools._util import _canonical
from nous_tools._util._log import log as _safe_log
from nous_tools._util._scope import interrupts
from nous_tools._util._tokens import claim_expiry, limits, refusal
from nous_tools.approval import NeedsApproval
from nous_tools.approval._store import already_used
from nous_tools.errors import ToolDenied, ToolError, ToolNotFound
from nous_tools.executor import ToolExecutor, default_executor
from nous_tools.results import Err, Result
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool

if t.TYPE_CHECKING:
    from nous_tools.registry._registry import Registry

_log = _safe_log

_GATED_CONTEXT: RunContext[t.Any] = RunContext(approval_gated=True)

# (name, slot setter) of every RunContext field.
_context_slots: list[tuple[str, c.Callable[[object, object], None]]] = [
    (f.name, RunContext.__dict__[f.name].__set__) for f in attrs.fields(RunContext)
]
_set_gated: c.Callable[[object, object], None] = RunContext.__dict__["approval_gated"].__set__


def gated_context(ctx: RunContext[t.Any] | None) -> RunContext[t.Any] | None:
    """``ctx`` with ``approval_gated=True`` (what ``execute_approved`` runs with)."""
    if ctx is None:
        return _GATED_CONTEXT
    if type(ctx) is RunContext and not ctx.approval_gated:
        # attrs.evolve, field by field through the slots: the values are a valid
        # context's already, so no validator needs to run again.
        gated = object.__new__(RunContext)
        for name, set_slot in _context_slots:
            set_slot(gated, getattr(ctx, name))
        _set_gated(gated, True)
        return gated
    if isinstance(ctx, RunContext) and not ctx.approval_gated:
        return attrs.evolve(ctx, approval_gated=True)
    return ctx  # already gated, or not a RunContext: the executor reports that


def run_decided(
    registry: Registry,
    tool: Tool | str,
    arguments: c.Mapping[str, t.Any] | RunContext[t.Any] | None,
    ctx: RunContext[t.Any] | None,
    call_id: str | None,
    wait: float | None,
) -> Result:
    """``execute_approved`` of a :class:`Tool` or a registered name: the program's
    own decision, run gated with no approval check (a ``"deny"`` tool too, said
    in a warning), through the registry's advice."""
    if isinstance(tool, Tool):
        target = tool
    else:
        found = registry.lookup(tool) if isinstance(tool, str) else None
        if found is None:
            if not isinstance(tool, str):
                return Err(
                    ToolError(
                        "execute_approved expects a Tool, a tool name or a "
                        f"NeedsApproval, got {type(tool).__name__}"
                    )
                )
            return Err(ToolNotFound(tool))
        target = found
    if isinstance(arguments, RunContext):
        return Err(
            ToolError(
                "execute_approved got a RunContext as arguments; pass it as ctx",
                tool_name=target.name,
            )
        )
    if target.approval == "deny":  # the program's own decision: said out loud
        _log.warning(
            "Tool '%s' is 'deny' and ran only because the program called execute_approved",
            target.name,
        )
    executor = registry._executor
    if executor is None:
        executor = default_executor()
    gated = gated_context(ctx)
    run = registry._runner(executor, True, None, wait)
    if target.name in registry.advice._chains:
        return t.cast(Result, registry._advised(run, target, arguments, gated, call_id))
    return run(target, arguments, gated, call_id=call_id)


def execute_approval(
    registry: Registry,
    na: NeedsApproval,
    arguments: object,
    ctx: RunContext[t.Any] | None,
    call_id: str | None,
    *,
    claim: t.Any = None,
    wait: float | None = None,
) -> Result:
    """``execute_approved`` of a :class:`NeedsApproval`: check, claim, run once.
    ``claim``: the journal's step 0 is done (a resolved batch's call)."""
    tool = na.tool
    name = tool.name
    # _check_approved's checks, all of them, its call made only to say what is wrong
    if not (
        arguments is None
        and (ctx is None or type(ctx) is RunContext)
        and na._verified
        and registry._tools.get(name) is tool
        and tool.approval != "deny"
    ):
        refused = _check_approved(registry, na, arguments, ctx)
        if refused is not None:
            return refused
    if call_id is None:  # the call's id in the journal, and the run's
        call_id = na.call_id
    # (the journal answers only a call of a run: no run id, nothing to look up)
    stepped = None
    if claim is None and ctx is not None and ctx.run_id is not None:
        # The journal first: a call it holds is answered, the approval not used.
        answered = _step0(
            registry.effective_journal(), tool, _canonical.thaw(na.arguments), ctx, call_id, wait
        )
        if isinstance(answered, JournalClaim):
            claim = stepped = answered  # step 0 is done: the call runs with this claim
        elif answered is not None:
            return answered
    answered = _claim_once(registry, na, claim, stepped)
    if answered is not None:
        return answered
    executor = registry._executor
    if executor is None:
        executor = default_executor()
    # (a context already gated, as resolve's, is its own gated context)
    gated = ctx if type(ctx) is RunContext and ctx.approval_gated else gated_context(ctx)
    approved = na.arguments
    if name in registry.advice._chains:
        return _run_advised(registry, executor, tool, approved, gated, call_id, claim, wait)
    if type(executor) is ToolExecutor:  # registry._runner's call, made here
        journal = claim if claim is not None else registry._journal
        return executor._run_with(
            tool, _canonical.thaw(approved), gated, call_id, True, journal, wait
        )
    execute_approved = registry._runner(executor, True, claim, wait)
    return execute_approved(tool, _canonical.thaw(approved), gated, call_id=call_id)


def _claim_once(
    registry: Registry, na: NeedsApproval, claim: t.Any, stepped: JournalClaim | None
) -> Result | None:
    """Use ``na`` up, once, or answer the call without running it (None: it runs).
    An expired approval is refused; else it is claimed in the registry's store, or
    redeemed with the start record of ``claim`` (the journal's), failing closed.
    ``stepped``: the journal's claim this call took itself, whose outcome answers
    when another request redeemed the approval first."""
    name = na.tool.name
    accepted = na._limits  # na._limits_in(registry), a call fewer
    max_age, skew = accepted if accepted is not None else limits(registry, None, None)
    why = refusal(na.issued_at, max_age, skew)
    if why is not None:
        return Err(ToolError(f"Tool '{name}' was not run: its approval {why}", tool_name=name))
    expires_at = claim_expiry(na.issued_at, max_age, skew)
    try:
        if isinstance(claim, JournalClaim) and claim.redeems(
            registry._approval_store, na.id, expires_at
        ):
            claimed: object = True  # redeemed with the start record, in one transaction
        else:
            claimed = registry._claim(na.id, expires_at)
    except BaseException as exc:  # fail closed
        if interrupts(exc):
            raise
        _log.error("Approval store failed to claim an approval of tool '%s'", name)
        return Err(
            ToolError(
                f"Tool '{name}' was not run: the approval store failed ({type(exc).__name__})",
                tool_name=name,
                original_error=exc,
            )
        )
    if claimed is not True:
        if stepped is not None:  # another request redeemed it: its journaled outcome wins
            return stepped.lost()
        _log.warning("Approval of tool '%s' was already used; not run again", name)
        return already_used(name)
    return None


def _run_advised(
    registry: Registry,
    executor: ToolExecutor,
    tool: Tool,
    approved: c.Mapping[str, t.Any],
    gated: RunContext[t.Any] | None,
    call_id: str | None,
    claim: t.Any,
    wait: float | None,
) -> Result:
    """Run an approved call, claimed, through the registry's advice of its tool, all
    but its ``before`` advice (which ran before the approval): an advice that changes
    the approved arguments stops the call."""
    name = tool.name
    execute_approved = registry._runner(executor, True, claim, wait)
    expected = _canonical.dumps(_canonical.encode(approved))

    def core(args: t.Any) -> Result:
        try:
            same = _canonical.dumps(_canonical.encode(args)) == expected
        except (TypeError, ValueError):
            same = False
        if not same:
            _log.warning("Advice of tool '%s' changed approved arguments; not run", name)
            return Err(
                ToolError(
                    f"Tool '{name}' was not run: advice changed the approved arguments",
                    tool_name=name,
                )
            )
        # A fresh copy: whatever the advice holds, the tool gets what was approved.
        return execute_approved(tool, _canonical.thaw(approved), gated, call_id=call_id)

    advised = registry.advice._wrap_results(name, core, befores=False)
    return t.cast(Result, advised(_canonical.thaw(approved)))


def _check_approved(
    registry: Registry, na: NeedsApproval, arguments: object, ctx: object
) -> Err | None:
    name = na.tool.name
    if arguments is not None:
        return Err(
            ToolError(
                f"Tool '{name}' was not run: execute_approved takes the arguments of a "
                "NeedsApproval from it, not separately",
                tool_name=name,
            )
        )
    if ctx is not None and not isinstance(ctx, RunContext):
        return Err(
            ToolError(
                f"execute expects a RunContext or None as ctx, got {type(ctx).__name__}",
                tool_name=name,
            )
        )
    if not (na._verified or na.verify()):
        return Err(
            ToolError(
                f"Tool '{name}' was not run: its arguments changed after approval "
                "(they no longer match the fingerprint)",
                tool_name=name,
            )
        )
    registered = registry._tools.get(name)
    if registered is None:
        return Err(ToolNotFound(name))
    if registered is not na.tool:
        return Err(
            ToolError(
                f"Tool '{name}' was not run: the tool registered under that name is not "
                "the one that was approved",
                tool_name=name,
            )
        )
    if registered.approval == "deny":
        return Err(ToolDenied(name))
    return None
