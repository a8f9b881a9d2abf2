"""How JSON data is structured into each kind of annotated type: the `cattrs`_
hooks and hook factories argument conversion registers (strict: ``"3"`` is not
an ``int``), the failures they raise, and the hooks that unstructure values back
into JSON data. See :mod:`nous_tools.schema._convert` for the rules.

.. _cattrs: https://catt.rs
"""

from __future__ import annotations

import collections.abc as c
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import inspect
import ipaddress
import json
import pathlib
import re
import types
import typing as t
import uuid

import attrs

from nous_tools._util import _iso
from nous_tools._util._text import json_type
from nous_tools.schema import _type_schemas as _types

if t.TYPE_CHECKING:
    import cattrs


_EMPTY = inspect.Parameter.empty
_DECIMAL = re.compile(_types.DECIMAL_PATTERN)
Hook = c.Callable[[t.Any, t.Any], t.Any]

#: Longest text kept from one conversion message in a failure message.
_MAX_TEXT = 200


class Mismatch(Exception):
    """A value that is not of the expected kind (``expected`` names it as a JSON
    Schema type or format does: ``integer``, ``date-time``...)."""

    def __init__(self, expected: str, value: object) -> None:
        super().__init__(f"expected {expected}, got {json_type(value)}")
        self.expected = expected
        self.actual = json_type(value)


class Missing(Exception):
    """A required field that is not there."""


class Failures(Exception):
    """Several failures inside one value: ``(path parts, leaf exception)`` each; a
    path part is a ``str`` key or an ``int`` index."""

    def __init__(self, failures: list[tuple[tuple[str | int, ...], BaseException]]) -> None:
        super().__init__(f"{len(failures)} failure(s)")
        self.failures = failures


def shorten(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


def _exact(base: type, expected: str, check: c.Callable[[object], bool]) -> Hook:
    """The hook of a JSON scalar type: the value as it is, when it is of that kind.

    cattrs finds it for subclasses too: an enum with a scalar mixin (``IntEnum``,
    ``class Color(str, Enum)``) is an enum; another subclass is built from the value.
    """

    def hook(value: t.Any, cls: t.Any) -> t.Any:
        if cls is not base and isinstance(cls, type):
            if issubclass(cls, enum.Enum):
                return _enum_hook(cls)(value, cls)
            if check(value):
                return value if isinstance(value, cls) else t.cast(t.Any, cls)(value)
        elif check(value):
            return value
        raise Mismatch(expected, value)

    return hook


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _structure_bytes(value: t.Any, _: t.Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise Mismatch("string", value)


def _parsed(kind: type, expected: str, parse: c.Callable[[str], t.Any]) -> Hook:
    def hook(value: t.Any, _: t.Any) -> t.Any:
        if isinstance(value, kind):
            return value
        if isinstance(value, str):
            try:
                return parse(value)
            except ValueError:
                pass
        raise Mismatch(expected, value)

    return hook


def _structure_timedelta(value: t.Any, _: t.Any) -> dt.timedelta:
    if isinstance(value, dt.timedelta):
        return value
    if _is_number(value):
        try:
            return dt.timedelta(seconds=value)
        except OverflowError:
            pass
    elif isinstance(value, str):
        try:
            return _iso.parse_duration(value)
        except ValueError:
            pass
    raise Mismatch("duration", value)


def _structure_decimal(value: t.Any, _: t.Any) -> decimal.Decimal:
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, str) and _DECIMAL.match(value):
        return decimal.Decimal(value)
    if _is_int(value):
        return decimal.Decimal(value)
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return decimal.Decimal(repr(value))
    raise Mismatch("decimal", value)


def _from_string(expected: str) -> Hook:
    """A hook that builds the annotated class from a string (``Path``, ``UUID``...)."""

    def hook(value: t.Any, cls: t.Any) -> t.Any:
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls(value)
            except ValueError:
                pass
        raise Mismatch(expected, value)

    return hook


def _json_equal(a: object, b: object) -> bool:
    """Equality as JSON has it: ``True`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _choices_hook(choices: list[tuple[object, object]], values: list[object]) -> Hook:
    """A hook that picks the choice whose JSON value equals the value."""
    expected = "one of " + ", ".join(json.dumps(v, default=repr) for v in values)

    def hook(value: t.Any, _: t.Any) -> t.Any:
        for json_value, choice in choices:
            if _json_equal(value, json_value) or (value is choice and value is not None):
                return choice
        raise Mismatch(shorten(expected), value)

    return hook


@functools.lru_cache(maxsize=256)
def _enum_hook(cls: type[enum.Enum]) -> Hook:
    choices: list[tuple[object, object]] = [
        (_types.enum_member_value(member), member) for member in cls
    ]
    return _choices_hook(choices, [value for value, _ in choices])


def _literal_hook(annotation: t.Any) -> Hook:
    choices: list[tuple[object, object]] = [
        (_types.literal_value(value), value) for value in t.get_args(annotation)
    ]
    return _choices_hook(choices, [value for value, _ in choices])


class Lazy:
    """The structuring hook of ``annotation``, looked up at first use (so a class that
    refers to itself does not recurse while its hook is built)."""

    __slots__ = ("annotation", "converter", "hook")

    def __init__(self, converter: cattrs.Converter, annotation: t.Any) -> None:
        self.converter = converter
        self.annotation = annotation
        self.hook: Hook | None = None

    def __call__(self, value: t.Any) -> t.Any:
        hook = self.hook
        if hook is None:
            hook = self.hook = self.converter.get_structure_hook(self.annotation)
        return hook(value, self.annotation)


def _each(items: c.Iterable[tuple[str | int, t.Any, Lazy]]) -> list[t.Any]:
    """Structure every ``(path part, value, hook)``; every failure is kept."""
    done: list[t.Any] = []
    failures: list[tuple[tuple[str | int, ...], BaseException]] = []
    for part, value, hook in items:
        try:
            done.append(hook(value))
        except RecursionError:
            raise
        except Exception as exc:
            failures.append(((part,), exc))
    if failures:
        raise Failures(failures)
    return done


_ARRAY_KINDS = (list, tuple)
_SET_KINDS = (list, tuple, set, frozenset)


def _sequence_factory(converter: cattrs.Converter) -> c.Callable[[t.Any], Hook]:
    """``list[X]``, ``Sequence[X]``, ``set[X]``, ``frozenset[X]``... from a JSON array."""

    def factory(annotation: t.Any) -> Hook:
        origin = t.get_origin(annotation) or annotation
        args = t.get_args(annotation)
        item = Lazy(converter, args[0] if args else t.Any)
        if issubclass(origin, c.Set):
            build: c.Callable[[list[t.Any]], t.Any] = (
                frozenset if issubclass(origin, frozenset) else set
            )
            kinds: tuple[type, ...] = _SET_KINDS
        else:
            build = list
            kinds = _ARRAY_KINDS

        def hook(value: t.Any, _: t.Any) -> t.Any:
            if not isinstance(value, kinds):
                raise Mismatch("array", value)
            items = t.cast("c.Iterable[t.Any]", value)
            return build(_each((i, v, item) for i, v in enumerate(items)))

        return hook

    return factory


def _tuple_factory(converter: cattrs.Converter) -> c.Callable[[t.Any], Hook]:
    def factory(annotation: t.Any) -> Hook:
        args = t.get_args(annotation)
        if (not args and t.get_origin(annotation) is None) or annotation is t.Tuple:  # noqa: UP006
            items: list[Lazy] | None = None
            each = Lazy(converter, t.Any)
        elif len(args) == 2 and args[1] is Ellipsis:
            items, each = None, Lazy(converter, args[0])
        else:
            items, each = [Lazy(converter, arg) for arg in args], Lazy(converter, t.Any)

        def hook(value: t.Any, _: t.Any) -> t.Any:
            if not isinstance(value, _ARRAY_KINDS):
                raise Mismatch("array", value)
            if items is None:
                return tuple(_each((i, v, each) for i, v in enumerate(value)))
            if len(value) != len(items):
                raise ValueError(f"expected {len(items)} items, got {len(value)}")
            return tuple(
                _each((i, v, h) for i, (v, h) in enumerate(zip(value, items, strict=True)))
            )

        return hook

    return factory


def _namedtuple_factory(converter: cattrs.Converter) -> c.Callable[[type], Hook]:
    def factory(cls: type) -> Hook:
        fields = _types.class_fields(cls)
        hooks = [Lazy(converter, hint if hint is not _EMPTY else t.Any) for _, hint, _ in fields]
        needed = sum(1 for _, _, default in fields if default is _EMPTY)

        def hook(value: t.Any, _: t.Any) -> t.Any:
            if isinstance(value, cls):
                return value
            if not isinstance(value, _ARRAY_KINDS):
                raise Mismatch("array", value)
            if not needed <= len(value) <= len(hooks):
                raise ValueError(f"expected {needed} to {len(hooks)} items, got {len(value)}")
            return cls(
                *_each((i, v, h) for i, (v, h) in enumerate(zip(value, hooks, strict=False)))
            )

        return hook

    return factory


def _key_parser(annotation: t.Any) -> c.Callable[[t.Any], t.Any]:
    """JSON object keys are strings: for ``dict[int, X]`` (and enums of numbers)
    the key is read as JSON first."""
    cls = t.get_origin(annotation) or annotation
    numeric = isinstance(cls, type) and (
        issubclass(cls, (int, float))
        or (
            issubclass(cls, enum.Enum)
            and not all(isinstance(_types.enum_member_value(m), str) for m in cls)
        )
    )
    if not numeric:
        return lambda key: key

    def parse(key: t.Any) -> t.Any:
        if isinstance(key, str):
            try:
                return json.loads(key)
            except ValueError:
                return key
        return key

    return parse


def _mapping_factory(converter: cattrs.Converter) -> c.Callable[[t.Any], Hook]:
    def factory(annotation: t.Any) -> Hook:
        args = t.get_args(annotation)
        key_type, value_type = args if len(args) == 2 else (t.Any, t.Any)
        keys = Lazy(converter, key_type)
        values = Lazy(converter, value_type)
        parse = _key_parser(key_type)

        def hook(value: t.Any, _: t.Any) -> t.Any:
            if not isinstance(value, c.Mapping):
                raise Mismatch("object", value)
            result: dict[t.Any, t.Any] = {}
            failures: list[tuple[tuple[str | int, ...], BaseException]] = []
            for key, item in value.items():
                try:
                    result[keys(parse(key))] = values(item)
                except RecursionError:
                    raise
                except Exception as exc:
                    failures.append(((str(key),), exc))
            if failures:
                raise Failures(failures)
            return result

        return hook

    return factory


def _union_factory(converter: cattrs.Converter) -> c.Callable[[t.Any], Hook]:
    """A value that a member accepts as it is goes through (``"2024-05-01"`` for
    ``str | date`` stays a string); otherwise the first member that converts it."""

    def factory(annotation: t.Any) -> Hook:
        members = t.get_args(annotation)
        hooks = [(member, Lazy(converter, member)) for member in members]
        expected = " or ".join(_expected_name(member) for member in members)

        def hook(value: t.Any, _: t.Any) -> t.Any:
            for member, _lazy in hooks:
                if _accepts_as_is(member, value):
                    return value
            for _member, lazy in hooks:
                try:
                    return lazy(value)
                except RecursionError:
                    raise
                except Exception:
                    continue
            raise Mismatch(expected, value)

        return hook

    return factory


def _accepts_as_is(member: t.Any, value: object) -> bool:
    if member is t.Any or member is object:
        return True
    if member is None or member is type(None):
        return value is None
    if member is bool:
        return isinstance(value, bool)
    if member is int:
        return _is_int(value)
    if member is float:
        return _is_number(value)
    if member is str:
        return isinstance(value, str)
    return False


def _expected_name(annotation: t.Any) -> str:
    """How a failure names a union member: the ``format`` or ``type`` its schema has
    (without building that schema, which may be costly), else its name."""
    if annotation is None or annotation is type(None):
        return "null"
    if t.get_origin(annotation) is t.Annotated:
        return _expected_name(t.get_args(annotation)[0])
    cls = t.get_origin(annotation) or annotation
    if not isinstance(cls, type):
        return str(annotation)
    if issubclass(cls, decimal.Decimal):
        return "decimal"
    for kind, schema in _types.string_formats():
        if issubclass(cls, kind):
            return str(schema.get("format", "string"))
    for kinds, name in _JSON_NAMES:
        if issubclass(cls, kinds):
            return name
    return cls.__name__


#: Python classes and the JSON type a schema gives them, most specific first.
_JSON_NAMES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (enum.Enum, "enum"),
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    ((str, bytes), "string"),
    ((tuple, c.Sequence, c.Set), "array"),
    (c.Mapping, "object"),
)


def _object_factory(converter: cattrs.Converter) -> c.Callable[[type], Hook]:
    """Dataclasses, attrs classes and TypedDicts: cattrs' own structuring function,
    after a check that the value is a JSON object."""

    def factory(cls: type) -> Hook:
        import cattrs.gen
        import cattrs.gen.typeddicts

        if _types.is_typeddict(cls):
            inner: Hook = cattrs.gen.typeddicts.make_dict_structure_fn(cls, converter)
        else:
            inner = cattrs.gen.make_dict_structure_fn(cls, converter)
        typed_dict = _types.is_typeddict(cls)

        def hook(value: t.Any, annotation: t.Any) -> t.Any:
            if not typed_dict and isinstance(value, cls):
                return value
            if not isinstance(value, c.Mapping):
                raise Mismatch("object", value)
            return inner(value, annotation)

        return hook

    return factory


def _pydantic_hook(annotation: t.Any) -> Hook:
    from pydantic import TypeAdapter, ValidationError

    adapter = TypeAdapter(annotation)

    def hook(value: t.Any, _: t.Any) -> t.Any:
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            failures: list[tuple[tuple[str | int, ...], BaseException]] = []
            for error in exc.errors(include_url=False, include_input=False):
                where = tuple(part for part in error["loc"] if isinstance(part, (str, int)))
                leaf: Exception = (
                    Missing() if error["type"] == "missing" else ValueError(error["msg"])
                )
                failures.append((where, leaf))
            raise Failures(failures) from None

    return hook


def _annotated_factory(converter: cattrs.Converter) -> c.Callable[[t.Any], Hook]:
    def factory(annotation: t.Any) -> Hook:
        inner = t.get_args(annotation)[0]
        if _types.is_pydantic_type(inner):
            return _pydantic_hook(annotation)
        return converter.get_structure_hook(inner)

    return factory


def _typevar_factory(converter: cattrs.Converter) -> c.Callable[[t.Any], Hook]:
    def factory(annotation: t.Any) -> Hook:
        bound = annotation.__bound__
        if bound is None and annotation.__constraints__:
            bound = t.Union[annotation.__constraints__]  # noqa: UP007 -- built at run time
        return converter.get_structure_hook(bound if bound is not None else t.Any)

    return factory


def _is_class(predicate: c.Callable[[type], bool]) -> c.Callable[[t.Any], bool]:
    def check(annotation: t.Any) -> bool:
        return isinstance(annotation, type) and predicate(annotation)

    return check


def _origin_is(predicate: c.Callable[[type], bool]) -> c.Callable[[t.Any], bool]:
    def check(annotation: t.Any) -> bool:
        origin = t.get_origin(annotation) or annotation
        return isinstance(origin, type) and predicate(origin)

    return check


def _is_literal(annotation: t.Any) -> bool:
    return t.get_origin(annotation) is t.Literal


def _is_annotated(annotation: t.Any) -> bool:
    return t.get_origin(annotation) is t.Annotated


def _is_typevar(annotation: t.Any) -> bool:
    return isinstance(annotation, t.TypeVar)


def _is_union(annotation: t.Any) -> bool:
    origin = t.get_origin(annotation)
    return origin is t.Union or origin is types.UnionType


def _unstructure_pydantic(value: t.Any) -> t.Any:
    from pydantic import TypeAdapter

    return TypeAdapter(type(value)).dump_python(value, mode="json")


def _unstructure_bytes(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def make_converter() -> cattrs.Converter:
    """A converter with every hook here registered: structuring JSON data into the
    annotated types, and unstructuring values into JSON data (imports cattrs)."""
    import cattrs

    converter = cattrs.Converter(use_alias=True, forbid_extra_keys=True)
    register = converter.register_structure_hook
    register_factory = converter.register_structure_hook_factory
    register(str, _exact(str, "string", lambda v: isinstance(v, str)))
    register(int, _exact(int, "integer", _is_int))
    register(float, _exact(float, "number", _is_number))
    register(bool, _exact(bool, "boolean", lambda v: isinstance(v, bool)))
    register(type(None), _exact(type(None), "null", lambda v: v is None))
    register(bytes, _structure_bytes)
    register(dt.datetime, _parsed(dt.datetime, "date-time", _iso.parse_datetime))
    register(dt.date, _parsed(dt.date, "date", _iso.parse_date))
    register(dt.time, _parsed(dt.time, "time", _iso.parse_time))
    register(dt.timedelta, _structure_timedelta)
    register(decimal.Decimal, _structure_decimal)
    # Registered in order: cattrs asks the last registered factory first.
    register_factory(_origin_is(_types.is_sequence_kind), _sequence_factory(converter))
    register_factory(_origin_is(lambda cls: issubclass(cls, tuple)), _tuple_factory(converter))
    register_factory(
        _origin_is(lambda cls: issubclass(cls, c.Mapping)), _mapping_factory(converter)
    )
    register_factory(
        _is_class(lambda cls: attrs.has(cls) or dataclasses.is_dataclass(cls)),
        _object_factory(converter),
    )
    register_factory(_is_class(_types.is_typeddict), _object_factory(converter))
    register_factory(_is_class(_types.is_namedtuple), _namedtuple_factory(converter))
    register(uuid.UUID, _from_string("uuid"))
    register(pathlib.PurePath, _from_string("path"))
    register(pathlib.Path, _from_string("path"))
    register(ipaddress.IPv4Address, _from_string("ipv4"))
    register(ipaddress.IPv6Address, _from_string("ipv6"))
    register_factory(_is_class(lambda cls: issubclass(cls, enum.Enum)), _enum_hook)
    register_factory(_is_literal, _literal_hook)
    register_factory(_is_union, _union_factory(converter))
    register_factory(_is_typevar, _typevar_factory(converter))
    register_factory(_is_annotated, _annotated_factory(converter))
    register_factory(_types.is_pydantic_type, _pydantic_hook)

    unregister = converter.register_unstructure_hook
    for kind in (dt.datetime, dt.date, dt.time):
        unregister(kind, lambda value: value.isoformat())
    unregister(dt.timedelta, _iso.format_duration)
    unregister(bytes, _unstructure_bytes)
    for text in (uuid.UUID, decimal.Decimal, pathlib.PurePath):
        unregister(text, str)
    for address in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        unregister(address, str)
    unregister(enum.Enum, _types.enum_member_value)
    converter.register_unstructure_hook_func(
        _is_class(_types.is_namedtuple),
        lambda value: [converter.unstructure(item) for item in value],
    )
    converter.register_unstructure_hook_func(
        _is_class(lambda cls: issubclass(cls, (tuple, set, frozenset))),
        lambda value: [converter.unstructure(item) for item in value],
    )
    converter.register_unstructure_hook_func(_types.is_pydantic_type, _unstructure_pydantic)
    return converter
