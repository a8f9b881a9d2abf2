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
"""

from __future__ import annotations

import collections.abc as c
import contextvars
import json
import typing as t

import attrs

from ._log import log as _safe_log
from ._text import RENDER_SECONDS, render_bounded
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

#: Item types of a model response that nous-tools does not run. They are skipped —
#: content that is not a call (Anthropic ``text``/``thinking`` blocks, Responses
#: ``reasoning``/``message`` items), calls the provider runs itself (web search,
#: file search, code interpreter, image generation, MCP, Anthropic
#: ``server_tool_use``), and the client-side built-in tools that are not functions
#: (computer use, shell, apply_patch), which the application answers in their own
#: shapes — and listed in :attr:`ToolCallResults.skipped`. Any type ending in
#: ``_output`` or ``_tool_result`` (a tool's output, an Anthropic server tool's
#: result) is skipped too.
SKIPPED_TYPES: frozenset[str] = frozenset(
    {
        # content, not calls
        "text",
        "thinking",
        "redacted_thinking",
        "reasoning",
        "message",
        "output_text",
        "refusal",
        "image",
        "document",
        "compaction",
        "additional_tools",
        "container_upload",
        # calls the provider runs itself
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "tool_search_call",
        "program",
        "server_tool_use",
        "mcp_tool_use",
        # client-side built-in tools that are not functions
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
    }
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
    """``item[key]`` for a mapping, ``item.key`` for anything else (an SDK object);
    None when it is missing or reading it raises."""
    try:
        if isinstance(item, c.Mapping):
            return item.get(key)
        return getattr(item, key, None)
    except Exception:  # a property or a __getitem__ that raises
        return None


def _has(item: object, key: str) -> bool:
    """True when ``item`` has the key (a mapping) or the attribute (an SDK object)."""
    try:
        if isinstance(item, c.Mapping):
            return key in item
        return hasattr(item, key)
    except Exception:
        return False


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _is_skipped(kind: object) -> bool:
    return isinstance(kind, str) and (
        kind in SKIPPED_TYPES or kind.endswith(("_output", "_tool_result"))
    )


#: What ``execute_tool_calls`` accepts, for its ``TypeError``.
_EXPECTED = (
    "the tool calls of a model response: None, a list of tool calls, an OpenAI "
    "ChatCompletion or ChatCompletionMessage, an OpenAI Responses Response, an "
    "Anthropic Message, or the same as dicts ({'choices': [...]}, {'output': [...]}, "
    "{'role': 'assistant', 'content': [...]})"
)


def _describe(value: object) -> str:
    name = type(value).__name__
    if isinstance(value, (str, bytes, bytearray)):
        return f"a single {name}"
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _whole_response(item: object) -> str | None:
    """What ``item`` is when it is a whole response or message rather than one item
    of one (``[message]`` instead of ``message``), else None."""
    if isinstance(item, (str, bytes, bytearray, ToolCall)):
        return None
    if isinstance(_field(item, "choices"), c.Sequence):
        return "an OpenAI ChatCompletion"
    if _has(item, "tool_calls") and _field(item, "function") is None:
        return "an OpenAI ChatCompletionMessage"
    if _field(item, "object") == "response" or (
        _field(item, "type") is None and isinstance(_field(item, "output"), list)
    ):
        return "an OpenAI Responses Response"
    content = _field(item, "content")
    is_blocks = isinstance(content, c.Sequence) and not isinstance(content, str)
    if is_blocks and (
        _has(item, "stop_reason") or any(_field(b, "type") == "tool_use" for b in content)
    ):
        return "an Anthropic Message"
    return None


def _unwrap(tool_calls: object) -> c.Iterable[t.Any]:
    """The items of ``tool_calls``: a list as it is, the tool calls of a whole
    response or message; ``TypeError`` for anything else."""
    if tool_calls is None:
        return ()
    if isinstance(tool_calls, (str, bytes, bytearray, ToolCall)):
        raise TypeError(f"execute_tool_calls expects {_EXPECTED}; got {_describe(tool_calls)}")
    if isinstance(tool_calls, (list, tuple)):
        return tool_calls
    choices = _field(tool_calls, "choices")
    if choices is not None:  # OpenAI Chat Completions: the one choice's message
        if not isinstance(choices, c.Sequence) or isinstance(choices, str):
            raise TypeError(f"execute_tool_calls got a 'choices' that is not a list: {_EXPECTED}")
        if len(choices) > 1:
            raise TypeError(
                f"execute_tool_calls got a ChatCompletion with {len(choices)} choices; "
                "pass the message of the one you continue with (response.choices[i].message)"
            )
        if not choices:
            return ()
        message = _field(choices[0], "message")
        if message is None:
            raise TypeError("execute_tool_calls got a ChatCompletion choice without a message")
        return _field(message, "tool_calls") or ()
    if _has(tool_calls, "tool_calls"):  # OpenAI Chat Completions message
        return _field(tool_calls, "tool_calls") or ()
    output = _field(tool_calls, "output")
    if isinstance(output, (list, tuple)):  # OpenAI Responses
        return output
    content = _field(tool_calls, "content")
    assistant = _field(tool_calls, "role") == "assistant"
    if isinstance(content, (list, tuple)) and (
        assistant or _field(tool_calls, "type") == "message"
    ):  # Anthropic Messages
        return content
    if assistant and (content is None or isinstance(content, str)):
        return ()  # a Chat Completions message without tool calls: a text answer
    if isinstance(_read_quietly(tool_calls), _Read):
        raise TypeError(
            f"execute_tool_calls expects {_EXPECTED}; got {_describe(tool_calls)} "
            "that is a single tool call (pass a list)"
        )
    if isinstance(tool_calls, c.Mapping):
        raise TypeError(f"execute_tool_calls expects {_EXPECTED}; got {_describe(tool_calls)}")
    if isinstance(tool_calls, c.Iterable) and not hasattr(tool_calls, "model_dump"):
        return tool_calls  # a generator, a deque, ...
    raise TypeError(f"execute_tool_calls expects {_EXPECTED}; got {_describe(tool_calls)}")


class _Unreadable(t.NamedTuple):
    """An item that is not a tool call we can read: why, and what we could see of it."""

    call: ToolCall
    why: str


class _Read(t.NamedTuple):
    """A tool call as read: its arguments still raw; ``kind`` is ``"function"`` or
    ``"custom"`` (a freeform call whose arguments are the raw input text)."""

    call: ToolCall
    kind: str


_SKIP = object()


def _read(item: object) -> _Read | _Unreadable | object:
    """Parse one item; :data:`_SKIP` for an item that is not ours to run."""
    if isinstance(item, ToolCall):
        return _Read(item, "function")
    kind = _field(item, "type")
    custom = False
    if kind == "function_call":  # OpenAI Responses
        call_id = _text(_field(item, "call_id")) or _text(_field(item, "id"))
        name, arguments = _field(item, "name"), _field(item, "arguments")
    elif kind == "custom_tool_call":  # OpenAI Responses, a freeform call
        call_id = _text(_field(item, "call_id")) or _text(_field(item, "id"))
        name, arguments, custom = _field(item, "name"), _field(item, "input"), True
    elif kind == "tool_use":  # Anthropic
        call_id = _text(_field(item, "id"))
        name, arguments = _field(item, "name"), _field(item, "input")
    elif kind == "custom" and _field(item, "function") is None:  # Chat Completions, freeform
        call_id = _text(_field(item, "id"))
        body = _field(item, "custom")
        name, arguments, custom = _field(body, "name"), _field(body, "input"), True
    elif (kind == "function" or kind is None) and _field(item, "function") is not None:
        call_id = _text(_field(item, "id"))  # OpenAI Chat Completions
        function = _field(item, "function")
        name, arguments = _field(function, "name"), _field(function, "arguments")
    elif _is_skipped(kind):
        return _SKIP
    else:
        call_id = _text(_field(item, "call_id")) or _text(_field(item, "id"))
        shown = f" with type {kind!r}" if isinstance(kind, str) else ""
        return _Unreadable(
            ToolCall(call_id, _text(_field(item, "name")) or "", None),
            f"{type(item).__name__}{shown} is not an OpenAI tool call, an OpenAI Responses "
            "function_call or custom_tool_call item, an Anthropic tool_use block or a ToolCall",
        )
    if not isinstance(name, str) or not name:
        return _Unreadable(ToolCall(call_id, "", arguments), "it has no tool name")
    return _Read(ToolCall(call_id, name, arguments), "custom" if custom else "function")


def _read_quietly(item: object) -> object:
    try:
        return _read(item)
    except Exception:
        return None


def _invalid_json(name: str, why: str, exc: BaseException) -> Err:
    return Err(
        ToolError(f"Invalid JSON arguments for '{name}': {why}", tool_name=name, original_error=exc)
    )


def _parse_arguments(name: str, arguments: object) -> c.Mapping[str, t.Any] | Err:
    """The arguments as a mapping, or the ``Err`` for that call. A JSON string is
    parsed; an empty string or None counts as ``{}`` (models send ``""`` for a tool
    without parameters). Never raises for what a model sent: JSON too deep or with a
    number of too many digits is an ``Err`` like any other invalid JSON."""
    if arguments is None:
        return {}
    if isinstance(arguments, (bytes, bytearray)):
        try:
            arguments = bytes(arguments).decode("utf-8")
        except UnicodeDecodeError as exc:
            return _invalid_json(name, f"not UTF-8 ({exc.reason})", exc)
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:  # its str() names the line and column
            return _invalid_json(name, str(exc), exc)
        except RecursionError as exc:
            return _invalid_json(name, "nested too deeply", exc)
        except ValueError as exc:  # an integer of more digits than int() takes, ...
            return _invalid_json(name, _clip(_safe_str(exc).split(";")[0]), exc)
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


def _custom_arguments(tool: Tool, text: object) -> c.Mapping[str, t.Any] | Err:
    """The arguments of a freeform (custom) call: the raw input text as the tool's one
    parameter, or the ``Err`` saying why the tool cannot take it."""
    name = tool.name
    if not isinstance(text, str):
        return Err(
            ToolError(
                f"Invalid arguments for '{name}': a custom tool call's input must be text, "
                f"got {_JSON_TYPES.get(type(text), type(text).__name__)}",
                tool_name=name,
            )
        )
    properties = (tool.parameters or {}).get("properties")
    names = list(properties) if isinstance(properties, c.Mapping) else []
    if len(names) != 1:
        shown = f" ({', '.join(map(str, names))})" if names else ""
        return Err(
            ToolError(
                f"Invalid arguments for '{name}': a custom tool call sends one input text, "
                f"and this tool has {len(names)} parameters{shown}; it needs exactly one",
                tool_name=name,
            )
        )
    return {names[0]: text}


def _defaults_for_nulls(tool: Tool, arguments: c.Mapping[str, t.Any]) -> c.Mapping[str, t.Any]:
    """``None`` sent for an optional parameter (strict mode's way of leaving it out)
    becomes the parameter's default: the key is dropped, so the function's own default
    applies. Only where the parameter's schema does not accept null itself."""
    schema = tool.parameters
    if not schema:
        return arguments
    for value in arguments.values():
        if value is None or isinstance(value, (dict, list)):
            break
    else:
        return arguments  # nothing that could hold a null: the common case
    try:
        from ._strict import nulls_to_defaults

        return nulls_to_defaults(schema, arguments)
    except Exception:  # a schema or arguments we cannot walk: leave them to validation
        return arguments


# -- writing results for a model -----------------------------------------------------


def _safe_repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__} object (its repr() raised)>"


def _value_content(value: object) -> str:
    """An ``Ok`` value as a model sees it: a str as is, anything else as JSON.
    Dataclasses, attrs classes, pydantic models, enums, dates and the like are
    written as argument conversion reads them (``_convert.unstructure``); values
    JSON cannot hold otherwise are written as their ``repr``."""
    if isinstance(value, str):
        return value
    if type(value) in _PLAIN:
        try:  # plain JSON data: the C encoder, which runs no code of the value's own
            return json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            pass  # something inside is not plain: render it as below
    # Anything else runs code of its own (repr, __str__, a converter, a Mapping's
    # items), which might hang: it is rendered with a bound, never past it.
    text = render_bounded(_rendered, value)
    if text is None:
        return (
            f"<{type(value).__name__} object (it could not be written within {RENDER_SECONDS} s)>"
        )
    return text


_PLAIN = frozenset({dict, list, tuple, int, float, bool, type(None)})


def _rendered(value: object) -> str:
    try:
        return json.dumps(value, default=_json_ready, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # non-str keys, a cycle
        return _safe_repr(value)


def _json_ready(value: object) -> object:
    """``json.dumps``'s fallback: the value unstructured, else its ``repr``."""
    try:
        from ._convert import unstructure  # with the first tool made: loaded by now

        plain = unstructure(value)
    except Exception:
        return _safe_repr(value)
    return _safe_repr(value) if plain is value else plain


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
    value when they could not be parsed), and ``kinds[i]`` says what kind of call it
    was: ``"function"``, or ``"custom"`` for a freeform call (OpenAI custom tools),
    whose output item differs in the Responses API. ``context`` is the input context
    with the update of each ``Ok`` applied in call order. ``skipped`` holds the items
    of the response that were not run (text, reasoning, provider-hosted tool calls;
    see :data:`SKIPPED_TYPES`), as they were given. Iterating yields the results.
    """

    results: list[CallResult]
    calls: list[ToolCall]
    context: RunContext[t.Any]
    skipped: list[t.Any] = attrs.field(factory=list)
    kinds: list[str] = attrs.field(factory=list)

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

    def _entries(self, include_pending: bool) -> c.Iterator[tuple[ToolCall, CallResult, str, str]]:
        kinds = self.kinds
        for index, (call, result) in enumerate(zip(self.calls, self.results, strict=True)):
            if call.id is None:  # nothing to answer: a provider needs the call's id
                continue
            if include_pending or not isinstance(result, NeedsApproval):
                kind = kinds[index] if index < len(kinds) else "function"
                yield call, result, format_tool_result(result, call.name), kind

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
        id-less calls are left out as in :meth:`to_openai_messages`."""
        return [
            {
                "type": "custom_tool_call_output" if kind == "custom" else "function_call_output",
                "call_id": call.id,
                "output": content,
            }
            for call, _, content, kind in self._entries(include_pending)
        ]

    def to_anthropic_blocks(self, *, include_pending: bool = False) -> list[dict[str, t.Any]]:
        """Anthropic ``tool_result`` blocks: ``{"type": "tool_result", "tool_use_id",
        "content", "is_error"}``; ``is_error`` is True for an ``Err`` only (a pending
        approval has not failed). Pending and id-less calls are left out as in
        :meth:`to_openai_messages`."""
        return [
            {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": content,
                "is_error": isinstance(result, Err),
            }
            for call, result, content, _ in self._entries(include_pending)
        ]

    def to_anthropic_message(self, *, include_pending: bool = False) -> dict[str, t.Any]:
        """The user message that carries the ``tool_result`` blocks back to Claude:
        ``{"role": "user", "content": [...]}`` (:meth:`to_anthropic_blocks`)."""
        return {
            "role": "user",
            "content": self.to_anthropic_blocks(include_pending=include_pending),
        }


class _CallObserver(t.Protocol):
    """What a tracer implements to see each call of a batch from start to outcome
    (``nous_tools.contrib.opentelemetry`` does). Private to the library and its
    contrib modules: the signals report attempts, this reports whole calls — also
    those refused before their first attempt (approval, validation)."""

    def call_started(self, tool: Tool, call: ToolCall) -> object: ...

    def call_ended(self, token: object, result: CallResult | None) -> None: ...


#: The one observer, set by ``nous_tools.contrib.opentelemetry.instrument()``.
_observer: _CallObserver | None = None


def _observe_start(observer: _CallObserver | None, tool: Tool, call: ToolCall) -> object:
    if observer is None:
        return None
    try:
        return observer.call_started(tool, call)
    except Exception:
        _log.warning("Tool call observer failed at the start of '%s'", tool.name, exc_info=True)
        return None


def _observe_end(observer: _CallObserver | None, token: object, result: CallResult | None) -> None:
    if observer is None or token is None:
        return
    try:
        observer.call_ended(token, result)
    except Exception:
        _log.warning("Tool call observer failed at the end of a call", exc_info=True)


def _unreadable_err(position: int, why: str, name: str | None) -> Err:
    return Err(ToolError(f"Tool call #{position} could not be read: {why}", tool_name=name or None))


def execute_tool_calls(
    registry: Registry,
    tool_calls: t.Any,
    ctx: RunContext[t.Any] | None = None,
    *,
    executor: ToolExecutor | None = None,
) -> ToolCallResults:
    """Run the tool calls of a model response through ``registry``, concurrently.

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

    ``ctx`` defaults to ``RunContext.new()``; ``executor`` to the registry's. Never
    raises for anything a model sent (hostile JSON, items whose attributes raise, an
    iterable that breaks: each is an ``Err`` and the batch goes on); a ``registry`` or
    ``ctx`` of the wrong type, or a ``tool_calls`` of a shape it does not know, is a
    ``TypeError``.
    """
    if ctx is None:
        ctx = RunContext.new()
    elif not isinstance(ctx, RunContext):
        raise TypeError(
            f"execute_tool_calls expects a RunContext or None, got {type(ctx).__name__}"
        )
    lookup = getattr(registry, "lookup", None)
    if not callable(lookup):
        raise TypeError(f"execute_tool_calls expects a Registry, got {type(registry).__name__}")
    items = _unwrap(tool_calls)

    calls: list[ToolCall] = []
    kinds: list[str] = []
    jobs: list[tuple[Tool, t.Any, str | None] | Err] = []
    skipped: list[t.Any] = []
    refused: list[tuple[Tool, ToolCall, Err]] = []  # for the observer: refused before running

    def add(call: ToolCall, kind: str, job: tuple[Tool, t.Any, str | None] | Err) -> None:
        calls.append(call)
        kinds.append(kind)
        jobs.append(job)

    position = 0
    try:
        iterator = iter(items)
    except Exception as exc:
        iterator = iter(())
        add(
            ToolCall(None, "", None),
            "function",
            Err(
                ToolError(
                    f"The tool calls could not be read: {type(exc).__name__}: {_safe_str(exc)}",
                    original_error=exc,
                )
            ),
        )
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            break
        except Exception as exc:  # a broken iterable: what was read still runs
            add(
                ToolCall(None, "", None),
                "function",
                Err(
                    ToolError(
                        f"The tool calls could not be read past call #{position}: "
                        f"{type(exc).__name__}: {_safe_str(exc)}",
                        original_error=exc,
                    )
                ),
            )
            break
        position += 1
        try:
            read = _read(item)
            # A whole response inside a list reads as an item we skip or cannot read.
            whole = None if isinstance(read, _Read) else _whole_response(item)
        except Exception as exc:  # reading the item raised
            add(
                ToolCall(None, "", None),
                "function",
                _unreadable_err(position, f"reading it raised {type(exc).__name__}", None),
            )
            continue
        if whole is not None:
            raise TypeError(
                f"execute_tool_calls got a list holding {whole} (item #{position}); "
                "pass the response or message itself, not inside a list"
            )
        if read is _SKIP:
            skipped.append(item)
            continue
        if isinstance(read, _Unreadable):
            add(read.call, "function", _unreadable_err(position, read.why, read.call.name))
            continue
        assert isinstance(read, _Read)
        call, kind = read
        tool = lookup(call.name)
        if tool is None:
            add(call, kind, Err(ToolNotFound(call.name)))
            continue
        if kind == "custom":
            arguments = _custom_arguments(tool, call.arguments)
        else:
            arguments = _parse_arguments(call.name, call.arguments)
        if isinstance(arguments, Err):
            add(call, kind, arguments)
            refused.append((tool, call, arguments))
            continue
        arguments = _defaults_for_nulls(tool, arguments)
        if arguments is not call.arguments:
            call = attrs.evolve(call, arguments=arguments)
        add(call, kind, (tool, call, call.id))  # the ToolCall rides as the job's payload

    observer = _observer
    for tool, call, err in refused:  # calls refused before running, for a tracer
        _observe_end(observer, _observe_start(observer, tool, call), err)

    own = registry.executor
    runner = executor if executor is not None else own

    def run(
        tool: Tool, call: ToolCall, run_ctx: RunContext[t.Any] | None, call_id: str | None
    ) -> CallResult:
        token = _current_call.set(call)
        seen = _observe_start(observer, tool, call)
        result: CallResult | None = None
        try:
            if runner is own:
                result = registry.execute(tool.name, call.arguments, run_ctx, call_id=call_id)
            else:
                result = registry._dispatch(tool, call.arguments, run_ctx, call_id, runner)
            return result
        finally:
            _observe_end(observer, seen, result)
            _current_call.reset(token)

    results = t.cast(list[CallResult], runner.run_jobs(jobs, ctx, run=run))

    context = ctx
    for call, result in zip(calls, results, strict=True):
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
    return ToolCallResults(
        results=results, calls=calls, context=context, skipped=skipped, kinds=kinds
    )
