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
import hashlib
import hmac
import json
import typing as t
import weakref

import attrs

from nous_tools import content as _rich
from nous_tools._engine import _journal
from nous_tools._engine._admission import DEFAULT_MAX_RESULT_CHARS, clip_text, result_limit
from nous_tools._util import _canonical as _c
from nous_tools._util._log import log as _safe_log
from nous_tools._util._scope import interrupts
from nous_tools._util._text import RENDER_SECONDS, render_bounded
from nous_tools._util._text import safe_str as _safe_str
from nous_tools.context_update import ContextUpdate
from nous_tools.errors import (
    ApprovalAlreadyUsed,
    BatchAlreadyResolved,
    RateLimited,
    ToolDenied,
    ToolError,
    ToolNotFound,
    ToolTimeout,
)
from nous_tools.executor import ToolCall, ToolExecutor, _check_batch_cap
from nous_tools.providers import _web
from nous_tools.results import (
    _HMAC,
    Edit,
    Err,
    NeedsApproval,
    Ok,
    Result,
    _key,
    _new_id,
    _now,
    _same,
    claim_expiry,
    limits,
    refusal,
)
from nous_tools.run_context import RunContext

if t.TYPE_CHECKING:
    from nous_tools.registry._registry import Registry
    from nous_tools.tool import Tool

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

#: The three APIs whose tool calls :func:`execute_tool_calls` reads.
Provider = t.Literal["openai", "responses", "anthropic"]

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
    ``"custom"`` (a freeform call whose arguments are the raw input text);
    ``provider`` the API whose shape it had (None for a :class:`ToolCall`)."""

    call: ToolCall
    kind: str
    provider: Provider | None = None


_SKIP = object()


def _read(item: object) -> _Read | _Unreadable | object:
    """Parse one item; :data:`_SKIP` for an item that is not ours to run."""
    if isinstance(item, ToolCall):
        return _Read(item, "function")
    kind = _field(item, "type")
    custom = False
    provider: Provider = "openai"
    if kind == "function_call":  # OpenAI Responses
        call_id = _text(_field(item, "call_id")) or _text(_field(item, "id"))
        name, arguments, provider = _field(item, "name"), _field(item, "arguments"), "responses"
    elif kind == "custom_tool_call":  # OpenAI Responses, a freeform call
        call_id = _text(_field(item, "call_id")) or _text(_field(item, "id"))
        name, arguments, custom = _field(item, "name"), _field(item, "input"), True
        provider = "responses"
    elif kind == "tool_use":  # Anthropic
        call_id = _text(_field(item, "id"))
        name, arguments, provider = _field(item, "name"), _field(item, "input"), "anthropic"
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
    return _Read(ToolCall(call_id, name, arguments), "custom" if custom else "function", provider)


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
    applies. Only where the parameter's schema does not accept null itself, and only
    the places the tool's schema has such parameters are visited (planned once per
    tool: most schemas have none, and their arguments are not walked at all)."""
    schema = tool.parameters
    if not schema:
        return arguments
    plan = _NULL_PLANS.get(tool, _UNPLANNED)
    try:
        if plan is _UNPLANNED:
            from nous_tools.schema._strict import null_plan

            plan = _NULL_PLANS[tool] = null_plan(schema)
        if plan is None:
            return arguments  # no optional parameter that refuses null: no walk
        from nous_tools.schema._strict import apply_null_plan

        return apply_null_plan(plan, arguments)
    except Exception:  # a schema or arguments we cannot walk: leave them to validation
        return arguments


#: The plan of :func:`_defaults_for_nulls` for each tool (see ``_strict.null_plan``).
_NULL_PLANS: weakref.WeakKeyDictionary[Tool, t.Any] = weakref.WeakKeyDictionary()
_UNPLANNED = object()


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
    kind = type(value)
    if kind in _CONTENT or kind is list or kind is tuple:
        parts = _rich.as_content(value)
        if parts is not None:  # images, audio, resources: text and placeholders
            return _rich.to_text(parts)
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
_CONTENT = frozenset({_rich.Text, _rich.Image, _rich.Audio, _rich.Resource})


def _rendered(value: object) -> str:
    try:
        return json.dumps(value, default=_json_ready, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # non-str keys, a cycle
        return _safe_repr(value)


def _json_ready(value: object) -> object:
    """``json.dumps``'s fallback: the value unstructured, else its ``repr``."""
    try:
        from nous_tools.schema._convert import (
            unstructure,  # with the first tool made: loaded by now
        )

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
        kind = type(original).__name__
        if raw and raw != said:
            if said == kind and f"{kind}: {raw}" in message:  # no message: the class alone
                message = message.replace(f"{kind}: {raw}", kind)
            elif raw in message:
                message = message.replace(raw, said)
    return message


def _clip(text: str) -> str:
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return text[: MAX_ERROR_CHARS - 1] + "…"


def _err_content(reason: object, name: str) -> str:
    if isinstance(reason, ToolError):
        stored = reason.__dict__.get("_model_text")  # a journal's replay: the text it gave
        if type(stored) is str:
            return stored
    if isinstance(reason, ToolTimeout):
        if reason.timeout:
            return f"Error: tool '{name}' timed out after {float(reason.timeout)} s and was not retried"
        return f"Error: tool '{name}' timed out and was not retried"
    if isinstance(reason, ToolNotFound):
        return f"Error: tool '{name}' not found"
    if isinstance(reason, ToolDenied):
        return f"Error: tool '{name}' is denied and was not run"
    if isinstance(reason, RateLimited):  # its message is written for the model
        return _clip(f"Error: {reason.message}")
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


def clip_parts(parts: list[_rich.Content], limit: int | None) -> list[_rich.Content]:
    """``parts`` with each text (a :class:`~nous_tools.content.Text`, a text
    resource's) kept to ``limit`` characters, as :func:`format_tool_result` keeps a
    result's text (images, sounds and blobs are not text: left whole)."""
    if limit is None:
        return parts
    clipped: list[_rich.Content] = []
    for part in parts:
        if isinstance(part, _rich.Text) and len(part.text) > limit:
            part = _rich.Text(clip_text(part.text, limit))
        elif isinstance(part, _rich.Resource) and part.text is not None and len(part.text) > limit:
            part = attrs.evolve(part, text=clip_text(part.text, limit))
        clipped.append(part)
    return clipped


def format_tool_result(
    result: CallResult,
    name: str | None = None,
    *,
    max_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
) -> str:
    """The text a model gets for one outcome of the tool called ``name``, at most
    ``max_chars`` characters long (None: no limit).

    - ``Ok``: the value if it is a ``str``, else its JSON (values JSON cannot hold
      are written as their ``repr``).
    - ``Err``: one short line naming the tool and what went wrong, e.g.
      ``Error: tool 'search' failed: Tool execution failed: OSError: API unreachable``
      (the exception's class and its message).
      Never a stack trace, never the ``repr`` of an exception: of a raw exception only
      its message argument is quoted (``args[0]``), so a secret passed to an
      exception as a further argument or kept in an attribute stays out.
    - ``NeedsApproval``: ``Pending approval: tool 'x' needs a person's approval (id
      ...); it has not run yet.``

    A text longer than ``max_chars`` (default 100,000: pass the tool's
    ``max_result_chars``, as :class:`ToolCallResults` and the MCP server do) keeps
    its head and its tail, with a notice in the middle: ``[... 123,456 characters
    omitted: the result was 160,000 characters; the tool's limit is 20,000 ...]``.

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
        text = (
            f"Pending approval: tool '{tool_name}' needs a person's approval "
            f"(id {result.id}); it has not run yet."
        )
    elif isinstance(result, Ok):
        text = _value_content(result.value)
    elif isinstance(result, Err):
        reason = result.reason
        if not name:
            known = getattr(reason, "tool_name", None)
            name = known if isinstance(known, str) else ""
        text = _err_content(reason, name)
    else:
        text = _value_content(result)
    if max_chars is not None and len(text) > max_chars:
        return clip_text(text, max_chars)
    return text


# -- a batch across requests ---------------------------------------------------------

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


#: The context of a batch read back by from_dict (``RunContext.new()``).
_FRESH_CONTEXT: RunContext[t.Any] = RunContext.new()
# ... as the approved calls of its resolve see it (what execute_approved would make).
_FRESH_GATED: RunContext[t.Any] = attrs.evolve(_FRESH_CONTEXT, approval_gated=True)


def _seal_batch(payload: c.Mapping[str, t.Any], secret: str | bytes | None) -> str:
    data = _BATCH_DOMAIN + _c.dumps(payload)
    if secret is None:
        return _CHECKSUM + hashlib.sha256(data).hexdigest()
    return _HMAC + hmac.new(_key(secret), data, hashlib.sha256).hexdigest()


def _batch_refused(why: str) -> ValueError:
    return ValueError(f"tool call batch refused: {why}")


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
    edited = decision.arguments
    name = na.tool.name
    if not isinstance(edited, c.Mapping):
        raise ValueError(
            f"cannot resolve: the edit of call {call_id!r} must give the arguments as a "
            f"mapping, got {type(edited).__name__}"
        )
    try:  # the approval's own id: running the edit uses up the approval
        approval = NeedsApproval(
            na.tool,
            edited,
            id=na.id,
            issued_at=na.issued_at,
            call_id=na.call_id,
            audience=na.audience,
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cannot resolve: the edit of call {call_id!r}: {exc}") from None
    object.__setattr__(approval, "_limits", na._limits)  # accepted under the same limits
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
        claimed = registry._claim(na.id, na._claim_expiry(registry))
    except BaseException as exc:  # rejected all the same: the tool does not run
        if interrupts(exc):
            raise
        _log.error("Approval store failed to claim a rejected approval of tool '%s'", name)
        claimed = True
    if claimed is not True:
        return Err(
            ApprovalAlreadyUsed(
                f"Tool '{name}' was not run: its approval was already used", tool_name=name
            )
        )
    return Err(ToolError(f"Tool '{name}' was rejected by the user and did not run", tool_name=name))


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
        ``{"call_id", "tool", "description", "arguments"}`` (JSON values). See
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
        if type(data) is not dict and not isinstance(data, c.Mapping):
            raise _batch_refused(f"a batch must be a mapping, got {type(data).__name__}")
        version = _batch_field(data, "v", (int,))
        if version == BATCH_VERSION:
            from nous_tools.providers import _wire as _batch_wire

            read = _batch_wire.read(
                data,
                registry,
                secret,
                max_age,
                allow_unsigned,
                max_clock_skew,
                ToolCall,
                _restored,
            )
            return cls(
                results=read.results,
                calls=read.calls,
                context=(  # RunContext.new(): frozen, no deps, so one will do
                    _FRESH_CONTEXT if read.run_id is None else RunContext.new(run_id=read.run_id)
                ),
                kinds=read.kinds,
                provider=t.cast("Provider | None", read.provider),
                registry=registry,
                id=read.id,
                issued_at=read.issued_at,
                _contents=read.contents,
            )
        if version != 1:  # version 1: the format before, still read (batches in flight)
            raise _batch_refused(f"unknown batch version {version} (this library reads 1 and 2)")
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

        if secret is not None:
            _key(secret)  # a bad secret is the program's error, said as such
            if not signature.startswith(_HMAC):
                raise _batch_refused("the batch is not signed (no HMAC signature)")
        elif signature.startswith(_HMAC):
            raise _batch_refused("the batch is signed, but no secret was given to check it")
        elif not allow_unsigned:
            raise _batch_refused(
                "unsigned batches are refused: pass the secret it was signed with "
                "(or allow_unsigned=True, for trusted storage only)"
            )
        try:
            expected = _seal_batch(payload, secret)
        except (TypeError, ValueError, RecursionError) as exc:  # not JSON, NaN, too deep
            raise _batch_refused(f"the batch cannot be read ({type(exc).__name__})") from None
        if not _same(expected, signature):
            raise _batch_refused(
                "the signature does not match (the batch was changed, forged, or signed "
                "with another secret)"
            )

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
            context=(  # RunContext.new(): frozen, no deps, so one will do
                _FRESH_CONTEXT
                if payload.get("run_id") is None
                else RunContext.new(run_id=payload["run_id"])
            ),
            kinds=kinds,
            provider=t.cast("Provider | None", provider),
            registry=registry,
            id=payload["id"],
            issued_at=payload["issued_at"],
            _contents=contents,
        )

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
        registry = self.registry
        if registry is None:
            raise ValueError(
                "cannot resolve: this batch has no registry (make it with "
                "execute_tool_calls or ToolCallResults.from_dict)"
            )
        if ctx is None:
            ctx = self.context
        elif not isinstance(ctx, RunContext):
            raise TypeError(f"resolve expects a RunContext or None, got {type(ctx).__name__}")
        if ctx.run_id is None and isinstance(self.context, RunContext) and self.context.run_id:
            ctx = attrs.evolve(ctx, run_id=self.context.run_id)  # the run the batch was made in
        plan = self._plan(decisions)
        if not plan:
            return attrs.evolve(self, context=ctx)
        journal = registry._effective_journal()
        run_id = ctx.run_id
        if journal is None or run_id is None or getattr(journal, "_run_call", None) is not None:
            journal = None
        decided: dict[int, str] = {}
        if journal is not None:
            assert run_id is not None
            for index, decision, na in plan:
                original = t.cast(NeedsApproval, self.results[index])
                decided[index] = _journal.decision_text(decision, na.tool, _c.thaw(na.arguments))
                conflict = _journal.resolve_conflict(
                    journal,
                    na.tool,
                    _c.thaw(original.arguments),
                    run_id,
                    t.cast(str, self.calls[index].id),
                    decided[index],
                )
                if conflict is not None:
                    raise conflict
        elif (
            registry._claim(_BATCH_CLAIM + self.id, self._claim_expiry(registry, plan)) is not True
        ):
            raise BatchAlreadyResolved(
                f"cannot resolve: tool call batch {self.id} was already resolved "
                "(a replay or a second submit); nothing was run"
            )
        observer = _observer

        def run(
            tool: Tool, job: t.Any, run_ctx: RunContext[t.Any] | None, call_id: str | None
        ) -> Result:
            index, decision, na = job
            call = self.calls[index]
            if decision == "edit":
                call = attrs.evolve(call, arguments=_c.thaw(na.arguments))
            token = _current_call.set(call)
            seen = _observe_start(observer, tool, call)
            result: Result | None = None
            try:
                if journal is not None and isinstance(run_ctx, RunContext):
                    result = _resolve_journaled(
                        registry,
                        journal,
                        t.cast(NeedsApproval, self.results[index]),
                        na,
                        decision,
                        decided[index],
                        run_ctx,
                        t.cast(str, call_id),
                        wait,
                    )
                elif decision == "reject":
                    result = _reject(registry, na)
                else:  # registry.execute_approved(na, None, run_ctx), a call shorter
                    if run_ctx is _FRESH_CONTEXT:
                        run_ctx = _FRESH_GATED  # what execute_approved would make, made once
                    result = registry._approved(na, run_ctx)
                return result
            finally:
                _observe_end(observer, seen, result)
                _current_call.reset(token)

        if len(plan) == 1:  # what run_jobs does with one job, without making the list
            index = plan[0][0]
            outcomes = [run(plan[0][2].tool, plan[0], ctx, self.calls[index].id)]
        else:
            jobs: list[tuple[Tool, t.Any, str | None] | Err] = [
                (na.tool, step, self.calls[step[0]].id) for step in plan for na in (step[2],)
            ]
            outcomes = t.cast("list[Result]", registry.executor.run_jobs(jobs, ctx, run=run))
        results = list(self.results)
        contents = [
            self._contents[i] if i < len(self._contents) else None for i in range(len(results))
        ]
        default = registry.executor.max_result_chars
        limits = [
            self._max_chars[i] if i < len(self._max_chars) else DEFAULT_MAX_RESULT_CHARS
            for i in range(len(results))
        ]
        for (index, _, na), outcome in zip(plan, outcomes, strict=True):
            results[index] = outcome
            contents[index] = None
            limits[index] = result_limit(na.tool, default)
        context = _apply_updates(
            ctx,
            (
                (self.calls[index], outcome)
                for (index, _, _), outcome in zip(plan, outcomes, strict=True)
            ),
        )
        return ToolCallResults(
            results=results,
            calls=list(self.calls),
            context=context,
            skipped=list(self.skipped),
            kinds=list(self.kinds),
            provider=self.provider,
            registry=registry,
            issued_at=self.issued_at,
            _contents=contents,
            _max_chars=limits,
        )

    def _claim_expiry(
        self, registry: Registry, plan: list[tuple[int, str, NeedsApproval]]
    ) -> float | None:
        """Until when the store must remember that this batch was resolved: the
        batch's own expiry, or its approvals' when one is later."""
        latest = claim_expiry(self.issued_at, *limits(registry, None, None))
        for _, _, na in plan:
            if latest is None:
                break  # never expires: nothing is later
            expiry = na._claim_expiry(registry)
            latest = None if expiry is None else max(latest, expiry)
        return latest

    def _plan(self, decisions: object) -> list[tuple[int, str, NeedsApproval]]:
        """``(index, "approve" | "edit" | "reject", the approval to run)`` per decided
        call, in call order; ``ValueError`` for any decision that cannot be applied."""
        if not isinstance(decisions, c.Mapping):
            raise TypeError(
                "resolve expects a mapping of call ids to 'approve', 'reject' or an Edit, "
                f"got {type(decisions).__name__}"
            )
        where: dict[str, int] = {}
        twice: set[str] = set()
        for index, call in enumerate(self.calls):
            if call.id is not None:
                if call.id in where:
                    twice.add(call.id)
                where.setdefault(call.id, index)
        plan: list[tuple[int, str, NeedsApproval]] = []
        for call_id, decision in decisions.items():
            found = where.get(call_id) if type(call_id) is str else None
            if found is None:
                waiting = [
                    call.id
                    for call, result in zip(self.calls, self.results, strict=True)
                    if isinstance(result, NeedsApproval) and call.id is not None
                ]
                shown = ", ".join(map(repr, waiting)) or "none"
                raise ValueError(
                    f"cannot resolve: unknown call id {_short(call_id)} (waiting for a "
                    f"decision: {shown})"
                )
            if call_id in twice:
                raise ValueError(
                    f"cannot resolve: call id {call_id!r} names more than one call of the batch"
                )
            index = found
            na = self.results[index]
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
            return registry._execute_approval(na, None, ctx, call_id, claim=claim)
        started = claim.start(tool, ctx)
        if not isinstance(started, RunContext):
            return started
        result = _reject(registry, na)
        claim.finish(tool, result)
        return result

    return _journal.resolve_call(
        journal, tool, _c.thaw(original.arguments), ctx, call_id, recorded, go, wait
    )


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
    items = _unwrap(tool_calls)

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
        call, kind, provider = read
        providers.add(provider)
        tool = lookup(call.name)
        if tool is None:
            name = call.name
            add(call, kind, Err(ToolNotFound(name if isinstance(name, str) else _safe_repr(name))))
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
                result = registry.execute(
                    tool.name, call.arguments, run_ctx, call_id=call_id, wait=wait
                )
            else:
                result = registry._dispatch(
                    tool, call.arguments, run_ctx, call_id, runner, wait=wait
                )
            return result
        finally:
            _observe_end(observer, seen, result)
            _current_call.reset(token)

    results = t.cast(
        list[CallResult],
        runner.run_jobs(
            jobs, ctx, run=run, max_concurrency=max_concurrency, on_progress=on_progress
        ),
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
