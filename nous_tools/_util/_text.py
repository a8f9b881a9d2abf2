"""Small text helpers shared by the engine, validation and the CLI (private)."""

from __future__ import annotations

import collections.abc as c
import threading
import typing as t

__all__ = ["JSON_TYPES", "RENDER_SECONDS", "json_type", "render_bounded", "safe_str"]

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
