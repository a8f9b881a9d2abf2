"""Argument validation: full JSON Schema by jsonschema-rs, every violation in Nous's words.

>>> validator = ArgumentValidator({
...     "type": "object",
...     "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
...     "required": ["name"],
... })
>>> validator.validate({"name": "Ada", "age": 36}) is None
True
>>> failure = validator.validate({"age": "old"})
>>> failure.message
'Missing required fields: name; Type mismatch: age: expected integer, got string'
>>> failure.original_error
('missing_required', ['name'])
>>> check_schema({"type": "objekt"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
ValueError: Tool option 'parameters' is not a valid JSON Schema: unknown type 'objekt', ...

**jsonschema-rs is the validator.** Every call is answered by the Rust
`jsonschema-rs`_ validator compiled once per schema: its ``is_valid`` on the common
path, its ``iter_errors`` (every violation, with where it is) when the arguments
are wrong. The dialect is the one the schema names in ``$schema`` (JSON Schema
2020-12 when it names none; drafts 4, 6, 7 and 2019-09 too). The check of a
schema against its metaschema is jsonschema-rs's as well (the ``validator_for``
that compiles it). Pure-Python jsonschema is not used anywhere: a draft 3 schema,
which jsonschema-rs does not implement, is refused.

**Arguments are read as JSON carries them**: any ``Mapping`` is an object, a
``tuple`` an array, a key that is not a string reads as ``str(key)`` would (as
``json.dumps`` writes it). A value JSON cannot carry (``bytes``, a ``datetime``, an
object of your own, ``NaN``) is accepted only where the schema accepts any value
(``{}``, ``true``, a parameter without an annotation); anywhere else it is a type
mismatch naming its Python type.

**Patterns** (``pattern``, ``patternProperties``) are ECMA-262 regular expressions,
matched by Rust's linear-time ``regex`` engine: ``\\d`` and ``\\w`` are ASCII,
``\\p{L}`` and the other Unicode property classes work, and no text can make a
match take more than time proportional to its length. A pattern that needs
backtracking (lookaround, a backreference) cannot be matched that way: in an
untrusted schema (``trusted=False``, e.g. an MCP server's) it is refused at
construction; in a trusted one it is matched by ``fancy-regex`` with at most
:data:`BACKTRACK_LIMIT` backtracking steps per match (a text that needs more does
not match).

**Formats** in :data:`CHECKED_FORMATS` are asserted: ``date-time``, ``date``,
``time`` and ``duration`` read as argument conversion reads them (``_iso``: RFC
3339 with the UTC offset optional), ``email``, ``uri``, ``uuid``, ``ipv4`` and
``ipv6`` by jsonschema-rs's own checks. Any other format is an annotation. A
failure is a type mismatch, ``expected date-time``.

**References.** :func:`check_schema` resolves every ``$ref`` at construction: into
the schema itself, or into the ``referencing.Registry`` given (the
``schema-registry`` extra). A remote schema is never fetched.

**Depth.** Arguments nested more than :data:`MAX_RECURSIVE_DEPTH` levels deep are
refused by a schema that refers to itself (a tree of ``$ref``\\ s, whose checks go
as deep as the arguments do), before jsonschema-rs sees them.

**Wording.** Missing required fields, type mismatches and every other violation
are listed in that order, each kind once, in jsonschema-rs's words for the last::

    Missing required fields: name, filter.min; Type mismatch: tags[1]: expected
    string, got integer; Invalid values: age: -1 is less than the minimum of 0

Paths join object keys with ``.`` and show array indices as ``[i]``; the arguments
themselves are ``(root)``. Violations are listed by path, and at one path in the
order of the schema, the same on every run. Long messages are cut to about 200
characters, so a megabyte of argument never becomes a megabyte of error.

.. _jsonschema-rs: https://github.com/Stranger6667/jsonschema
"""

from __future__ import annotations

import collections.abc as c
import functools
import json
import math
import threading
import typing as t
import urllib.parse
import weakref

import attrs
import jsonschema_rs

from nous_tools._util import _iso
from nous_tools._util._text import json_type as _json_type
from nous_tools._util._wording import unknown_properties

if t.TYPE_CHECKING:
    import referencing

__all__ = [
    "BACKTRACK_LIMIT",
    "CHECKED_FORMATS",
    "MAX_RECURSIVE_DEPTH",
    "ArgumentValidator",
    "ValidationFailure",
    "check_registry",
    "check_schema",
    "compile_validator",
    "failure_message",
    "shared_validator",
]

#: Longest text kept from one message (or one path) in a failure message.
_MAX_TEXT = 200
#: Most violations of one kind spelt out in a failure message; ``original_error``
#: keeps them all.
_MAX_LISTED = 50

#: The most backtracking steps one match of a pattern that needs backtracking
#: (lookaround, a backreference) may take in a trusted schema: about a millisecond.
#: Past it the text does not match. Patterns without those features never backtrack.
BACKTRACK_LIMIT = 100_000

#: The deepest arguments a schema that refers to itself validates (deeper ones are
#: refused before jsonschema-rs, whose checks would recurse as deep as they go).
MAX_RECURSIVE_DEPTH = 128

#: Where a copy of arguments with values JSON cannot carry stops (see ``_json_view``).
_VIEW_DEPTH = 128

_TOO_DEEP = "arguments nested too deeply to validate"

_JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")

_ONE_SUBSCHEMA = (
    "additionalItems",
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_LIST_OF_SUBSCHEMAS = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP_OF_SUBSCHEMAS = (
    "$defs",
    "definitions",
    "dependencies",
    "dependentSchemas",
    "patternProperties",
    "properties",
)

#: Keywords that never change whether an instance is valid (``format`` aside).
_ANNOTATIONS = frozenset(
    {
        "$comment",
        "$defs",
        "$schema",
        "$vocabulary",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "default",
        "definitions",
        "deprecated",
        "description",
        "examples",
        "readOnly",
        "title",
        "writeOnly",
    }
)

#: Keywords of a schema that accepts every mapping (``{"type": "object",
#: "properties": {}}`` and the like); see ``_accepts_every_mapping``.
_TRIVIAL_OBJECT_KEYWORDS = _ANNOTATIONS | {
    "additionalProperties",
    "format",
    "patternProperties",
    "properties",
    "required",
    "type",
}


# -- schemas ------------------------------------------------------------------


def check_schema(
    schema: object,
    *,
    registry: referencing.Registry[t.Any] | None = None,
    trusted: bool = True,
) -> None:
    """Raise unless ``schema`` is a valid JSON Schema whose ``$ref``\\ s all resolve.

    The metaschema is the one named by ``$schema`` (2020-12 when none is named;
    drafts 4, 6, 7, 2019-09 and 2020-12 are known). Every violation is listed,
    sorted by where it is and then by what it says (the same order on every run).
    Then every ``$ref`` must resolve: to a place inside the schema, or to a schema
    in ``registry`` (a :class:`referencing.Registry`). A ``$ref`` to a remote URI
    that ``registry`` does not hold is refused, since it is never fetched; a JSON
    pointer that points nowhere is refused too, since no arguments could ever be
    validated against it.

    Every ``pattern`` (and ``patternProperties`` key) must be a regular expression.
    An untrusted schema (``trusted=False``: one from an MCP server, say) may not use
    one that needs backtracking (lookaround, a backreference): such a pattern can
    take exponential time on a crafted text.

    Raises ``TypeError`` when ``schema`` is not a mapping and ``ValueError``
    otherwise; both messages name the tool option ``parameters``, e.g.
    ``Tool option 'parameters' is not a valid JSON Schema: 5 is not of types
    "boolean", "object" (at path properties.a)``.
    """
    shared_validator(t.cast("c.Mapping[str, t.Any]", schema), registry=registry, trusted=trusted)


def _invalid_schema(problems: list[tuple[str, tuple[object, ...]]]) -> ValueError:
    shown = "; ".join(
        f"{_shorten(reason)} (at path {_shorten(_format_path(where))})"
        for reason, where in problems[:_MAX_LISTED]
    )
    if len(problems) > _MAX_LISTED:
        shown += f"; ... and {len(problems) - _MAX_LISTED} more"
    return ValueError(f"Tool option 'parameters' is not a valid JSON Schema: {shown}")


def check_registry(registry: object) -> None:
    """Raise ``TypeError`` unless ``registry`` is None or a ``referencing.Registry``
    (the ``schema-registry`` extra: ``pip install 'nous-tools[schema-registry]'``)."""
    if registry is None:
        return
    try:
        import referencing
    except ImportError:  # then it cannot be one
        referencing = None  # type: ignore[assignment]
    if referencing is None or not isinstance(registry, referencing.Registry):
        raise TypeError(
            "Tool option 'schema_registry' must be a referencing.Registry or None, "
            f"got {type(registry).__name__} (pip install 'nous-tools[schema-registry]' "
            "for referencing)"
        )


def _plain_copy(schema: object) -> dict[str, t.Any]:
    """``schema`` as plain dicts and lists (raising as :func:`check_schema` says)."""
    if not isinstance(schema, c.Mapping):
        raise TypeError(
            f"Tool option 'parameters' must be a JSON Schema mapping, got {type(schema).__name__}"
        )
    try:
        return t.cast("dict[str, t.Any]", _plain(schema))
    except RecursionError:
        raise _invalid_schema([("the schema is nested too deeply", ())]) from None


def _plain(value: object) -> object:
    """A deep copy of ``value`` with every mapping a dict and every tuple a list."""
    if isinstance(value, c.Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _cache_key(plain: object) -> str | None:
    """A text that tells this schema from every other (``1`` from ``true`` and
    ``1.0``), or None when it holds a value JSON cannot (then it is not shared)."""
    try:
        return json.dumps(plain, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None


def _read(schema: object) -> tuple[dict[str, t.Any], str | None]:
    """What jsonschema-rs compiles for ``schema`` and its JSON text (None when it
    holds a value JSON cannot). A schema of dicts and lists is compiled as it is
    (jsonschema-rs copies it); any other mapping is copied into dicts first."""
    text = _cache_key(schema) if isinstance(schema, dict) else None
    if text is not None:
        return t.cast("dict[str, t.Any]", schema), text
    plain = _plain_copy(schema)
    return plain, _cache_key(plain)


def _tree(source: dict[str, t.Any], text: str | None) -> dict[str, t.Any]:
    """A private copy of the schema as plain dicts and lists, to walk."""
    return t.cast("dict[str, t.Any]", json.loads(text)) if text is not None else source


# -- compiling: jsonschema-rs -------------------------------------------------------


def _pattern_options(trusted: bool) -> t.Any:
    """jsonschema-rs's ``pattern_options``: Rust's linear-time ``regex`` for an
    untrusted schema (a pattern that needs backtracking does not compile), and
    ``fancy-regex`` for a trusted one, which hands every pattern without lookaround
    or backreferences to ``regex`` too and bounds the backtracking of the others."""
    return _TRUSTED_PATTERNS if trusted else _UNTRUSTED_PATTERNS


_TRUSTED_PATTERNS = jsonschema_rs.FancyRegexOptions(backtrack_limit=BACKTRACK_LIMIT)
_UNTRUSTED_PATTERNS = jsonschema_rs.RegexOptions()


@functools.lru_cache(maxsize=1024)
def _is_regex(pattern: str, trusted: bool) -> bool:
    """Whether ``pattern`` compiles with the engine that trust allows."""
    try:
        jsonschema_rs.validator_for({"pattern": pattern}, pattern_options=_pattern_options(trusted))
    except Exception:
        return False
    return True


def _refuse_retrieval(uri: str) -> t.NoReturn:
    raise ValueError(f"remote schema {uri!r} is not fetched")


def _native_registry(registry: referencing.Registry[t.Any]) -> t.Any:
    """``registry``'s schemas as a jsonschema-rs registry."""
    return jsonschema_rs.Registry([(uri, registry[uri].contents) for uri in registry])


def _compile(
    source: dict[str, t.Any],
    registry: referencing.Registry[t.Any] | None,
    trusted: bool,
    text: str | None,
) -> t.Any:
    """jsonschema-rs's validator for ``source`` (whose JSON text is ``text``, when it
    has one), with every ``format`` it names checked as :data:`CHECKED_FORMATS` says
    (or not at all); raises ``ValueError`` worded for the tool option ``parameters``
    when ``source`` is not a valid schema."""
    options: dict[str, t.Any] = {
        "retriever": _refuse_retrieval,
        "pattern_options": _pattern_options(trusted),
    }
    used = _used_formats(_tree(source, text)) if text is None or '"format"' in text else set()
    if used:  # custom formats make every check slower: only when needed
        options["validate_formats"] = True
        options["formats"] = {
            name: _ISO_FORMATS.get(name, _any_value) for name in used if name not in _NATIVE_FORMATS
        }
    else:
        options["validate_formats"] = False
    if registry is not None:
        options["registry"] = _native_registry(registry)
    try:
        return jsonschema_rs.validator_for(source, **options)
    except jsonschema_rs.ValidationError as exc:
        raise _why_invalid(_tree(source, text), exc, trusted) from None
    except Exception as exc:  # a value it cannot read, a schema nested too deeply
        reason = str(exc).split("\n", 1)[0]
        if "Recursion limit" in reason:
            reason = "the schema is nested too deeply"
        raise _invalid_schema([(reason, ())]) from None


# -- why a schema is not valid -------------------------------------------------------

#: The metaschema of each draft jsonschema-rs implements, by its validator class.
_METASCHEMAS = {
    "Draft4Validator": "http://json-schema.org/draft-04/schema#",
    "Draft6Validator": "http://json-schema.org/draft-06/schema#",
    "Draft7Validator": "http://json-schema.org/draft-07/schema#",
    "Draft201909Validator": "https://json-schema.org/draft/2019-09/schema",
    "Draft202012Validator": "https://json-schema.org/draft/2020-12/schema",
}


@functools.cache
def _metaschema_validator(name: str) -> t.Any:
    """jsonschema-rs's validator of the metaschema of draft ``name`` (its class)."""
    cls = getattr(jsonschema_rs, name)
    return cls({"$ref": _METASCHEMAS[name]}, validate_formats=False)


def _why_invalid(plain: dict[str, t.Any], error: t.Any, trusted: bool) -> ValueError:
    """The ``ValueError`` for a schema jsonschema-rs refused with ``error`` (its
    first problem): every metaschema violation and every bad pattern, or the
    ``$ref`` that cannot be resolved, or the ``$schema`` that is unknown."""
    first = str(error).split("\n", 1)[0]
    if type(error.kind) is _Kind.Referencing:
        return _reference_problem(plain, first)
    problems = set(_metaschema_problems(plain))
    problems.update(_pattern_problems(plain, trusted))
    if not problems:
        problems.add((first, tuple(error.instance_path)))
    return _invalid_schema(sorted(problems, key=lambda p: (_sort_key(p[1]), p[0])))


def _metaschema_problems(plain: dict[str, t.Any]) -> c.Iterator[tuple[str, tuple[object, ...]]]:
    """Every metaschema violation as ``(reason, path)`` (a path in ``plain``)."""
    try:
        name = jsonschema_rs.validator_cls_for(plain).__name__
        meta = _metaschema_validator(name)
    except Exception:  # an unknown $schema: said elsewhere
        return
    for error in meta.iter_errors(plain):
        path = tuple(_steps(plain, error.instance_path))
        reason = str(error.message)
        if type(error.kind) is _Kind.AnyOf and path and path[-1] == "type":
            value = _locate(plain, path)[1]
            if isinstance(value, str):
                reason = f"unknown type {value!r}, expected one of {', '.join(_JSON_TYPES)}"
        yield reason, path


def _pattern_problems(
    plain: dict[str, t.Any], trusted: bool
) -> c.Iterator[tuple[str, tuple[object, ...]]]:
    """Every pattern (and ``patternProperties`` key) the engine trust allows cannot
    read, as ``(reason, path)``."""
    for node, where in _each_subschema_at(plain):
        patterns: list[tuple[object, tuple[object, ...]]] = []
        if "pattern" in node:
            patterns.append((node["pattern"], (*where, "pattern")))
        keyed = node.get("patternProperties")
        if isinstance(keyed, dict):
            patterns.extend((key, (*where, "patternProperties", key)) for key in keyed)
        for pattern, path in patterns:
            if not isinstance(pattern, str) or _is_regex(pattern, trusted):
                continue
            if not trusted and _is_regex(pattern, True):
                yield (
                    f"{pattern!r} needs a backtracking regular expression engine "
                    "(lookaround or a backreference), which an untrusted schema may not "
                    "use: matching it can take exponential time on a crafted text",
                    path,
                )
            else:
                yield f"{pattern!r} is not a regular expression", path


def _reference_problem(plain: dict[str, t.Any], first: str) -> ValueError:
    """The ``ValueError`` for a ``$ref`` (or ``$schema``) jsonschema-rs cannot
    resolve, naming where it is."""
    import re  # only here: the start-up of a tool pays for nothing it does not use

    refs = [(ref, where) for ref, where in _each_ref(plain)]
    if (found := re.search(r"Unknown meta-schema: '([^']*)'", first)) is not None:
        return ValueError(
            f"Tool option 'parameters' names $schema {found.group(1)!r}, which is not a "
            "JSON Schema dialect jsonschema-rs knows (drafts 4, 6, 7, 2019-09, 2020-12)"
        )
    if (found := re.search(r"Pointer '([^']*)' does not exist", first)) is not None:
        pointer = found.group(1)
        nowhere = [
            (ref, where)
            for ref, where in refs
            if urllib.parse.unquote(ref.partition("#")[2]) == pointer
        ] or [(f"#{pointer}", ())]
        return _invalid_schema(
            [(f"$ref {ref!r} points to nothing in the schema", at) for ref, at in sorted(nowhere)]
        )
    if (found := re.search(r"Resource '([^']*)' is not present", first)) is not None:
        uri = found.group(1)
        remote = [
            (ref, where)
            for ref, where in refs
            if ref.partition("#")[0].rstrip("/") in (uri.rstrip("/"), "")
            or uri.endswith(ref.partition("#")[0])
        ] or [(uri, ())]
        shown = ", ".join(f"{ref!r} (at path {_format_path(at)})" for ref, at in sorted(remote))
        return ValueError(
            f"Tool option 'parameters' refers to a remote schema ({_shorten(shown)}), which is "
            "never fetched: add it to a referencing.Registry and pass it as "
            "Tool(schema_registry=...)"
        )
    return _invalid_schema([(first, ())])


def _each_ref(plain: dict[str, t.Any]) -> c.Iterator[tuple[str, tuple[object, ...]]]:
    """Every ``$ref`` of ``plain`` and where it is (the path of the ``$ref`` key)."""
    for node, where in _each_subschema_at(plain):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref, (*where, "$ref")


def _steps(root: object, path: c.Sequence[str | int]) -> c.Iterator[str | int]:
    """``path`` with each step an ``int`` only where it indexes an array (an object
    key that looks like a number may come back from jsonschema-rs as an ``int``)."""
    node: t.Any = root
    for step in path:
        if isinstance(node, list) and type(step) is int:
            yield step
            node = node[step] if 0 <= step < len(node) else None
        else:
            key = str(step)
            yield key
            node = node.get(key) if isinstance(node, dict) else None


def _subschemas(node: dict[str, t.Any]) -> c.Iterator[tuple[tuple[object, ...], object]]:
    """``(path steps, subschema)`` for every subschema directly inside ``node``."""
    for keyword in _ONE_SUBSCHEMA:
        if keyword in node:
            yield (keyword,), node[keyword]
    items = node.get("items")
    if isinstance(items, list):
        yield from (((("items", i)), item) for i, item in enumerate(items))
    elif items is not None:
        yield ("items",), items
    for keyword in _LIST_OF_SUBSCHEMAS:
        group = node.get(keyword)
        if isinstance(group, list):
            yield from (((keyword, i), item) for i, item in enumerate(group))
    for keyword in _MAP_OF_SUBSCHEMAS:
        group = node.get(keyword)
        if isinstance(group, dict):
            yield from (((keyword, key), item) for key, item in group.items())


def _each_subschema_at(
    schema: dict[str, t.Any],
) -> c.Iterator[tuple[dict[str, t.Any], tuple[object, ...]]]:
    """``schema`` and every subschema in it with its path, each once (a ``$ref``
    is not followed)."""
    seen: set[int] = set()
    stack: list[tuple[object, tuple[object, ...]]] = [(schema, ())]
    while stack:
        node, where = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        yield node, where
        stack.extend((sub, (*where, *steps)) for steps, sub in _subschemas(node))


def _used_formats(schema: dict[str, t.Any]) -> set[str]:
    return {
        node["format"]
        for node, _ in _each_subschema_at(schema)
        if isinstance(node.get("format"), str)
    }


def _any_value(value: object) -> bool:
    return True


#: The formats validation asserts. date-time, date, time and duration are read as
#: argument conversion reads them (``_iso``); the others are jsonschema-rs's checks.
CHECKED_FORMATS = ("date", "date-time", "duration", "email", "ipv4", "ipv6", "time", "uri", "uuid")

_ISO_FORMATS: dict[str, c.Callable[[object], bool]] = {
    "date": _iso.is_date,
    "date-time": _iso.is_datetime,
    "duration": _iso.is_duration,
    "time": _iso.is_time,
}
_NATIVE_FORMATS = frozenset({"email", "ipv4", "ipv6", "uri", "uuid"})


def _has_ref_cycle(schema: dict[str, t.Any]) -> bool:
    """True when following subschemas and ``$ref``\\ s from the root can come back
    to a schema on the way (a ``$ref`` that is not a JSON pointer counts as one, and
    so do ``$dynamicRef`` and ``$recursiveRef``)."""
    on_path: set[int] = set()
    done: set[int] = set()
    # An explicit stack of (node, children iterator) instead of recursion.
    stack: list[tuple[dict[str, t.Any], c.Iterator[object]]] = []

    def children(node: dict[str, t.Any]) -> c.Iterator[object]:
        yield from (sub for _, sub in _subschemas(node))
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield _pointer_target(schema, ref)
        if "$dynamicRef" in node or "$recursiveRef" in node:
            yield _UNRESOLVED

    def enter(node: object) -> bool:
        if node is _UNRESOLVED:
            return True
        if not isinstance(node, dict) or id(node) in done:
            return False
        if id(node) in on_path:
            return True
        on_path.add(id(node))
        stack.append((node, children(node)))
        return False

    if enter(schema):
        return True
    while stack:
        node, pending = stack[-1]
        child = next(pending, _DONE)
        if child is _DONE:
            stack.pop()
            on_path.discard(id(node))
            done.add(id(node))
        elif enter(child):
            return True
    return False


_DONE = object()
_UNRESOLVED = object()


def _pointer_target(root: dict[str, t.Any], ref: str) -> object:
    """The subschema a ``#/...`` JSON pointer names, else ``_UNRESOLVED``."""
    if not ref.startswith("#"):
        return _UNRESOLVED
    target: object = root
    for token in urllib.parse.unquote(ref[1:]).split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and token in target:
            target = target[token]
        elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
            target = target[int(token)]
        else:
            return _UNRESOLVED
    return target


def _accepts_every_mapping(schema: c.Mapping[str, t.Any]) -> bool:
    """True for ``{"type": "object", "properties": {}}`` and its kin: no keyword
    that could refuse a mapping."""
    if not _TRIVIAL_OBJECT_KEYWORDS.issuperset(schema):
        return False
    kind = schema.get("type", "object")
    return (
        (kind == "object" or (isinstance(kind, list) and "object" in kind))
        and schema.get("properties", {}) == {}
        and schema.get("patternProperties", {}) == {}
        and schema.get("required", []) == []
        and schema.get("additionalProperties", True) in (True, {})
    )


def _is_mapping(arguments: object) -> bool:
    return type(arguments) is dict or isinstance(arguments, c.Mapping)


# -- arguments JSON cannot carry ---------------------------------------------------

_SCALARS = (str, int, float, bool, type(None))


def _deeper_than(value: object, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` levels deep."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, c.Mapping):
            items: c.Iterable[object] = node.values()
        elif isinstance(node, (list, tuple)):
            items = node
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((item, depth + 1) for item in items)
    return False


class _Opaque:
    """A place in the arguments that a JSON view could not copy."""

    __slots__ = ("path", "too_deep", "value")

    def __init__(self, path: tuple[str | int, ...], value: object, too_deep: bool) -> None:
        self.path, self.value, self.too_deep = path, value, too_deep


def _json_view(arguments: object) -> tuple[object, list[_Opaque]]:
    """A copy of ``arguments`` that jsonschema-rs can read, and the places it could
    not copy: every mapping a dict with string keys, every tuple a list, and in
    place of a value JSON cannot carry (or of one nested deeper than
    ``_VIEW_DEPTH``), None, to be replaced by :func:`_with_placeholder`."""
    opaque: list[_Opaque] = []
    root: list[object] = [None]
    # (value, where to put its copy (container, key), path)
    stack: list[tuple[object, t.Any, t.Any, tuple[str | int, ...]]] = [(arguments, root, 0, ())]
    while stack:
        value, into, slot, path = stack.pop()
        if isinstance(value, (c.Mapping, list, tuple)):
            if len(path) >= _VIEW_DEPTH:
                opaque.append(_Opaque(path, value, True))
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
            opaque.append(_Opaque(path, value, False))
    return root[0], opaque


#: What stands in a view for a value JSON cannot carry, one kind after the other:
#: the value is valid only where all three are (only where any value is).
_PLACEHOLDERS: tuple[object, ...] = (
    "\x00nous-tools: a value JSON cannot carry\x00",
    {"\x00nous-tools": "a value JSON cannot carry"},
    -1.0e308,
)


def _with_placeholder(view: object, opaque: list[_Opaque], placeholder: object) -> object:
    for place in opaque:
        if not place.path:
            return placeholder
        node: t.Any = view
        for step in place.path[:-1]:
            node = node[step]
        node[place.path[-1]] = placeholder
    return view


def _locate(arguments: object, path: c.Sequence[str | int]) -> tuple[str, object]:
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
    """The text of ``path`` (as :func:`_locate` gives it, without walking the
    arguments when no step could be an array index)."""
    for step in path:
        if type(step) is int:
            return _locate(arguments, path)[0]
    return ".".join(t.cast("c.Sequence[str]", path)) or "(root)"


class _NotJson(Exception):
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


# -- validation -----------------------------------------------------------------


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


class ArgumentValidator:
    """A JSON Schema compiled once; :meth:`validate` checks tool arguments against it.

    The schema is checked (see :func:`check_schema`) and copied, so changing the
    mapping afterwards does not change what is enforced. ``trusted=False`` refuses
    patterns that need backtracking (see the module's notes). Instances are
    immutable and safe to share between threads.
    """

    __slots__ = ("__weakref__", "_engine", "_max_depth", "_native", "_plain", "_text", "_valid")

    def __init__(
        self,
        schema: c.Mapping[str, t.Any],
        *,
        registry: referencing.Registry[t.Any] | None = None,
        trusted: bool = True,
    ) -> None:
        check_registry(registry)
        source, text = _read(schema)
        self._build(source, registry, bool(trusted), text)

    def _build(
        self,
        source: dict[str, t.Any],
        registry: referencing.Registry[t.Any] | None,
        trusted: bool,
        text: str | None,
    ) -> None:
        native = _compile(source, registry, trusted, text)
        self._native: t.Any = native
        # The schema as it was compiled, to walk: loaded from its text when needed.
        self._text = text
        self._plain: dict[str, t.Any] | None = None if text is not None else source
        cyclic = text is None or "$ref" in text or "Ref" in text  # $dynamicRef, $recursiveRef
        cycles = cyclic and _has_ref_cycle(self._schema())
        self._max_depth = MAX_RECURSIVE_DEPTH if cycles else None
        # The quick check: True only when the arguments are certainly valid.
        self._valid: c.Callable[[t.Any], bool]
        if _accepts_every_mapping(source):
            self._valid, self._engine = _is_mapping, "mapping"
        elif self._max_depth is None:
            self._valid, self._engine = native.is_valid, "jsonschema-rs"
        else:
            self._valid, self._engine = self._shallow_and_valid, "jsonschema-rs"

    def validate(self, arguments: c.Mapping[str, t.Any]) -> ValidationFailure | None:
        """None when ``arguments`` satisfy the schema, else every violation.

        Never raises for any value of ``arguments`` and never changes it.
        Arguments nested too deeply to validate give
        ``("invalid", [("(root)", "arguments nested too deeply to validate")])``.
        """
        try:
            if self._valid(arguments):
                return None
        except Exception:  # e.g. a value jsonschema-rs cannot read: not sure
            pass
        return self._explain(arguments)

    def _schema(self) -> dict[str, t.Any]:
        """The schema as plain dicts and lists (loaded once, when first needed)."""
        plain = self._plain
        if plain is None:
            plain = self._plain = _tree({}, self._text)
        return plain

    @property
    def engine(self) -> str:
        """What answers "valid" for this schema: ``"jsonschema-rs"``, or ``"mapping"``
        (a schema that accepts any mapping: an ``isinstance`` test)."""
        return self._engine

    def _shallow_and_valid(self, arguments: t.Any) -> bool:
        return not _deeper_than(arguments, MAX_RECURSIVE_DEPTH) and bool(
            self._native.is_valid(arguments)
        )

    def _explain(self, arguments: t.Any) -> ValidationFailure | None:
        """The slow path: jsonschema-rs lists every violation (or finds none)."""
        try:
            if self._max_depth is not None and _deeper_than(arguments, self._max_depth):
                return _failure_at_root(_TOO_DEEP)
            try:
                errors = list(self._native.iter_errors(arguments))
            except ValueError:  # a value (or a key) jsonschema-rs cannot read
                return self._explain_view(arguments)
            if not errors:
                return None
            try:
                return _describe(arguments, errors, self._schema(), [])
            except _NotJson:
                return self._explain_view(arguments)
        except RecursionError:
            return _failure_at_root(_TOO_DEEP)
        except Exception as exc:  # never raise, whatever the arguments hold
            return _failure_at_root(
                _shorten(f"arguments could not be validated: {type(exc).__name__}: {exc}")
            )

    def _explain_view(self, arguments: t.Any) -> ValidationFailure | None:
        """:meth:`_explain` for arguments holding what jsonschema-rs cannot read: a
        JSON view of them, with each such value replaced in turn by one of
        ``_PLACEHOLDERS``; valid only when every view is."""
        view, opaque = _json_view(arguments)
        for placeholder in _PLACEHOLDERS if opaque else (None,):
            if opaque:
                view = _with_placeholder(view, opaque, placeholder)
            errors = list(self._native.iter_errors(view))
            if errors:
                for error in errors:
                    place = _opaque_at(opaque, error.instance_path)
                    if place is not None and place.too_deep:
                        return _failure_at_root(_TOO_DEEP)
                return _describe(arguments, errors, self._schema(), opaque)
        return None


def _opaque_at(opaque: list[_Opaque], path: c.Sequence[str | int]) -> _Opaque | None:
    """The place of ``opaque`` at ``path`` or above it (steps compared as text: an
    object key may come back from jsonschema-rs as an ``int``)."""
    steps = [str(step) for step in path]
    for place in opaque:
        if len(place.path) <= len(steps) and all(
            str(a) == b for a, b in zip(place.path, steps, strict=False)
        ):
            return place
    return None


def compile_validator(
    schema: c.Mapping[str, t.Any],
    *,
    registry: referencing.Registry[t.Any] | None = None,
    trusted: bool = True,
) -> ArgumentValidator:
    """Compile ``schema`` once: the same as ``ArgumentValidator(schema, ...)``."""
    return ArgumentValidator(schema, registry=registry, trusted=trusted)


# -- wording --------------------------------------------------------------------


def _failure_at_root(text: str) -> ValidationFailure:
    return ValidationFailure(f"Invalid values: (root): {text}", ("invalid", [("(root)", text)]))


def _shorten(text: str, limit: int = _MAX_TEXT) -> str:
    """``text`` cut in the middle to at most ``limit`` characters: a message puts
    the (possibly huge) value first and what is wrong with it last."""
    if len(text) <= limit:
        return text
    tail = (limit - 3) // 3
    return text[: limit - 3 - tail] + "..." + text[len(text) - tail :]


def _format_path(parts: c.Iterable[object]) -> str:
    """``filter.min``, ``tags[1]``, ``items[0].id``; ``(root)`` for no parts. An
    ``int`` is an array index (object keys are always strings here)."""
    text = ""
    for part in parts:
        if type(part) is int:
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(root)"


def _sort_key(path: c.Sequence[object]) -> tuple[tuple[int, int, str], ...]:
    return tuple([(0, part, "") if type(part) is int else (1, 0, str(part)) for part in path])


def _listed(entries: list[str]) -> str:
    shown = ", ".join(entries[:_MAX_LISTED])
    if len(entries) > _MAX_LISTED:
        shown += f", ... and {len(entries) - _MAX_LISTED} more"
    return shown


_Kind = jsonschema_rs.ValidationErrorKind
_REQUIRED = _Kind.Required
_TYPE = _Kind.Type
_FORMAT = _Kind.Format
_BACKTRACKED = _Kind.BacktrackLimitExceeded
_FALSE = _Kind.FalseSchema
_ADDITIONAL = _Kind.AdditionalProperties
_ENUM = _Kind.Enum
_CONST = _Kind.Constant


def _describe(
    arguments: object, errors: list[t.Any], schema: dict[str, t.Any], opaque: list[_Opaque]
) -> ValidationFailure:
    """jsonschema-rs's errors in Nous's words (see the module's notes)."""
    missing: list[str] = []
    mismatches: list[tuple[str, str, str]] = []
    invalid: list[tuple[str, str]] = []
    seen: set[object] = set()  # a violation can be found once per failing subschema
    located = [(error.instance_path, error) for error in errors]
    if len(located) > 1:
        located.sort(key=lambda pair: _sort_key(pair[0]))
    for path, error in located:
        kind = error.kind
        kind_type = type(kind)
        place = _opaque_at(opaque, path) if opaque else None
        if place is not None:  # a value JSON cannot carry, where one was not accepted
            expected = "a JSON value"
            if kind_type is _TYPE and len(path) == len(place.path):
                expected = " or ".join(_expected_types(kind, error, schema))
            mismatch = (
                _shorten(_path_text(arguments, place.path)),
                expected,
                _actual(place.value),
            )
            if mismatch not in seen:
                seen.add(mismatch)
                mismatches.append(mismatch)
            continue
        if kind_type is _REQUIRED:
            where = _path_text(arguments, path)
            name = str(kind.property)
            full = _shorten(name if not path else f"{where}.{name}")
            if ("m", full) not in seen:
                seen.add(("m", full))
                missing.append(full)
        elif kind_type is _TYPE or kind_type is _FORMAT:
            # A string that is not a date-time is the wrong type of value for the
            # tool, worded as conversion words it: "expected date-time, got string".
            where, value = _locate(arguments, path)
            if type(value) is float and not math.isfinite(value):
                raise _NotJson
            if kind_type is _TYPE:
                expected = " or ".join(_expected_types(kind, error, schema))
            else:
                expected = str(kind.format)
            mismatch = (_shorten(where), expected, _actual(value))
            if mismatch not in seen:
                seen.add(mismatch)
                mismatches.append(mismatch)
        else:
            if kind_type is _BACKTRACKED:
                where, value = _locate(arguments, path)
                text = (
                    f"{_shorten(repr(value), 60)} could not be matched within "
                    f"{BACKTRACK_LIMIT} backtracking steps"
                )
            elif kind_type is _ADDITIONAL or (
                kind_type is _FALSE and error.schema_path[-1:] == ["additionalProperties"]
            ):
                where, value = _locate(arguments, path)
                node = _schema_at(schema, error.schema_path[:-1])
                text = _unknown_keys(value, node, path) or _shorten(error.message)
            else:
                if kind_type is _ENUM or kind_type is _CONST:
                    where, value = _locate(arguments, path)
                    if type(value) is float and not math.isfinite(value):
                        raise _NotJson
                else:
                    where = _path_text(arguments, path)
                text = _shorten(error.message)
            violation = (_shorten(where), text)
            if violation not in seen:
                seen.add(violation)
                invalid.append(violation)
    message, original = failure_message(missing, mismatches, invalid)
    return ValidationFailure(message, original)


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
    return _shorten(unknown_properties(extras, known, nested=bool(path)))


def _expected_types(kind: t.Any, error: t.Any, schema: dict[str, t.Any]) -> list[str]:
    """The types a ``type`` error names, in the order the schema writes them."""
    types = [str(name) for name in kind.types]
    if len(types) > 1:
        written = _schema_at(schema, error.schema_path)
        if isinstance(written, list) and sorted(map(str, written)) == sorted(types):
            return [str(name) for name in written]
    return types


def _schema_at(root: dict[str, t.Any], path: c.Sequence[str | int]) -> object:
    """The node at ``path`` (a schema path: keywords, keys and indices, ``$ref``
    steps followed when they point into ``root``), or None."""
    node: object = root
    for step in path:
        if isinstance(node, dict) and step == "$ref" and isinstance(node.get("$ref"), str):
            node = _pointer_target(root, node["$ref"])
            if node is _UNRESOLVED:
                return None
            continue
        inside = isinstance(node, dict) and step in node
        if inside or (isinstance(node, list) and type(step) is int and 0 <= step < len(node)):
            node = node[step]  # type: ignore[index]
        else:
            return None
    return node


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


#: Validators by schema (see :func:`shared_validator`); an entry goes when the last
#: tool holding its validator does.
_SHARED: weakref.WeakValueDictionary[str, ArgumentValidator] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def shared_validator(
    schema: c.Mapping[str, t.Any],
    *,
    registry: referencing.Registry[t.Any] | None = None,
    trusted: bool = True,
) -> ArgumentValidator:
    """An :class:`ArgumentValidator` for ``schema``: the same instance for every
    schema that reads the same (and is trusted alike), so tools with identical
    schemas share one compiled validator (validators are immutable and thread-safe).

    "The same" means equal as plain JSON values with their keys in the same order
    and their types alike (``1`` is not ``True``, ``1.0`` is not ``1``); a schema
    with anything else in it (a value JSON cannot hold), or used with a
    ``registry``, gets a validator of its own.

    >>> a = shared_validator({"type": "object", "properties": {"q": {"type": "string"}}})
    >>> a is shared_validator({"type": "object", "properties": {"q": {"type": "string"}}})
    True
    """
    check_registry(registry)
    source, text = _read(schema)
    trusted = bool(trusted)
    if text is None or registry is not None:
        validator = ArgumentValidator.__new__(ArgumentValidator)
        validator._build(source, registry, trusted, text)
        return validator
    key = f"{trusted}:{text}"
    with _SHARED_LOCK:
        found = _SHARED.get(key)
    if found is not None:
        return found
    # Compiled outside the lock; the first one stays.
    validator = ArgumentValidator.__new__(ArgumentValidator)
    validator._build(source, None, trusted, text)
    with _SHARED_LOCK:
        return _SHARED.setdefault(key, validator)
