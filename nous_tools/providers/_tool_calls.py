"""Tool calls as LLM providers send them in, tool results as providers want them out.

:func:`execute_tool_calls` takes a model response — an OpenAI ``ChatCompletion``, a
Responses ``Response``, an Anthropic ``Message`` (the SDK objects or the same as
dicts), or a list of tool calls of any of those shapes and neutral :class:`ToolCall`
values — runs its tool calls concurrently through a :class:`~nous_tools.Registry`,
and returns a :class:`ToolCallResults` that turns the outcomes back into messages.
The tool definitions to send come from ``registry.tool_definitions(provider)``; the
whole loop is in ``docs/how-to/agent-loop.md``.

>>> from nous_tools import ContextUpdate, Ok, Registry, Tool, execute_tool_calls
>>> registry = Registry()
>>> @registry.register
... @Tool.from_function
... def add(a: int, b: int) -> Ok:
...     '''Add two numbers.'''
...     return Ok(a + b, ContextUpdate().append("sums", a + b))
>>> response_tool_calls = [
...     {"id": "call_1", "type": "function",
...      "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
...     {"id": "call_2", "type": "function",
...      "function": {"name": "add", "arguments": '{"a": 1, "b": }'}},
...     {"id": "call_3", "type": "function",
...      "function": {"name": "divide", "arguments": "{}"}},
... ]
>>> result = execute_tool_calls(registry, response_tool_calls)
>>> for message in result.to_openai_messages():
...     print(message["tool_call_id"], message["content"])
call_1 3
call_2 Error: tool 'add' failed: Invalid JSON arguments for 'add': Expecting value: line 1 column 15 (char 14)
call_3 Error: tool 'divide' not found
>>> result.context.deps
{'sums': [3]}
>>> result.all_ok, len(result)
(False, 3)

The calls run concurrently, but everything comes back **in call order**: the
results, the messages, and the :class:`~nous_tools.ContextUpdate` of each ``Ok``,
applied to ``result.context`` one after another. A call that failed or timed out
contributes no update.

A batch with calls that wait for a person (``result.pending``) crosses requests
signed — :meth:`ToolCallResults.to_dict` / :meth:`ToolCallResults.from_dict` — and
:meth:`ToolCallResults.resolve` applies the person's decisions, once.
"""

from __future__ import annotations

import collections.abc as c
import contextvars
import functools
import typing as t

import attrs

from nous_tools import content as _rich
from nous_tools._engine._admission import DEFAULT_MAX_RESULT_CHARS, result_limit
from nous_tools._rendering import CallResult, _safe_repr
from nous_tools._rendering import _exception_text as _exception_text
from nous_tools._rendering import _value_content as _value_content
from nous_tools._rendering import clip_parts as clip_parts
from nous_tools._rendering import format_tool_result as format_tool_result
from nous_tools._util._log import log as _safe_log
from nous_tools._util._text import safe_str as _safe_str
from nous_tools._util._tokens import _new_id, _now
from nous_tools.approval import Edit, NeedsApproval
from nous_tools.context_update import ContextUpdate
from nous_tools.errors import ToolError, ToolNotFound
from nous_tools.executor import ToolCall, ToolExecutor, _check_batch_cap
from nous_tools.program import ProgramPaused
from nous_tools.program._calling import calling as _calling
from nous_tools.providers import _web
from nous_tools.providers._calls_in import (
    _SKIP,
    Provider,
    _custom_arguments,
    _defaults_for_nulls,
    _parse_arguments,
    _Read,
    _read,
    _Unreadable,
    _unwrap,
    _whole_response,
)
from nous_tools.providers._calls_in import SKIPPED_TYPES as SKIPPED_TYPES
from nous_tools.results import Err, Ok
from nous_tools.run_context import RunContext

if t.TYPE_CHECKING:
    from nous_tools.registry import Registry
    from nous_tools.tool import Tool

__all__ = [
    "CallObserver",
    "ToolCall",
    "ToolCallResults",
    "call_observer",
    "current_tool_call",
    "execute_tool_calls",
    "format_tool_result",
    "observe_calls",
]

_log = _safe_log

_current_call: contextvars.ContextVar[ToolCall | None] = contextvars.ContextVar(
    "nous_tools_current_tool_call", default=None
)


def current_tool_call() -> ToolCall | None:
    """The model tool call that :func:`execute_tool_calls` is running in this context,
    or None outside one.

    Tools see it too, also in a worker thread (a worker runs in a copy of its
    caller's context), so a tool can log its call id; so does a signal receiver
    (``nous_tools.contrib.opentelemetry`` reads the arguments from it). Calls a
    tool makes itself still see the outer call.
    """
    return _current_call.get()


# -- a program paused in a batch -------------------------------------------------------


@attrs.frozen(slots=True)
class PausedProgramCall(NeedsApproval):
    """A code tool's call whose program waits for a person (a nested ``"ask"``
    call): pending in its batch as any call waiting for approval, shown by
    :meth:`ToolCallResults.pending_summary` as the program's waiting nested calls
    and resolved by their ids (:meth:`ToolCallResults.resolve`)."""

    program: ProgramPaused | None = attrs.field(default=None, kw_only=True, eq=False, repr=False)


def paused_program_call(
    tool: Tool, program: ProgramPaused, call_id: str | None
) -> PausedProgramCall:
    """The pending call of ``tool`` (a code tool) whose ``program`` paused."""
    return PausedProgramCall(
        tool,
        {"code": program.source},
        call_id=call_id,
        audience=getattr(program.registry, "name", None),
        program=program,
    )


# -- the batch -----------------------------------------------------------------------


@attrs.frozen(slots=True, eq=False)
class ToolCallResults:
    """The outcomes of a batch of model tool calls, in call order.

    ``results[i]`` is the ``Ok``, ``Err`` or ``NeedsApproval`` of ``calls[i]`` (the
    parsed :class:`ToolCall`; its ``arguments`` are the parsed mapping, or the raw
    value when they could not be parsed), and ``kinds[i]`` says what kind of call it
    was: ``"function"``, or ``"custom"`` for a freeform call (OpenAI custom tools),
    whose output item differs in the Responses API. ``context`` is the input context
    with the update of each ``Ok`` applied in call order. ``skipped`` holds the items
    of the response that were not run (text, reasoning, provider-hosted tool calls;
    see :data:`SKIPPED_TYPES`), as they were given. Iterating yields the results.

    ``provider`` is the API whose shape the calls came in — ``"openai"`` (Chat
    Completions), ``"responses"`` or ``"anthropic"`` — so a server can answer in it;
    None when there were no calls, or :class:`ToolCall` values, or a mix.
    ``registry`` is the registry that ran them (what :meth:`resolve` runs approved
    calls on), ``id`` names the batch (:meth:`resolve` uses it once) and
    ``issued_at`` is when it was made (Unix seconds).

    A batch that waits for a person crosses requests with :meth:`to_dict` /
    :meth:`from_dict`, and :meth:`resolve` applies the person's decisions; see
    ``docs/how-to/agent-loop.md``.
    """

    results: list[CallResult]
    calls: list[ToolCall]
    context: RunContext[t.Any]
    skipped: list[t.Any] = attrs.field(
        factory=list, metadata={"description": "The items of the response not run."}
    )
    kinds: list[str] = attrs.field(
        factory=list, metadata={"description": '"function" or "custom", per call.'}
    )
    provider: Provider | None = None
    registry: Registry | None = attrs.field(default=None, repr=False)
    id: str = attrs.field(
        factory=_new_id, metadata={"description": "The batch's id (random): resolved once."}
    )
    issued_at: int = attrs.field(factory=_now)
    # The model-facing text of results read back by from_dict (None: format the result).
    _contents: list[str | None] = attrs.field(factory=list, alias="_contents", repr=False)
    # Each call's max_result_chars (missing: the default, 100,000).
    _max_chars: list[int | None] = attrs.field(factory=list, alias="_max_chars", repr=False)

    @property
    def pending(self) -> list[NeedsApproval]:
        """The calls that wait for a person's approval (``NeedsApproval``), in call order."""
        return [r for r in self.results if isinstance(r, NeedsApproval)]

    @property
    def all_ok(self) -> bool:
        """True when every call returned ``Ok`` (an empty batch is all ok)."""
        return all(isinstance(r, Ok) for r in self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> c.Iterator[CallResult]:
        return iter(self.results)

    def __getitem__(self, index: int) -> CallResult:
        return self.results[index]

    def __repr__(self) -> str:
        kinds = [type(r).__name__ for r in self.results]
        shown = f", skipped={len(self.skipped)}" if self.skipped else ""
        return f"<ToolCallResults {kinds}{shown}>"

    def _kind(self, index: int) -> str:
        kinds = self.kinds
        return kinds[index] if index < len(kinds) else "function"

    def _content(self, index: int, call: ToolCall, result: CallResult) -> str:
        contents = self._contents
        known = contents[index] if index < len(contents) else None
        if known is not None:
            return known
        limits = self._max_chars
        limit = limits[index] if index < len(limits) else DEFAULT_MAX_RESULT_CHARS
        return format_tool_result(result, call.name, max_chars=limit)

    def _parts(self, index: int, result: CallResult) -> list[_rich.Content] | None:
        """The content parts of an ``Ok`` that holds images, audio or resources (see
        :mod:`nous_tools.content`); None otherwise, and for a result read back by
        :meth:`from_dict` (which keeps the text only)."""
        if not isinstance(result, Ok):
            return None
        contents = self._contents
        if index < len(contents) and contents[index] is not None:
            return None
        parts = _rich.as_content(result.value)
        if parts is None:
            return None
        limits = self._max_chars
        return clip_parts(parts, limits[index] if index < len(limits) else DEFAULT_MAX_RESULT_CHARS)

    def _entries(self, include_pending: bool) -> c.Iterator[tuple[ToolCall, CallResult, str, str]]:
        for _, entry in self._indexed(include_pending):
            yield entry

    def _indexed(
        self, include_pending: bool
    ) -> c.Iterator[tuple[int, tuple[ToolCall, CallResult, str, str]]]:
        for index, (call, result) in enumerate(zip(self.calls, self.results, strict=True)):
            if call.id is None:  # nothing to answer: a provider needs the call's id
                continue
            if include_pending or not isinstance(result, NeedsApproval):
                yield index, (call, result, self._content(index, call, result), self._kind(index))

    def to_openai_messages(self, *, include_pending: bool = False) -> list[dict[str, t.Any]]:
        """Chat Completions tool messages, ``{"role": "tool", "tool_call_id",
        "content"}``, one per call in call order (for function and custom calls alike).

        Calls waiting for approval are left out unless ``include_pending=True`` (then
        they say so in a placeholder): a message uses up its call id, and the real
        result could not be sent once a person decided. A call without an id is left
        out too (nothing to answer it with); its outcome is still in ``results``.
        """
        return [
            {"role": "tool", "tool_call_id": call.id, "content": content}
            for call, _, content, _ in self._entries(include_pending)
        ]

    def to_responses_items(self, *, include_pending: bool = False) -> list[dict[str, t.Any]]:
        """Responses API input items: ``{"type": "function_call_output", "call_id",
        "output"}``, or ``"custom_tool_call_output"`` for a custom call. Pending and
        id-less calls are left out as in :meth:`to_openai_messages`. The output of a
        result with images or files (:mod:`nous_tools.content`) is a list of
        ``input_text``, ``input_image`` and ``input_file`` parts; any other is text."""
        items: list[dict[str, t.Any]] = []
        for index, (call, result, content, kind) in self._indexed(include_pending):
            parts = self._parts(index, result)
            items.append(
                {
                    "type": "custom_tool_call_output"
                    if kind == "custom"
                    else "function_call_output",
                    "call_id": call.id,
                    "output": _rich.to_responses(parts) if parts is not None else content,
                }
            )
        return items

    def to_anthropic_blocks(self, *, include_pending: bool = False) -> list[dict[str, t.Any]]:
        """Anthropic ``tool_result`` blocks: ``{"type": "tool_result", "tool_use_id",
        "content", "is_error"}``; ``is_error`` is True for an ``Err`` only (a pending
        approval has not failed). Pending and id-less calls are left out as in
        :meth:`to_openai_messages`. The content of a result with images or documents
        (:mod:`nous_tools.content`) is a list of ``text``, ``image`` and ``document``
        blocks; any other is text."""
        blocks: list[dict[str, t.Any]] = []
        for index, (call, result, content, _) in self._indexed(include_pending):
            parts = self._parts(index, result)
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": call.id,
                    "content": _rich.to_anthropic(parts) if parts is not None else content,
                    "is_error": isinstance(result, Err),
                }
            )
        return blocks

    def to_anthropic_message(self, *, include_pending: bool = False) -> dict[str, t.Any]:
        """The user message that carries the ``tool_result`` blocks back to Claude:
        ``{"role": "user", "content": [...]}`` (:meth:`to_anthropic_blocks`)."""
        return {
            "role": "user",
            "content": self.to_anthropic_blocks(include_pending=include_pending),
        }

    def response_messages(self, *, include_pending: bool = False) -> list[dict[str, t.Any]]:
        """The messages for the model in the shape its calls came in (``provider``):
        :meth:`to_openai_messages`, :meth:`to_responses_items`, or
        ``[``:meth:`to_anthropic_message` ``]`` (empty when it holds no block);
        Chat Completions when the shape is unknown. See :mod:`nous_tools.web`."""
        return _web.response_messages(self, include_pending=include_pending)

    def pending_summary(self) -> list[dict[str, t.Any]]:
        """What a page shows a person about each pending call, in call order:
        ``{"id", "call_id", "tool", "description", "arguments"}`` (JSON values;
        ``call_id`` is ``id`` again, for older pages). See
        :mod:`nous_tools.web`."""
        return _web.pending_summary(self)

    # -- across requests -----------------------------------------------------------

    def to_dict(self, secret: str | bytes | None = None) -> dict[str, t.Any]:
        """The batch as a JSON-safe dict, to carry it to a later request (through a
        browser, say) and read it back with :meth:`from_dict`.

        It holds ``v`` (the format, 2), ``type`` (``"tool_call_batch"``), ``id``,
        ``issued_at``, ``audience`` (the registry's name), ``provider``, ``calls``,
        ``run_id`` (only when the batch's context has one) and ``signature``. Each
        call is ``{"id", "name", "kind"}`` plus either ``"arguments"`` (as parsed
        from what the model sent, in the type-faithful encoding of approval tokens;
        the raw text when they were not JSON) and
        ``"output": {"content", "is_error"}`` — the text the model gets for a
        finished call, and whether it is an error — or ``"approval"``: ``{"id",
        "tool_digest", "arguments", "description"}`` of a pending call (the
        arguments a person approves; the call carries its own ``"arguments"`` too
        only when the registry's ``before`` advice changed them; ``"issued_at"`` and
        ``"audience"`` only when they are not the batch's).

        With ``secret`` (a non-empty ``str`` or ``bytes`` kept on the server) the
        signature is ``"hmac-sha256:<hex>"`` over everything else: a client can read
        the batch but change nothing in it — not a tool's output, not an argument,
        not which calls it holds, not an approval. Without one it is a plain
        ``"sha256:<hex>"`` checksum, for trusted storage only. (Version 1, which
        nested each pending call's own signed token, is still read.)

        ``skipped`` is not carried (the response's text, reasoning and hosted calls
        belong to the conversation the application keeps, not to the results), nor
        are ``context`` and the values and updates of finished calls: the text a
        model gets is what crosses. Raises ``ValueError`` when arguments cannot be
        encoded, or a pending call's arguments no longer match its fingerprint.
        """
        from nous_tools.providers import _wire as _batch_wire

        return _batch_wire.write(self, secret)

    @classmethod
    def from_dict(
        cls,
        data: object,
        registry: Registry,
        secret: str | bytes | None = None,
        *,
        max_age: float | None = None,
        allow_unsigned: bool = False,
        max_clock_skew: float | None = None,
    ) -> ToolCallResults:
        """Read back a batch that :meth:`to_dict` wrote, for ``registry``.

        The rules of approval tokens apply (``docs/concepts/approval.md``), to the
        batch and to each pending call in it; every check happens before anything is
        returned, and each refusal is a ``ValueError`` starting ``"tool call batch
        refused: "`` and saying why:

        - it is malformed (a missing key, a value of the wrong exact type, an unknown
          format version, a call that is neither finished nor pending);
        - the signature does not match — a finished call's output, an argument, a
          call added, removed or reordered, a pending token swapped for another: with
          ``secret`` every byte is covered by an HMAC compared in constant time;
          without ``secret`` the batch is refused unless ``allow_unsigned=True`` (for
          trusted storage only, e.g. your own database);
        - it is older than ``max_age`` seconds (default
          ``registry.approval_max_age``; None there means no limit), or was made more
          than ``max_clock_skew`` seconds in the future by this server's clock
          (default ``registry.approval_max_clock_skew``);
        - it was made by another registry (``audience`` is not ``registry.name``);
        - a pending call's token is refused by :meth:`NeedsApproval.from_dict` (its
          tool is gone, ``"deny"`` now, or different code).

        The batch comes back with each finished call as ``Ok(text)`` or
        ``Err(ToolError)`` (what the model gets, exactly: the outputs write the same
        text), each pending call as its ``NeedsApproval``, ``skipped`` empty and a
        fresh ``context`` (``RunContext.new()``, with the ``run_id`` the batch was made
        in: pass your own to :meth:`resolve`).
        A batch that was already resolved is still read; :meth:`resolve` is what
        refuses it (``BatchAlreadyResolved``).
        """
        batch: ToolCallResults = _paused().from_dict(
            cls, data, registry, secret, max_age, allow_unsigned, max_clock_skew
        )
        return batch

    def resolve(
        self,
        decisions: c.Mapping[str, str | Edit],
        ctx: RunContext[t.Any] | None = None,
        *,
        wait: float | None = None,
    ) -> ToolCallResults:
        """Apply a person's decisions to the pending calls and return the new batch.

        ``decisions`` maps a pending call's id (the model's tool-call id,
        ``NeedsApproval.call_id``) to what the person said:

        - ``"approve"``: the call runs through ``registry.execute_approved`` — once:
          the registry's approval store claims the approval's id;
        - ``Edit(arguments)``: the call runs with these arguments instead, as an
          approval handler's ``Edit`` would: same tool, arguments validated against
          its schema (here *before* anything is used up: arguments the schema refuses
          are a ``ValueError``, so the person can correct them). The edited call runs
          under the approval's own id, so an edit uses the approval up and the
          signed original can never run after it. The ``before`` advice does not run
          again (it ran before the approval, as in the handler path);
        - ``"reject"``: the call does not run; its result is an ``Err`` whose text for
          the model says ``"Error: tool 'x' was rejected by the user and did not
          run"``, and the approval's id is used up too.

        A pending call without a decision stays pending (decisions may arrive one by
        one; send the batch to the model only when ``pending`` is empty, since it
        needs a result for every call). Decided calls run concurrently, in ``ctx``
        (default: this batch's ``context``); the new batch's ``context`` is ``ctx``
        with the updates of the approved calls' ``Ok`` applied in call order.

        Checked before anything runs or is used up, each a ``ValueError``: a call id
        the batch does not have, a call that is not pending, a decision that is not
        ``"approve"``, ``"reject"`` or an ``Edit``, an edit that cannot be represented
        or fails the schema. Then the batch itself is used up — its id claimed in
        the registry's approval store — so resolving the same batch again (a replay,
        a double submit, the old copy of a batch that was re-issued) raises
        :class:`~nous_tools.errors.BatchAlreadyResolved` (a ``ValueError``) and runs
        nothing. The new batch has a new ``id`` (when something was decided) and the
        same ``issued_at``: calls left pending expire when the original would have.
        An approval used elsewhere meanwhile gives that call
        ``Err(ApprovalAlreadyUsed)``; an approval store that raises propagates.

        **With a call journal** (the registry's, or its executor's) and a ``run_id``
        (``ctx``'s, else the one the batch was made in), each decided call is
        journaled under its call id with the decision, instead of the batch being
        used up: a Ctrl-C or a crash during ``resolve`` loses no call that finished,
        and submitting the same decisions again returns the first outcomes, running
        nothing (a call still running elsewhere answers ``Err(CallInProgress)``, or
        is waited for ``wait`` seconds). A decision that differs from the one the
        journal holds for its call raises :class:`~nous_tools.errors.JournalConflict`
        before anything runs.
        """
        resolved: ToolCallResults = _paused().resolve(self, decisions, ctx, wait)
        return resolved


@functools.cache
def _paused() -> t.Any:
    """``nous_tools.providers._paused`` (what ``from_dict`` and ``resolve`` run),
    imported at the first of them, not with the package."""
    from nous_tools.providers import _paused as module

    return module


class CallObserver(t.Protocol):
    """What a tracer implements to see each call of a batch from start to outcome
    (``nous_tools.contrib.opentelemetry`` does): the signals report attempts, an
    observer whole calls, also those refused before their first attempt (approval,
    validation). Set it with :func:`observe_calls`."""

    def call_started(self, tool: Tool, call: ToolCall) -> object:
        """A call begins; what it returns is handed to :meth:`call_ended`."""

    def call_ended(self, token: object, result: CallResult | None) -> None:
        """The call whose start returned ``token`` ended with ``result`` (None when it
        raised)."""


_observer: CallObserver | None = None


def observe_calls(observer: CallObserver | None) -> CallObserver | None:
    """Make ``observer`` the one that sees every call of ``execute_tool_calls`` and of
    a resolved batch (``None``: none does); return the one it replaces. One observer at
    a time: a batch reads it once, when it starts. A failing observer is logged and
    never fails a call."""
    global _observer
    previous, _observer = _observer, observer
    return previous


def call_observer() -> CallObserver | None:
    """The observer :func:`observe_calls` set, or None."""
    return _observer


def _observe_start(observer: CallObserver | None, tool: Tool, call: ToolCall) -> object:
    if observer is None:
        return None
    try:
        return observer.call_started(tool, call)
    except Exception:
        _log.warning("Tool call observer failed at the start of '%s'", tool.name, exc_info=True)
        return None


def _observe_end(observer: CallObserver | None, token: object, result: CallResult | None) -> None:
    if observer is None or token is None:
        return
    try:
        observer.call_ended(token, result)
    except Exception:
        _log.warning("Tool call observer failed at the end of a call", exc_info=True)


def _unreadable_err(position: int, why: str, name: str | None) -> Err:
    return Err(ToolError(f"Tool call #{position} could not be read: {why}", tool_name=name or None))


def _uniterable_err(exc: Exception, position: int | None = None) -> Err:
    """The ``Err`` of tool calls that could not be iterated: from the start, or past
    call #``position`` (a broken iterable)."""
    where = "" if position is None else f" past call #{position}"
    return Err(
        ToolError(
            f"The tool calls could not be read{where}: {type(exc).__name__}: {_safe_str(exc)}",
            original_error=exc,
        )
    )


def _reading_raised(position: int, exc: Exception) -> Err:
    return _unreadable_err(position, f"reading it raised {type(exc).__name__}", None)


def _nested_response(whole: str, position: int) -> TypeError:
    """The error of a list that holds a whole response (``[message]``), not its calls."""
    return TypeError(
        f"execute_tool_calls got a list holding {whole} (item #{position}); "
        "pass the response or message itself, not inside a list"
    )


# The calls of a response as read, in call order: each call, its kind ("function" or
# "custom") and its job (``(tool, arguments, call_id)``, or the ``Err`` that answers
# it); the items skipped; the calls refused before running (for the observer); and
# the providers whose shapes they came in.
_CallsRead = tuple[
    list[ToolCall],
    list[str],
    list[tuple["Tool", t.Any, "str | None"] | Err],
    list[t.Any],
    list[tuple["Tool", ToolCall, Err]],
    set["Provider | None"],
]


def _read_calls(items: t.Any, lookup: c.Callable[[t.Any], Tool | None]) -> _CallsRead:
    """Read the calls of ``items`` (the response unwrapped), without running any: an
    item that cannot be read, an unknown name or arguments that cannot be parsed is
    the ``Err`` of its call; a list holding a whole response is a ``TypeError``."""
    calls: list[ToolCall] = []
    kinds: list[str] = []
    jobs: list[tuple[Tool, t.Any, str | None] | Err] = []
    skipped: list[t.Any] = []
    refused: list[tuple[Tool, ToolCall, Err]] = []  # for the observer: refused before running
    providers: set[Provider | None] = set()

    def add(call: ToolCall, kind: str, job: tuple[Tool, t.Any, str | None] | Err) -> None:
        calls.append(call)
        kinds.append(kind)
        jobs.append(job)

    position = 0
    try:
        iterator = iter(items)
    except Exception as exc:
        iterator = iter(())
        add(ToolCall(None, "", None), "function", _uniterable_err(exc))
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            break
        except Exception as exc:  # a broken iterable: what was read still runs
            add(ToolCall(None, "", None), "function", _uniterable_err(exc, position))
            break
        position += 1
        try:
            read = _read(item)
            # A whole response inside a list reads as an item we skip or cannot read.
            whole = None if isinstance(read, _Read) else _whole_response(item)
        except Exception as exc:  # reading the item raised
            add(ToolCall(None, "", None), "function", _reading_raised(position, exc))
            continue
        if whole is not None:
            raise _nested_response(whole, position)
        if read is _SKIP:
            skipped.append(item)
            continue
        if isinstance(read, _Unreadable):
            add(read.call, "function", _unreadable_err(position, read.why, read.call.name))
            continue
        assert isinstance(read, _Read)
        call_id, name, raw, kind, provider = read
        providers.add(provider)
        tool = lookup(name)
        if tool is None:
            shown = name if isinstance(name, str) else _safe_repr(name)
            add(ToolCall(call_id, name, raw), kind, Err(ToolNotFound(shown)))
            continue
        if kind == "custom":
            arguments = _custom_arguments(tool, raw)
        else:
            arguments = _parse_arguments(name, raw)
        if isinstance(arguments, Err):
            call = ToolCall(call_id, name, raw)
            add(call, kind, arguments)
            refused.append((tool, call, arguments))
            continue
        arguments = _defaults_for_nulls(tool, arguments)
        add(ToolCall(call_id, name, arguments), kind, (tool, arguments, call_id))
    return calls, kinds, jobs, skipped, refused, providers


def execute_tool_calls(
    registry: Registry,
    tool_calls: t.Any,
    ctx: RunContext[t.Any] | None = None,
    *,
    executor: ToolExecutor | None = None,
    max_concurrency: int | None = None,
    on_progress: c.Callable[[int, int, CallResult | None], object] | None = None,
    wait: float | None = None,
) -> ToolCallResults:
    """Run the tool calls of a model response through ``registry``, concurrently
    (at most ``max_concurrency`` at once, when given, whatever the executor's size).

    ``tool_calls`` is what the model answered, as the SDK gives it or as a dict:

    - ``None`` (a text-only answer): an empty batch;
    - an OpenAI ``ChatCompletion`` (its one choice's ``message.tool_calls``) or
      ``ChatCompletionMessage`` (its ``tool_calls``), ``{"choices": [...]}``;
    - an OpenAI Responses ``Response`` (its ``output``), ``{"output": [...]}``;
    - an Anthropic ``Message`` (its ``content``), ``{"role": "assistant",
      "content": [...]}``;
    - or a list of the calls themselves, which may mix OpenAI Chat Completions tool
      calls, Responses ``function_call`` and ``custom_tool_call`` items, Anthropic
      ``tool_use`` blocks and :class:`ToolCall` values.

    Anything else is a ``TypeError`` naming what was expected — never a silent empty
    batch — and so is a list holding a whole response (``[message]``). Items that are
    not ours to run (text, reasoning, provider-hosted calls: :data:`SKIPPED_TYPES`)
    are skipped and listed in ``result.skipped``. A custom (freeform) call runs the
    tool of its name with the raw input text as its one parameter, or is an ``Err``
    when that tool has not exactly one parameter.

    Per call, without running anything: arguments that are not valid JSON, or not a
    JSON object, give an ``Err(ToolError)`` quoting the parse error; an unknown name
    gives ``Err(ToolNotFound)``; an item that cannot be read gives an ``Err``. A
    ``None`` sent for an optional parameter whose schema does not accept null (what
    a model does in OpenAI's strict mode) is dropped here, once per call before
    approval and validation, so the parameter's default applies. The other calls
    run as ``registry.execute`` runs them — approval level, advice, the executor's
    pipeline — with each call's id as ``ApprovalRequest.id``; an ``ask`` tool with no
    approval handler in an ungated ``ctx`` comes back as ``NeedsApproval``.

    The text each call's messages carry is at most its tool's ``max_result_chars``
    (or the executor's) long: see :func:`format_tool_result`.

    ``on_progress(done, total, result)`` is called with ``(0, total, None)`` before
    the first call runs, then once per call as it ends, with its outcome — every
    call counts, also one that could not be read, failed validation, waits for
    approval (``NeedsApproval``) or timed out, so ``done`` reaches ``total``. It is
    called one call at a time; what it raises is logged and ignored.

    With a call journal (the registry's, or the executor's) and a ``ctx.run_id``,
    every call is journaled under its provider tool-call id: submitting the same
    response again returns the same messages and runs nothing; ``wait`` (seconds)
    is how long a call that is still running elsewhere is waited for (else it
    answers ``Err(CallInProgress)``). See ``docs/concepts/journal.md``.

    ``ctx`` defaults to ``RunContext.new()``; ``executor`` to the registry's. Never
    raises for anything a model sent (hostile JSON, items whose attributes raise, an
    iterable that breaks: each is an ``Err`` and the batch goes on); a ``registry`` or
    ``ctx`` of the wrong type, or a ``tool_calls`` of a shape it does not know, is a
    ``TypeError``; a ``max_concurrency`` that is not an int >= 1 a ``ValueError``.
    """
    if max_concurrency is not None:
        _check_batch_cap(max_concurrency)
    if ctx is None:
        ctx = RunContext.new()
    elif not isinstance(ctx, RunContext):
        raise TypeError(
            f"execute_tool_calls expects a RunContext or None, got {type(ctx).__name__}"
        )
    lookup = getattr(registry, "lookup", None)
    if not callable(lookup):
        raise TypeError(f"execute_tool_calls expects a Registry, got {type(registry).__name__}")
    calls, kinds, jobs, skipped, refused, providers = _read_calls(_unwrap(tool_calls), lookup)
    # A code tool's call keeps its id (its signals and span carry it) and is never
    # journaled itself (its function says so: the journal's step honours
    # ``_nous_unjournaled``); its nested calls are, under "<call id>/<position>". A
    # paused program is no outcome to record, and the same call again runs the
    # program again, its calls answered by the journal. Its id reaches it as its
    # program's id (``enter``).

    observer = _observer
    for tool, call, err in refused:  # calls refused before running, for a tracer
        _observe_end(observer, _observe_start(observer, tool, call), err)

    own = registry.executor
    runner = executor if executor is not None else own
    # the registry's execute and dispatch, bound once a batch (not once a call)
    run = functools.partial(
        _run_whole, observer, runner, own, registry.execute, registry.dispatch, wait
    )

    def enter(i: int) -> None:
        """In call ``i``'s own context, before anything of it runs: the call a tool
        sees as ``current_tool_call()``, and a code tool as its program's id."""
        call = calls[i]
        _current_call.set(call)
        _calling(call.id)

    # A call the registry would only hand to the executor's pipeline goes to a worker
    # from here (no helper thread per call), unless a tracer is told of each call. The
    # batch is always run as one (its calls each in their context: ``enter``).
    straight = (registry.straight_through() if observer is None else None) or _never
    results: list[CallResult] = runner.run_jobs(
        jobs,
        ctx,
        run=run,
        max_concurrency=max_concurrency,
        on_progress=on_progress,
        straight=straight,
        enter=enter,
    )
    for index, result in enumerate(results):
        if type(result) is Ok and isinstance(result.value, ProgramPaused):
            results[index] = paused_program_call(
                t.cast("tuple[Tool, t.Any, str | None]", jobs[index])[0],
                result.value,
                calls[index].id,
            )
    default = runner.max_result_chars
    return ToolCallResults(
        results=results,
        calls=calls,
        context=_apply_updates(ctx, zip(calls, results, strict=True)),
        skipped=skipped,
        kinds=kinds,
        provider=providers.pop() if len(providers) == 1 else None,
        registry=registry,
        _max_chars=[
            result_limit(job[0] if isinstance(job, tuple) else None, default) for job in jobs
        ],
    )


def _run_whole(
    observer: CallObserver | None,
    runner: ToolExecutor,
    own: ToolExecutor,
    execute: c.Callable[..., CallResult],
    dispatch: c.Callable[..., CallResult],
    wait: float | None,
    tool: Tool,
    arguments: t.Any,
    run_ctx: RunContext[t.Any] | None,
    call_id: str | None,
) -> CallResult:
    """A call the registry runs whole (approval, advice, its journal), in a lane:
    ``execute`` (the registry's) when ``runner`` is the registry's own executor, else
    ``dispatch`` to ``runner``; seen by ``observer`` as the current tool call."""
    seen = _observe_start(observer, tool, t.cast("ToolCall", _current_call.get()))
    result: CallResult | None = None
    try:
        if runner is own:
            result = execute(tool.name, arguments, run_ctx, call_id=call_id, wait=wait)
        else:
            result = dispatch(tool, arguments, run_ctx, call_id, executor=runner, wait=wait)
        return result
    finally:
        _observe_end(observer, seen, result)


def _never(tool: Tool) -> bool:
    """No call goes straight to a worker."""
    return False


def _apply_updates(
    context: RunContext[t.Any], outcomes: c.Iterable[tuple[ToolCall, CallResult]]
) -> RunContext[t.Any]:
    """``context`` with the update of each ``Ok`` applied, in the order given."""
    for call, result in outcomes:
        update = result.update if isinstance(result, Ok) else None
        if isinstance(update, ContextUpdate):
            try:  # the library's own code, never a method of the tool's object
                context = ContextUpdate.apply_to_run_context(update, context)
            except Exception as exc:  # deps that are not a mapping, say
                _log.warning(
                    "Context update of tool '%s' (call %s) could not be applied: %s; skipped",
                    call.name,
                    call.id,
                    type(exc).__name__,
                )
    return context
