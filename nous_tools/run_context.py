"""The context a tool sees: deps, the attempt index, usage and approval settings.

A ``RunContext`` is plain, frozen data. Build one directly to call a tool
outside an agent loop, or to assert on what a tool would see:

>>> ctx = RunContext.new({"database": "db", "api_key": "secret"})
>>> ctx.deps["api_key"]
'secret'
>>> (ctx.retry, ctx.approval_gated, ctx.usage.total_tokens)
(0, False, 0)

An approval handler decides about tools whose approval level is ``"ask"``:

>>> handler = lambda req: "reject" if req.name == "delete_all" else "approve"
>>> ctx = RunContext.new({}, retry=2, approval_handler=handler)
>>> ctx.retry, ctx.approval_gated
(2, False)

Inside an attempt the executor also sets ``deadline`` (a ``time.monotonic()``
value, or None without a timeout) and ``cancelled``, a ``threading.Event`` set
when the deadline passes; ``ctx.cancelled.wait(seconds)`` is a sleep that ends
early when the call is cancelled.

A tool says how far it has come with ``ctx.report_progress(progress, total,
message)`` and what it is doing with ``ctx.log(level, message, **data)``; outside
an attempt that someone listens to, both only check their arguments:

>>> ctx.report_progress(3, 10, "page 3")
>>> ctx.log("info", "fetched", pages=3)
>>> ctx.report_progress(11, 10)
Traceback (most recent call last):
...
ValueError: report_progress: total (10) is below progress (11)

See ``docs/how-to/progress.md`` for where they are delivered.
"""

from __future__ import annotations

import collections.abc as c
import math
import threading
import typing as t

import attrs

from nous_tools._types import ReportSink
from nous_tools._util._clock import monotonic
from nous_tools.usage import Usage

#: A new context's usage: nothing yet (a frozen value, shared).
_NO_USAGE = Usage()

if t.TYPE_CHECKING:
    from nous_tools.asking import Elicitation, Elicitor, Question, Root, Sampler
    from nous_tools.sandbox import SandboxPolicy

__all__ = ["ApprovalHandler", "RunContext"]

#: The type of ``ctx.deps`` (``RunContext[MyDeps]``); a bare ``RunContext`` is
#: ``RunContext[Any]``.
if t.TYPE_CHECKING:
    from typing_extensions import TypeVar

    DepsT = TypeVar("DepsT", default=t.Any)
else:
    # typing's at run time: the defaults are for type checkers, and importing
    # typing_extensions would cost every program's start-up.
    DepsT = t.TypeVar("DepsT")

#: An approval handler: called with an :class:`~nous_tools.ApprovalRequest`,
#: returns ``"approve"``, ``"reject"`` or an :class:`~nous_tools.Edit`. Both live in
#: ``nous_tools.approval``, a layer above this value's, so the type names neither:
#: annotate a handler's parameter as ``ApprovalRequest`` to have it checked.
ApprovalHandler = c.Callable[[t.Any], object]


#: The levels of ``ctx.log``, least severe first (MCP's, up to ``error``).
LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error")
_LEVELS = frozenset(LEVELS)

_NUMBERS = (int, float)


def check_progress(progress: object, total: object, message: object) -> None:
    """Raise ``ValueError`` naming what is wrong with a progress report."""
    if isinstance(progress, bool) or not isinstance(progress, _NUMBERS):
        raise ValueError(
            f"report_progress: progress must be a number, got {type(progress).__name__}"
        )
    if not math.isfinite(progress) or progress < 0:
        raise ValueError(f"report_progress: progress must be a finite number >= 0, got {progress}")
    if total is not None:
        if isinstance(total, bool) or not isinstance(total, _NUMBERS):
            raise ValueError(
                f"report_progress: total must be a number or None, got {type(total).__name__}"
            )
        if not math.isfinite(total):
            raise ValueError(f"report_progress: total must be finite, got {total}")
        if total < progress:
            raise ValueError(f"report_progress: total ({total}) is below progress ({progress})")
    if message is not None and not isinstance(message, str):
        raise ValueError(
            f"report_progress: message must be a str or None, got {type(message).__name__}"
        )


def check_log(level: object, message: object) -> None:
    """Raise ``ValueError`` naming what is wrong with a log line."""
    if level not in _LEVELS:
        raise ValueError(
            f"log: level must be one of {', '.join(repr(name) for name in LEVELS)}, got {level!r}"
        )
    if not isinstance(message, str):
        raise ValueError(f"log: message must be a str, got {type(message).__name__}")


class _NeverCancelled(threading.Event):
    """The ``cancelled`` of contexts outside a timed attempt: shared, so it can
    never be set (a tool calling ``set()`` on it must not cancel everyone)."""

    def set(self) -> None:
        return None


_NEVER_CANCELLED = _NeverCancelled()


def _check_retry(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"RunContext option 'retry' must be an int >= 0, got {value!r}")


def _check_run_id(instance: object, attribute: attrs.Attribute[t.Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(
            f"RunContext option 'run_id' must be a non-empty str or None, got {value!r}"
        )


def _check_handler(instance: object, attribute: attrs.Attribute[t.Any], value: object) -> None:
    if value is not None and not callable(value):
        raise TypeError(
            f"RunContext option '{attribute.name}' must be callable or None, "
            f"got {type(value).__name__}"
        )


@attrs.frozen(slots=True, eq=False)
class RunContext(t.Generic[DepsT]):
    """What a tool sees of the run. Frozen: use :func:`attrs.evolve` to change it.

    ``deps`` is whatever the tools need — a database handle, the current user — and
    the model never sees it (``RunContext[Deps]`` types it). ``retry`` is the
    0-based index of the current attempt; ``usage`` the run's :class:`Usage`;
    ``approval_handler`` and ``approval_gated`` decide ``"ask"`` tools (see
    ``docs/concepts/approval.md``); ``sandbox`` is the :class:`SandboxPolicy` for
    file paths. Inside an attempt the executor sets ``deadline`` (a
    ``time.monotonic()`` value, or None) and ``cancelled`` (set when the deadline
    passes: poll it, or sleep with ``ctx.cancelled.wait(seconds)``).
    """

    deps: DepsT = None  # type: ignore[assignment]
    retry: int = attrs.field(default=0, validator=_check_retry)
    usage: Usage = attrs.field(factory=Usage, metadata={"description": "The run's usage."})
    approval_handler: ApprovalHandler | None = attrs.field(default=None, validator=_check_handler)
    approval_gated: bool = attrs.field(default=False, converter=bool)
    sandbox: SandboxPolicy | None = None
    deadline: float | None = None
    cancelled: threading.Event = attrs.field(default=_NEVER_CANCELLED)
    #: The run (a conversation, a job) this call belongs to: with a call id, the key
    #: of the call journal and of per-run budgets. Carried to attempts and nested calls.
    run_id: str | None = attrs.field(default=None, validator=_check_run_id)
    #: Inside a journaled call: a stable key derived from the journal's key
    #: ``(run_id, call_id)`` (never the raw ids) to pass downstream, e.g. as Stripe's
    #: ``Idempotency-Key``; the same on every re-run of the call. None otherwise.
    #: Kept out of ``repr``: it never reaches logs.
    idempotency_key: str | None = attrs.field(default=None, repr=False)
    #: Where ``report_progress`` and ``log`` go during an attempt that someone
    #: listens to (set by the executor; None otherwise). Carried to nested calls
    #: made with this context, so they report under the call that made them.
    _channel: ReportSink | None = attrs.field(default=None, repr=False, alias="_channel")
    #: Where ``ctx.sample`` goes when the call is not served over MCP:
    #: ``sampler(messages, *, max_tokens, system, temperature) -> str``.
    sampler: Sampler | None = attrs.field(default=None, validator=_check_handler, repr=False)
    #: Where ``ctx.elicit`` goes when the call is not served over MCP:
    #: ``elicitor(message, schema) -> Elicitation``.
    elicitor: Elicitor | None = attrs.field(default=None, validator=_check_handler, repr=False)

    @classmethod
    def new(
        cls,
        deps: t.Any = None,
        *,
        retry: int = 0,
        usage: Usage | None = None,
        approval_handler: ApprovalHandler | None = None,
        approval_gated: bool = False,
        sandbox: t.Any = None,
        run_id: str | None = None,
        sampler: Sampler | None = None,
        elicitor: Elicitor | None = None,
    ) -> RunContext[t.Any]:
        """Build a context. ``sandbox`` may be a policy, a mode string or a mapping;
        ``run_id`` names the run (a conversation, a job) the calls belong to;
        ``sampler`` and ``elicitor`` answer ``ctx.sample`` and ``ctx.elicit``."""
        if sandbox is not None:
            from nous_tools.sandbox import SandboxPolicy

            sandbox = SandboxPolicy.new(sandbox)
        return cls(
            deps=deps,
            retry=retry,
            usage=usage if usage is not None else _NO_USAGE,
            approval_handler=approval_handler,
            approval_gated=approval_gated,
            sandbox=sandbox,
            run_id=run_id,
            sampler=sampler,
            elicitor=elicitor,
        )

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report how far the tool has come: ``progress`` out of ``total`` (None when
        unknown), with an optional ``message`` for people.

        Delivered as the :data:`~nous_tools.signals.tool_progress` signal from the
        caller's thread (and by ``nous-tools serve`` as MCP ``notifications/progress``),
        at most 20 updates a second per attempt, the last one always; a no-op when
        nobody listens. Raises ``ValueError`` for a progress that is not a finite
        number >= 0, a total below it, or a message that is not a str.
        """
        check_progress(progress, total, message)
        channel = self._channel
        if channel is not None:
            channel.progress(progress, total, message)

    def log(self, level: str, message: str, **data: t.Any) -> None:
        """Log a line about this call: ``level`` is ``"debug"``, ``"info"``,
        ``"notice"``, ``"warning"`` or ``"error"``; ``data`` is anything more to say.

        Delivered as the :data:`~nous_tools.signals.tool_log` signal from the caller's
        thread, in order with progress (and by ``nous-tools serve`` as MCP
        ``notifications/message``, where values JSON cannot hold are dropped); a
        no-op when nobody listens. Raises ``ValueError`` for an unknown level or a
        message that is not a str.
        """
        check_log(level, message)
        channel = self._channel
        if channel is not None:
            channel.log(level, message, data)

    def sample(
        self,
        prompt_or_messages: str | c.Sequence[c.Mapping[str, str]],
        *,
        max_tokens: int,
        system: str | None = None,
        temperature: float | None = None,
        key: str | None = None,
    ) -> str:
        """Ask a language model; return the text it wrote.

        ``prompt_or_messages`` is a prompt (one user message) or a list of
        ``{"role": "user" | "assistant", "content": str}``. Served over MCP this is
        the client's ``sampling/createMessage``; elsewhere the context's ``sampler``
        answers; with neither it raises :class:`~nous_tools.SamplingUnavailable`.
        ``key`` names the question to the MCP client (see :meth:`ask_all`). See
        :mod:`nous_tools.asking`."""
        from nous_tools.asking import Question, ask

        question = Question.sample(
            prompt_or_messages, max_tokens=max_tokens, system=system, temperature=temperature
        )
        text: str = ask(self, [(key, question)])[0]
        return text

    def elicit(
        self, message: str, schema: c.Mapping[str, t.Any], *, key: str | None = None
    ) -> Elicitation:
        """Ask the person for the form ``schema`` describes; return their
        :class:`~nous_tools.Elicitation` (accept with ``content``, decline or cancel).

        Served over MCP this is the client's ``elicitation/create``; elsewhere the
        context's ``elicitor`` answers; with neither it raises
        :class:`~nous_tools.ElicitationUnavailable`. The schema is MCP's flat form
        (defaults and titled/untitled, single/multi-select enums kept); an accepted
        answer is checked against it. ``key`` names the question to the MCP client
        (see :meth:`ask_all`). See :mod:`nous_tools.asking`."""
        from nous_tools.asking import Question, ask

        answer: Elicitation = ask(self, [(key, Question.elicit(message, schema))])[0]
        return answer

    def roots(self, *, key: str | None = None) -> tuple[Root, ...]:
        """The MCP client's roots (``roots/list``): the ``file://`` places it lets the
        server work in, as :class:`~nous_tools.Root` values. Raises
        :class:`~nous_tools.RootsUnavailable` when the call is not served over MCP or
        the client did not declare the ``roots`` capability."""
        from nous_tools.asking import Question, ask

        roots: tuple[Root, ...] = ask(self, [(key, Question.roots())])[0]
        return roots

    def ask_all(self, questions: c.Mapping[str, Question]) -> dict[str, t.Any]:
        """Ask several :class:`~nous_tools.Question` values at once; their answers by
        key (an :class:`~nous_tools.Elicitation`, a ``str``, a tuple of
        :class:`~nous_tools.Root`).

        Served over MCP at 2026-07-28 they go to the client together, named by their
        keys, in one ``InputRequiredResult`` (in a task: the task's
        ``inputRequests``); at 2025-11-25 and outside MCP they are asked one after
        another. A key is a non-empty ``str`` not starting with ``"nous_tools."``."""
        from nous_tools.asking import ask

        if not isinstance(questions, c.Mapping):
            raise TypeError(
                f"ctx.ask_all takes a mapping of keys to Question values, "
                f"got {type(questions).__name__}"
            )
        pairs: list[tuple[str | None, Question]] = list(questions.items())
        for key, _ in pairs:
            if key is None:
                raise ValueError("ctx.ask_all needs a key for every question, got None")
        return dict(zip(questions, ask(self, pairs), strict=True))

    def _pose(self, questions: list[tuple[str | None, Question]]) -> list[t.Any]:
        """Put checked questions to whoever answers for this context; their raw
        answers, in order. Here: ``elicitor`` and ``sampler``, one by one (a context
        served over MCP puts them to its client)."""
        from nous_tools.asking import pose_one_by_one

        return pose_one_by_one(self, questions)

    def time_left(self) -> float | None:
        """Seconds until this attempt's deadline (never below 0), or None without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - monotonic())


_new = object.__new__
# The slots' descriptors: setting through them skips the frozen __setattr__.
_slot = RunContext.__dict__
_set_deps = _slot["deps"].__set__
_set_retry = _slot["retry"].__set__
_set_usage = _slot["usage"].__set__
_set_handler = _slot["approval_handler"].__set__
_set_gated = _slot["approval_gated"].__set__
_set_sandbox = _slot["sandbox"].__set__
_set_deadline = _slot["deadline"].__set__
_set_cancelled = _slot["cancelled"].__set__
_set_run_id = _slot["run_id"].__set__
_set_idempotency_key = _slot["idempotency_key"].__set__
_set_channel = _slot["_channel"].__set__
_set_sampler = _slot["sampler"].__set__
_set_elicitor = _slot["elicitor"].__set__


def for_attempt(
    ctx: RunContext[t.Any],
    retry: int,
    deadline: float | None = None,
    cancelled: threading.Event | None = None,
) -> RunContext[t.Any]:
    """``attrs.evolve(ctx, retry=retry, deadline=deadline[, cancelled=cancelled])``,
    copied field by field (the executor's hot path: evolve runs every validator
    again). ``cancelled=None`` keeps ``ctx.cancelled``. A subclass goes through evolve."""
    if type(ctx) is not RunContext:
        if cancelled is None:
            return attrs.evolve(ctx, retry=retry, deadline=deadline)
        return attrs.evolve(ctx, retry=retry, deadline=deadline, cancelled=cancelled)
    new = _new(RunContext)
    _set_deps(new, ctx.deps)
    _set_retry(new, retry)
    _set_usage(new, ctx.usage)
    _set_handler(new, ctx.approval_handler)
    _set_gated(new, ctx.approval_gated)
    _set_sandbox(new, ctx.sandbox)
    _set_deadline(new, deadline)
    _set_cancelled(new, ctx.cancelled if cancelled is None else cancelled)
    _set_run_id(new, ctx.run_id)
    _set_idempotency_key(new, ctx.idempotency_key)
    _set_channel(new, ctx._channel)
    _set_sampler(new, ctx.sampler)
    _set_elicitor(new, ctx.elicitor)
    return new


def with_channel(ctx: RunContext[t.Any], channel: ReportSink | None) -> RunContext[t.Any]:
    """``ctx`` with ``channel`` as where its tool's progress and log lines go."""
    if type(ctx) is not RunContext:
        return attrs.evolve(ctx, _channel=channel)
    new = for_attempt(ctx, ctx.retry, ctx.deadline, ctx.cancelled)
    _set_channel(new, channel)
    return new
