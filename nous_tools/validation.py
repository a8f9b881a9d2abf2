"""Argument validation: full JSON Schema, every violation reported in Nous's words.

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

**jsonschema is the source of truth.** The dialect is the one the schema names in
``$schema`` (JSON Schema 2020-12 when it names none). Arguments are Python values,
so any ``Mapping`` counts as a JSON object and a ``tuple`` as an array.

**Formats** in :data:`CHECKED_FORMATS` are asserted with jsonschema's format
checker: ``date-time``, ``date``, ``time`` and ``duration`` read as argument
conversion reads them (``_iso``: RFC 3339 with the UTC offset optional), ``email``,
``uri``, ``uuid``, ``ipv4`` and ``ipv6`` by jsonschema's own checks. Any other
format is an annotation. A failure is a type mismatch, ``expected date-time``.

**Patterns** are read by ``re``, or by the ``regex`` module where ``re`` cannot
read them (``\\p{L}`` and the other ECMA-262 Unicode property classes).

**References.** :func:`check_schema` resolves every ``$ref`` at construction: into
the schema itself, or into the ``referencing.Registry`` given. A remote schema is
never fetched.

**Speed.** Valid arguments are the common case, so each schema also gets, once, a
quick check that can only say "valid" or "not sure". "Not sure" sends the arguments
to jsonschema, which lists every violation, or finds none and the arguments are
valid after all. The quick check must never accept what jsonschema rejects; which
one a schema gets is decided at construction (:attr:`ArgumentValidator.engine`):

1. ``"mapping"``: a schema that accepts any object (``{"type": "object"}``).
2. ``"jsonschema-rs"``: the Rust validator's ``is_valid``, with every ``format``
   the schema names checked by the same Python functions as jsonschema's (or by
   none, as jsonschema does). Not used (see ``_native_blocker``) where the two could
   disagree or Rust could recurse without bound: ``not``/``oneOf``/``if`` (a
   stricter inner verdict is a looser outer one), a ``multipleOf`` that is not an
   integer (it divides exactly, jsonschema in floats), ``uniqueItems`` and ``$ref``
   cycles (recursion as deep as the arguments), a ``schema_registry``, draft 3,
   and patterns whose ECMA-262 reading is looser than Python's (``\\D``, ``\\W``,
   ``\\s``, ``\\b``, ``\\p{..}``, flags, a negated class with ``\\d``; in
   ``patternProperties``, whose keys must match alike, also ``\\d``, ``\\w``,
   ``.`` and ``$``).
3. ``"flat"``: for a flat object of scalar fields (``type``/``enum``/``const``/
   ``format`` only) a few dict lookups, generated once as straight-line Python.
4. ``"fastjsonschema"``: the function fastjsonschema compiles, except for a schema
   with a keyword it does not implement (``prefixItems``, ``unevaluatedProperties``,
   ``dependentRequired``, ...), a ``$ref`` with sibling keywords (fastjsonschema
   follows draft 7 and ignores them), ``$id``, a non-local ``$ref``, ``multipleOf``
   (the two divide differently), or ``not``/``oneOf``/``if`` (see
   ``_fast_path_blocker``).
5. ``"jsonschema"``: none; jsonschema answers every call.

No engine ever fetches a remote schema here, and none writes defaults into the
arguments.

**Wording.** Missing required fields, type mismatches and every other violation
are listed in that order, each kind once::

    Missing required fields: name, filter.min; Type mismatch: tags[1]: expected
    string, got integer; Invalid values: age: -1 is less than the minimum of 0

Paths join object keys with ``.`` and show array indices as ``[i]``; the arguments
themselves are ``(root)``. Long messages are cut to about 200 characters, so a
megabyte of argument never becomes a megabyte of error.
"""

from __future__ import annotations

import collections.abc as c
import copy
import functools
import json
import re
import threading
import typing as t
import urllib.parse
import weakref

import attrs
import jsonschema
import jsonschema.exceptions
import jsonschema.protocols
import jsonschema.validators
import jsonschema_specifications
import referencing
import referencing.exceptions
import referencing.jsonschema
import regex

from . import _iso
from ._text import json_type as _json_type
from ._wording import violation_text

__all__ = [
    "ArgumentValidator",
    "ValidationFailure",
    "check_schema",
    "compile_validator",
    "failure_message",
    "shared_validator",
]

#: Longest text kept from one jsonschema message (or one path) in a failure message.
_MAX_TEXT = 200
#: Most violations of one kind spelt out in a failure message; ``original_error``
#: keeps them all.
_MAX_LISTED = 50

_TOO_DEEP = "arguments nested too deeply to validate"

_JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")

#: Keywords that never change whether an instance is valid (in any draft, with
#: ``format`` not asserted). They may sit beside ``$ref`` on the compiled path.
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

#: 2019-09/2020-12 keywords that fastjsonschema (a draft 7 engine) does not apply:
#: it would accept what jsonschema rejects, so such schemas skip the compiled path.
_NEWER_KEYWORDS = frozenset(
    {
        "$anchor",
        "$dynamicAnchor",
        "$dynamicRef",
        "$recursiveAnchor",
        "$recursiveRef",
        "additionalItems",
        "dependentRequired",
        "dependentSchemas",
        "maxContains",
        "minContains",
        "prefixItems",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)

#: Keywords whose outcome does not grow with their subschemas' (``not`` flips it,
#: ``oneOf`` wants exactly one, ``if`` picks a branch). fastjsonschema is in places
#: stricter than jsonschema (``$`` as end of string, a bool against ``minimum`` in
#: draft 4, only ``dict`` as an object, ...), which is harmless under ``allOf``,
#: ``anyOf``, ``properties`` and the like (a stricter answer only sends the call to
#: jsonschema) but would turn into a looser answer under these.
_NON_MONOTONE = ("if", "not", "oneOf")

#: Keywords that apply to objects only. fastjsonschema counts only a ``dict`` as an
#: object, jsonschema here any ``Mapping``: where they appear without ``type``, the
#: compiled copy gets ``"type": "object"`` so a non-dict mapping is sent to jsonschema
#: instead of passing unexamined.
_OBJECT_KEYWORDS = frozenset(
    {
        "additionalProperties",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "maxProperties",
        "minProperties",
        "patternProperties",
        "properties",
        "propertyNames",
        "required",
        "unevaluatedProperties",
    }
)

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


def check_schema(schema: object, *, registry: referencing.Registry[t.Any] | None = None) -> None:
    """Raise unless ``schema`` is a valid JSON Schema whose ``$ref``\\ s all resolve.

    The metaschema is the one named by ``$schema`` (2020-12 when none is named).
    Every violation is listed, sorted by where it is and then by what it says (the
    same order on every run). Then every ``$ref`` must resolve: to a place inside
    the schema, or to a schema in ``registry`` (a :class:`referencing.Registry`).
    A ``$ref`` to a remote URI that ``registry`` does not hold is refused, since it
    is never fetched; a JSON pointer that points nowhere is refused too, since no
    arguments could ever be validated against it.

    Raises ``TypeError`` when ``schema`` is not a mapping and ``ValueError``
    otherwise; both messages name the tool option ``parameters``, e.g.
    ``Tool option 'parameters' is not a valid JSON Schema: 5 is not of type
    'object' (at path properties)``.
    """
    _checked_copy(schema, registry)


def _invalid_schema(problems: list[tuple[str, tuple[object, ...]]]) -> ValueError:
    shown = "; ".join(
        f"{_shorten(reason)} (at path {_shorten(_format_path(where))})"
        for reason, where in problems[:_MAX_LISTED]
    )
    if len(problems) > _MAX_LISTED:
        shown += f"; ... and {len(problems) - _MAX_LISTED} more"
    return ValueError(f"Tool option 'parameters' is not a valid JSON Schema: {shown}")


def _checked_copy(
    schema: object, registry: referencing.Registry[t.Any] | None = None
) -> dict[str, t.Any]:
    """``schema`` as plain dicts and lists, checked as :func:`check_schema` says."""
    if not isinstance(schema, c.Mapping):
        raise TypeError(
            f"Tool option 'parameters' must be a JSON Schema mapping, got {type(schema).__name__}"
        )
    if registry is not None and not isinstance(registry, referencing.Registry):
        raise TypeError(
            "Tool option 'schema_registry' must be a referencing.Registry or None, "
            f"got {type(registry).__name__}"
        )
    try:
        plain = t.cast("dict[str, t.Any]", _plain(schema))
        key = _cache_key(plain) if registry is None else None
        if key is not None and key in _KNOWN_GOOD:
            return plain
        cls = _validator_class(plain)
        problems = _metaschema_problems(plain, cls)
    except RecursionError:
        raise _invalid_schema([("the schema is nested too deeply", ())]) from None
    except Exception as exc:  # e.g. an unhashable "$schema" value
        raise _invalid_schema([(f"{type(exc).__name__}: {exc}", ())]) from None
    if problems:
        raise _invalid_schema(problems)
    _check_references(plain, cls, registry)
    if key is not None:
        if len(_KNOWN_GOOD) >= 1024:
            _KNOWN_GOOD.clear()
        _KNOWN_GOOD.add(key)
    return plain


#: Schemas already checked (a metaschema check takes about a millisecond, and a
#: tool's schema is checked by ``Tool`` and again by its ``ArgumentValidator``).
_KNOWN_GOOD: set[str] = set()


def _cache_key(plain: object) -> str | None:
    """A text that tells this schema from every other, or None (do not cache)."""
    try:
        json.dumps(plain, allow_nan=False)  # JSON values only; repr tells 1 from True
    except (TypeError, ValueError, RecursionError):
        return None
    return repr(plain)


_METASCHEMA_VALIDATORS: dict[type[t.Any], jsonschema.protocols.Validator] = {}


def _metaschema_problems(
    plain: dict[str, t.Any], cls: type[jsonschema.protocols.Validator]
) -> list[tuple[str, tuple[object, ...]]]:
    """Every metaschema violation as ``(reason, path)``, each once, in a fixed order."""
    meta = _METASCHEMA_VALIDATORS.get(cls)
    if meta is None:
        meta_cls = jsonschema.validators.validator_for(cls.META_SCHEMA, default=cls)
        checker = jsonschema.FormatChecker()
        checker.checkers = dict(cls.FORMAT_CHECKER.checkers)
        checker.checkers["regex"] = (_is_regex, ())
        meta = meta_cls(cls.META_SCHEMA, format_checker=checker)
        _METASCHEMA_VALIDATORS[cls] = meta
    found = {
        (_schema_error_reason(error), tuple(error.absolute_path))
        for error in meta.iter_errors(plain)
    }
    return sorted(found, key=lambda problem: (_sort_key(problem[1]), problem[0]))


def _schema_error_reason(error: jsonschema.exceptions.ValidationError) -> str:
    path = tuple(error.absolute_path)
    if (
        error.validator == "anyOf"
        and path
        and path[-1] == "type"
        and isinstance(error.instance, str)
    ):
        return f"unknown type {error.instance!r}, expected one of {', '.join(_JSON_TYPES)}"
    if error.validator == "format" and error.validator_value == "regex":
        return f"{error.instance!r} is not a regular expression"
    return error.message


def _check_references(
    plain: dict[str, t.Any],
    cls: type[jsonschema.protocols.Validator],
    registry: referencing.Registry[t.Any] | None,
) -> None:
    """Resolve every ``$ref`` now (with ``registry``'s schemas and the metaschemas),
    so that none fails later, at a call."""
    specification = _specification(cls)
    known = _with_metaschemas(registry)
    root = known.resolver_with_root(specification.create_resource(plain))
    remote: list[tuple[str, tuple[object, ...]]] = []
    nowhere: list[tuple[str, tuple[object, ...]]] = []
    unevaluated = False
    ecma_patterns = False
    stack: list[tuple[object, tuple[object, ...], referencing._core.Resolver[t.Any]]] = [
        (plain, (), root)
    ]
    seen: set[int] = set()
    while stack:
        node, where, resolver = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        if where and specification.id_of(node) is not None:
            resolver = resolver.in_subresource(specification.create_resource(node))
        unevaluated = unevaluated or "unevaluatedProperties" in node
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict) and not all(_is_python_regex(p) for p in patterns):
            ecma_patterns = True
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                resolver.lookup(ref)
            except _NOWHERE:
                nowhere.append((ref, (*where, "$ref")))
            except referencing.exceptions.Unresolvable:  # a URI the registry lacks
                remote.append((ref, (*where, "$ref")))
        stack.extend((sub, (*where, *step), resolver) for step, sub in _subschemas(node))
    if nowhere:
        raise _invalid_schema(
            [(f"$ref {ref!r} points to nothing in the schema", at) for ref, at in sorted(nowhere)]
        )
    if remote:
        refs = ", ".join(
            f"{ref!r} (at path {_format_path(at)})" for ref, at in sorted(remote, key=str)
        )
        raise ValueError(
            f"Tool option 'parameters' refers to a remote schema ({_shorten(refs)}), which is "
            f"never fetched: add it to a referencing.Registry and pass it as "
            f"Tool(schema_registry=...)"
        )
    if unevaluated and ecma_patterns:
        raise ValueError(
            "Tool option 'parameters' uses unevaluatedProperties beside a patternProperties "
            "pattern that only the regex module reads (e.g. \\p{L}); jsonschema cannot apply "
            "both: write the pattern in Python's re syntax"
        )


#: A ``$ref`` into a known document that finds nothing there.
_NOWHERE = (
    referencing.exceptions.PointerToNowhere,
    referencing.exceptions.NoSuchAnchor,
    referencing.exceptions.InvalidAnchor,
)


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


def _specification(cls: type[jsonschema.protocols.Validator]) -> referencing.Specification[t.Any]:
    dialect = cls.META_SCHEMA.get("$id") or cls.META_SCHEMA.get("id") or ""
    return referencing.jsonschema.specification_with(
        str(dialect).rstrip("#"), default=referencing.jsonschema.DRAFT202012
    )


def _with_metaschemas(registry: referencing.Registry[t.Any] | None) -> referencing.Registry[t.Any]:
    """``registry`` (or an empty one) plus the metaschemas jsonschema knows; nothing
    is ever retrieved from the network."""
    known: referencing.Registry[t.Any] = jsonschema_specifications.REGISTRY
    return known.combine(registry or referencing.Registry())


def _plain(value: object) -> object:
    """A deep copy of ``value`` with every mapping a dict and every tuple a list."""
    if isinstance(value, c.Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _validator_class(schema: c.Mapping[str, t.Any]) -> type[jsonschema.protocols.Validator]:
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


def _is_modern(cls: type[jsonschema.protocols.Validator]) -> bool:
    return cls in (jsonschema.Draft201909Validator, jsonschema.Draft202012Validator)


def _is_object(checker: object, instance: object) -> bool:
    return isinstance(instance, c.Mapping)


def _is_array(checker: object, instance: object) -> bool:
    return isinstance(instance, (list, tuple))


# -- patterns and formats ---------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> t.Any:
    """``pattern`` compiled by ``re``, or by the ``regex`` module when ``re`` cannot
    read it (``\\p{L}`` and the other Unicode property classes of ECMA-262)."""
    try:
        return re.compile(pattern)
    except re.error:
        return regex.compile(pattern)


def _search(pattern: str, text: str) -> bool:
    return _compiled(pattern).search(text) is not None


def _is_regex(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        _compiled(value)
    except (re.error, regex.error):
        return False
    return True


def _is_python_regex(pattern: object) -> bool:
    try:
        re.compile(t.cast(str, pattern))
    except (re.error, TypeError):
        return False
    return True


def _pattern(validator: t.Any, pattern: str, instance: t.Any, schema: t.Any) -> t.Any:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield jsonschema.exceptions.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: t.Any, patterns: t.Any, instance: t.Any, schema: t.Any) -> t.Any:
    if not validator.is_type(instance, "object"):
        return
    for key in instance:
        if not isinstance(key, str):  # never from JSON; a pattern cannot match it
            yield jsonschema.exceptions.ValidationError(
                f"{key!r} is not a string, so no pattern of patternProperties applies to it"
            )
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if isinstance(key, str) and _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    original: t.Any,
) -> c.Callable[[t.Any, t.Any, t.Any, t.Any], t.Any]:
    """jsonschema's ``additionalProperties``, with ``patternProperties`` matched as
    :func:`_pattern_properties` matches them."""

    def check(validator: t.Any, extra: t.Any, instance: t.Any, schema: t.Any) -> t.Any:
        patterns = schema.get("patternProperties")
        if not patterns or not validator.is_type(instance, "object"):
            yield from original(validator, extra, instance, schema)
            return
        properties = schema.get("properties", {})
        extras = [
            key
            for key in instance
            if key not in properties
            and not (isinstance(key, str) and any(_search(p, key) for p in patterns))
        ]
        if validator.is_type(extra, "object"):
            for key in extras:
                yield from validator.descend(instance[key], extra, path=key)
        elif not extra and extras:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(key) for key in sorted(extras, key=str))
            shown = ", ".join(repr(p) for p in sorted(patterns))
            yield jsonschema.exceptions.ValidationError(
                f"{joined} {verb} not match any of the regexes: {shown}"
            )

    return check


#: The formats validation asserts. date-time, date, time and duration are read as
#: argument conversion reads them (``_iso``); the others are jsonschema's checks.
CHECKED_FORMATS = ("date", "date-time", "duration", "email", "ipv4", "ipv6", "time", "uri", "uuid")

_FORMAT_CHECKER = jsonschema.FormatChecker(["email", "ipv4", "ipv6", "uri", "uuid"])
for _name, _check in (
    ("date", _iso.is_date),
    ("date-time", _iso.is_datetime),
    ("duration", _iso.is_duration),
    ("time", _iso.is_time),
):
    _FORMAT_CHECKER.checks(_name)(_check)


def _conforms(name: str) -> c.Callable[[object], bool]:
    """The check of format ``name`` as a plain predicate (for the fast paths)."""
    conforms = _FORMAT_CHECKER.conforms
    return lambda value: conforms(value, name)


@functools.lru_cache(maxsize=1)
def _fast_formats() -> dict[str, c.Callable[[object], bool]]:
    """fastjsonschema's ``formats``: ours, checked as jsonschema checks them, and
    every format fastjsonschema knows by itself switched off (annotations here)."""
    from fastjsonschema.draft07 import CodeGeneratorDraft07

    builtin = [*CodeGeneratorDraft07.FORMAT_REGEXS, "regex"]
    return {
        **{name: (lambda value: True) for name in builtin},
        **{name: _conforms(name) for name in CHECKED_FORMATS},
    }


#: ``jsonschema.validators.extend`` (untyped in its stubs), typed for ``mypy --strict``.
_extend: c.Callable[..., type[jsonschema.protocols.Validator]] = jsonschema.validators.extend

_PYTHON_AWARE: dict[type[t.Any], type[jsonschema.protocols.Validator]] = {}


def _python_aware(
    cls: type[jsonschema.protocols.Validator],
) -> type[jsonschema.protocols.Validator]:
    """``cls`` with any Mapping an object, any tuple an array, and patterns read as
    :func:`_compiled` reads them (made once per draft)."""
    extended = _PYTHON_AWARE.get(cls)
    if extended is None:
        checker = cls.TYPE_CHECKER.redefine_many({"object": _is_object, "array": _is_array})
        keywords: dict[str, t.Any] = {}
        if "pattern" in cls.VALIDATORS:
            keywords["pattern"] = _pattern
        if "patternProperties" in cls.VALIDATORS:
            keywords["patternProperties"] = _pattern_properties
        if "additionalProperties" in cls.VALIDATORS:
            keywords["additionalProperties"] = _additional_properties(
                cls.VALIDATORS["additionalProperties"]
            )
        extended = _extend(cls, validators=keywords, type_checker=checker)
        _PYTHON_AWARE[cls] = extended
    return extended


# -- the walk over a schema ---------------------------------------------------


@attrs.define
class _Walk:
    """What a walk over a schema's subschemas found."""

    blockers: list[str] = attrs.Factory(list)
    unresolved: list[tuple[str, tuple[object, ...]]] = attrs.Factory(list)
    has_id: bool = False


def _walk(
    root: dict[str, t.Any],
    *,
    modern: bool,
    visit: c.Callable[[dict[str, t.Any]], None] | None = None,
) -> _Walk:
    """Visit every subschema of ``root`` (following local ``$ref`` pointers, calling
    ``visit`` on each) and note what keeps the compiled path from agreeing with
    jsonschema, and which pointers lead nowhere."""
    found = _Walk()
    seen: set[int] = set()
    stack: list[tuple[object, tuple[object, ...]]] = [(root, ())]
    while stack:
        node, where = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        if visit is not None:
            visit(node)
        if isinstance(node.get("$id"), str) or isinstance(node.get("id"), str):
            found.has_id = True
            found.blockers.append("$id changes the base URI")
        if modern:
            newer = sorted(_NEWER_KEYWORDS.intersection(node))
            if newer:
                found.blockers.append(f"{newer[0]} is not implemented by fastjsonschema")
            if isinstance(node.get("items"), list):
                found.blockers.append("items as a list")
        for keyword in _NON_MONOTONE:
            if keyword in node:
                found.blockers.append(f"{keyword} (not monotone)")
        if "multipleOf" in node:  # fastjsonschema divides in Decimal, jsonschema in float
            found.blockers.append("multipleOf (the two libraries' arithmetic differs)")
        for keyword in ("enum", "const"):
            if keyword in node and _has_ref_key(node[keyword]):
                found.blockers.append(f"a $ref key inside {keyword}")
        ref = node.get("$ref")
        if ref is not None:
            target = _follow_ref(root, ref, node, where, found, modern=modern)
            if target is not None:
                stack.append((target, where))
        for keyword in _ONE_SUBSCHEMA:
            if keyword in node:
                stack.append((node[keyword], (*where, keyword)))
        items = node.get("items")
        if isinstance(items, list):
            stack.extend((item, (*where, "items", i)) for i, item in enumerate(items))
        elif items is not None:
            stack.append((items, (*where, "items")))
        for keyword in _LIST_OF_SUBSCHEMAS:
            group = node.get(keyword)
            if isinstance(group, list):
                stack.extend((item, (*where, keyword, i)) for i, item in enumerate(group))
        for keyword in _MAP_OF_SUBSCHEMAS:
            group = node.get(keyword)
            if isinstance(group, dict):
                stack.extend((item, (*where, keyword, key)) for key, item in group.items())
    return found


def _follow_ref(
    root: dict[str, t.Any],
    ref: object,
    node: dict[str, t.Any],
    where: tuple[object, ...],
    found: _Walk,
    *,
    modern: bool,
) -> object | None:
    """The subschema a local JSON-pointer ``$ref`` names, or None (noting why)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        found.blockers.append("a $ref outside the schema")
        return None
    if modern and not _ANNOTATIONS.issuperset(node.keys() - {"$ref"}):
        found.blockers.append("keywords beside $ref")
    fragment = urllib.parse.unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        found.blockers.append("a $ref to an anchor")
        return None
    target: object = root
    for token in fragment.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and token in target:
            target = target[token]
        elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
            target = target[int(token)]
        else:
            found.blockers.append("an unresolvable $ref")
            found.unresolved.append((ref, (*where, "$ref")))
            return None
    return target


def _has_ref_key(value: object) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "$ref" in item:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _fast_path_blocker(schema: dict[str, t.Any], cls: type[t.Any]) -> str | None:
    """Why fastjsonschema could accept arguments jsonschema rejects, or None.

    fastjsonschema picks its draft from ``$schema`` by substring (draft 2019-09
    rules when none is named, i.e. draft 7 plus formats); jsonschema picks it by
    exact URI. The two must name the same draft, and the schema must not use what
    the draft 7 engine does not implement.
    """
    declared = schema.get("$schema", "")
    if not isinstance(declared, str):
        return "a $schema that is not a string"
    older = {
        jsonschema.Draft4Validator: "draft-04",
        jsonschema.Draft6Validator: "draft-06",
        jsonschema.Draft7Validator: "draft-07",
    }
    marks = [mark for mark in older.values() if mark in declared]
    if _is_modern(cls):
        if marks:
            return f"$schema {declared!r} means different drafts to the two libraries"
    elif cls not in older or marks != [older[cls]]:
        return f"$schema {declared!r} is not a draft fastjsonschema implements"
    blockers = _walk(schema, modern=_is_modern(cls)).blockers
    return blockers[0] if blockers else None


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


#: Exact Python classes that certainly have each JSON type (subclasses, ``1.0`` as
#: an integer and the like are left to the slower paths, which know better).
_EXACT_TYPES: dict[str, frozenset[type[t.Any]]] = {
    "array": frozenset({list}),
    "boolean": frozenset({bool}),
    "integer": frozenset({int}),
    "null": frozenset({type(None)}),
    "number": frozenset({int, float}),
    "object": frozenset({dict}),
    "string": frozenset({str}),
}
_FLAT_ROOT_KEYWORDS = _ANNOTATIONS | {
    "additionalProperties",
    "format",
    "properties",
    "required",
    "type",
}
_FLAT_FIELD_KEYWORDS = _ANNOTATIONS | {"const", "enum", "format", "type"}


class _Absent:
    """The class of the marker for a missing field (no argument value has it)."""


_ABSENT = _Absent()

_Field = tuple[
    str,
    "frozenset[type[t.Any]] | None",
    "frozenset[str | None] | None",
    "c.Callable[[object], bool] | None",
]


def _flat_field(name: object, schema: object) -> _Field | None:
    if not isinstance(name, str):
        return None
    if schema is True or schema == {}:
        return (name, None, None, None)
    if not isinstance(schema, dict) or not _FLAT_FIELD_KEYWORDS.issuperset(schema):
        return None
    types: frozenset[type[t.Any]] | None = None
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not all(isinstance(kind, str) and kind in _EXACT_TYPES for kind in names):
            return None
        types = frozenset().union(*(_EXACT_TYPES[kind] for kind in names))
    choices: frozenset[str | None] | None = None
    for keyword, values in (("enum", schema.get("enum")), ("const", [schema.get("const")])):
        if keyword not in schema:
            continue
        # Only strings and null: Python's == would make True equal 1 (JSON's does not).
        if not isinstance(values, list) or not all(v is None or isinstance(v, str) for v in values):
            return None
        kept = frozenset(t.cast("list[str | None]", values))
        choices = kept if choices is None else choices & kept
    checked = schema.get("format")
    if checked is not None and not isinstance(checked, str):
        return None
    conforms = _conforms(checked) if checked in CHECKED_FORMATS else None
    return (name, types, choices, conforms)


def _compile_flat(schema: dict[str, t.Any]) -> c.Callable[[t.Any], bool] | None:
    """A check for the commonest tool schema: one object of scalar fields, each
    with at most ``type``, ``enum``, ``const`` and ``format`` (any draft). It accepts only what
    jsonschema accepts and answers False for anything it is not sure of.
    None when ``schema`` is not of that shape."""
    if not _FLAT_ROOT_KEYWORDS.issuperset(schema) or schema.get("type", "object") != "object":
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    closed = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    if closed not in (True, False, {}) or not all(isinstance(n, str) for n in required):
        return None
    fields = [_flat_field(name, sub) for name, sub in properties.items()]
    if any(field is None for field in fields):
        return None
    known = t.cast("list[_Field]", fields)
    needed = tuple(dict.fromkeys(required))
    return _generate_flat(known, needed, closed=closed is False)


def _generate_flat(
    fields: list[_Field], needed: tuple[str, ...], *, closed: bool
) -> c.Callable[[t.Any], bool]:
    """The flat check as straight-line Python, generated once per schema (as
    fastjsonschema does): a few dict lookups and ``type() is`` tests per call."""
    env: dict[str, t.Any] = {"_ABSENT": _ABSENT}
    lines = [
        "def check_flat(arguments):",
        "    if type(arguments) is not dict:",
        "        return False",
    ]
    lines.append("    get = arguments.get")
    # A required field whose type excludes null needs no membership test: a
    # missing one reads as None, which fails its type test.
    typed_needed = {
        name for name, types, _, _ in fields if types is not None and type(None) not in types
    }
    for name in needed:
        if name not in typed_needed:
            lines += [f"    if {name!r} not in arguments:", "        return False"]
    for index, (name, types, choices, conforms) in enumerate(fields):
        tests: list[str] = []
        if name in typed_needed and choices is None and conforms is None:
            env[f"T{index}"] = types if len(types) > 1 else next(iter(types))  # type: ignore[arg-type]
            operator = "not in" if len(types) > 1 else "is not"  # type: ignore[arg-type]
            lines += [f"    if type(get({name!r})) {operator} T{index}:", "        return False"]
            continue
        if types is not None:
            if len(types) == 1:
                env[f"T{index}"] = next(iter(types))
                tests.append(f"type(v) is not T{index}")
            else:
                env[f"T{index}"] = types
                tests.append(f"type(v) not in T{index}")
        if choices is not None:
            env[f"C{index}"] = choices
            tests.append(f"v not in C{index}")
        if conforms is not None:
            env[f"F{index}"] = conforms
            tests.append(f"not F{index}(v)")
        if not tests:
            continue
        indent = "    "
        if name in needed:
            lines.append(f"    v = get({name!r})")
        else:
            lines += [f"    v = get({name!r}, _ABSENT)", "    if v is not _ABSENT:"]
            indent = "        "
        for test in tests:
            lines += [f"{indent}if {test}:", f"{indent}    return False"]
    if closed:
        names = frozenset(name for name, _, _, _ in fields)
        if names == set(needed):  # every name present: any other key is one too many
            lines += [f"    if len(arguments) != {len(names)}:", "        return False"]
        else:
            env["NAMES"] = names
            lines += ["    if not NAMES.issuperset(arguments):", "        return False"]
    lines.append("    return True")
    exec(compile("\n".join(lines), "<flat check>", "exec"), env)
    return t.cast("c.Callable[[t.Any], bool]", env["check_flat"])


def _refuse_remote(uri: str) -> t.NoReturn:
    raise ValueError(f"remote $ref {uri!r} is not fetched")


class _NoRemoteRefs(c.Mapping[str, c.Callable[[str], t.Any]]):
    """fastjsonschema's ``handlers``: every URI scheme refuses (never ``urlopen``)."""

    def __getitem__(self, scheme: str) -> c.Callable[[str], t.Any]:
        return _refuse_remote

    def __iter__(self) -> c.Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _objects_only(node: dict[str, t.Any]) -> None:
    if "type" not in node and "$ref" not in node and not _OBJECT_KEYWORDS.isdisjoint(node):
        node["type"] = "object"


def _compile_fast(schema: dict[str, t.Any], *, modern: bool) -> c.Callable[[t.Any], object] | None:
    # fastjsonschema rewrites "$ref" values in place, and the copy gets "type":
    # "object" where object keywords stand alone (see _OBJECT_KEYWORDS).
    compiled = copy.deepcopy(schema)
    _walk(compiled, modern=modern, visit=_objects_only)
    try:
        import fastjsonschema

        return t.cast(
            "c.Callable[[t.Any], object]",
            fastjsonschema.compile(
                compiled,
                handlers=_NoRemoteRefs(),
                use_default=False,  # never write defaults into the arguments
                formats=_fast_formats(),  # the formats jsonschema checks, checked alike
                # detailed_exceptions=False would be cheaper on failure, but 2.22
                # cannot compile "const" with it (KeyError 'definition_rule').
            ),
        )
    except Exception:  # anything it cannot compile is left to jsonschema
        return None


def _is_mapping(arguments: object) -> bool:
    return type(arguments) is dict or isinstance(arguments, c.Mapping)


def _passes(compiled: c.Callable[[t.Any], object]) -> c.Callable[[t.Any], bool]:
    """fastjsonschema's check (which raises) as a predicate; anything it raises
    means "not sure"."""

    def passes(arguments: t.Any) -> bool:
        compiled(arguments)
        return True

    return passes


# -- jsonschema-rs: the native check on valid arguments (issue 15) -------------------

#: jsonschema-rs's class for each draft jsonschema knows (draft 3: none).
_NATIVE_DRAFTS = {
    "Draft4Validator": "Draft4Validator",
    "Draft6Validator": "Draft6Validator",
    "Draft7Validator": "Draft7Validator",
    "Draft201909Validator": "Draft201909Validator",
    "Draft202012Validator": "Draft202012Validator",
}

#: Escapes whose meaning differs between Python's ``re`` and jsonschema-rs's
#: ECMA-262 engine (``\\D``, ``\\W``, ``\\s``, ``\\S`` match more there, ``\\b`` and
#: ``\\B`` differ on non-ASCII letters; property classes, back-references, ``\\k``).
_RISKY_ESCAPES = frozenset("DWSsBbpPkc0123456789AZzG")


def _pattern_blocker(pattern: object, *, exact: bool) -> str | None:
    """Why jsonschema-rs could accept a text that Python's ``re`` does not match
    with ``pattern``, or None.

    For ``pattern`` (``exact=False``) jsonschema-rs may be *stricter* (``\\d`` and
    ``\\w`` are ASCII there, ``.`` skips ``\\r``, ``$`` is the very end): a stricter
    "not sure" only sends the arguments to jsonschema. For a ``patternProperties``
    key (``exact=True``) a key one engine matches and the other does not is
    checked against different subschemas, so the two must agree exactly."""
    if not isinstance(pattern, str) or not _is_python_regex(pattern):
        return "a pattern only the regex module reads"
    negated_class = False
    in_class = False
    escaped = False
    for index, char in enumerate(pattern):
        if escaped:
            escaped = False
            if char in _RISKY_ESCAPES:
                return f"\\{char} in a pattern"
            if char in "dw" and (exact or negated_class):
                return f"\\{char} in a pattern"
            continue
        if char == "\\":
            escaped = True
        elif in_class:
            if char == "]":
                in_class = negated_class = False
        elif char == "[":
            in_class = True
            negated_class = pattern[index + 1 : index + 2] == "^"
        elif char == "(" and pattern[index + 1 : index + 2] == "?":
            if pattern[index + 2 : index + 3] not in (":", "=", "!"):
                return "a (? group other than (?: (?= (?!"
        elif char in ".$" and exact:
            return f"{char!r} in a patternProperties pattern"
    return None


def _native_blocker(schema: dict[str, t.Any], cls: type[t.Any]) -> str | None:
    """Why jsonschema-rs could answer "valid" where jsonschema answers "invalid"
    (or could crash), or None: then its ``is_valid`` is the quick check."""
    if cls.__name__ not in _NATIVE_DRAFTS:
        return f"{cls.__name__} is not a draft jsonschema-rs implements"
    for node in _each_subschema(schema):
        for keyword in _NON_MONOTONE:
            if keyword in node:
                return f"{keyword} (a stricter inner check would be a looser outer one)"
        if "uniqueItems" in node:  # compares whole items: unbounded recursion in Rust
            return "uniqueItems"
        for keyword in ("$dynamicRef", "$recursiveRef"):
            if keyword in node:
                return keyword
        divisor = node.get("multipleOf")
        if divisor is not None and not (isinstance(divisor, int) and not isinstance(divisor, bool)):
            return "multipleOf a fraction (jsonschema-rs divides exactly, jsonschema in floats)"
        if "pattern" in node and (blocker := _pattern_blocker(node["pattern"], exact=False)):
            return blocker
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict):
            for pattern in patterns:
                if blocker := _pattern_blocker(pattern, exact=True):
                    return blocker
    if _has_ref_cycle(schema):
        return "a $ref cycle (recursion as deep as the arguments, in Rust)"
    return None


def _has_ref_cycle(schema: dict[str, t.Any]) -> bool:
    """True when following subschemas and ``$ref``\\ s from the root can come back
    to a schema on the way (a ``$ref`` that is not a JSON pointer counts as one)."""
    on_path: set[int] = set()
    done: set[int] = set()
    # An explicit stack of (node, children iterator) instead of recursion.
    stack: list[tuple[dict[str, t.Any], c.Iterator[object]]] = []

    def children(node: dict[str, t.Any]) -> c.Iterator[object]:
        yield from (sub for _, sub in _subschemas(node))
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield _pointer_target(schema, ref)

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


def _each_subschema(schema: dict[str, t.Any]) -> c.Iterator[dict[str, t.Any]]:
    """``schema`` and every subschema in it, each once (a ``$ref`` is not followed)."""
    seen: set[int] = set()
    stack: list[object] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(sub for _, sub in _subschemas(node))


def _used_formats(schema: dict[str, t.Any]) -> set[str]:
    return {
        node["format"] for node in _each_subschema(schema) if isinstance(node.get("format"), str)
    }


def _refuse_retrieval(uri: str) -> t.NoReturn:
    raise ValueError(f"remote schema {uri!r} is not fetched")


def _compile_native(schema: dict[str, t.Any], cls: type[t.Any]) -> c.Callable[[t.Any], bool] | None:
    """jsonschema-rs's ``is_valid`` for ``schema``, with every ``format`` the schema
    names checked by our own checks (or by none, as jsonschema does); None when it
    cannot compile the schema."""
    try:
        import jsonschema_rs

        native = getattr(jsonschema_rs, _NATIVE_DRAFTS[cls.__name__])
        options: dict[str, t.Any] = {"retriever": _refuse_retrieval}
        used = _used_formats(schema)
        if used:  # custom formats make every check slower: only when needed
            options["validate_formats"] = True
            options["formats"] = {
                name: _conforms(name) if name in CHECKED_FORMATS else _any_value for name in used
            }
        else:
            options["validate_formats"] = False
        return t.cast("c.Callable[[t.Any], bool]", native(schema, **options).is_valid)
    except Exception:  # anything it cannot compile is left to the other paths
        return None


def _any_value(value: object) -> bool:
    return True


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
    mapping afterwards does not change what is enforced. Instances are immutable
    and safe to share between threads.
    """

    __slots__ = ("__weakref__", "_engine", "_full", "_valid")

    def __init__(
        self,
        schema: c.Mapping[str, t.Any],
        *,
        registry: referencing.Registry[t.Any] | None = None,
    ) -> None:
        plain = _checked_copy(schema, registry)
        cls = _validator_class(plain)
        self._full: jsonschema.protocols.Validator = _python_aware(cls)(
            plain,
            format_checker=_FORMAT_CHECKER,
            # Never the default registry, which fetches remote schemas.
            registry=registry if registry is not None else referencing.Registry(),
        )
        # The quick check: True only when the arguments are certainly valid.
        self._valid: c.Callable[[t.Any], bool] | None = None
        self._engine = "jsonschema"
        if _accepts_every_mapping(plain):
            self._valid, self._engine = _is_mapping, "mapping"
            return
        if registry is None and _native_blocker(plain, cls) is None:
            native = _compile_native(plain, cls)
            if native is not None:
                self._valid, self._engine = native, "jsonschema-rs"
                return
        if (flat := _compile_flat(plain)) is not None:
            self._valid, self._engine = flat, "flat"
        elif _fast_path_blocker(plain, cls) is None:
            compiled = _compile_fast(plain, modern=_is_modern(cls))
            if compiled is not None:
                self._valid, self._engine = _passes(compiled), "fastjsonschema"

    def validate(self, arguments: c.Mapping[str, t.Any]) -> ValidationFailure | None:
        """None when ``arguments`` satisfy the schema, else every violation.

        Never raises for any value of ``arguments`` and never changes it.
        Arguments nested too deeply for the interpreter's recursion limit give
        ``("invalid", [("(root)", "arguments nested too deeply to validate")])``.
        """
        valid = self._valid
        if valid is not None:
            try:
                if valid(arguments):
                    return None
            except RecursionError:
                return _failure_at_root(_TOO_DEEP)
            except Exception:  # e.g. a value jsonschema-rs cannot read: not sure
                pass
        return self._explain(arguments)

    @property
    def engine(self) -> str:
        """Which quick check answers "valid" for this schema: ``"jsonschema-rs"``,
        ``"flat"`` (a few dict lookups), ``"fastjsonschema"``, ``"mapping"`` (any
        mapping is valid), or ``"jsonschema"`` (none: jsonschema answers every call)."""
        return self._engine

    def _explain(self, arguments: t.Any) -> ValidationFailure | None:
        """The slow path: jsonschema lists every violation (or finds none)."""
        try:
            errors = list(self._full.iter_errors(arguments))
            if not errors:
                return None
            return _describe(arguments, errors)
        except RecursionError:
            return _failure_at_root(_TOO_DEEP)
        except Exception as exc:  # e.g. a $ref jsonschema cannot resolve
            return _failure_at_root(
                _shorten(f"arguments could not be validated: {type(exc).__name__}: {exc}")
            )


def compile_validator(
    schema: c.Mapping[str, t.Any], *, registry: referencing.Registry[t.Any] | None = None
) -> ArgumentValidator:
    """Compile ``schema`` once: the same as ``ArgumentValidator(schema, registry=...)``."""
    return ArgumentValidator(schema, registry=registry)


# -- wording --------------------------------------------------------------------


def _failure_at_root(text: str) -> ValidationFailure:
    return ValidationFailure(f"Invalid values: (root): {text}", ("invalid", [("(root)", text)]))


def _shorten(text: str, limit: int = _MAX_TEXT) -> str:
    """``text`` cut in the middle to at most ``limit`` characters: jsonschema puts
    the (possibly huge) value first and what is wrong with it last."""
    if len(text) <= limit:
        return text
    tail = (limit - 3) // 3
    return text[: limit - 3 - tail] + "..." + text[len(text) - tail :]


def _format_path(parts: c.Iterable[object], root: object = None) -> str:
    """``filter.min``, ``tags[1]``, ``items[0].id``; ``(root)`` for no parts.

    With ``root`` (the instance the path runs through), a part is an index
    exactly when its container is a list, so an integer key of a mapping
    still reads as a key.
    """
    text = ""
    node: object = root
    for part in parts:
        if node is None:
            index = isinstance(part, int) and not isinstance(part, bool)
        else:
            index = isinstance(node, (list, tuple))
            try:
                node = node[part]  # type: ignore[index]
            except Exception:
                node = None
        if index:
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(root)"


def _sort_key(path: c.Sequence[object]) -> tuple[tuple[int, int, str], ...]:
    return tuple(
        (0, part, "") if isinstance(part, int) and not isinstance(part, bool) else (1, 0, str(part))
        for part in path
    )


def _listed(entries: list[str]) -> str:
    shown = ", ".join(entries[:_MAX_LISTED])
    if len(entries) > _MAX_LISTED:
        shown += f", ... and {len(entries) - _MAX_LISTED} more"
    return shown


def _describe(
    arguments: object, errors: list[jsonschema.exceptions.ValidationError]
) -> ValidationFailure:
    missing: list[str] = []
    mismatches: list[tuple[str, str, str]] = []
    invalid: list[tuple[str, str]] = []
    seen: set[object] = set()  # a violation can be found once per failing subschema
    for error in sorted(errors, key=lambda e: _sort_key(e.absolute_path)):
        path = tuple(error.absolute_path)
        required = error.validator_value
        if error.validator == "required" and isinstance(required, list):
            # One error per missing name; name them all, once, in schema order.
            instance = error.instance
            where = _format_path(path, arguments)
            for name in required:
                if isinstance(instance, c.Mapping) and name not in instance:
                    full = _shorten(str(name) if not path else f"{where}.{name}")
                    if ("m", full) not in seen:
                        seen.add(("m", full))
                        missing.append(full)
        elif error.validator in ("type", "format"):
            # A string that is not a date-time is the wrong type of value for the
            # tool, worded as conversion words it: "expected date-time, got string".
            expected = error.validator_value
            if isinstance(expected, list):
                expected = " or ".join(str(kind) for kind in expected)
            mismatch = (
                _shorten(_format_path(path, arguments)),
                str(expected),
                _json_type(error.instance),
            )
            if mismatch not in seen:
                seen.add(mismatch)
                mismatches.append(mismatch)
        else:
            violation = (_shorten(_format_path(path, arguments)), _shorten(violation_text(error)))
            if violation not in seen:
                seen.add(violation)
                invalid.append(violation)
    message, original = failure_message(missing, mismatches, invalid)
    return ValidationFailure(message, original)


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
) -> ArgumentValidator:
    """An :class:`ArgumentValidator` for ``schema``: the same instance for every
    schema that reads the same, so tools with identical schemas share one compiled
    validator (validators are immutable and thread-safe).

    "The same" means equal as plain JSON values with their keys in the same order
    and their types alike (``1`` is not ``True``, ``1.0`` is not ``1``); a schema
    with anything else in it (a value JSON cannot hold), or used with a
    ``registry``, gets a validator of its own.

    >>> a = shared_validator({"type": "object", "properties": {"q": {"type": "string"}}})
    >>> a is shared_validator({"type": "object", "properties": {"q": {"type": "string"}}})
    True
    """
    key: str | None = None
    if registry is None and isinstance(schema, c.Mapping):
        try:
            key = _cache_key(_plain(schema))
        except RecursionError:
            key = None
    if key is None:
        return ArgumentValidator(schema, registry=registry)
    with _SHARED_LOCK:
        found = _SHARED.get(key)
    if found is not None:
        return found
    validator = ArgumentValidator(schema)  # compiled outside the lock; the first one stays
    with _SHARED_LOCK:
        return _SHARED.setdefault(key, validator)
