"""The parent's loop: run a program in a confined child, serving its nested calls
through the registry's pipeline (private; the public face is
:meth:`Registry.run_program <nous_tools.Registry.run_program>`).

A nested call is ``registry.execute(name, arguments, ctx, call_id=...)``: approval,
validation, admission (rate limits, ``max_calls_per_run``), the tool's isolation
and deadline, retries, the journal and the signals all apply, as to any call. Its
id is ``"<program_id>/<position>"`` (1-based) and its run is the program's, so a
re-run of the same program in the same run finds each completed call in the journal.
"""

from __future__ import annotations

import collections
import collections.abc as c
import hashlib
import json
import keyword
import os
import select
import subprocess
import tempfile
import threading
import typing as t
import uuid
import weakref

import attrs

from nous_tools._util import _canonical
from nous_tools._util._clock import monotonic
from nous_tools._util._log import log as _log
from nous_tools._util._scope import Scope, here, interrupts
from nous_tools._util._text import safe_str
from nous_tools._util._tokens import claim_expiry
from nous_tools._util._tokens import limits as limits_of
from nous_tools.approval import Edit, NeedsApproval
from nous_tools.approval._token import edited as edited_approval
from nous_tools.errors import (
    BatchAlreadyResolved,
    JournalConflict,
    ProgramDiverged,
    SandboxUnavailable,
    ToolError,
    ToolTimeout,
)
from nous_tools.program import _children
from nous_tools.program._values import EditedCall, ProgramOutput, ProgramPaused
from nous_tools.results import Err, Ok, Result
from nous_tools.run_context import RunContext
from nous_tools.sandbox import SandboxPolicy

if t.TYPE_CHECKING:
    from nous_tools.program._registry import RegistryLike

__all__ = ["DEFAULT_MAX_CALLS", "DEFAULT_MEMORY_MB", "DEFAULT_TIMEOUT", "resume", "run_program"]

#: A program's deadline by default, in seconds.
DEFAULT_TIMEOUT = 60.0
#: The most nested calls a program may make by default.
DEFAULT_MAX_CALLS = 100
#: The memory limit of a program's child by default, in MB.
DEFAULT_MEMORY_MB = 512
#: How many nested calls' outcomes a registry without a journal keeps for re-runs.
MEMO_SIZE = 10_000
_PROGRAM_CLAIM = "program:"
#: The largest message a program may send (a nested call's arguments, its result).
MAX_MESSAGE = 64 * 2**20
#: How often (seconds) a program waiting for its child looks whether it was cancelled.
_POLL = 0.25

_default_policy: SandboxPolicy | None = None
_policy_lock = threading.Lock()


def default_policy() -> SandboxPolicy:
    """``read_only``, no network, a memory limit of :data:`DEFAULT_MEMORY_MB`."""
    global _default_policy
    with _policy_lock:
        if _default_policy is None:
            _default_policy = SandboxPolicy.new(
                "read_only",
                workspace_root=tempfile.gettempdir(),
                network=False,
                memory_mb=DEFAULT_MEMORY_MB,
            )
        return _default_policy


# -- without a journal: this process's record of each program's nested calls --------

_Memo = collections.OrderedDict[tuple[str, str], tuple[str, str, Result]]
_memos: weakref.WeakKeyDictionary[t.Any, _Memo] = weakref.WeakKeyDictionary()
_memo_lock = threading.Lock()


def _memo_of(registry: RegistryLike) -> _Memo:
    with _memo_lock:
        memo = _memos.get(registry)
        if memo is None:
            memo = _memos[registry] = collections.OrderedDict()
        return memo


def _remember(memo: _Memo, key: tuple[str, str], name: str, digest: str, result: Result) -> None:
    with _memo_lock:
        memo[key] = (name, digest, result)
        while len(memo) > MEMO_SIZE:
            memo.popitem(last=False)


def _digest(arguments: c.Mapping[str, t.Any]) -> str:
    try:
        return hashlib.sha256(_canonical.dumps(dict(arguments))).hexdigest()
    except (TypeError, ValueError):
        return hashlib.sha256(repr(arguments).encode()).hexdigest()


# -- entry points ----------------------------------------------------------------------


def program_id_of(source: str) -> str:
    """The id a program run in a run (``ctx.run_id``) gets when none is given: a
    digest of its source (the same program in the same run is the same program,
    resumed)."""
    return "program-" + hashlib.sha256(source.encode("utf-8", "replace")).hexdigest()[:16]


def _new_program_id() -> str:
    return "program-" + uuid.uuid4().hex


def functions_of(registry: RegistryLike, tools: c.Iterable[str] | None) -> tuple[str, ...]:
    """The names a program may call: ``tools`` (default every registered tool), kept
    to those that are Python identifiers (a name like ``a.b`` cannot be a function)."""
    names = registry.names() if tools is None else list(tools)
    return tuple(n for n in names if n.isidentifier() and not keyword.iskeyword(n))


def run_program(
    registry: RegistryLike,
    source: object,
    ctx: RunContext[t.Any] | None = None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    sandbox: t.Any = None,
    max_calls: int = DEFAULT_MAX_CALLS,
    tools: c.Iterable[str] | None = None,
    program_id: str | None = None,
) -> Result | ProgramPaused:
    """:meth:`Registry.run_program <nous_tools.Registry.run_program>`."""
    if not isinstance(source, str):
        return Err(ToolError(f"A program must be a str of Python, got {type(source).__name__}"))
    if ctx is None:
        ctx = RunContext.new()
    elif not isinstance(ctx, RunContext):
        raise TypeError(f"run_program expects a RunContext or None, got {type(ctx).__name__}")
    if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 0:
        raise ValueError(f"max_calls must be an int >= 0, got {max_calls!r}")
    if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
        raise ValueError(f"timeout must be a number of seconds > 0 or None, got {timeout!r}")
    policy = default_policy() if sandbox is None else SandboxPolicy.new(sandbox)
    if program_id is None:
        # In a run, the same program is the same program (a re-run resumes it);
        # outside one, each run of a program is a program of its own.
        program_id = program_id_of(source) if ctx.run_id is not None else _new_program_id()
    if ctx.run_id is None:
        ctx = attrs.evolve(ctx, run_id=program_id)
    if ctx.approval_gated:  # a person approved the program, not the calls it will make
        ctx = attrs.evolve(ctx, approval_gated=False)
    paused = ProgramPaused(
        source=source,
        program_id=program_id,
        run_id=t.cast(str, ctx.run_id),
        waiting=(),
        timeout=timeout,
        max_calls=max_calls,
        sandbox=policy,
        functions=functions_of(registry, tools),
        registry=registry,
    )
    return _Run(registry, paused, ctx, {}).go()


def resume(
    paused: ProgramPaused,
    decisions: c.Mapping[str, str | Edit],
    ctx: RunContext[t.Any] | None,
) -> Result | ProgramPaused:
    """:meth:`ProgramPaused.resolve`."""
    registry = paused.registry
    if registry is None:
        raise ValueError("cannot resolve: this paused program has no registry")
    if not isinstance(decisions, c.Mapping):
        raise TypeError(
            f"resolve expects a mapping of nested call ids to 'approve', 'reject' or an "
            f"Edit, got {type(decisions).__name__}"
        )
    waiting = {na.call_id: na for na in paused.waiting}
    # each decided call: its decision, the call the program asked, the call to run
    plan: dict[str, tuple[str, NeedsApproval, NeedsApproval]] = {}
    for call_id, decision in decisions.items():
        na = waiting.get(call_id)
        if na is None:
            shown = ", ".join(repr(i) for i in waiting) or "none"
            raise ValueError(
                f"cannot resolve: {call_id!r} is not a nested call waiting in program "
                f"{paused.program_id} (waiting: {shown})"
            )
        if type(decision) is Edit:
            plan[call_id] = (
                "edit",
                na,
                edited_approval(na, decision.arguments, f"nested call {call_id!r}"),
            )
        elif type(decision) is str and decision in ("approve", "reject"):
            plan[call_id] = (decision, na, na)
        else:
            shown = safe_str(decision)[:60] if type(decision) is str else type(decision).__name__
            raise ValueError(
                f"cannot resolve: the decision for nested call {call_id!r} must be "
                f"'approve', 'reject' or an Edit, got {shown!r}"
            )
    if not plan:
        return paused
    claim = (
        _PROGRAM_CLAIM
        + hashlib.sha256(
            "\n".join(sorted(str(na.id) for na in paused.waiting)).encode()
        ).hexdigest()
    )
    expiry = _expiry(registry, paused.waiting)
    if not registry.claim_approval(claim, expiry):
        raise BatchAlreadyResolved(
            f"cannot resolve: paused program {paused.program_id} was already resolved "
            "(a replay or a second submit); nothing was run"
        )
    if ctx is None:
        ctx = RunContext.new(run_id=paused.run_id)
    elif not isinstance(ctx, RunContext):
        raise TypeError(f"resolve expects a RunContext or None, got {type(ctx).__name__}")
    if ctx.run_id != paused.run_id or ctx.approval_gated:
        ctx = attrs.evolve(ctx, run_id=paused.run_id, approval_gated=False)
    rejected = paused.rejected + tuple(i for i, (d, _, _) in plan.items() if d == "reject")
    edited = paused.edited + tuple(
        EditedCall(
            i,
            asked.tool.name,
            _digest(_canonical.thaw(asked.arguments)),
            _canonical.thaw(run.arguments),
        )
        for i, (d, asked, run) in plan.items()
        if d == "edit"
    )
    for _, (decision, na, _) in plan.items():
        if decision == "reject":
            registry.claim_approval(na.id, _expiry(registry, (na,)))
    undecided = tuple(na for na in paused.waiting if na.call_id not in plan)
    again = attrs.evolve(paused, waiting=undecided, rejected=rejected, edited=edited)
    approved = {i: (asked, run) for i, (d, asked, run) in plan.items() if d != "reject"}
    return _Run(registry, again, ctx, approved).go()


def _expiry(registry: RegistryLike, waiting: c.Iterable[NeedsApproval]) -> float | None:
    """Until when a claim about ``waiting`` must be remembered: the latest expiry of
    their tokens under the registry's limits (None: for good)."""
    limits = limits_of(registry, None, None)
    latest: float | None = 0.0
    for na in waiting:
        expiry = claim_expiry(na.issued_at, *limits)
        if expiry is None:
            return None
        latest = max(t.cast(float, latest), expiry)
    return latest or None


# -- one run of a program --------------------------------------------------------------


class _Stop(Exception):
    """The run ends with ``outcome`` (the child is killed)."""

    def __init__(self, outcome: Result | ProgramPaused) -> None:
        super().__init__()
        self.outcome = outcome


class _Run:
    """One run of a program: the child, its channel, and the nested calls served."""

    def __init__(
        self,
        registry: RegistryLike,
        paused: ProgramPaused,
        ctx: RunContext[t.Any],
        approved: dict[str, tuple[NeedsApproval, NeedsApproval]],
    ) -> None:
        self.registry = registry
        self.paused = paused
        self.ctx = ctx
        # each approved call: the call the program asked, the call to run (edited)
        self.approved = approved
        self.edited = {e.call_id: e for e in paused.edited}
        self.position = 0
        self.journal = registry.effective_journal()
        self.memo = _memo_of(registry) if self.journal is None else None
        self.buffer = b""
        self.scope: Scope | None = None

    def go(self) -> Result | ProgramPaused:
        paused = self.paused
        try:
            compile(paused.source, "<program>", "exec", dont_inherit=True)
        except SyntaxError as exc:
            return Err(
                ToolError(
                    f"The program has a syntax error at line {exc.lineno}: {exc.msg}",
                    original_error=exc,
                )
            )
        except (ValueError, OverflowError, RecursionError, MemoryError) as exc:
            return Err(ToolError(f"The program cannot be compiled: {exc}", original_error=exc))
        started = monotonic()
        deadline = None if paused.timeout is None else started + paused.timeout
        outer = here.scope
        if outer is not None and outer.deadline is not None:
            deadline = outer.deadline if deadline is None else min(deadline, outer.deadline)
        try:
            child = _children.take(paused.sandbox or default_policy())
        except SandboxUnavailable as exc:
            return Err(ToolError(f"The program was not run: {exc}", original_error=exc))
        except OSError as exc:
            return Err(ToolError(f"The program's process could not start: {exc}"))
        scope = Scope(deadline, outer.event if outer is not None else None)
        if outer is not None and not outer.adopt(scope):
            _children.kill(child)
            return Err(ToolError("The program was cancelled before it started"))
        here.scope = self.scope = scope
        try:
            return self._serve(child, deadline)
        except _Stop as stop:
            return stop.outcome
        except BaseException as exc:
            if interrupts(exc):
                raise
            _log.error("Internal error while running a program", exc_info=True)
            return Err(
                ToolError(
                    f"The program could not be run: internal error {type(exc).__name__}: "
                    f"{safe_str(exc)}",
                    original_error=exc,
                )
            )
        finally:
            here.scope = outer
            if outer is not None:
                outer.release(scope)
            _children.kill(child)

    def _serve(self, child: subprocess.Popen[bytes], deadline: float | None) -> Result:
        paused = self.paused
        job = {"source": paused.source, "functions": list(paused.functions or ())}
        self._send(child, job)
        while True:
            message = self._receive(child, deadline)
            if "call" in message:
                answer = self._nested(message.get("call"), message.get("arguments"))
                try:
                    self._send(child, answer)
                except (TypeError, ValueError, RecursionError) as exc:  # a cycle, say
                    name = message.get("call")
                    why = f"the value of '{name}' cannot be sent to the program: {exc}"
                    self._send(child, _error(why, t.cast(str, name)))
            elif "done" in message:
                done = message["done"]
                return Ok(ProgramOutput(done.get("result"), done.get("stdout", ""), self.position))
            elif "failed" in message:
                return Err(self._failed(message["failed"]))
            else:
                raise _Stop(Err(ToolError("The program's process sent a message it should not")))

    # -- the channel ---------------------------------------------------------------

    def _send(self, child: subprocess.Popen[bytes], message: object) -> None:
        data = json.dumps(message, default=_fallback).encode() + b"\n"
        stdin = t.cast(t.IO[bytes], child.stdin)
        try:
            stdin.write(data)
            stdin.flush()
        except (BrokenPipeError, OSError):
            raise _Stop(self._died(child)) from None

    def _receive(self, child: subprocess.Popen[bytes], deadline: float | None) -> dict[str, t.Any]:
        stdout = t.cast(t.IO[bytes], child.stdout)
        fd = stdout.fileno()
        while b"\n" not in self.buffer:
            left = None if deadline is None else deadline - monotonic()
            if left is not None and left <= 0:
                raise _Stop(self._timed_out())
            if self.scope is not None and self.scope.cancelled:
                raise _Stop(Err(ToolError("The program was cancelled and killed")))
            ready, _, _ = select.select([fd], [], [], _POLL if left is None else min(left, _POLL))
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise _Stop(self._died(child))
            self.buffer += chunk
            if len(self.buffer) > MAX_MESSAGE:
                raise _Stop(
                    Err(
                        ToolError(
                            f"The program sent a message over {MAX_MESSAGE // 2**20} MB "
                            "(a call's arguments, or its result) and was stopped"
                        )
                    )
                )
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            raise _Stop(Err(ToolError("The program's process sent a line that is not JSON")))
        return message

    def _timed_out(self) -> Err:
        timeout = self.paused.timeout
        return Err(
            ToolTimeout(
                f"The program timed out after {timeout:g} s and was killed "
                f"(after {self.position} nested call(s))"
                if timeout is not None
                else "The program's enclosing deadline passed and it was killed",
                tool_name="program",
                timeout=timeout,
            )
        )

    def _died(self, child: subprocess.Popen[bytes]) -> Err:
        try:
            code = child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        policy = self.paused.sandbox
        limit = ""
        if policy is not None and policy.memory_mb is not None:
            limit = f" (its memory limit is {policy.memory_mb} MB)"
        return Err(
            ToolError(f"The program's process died before it finished, exit code {code}{limit}")
        )

    def _failed(self, failed: dict[str, t.Any]) -> ToolError:
        kind = failed.get("type", "Exception")
        where = f" at line {failed['line']}" if failed.get("line") else ""
        message = f"The program raised {kind}{where}: {failed.get('message', '')}"
        if kind == "NameError":
            available = ", ".join(self.paused.functions or ()) or "none"
            message += f"; the functions it may call are: {available}"
        stdout = failed.get("stdout") or ""
        return ToolError(message, original_error={"stdout": stdout, **failed})

    # -- a nested call ---------------------------------------------------------------

    def _nested(self, name: object, arguments: object) -> dict[str, t.Any]:
        paused = self.paused
        self.position += 1
        position = self.position
        if not isinstance(name, str) or name not in (paused.functions or ()):
            available = ", ".join(paused.functions or ()) or "none"
            return _error(f"No function {safe_str(name)!r}; available: {available}", None)
        if not isinstance(arguments, dict):
            arguments = {}
        if position > paused.max_calls:
            raise _Stop(
                Err(
                    ToolError(
                        f"The program made more than max_calls={paused.max_calls} nested "
                        f"calls and was stopped at call #{position} ({name})"
                    )
                )
            )
        call_id = f"{paused.program_id}/{position}"
        result = self._call(name, arguments, call_id, position)
        if isinstance(result, NeedsApproval):
            raise _Stop(
                attrs.evolve(paused, waiting=(*paused.waiting, result), registry=self.registry)
            )
        if isinstance(result, Ok):
            return {"ok": result.value}
        reason = result.reason
        message = str(reason) if reason is not None else "failed"
        if isinstance(reason, ProgramDiverged):
            raise _Stop(result)
        return _error(message, name, type(reason).__name__)

    def _call(
        self, name: str, arguments: dict[str, t.Any], call_id: str, position: int
    ) -> Result | NeedsApproval:
        registry = self.registry
        ctx = self.ctx
        approved = self.approved.get(call_id)
        if approved is not None:
            asked, run = approved
            if asked.tool.name != name or _canonical.thaw(asked.arguments) != arguments:
                return self._diverged(
                    position,
                    name,
                    arguments,
                    asked.tool.name,
                    _canonical.thaw(asked.arguments),
                )
            # (edited: the edited call runs, recorded under the call's id)
            result = registry.run_approval(run, ctx, call_id)
            self._record(call_id, name, arguments, result)
            return result
        if call_id in self.paused.rejected:
            return Err(
                ToolError(f"Tool '{name}' was rejected by the user and did not run", tool_name=name)
            )
        memo = self.memo
        key = (self.paused.run_id, call_id)
        digest = _digest(arguments)
        edited = self.edited.get(call_id)
        # A call a person approved with other arguments: the one approved if the
        # program asks what it asked then, answered by the edited call's outcome.
        if edited is not None and (edited.tool != name or edited.asked != digest):
            return self._diverged(position, name, arguments, edited.tool, None)
        if memo is not None:
            with _memo_lock:
                known = memo.get(key)
            if known is not None:
                if known[0] != name or known[1] != digest:
                    return self._diverged(position, name, arguments, known[0], None)
                return known[2]
        if edited is not None:  # never the asked arguments: the edited call's outcome
            replayed = self._replay_edit(edited, name, call_id)
            if not isinstance(replayed, NeedsApproval):
                self._record(call_id, name, arguments, replayed)
            return replayed
        answer = registry.execute(name, arguments, ctx, call_id=call_id)
        if isinstance(answer, NeedsApproval):
            return answer
        if isinstance(answer, Err) and isinstance(answer.reason, JournalConflict):
            record = None
            try:
                record = self.journal.get(self.paused.run_id, call_id) if self.journal else None
            except Exception:
                record = None
            return self._diverged(
                position, name, arguments, record.tool if record is not None else None, None
            )
        self._record(call_id, name, arguments, answer)
        return answer

    def _replay_edit(self, edited: EditedCall, name: str, call_id: str) -> Result | NeedsApproval:
        """The journal's outcome of an edited call (recorded under its id with the
        edited arguments); an edit the tool's schema refused never ran: its
        validation error again."""
        arguments = _canonical.thaw(edited.arguments)
        tool = self.registry.lookup(name)
        validator = None if tool is None else tool.validator
        failure = None if validator is None else validator.validate(arguments)
        if failure is not None:
            return Err(
                ToolError(f"Invalid arguments for '{name}': {failure.message}", tool_name=name)
            )
        return self.registry.execute(name, arguments, self.ctx, call_id=call_id)

    def _record(self, call_id: str, name: str, arguments: dict[str, t.Any], result: Result) -> None:
        if self.memo is not None:
            _remember(self.memo, (self.paused.run_id, call_id), name, _digest(arguments), result)

    def _diverged(
        self,
        position: int,
        name: str,
        arguments: c.Mapping[str, t.Any],
        before: str | None,
        before_arguments: c.Mapping[str, t.Any] | None,
    ) -> Err:
        if before is None:
            earlier = "another call"
        elif before_arguments is None:
            earlier = f"a call of {before!r}" + (" with other arguments" if before == name else "")
        else:
            earlier = f"{before}({_shown(before_arguments)})"
        return Err(
            ProgramDiverged(
                f"Program {self.paused.program_id} diverged at nested call #{position}: "
                f"it made {earlier} there before, and now asks {name}({_shown(arguments)}); "
                "neither was run (a program that resumes must make the same calls in the "
                "same order)",
                tool_name=name,
            )
        )


def _shown(arguments: c.Mapping[str, t.Any]) -> str:
    text = ", ".join(f"{k}={safe_str(repr(v))}" for k, v in arguments.items())
    return text if len(text) <= 200 else text[:197] + "..."


def _error(message: str, tool: str | None, kind: str = "ToolError") -> dict[str, t.Any]:
    return {"error": {"type": kind, "message": message, "tool": tool}}


def _fallback(value: object) -> object:
    """What JSON cannot hold of a tool's value, for the program: plain data where
    it has a shape (attrs, a mapping, a sequence), else its ``str``."""
    if attrs.has(type(value)):
        return attrs.asdict(t.cast(t.Any, value))
    if isinstance(value, c.Mapping):
        return dict(value)
    if isinstance(value, c.Set | tuple):
        return list(value)
    return safe_str(value)
