"""The JSON Schema of each Python type a parameter (or a field) is annotated with.

Types map to JSON Schema (Draft 2020-12) as a user of the function would expect:
``str``/``bytes`` → string, ``int`` → integer, ``float`` → number, ``bool`` →
boolean, ``None`` → null, lists, sets and sequences → arrays (sets with
``uniqueItems``), tuples and ``NamedTuple`` → arrays with ``prefixItems`` (or
``items`` for ``tuple[X, ...]``), ``dict[K, X]``/``Mapping`` → objects (keys
described by ``propertyNames`` when K is not ``str``), unions → ``anyOf``,
``Literal`` and ``Enum`` → ``enum``, attrs classes, dataclasses and TypedDicts →
nested objects, pydantic models and types → pydantic's own schema (its ``$defs``
moved to the root). Strings with a ``format``: ``datetime`` (date-time), ``date``,
``time``, ``timedelta`` (duration), ``UUID`` (uuid), ``IPv4Address``/``IPv6Address``,
``Path`` (path); ``Decimal`` is a string with a ``pattern``. ``Annotated[X, ...]``
adds a description (a string), ``annotated_types`` constraints and pydantic
``Field`` constraints, ``description``, ``examples`` and ``title``.
``Any``, ``object``, an unbound ``TypeVar`` or a missing annotation → ``{}`` (any
value). A class that refers to itself is expanded once; the inner reference is ``{}``.

Any other annotation (an arbitrary class, ``Callable``, a name that cannot be
resolved) raises ``TypeError`` naming the parameter and the type, unless the
parameter (or the nested field) has a default: then a warning is logged and it is
left out of the schema.
"""

from __future__ import annotations

import collections.abc as c
import contextlib
import enum
import functools
import inspect
import json
import sys
import types
import typing as t

import attrs

from nous_tools._util._log import log as _safe_log
from nous_tools._util._text import JSON_TYPES, json_type
from nous_tools.schema._annotations import describe_function, globals_of, resolve
from nous_tools.schema._docstrings import docstring, parameter_docs

_log = _safe_log

Schema = dict[str, t.Any]

_EMPTY = inspect.Parameter.empty


class _NoDefault:
    """The default of a field that is optional through a factory: not recorded."""


_NO_DEFAULT = _NoDefault()

#: TypedDict key qualifiers that say nothing about the value's type.
_KEY_QUALIFIERS = frozenset({"Required", "NotRequired", "ReadOnly"})


#: A decimal number written as a string (``"12.50"``, ``"-3"``, ``".5"``, ``"1e-3"``).
DECIMAL_PATTERN = r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$"

#: Classes written as a formatted string, most specific first (datetime is a date),
#: by module and name: a class can only be one of them (or a subclass) once its
#: module is imported, so telling does not import them (see :func:`string_format`).
_STRING_FORMATS: tuple[tuple[str, str, Schema], ...] = (
    ("datetime", "datetime", {"type": "string", "format": "date-time"}),
    ("datetime", "date", {"type": "string", "format": "date"}),
    ("datetime", "time", {"type": "string", "format": "time"}),
    ("datetime", "timedelta", {"type": "string", "format": "duration"}),
    ("uuid", "UUID", {"type": "string", "format": "uuid"}),
    ("decimal", "Decimal", {"type": "string", "pattern": DECIMAL_PATTERN}),
    ("pathlib", "PurePath", {"type": "string", "format": "path"}),
    ("ipaddress", "IPv4Address", {"type": "string", "format": "ipv4"}),
    ("ipaddress", "IPv6Address", {"type": "string", "format": "ipv6"}),
)


@functools.cache
def string_formats() -> tuple[tuple[type, Schema], ...]:
    """The classes written as a formatted string and their schemas, most specific
    first (imports their modules)."""
    import importlib

    return tuple(
        (getattr(importlib.import_module(module), name), schema)
        for module, name, schema in _STRING_FORMATS
    )


def string_format(cls: type) -> Schema | None:
    """The schema of a class written as a formatted string (``datetime``, ``UUID``,
    ``Decimal``, ``Path``...) or of a subclass of one; None for any other class.
    Imports none of their modules."""
    modules = sys.modules
    for module, name, schema in _STRING_FORMATS:
        loaded = modules.get(module)
        kind = getattr(loaded, name, None) if loaded is not None else None
        if kind is not None and issubclass(cls, kind):
            return schema
    return None


def is_dataclass(cls: type) -> bool:
    """``dataclasses.is_dataclass`` of a class, without importing ``dataclasses``
    (which a dataclass has imported)."""
    return hasattr(cls, "__dataclass_fields__")


#: ``annotated_types`` (and pydantic ``Field``) constraints → JSON Schema keywords.
_BOUNDS = {
    "ge": "minimum",
    "gt": "exclusiveMinimum",
    "le": "maximum",
    "lt": "exclusiveMaximum",
    "multiple_of": "multipleOf",
    "pattern": "pattern",
}
_LENGTHS = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}


class Undescribable(Exception):
    """An annotation (``annotation``) with no JSON Schema, found at ``path`` (field
    names, outermost first) inside the parameter being described."""

    def __init__(self, annotation: object, reason: str = "") -> None:
        super().__init__(annotation)
        self.annotation = annotation
        self.reason = reason
        self.path: list[str] = []


class Build:
    """What the description of one signature shares: the classes being expanded
    (``seen``), the ``$defs`` collected from pydantic models, and what parts of the
    schema came from elsewhere than nous_tools (``borrowed``: pydantic's schemas,
    ``Annotated`` constraints), whose validity is not ours to vouch for."""

    __slots__ = ("borrowed", "defs", "seen")

    def __init__(
        self, defs: dict[str, Schema], seen: tuple[type, ...] = (), borrowed: set[str] | None = None
    ) -> None:
        self.defs = defs
        self.seen = seen
        self.borrowed: set[str] = set() if borrowed is None else borrowed

    def entering(self, cls: type) -> Build:
        return Build(self.defs, (*self.seen, cls), self.borrowed)


def undescribable_message(fn: object, name: str, error: Undescribable) -> str:
    where = f"parameter {name!r}"
    if error.path:
        where += f" (field {'.'.join(error.path)})"
    reason = f": {error.reason}" if error.reason else ""
    return (
        f"{describe_function(fn)} {where} has a type that cannot be described as JSON Schema, "
        f"{_type_name(error.annotation)}{reason}; annotate it with a supported type, or give "
        f"the parameter a default to leave it out of the schema, or pass parameters= by hand"
    )


def _type_name(annotation: object) -> str:
    if isinstance(annotation, type):
        return f"{annotation.__module__}.{annotation.__qualname__}"
    if isinstance(annotation, str):
        return repr(annotation)
    return str(annotation)


def property_schema(
    annotation: object, *, description: str | None, default: object, build: Build
) -> Schema:
    """The schema of one parameter or field: its type, description and default."""
    schema = type_schema(annotation, build)
    if description and "description" not in schema:
        schema["description"] = description
    if default is not _EMPTY:
        serialisable, value = _json_value(default)
        if serialisable:
            schema["default"] = value
    return schema


def type_schema(annotation: object, build: Build) -> Schema:
    """A fresh JSON Schema for ``annotation``; raises ``Undescribable`` when it has none."""
    if annotation is _EMPTY or annotation is t.Any or annotation is object:
        return {}
    if isinstance(annotation, (str, t.ForwardRef)):
        raise Undescribable(annotation, "the annotation cannot be resolved")
    if isinstance(annotation, t.TypeVar):
        if annotation.__bound__ is not None:
            return type_schema(annotation.__bound__, build)
        if annotation.__constraints__:
            return {"anyOf": [type_schema(arg, build) for arg in annotation.__constraints__]}
        return {}
    if annotation is None or annotation is type(None):
        return {"type": "null"}
    origin = t.get_origin(annotation)
    args = t.get_args(annotation)
    if origin is t.Annotated:
        if is_pydantic_type(args[0]):  # pydantic reads its own metadata
            return _pydantic_schema(annotation, build)
        schema = type_schema(args[0], build)
        metadata = annotation.__metadata__  # type: ignore[attr-defined]
        if any(not isinstance(note, str) for note in metadata):  # more than a description
            build.borrowed.add("Annotated")
        _apply_metadata(schema, metadata)
        return schema
    if origin is t.Literal:
        return _enum_schema([literal_value(value) for value in args])
    if origin is t.Union or origin is types.UnionType:
        return {"anyOf": [type_schema(arg, build) for arg in args]}
    if hasattr(annotation, "__supertype__"):  # typing.NewType
        return type_schema(annotation.__supertype__, build)
    cls = origin if origin is not None else annotation
    if not isinstance(cls, type):
        raise Undescribable(annotation)
    return _class_schema(cls, annotation, args, build)


def _class_schema(cls: type, annotation: object, args: tuple[t.Any, ...], build: Build) -> Schema:
    if issubclass(cls, enum.Enum):
        return _enum_schema([enum_member_value(member) for member in cls])
    if issubclass(cls, bool):
        return {"type": "boolean"}
    if issubclass(cls, int):
        return {"type": "integer"}
    if issubclass(cls, float):
        return {"type": "number"}
    if issubclass(cls, (str, bytes)):
        return {"type": "string"}
    formatted = string_format(cls)
    if formatted is not None:
        return dict(formatted)
    if is_pydantic_type(cls):
        return _pydantic_schema(annotation, build)
    if is_typeddict(cls) or attrs.has(cls) or is_dataclass(cls):
        if cls in build.seen:
            return {}
        return _object_schema(cls, build.entering(cls))
    if issubclass(cls, tuple):
        if is_namedtuple(cls):
            return _namedtuple_schema(cls, build)
        return _tuple_schema(annotation, args, build)
    if issubclass(cls, c.Mapping):
        schema: Schema = {"type": "object"}
        if len(args) == 2:
            keys = _key_schema(args[0], build)
            if keys:
                schema["propertyNames"] = keys
            values = type_schema(args[1], build)
            if values:
                schema["additionalProperties"] = values
        return schema
    if issubclass(cls, (c.Set, c.Sequence)) or cls in (c.Iterable, c.Collection):
        schema = {"type": "array"}
        items = type_schema(args[0], build) if len(args) == 1 else {}
        if items:
            schema["items"] = items
        if issubclass(cls, c.Set):
            schema["uniqueItems"] = True
        return schema
    raise Undescribable(annotation)


def _key_schema(annotation: object, build: Build) -> Schema:
    """What the keys of an object must look like for ``dict[K, V]`` (JSON keys are
    strings): nothing for ``str``; a pattern for ``int``; otherwise K's schema when
    it describes strings."""
    if annotation is str or annotation is t.Any:
        return {}
    if (
        isinstance(annotation, type)
        and issubclass(annotation, int)
        and not issubclass(annotation, (bool, enum.Enum))
    ):
        return {"pattern": r"^-?\d+$"}
    schema = type_schema(annotation, build)
    if schema.get("type") == "string":
        return schema
    if "enum" in schema:
        return {"enum": [str(value) for value in schema["enum"]]}
    return {}


def _tuple_schema(annotation: object, args: tuple[t.Any, ...], build: Build) -> Schema:
    if not args:
        # ``tuple`` and ``typing.Tuple`` are any tuple; ``tuple[()]`` is the empty one.
        bare = annotation is t.Tuple  # noqa: UP006 -- the typing alias itself, not a hint
        if bare or t.get_origin(annotation) is None:
            return {"type": "array"}
        return {"type": "array", "maxItems": 0}
    if len(args) == 2 and args[1] is Ellipsis:
        schema: Schema = {"type": "array"}
        items = type_schema(args[0], build)
        if items:
            schema["items"] = items
        return schema
    return {
        "type": "array",
        "prefixItems": [type_schema(arg, build) for arg in args],
        "minItems": len(args),
        "maxItems": len(args),
    }


def _namedtuple_schema(cls: type, build: Build) -> Schema:
    """A ``NamedTuple`` is an array of its fields in order, as pydantic writes it;
    fields with defaults may be left off the end."""
    if cls in build.seen:
        return {}
    inner = build.entering(cls)
    fields = class_fields(cls)
    items = [_field_schema(cls, name, hint, default, None, inner) for name, hint, default in fields]
    required = sum(1 for _, _, default in fields if default is _EMPTY)
    return {
        "type": "array",
        "prefixItems": [item if item is not None else {} for item in items],
        "minItems": required,
        "maxItems": len(fields),
    }


def _object_schema(cls: type, build: Build) -> Schema:
    """A nested object for an attrs class, a dataclass or a TypedDict."""
    docs = parameter_docs(docstring(cls))
    properties: dict[str, Schema] = {}
    required: list[str] = []
    for name, annotation, default in class_fields(cls):
        schema = _field_schema(cls, name, annotation, default, docs.get(name), build)
        if schema is None:
            continue
        properties[name] = schema
        if default is _EMPTY:
            required.append(name)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _field_schema(
    cls: type,
    name: str,
    annotation: object,
    default: object,
    description: str | None,
    build: Build,
) -> Schema | None:
    """The schema of one field of ``cls``; None for a field with a default whose type
    cannot be described (a warning says so), ``Undescribable`` for a required one."""
    try:
        return property_schema(annotation, description=description, default=default, build=build)
    except Undescribable as error:
        error.path.insert(0, f"{cls.__qualname__}.{name}")
        if default is _EMPTY:
            raise
        _log.warning(
            "Field %s has a type that cannot be described as JSON Schema (%s); it is left "
            "out of the schema and keeps its default",
            ".".join(error.path),
            _type_name(error.annotation),
        )
        return None


def is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields") and hasattr(cls, "_field_defaults")


def is_sequence_kind(cls: type) -> bool:
    """A class argument conversion treats as a sequence (not text, bytes or a tuple)."""
    return cls in (c.Iterable, c.Collection) or (
        issubclass(cls, (c.Sequence, c.Set))
        and not issubclass(cls, (str, bytes, bytearray, tuple, memoryview, range))
    )


def is_pydantic_type(annotation: object) -> bool:
    """A class pydantic knows how to validate (a ``BaseModel``, a pydantic dataclass,
    ``AnyUrl``...). Tells without importing pydantic."""
    return isinstance(annotation, type) and (
        hasattr(annotation, "__pydantic_core_schema__")
        or hasattr(annotation, "__get_pydantic_core_schema__")
    )


def _pydantic_schema(annotation: object, build: Build) -> Schema:
    """pydantic's own JSON Schema for ``annotation``, its ``$defs`` moved to the root
    of the parameters schema (renamed where two different ones share a name)."""
    build.borrowed.add("pydantic")
    try:
        from pydantic import TypeAdapter

        adapter: TypeAdapter[t.Any] = TypeAdapter(t.cast(t.Any, annotation))
        schema: Schema = adapter.json_schema(ref_template="#/$defs/{model}")
    except Exception as exc:
        raise Undescribable(annotation, f"pydantic: {exc}") from None
    defs: dict[str, Schema] = schema.pop("$defs", {})
    renames: dict[str, str] = {}
    for name, definition in defs.items():
        new = name
        number = 1
        while new in build.defs and build.defs[new] != definition:
            number += 1
            new = f"{name}_{number}"
        renames[name] = new
    if any(old != new for old, new in renames.items()):
        schema = t.cast(Schema, _renamed_refs(schema, renames))
        defs = {old: t.cast(Schema, _renamed_refs(d, renames)) for old, d in defs.items()}
    for old, definition in defs.items():
        build.defs.setdefault(renames[old], definition)
    return schema


def _renamed_refs(node: object, renames: dict[str, str]) -> object:
    if isinstance(node, dict):
        copied = {key: _renamed_refs(value, renames) for key, value in node.items()}
        ref = copied.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            copied["$ref"] = "#/$defs/" + renames.get(ref[8:], ref[8:])
        return copied
    if isinstance(node, list):
        return [_renamed_refs(item, renames) for item in node]
    return node


def _apply_metadata(schema: Schema, metadata: c.Iterable[object]) -> None:
    """``Annotated[X, ...]`` extras: a string is a description; ``annotated_types``
    constraints (``Ge(0)``, ``Len(1, 5)``, ``Interval(...)``) and pydantic ``Field``
    (its constraints, ``description``, ``examples``, ``title``) become keywords.
    Anything else is left alone."""
    for note in metadata:
        if isinstance(note, str):
            schema["description"] = note
            continue
        if getattr(note, "__is_annotated_types_grouped_metadata__", False) and not _is_field(note):
            _apply_metadata(schema, t.cast("c.Iterable[object]", note))
            continue
        if _is_field(note):
            _apply_metadata(schema, getattr(note, "metadata", ()) or ())
            for key in ("title", "description"):
                value = getattr(note, key, None)
                if isinstance(value, str):
                    schema[key] = value
            examples = getattr(note, "examples", None)
            if isinstance(examples, (list, tuple)):
                schema["examples"] = [_json_value(example)[1] for example in examples]
            continue
        for attribute, keyword in _BOUNDS.items():
            value = getattr(note, attribute, None)
            if value is not None and keyword == "pattern":
                schema[keyword] = value if isinstance(value, str) else value.pattern
            elif value is not None:
                schema[keyword] = _json_value(value)[1]
        lengths = _LENGTHS.get(schema.get("type", ""))
        for index, attribute in enumerate(("min_length", "max_length")):
            value = getattr(note, attribute, None)
            if value is not None and lengths is not None:
                schema[lengths[index]] = value


def _is_field(note: object) -> bool:
    """A pydantic ``FieldInfo`` (what ``pydantic.Field(...)`` returns)."""
    return type(note).__name__ == "FieldInfo" and hasattr(note, "json_schema_extra")


def class_fields(cls: type) -> list[tuple[str, t.Any, object]]:
    """``(key, annotation, default)`` per field; the default is ``_EMPTY`` when required
    and ``_NO_DEFAULT`` when the field is optional through a factory."""
    if is_typeddict(cls):
        hints = _class_hints(cls)
        required_keys = getattr(cls, "__required_keys__", frozenset(hints))
        keys: list[tuple[str, t.Any, object]] = []
        for key, hint in hints.items():
            required, value_hint = _key_qualifiers(hint, required=key in required_keys)
            keys.append((key, value_hint, _EMPTY if required else _NO_DEFAULT))
        return keys
    if attrs.has(cls):
        with contextlib.suppress(Exception):  # unresolvable: resolved one by one below
            attrs.resolve_types(cls)
        namespace = globals_of(cls)
        result: list[tuple[str, t.Any, object]] = []
        for field in attrs.fields(cls):
            if not field.init:
                continue
            annotation = resolve(field.type, namespace) if field.type is not None else _EMPTY
            if field.default is attrs.NOTHING:
                default: object = _EMPTY
            elif isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
                default = _NO_DEFAULT
            else:
                default = field.default
            result.append((field.alias or field.name, annotation, default))
        return result
    if is_namedtuple(cls):
        hints = _class_hints(cls)
        defaults: dict[str, object] = getattr(cls, "_field_defaults", {})
        return [
            (name, hints.get(name, _EMPTY), defaults.get(name, _EMPTY))
            for name in getattr(cls, "_fields", ())
        ]
    if is_dataclass(cls):
        import dataclasses  # imported already: cls is a dataclass

        hints = _class_hints(cls)
        result = []
        for data_field in dataclasses.fields(cls):
            if not data_field.init:
                continue
            if data_field.default is not dataclasses.MISSING:
                default = data_field.default
            elif data_field.default_factory is not dataclasses.MISSING:
                default = _NO_DEFAULT
            else:
                default = _EMPTY
            result.append((data_field.name, hints.get(data_field.name, data_field.type), default))
        return result
    return []


def _class_hints(cls: type) -> dict[str, t.Any]:
    try:
        return dict(t.get_type_hints(cls, include_extras=True))
    except Exception:  # resolve what can be resolved, class by class
        pass
    hints: dict[str, t.Any] = {}
    for klass in reversed(cls.__mro__):
        namespace = {**globals_of(klass), **vars(klass)}
        for name, annotation in dict(vars(klass).get("__annotations__", {})).items():
            hints[name] = resolve(annotation, namespace)
    return hints


def is_typeddict(cls: type) -> bool:
    """``typing`` and ``typing_extensions`` TypedDicts alike."""
    return t.is_typeddict(cls) or (
        issubclass(cls, dict)
        and hasattr(cls, "__required_keys__")
        and hasattr(cls, "__optional_keys__")
    )


def _key_qualifiers(hint: t.Any, *, required: bool) -> tuple[bool, t.Any]:
    """Whether a TypedDict key is required, and its value's type without the qualifiers.

    ``Required``/``NotRequired`` are read from the hint itself, too: under
    ``from __future__ import annotations`` Python < 3.13 does not see them when it
    builds ``__required_keys__``.
    """
    while (qualifier := getattr(t.get_origin(hint), "_name", None)) in _KEY_QUALIFIERS:
        if qualifier == "Required":
            required = True
        elif qualifier == "NotRequired":
            required = False
        hint = t.get_args(hint)[0]
    return required, hint


# --------------------------------------------------------------------------- values


def _json_value(value: object) -> tuple[bool, t.Any]:
    """``(True, value as JSON data)`` when ``value`` can be written as JSON (as it is,
    or as argument conversion writes it: dates, sets, dataclasses...), else
    ``(False, None)``."""
    if isinstance(value, _NoDefault) or value is attrs.NOTHING:
        return False, None
    if isinstance(value, enum.Enum):
        value = enum_member_value(value)
    try:
        return True, json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, OverflowError, RecursionError):
        pass
    from nous_tools.schema._convert import unstructure  # a cycle: _convert reads annotations here

    try:
        plain = unstructure(value)
        if plain is value:
            return False, None
        return True, json.loads(json.dumps(plain, allow_nan=False))
    except Exception:  # anything unstructuring or JSON cannot do: not recorded
        return False, None


def enum_member_value(member: enum.Enum) -> t.Any:
    """The member's value when every value of its enum is JSON data, else its name."""
    values = [_json_value(other.value) for other in type(member)]
    if all(ok for ok, _ in values):
        return _json_value(member.value)[1]
    return member.name


def literal_value(value: object) -> t.Any:
    if isinstance(value, enum.Enum):
        return enum_member_value(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _enum_schema(values: list[t.Any]) -> Schema:
    kinds = {json_type(value) for value in values}
    if len(kinds) == 1 and kinds <= JSON_TYPES:
        return {"type": kinds.pop(), "enum": values}
    return {"enum": values}
