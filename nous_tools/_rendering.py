"""A result as a model reads it (private): the text (and content parts) a model gets for a result.

:func:`format_tool_result`, what every provider message of a
:class:`~nous_tools.ToolCallResults` and the MCP server carry, cut to the tool's
``max_result_chars``; an error's explanation, cut to :data:`MAX_ERROR_CHARS`.
The writer of a value as text is registered with :mod:`nous_tools.content` as
this module is imported, for the items of a result that mixes content with others.
"""

from __future__ import annotations

import json
import sys
import typing as t

import attrs

from nous_tools import content as _rich
from nous_tools._util._text import (
    DEFAULT_MAX_RESULT_CHARS,
    RENDER_SECONDS,
    clip_text,
    render_bounded,
)
from nous_tools._util._text import safe_str as _safe_str
from nous_tools.approval import NeedsApproval
from nous_tools.errors import RateLimited, ToolDenied, ToolError, ToolNotFound, ToolTimeout
from nous_tools.results import Err, Ok, Result
from nous_tools.tool import Tool

#: One outcome of :func:`execute_tool_calls`.
CallResult = t.Union[Result, NeedsApproval]  # noqa: UP007  (a runtime alias)

#: Longest error explanation sent to a model, in characters (the rest is cut).
MAX_ERROR_CHARS = 2000


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
    if kind in _PLAIN:
        try:  # plain JSON data: the C encoder, which runs no code of the value's own
            return _plain_json(value)  # (a list holding a content part is not plain)
        except (TypeError, ValueError, RecursionError):
            pass  # something inside is not plain (or a cycle): render it as below
    if kind in _CONTENT or kind is list or kind is tuple:
        parts = _rich.as_content(value)
        if parts is not None:  # images, audio, resources: text and placeholders
            return _rich.to_text(parts)
    # Anything else runs code of its own (repr, __str__, a converter, a Mapping's
    # items), which might hang: it is rendered with a bound, never past it.
    text = render_bounded(_rendered, value)
    if text is None:
        return (
            f"<{type(value).__name__} object (it could not be written within {RENDER_SECONDS} s)>"
        )
    return text


_PLAIN = frozenset({dict, list, tuple, int, float, bool, type(None)})


def _not_plain(value: object) -> t.NoReturn:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _plain_json(value: object) -> str:
    """``json.dumps(value, ensure_ascii=False)``, without its circular-reference
    markers (a dict of every container's id, about 15 % of writing 1 MB of rows):
    a value with a cycle is a ``RecursionError`` instead, and is rendered by the
    slower path, which names the cycle as before. Only while the recursion limit
    is one a thread's C stack can take: past it, a cycle would recurse that deep
    (a crash before the error), so the markers find it at once."""
    if _c_plain is None or _getrecursionlimit() > _MARKERLESS_DEPTH:
        return json.dumps(value, ensure_ascii=False)
    return "".join(_c_plain(value, 0))


#: The recursion limit up to which :func:`_plain_json` leaves the markers out
#: (Python's default is 1,000; 50,000 levels of the encoder fit a thread's 8 MB).
_MARKERLESS_DEPTH = 10_000
_getrecursionlimit = sys.getrecursionlimit

try:  # the C encoder json.dumps itself uses, made once instead of per call
    from _json import encode_basestring as _c_text
    from _json import make_encoder as _c_make_encoder
except ImportError:  # pragma: no cover - another Python: json.dumps
    _c_plain = None
else:
    _c_plain = _c_make_encoder(None, _not_plain, _c_text, None, ": ", ", ", False, False, True)

_CONTENT = frozenset(t.get_args(_rich.Content))  # every kind of content


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


# A list that mixes content with other items writes those items as a model reads
# them: ``nous_tools.content`` (a value: it imports no layer above it) has the
# writer from here.
_rich.register_value_text(_value_content)


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
        own = f"Tool '{name}' "
        if reason.waited is not None and reason.message.startswith(own):
            # It waited for a max_concurrency slot first: its message says how long
            # it waited and how long it ran, which the bare timeout would hide.
            return _clip(f"Error: tool '{name}' {reason.message[len(own) :]}, and was not retried")
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


class _Unset:
    def __repr__(self) -> str:
        return "the tool's max_result_chars, else 100,000"


_TOOLS_CAP: t.Any = _Unset()


def format_tool_result(
    result: CallResult,
    name: str | Tool | None = None,
    *,
    max_chars: int | None = _TOOLS_CAP,
) -> str:
    """The text a model gets for one outcome of the tool ``name`` (its name, or the
    :class:`~nous_tools.Tool` itself), at most ``max_chars`` characters long (None:
    no limit; by default the tool's ``max_result_chars`` when a tool is given, else
    100,000, as an executor has it by default).

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

    A text longer than ``max_chars`` keeps its head and its tail, with a notice in
    the middle: ``[... 123,456 characters omitted: the result was 160,000
    characters; the tool's limit is 20,000 ...]``. Pass the tool (or its
    ``max_result_chars``), as :class:`ToolCallResults` and the MCP server do, to
    clip as the executor would.

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
    if isinstance(name, Tool):
        own = name.max_result_chars
        if max_chars is _TOOLS_CAP:
            max_chars = DEFAULT_MAX_RESULT_CHARS if own == "executor" else own
        name = name.name
    elif max_chars is _TOOLS_CAP:
        max_chars = DEFAULT_MAX_RESULT_CHARS
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
