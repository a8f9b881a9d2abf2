"""Small text helpers shared by the engine, validation and the CLI (private)."""

from __future__ import annotations

import collections.abc as c
import threading
import typing as t

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "JSON_TYPES",
    "RENDER_SECONDS",
    "clip_text",
    "json_type",
    "render_bounded",
    "safe_str",
]

#: The JSON Schema type names.
JSON_TYPES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})


def safe_str(value: object) -> str:
    """``str(value)``, or a placeholder naming its type when that raises anything
    (even a ``KeyboardInterrupt`` or ``ToolCancelled`` from a hostile ``__str__``)."""
    try:
        return str(value)
    except BaseException:
        return f"<{type(value).__name__} whose str() raised>"


def json_type(value: object) -> str:
    """The JSON type name of a Python value (its class name when it has none).

    >>> json_type(True), json_type(3), json_type((1,)), json_type(b"x")
    ('boolean', 'integer', 'array', 'bytes')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, c.Mapping):
        return "object"
    return type(value).__name__


#: Longest a value's own rendering code (``repr``, ``__str__``, a converter) may run
#: when a result is written for a model; past it a placeholder is written instead.
RENDER_SECONDS = 1.0


def render_bounded(
    render: c.Callable[[t.Any], str], value: object, seconds: float = RENDER_SECONDS
) -> str | None:
    """``render(value)`` in a helper thread, waiting at most ``seconds``; None when it
    raised or did not finish (a ``repr`` that hangs keeps only its own daemon thread)."""
    box: list[str | None] = []
    done = threading.Event()

    def work() -> None:
        try:
            box.append(render(value))
        except BaseException:
            box.append(None)
        finally:
            done.set()

    threading.Thread(target=work, name="nous-tools-render", daemon=True).start()
    if done.wait(seconds) and box:
        return box[0]
    return None


#: ``ToolExecutor(max_result_chars=...)``'s default: the longest text of a result a
#: model gets, in characters.
DEFAULT_MAX_RESULT_CHARS = 100_000


def _notice(omitted: int, size: int, limit: int) -> str:
    return (
        f"\n[... {omitted:,} characters omitted: the result was {size:,} characters; "
        f"the tool's limit is {limit:,} ...]\n"
    )


def clip_text(text: str, limit: int | None) -> str:
    r"""``text`` when it has at most ``limit`` characters (or ``limit`` is None); else
    its head and its tail around a notice of what was left out, at most ``limit``
    characters in all, the notice included. Below about 100 characters the notice
    is a short one (``[... 190 omitted]``), and below that the head alone.

    >>> clipped = clip_text("x" * 150 + "y" * 150, 200)
    >>> len(clipped), clipped[:3], clipped[-3:]
    (200, 'xxx', 'yyy')
    >>> print(clipped.splitlines()[1])
    [... 190 characters omitted: the result was 300 characters; the tool's limit is 200 ...]
    >>> clip_text("x" * 150 + "y" * 150, 40)
    'xxxxxxxxxxx\n[... 279 omitted]\nyyyyyyyyyy'
    >>> clip_text("x" * 300, 10)
    'xxxxxxxxxx'
    """
    size = len(text)
    if limit is None or size <= limit:
        return text
    for notice in (_notice, _short_notice):
        keep = limit - len(notice(size, size, limit))  # the longest the notice can be
        if keep >= 0:
            tail = keep // 2
            head = keep - tail
            return text[:head] + notice(size - keep, size, limit) + text[size - tail :]
    return text[:limit]  # too short a limit for any notice


def _short_notice(omitted: int, size: int, limit: int) -> str:
    return f"\n[... {omitted:,} omitted]\n"
