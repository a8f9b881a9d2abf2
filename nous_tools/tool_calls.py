"""Tool calls as LLM providers send them in, tool results as providers want them out.

:func:`execute_tool_calls` takes the tool calls of a model response — OpenAI Chat
Completions ``tool_calls``, OpenAI Responses ``function_call`` items, Anthropic
``tool_use`` blocks, neutral :class:`ToolCall` values, or the SDK objects of those
shapes — runs them concurrently through a :class:`~nous_tools.Registry`, and returns
a :class:`ToolCallResults` that turns the outcomes back into messages.

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
"""

from __future__ import annotations

import collections.abc as c
import contextvars
import json
import typing as t

import attrs

from ._log import log as _safe_log
from ._text import safe_str as _safe_str
from .context_update import ContextUpdate
from .errors import ToolDenied, ToolError, ToolNotFound, ToolTimeout
from .executor import ToolCall, ToolExecutor
from .results import Err, NeedsApproval, Ok, Result
from .run_context import RunContext

if t.TYPE_CHECKING:
    from .registry import Registry
    from .tool import Tool

__all__ = [
    "ToolCall",
    "ToolCallResults",
    "current_tool_call",
    "execute_tool_calls",
    "format_tool_result",
]

_log = _safe_log

#: One outcome of :func:`execute_tool_calls`.
CallResult = t.Union[Result, NeedsApproval]  # noqa: UP007  (a runtime alias)

#: Items of a model response that are not tool calls and are skipped: Anthropic
#: ``text``/``thinking`` blocks, OpenAI Responses ``reasoning``/``message`` items.
#: So ``response.content`` (Anthropic) and ``response.output`` (Responses) can be
#: passed as they are.
NOT_TOOL_CALLS: frozenset[str] = frozenset(
    {"text", "thinking", "redacted_thinking", "reasoning", "message", "image", "document"}
)

#: Longest error explanation sent to a model, in characters (the rest is cut).
MAX_ERROR_CHARS = 2000

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


_JSON_TYPES: dict[type, str] = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


# -- reading provider shapes ---------------------------------------------------------


def _field(item: object, key: str) -> t.Any:
    """``item[key]`` for a mapping, ``item.key`` for anything else (an SDK object)."""
    if isinstance(item, c.Mapping):
        return item.get(key)
    try:
        return getattr(item, key, None)
    except Exception:  # a property that raises
        return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


class _Unreadable(t.NamedTuple):
    """An item that is not a tool call we can read: why, and what we could see of it."""

    call: ToolCall
    why: str


def _read(item: object) -> ToolCall | _Unreadable | None:
    """Parse one item into a :class:`ToolCall` whose arguments are still raw; None
    for an item that is not a tool call at all (skipped)."""
    if isinstance(item, ToolCall):
        return item
    kind = _field(item, "type")
    if kind == "function_call":  # OpenAI Responses
        call_id = _text(_field(item, "call_id")) or _text(_field(item, "id"))
        name, arguments = _field(item, "name"), _field(item, "arguments")
    elif kind == "tool_use":  # Anthropic
        call_id = _text(_field(item, "id"))
        name, arguments = _field(item, "name"), _field(item, "input")
    elif (kind == "function" or kind is None) and _field(item, "function") is not None:
        call_id = _text(_field(item, "id"))  # OpenAI Chat Completions
        function = _field(item, "function")
        name, arguments = _field(function, "name"), _field(function, "arguments")
    elif isinstance(kind, str) and kind in NOT_TOOL_CALLS:
        return None
    else:
        call_id = _text(_field(item, "call_id")) or _text(_field(item, "id"))
        shown = f" with type {kind!r}" if isinstance(kind, str) else ""
        return _Unreadable(
            ToolCall(call_id, _text(_field(item, "name")) or "", None),
            f"{type(item).__name__}{shown} is not an OpenAI tool call, an OpenAI Responses "
            "function_call item, an Anthropic tool_use block or a ToolCall",
        )
    if not isinstance(name, str) or not name:
        return _Unreadable(ToolCall(call_id, "", arguments), "it has no tool name")
    return ToolCall(call_id, name, arguments)


def _parse_arguments(name: str, arguments: object) -> c.Mapping[str, t.Any] | Err:
    """The arguments as a mapping, or the ``Err`` for that call. A JSON string is
    parsed; an empty string or None counts as ``{}`` (models send ``""`` for a tool
    without parameters)."""
    if arguments is None:
        return {}
    if isinstance(arguments, (bytes, bytearray)):
        try:
            arguments = arguments.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Err(
                ToolError(
                    f"Invalid JSON arguments for '{name}': not UTF-8 ({exc.reason})",
                    tool_name=name,
                    original_error=exc,
                )
            )
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:  # its str() names the line and column
            return Err(
                ToolError(
                    f"Invalid JSON arguments for '{name}': {exc}",
                    tool_name=name,
                    original_error=exc,
                )
            )
        except RecursionError as exc:
            return Err(
                ToolError(
                    f"Invalid JSON arguments for '{name}': nested too deeply",
                    tool_name=name,
                    original_error=exc,
                )
            )
    if isinstance(arguments, c.Mapping):
        return arguments
    got = _JSON_TYPES.get(type(arguments), type(arguments).__name__)
    return Err(
        ToolError(
            f"Invalid arguments for '{name}': expected a JSON object, got {got}",
            tool_name=name,
            original_error=("invalid", [("(root)", f"not an object: {got}")]),
        )
    )


# -- writing results for a model -----------------------------------------------------


def _safe_repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__} object (its repr() raised)>"


def _value_content(value: object) -> str:
    """An ``Ok`` value as a model sees it: a str as is, anything else as JSON
    (values JSON cannot hold are written as their ``repr``)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=_safe_repr, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # non-str keys, a cycle
        return _safe_repr(value)


def _exception_text(exc: BaseException) -> str:
    """What an exception *says*, as its author wrote it: the message argument only.

    ``str(exc)`` of ``ValueError("auth failed", token)`` is the tuple of both
    arguments, and a class's own ``__str__`` may print any attribute; neither reaches
    a model. An exception with no message argument is named by its class.
    """
    args = exc.args
    if isinstance(exc, OSError) and isinstance(exc.errno, int) and isinstance(exc.strerror, str):
        return f"[Errno {exc.errno}] {exc.strerror}"  # OSError(errno, strerror[, filename])
    if args and isinstance(args[0], str):
        return args[0]
    if len(args) == 1 and isinstance(args[0], (int, float)) and not isinstance(args[0], bool):
        return str(args[0])
    return type(exc).__name__


def _error_message(reason: ToolError) -> str:
    """A ``ToolError``'s message, with the raw ``str()`` of its original exception
    (which the executor quotes) narrowed to what that exception's message says."""
    message = reason.message
    original = reason.original_error
    if isinstance(original, BaseException):
        raw = _safe_str(original)
        said = _exception_text(original)
        if raw and raw != said and raw in message:
            message = message.replace(raw, said)
    return message


def _clip(text: str) -> str:
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return text[: MAX_ERROR_CHARS - 1] + "…"


def _err_content(reason: object, name: str) -> str:
    if isinstance(reason, ToolTimeout):
        if reason.timeout:
            return f"Error: tool '{name}' timed out after {float(reason.timeout)} s and was not retried"
        return f"Error: tool '{name}' timed out and was not retried"
    if isinstance(reason, ToolNotFound):
        return f"Error: tool '{name}' not found"
    if isinstance(reason, ToolDenied):
        return f"Error: tool '{name}' is denied and was not run"
    if isinstance(reason, ToolError):
        message = _error_message(reason)
    elif isinstance(reason, BaseException):  # a tool returned Err(some exception)
        message = _exception_text(reason)
    elif isinstance(reason, str):
        message = reason
    else:
        message = _value_content(reason)
    if not name:
        return _clip(f"Error: {message}")
    own = f"Tool '{name}' "
    if message.startswith(own):  # "Tool 'x' was rejected ..." → "Error: tool 'x' was rejected ..."
        return _clip(f"Error: tool '{name}' {message[len(own) :]}")
    return _clip(f"Error: tool '{name}' failed: {message}")


def format_tool_result(result: CallResult, name: str | None = None) -> str:
    """The text a model gets for one outcome of the tool called ``name``.

    - ``Ok``: the value if it is a ``str``, else its JSON (values JSON cannot hold
      are written as their ``repr``).
    - ``Err``: one short line naming the tool and what went wrong, e.g.
      ``Error: tool 'search' failed: Tool execution failed: timeout talking to API``.
      Never a stack trace, never the ``repr`` of an exception: of a raw exception only
      its message argument is quoted (``args[0]``), so a secret passed to an
      exception as a further argument or kept in an attribute stays out.
    - ``NeedsApproval``: ``Pending approval: tool 'x' needs a person's approval (id
      ...); it has not run yet.``

    >>> from nous_tools import ToolError, ToolTimeout
    >>> format_tool_result(Ok({"temp": 21}))
    '{"temp": 21}'
    >>> format_tool_result(Err(ToolTimeout(tool_name="slow", timeout=2)), "slow")
    "Error: tool 'slow' timed out after 2.0 s and was not retried"
    >>> boom = ValueError("login failed", "sk-secret")
    >>> err = Err(ToolError(f"Tool execution failed: {boom}", original_error=boom))
    >>> format_tool_result(err, "login")
    "Error: tool 'login' failed: Tool execution failed: login failed"
    """
    if isinstance(result, NeedsApproval):
        tool_name = name or result.tool.name
        return (
            f"Pending approval: tool '{tool_name}' needs a person's approval "
            f"(id {result.id}); it has not run yet."
        )
    if isinstance(result, Ok):
        return _value_content(result.value)
    if isinstance(result, Err):
        reason = result.reason
        if not name:
            known = getattr(reason, "tool_name", None)
            name = known if isinstance(known, str) else ""
        return _err_content(reason, name)
    return _value_content(result)


# -- the batch -----------------------------------------------------------------------


@attrs.frozen(slots=True, eq=False)
class ToolCallResults:
    """The outcomes of a batch of model tool calls, in call order.

    ``results[i]`` is the ``Ok``, ``Err`` or ``NeedsApproval`` of ``calls[i]`` (the
    parsed :class:`ToolCall`; its ``arguments`` are the parsed mapping, or the raw
    value when they could not be parsed). ``context`` is the input context with the
    update of each ``Ok`` applied in call order. Iterating yields the results.
    """

    results: list[CallResult]
    calls: list[ToolCall]
    context: RunContext[t.Any]

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
        return f"<ToolCallResults {kinds}>"

    def _entries(self, include_pending: bool) -> c.Iterator[tuple[ToolCall, CallResult, str]]:
        for call, result in zip(self.calls, self.results, strict=True):
            if include_pending or not isinstance(result, NeedsApproval):
                yield call, result, format_tool_result(result, call.name)

    def to_openai_messages(self, *, include_pending: bool = True) -> list[dict[str, t.Any]]:
        """Chat Completions tool messages: ``{"role": "tool", "tool_call_id", "content"}``.

        ``include_pending=False`` leaves out the calls waiting for approval (send
        their messages once they are decided).
        """
        return [
            {"role": "tool", "tool_call_id": call.id, "content": content}
            for call, _, content in self._entries(include_pending)
        ]

    def to_responses_items(self, *, include_pending: bool = True) -> list[dict[str, t.Any]]:
        """Responses API items: ``{"type": "function_call_output", "call_id", "output"}``."""
        return [
            {"type": "function_call_output", "call_id": call.id, "output": content}
            for call, _, content in self._entries(include_pending)
        ]

    def to_anthropic_blocks(self, *, include_pending: bool = True) -> list[dict[str, t.Any]]:
        """Anthropic ``tool_result`` blocks: ``{"type": "tool_result", "tool_use_id",
        "content", "is_error"}``; ``is_error`` is True for an ``Err`` only (a pending
        approval has not failed)."""
        return [
            {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": content,
                "is_error": isinstance(result, Err),
            }
            for call, result, content in self._entries(include_pending)
        ]


def execute_tool_calls(
    registry: Registry,
    tool_calls: c.Iterable[t.Any],
    ctx: RunContext[t.Any] | None = None,
    *,
    executor: ToolExecutor | None = None,
) -> ToolCallResults:
    """Run the tool calls of a model response through ``registry``, concurrently.

    ``tool_calls`` may mix OpenAI Chat Completions tool calls, OpenAI Responses
    ``function_call`` items, Anthropic ``tool_use`` blocks and :class:`ToolCall`
    values, as dicts or as SDK objects with the same fields. Items that are plainly
    not tool calls (``text``, ``thinking``, ``reasoning``, ``message``) are skipped.

    Per call, without running anything: arguments that are not valid JSON, or not a
    JSON object, give an ``Err(ToolError)`` quoting the parse error; an unknown name
    gives ``Err(ToolNotFound)``; an item that cannot be read gives an ``Err``. The
    other calls run as ``registry.execute`` runs them — approval level, advice, the
    executor's pipeline — with each call's id as ``ApprovalRequest.id``; an ``ask``
    tool with no approval handler in an ungated ``ctx`` comes back as
    ``NeedsApproval``.

    ``ctx`` defaults to ``RunContext.new()``; ``executor`` to the registry's. Never
    raises for anything in ``tool_calls``; a ``registry`` or ``ctx`` of the wrong type,
    or ``tool_calls`` that is a single mapping or string, is a ``TypeError``.
    """
    if isinstance(tool_calls, (str, bytes, c.Mapping)):
        raise TypeError(
            "execute_tool_calls expects a list of tool calls, got a single "
            f"{type(tool_calls).__name__}"
        )
    if ctx is None:
        ctx = RunContext.new()
    elif not isinstance(ctx, RunContext):
        raise TypeError(
            f"execute_tool_calls expects a RunContext or None, got {type(ctx).__name__}"
        )
    lookup = getattr(registry, "lookup", None)
    if not callable(lookup):
        raise TypeError(f"execute_tool_calls expects a Registry, got {type(registry).__name__}")

    calls: list[ToolCall] = []
    jobs: list[tuple[Tool, t.Any, str | None] | Err] = []
    for position, item in enumerate(tool_calls, start=1):
        read = _read(item)
        if read is None:
            continue
        if isinstance(read, _Unreadable):
            calls.append(read.call)
            jobs.append(
                Err(
                    ToolError(
                        f"Tool call #{position} could not be read: {read.why}",
                        tool_name=read.call.name or None,
                    )
                )
            )
            continue
        tool = lookup(read.name)
        if tool is None:
            calls.append(read)
            jobs.append(Err(ToolNotFound(read.name)))
            continue
        arguments = _parse_arguments(read.name, read.arguments)
        if isinstance(arguments, Err):
            calls.append(read)
            jobs.append(arguments)
            continue
        calls.append(
            read if arguments is read.arguments else attrs.evolve(read, arguments=arguments)
        )
        jobs.append((tool, calls[-1], read.id))  # the ToolCall rides as the job's payload

    own = registry.executor
    runner = executor if executor is not None else own

    def run(
        tool: Tool, call: ToolCall, run_ctx: RunContext[t.Any] | None, call_id: str | None
    ) -> CallResult:
        token = _current_call.set(call)
        try:
            if runner is own:
                return registry.execute(tool.name, call.arguments, run_ctx, call_id=call_id)
            return registry._dispatch(tool, call.arguments, run_ctx, call_id, runner)
        finally:
            _current_call.reset(token)

    results = t.cast(list[CallResult], runner.run_jobs(jobs, ctx, run=run))

    context = ctx
    for call, result in zip(calls, results, strict=True):
        update = result.update if isinstance(result, Ok) else None
        if isinstance(update, ContextUpdate) and not update.is_empty():
            try:
                context = update.apply_to_run_context(context)
            except Exception as exc:  # deps that are not a mapping, say
                _log.warning(
                    "Context update of tool '%s' (call %s) could not be applied: %s; skipped",
                    call.name,
                    call.id,
                    type(exc).__name__,
                )
    return ToolCallResults(results=results, calls=calls, context=context)
