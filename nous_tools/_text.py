"""Small text helpers shared by the engine, validation and the CLI (private)."""

from __future__ import annotations

import collections.abc as c

__all__ = ["JSON_TYPES", "json_type", "safe_str"]

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
