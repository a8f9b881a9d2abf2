"""The paused batch (private): a batch that waits for a person, across requests.

What :meth:`ToolCallResults.from_dict <nous_tools.ToolCallResults.from_dict>` reads
back (format 1 here; 2 in :mod:`nous_tools.providers._wire`) and what
:meth:`ToolCallResults.resolve <nous_tools.ToolCallResults.resolve>` does with a
person's decisions: each decided call run, rejected, or journaled with its decision.
Imported at the first of them, not with the package.
"""

from __future__ import annotations

import collections.abc as c
import functools
import hashlib
import hmac
import typing as t

import attrs

from nous_tools._engine import _journal
from nous_tools._engine._admission import DEFAULT_MAX_RESULT_CHARS, EXECUTOR
from nous_tools._rendering import CallResult, _safe_repr
from nous_tools._util import _canonical as _c
from nous_tools._util._log import log as _log
from nous_tools._util._scope import interrupts
from nous_tools._util._tokens import (
    _HMAC,
    _key,
    _new_id,
    _same,
    claim_expiry,
    limits,
    mismatch,
    refusal,
)
from nous_tools.approval import Edit, NeedsApproval
from nous_tools.approval._store import already_used
from nous_tools.approval._token import edited
from nous_tools.errors import ApprovalAlreadyUsed, BatchAlreadyResolved, ToolError
from nous_tools.executor import ToolCall
from nous_tools.program import ProgramPaused
from nous_tools.providers import _tool_calls
from nous_tools.providers import _wire as _batch_wire
from nous_tools.providers._calls_in import Provider
from nous_tools.providers._tool_calls import (
    ToolCallResults,
    _apply_updates,
    _current_call,
    _observe_end,
    _observe_start,
)
from nous_tools.results import Err, Ok, Result
from nous_tools.run_context import RunContext

if t.TYPE_CHECKING:
    from nous_tools.registry import Registry
    from nous_tools.tool import Tool


#: The version of the wire format that :meth:`ToolCallResults.to_dict` writes
#: (``nous_tools.providers._wire``); :meth:`ToolCallResults.from_dict` reads it and 1.
BATCH_VERSION = 2

_BATCH_TYPE = "tool_call_batch"
# Signed bytes start with this, so neither an approval token's signature nor any
# other signature made with the same secret is ever a valid batch signature.
_BATCH_DOMAIN = b"nous-tools tool call batch v1\n"
# What resolve claims in the approval store (approval ids are bare uuid hex).
_BATCH_CLAIM = "batch:"
_CHECKSUM = "sha256:"  # an unsigned batch's plain checksum, as an approval token's
_PROVIDERS: frozenset[str] = frozenset({"openai", "responses", "anthropic"})
_NONE = type(None)
_BATCH_FIELDS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("id", (str,)),
    ("issued_at", (int,)),
    ("audience", (str, _NONE)),
    ("provider", (str, _NONE)),
    ("calls", (list,)),
)


# The slots' own setters, in field order: a batch whose every value is known good
# (read and checked, or resolved) is built without attrs' __init__ (see _batch).
_BATCH_SLOTS: tuple[str, ...] = (
    "results",
    "calls",
    "context",
    "skipped",
    "kinds",
    "provider",
    "registry",
    "id",
    "issued_at",
    "_contents",
    "_max_chars",
)
if tuple(field.name for field in attrs.fields(ToolCallResults)) != _BATCH_SLOTS:
    raise RuntimeError(
        "ToolCallResults has other fields than _paused._batch fills"
    )  # pragma: no cover
(
    _set_results,
    _set_calls,
    _set_context,
    _set_skipped,
    _set_kinds,
    _set_provider,
    _set_registry,
    _set_id,
    _set_issued_at,
    _set_contents,
    _set_max_chars,
) = (ToolCallResults.__dict__[name].__set__ for name in _BATCH_SLOTS)
_new = object.__new__
if tuple(field.name for field in attrs.fields(ToolCall)) != ("id", "name", "arguments"):
    raise RuntimeError("ToolCall has other fields than _paused._call fills")  # pragma: no cover
_set_call_id, _set_call_name, _set_call_arguments = (
    ToolCall.__dict__[name].__set__ for name in ("id", "name", "arguments")
)


def _call(call_id: str | None, name: str, arguments: t.Any) -> ToolCall:
    """``ToolCall(call_id, name, arguments)`` of values read and checked, faster."""
    call: ToolCall = _new(ToolCall)
    _set_call_id(call, call_id)
    _set_call_name(call, name)
    _set_call_arguments(call, arguments)
    return call


def _batch(
    results: list[CallResult],
    calls: list[ToolCall],
    context: RunContext[t.Any],
    skipped: list[t.Any],
    kinds: list[str],
    provider: Provider | None,
    registry: Registry,
    batch_id: str,
    issued_at: int,
    contents: list[str | None],
    max_chars: list[int | None],
) -> ToolCallResults:
    """``ToolCallResults(...)`` of values known good, every field given: what
    attrs' ``__init__`` would make (it has no validator nor converter), faster."""
    batch: ToolCallResults = _new(ToolCallResults)
    _set_results(batch, results)
    _set_calls(batch, calls)
    _set_context(batch, context)
    _set_skipped(batch, skipped)
    _set_kinds(batch, kinds)
    _set_provider(batch, provider)
    _set_registry(batch, registry)
    _set_id(batch, batch_id)
    _set_issued_at(batch, issued_at)
    _set_contents(batch, contents)
    _set_max_chars(batch, max_chars)
    return batch


#: The context of a batch read back by from_dict (``RunContext.new()``).
_FRESH_CONTEXT: RunContext[t.Any] = RunContext.new()
# ... as the approved calls of its resolve see it (what execute_approved would make).
_FRESH_GATED: RunContext[t.Any] = attrs.evolve(_FRESH_CONTEXT, approval_gated=True)


def _context_of(run_id: str | None) -> RunContext[t.Any]:
    """The context a read batch resumes in: its run's, or the one fresh context
    (``RunContext.new()`` is frozen with no deps, so one will do)."""
    return _FRESH_CONTEXT if run_id is None else RunContext.new(run_id=run_id)


def _seal_batch(payload: c.Mapping[str, t.Any], secret: str | bytes | None) -> str:
    data = _BATCH_DOMAIN + _c.dumps(payload)
    if secret is None:
        return _CHECKSUM + hashlib.sha256(data).hexdigest()
    return _HMAC + hmac.new(_key(secret), data, hashlib.sha256).hexdigest()


_batch_refused = _batch_wire.refused


def _type_names(kinds: tuple[type, ...]) -> str:
    return " or ".join("None" if kind is _NONE else kind.__name__ for kind in kinds)


def _batch_field(data: c.Mapping[str, t.Any], key: str, kinds: tuple[type, ...]) -> t.Any:
    if key not in data:
        raise _batch_refused(f"the batch has no '{key}'")
    value = data[key]
    if type(value) not in kinds:
        raise _batch_refused(f"'{key}' must be {_type_names(kinds)}, got {type(value).__name__}")
    return value


def _entry_field(
    entry: c.Mapping[str, t.Any], key: str, kinds: tuple[type, ...], position: int
) -> t.Any:
    if key not in entry:
        raise _batch_refused(f"call #{position} has no '{key}'")
    value = entry[key]
    if type(value) not in kinds:
        raise _batch_refused(
            f"'{key}' of call #{position} must be {_type_names(kinds)}, got {type(value).__name__}"
        )
    return value


def _short(value: object) -> str:
    text = _safe_repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _restored(content: str, is_error: bool, name: str) -> Result:
    """A finished call read back: ``Ok(text)``, or an ``Err(ToolError)`` whose
    message is the text without its ``"Error: "`` (so it formats back the same)."""
    if not is_error:
        return Ok(content)
    own = f"Error: tool '{name}' "
    if name and content.startswith(own):
        message = f"Tool '{name}' {content[len(own) :]}"
    elif content.startswith("Error: "):
        message = content[len("Error: ") :]
    else:
        message = content
    return Err(ToolError(message, tool_name=name or None))


def _read_entry(
    entry: object,
    position: int,
    registry: Registry,
    secret: str | bytes | None,
    max_age: float | None,
    allow_unsigned: bool,
    max_clock_skew: float | None,
) -> tuple[ToolCall, str, CallResult, str | None]:
    """One call of a batch being read: the call, its kind, its result, and the text
    a model gets for it when it is finished (None when it is pending)."""
    if type(entry) is not dict and not isinstance(entry, c.Mapping):
        raise _batch_refused(f"call #{position} must be an object, got {type(entry).__name__}")
    call_id = _entry_field(entry, "id", (str, _NONE), position)
    name = _entry_field(entry, "name", (str,), position)
    kind = _entry_field(entry, "kind", (str,), position)
    if kind not in ("function", "custom"):
        raise _batch_refused(f"'kind' of call #{position} must be 'function' or 'custom'")
    if "arguments" not in entry:
        raise _batch_refused(f"call #{position} has no 'arguments'")
    try:
        arguments = _c.decode(entry["arguments"], frozen=False)
    except ValueError as exc:
        raise _batch_refused(f"call #{position}: {exc}") from None
    call = ToolCall(call_id, name, arguments)
    if ("output" in entry) == ("approval" in entry):
        raise _batch_refused(f"call #{position} must have one of 'output' and 'approval'")
    if "output" in entry:
        output = _entry_field(entry, "output", (dict,), position)
        content = _entry_field(output, "content", (str,), position)
        is_error = _entry_field(output, "is_error", (bool,), position)
        return call, kind, _restored(content, is_error, name), content
    token = entry["approval"]
    try:
        # With a secret, the batch's HMAC (checked) covers the token's every byte.
        approval = NeedsApproval._read(
            token, registry, secret, max_age, allow_unsigned, max_clock_skew, secret is not None
        )
    except ValueError as exc:
        raise _batch_refused(f"call {call_id!r}: {exc}") from None
    if approval.call_id != call_id or approval.tool.name != name:
        raise _batch_refused(f"call #{position}: its approval is for another call")
    return call, kind, approval, None


def _decided(call_id: str, decision: object, na: NeedsApproval) -> tuple[str, NeedsApproval]:
    """``("approve" | "reject" | "edit", the approval to run)``; ``ValueError`` for a
    decision that is none of those, or an edit that cannot run."""
    if type(decision) is str and decision in ("approve", "reject"):
        return decision, na
    if type(decision) is not Edit:
        raise ValueError(
            f"cannot resolve: the decision for call {call_id!r} must be 'approve', 'reject' "
            f"or an Edit, got {_short(decision) if type(decision) is str else type(decision).__name__}"
        )
    name = na.tool.name
    approval = edited(na, decision.arguments, f"call {call_id!r}")
    validator = na.tool.validator
    if validator is not None:
        failure = validator.validate(_c.thaw(approval.arguments))
        if failure is not None:
            raise ValueError(
                f"cannot resolve: the edit of call {call_id!r} is refused: "
                f"Invalid arguments for '{name}': {failure.message}"
            )
    return "edit", approval


def _reject(registry: Registry, na: NeedsApproval) -> Err:
    """The outcome of a rejected call: it does not run, and its approval is used up."""
    name = na.tool.name
    try:
        claimed = registry.claim_approval(na.id, na._claim_expiry(registry))
    except BaseException as exc:  # rejected all the same: the tool does not run
        if interrupts(exc):
            raise
        _log.error("Approval store failed to claim a rejected approval of tool '%s'", name)
        claimed = True
    if not claimed:
        return already_used(name)
    return _rejected(na)


def _rejected(na: NeedsApproval) -> Err:
    name = na.tool.name
    return Err(ToolError(f"Tool '{name}' was rejected by the user and did not run", tool_name=name))


def from_dict(
    cls: type[ToolCallResults],
    data: object,
    registry: Registry,
    secret: str | bytes | None,
    max_age: float | None,
    allow_unsigned: bool,
    max_clock_skew: float | None,
) -> ToolCallResults:
    """:meth:`ToolCallResults.from_dict <nous_tools.ToolCallResults.from_dict>`."""
    if type(data) is not dict and not isinstance(data, c.Mapping):
        raise _batch_refused(f"a batch must be a mapping, got {type(data).__name__}")
    version = data.get("v") if type(data) is dict else None
    if type(version) is not int:
        version = _batch_field(data, "v", (int,))
    if version != BATCH_VERSION:
        if version != 1:  # version 1: the format before, still read (batches in flight)
            raise _batch_refused(f"unknown batch version {version} (this library reads 1 and 2)")
        return _from_version1(cls, data, registry, secret, max_age, allow_unsigned, max_clock_skew)
    batch_id, issued_at, provider, run_id, calls, kinds, results, contents = _batch_wire.read(
        data, registry, secret, max_age, allow_unsigned, max_clock_skew, _call, _restored
    )
    context = _context_of(run_id)
    if cls is ToolCallResults:
        return _batch(
            results,
            calls,
            context,
            [],
            kinds,
            provider,
            registry,
            batch_id,
            issued_at,
            contents,
            [],
        )
    return cls(
        results=results,
        calls=calls,
        context=context,
        kinds=kinds,
        provider=provider,
        registry=registry,
        id=batch_id,
        issued_at=issued_at,
        _contents=contents,
    )


def _from_version1(
    cls: type[ToolCallResults],
    data: c.Mapping[str, t.Any],
    registry: Registry,
    secret: str | bytes | None,
    max_age: float | None,
    allow_unsigned: bool,
    max_clock_skew: float | None,
) -> ToolCallResults:
    """:func:`from_dict` of a version 1 batch, whose pending calls each carry their
    own approval token."""
    payload, signature = _version1_fields(data)
    _check_version1_signature(payload, signature, secret, allow_unsigned)

    max_age, max_clock_skew = limits(registry, max_age, max_clock_skew)
    why = refusal(payload["issued_at"], max_age, max_clock_skew)
    if why is not None:
        raise _batch_refused(f"the batch {why}")
    own = getattr(registry, "name", None)
    if payload["audience"] != own:
        raise _batch_refused(
            f"the batch was made for registry {payload['audience']!r}, not {own!r}"
        )
    provider = payload["provider"]
    if provider is not None and provider not in _PROVIDERS:
        raise _batch_refused(f"unknown provider {provider!r}")

    calls: list[ToolCall] = []
    kinds: list[str] = []
    results: list[CallResult] = []
    contents: list[str | None] = []
    for position, entry in enumerate(payload["calls"], 1):
        call, kind, result, content = _read_entry(
            entry, position, registry, secret, max_age, allow_unsigned, max_clock_skew
        )
        calls.append(call)
        kinds.append(kind)
        results.append(result)
        contents.append(content)
    return cls(
        results=results,
        calls=calls,
        context=_context_of(payload.get("run_id")),
        kinds=kinds,
        provider=t.cast("Provider | None", provider),
        registry=registry,
        id=payload["id"],
        issued_at=payload["issued_at"],
        _contents=contents,
    )


def _version1_fields(data: c.Mapping[str, t.Any]) -> tuple[dict[str, t.Any], str]:
    """A version 1 batch's signed payload (every field but the signature), its
    fields' types checked, and its signature."""
    if _batch_field(data, "type", (str,)) != _BATCH_TYPE:
        raise _batch_refused(f"'type' must be {_BATCH_TYPE!r} (is it an approval token?)")
    payload: dict[str, t.Any] = {"v": 1, "type": _BATCH_TYPE}
    for key, types in _BATCH_FIELDS:
        payload[key] = _batch_field(data, key, types)
    if "run_id" in data:
        payload["run_id"] = _batch_field(data, "run_id", (str,))
        if not payload["run_id"]:
            raise _batch_refused("the batch has an empty run_id")
    signature = _batch_field(data, "signature", (str,))
    if not payload["id"]:
        raise _batch_refused("the batch has an empty id")
    return payload, signature


def _check_version1_signature(
    payload: dict[str, t.Any], signature: str, secret: str | bytes | None, allow_unsigned: bool
) -> None:
    """Refuse a version 1 batch whose ``signature`` is not the seal of ``payload``."""
    _batch_wire.check_signed(signature, secret, allow_unsigned)
    try:
        expected = _seal_batch(payload, secret)
    except (TypeError, ValueError, RecursionError) as exc:  # not JSON, NaN, too deep
        raise _batch_refused(f"the batch cannot be read ({type(exc).__name__})") from None
    if not _same(expected, signature):
        raise _batch_refused(mismatch("batch"))


def resolve(
    batch: ToolCallResults,
    decisions: c.Mapping[str, str | Edit],
    ctx: RunContext[t.Any] | None,
    wait: float | None,
) -> ToolCallResults:
    """:meth:`ToolCallResults.resolve <nous_tools.ToolCallResults.resolve>`."""
    registry = batch.registry
    if registry is None:
        raise _no_registry()
    if ctx is None:
        ctx = batch.context
    elif not isinstance(ctx, RunContext):
        raise TypeError(f"resolve expects a RunContext or None, got {type(ctx).__name__}")
    if ctx.run_id is None and isinstance(batch.context, RunContext) and batch.context.run_id:
        ctx = attrs.evolve(ctx, run_id=batch.context.run_id)  # the run the batch was made in
    decisions, programs = _program_decisions(batch, decisions)
    if programs:  # code tools' paused programs, resolved by their nested calls' ids
        batch = _resolve_programs(batch, registry, programs, ctx)
        if not decisions:
            return batch
    plan = _plan(batch, decisions)
    if not plan:
        return attrs.evolve(batch, context=ctx)
    run_id = ctx.run_id
    journal = None if run_id is None else registry.effective_journal()
    if journal is not None and getattr(journal, "_run_call", None) is not None:
        journal = None
    decided: dict[int, str] = {}
    if journal is not None:
        assert run_id is not None
        decided = _journal_decisions(journal, batch, plan, run_id)
    elif not registry.claim_approval(_BATCH_CLAIM + batch.id, _claim_expiry(batch, registry, plan)):
        raise _already_resolved(batch)
    observer = _tool_calls.call_observer()  # read now: instrument() sets it
    if len(plan) == 1 and journal is None and observer is None and plan[0][1] == "approve":
        # _run_step's approved call, unjournaled and unobserved, a frame fewer
        index, _, na = plan[0]
        token = _current_call.set(batch.calls[index])
        try:
            outcome = registry.run_approval(na, _FRESH_GATED if ctx is _FRESH_CONTEXT else ctx)
        finally:
            _current_call.reset(token)
        if len(batch.results) == 1:  # the batch's one call: its lists made at once
            return _resolved_one(batch, registry, ctx, na, outcome)
        outcomes = [outcome]
    else:
        outcomes = _run_plan(batch, registry, journal, decided, observer, wait, plan, ctx)
    return _merged(batch, registry, ctx, plan, outcomes)


def _program_decisions(
    batch: ToolCallResults, decisions: t.Any
) -> tuple[t.Any, dict[int, dict[str, str | Edit]]]:
    """The decisions for the batch's own pending calls, and those for the nested
    calls of its paused programs by the program's index; ``ValueError`` for a
    program's own call id (its nested calls are what a person decides) or a nested
    decision that is not ``"approve"``, ``"reject"`` or an ``Edit``, before anything runs."""
    if not isinstance(decisions, c.Mapping):
        return decisions, {}
    nested: dict[str, int] = {}
    own: dict[str, list[str]] = {}
    for index, result in enumerate(batch.results):
        program = getattr(result, "program", None)
        if isinstance(result, NeedsApproval) and program is not None:
            ids = [t.cast(str, na.call_id) for na in program.waiting]
            nested.update(dict.fromkeys(ids, index))
            if result.call_id is not None:
                own[result.call_id] = ids
    if not nested:
        return decisions, {}
    rest: dict[t.Any, t.Any] = {}
    programs: dict[int, dict[str, str | Edit]] = {}
    for key, decision in decisions.items():
        if type(key) is str and key in own:
            raise ValueError(
                f"cannot resolve: call {key!r} is a program waiting for its nested calls; "
                f"decide those instead ({', '.join(map(repr, own[key]))})"
            )
        where = nested.get(key) if type(key) is str else None
        if where is None:
            rest[key] = decision
            continue
        if type(decision) is not Edit and (
            type(decision) is not str or decision not in ("approve", "reject")
        ):
            raise ValueError(
                f"cannot resolve: the decision for nested call {key!r} must be 'approve', "
                f"'reject' or an Edit, got {_short(decision)}"
            )
        programs.setdefault(where, {})[key] = decision
    return rest, programs


def _resolve_programs(
    batch: ToolCallResults,
    registry: Registry,
    programs: dict[int, dict[str, str | Edit]],
    ctx: RunContext[t.Any],
) -> ToolCallResults:
    """``batch`` with each paused program of ``programs`` resolved (run again from
    its start, its completed nested calls replayed): its outcome under the program
    call's own id, or the program paused anew."""
    from nous_tools.program._tool import as_tool_result  # code mode only

    results = list(batch.results)
    size = len(results)
    contents = (list(batch._contents) + [None] * size)[:size]
    limits: list[int | None] = (list(batch._max_chars) + [DEFAULT_MAX_RESULT_CHARS] * size)[:size]
    for index, sub in programs.items():
        pending = t.cast(_tool_calls.PausedProgramCall, results[index])
        program = t.cast(t.Any, pending.program)
        token = _current_call.set(batch.calls[index])
        try:
            value = as_tool_result(program.resolve(sub, ctx))
        finally:
            _current_call.reset(token)
        if isinstance(value, Ok) and isinstance(value.value, ProgramPaused):
            value = _tool_calls.paused_program_call(pending.tool, value.value, pending.call_id)
        results[index] = value
        contents[index] = None
    return _successor(batch, registry, results, ctx, contents, limits)


def _no_registry() -> ValueError:
    return ValueError(
        "cannot resolve: this batch has no registry (make it with "
        "execute_tool_calls or ToolCallResults.from_dict)"
    )


def _already_resolved(batch: ToolCallResults) -> BatchAlreadyResolved:
    return BatchAlreadyResolved(
        f"cannot resolve: tool call batch {batch.id} was already resolved "
        "(a replay or a second submit); nothing was run"
    )


def _journal_decisions(
    journal: t.Any,
    batch: ToolCallResults,
    plan: list[tuple[int, str, NeedsApproval]],
    run_id: str,
) -> dict[int, str]:
    """What the journal records as the decision of each decided call, by index;
    raises the conflict when it holds another decision for one of them."""
    decided: dict[int, str] = {}
    for index, decision, na in plan:
        original = t.cast(NeedsApproval, batch.results[index])
        decided[index] = _journal.decision_text(decision, na.tool, _c.thaw(na.arguments))
        conflict = _journal.resolve_conflict(
            journal,
            na.tool,
            _c.thaw(original.arguments),
            run_id,
            t.cast(str, batch.calls[index].id),
            decided[index],
        )
        if conflict is not None:
            raise conflict
    return decided


def _run_plan(
    batch: ToolCallResults,
    registry: Registry,
    journal: t.Any,
    decided: dict[int, str],
    observer: t.Any,
    wait: float | None,
    plan: list[tuple[int, str, NeedsApproval]],
    ctx: RunContext[t.Any],
) -> list[Result]:
    """The outcome of each step of ``plan`` (:func:`_run_step`), in its order: one
    step run here, more run concurrently by the registry's executor."""
    if len(plan) == 1:  # what run_jobs does with one job, without making the list
        step = plan[0]
        return [
            _run_step(
                batch,
                registry,
                journal,
                decided,
                observer,
                wait,
                step[2].tool,
                step,
                ctx,
                batch.calls[step[0]].id,
            )
        ]
    jobs: list[tuple[Tool, t.Any, str | None] | Err] = [
        (na.tool, step, batch.calls[step[0]].id) for step in plan for na in (step[2],)
    ]
    run = functools.partial(_run_step, batch, registry, journal, decided, observer, wait)
    return t.cast("list[Result]", registry.executor.run_jobs(jobs, ctx, run=run))


def _merged(
    batch: ToolCallResults,
    registry: Registry,
    ctx: RunContext[t.Any],
    plan: list[tuple[int, str, NeedsApproval]],
    outcomes: list[Result],
) -> ToolCallResults:
    """The batch ``resolve`` makes of ``batch`` and the ``outcomes`` of its plan: each
    decided call's outcome in its place, formatted anew under its tool's limit, and
    ``ctx`` with the updates of their ``Ok`` applied in call order."""
    results = list(batch.results)
    size = len(results)
    contents = batch._contents
    if len(contents) == size:  # one per call: None (format the result) if missing
        contents = list(contents)
    else:
        contents = contents[:size]
        contents += [None] * (size - len(contents))
    default = registry.executor.max_result_chars
    limits = batch._max_chars  # one per call: missing is the default, 100,000
    if not limits:
        limits = [DEFAULT_MAX_RESULT_CHARS] * size
    elif len(limits) == size:
        limits = list(limits)
    else:
        limits = limits[:size]
        limits += [DEFAULT_MAX_RESULT_CHARS] * (size - len(limits))
    calls = batch.calls
    updated = False  # an Ok with a context update among the outcomes
    for (index, _, na), outcome in zip(plan, outcomes, strict=True):
        results[index] = outcome
        contents[index] = None
        own = na.tool.max_result_chars  # result_limit(na.tool, default), a call fewer
        limits[index] = default if own == EXECUTOR else own  # type: ignore[assignment]
        if not updated and type(outcome) is not Err:
            updated = getattr(outcome, "update", None) is not None
    context = ctx
    if updated:
        context = _apply_updates(
            ctx,
            [
                (calls[index], outcome)
                for (index, _, _), outcome in zip(plan, outcomes, strict=True)
            ],
        )
    return _successor(batch, registry, results, context, contents, limits)


def _resolved_one(
    batch: ToolCallResults,
    registry: Registry,
    ctx: RunContext[t.Any],
    na: NeedsApproval,
    outcome: Result,
) -> ToolCallResults:
    """The end of ``resolve`` for a batch of one call, approved and run: what its
    general loop makes of the one outcome, without copying the lists first."""
    own = na.tool.max_result_chars  # result_limit(na.tool, default), a call fewer
    # the executor's (only then looked up), or the tool's own
    limit = registry.executor.max_result_chars if own == EXECUTOR else t.cast("int | None", own)
    context = ctx
    if type(outcome) is not Err and getattr(outcome, "update", None) is not None:
        context = _apply_updates(ctx, [(batch.calls[0], outcome)])
    return _successor(batch, registry, [outcome], context, [None], [limit])


def _successor(
    batch: ToolCallResults,
    registry: Registry,
    results: list[CallResult],
    context: RunContext[t.Any],
    contents: list[str | None],
    limits: list[int | None],
) -> ToolCallResults:
    """The batch ``resolve`` makes of ``batch``: these results, contents, result
    limits and context, its calls and kinds, and a new id (another batch)."""
    return _batch(
        results,
        list(batch.calls),
        context,
        list(batch.skipped),
        list(batch.kinds),
        batch.provider,
        registry,
        _new_id(),
        batch.issued_at,
        contents,
        limits,
    )


def _run_step(
    batch: ToolCallResults,
    registry: Registry,
    journal: t.Any,
    decided: dict[int, str],
    observer: t.Any,
    wait: float | None,
    tool: Tool,
    job: t.Any,
    run_ctx: RunContext[t.Any] | None,
    call_id: str | None,
) -> Result:
    """One decided call of ``resolve`` (``job``: its plan step), run, rejected or
    journaled, as the current tool call, seen by the observer (when there is one)."""
    index, decision, na = job
    call = batch.calls[index]
    if decision == "edit":
        call = attrs.evolve(call, arguments=_c.thaw(na.arguments))
    token = _current_call.set(call)
    seen = None if observer is None else _observe_start(observer, tool, call)
    result: Result | None = None
    try:
        if journal is not None and isinstance(run_ctx, RunContext):
            result = _resolve_journaled(
                registry,
                journal,
                t.cast(NeedsApproval, batch.results[index]),
                na,
                decision,
                decided[index],
                run_ctx,
                t.cast(str, call_id),
                wait,
            )
        elif decision == "reject":
            result = _reject(registry, na)
        else:
            if run_ctx is _FRESH_CONTEXT:
                run_ctx = _FRESH_GATED  # what execute_approved would make, made once
            result = registry.run_approval(na, run_ctx)
        return result
    finally:
        if seen is not None:
            _observe_end(observer, seen, result)
        _current_call.reset(token)


def _claim_expiry(
    batch: ToolCallResults, registry: Registry, plan: list[tuple[int, str, NeedsApproval]]
) -> float | None:
    """Until when the store must remember that this batch was resolved: the
    batch's own expiry, or its approvals' when one is later."""
    known = limits(registry, None, None)
    max_age, skew = known
    issued_at = batch.issued_at
    latest = claim_expiry(issued_at, max_age, skew)
    for _, _, na in plan:
        if latest is None:
            break  # never expires: nothing is later
        accepted = na._limits  # what from_dict accepted it under, else the registry's
        if na.issued_at == issued_at and (accepted is None or accepted is known):
            continue  # (the batch's own expiry: the same limits, the same time)
        if accepted is not None:
            expiry = claim_expiry(na.issued_at, *accepted)
        else:
            expiry = claim_expiry(na.issued_at, max_age, skew)
        latest = None if expiry is None else max(latest, expiry)
    return latest


def _plan(batch: ToolCallResults, decisions: object) -> list[tuple[int, str, NeedsApproval]]:
    """``(index, "approve" | "edit" | "reject", the approval to run)`` per decided
    call, in call order; ``ValueError`` for any decision that cannot be applied."""
    if type(decisions) is not dict and not isinstance(decisions, c.Mapping):
        raise TypeError(
            "resolve expects a mapping of call ids to 'approve', 'reject' or an Edit, "
            f"got {type(decisions).__name__}"
        )
    calls = batch.calls
    if len(calls) == 1 and len(decisions) == 1:  # one call, its decision: no table
        for call_id, decision in decisions.items():
            na = batch.results[0]
            if (
                type(call_id) is str
                and call_id == calls[0].id
                and type(na) is NeedsApproval
                and type(decision) is str
                and decision in ("approve", "reject")
            ):
                return [(0, decision, na)]
    where: dict[str, int] = {}  # call id -> the first call with it
    twice: set[str] | None = None  # the call ids more than one call has
    for index, call in enumerate(batch.calls):
        its_id = call.id
        if its_id is not None:
            if its_id not in where:
                where[its_id] = index
            elif twice is None:
                twice = {its_id}
            else:
                twice.add(its_id)
    plan: list[tuple[int, str, NeedsApproval]] = []
    for call_id, decision in decisions.items():
        found = where.get(call_id) if type(call_id) is str else None
        if found is None:
            waiting = [
                call.id
                for call, result in zip(batch.calls, batch.results, strict=True)
                if isinstance(result, NeedsApproval) and call.id is not None
            ]
            shown = ", ".join(map(repr, waiting)) or "none"
            raise ValueError(
                f"cannot resolve: unknown call id {_short(call_id)} (waiting for a "
                f"decision: {shown})"
            )
        if twice is not None and call_id in twice:
            raise ValueError(
                f"cannot resolve: call id {call_id!r} names more than one call of the batch"
            )
        index = found
        na = batch.results[index]
        if not isinstance(na, NeedsApproval):
            raise ValueError(
                f"cannot resolve: call {call_id!r} is not waiting for approval "
                "(it already has a result)"
            )
        plan.append((index, *_decided(call_id, decision, na)))
    if len(plan) > 1:
        plan.sort(key=lambda step: step[0])
    return plan


def _resolve_journaled(
    registry: Registry,
    journal: t.Any,
    original: NeedsApproval,
    na: NeedsApproval,
    decision: str,
    recorded: str,
    ctx: RunContext[t.Any],
    call_id: str,
    wait: float | None,
) -> Result:
    """One decided call of a journaled ``resolve``: replayed when the journal holds
    its outcome, else run (or rejected) and recorded with its decision."""
    tool = na.tool

    def go(claim: _journal.JournalClaim) -> Result:
        if decision != "reject":
            return registry.run_approval(na, ctx, call_id, claim=claim)
        # The approval is used up first (or, in the journal's own store, with the
        # start record): a request that loses that race writes nothing (it answers
        # the winner's outcome), never a refusal as the outcome.
        if claim.redeems(registry.approval_store, na.id, na._claim_expiry(registry)):
            result = _rejected(na)
        else:
            result = _reject(registry, na)
            if isinstance(result.reason, ApprovalAlreadyUsed):
                return result
        started = claim.start(tool, ctx)
        if not isinstance(started, RunContext):
            return started
        claim.finish(tool, result)
        return result

    return _journal.resolve_call(
        journal, tool, _c.thaw(original.arguments), ctx, call_id, recorded, go, wait
    )
