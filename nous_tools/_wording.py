"""How one JSON Schema violation reads in a validation failure (private).

jsonschema's own messages are kept, except where they read unlike the rest of the
failure: an argument the schema does not know is ``unknown argument 'nme'
(expected: name)``, not ``Additional properties are not allowed ('nme' was
unexpected)``. The one place that wording lives, whatever path validation takes.

>>> unknown_properties(["nme"], ["name"], nested=False)
"unknown argument 'nme' (expected: name)"
>>> unknown_properties(["x", "y"], ["min", "max"], nested=True)
"unknown fields 'x', 'y' (expected: min, max)"
>>> unknown_properties(["q"], [], nested=False)
"unknown argument 'q' (this tool takes no arguments)"
"""

from __future__ import annotations

import collections.abc as c
import typing as t

__all__ = ["unknown_properties", "violation_text"]

#: Most names listed on either side of an "unknown argument" message.
_MAX_NAMES = 10


def _names(names: c.Sequence[object], quoted: bool) -> str:
    shown = [repr(name) if quoted else str(name) for name in names[:_MAX_NAMES]]
    if len(names) > _MAX_NAMES:
        shown.append(f"... ({len(names) - _MAX_NAMES} more)")
    return ", ".join(shown)


def unknown_properties(
    extras: c.Sequence[object], expected: c.Sequence[str], *, nested: bool
) -> str:
    """``unknown argument 'nme' (expected: name)``: the keys the schema does not
    know, and the ones it does (``field`` for an object inside the arguments)."""
    noun = "field" if nested else "argument"
    plural = "s" if len(extras) != 1 else ""
    known = (
        f"expected: {_names(expected, quoted=False)}"
        if expected
        else ("it takes no fields" if nested else "this tool takes no arguments")
    )
    return f"unknown {noun}{plural} {_names(extras, quoted=True)} ({known})"


def violation_text(error: t.Any) -> str:
    """The text of one jsonschema ``ValidationError`` in a failure message."""
    schema = error.schema
    instance = error.instance
    if (
        error.validator == "additionalProperties"
        and error.validator_value is False
        and isinstance(schema, c.Mapping)
        and not schema.get("patternProperties")
        and isinstance(instance, c.Mapping)
    ):
        properties = schema.get("properties")
        known = [str(key) for key in properties] if isinstance(properties, c.Mapping) else []
        extras = sorted((key for key in instance if key not in known), key=str)
        if extras:
            return unknown_properties(extras, known, nested=bool(error.absolute_path))
    return str(error.message)
