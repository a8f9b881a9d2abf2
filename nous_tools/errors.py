"""The error classes of nous_tools.

Every failure that :func:`nous_tools.execute` reports is an :class:`Err` whose
``reason`` is usually one of these exceptions. They are plain exceptions with a
few keyword-only fields, so a caller can ``raise`` them, log them, or match on
their class.

>>> err = ToolError(tool_name="search", attempt=3)
>>> str(err)
'Tool execution failed (search) after 3 attempt(s)'
>>> str(ToolTimeout(tool_name="search", timeout=0.5))
"Tool 'search' timed out after 0.5 s"
"""

from __future__ import annotations

import typing as t

__all__ = [
    "ApprovalAlreadyUsed",
    "BatchAlreadyResolved",
    "CallInProgress",
    "ChildProcessDied",
    "ElicitationUnavailable",
    "ExecutorSaturated",
    "ExecutorShutdown",
    "JournalConflict",
    "JournalUnavailable",
    "OutcomeUnknown",
    "ProgramDiverged",
    "RateLimited",
    "ResultTooLarge",
    "RootsUnavailable",
    "SamplingUnavailable",
    "SandboxLimitReached",
    "SandboxUnavailable",
    "SandboxViolation",
    "ToolCancelled",
    "ToolDenied",
    "ToolError",
    "ToolNotFound",
    "ToolTimeout",
]


class ToolError(Exception):
    """A tool call that did not produce a value.

    ``tool_name`` and ``attempt`` say where it happened when they are known;
    ``original_error`` keeps the cause (the raw exception a tool raised, or a
    validation tuple such as ``("missing_required", ["name"])``).
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        tool_name: str | None = None,
        attempt: int | None = None,
        original_error: object = None,
    ) -> None:
        self.tool_name = tool_name
        self.attempt = attempt
        self.original_error = original_error
        self.message = message if message is not None else self._default_message()
        super().__init__(self.message)

    def _default_message(self) -> str:
        text = "Tool execution failed"
        if self.tool_name is not None:
            text += f" ({self.tool_name})"
        if self.attempt is not None:
            text += f" after {self.attempt} attempt(s)"
        return text

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self) -> tuple[t.Any, ...]:
        # Keyword-only fields do not survive the default exception pickling.
        return (
            _rebuild,
            (type(self), self.message, self.tool_name, self.attempt, self.original_error),
        )


def _rebuild(
    cls: type[ToolError],
    message: str,
    tool_name: str | None,
    attempt: int | None,
    original_error: object,
) -> ToolError:
    err = cls.__new__(cls)
    ToolError.__init__(
        err, message, tool_name=tool_name, attempt=attempt, original_error=original_error
    )
    return err


class ToolTimeout(ToolError, TimeoutError):
    """The attempt's deadline passed. Terminal: a timed-out call is never re-run.

    It is also a :class:`TimeoutError`, so a tool that calls another and lets its
    ``ToolTimeout`` escape (``executor.execute(inner, ...).unwrap()``) is itself
    cut off, not retried: a timeout is terminal all the way out.

    ``timeout`` is the tool's ``timeout``. ``waited`` is the seconds the attempt
    waited for a ``max_concurrency`` slot before it ran (the wait counts towards
    the timeout), or None when it did not wait; the message then says both, e.g.
    ``"Tool 'db' waited 1.2 s for a slot (max_concurrency=2), then timed out after
    0.3 s of running (its timeout of 1.5 s counts the wait)"``.
    """

    #: Seconds waited for a ``max_concurrency`` slot before the attempt ran, or None.
    waited: float | None = None

    def __init__(
        self,
        message: str | None = None,
        *,
        tool_name: str | None = None,
        timeout: float | None = None,
        attempt: int | None = None,
        original_error: object = None,
        waited: float | None = None,
    ) -> None:
        self.timeout = timeout
        self.waited = waited
        if message is None:
            message = f"Tool '{tool_name or 'unknown'}' timed out after {timeout or 0} s"
            if waited is not None:
                message += f", {round(waited, 2):g} s of it waiting for a slot (max_concurrency)"
        super().__init__(
            message, tool_name=tool_name, attempt=attempt, original_error=original_error
        )

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (
            _rebuild_timeout,
            (
                self.message,
                self.tool_name,
                self.timeout,
                self.attempt,
                self.original_error,
                self.waited,
            ),
        )


def _rebuild_timeout(
    message: str,
    tool_name: str | None,
    timeout: float | None,
    attempt: int | None,
    original_error: object,
    waited: float | None = None,
) -> ToolTimeout:
    return ToolTimeout(
        message,
        tool_name=tool_name,
        timeout=timeout,
        attempt=attempt,
        original_error=original_error,
        waited=waited,
    )


class ToolNotFound(ToolError):
    """No tool of that name is registered."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"Tool '{name}' not found", tool_name=name)

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (type(self), (self.name,))


class ToolDenied(ToolError):
    """The tool's approval level is ``"deny"``: it never runs."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"Tool '{name}' is denied and never runs", tool_name=name)

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (type(self), (self.name,))


class ExecutorSaturated(ToolError):
    """The tool was not started: too many workers are stuck past their deadlines to
    accept a new timed call, or (``isolation="process"``) no child process came free
    within the call's ``queue_timeout``. Never retried: the tool did not run."""


class ExecutorShutdown(ToolError):
    """The executor was shut down and accepts no more calls."""


class RateLimited(ToolError):
    """The call was refused by one of its tool's limits, before it ran: it is not an
    attempt and is never retried (see ``docs/concepts/limits.md``).

    ``limit`` names the limit: ``"max_concurrency"`` (no slot came free before the
    call's deadline), ``"rate_limit"`` (over the tool's rate) or
    ``"max_calls_per_run"`` (the run's budget of calls is used up).
    ``retry_after`` is how many seconds to wait before the limit lets a call
    through again, when that is known (a rate's window), else None. The message
    is written for the model, so that it can back off:
    ``"rate limited: 'search' allows 10 calls a minute; retry after 12 s"``.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        tool_name: str | None = None,
        limit: str | None = None,
        retry_after: float | None = None,
        attempt: int | None = None,
        original_error: object = None,
    ) -> None:
        self.limit = limit
        self.retry_after = retry_after
        if message is None:
            message = f"rate limited: '{tool_name or 'unknown'}' is over its {limit or 'limit'}"
            if retry_after is not None:
                message += f"; retry after {retry_after:g} s"
        super().__init__(
            message, tool_name=tool_name, attempt=attempt, original_error=original_error
        )

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (
            _rebuild_rate_limited,
            (self.message, self.tool_name, self.limit, self.retry_after, self.original_error),
        )


def _rebuild_rate_limited(
    message: str,
    tool_name: str | None,
    limit: str | None,
    retry_after: float | None,
    original_error: object,
) -> RateLimited:
    return RateLimited(
        message,
        tool_name=tool_name,
        limit=limit,
        retry_after=retry_after,
        original_error=original_error,
    )


class ResultTooLarge(ToolError):
    """A tool with ``on_result_overflow="error"`` returned a value whose text for the
    model is longer than its ``max_result_chars``. ``size`` is that text's length in
    characters, ``limit`` the limit."""

    def __init__(
        self,
        message: str | None = None,
        *,
        tool_name: str | None = None,
        size: int | None = None,
        limit: int | None = None,
        attempt: int | None = None,
        original_error: object = None,
    ) -> None:
        self.size = size
        self.limit = limit
        if message is None:
            message = (
                f"Tool '{tool_name or 'unknown'}' returned a result of {size or 0:,} characters, "
                f"over its limit of {limit or 0:,} (max_result_chars)"
            )
        super().__init__(
            message, tool_name=tool_name, attempt=attempt, original_error=original_error
        )

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (
            _rebuild_too_large,
            (self.message, self.tool_name, self.size, self.limit, self.attempt),
        )


def _rebuild_too_large(
    message: str, tool_name: str | None, size: int | None, limit: int | None, attempt: int | None
) -> ResultTooLarge:
    return ResultTooLarge(message, tool_name=tool_name, size=size, limit=limit, attempt=attempt)


class ApprovalAlreadyUsed(ToolError):
    """A ``NeedsApproval`` whose id the registry's approval store had already claimed:
    a replayed or double-submitted approval. The tool did not run."""


class BatchAlreadyResolved(ValueError):
    """``ToolCallResults.resolve`` of a batch whose decisions were already applied
    (a replayed or double-submitted batch): the registry's approval store had
    already claimed its id. Nothing ran."""


class CallInProgress(ToolError):
    """The call journal holds this call as started and its lease is live: it is
    running elsewhere (another thread, process or host). It was not run again;
    ask again later, or pass ``wait=`` seconds to wait for its outcome."""


class OutcomeUnknown(ToolError):
    """The call journal holds this call as started, never completed, and its lease
    has expired: an earlier attempt crashed somewhere between starting and
    recording its outcome. It was not run again (its tool is not
    ``idempotent=True``); a person finds out what happened and records it with
    ``journal.settle``."""


class JournalConflict(ToolError):
    """The call journal already holds this call id (in this run) with other
    arguments, another tool, or another decision of a person: the call never runs."""


class ProgramDiverged(ToolError):
    """A program re-run to resume (after an approval, or a crash) asked, at a nested
    call's position, another call than the one recorded there (the program is not
    deterministic): the message names both, and neither was run."""


class JournalUnavailable(ToolError):
    """The call journal could not be read or written (a database that cannot be
    reached, a full disk, a corrupt record): the call did not run. The message
    names why."""


class SamplingUnavailable(ToolError):
    """``ctx.sample(...)`` has nowhere to go: the call is not served over MCP (or the
    MCP client did not declare the ``sampling`` capability) and its
    :class:`~nous_tools.RunContext` has no ``sampler``.

    A tool may catch it and carry on without a model; uncaught, the call is an
    ``Err`` whose message names it, and it is not retried (asking again would
    find no sampler either).
    """


class ElicitationUnavailable(ToolError):
    """``ctx.elicit(...)`` has nowhere to go: the call is not served over MCP (or the
    MCP client did not declare form elicitation) and its
    :class:`~nous_tools.RunContext` has no ``elicitor``.

    A tool may catch it and fall back to a default; uncaught, the call is an ``Err``
    whose message names it, and it is not retried.
    """


class RootsUnavailable(ToolError):
    """``ctx.roots()`` has nowhere to go: the call is not served over MCP, or the MCP
    client did not declare the ``roots`` capability.

    A tool may catch it and carry on without the client's roots; uncaught, the call
    is an ``Err`` whose message names it, and it is not retried.
    """


class SandboxViolation(PermissionError):
    """A path or operation is outside what the :class:`SandboxPolicy` allows.

    Raised by the policy's checks (``check_write``, ``check_read``), and made of
    what the kernel refused a fenced tool (a ``PermissionError`` on a path, a
    refused connect): the message names the rule, "write outside the workspace
    refused: /etc/x". Never retried.
    """


class SandboxLimitReached(Exception):
    """A fenced tool reached one of its policy's resource limits: the message names
    it ("memory limit 256 MB reached"), ``limit`` is the policy field. The child
    process that reached it is replaced. Never retried."""

    def __init__(self, message: str, *, limit: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (_rebuild_limit, (str(self), self.limit))


def _rebuild_limit(message: str, limit: str | None) -> SandboxLimitReached:
    return SandboxLimitReached(message, limit=limit)


class SandboxUnavailable(Exception):
    """A call's :class:`SandboxPolicy` asks for a fence this host cannot prove
    (see ``nous_tools.sandbox.probe()``): the call was not run at all, never
    unconfined. ``missing`` names the mechanisms. Never retried."""

    def __init__(self, message: str, *, missing: t.Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing = tuple(missing)

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (_rebuild_unavailable, (str(self), self.missing))


def _rebuild_unavailable(message: str, missing: tuple[str, ...]) -> SandboxUnavailable:
    return SandboxUnavailable(message, missing=missing)


class ToolCancelled(BaseException):
    """Raised inside a worker whose attempt passed its deadline.

    It derives from ``BaseException`` so that a tool's own ``except Exception``
    does not swallow it. It is delivered asynchronously and lands at the next
    Python bytecode the worker runs; it cannot interrupt a blocking C call.
    """


class ChildProcessDied(BaseException):
    """The child process running a process-isolated attempt died before it answered.

    A segfault, ``os._exit``, the kernel's out-of-memory killer, a ``kill -9``
    from outside. It is the ``original_error`` of the ``Err(ToolError)`` the
    caller gets. Like ``SystemExit`` it derives from ``BaseException``, so the
    executor never retries it: a child that died may have done part of its work.
    ``exitcode`` is the child's exit code, or minus the signal number that
    killed it (as in :attr:`multiprocessing.Process.exitcode`); None when unknown.
    """

    def __init__(
        self, message: str, *, pid: int | None = None, exitcode: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.pid = pid
        self.exitcode = exitcode

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (_rebuild_died, (self.message, self.pid, self.exitcode))


def _rebuild_died(message: str, pid: int | None, exitcode: int | None) -> ChildProcessDied:
    return ChildProcessDied(message, pid=pid, exitcode=exitcode)
