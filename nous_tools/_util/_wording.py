"""How one JSON Schema violation reads in a validation failure (private).

jsonschema-rs's own messages are kept, except where they read unlike the rest of
the failure: an argument the schema does not know is ``unknown argument 'nme'
(expected: name)``, not ``Additional properties are not allowed ('nme' was
unexpected)``. The one place that wording lives (``validation`` words its
violations with it).

>>> unknown_properties(["nme"], ["name"], nested=False)
"unknown argument 'nme' (expected: name)"
>>> unknown_properties(["x", "y"], ["min", "max"], nested=True)
"unknown fields 'x', 'y' (expected: min, max)"
>>> unknown_properties(["q"], [], nested=False)
"unknown argument 'q' (this tool takes no arguments)"
"""

from __future__ import annotations

import collections.abc as c

__all__ = ["unknown_properties"]

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
