"""The error path of validation: jsonschema-rs's errors about a set of arguments
in Nous's words (see :mod:`nous_tools.schema._validation` for the wording), and
the JSON view of arguments holding values JSON cannot carry (``NaN``, an object
of your own) that those errors are found with.
"""

from __future__ import annotations

import collections.abc as c
import functools
import math
import typing as t

import attrs

from nous_tools._util._text import json_type as _json_type
from nous_tools._util._wording import unknown_properties
from nous_tools.schema._patterns import BACKTRACK_LIMIT
from nous_tools.schema._schema_walk import schema_at

#: Longest text kept from one message (or one path) in a failure message.
_MAX_TEXT = 200
#: Most violations of one kind spelt out in a failure message; ``original_error``
#: keeps them all.
MAX_LISTED = 50


#: Where a copy of arguments with values JSON cannot carry stops (see ``json_view``).
_VIEW_DEPTH = 128

TOO_DEEP = "arguments nested too deeply to validate"


_SCALARS = (str, int, float, bool, type(None))


class Opaque:
    """A place in the arguments that a JSON view could not copy."""

    __slots__ = ("path", "too_deep", "value")

    def __init__(self, path: tuple[str | int, ...], value: object, too_deep: bool) -> None:
        self.path, self.value, self.too_deep = path, value, too_deep


def json_view(arguments: object) -> tuple[object, list[Opaque]]:
    """A copy of ``arguments`` that jsonschema-rs can read, and the places it could
    not copy: every mapping a dict with string keys, every tuple a list, and in
    place of a value JSON cannot carry (or of one nested deeper than
    ``_VIEW_DEPTH``), None, to be replaced by :func:`with_placeholder`."""
    opaque: list[Opaque] = []
    root: list[object] = [None]
    # (value, where to put its copy (container, key), path)
    stack: list[tuple[object, t.Any, t.Any, tuple[str | int, ...]]] = [(arguments, root, 0, ())]
    while stack:
        value, into, slot, path = stack.pop()
        if isinstance(value, (c.Mapping, list, tuple)):
            if len(path) >= _VIEW_DEPTH:
                opaque.append(Opaque(path, value, True))
                continue
            if isinstance(value, c.Mapping):
                copy: dict[str, object] = {}
                into[slot] = copy
                for key, item in value.items():
                    name = key if isinstance(key, str) else str(key)
                    copy[name] = None
                    stack.append((item, copy, name, (*path, name)))
            else:
                items: list[object] = [None] * len(value)
                into[slot] = items
                stack.extend((item, items, i, (*path, i)) for i, item in enumerate(value))
        elif type(value) in _SCALARS and not (type(value) is float and not math.isfinite(value)):
            into[slot] = value
        elif isinstance(value, str):  # a subclass: the text itself, not its __str__
            into[slot] = str.__str__(value)
        elif isinstance(value, int):  # an IntEnum, say: the number itself
            into[slot] = int.__int__(value)
        elif isinstance(value, float) and math.isfinite(value):
            into[slot] = float.__float__(value)
        else:
            opaque.append(Opaque(path, value, False))
    return root[0], opaque


#: What stands in a view for a value JSON cannot carry, one kind after the other:
#: the value is valid only where all three are (only where any value is).
PLACEHOLDERS: tuple[object, ...] = (
    "\x00nous-tools: a value JSON cannot carry\x00",
    {"\x00nous-tools": "a value JSON cannot carry"},
    -1.0e308,
)


def with_placeholder(view: object, opaque: list[Opaque], placeholder: object) -> object:
    for place in opaque:
        if not place.path:
            return placeholder
        node: t.Any = view
        for step in place.path[:-1]:
            node = node[step]
        node[place.path[-1]] = placeholder
    return view


def locate(arguments: object, path: c.Sequence[str | int]) -> tuple[str, object]:
    """The text of ``path`` (``filter.min``, ``tags[1]``, ``(root)``) and the value
    there in ``arguments`` (``_ABSENT`` when there is none). A step is an array
    index where the value it steps into is an array, else an object key (which
    jsonschema-rs may give as an ``int`` when it looks like one)."""
    text = ""
    node: t.Any = arguments
    for step in path:
        kind = type(node)
        if type(step) is int and (kind is list or kind is tuple or isinstance(node, (list, tuple))):
            text += f"[{step}]"
            node = node[step] if -len(node) <= step < len(node) else _ABSENT
            continue
        text += f".{step}" if text else str(step)
        if kind is dict and type(step) is str:
            node = node.get(step, _ABSENT)
        elif isinstance(node, c.Mapping):
            try:
                node = node[step] if step in node else _by_text(node, str(step))
            except Exception:
                node = _ABSENT
        else:
            node = _ABSENT
    return text or "(root)", node


def _path_text(arguments: object, path: c.Sequence[str | int]) -> str:
    """The text of ``path`` (as :func:`locate` gives it, without walking the
    arguments when no step could be an array index)."""
    for step in path:
        if type(step) is int:
            return locate(arguments, path)[0]
    return ".".join(t.cast("c.Sequence[str]", path)) or "(root)"


class NotJson(Exception):
    """An error of jsonschema-rs about a value it read as something else (``NaN``
    reads as ``null``): the arguments are explained through a JSON view instead."""


def _by_text(mapping: c.Mapping[t.Any, t.Any], key: str) -> object:
    """The value whose key reads as ``key`` (a key that is not a string reads as its
    ``str()``), or ``_ABSENT``."""
    return next((value for name, value in mapping.items() if str(name) == key), _ABSENT)


class _Absent:
    """The class of the marker for a missing value."""


_ABSENT = _Absent()


def _actual(value: object) -> str:
    """The JSON type name of ``value`` for a message (``NaN`` and the infinities by
    name: they are numbers to Python, not to JSON)."""
    if type(value) is float and not math.isfinite(value):
        return str(value).replace("nan", "NaN").replace("inf", "Infinity")
    return _json_type(value)


@attrs.frozen
class ValidationFailure:
    """Everything wrong with a set of arguments.

    ``message`` is what follows ``"Invalid arguments for 'NAME': "`` (the executor
    adds that prefix). ``original_error`` is the first kind of violation present,
    in the order ``("missing_required", [name, ...])``, ``("type_mismatch",
    [(path, expected, actual), ...])``, ``("invalid", [(path, message), ...])``;
    it lists every violation of that kind, even when ``message`` is shortened.
    """

    message: str
    original_error: tuple[str, list[t.Any]]


def opaque_at(opaque: list[Opaque], path: c.Sequence[str | int]) -> Opaque | None:
    """The place of ``opaque`` at ``path`` or above it (steps compared as text: an
    object key may come back from jsonschema-rs as an ``int``)."""
    steps = [str(step) for step in path]
    for place in opaque:
        if len(place.path) <= len(steps) and all(
            str(a) == b for a, b in zip(place.path, steps, strict=False)
        ):
            return place
    return None


def failure_at_root(text: str) -> ValidationFailure:
    return ValidationFailure(f"Invalid values: (root): {text}", ("invalid", [("(root)", text)]))


def shorten(text: str, limit: int = _MAX_TEXT) -> str:
    """``text`` cut in the middle to at most ``limit`` characters: a message puts
    the (possibly huge) value first and what is wrong with it last."""
    if len(text) <= limit:
        return text
    tail = (limit - 3) // 3
    return text[: limit - 3 - tail] + "..." + text[len(text) - tail :]


def format_path(parts: c.Iterable[object]) -> str:
    """``filter.min``, ``tags[1]``, ``items[0].id``; ``(root)`` for no parts. An
    ``int`` is an array index (object keys are always strings here)."""
    text = ""
    for part in parts:
        if type(part) is int:
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(root)"


def sort_key(path: c.Sequence[object]) -> tuple[tuple[int, int, str], ...]:
    return tuple([(0, part, "") if type(part) is int else (1, 0, str(part)) for part in path])


def _listed(entries: list[str]) -> str:
    shown = ", ".join(entries[:MAX_LISTED])
    if len(entries) > MAX_LISTED:
        shown += f", ... and {len(entries) - MAX_LISTED} more"
    return shown


@functools.cache
def _kinds() -> tuple[t.Any, ...]:
    """The jsonschema-rs error kinds :func:`describe` tells apart (looked up with the
    first errors: jsonschema-rs is not imported with the package)."""
    import jsonschema_rs

    kind = jsonschema_rs.ValidationErrorKind
    return (
        kind.Required,
        kind.Type,
        kind.Format,
        kind.BacktrackLimitExceeded,
        kind.FalseSchema,
        kind.AdditionalProperties,
        kind.Enum,
        kind.Constant,
    )


def describe(
    arguments: object, errors: list[t.Any], schema: dict[str, t.Any], opaque: list[Opaque]
) -> ValidationFailure:
    """jsonschema-rs's errors in Nous's words (see the module's notes)."""
    required_kind, type_kind, format_kind = _kinds()[:3]
    missing: list[str] = []
    mismatches: list[tuple[str, str, str]] = []
    invalid: list[tuple[str, str]] = []
    seen: set[object] = set()  # a violation can be found once per failing subschema
    located = [(error.instance_path, error) for error in errors]
    if len(located) > 1:
        located.sort(key=lambda pair: sort_key(pair[0]))
    for path, error in located:
        kind = error.kind
        kind_type = type(kind)
        place = opaque_at(opaque, path) if opaque else None
        if place is not None:  # a value JSON cannot carry, where one was not accepted
            expected = "a JSON value"
            if kind_type is type_kind and len(path) == len(place.path):
                expected = " or ".join(_expected_types(kind, error, schema))
            mismatch = (
                shorten(_path_text(arguments, place.path)),
                expected,
                _actual(place.value),
            )
            if mismatch not in seen:
                seen.add(mismatch)
                mismatches.append(mismatch)
            continue
        if kind_type is required_kind:
            where = _path_text(arguments, path)
            name = str(kind.property)
            full = shorten(name if not path else f"{where}.{name}")
            if ("m", full) not in seen:
                seen.add(("m", full))
                missing.append(full)
        elif kind_type is type_kind or kind_type is format_kind:
            # A string that is not a date-time is the wrong type of value for the
            # tool, worded as conversion words it: "expected date-time, got string".
            where, value = locate(arguments, path)
            if type(value) is float and not math.isfinite(value):
                raise NotJson
            if kind_type is type_kind:
                expected = " or ".join(_expected_types(kind, error, schema))
            else:
                expected = str(kind.format)
            mismatch = (shorten(where), expected, _actual(value))
            if mismatch not in seen:
                seen.add(mismatch)
                mismatches.append(mismatch)
        else:
            violation = _violation(arguments, path, error, kind_type, schema)
            if violation not in seen:
                seen.add(violation)
                invalid.append(violation)
    message, original = failure_message(missing, mismatches, invalid)
    return ValidationFailure(message, original)


def _violation(
    arguments: object,
    path: c.Sequence[str | int],
    error: t.Any,
    kind_type: type[t.Any],
    schema: dict[str, t.Any],
) -> tuple[str, str]:
    """``(path, message)`` for an error that is neither a missing field nor a type
    mismatch: a pattern too costly to match, unknown keys, or jsonschema-rs's own
    message."""
    backtracked_kind, false_kind, additional_kind, enum_kind, const_kind = _kinds()[3:]
    if kind_type is backtracked_kind:
        where, value = locate(arguments, path)
        text = (
            f"{shorten(repr(value), 60)} could not be matched within "
            f"{BACKTRACK_LIMIT} backtracking steps"
        )
    elif kind_type is additional_kind or (
        kind_type is false_kind and error.schema_path[-1:] == ["additionalProperties"]
    ):
        where, value = locate(arguments, path)
        node = schema_at(schema, error.schema_path[:-1])
        text = _unknown_keys(value, node, path) or shorten(error.message)
    else:
        if kind_type is enum_kind or kind_type is const_kind:
            where, value = locate(arguments, path)
            if type(value) is float and not math.isfinite(value):
                raise NotJson
        else:
            where = _path_text(arguments, path)
        text = shorten(error.message)
    return (shorten(where), text)


def _unknown_keys(value: object, node: object, path: c.Sequence[object]) -> str | None:
    """``unknown argument 'nme' (expected: name)`` (see ``_wording``): every key of
    ``value`` that the ``properties`` of ``node`` (the schema that says
    ``additionalProperties: false``) do not name; None where ``patternProperties``
    could have taken a key (jsonschema-rs's words then). jsonschema-rs itself
    reports only the first such key when the schema names no properties."""
    if not isinstance(value, c.Mapping) or not isinstance(node, dict):
        return None
    if node.get("patternProperties"):
        return None
    properties = node.get("properties")
    known = [str(key) for key in properties] if isinstance(properties, dict) else []
    extras = sorted((key for key in value if str(key) not in known), key=str)
    if not extras:
        return None
    return shorten(unknown_properties(extras, known, nested=bool(path)))


def _expected_types(kind: t.Any, error: t.Any, schema: dict[str, t.Any]) -> list[str]:
    """The types a ``type`` error names, in the order the schema writes them."""
    types = [str(name) for name in kind.types]
    if len(types) > 1:
        written = schema_at(schema, error.schema_path)
        if isinstance(written, list) and sorted(map(str, written)) == sorted(types):
            return [str(name) for name in written]
    return types


def failure_message(
    missing: list[str], mismatches: list[tuple[str, str, str]], invalid: list[tuple[str, str]]
) -> tuple[str, tuple[str, list[t.Any]]]:
    """The message and ``original_error`` of a failure with these violations (at
    least one): missing fields, then ``(path, expected, actual)`` type mismatches,
    then ``(path, message)`` invalid values. Argument conversion words its failures
    with this too."""
    parts: list[str] = []
    kinds: list[tuple[str, list[t.Any]]] = []
    if missing:
        parts.append("Missing required fields: " + _listed(missing))
        kinds.append(("missing_required", missing))
    if mismatches:
        entries = [f"{p}: expected {e}, got {a}" for p, e, a in mismatches]
        parts.append("Type mismatch: " + _listed(entries))
        kinds.append(("type_mismatch", mismatches))
    if invalid:
        parts.append("Invalid values: " + _listed([f"{p}: {m}" for p, m in invalid]))
        kinds.append(("invalid", invalid))
    return "; ".join(parts), kinds[0]
