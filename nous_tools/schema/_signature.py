"""JSON Schemas, descriptions and ``takes_ctx`` detection from a function's signature.

This is the private machinery behind :meth:`Tool.from_function`. Everything here
reads a function; nothing calls it.

>>> def search(ctx: RunContext[None], query: str, limit: int = 10) -> list[str]:
...     '''Search the index.
...
...     Args:
...         query: What to look for.
...     '''
...     return []
>>> detect_takes_ctx(search)
True
>>> description_from_docstring(search)
'Search the index.'
>>> schema = parameters_schema(search, takes_ctx=True)
>>> schema["properties"]
{'query': {'type': 'string', 'description': 'What to look for.'}, 'limit': {'type': 'integer', 'default': 10}}
>>> schema["required"], schema["additionalProperties"]
(['query'], False)

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
import dataclasses
import datetime
import decimal
import enum
import functools
import inspect
import ipaddress
import json
import pathlib
import re
import sys
import types
import typing as t
import uuid
import weakref

import attrs

from nous_tools._util._log import log as _safe_log
from nous_tools._util._text import JSON_TYPES, json_type
from nous_tools.run_context import RunContext

__all__ = ["description_from_docstring", "detect_takes_ctx", "parameters_schema"]

_log = _safe_log

Schema = dict[str, t.Any]

_EMPTY = inspect.Parameter.empty
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

#: ``RunContext``, ``RunContext[Deps]``, ``nous_tools.RunContext[...]`` as an unresolved string.
_RUN_CONTEXT_STRING = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*RunContext\s*(?:\[.*\])?\s*$", re.DOTALL)


class _NoDefault:
    """The default of a field that is optional through a factory: not recorded."""


_NO_DEFAULT = _NoDefault()

#: TypedDict key qualifiers that say nothing about the value's type.
_KEY_QUALIFIERS = frozenset({"Required", "NotRequired", "ReadOnly"})


# --------------------------------------------------------------------------- public


def detect_takes_ctx(fn: c.Callable[..., t.Any]) -> bool:
    """True when ``fn``'s first positional parameter is named ``ctx`` or annotated
    :class:`RunContext` (bare, parametrised, or as a string annotation).

    Never raises: a callable without a signature (some builtins) gives False.
    """
    try:
        signature = signature_of(fn)
    except (TypeError, ValueError):
        return False
    first = next(iter(signature.parameters.values()), None)
    if first is None or first.kind not in _POSITIONAL:
        return False
    if first.name == "ctx":
        return True
    annotation = _annotations(fn).get(first.name, first.annotation)
    return _is_run_context(annotation)


def description_from_docstring(fn: c.Callable[..., t.Any]) -> str:
    """The first paragraph of ``fn``'s docstring, its lines joined by single spaces.

    The paragraph also ends where an argument section starts (``Args:``, a NumPy
    ``Parameters`` header, ``:param ...:``). ``""`` when there is no docstring.
    """
    lines = _docstring(fn).splitlines()
    paragraph: list[str] = []
    for index, line in enumerate(lines):
        if not line.strip() or _starts_section(lines, index):
            break
        paragraph.append(line.strip())
    return " ".join(paragraph)


def parameters_schema(fn: c.Callable[..., t.Any], *, takes_ctx: bool) -> dict[str, t.Any]:
    """A JSON Schema (Draft 2020-12) of the keyword arguments ``fn`` accepts.

    With ``takes_ctx`` the first positional parameter (the :class:`RunContext`) is
    left out. ``*args`` is left out; ``**kwargs: T`` makes ``additionalProperties``
    T's schema (open for a bare ``**kwargs`` or ``Any``), otherwise it is False. A
    parameter with a default is optional, and the default is recorded when it can be
    written as JSON (dates, enums, dataclasses and the like as conversion writes them). Descriptions come from
    ``Annotated[X, "text"]`` first, then the docstring's Google (``Args:``), NumPy
    (``Parameters``) or Sphinx (``:param name:``) argument section.

    A callable without a signature gives an open object schema. Raises
    :class:`TypeError` for a positional-only parameter (tools are called with keyword
    arguments), when ``takes_ctx`` is true and no positional parameter can
    receive the context, or for a required parameter whose type has no JSON Schema
    (see the module's docstring).
    """
    try:
        signature = signature_of(fn)
    except (TypeError, ValueError):
        return {"type": "object", "properties": {}, "required": []}
    parameters = list(signature.parameters.values())
    if takes_ctx and parameters:
        first = parameters[0]
        if first.kind in _POSITIONAL:
            parameters = parameters[1:]
        elif first.kind is not inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(
                f"{_describe(fn)} takes a RunContext (takes_ctx=True) but has no positional "
                f"parameter to receive it"
            )

    hints = _annotations(fn)
    docs = _parameter_docs(_docstring(fn))
    build = _Build({})
    properties: dict[str, Schema] = {}
    required: list[str] = []
    extra: Schema | bool = False
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"{_describe(fn)} has a positional-only parameter {parameter.name!r}; "
                f"tools are called with keyword arguments"
            )
        annotation = hints.get(parameter.name, parameter.annotation)
        keywords = parameter.kind is inspect.Parameter.VAR_KEYWORD
        try:
            if keywords:
                extra = _type_schema(annotation, build) or True
                continue
            properties[parameter.name] = _property_schema(
                annotation,
                description=docs.get(parameter.name),
                default=parameter.default,
                build=build,
            )
        except _Undescribable as error:
            if parameter.default is _EMPTY and not keywords:
                raise TypeError(_undescribable_message(fn, parameter.name, error)) from None
            _log.warning(
                "%s; it is left out of the schema",
                _undescribable_message(fn, parameter.name, error).split("; annotate")[0],
            )
            continue
        if parameter.default is _EMPTY:
            required.append(parameter.name)

    schema: Schema = {"type": "object", "properties": properties, "required": required}
    if extra is not True:
        schema["additionalProperties"] = extra
    if build.defs:
        schema["$defs"] = build.defs
    return schema


# --------------------------------------------------------------------------- annotations


def signature_of(fn: t.Callable[..., t.Any]) -> inspect.Signature:
    """``inspect.signature(fn)``, remembered for a plain function while its code,
    defaults and annotations stay the same (making a tool reads it more than once,
    and tools often share a function)."""
    if (
        not isinstance(fn, types.FunctionType)
        or "__wrapped__" in vars(fn)
        or "__signature__" in vars(fn)
    ):
        return inspect.signature(fn)
    marks = (fn.__code__, fn.__defaults__, fn.__kwdefaults__, fn.__annotations__)
    known = _SIGNATURES.get(fn)
    if known is not None and all(a is b for a, b in zip(known[0], marks, strict=True)):
        return known[1]
    signature = inspect.signature(fn)
    _SIGNATURES[fn] = (marks, signature)
    return signature


_SIGNATURES: weakref.WeakKeyDictionary[
    types.FunctionType, tuple[tuple[object, ...], inspect.Signature]
] = weakref.WeakKeyDictionary()


def _annotations(fn: object) -> dict[str, t.Any]:
    """Resolved annotations of the function behind ``fn``; unresolvable ones stay strings.

    Remembered per function (a tool per server tool, say, share one): a function's
    annotations are resolved once, unless some could not be resolved yet (a class
    defined later in its module), which are tried again next time."""
    target = _annotation_source(fn)
    try:
        known = _RESOLVED.get(target)
    except TypeError:  # not weakly referable, or unhashable
        known = None
    if known is not None and known[0] is getattr(target, "__annotations__", None):
        return dict(known[1])
    try:
        hints = dict(t.get_type_hints(target, include_extras=True))
    except Exception:  # any error in user annotations: fall back to resolving one by one
        pass
    else:
        if not any(isinstance(hint, (str, t.ForwardRef)) for hint in hints.values()):
            with contextlib.suppress(TypeError):
                _RESOLVED[target] = (getattr(target, "__annotations__", None), hints)
        return hints
    try:
        raw = dict(getattr(target, "__annotations__", None) or {})
    except Exception:
        return {}
    namespace = _globals_of(target)
    return {name: _resolve(annotation, namespace) for name, annotation in raw.items()}


#: Resolved annotations by function, with the ``__annotations__`` they came from.
_RESOLVED: weakref.WeakKeyDictionary[object, tuple[object, dict[str, t.Any]]] = (
    weakref.WeakKeyDictionary()
)


def _annotation_source(fn: object) -> object:
    """The object whose ``__annotations__`` describe ``fn``'s parameters."""
    target = _unwrap_partial(fn)
    if inspect.isclass(target):
        init = getattr(target, "__init__", None)
        if init is not None and init is not object.__init__:
            return init
        return getattr(target, "__new__", target)
    if inspect.isroutine(target):
        return target
    call = inspect.getattr_static(type(target), "__call__", None)
    return call if call is not None else target


def _unwrap_partial(fn: object) -> object:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _globals_of(target: object) -> dict[str, t.Any]:
    """The names ``target``'s string annotations may refer to: its module's globals,
    then its own ``__globals__`` (generated methods, e.g. attrs', have a private one)."""
    try:
        unwrapped = inspect.unwrap(target)  # type: ignore[arg-type]
    except ValueError:  # a __wrapped__ cycle
        unwrapped = target
    module = sys.modules.get(getattr(unwrapped, "__module__", None) or "")
    namespace = dict(vars(module)) if module is not None else {}
    own = getattr(unwrapped, "__globals__", None)
    if isinstance(own, dict):
        namespace.update(own)
    return namespace


def _resolve(annotation: object, namespace: dict[str, t.Any]) -> t.Any:
    """``annotation`` evaluated when it is a string and can be; else as it is."""
    if isinstance(annotation, t.ForwardRef):
        annotation = annotation.__forward_arg__
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, namespace)  # what typing.get_type_hints does, too
    except Exception:
        return annotation


def _is_run_context(annotation: object) -> bool:
    if isinstance(annotation, t.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        return _RUN_CONTEXT_STRING.match(annotation) is not None
    if t.get_origin(annotation) is t.Annotated:
        return _is_run_context(t.get_args(annotation)[0])
    origin = t.get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, RunContext)


def _describe(fn: object) -> str:
    target = _unwrap_partial(fn)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    return f"Tool function {name!r}" if isinstance(name, str) else f"Tool function {fn!r}"


# --------------------------------------------------------------------------- docstrings

_GOOGLE_HEADER = re.compile(
    r"^(?P<indent>\s*)(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments"
    r"|Other Parameters|Attributes)\s*:\s*$",
    re.IGNORECASE,
)
_GOOGLE_ENTRY = re.compile(
    r"^\*{0,2}(?P<name>[A-Za-z_]\w*)\s*(?:\(.*?\))?\s*:(?:\s+(?P<text>.*))?$"
)
_NUMPY_HEADER = re.compile(
    r"^(?P<indent>\s*)(?:Parameters|Other Parameters|Keyword Arguments|Attributes)\s*$",
    re.IGNORECASE,
)
_NUMPY_ANY_HEADER = re.compile(r"^\s*\w[\w ]*$")
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ENTRY = re.compile(
    r"^(?P<names>\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::.*)?$"
)
_SPHINX_FIELD = re.compile(
    r"^(?P<indent>\s*):(?:param|parameter|arg|argument|key|keyword|ivar)\s+"
    r"(?:[^:]*?\s+)?\*{0,2}(?P<name>[A-Za-z_]\w*)\s*:(?P<text>.*)$"
)
_ANY_FIELD = re.compile(r"^\s*:\w+")


def _docstring(fn: object) -> str:
    """The cleaned docstring of ``fn``: a class's own (not a base class's), a routine's
    (inherited from the method it overrides when it has none), or for a callable
    instance its class's, else its ``__call__``'s."""
    target = _unwrap_partial(fn)
    if inspect.isclass(target):
        doc = vars(target).get("__doc__")
    elif inspect.isroutine(target):
        doc = inspect.getdoc(target)
    else:
        doc = vars(type(target)).get("__doc__")
        call = inspect.getattr_static(type(target), "__call__", None)
        if not doc and call is not None:
            doc = inspect.getdoc(call)
    return inspect.cleandoc(doc) if isinstance(doc, str) else ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_numpy_header(lines: list[str], index: int, pattern: re.Pattern[str]) -> bool:
    return (
        pattern.match(lines[index]) is not None
        and index + 1 < len(lines)
        and _NUMPY_UNDERLINE.match(lines[index + 1]) is not None
    )


def _starts_section(lines: list[str], index: int) -> bool:
    line = lines[index]
    return (
        _GOOGLE_HEADER.match(line) is not None
        or _is_numpy_header(lines, index, _NUMPY_ANY_HEADER)
        or _ANY_FIELD.match(line) is not None
    )


def _parameter_docs(doc: str) -> dict[str, str]:
    """Per-parameter descriptions from Google, NumPy and Sphinx argument sections."""
    lines = doc.splitlines()
    found: dict[str, list[str]] = {}
    for parse in (_google_docs, _numpy_docs, _sphinx_docs):
        for name, parts in parse(lines).items():
            found.setdefault(name, parts)
    docs = {name: " ".join(part for part in parts if part) for name, parts in found.items()}
    return {name: text for name, text in docs.items() if text}


def _google_docs(lines: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    index = 0
    while index < len(lines):
        header = _GOOGLE_HEADER.match(lines[index])
        index += 1
        if header is None:
            continue
        header_indent = len(header["indent"])
        entry_indent: int | None = None
        current: list[str] | None = None
        while index < len(lines):
            line = lines[index]
            if line.strip():
                indent = _indent(line)
                if indent <= header_indent:
                    break
                if entry_indent is None:
                    entry_indent = indent
                if indent <= entry_indent:
                    entry = _GOOGLE_ENTRY.match(line.strip())
                    current = None
                    if entry is not None:
                        current = found.setdefault(entry["name"], [])
                        current.append(entry["text"] or "")
                elif current is not None:
                    current.append(line.strip())
            index += 1
    return found


def _numpy_docs(lines: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    index = 0
    while index < len(lines):
        if not _is_numpy_header(lines, index, _NUMPY_HEADER):
            index += 1
            continue
        header_indent = _indent(lines[index])
        index += 2
        current: list[list[str]] = []
        while index < len(lines):
            line = lines[index]
            if line.strip():
                if _indent(line) <= header_indent:
                    entry = _NUMPY_ENTRY.match(line.strip())
                    if entry is None or _is_numpy_header(lines, index, _NUMPY_ANY_HEADER):
                        break
                    names = [name.strip().lstrip("*") for name in entry["names"].split(",")]
                    current = [found.setdefault(name, []) for name in names]
                else:
                    for parts in current:
                        parts.append(line.strip())
            index += 1
    return found


def _sphinx_docs(lines: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    field_indent = 0
    for line in lines:
        field = _SPHINX_FIELD.match(line)
        if field is not None:
            current = found.setdefault(field["name"], [])
            current.append(field["text"].strip())
            field_indent = len(field["indent"])
        elif not line.strip():
            continue
        elif current is not None and _indent(line) > field_indent and not _ANY_FIELD.match(line):
            current.append(line.strip())
        else:
            current = None
    return found


# --------------------------------------------------------------------------- types

#: A decimal number written as a string (``"12.50"``, ``"-3"``, ``".5"``, ``"1e-3"``).
DECIMAL_PATTERN = r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$"

#: Classes written as a formatted string, most specific first (datetime is a date).
_STRING_FORMATS: tuple[tuple[type, Schema], ...] = (
    (datetime.datetime, {"type": "string", "format": "date-time"}),
    (datetime.date, {"type": "string", "format": "date"}),
    (datetime.time, {"type": "string", "format": "time"}),
    (datetime.timedelta, {"type": "string", "format": "duration"}),
    (uuid.UUID, {"type": "string", "format": "uuid"}),
    (decimal.Decimal, {"type": "string", "pattern": DECIMAL_PATTERN}),
    (pathlib.PurePath, {"type": "string", "format": "path"}),
    (ipaddress.IPv4Address, {"type": "string", "format": "ipv4"}),
    (ipaddress.IPv6Address, {"type": "string", "format": "ipv6"}),
)

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


class _Undescribable(Exception):
    """An annotation (``annotation``) with no JSON Schema, found at ``path`` (field
    names, outermost first) inside the parameter being described."""

    def __init__(self, annotation: object, reason: str = "") -> None:
        super().__init__(annotation)
        self.annotation = annotation
        self.reason = reason
        self.path: list[str] = []


class _Build:
    """What the description of one signature shares: the classes being expanded
    (``seen``) and the ``$defs`` collected from pydantic models."""

    __slots__ = ("defs", "seen")

    def __init__(self, defs: dict[str, Schema], seen: tuple[type, ...] = ()) -> None:
        self.defs = defs
        self.seen = seen

    def entering(self, cls: type) -> _Build:
        return _Build(self.defs, (*self.seen, cls))


def _undescribable_message(fn: object, name: str, error: _Undescribable) -> str:
    where = f"parameter {name!r}"
    if error.path:
        where += f" (field {'.'.join(error.path)})"
    reason = f": {error.reason}" if error.reason else ""
    return (
        f"{_describe(fn)} {where} has a type that cannot be described as JSON Schema, "
        f"{_type_name(error.annotation)}{reason}; annotate it with a supported type, or give "
        f"the parameter a default to leave it out of the schema, or pass parameters= by hand"
    )


def _type_name(annotation: object) -> str:
    if isinstance(annotation, type):
        return f"{annotation.__module__}.{annotation.__qualname__}"
    if isinstance(annotation, str):
        return repr(annotation)
    return str(annotation)


def _property_schema(
    annotation: object, *, description: str | None, default: object, build: _Build
) -> Schema:
    """The schema of one parameter or field: its type, description and default."""
    schema = _type_schema(annotation, build)
    if description and "description" not in schema:
        schema["description"] = description
    if default is not _EMPTY:
        serialisable, value = _json_value(default)
        if serialisable:
            schema["default"] = value
    return schema


def _type_schema(annotation: object, build: _Build) -> Schema:
    """A fresh JSON Schema for ``annotation``; raises ``_Undescribable`` when it has none."""
    if annotation is _EMPTY or annotation is t.Any or annotation is object:
        return {}
    if isinstance(annotation, (str, t.ForwardRef)):
        raise _Undescribable(annotation, "the annotation cannot be resolved")
    if isinstance(annotation, t.TypeVar):
        if annotation.__bound__ is not None:
            return _type_schema(annotation.__bound__, build)
        if annotation.__constraints__:
            return {"anyOf": [_type_schema(arg, build) for arg in annotation.__constraints__]}
        return {}
    if annotation is None or annotation is type(None):
        return {"type": "null"}
    origin = t.get_origin(annotation)
    args = t.get_args(annotation)
    if origin is t.Annotated:
        if _is_pydantic_type(args[0]):  # pydantic reads its own metadata
            return _pydantic_schema(annotation, build)
        schema = _type_schema(args[0], build)
        _apply_metadata(schema, annotation.__metadata__)  # type: ignore[attr-defined]
        return schema
    if origin is t.Literal:
        return _enum_schema([_literal_value(value) for value in args])
    if origin is t.Union or origin is types.UnionType:
        return {"anyOf": [_type_schema(arg, build) for arg in args]}
    if hasattr(annotation, "__supertype__"):  # typing.NewType
        return _type_schema(annotation.__supertype__, build)
    cls = origin if origin is not None else annotation
    if not isinstance(cls, type):
        raise _Undescribable(annotation)
    return _class_schema(cls, annotation, args, build)


def _class_schema(cls: type, annotation: object, args: tuple[t.Any, ...], build: _Build) -> Schema:
    if issubclass(cls, enum.Enum):
        return _enum_schema([_enum_member_value(member) for member in cls])
    if issubclass(cls, bool):
        return {"type": "boolean"}
    if issubclass(cls, int):
        return {"type": "integer"}
    if issubclass(cls, float):
        return {"type": "number"}
    if issubclass(cls, (str, bytes)):
        return {"type": "string"}
    for kind, formatted in _STRING_FORMATS:
        if issubclass(cls, kind):
            return dict(formatted)
    if _is_pydantic_type(cls):
        return _pydantic_schema(annotation, build)
    if _is_typeddict(cls) or attrs.has(cls) or dataclasses.is_dataclass(cls):
        if cls in build.seen:
            return {}
        return _object_schema(cls, build.entering(cls))
    if issubclass(cls, tuple):
        if _is_namedtuple(cls):
            return _namedtuple_schema(cls, build)
        return _tuple_schema(annotation, args, build)
    if issubclass(cls, c.Mapping):
        schema: Schema = {"type": "object"}
        if len(args) == 2:
            keys = _key_schema(args[0], build)
            if keys:
                schema["propertyNames"] = keys
            values = _type_schema(args[1], build)
            if values:
                schema["additionalProperties"] = values
        return schema
    if issubclass(cls, (c.Set, c.Sequence)) or cls in (c.Iterable, c.Collection):
        schema = {"type": "array"}
        items = _type_schema(args[0], build) if len(args) == 1 else {}
        if items:
            schema["items"] = items
        if issubclass(cls, c.Set):
            schema["uniqueItems"] = True
        return schema
    raise _Undescribable(annotation)


def _key_schema(annotation: object, build: _Build) -> Schema:
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
    schema = _type_schema(annotation, build)
    if schema.get("type") == "string":
        return schema
    if "enum" in schema:
        return {"enum": [str(value) for value in schema["enum"]]}
    return {}


def _tuple_schema(annotation: object, args: tuple[t.Any, ...], build: _Build) -> Schema:
    if not args:
        # ``tuple`` and ``typing.Tuple`` are any tuple; ``tuple[()]`` is the empty one.
        bare = annotation is t.Tuple  # noqa: UP006 -- the typing alias itself, not a hint
        if bare or t.get_origin(annotation) is None:
            return {"type": "array"}
        return {"type": "array", "maxItems": 0}
    if len(args) == 2 and args[1] is Ellipsis:
        schema: Schema = {"type": "array"}
        items = _type_schema(args[0], build)
        if items:
            schema["items"] = items
        return schema
    return {
        "type": "array",
        "prefixItems": [_type_schema(arg, build) for arg in args],
        "minItems": len(args),
        "maxItems": len(args),
    }


def _namedtuple_schema(cls: type, build: _Build) -> Schema:
    """A ``NamedTuple`` is an array of its fields in order, as pydantic writes it;
    fields with defaults may be left off the end."""
    if cls in build.seen:
        return {}
    inner = build.entering(cls)
    fields = _fields(cls)
    items = [_field_schema(cls, name, hint, default, None, inner) for name, hint, default in fields]
    required = sum(1 for _, _, default in fields if default is _EMPTY)
    return {
        "type": "array",
        "prefixItems": [item if item is not None else {} for item in items],
        "minItems": required,
        "maxItems": len(fields),
    }


def _object_schema(cls: type, build: _Build) -> Schema:
    """A nested object for an attrs class, a dataclass or a TypedDict."""
    docs = _parameter_docs(_docstring(cls))
    properties: dict[str, Schema] = {}
    required: list[str] = []
    for name, annotation, default in _fields(cls):
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
    build: _Build,
) -> Schema | None:
    """The schema of one field of ``cls``; None for a field with a default whose type
    cannot be described (a warning says so), ``_Undescribable`` for a required one."""
    try:
        return _property_schema(annotation, description=description, default=default, build=build)
    except _Undescribable as error:
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


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields") and hasattr(cls, "_field_defaults")


def _is_pydantic_type(annotation: object) -> bool:
    """A class pydantic knows how to validate (a ``BaseModel``, a pydantic dataclass,
    ``AnyUrl``...). Tells without importing pydantic."""
    return isinstance(annotation, type) and (
        hasattr(annotation, "__pydantic_core_schema__")
        or hasattr(annotation, "__get_pydantic_core_schema__")
    )


def _pydantic_schema(annotation: object, build: _Build) -> Schema:
    """pydantic's own JSON Schema for ``annotation``, its ``$defs`` moved to the root
    of the parameters schema (renamed where two different ones share a name)."""
    try:
        from pydantic import TypeAdapter

        adapter: TypeAdapter[t.Any] = TypeAdapter(t.cast(t.Any, annotation))
        schema: Schema = adapter.json_schema(ref_template="#/$defs/{model}")
    except Exception as exc:
        raise _Undescribable(annotation, f"pydantic: {exc}") from None
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


def _fields(cls: type) -> list[tuple[str, t.Any, object]]:
    """``(key, annotation, default)`` per field; the default is ``_EMPTY`` when required
    and ``_NO_DEFAULT`` when the field is optional through a factory."""
    if _is_typeddict(cls):
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
        namespace = _globals_of(cls)
        result: list[tuple[str, t.Any, object]] = []
        for field in attrs.fields(cls):
            if not field.init:
                continue
            annotation = _resolve(field.type, namespace) if field.type is not None else _EMPTY
            if field.default is attrs.NOTHING:
                default: object = _EMPTY
            elif isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
                default = _NO_DEFAULT
            else:
                default = field.default
            result.append((field.alias or field.name, annotation, default))
        return result
    if _is_namedtuple(cls):
        hints = _class_hints(cls)
        defaults: dict[str, object] = getattr(cls, "_field_defaults", {})
        return [
            (name, hints.get(name, _EMPTY), defaults.get(name, _EMPTY))
            for name in getattr(cls, "_fields", ())
        ]
    if dataclasses.is_dataclass(cls):
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
        namespace = {**_globals_of(klass), **vars(klass)}
        for name, annotation in dict(vars(klass).get("__annotations__", {})).items():
            hints[name] = _resolve(annotation, namespace)
    return hints


def _is_typeddict(cls: type) -> bool:
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
        value = _enum_member_value(value)
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


def _enum_member_value(member: enum.Enum) -> t.Any:
    """The member's value when every value of its enum is JSON data, else its name."""
    values = [_json_value(other.value) for other in type(member)]
    if all(ok for ok, _ in values):
        return _json_value(member.value)[1]
    return member.name


def _literal_value(value: object) -> t.Any:
    if isinstance(value, enum.Enum):
        return _enum_member_value(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _enum_schema(values: list[t.Any]) -> Schema:
    kinds = {json_type(value) for value in values}
    if len(kinds) == 1 and kinds <= JSON_TYPES:
        return {"type": kinds.pop(), "enum": values}
    return {"enum": values}
