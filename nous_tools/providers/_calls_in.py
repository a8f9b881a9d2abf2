"""Tool calls in (private): the shapes the providers send, read into :class:`ToolCall`.

An OpenAI ``ChatCompletion`` or message, a Responses ``Response``, an Anthropic
``Message`` (SDK objects or dicts), or a list of their calls: unwrapped to the
items, each read into a call (or skipped, or unreadable), its arguments parsed from
JSON (or a custom call's raw text), and strict mode's ``null`` dropped for a
parameter's default — what :func:`~nous_tools.execute_tool_calls` runs.
"""

from __future__ import annotations

import collections.abc as c
import json
import typing as t
import weakref

from nous_tools._rendering import _clip
from nous_tools._util._text import safe_str as _safe_str
from nous_tools.errors import ToolError
from nous_tools.executor import ToolCall
from nous_tools.results import Err

if t.TYPE_CHECKING:
    from nous_tools.tool import Tool

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
    if type(item) is dict:  # JSON's own (a plain dict's get cannot raise)
        return item.get(key)
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
    """A tool call as read: its ``id``, ``name`` and ``arguments``, still raw (the
    :class:`ToolCall` is made once they are parsed); ``kind`` is ``"function"`` or
    ``"custom"`` (a freeform call whose arguments are the raw input text);
    ``provider`` the API whose shape it had (None for a :class:`ToolCall`)."""

    id: str | None
    name: str
    arguments: t.Any
    kind: str
    provider: Provider | None = None


_SKIP = object()


def _read(item: object) -> _Read | _Unreadable | object:
    """Parse one item; :data:`_SKIP` for an item that is not ours to run."""
    if type(item) is dict and item.get("type") == "function":  # Chat Completions, as JSON
        function = item.get("function")
        name = function.get("name") if type(function) is dict else None
        if type(name) is str and name:
            call_id = item.get("id")
            arguments = function.get("arguments")  # type: ignore[union-attr]
            return _Read(call_id if type(call_id) is str else None, name, arguments, "function")
    if isinstance(item, ToolCall):
        return _Read(item.id, item.name, item.arguments, "function", None)
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
    return _Read(call_id, name, arguments, "custom" if custom else "function", provider)


def _read_quietly(item: object) -> object:
    try:
        return _read(item)
    except Exception:
        return None


def _invalid_json(name: str, why: str, exc: BaseException) -> Err:
    return Err(
        ToolError(f"Invalid JSON arguments for '{name}': {why}", tool_name=name, original_error=exc)
    )


# The C scanner json.loads ends in (JSONDecoder sets it; typeshed does not say so).
_scan: c.Callable[[str, int], tuple[t.Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json_value(text: str) -> t.Any:
    """``json.loads(text)``, read by its C scanner directly when the text is JSON
    with nothing around it (what a model sends); anything else — whitespace around
    it, an error — goes through ``json.loads`` itself, for its answer and message."""
    try:
        value, end = _scan(text, 0)
    except (StopIteration, ValueError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


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
        if not arguments or arguments.isspace():  # (strip() would copy a padded text)
            return {}
        try:
            arguments = _json_value(arguments)
        except json.JSONDecodeError as exc:  # its str() names the line and column
            return _invalid_json(name, str(exc), exc)
        except RecursionError as exc:
            return _invalid_json(name, "nested too deeply", exc)
        except ValueError as exc:  # an integer of more digits than int() takes, ...
            return _invalid_json(name, _clip(_safe_str(exc).split(";")[0]), exc)
    if type(arguments) is dict or isinstance(arguments, c.Mapping):
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
    plan = _NULL_PLAN_OF.get(weakref.ref(tool), _UNPLANNED)
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
# Its table, read with a plain weak reference as WeakKeyDictionary.get reads it.
_NULL_PLAN_OF: dict[weakref.ref[Tool], t.Any] = _NULL_PLANS.data  # type: ignore[attr-defined]
_UNPLANNED = object()
