"""Structured results: an output schema from a tool's return annotation (private).

A tool whose return annotation is a ``TypedDict``, a dataclass, an attrs class or
a pydantic model has an output schema (MCP's ``outputSchema``), and its result is
sent as ``structuredContent`` once checked against that schema: a value that does
not match is an ``Err`` naming the annotation and each violation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import typing as t
import weakref

import attrs

from nous_tools.errors import ToolError
from nous_tools.results import Err, Ok
from nous_tools.schema import _type_schemas as _types
from nous_tools.schema._annotations import resolved_annotations

if t.TYPE_CHECKING:
    from nous_tools.schema._validation import ArgumentValidator
    from nous_tools.tool import Tool

__all__ = ["output_schema", "structured_value"]

_NONE: t.Any = object()
_cache: weakref.WeakKeyDictionary[t.Any, tuple[t.Any, dict[str, t.Any] | None]] = (
    weakref.WeakKeyDictionary()
)


def _return_annotation(tool: Tool) -> t.Any:
    try:
        hints = resolved_annotations(tool.function)
    except Exception:
        return None
    return hints.get("return")


def _structured_kind(annotation: object) -> bool:
    if not isinstance(annotation, type):
        return False
    from nous_tools import content

    if annotation in t.get_args(content.Content):
        return False  # content, not data: see nous_tools.content
    return (
        _types.is_typeddict(annotation)
        or dataclasses.is_dataclass(annotation)
        or attrs.has(annotation)
        or _types.is_pydantic_type(annotation)
    )


def _compute(tool: Tool) -> tuple[t.Any, dict[str, t.Any] | None]:
    annotation = _return_annotation(tool)
    if not _structured_kind(annotation):
        return None, None
    build = _types.Build({})
    try:
        schema = _types.type_schema(annotation, build)
    except Exception:
        return None, None
    if schema.get("type") != "object":
        return None, None
    if build.defs:
        schema["$defs"] = build.defs
    return annotation, schema


def _entry(tool: Tool) -> tuple[t.Any, dict[str, t.Any] | None]:
    try:
        found = _cache.get(tool)
    except TypeError:  # a tool that cannot be weakly referenced
        return _compute(tool)
    if found is None:
        found = _compute(tool)
        with contextlib.suppress(TypeError):
            _cache[tool] = found
    return found


def output_schema(tool: Tool) -> dict[str, t.Any] | None:
    """The JSON Schema of ``tool``'s result, from its return annotation when that is
    a ``TypedDict``, a dataclass, an attrs class or a pydantic model; else None."""
    schema = _entry(tool)[1]
    return dict(schema) if schema is not None else None


def _validator(schema: dict[str, t.Any]) -> ArgumentValidator:
    from nous_tools.schema._validation import shared_validator

    return shared_validator(schema)


def structured_value(tool: Tool, value: object) -> Ok[t.Any] | Err | None:
    """``value`` as plain JSON data checked against ``tool``'s output schema:
    ``Ok(data)``; an ``Err`` saying plainly what does not match; None when the tool
    has no output schema."""
    annotation, schema = _entry(tool)
    if schema is None:
        return None
    from nous_tools.schema._convert import unstructure

    name = getattr(annotation, "__name__", str(annotation))
    try:
        plain = json.loads(json.dumps(unstructure(value), allow_nan=False))
    except Exception as exc:
        return Err(
            ToolError(
                f"Tool '{tool.name}' returned a value that cannot be written as its return "
                f"annotation {name} ({type(value).__name__}: {type(exc).__name__})",
                tool_name=tool.name,
            )
        )
    failure = _validator(schema).validate(plain) if isinstance(plain, dict) else _NONE
    if failure is _NONE:
        return Err(
            ToolError(
                f"Tool '{tool.name}' returned {type(value).__name__}, which does not match "
                f"its return annotation {name} (an object)",
                tool_name=tool.name,
            )
        )
    if failure is not None:
        return Err(
            ToolError(
                f"Tool '{tool.name}' returned a value that does not match its return "
                f"annotation {name}: {failure.message}",
                tool_name=tool.name,
            )
        )
    return Ok(plain)
