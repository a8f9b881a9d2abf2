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
import threading
import typing as t
import weakref

from nous_tools.schema._failures import (
    PLACEHOLDERS,
    TOO_DEEP,
    NotJson,
    ValidationFailure,
    describe,
    failure_at_root,
    failure_message,
    json_view,
    opaque_at,
    shorten,
    with_placeholder,
)
from nous_tools.schema._patterns import BACKTRACK_LIMIT, pattern_options
from nous_tools.schema._schema_walk import (
    accepts_every_mapping,
    has_ref_cycle,
    used_formats,
)

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


#: The deepest arguments a schema that refers to itself validates (deeper ones are
#: refused before jsonschema-rs, whose checks would recurse as deep as they go).
MAX_RECURSIVE_DEPTH = 128


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
        from nous_tools.schema._schema_errors import invalid_schema  # a refused schema only

        raise invalid_schema([("the schema is nested too deeply", ())]) from None


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


def _refuse_retrieval(uri: str) -> t.NoReturn:
    raise ValueError(f"remote schema {uri!r} is not fetched")


def _native_registry(registry: referencing.Registry[t.Any]) -> t.Any:
    """``registry``'s schemas as a jsonschema-rs registry, each read by its own draft:
    a resource made for a draft (``DRAFT7.create_resource(...)``) whose contents
    name no ``$schema`` gets it, since jsonschema-rs would read it as 2020-12 (a
    draft-7 ``$id: "#foo"`` anchor would then not exist)."""
    import jsonschema_rs

    return jsonschema_rs.Registry([(uri, _with_draft(registry[uri])) for uri in registry])


def _with_draft(resource: t.Any) -> t.Any:
    contents = resource.contents
    if not isinstance(contents, dict) or "$schema" in contents:
        return contents
    # referencing keeps the draft a resource was made for in a private attribute.
    dialect = _dialects().get(getattr(resource, "_specification", None))
    return contents if dialect is None else {"$schema": dialect, **contents}


@functools.cache
def _dialects() -> dict[t.Any, str]:
    """Each draft's ``$schema`` URI, by referencing's specification of it."""
    import referencing.jsonschema as drafts

    return {
        drafts.DRAFT4: "http://json-schema.org/draft-04/schema#",
        drafts.DRAFT6: "http://json-schema.org/draft-06/schema#",
        drafts.DRAFT7: "http://json-schema.org/draft-07/schema#",
        drafts.DRAFT201909: "https://json-schema.org/draft/2019-09/schema",
    }


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
    import jsonschema_rs  # with the first schema compiled, not with the package

    options: dict[str, t.Any] = {
        "retriever": _refuse_retrieval,
        "pattern_options": pattern_options(trusted),
    }
    used = used_formats(_tree(source, text)) if text is None or '"format"' in text else set()
    if used:  # custom formats make every check slower: only when needed
        options["validate_formats"] = True
        iso = _iso_formats()
        options["formats"] = {
            name: iso.get(name, _any_value) for name in used if name not in _NATIVE_FORMATS
        }
    else:
        options["validate_formats"] = False
    if registry is not None:
        options["registry"] = _native_registry(registry)
    try:
        return jsonschema_rs.validator_for(source, **options)
    except jsonschema_rs.ValidationError as exc:
        from nous_tools.schema._schema_errors import why_invalid  # a refused schema only

        raise why_invalid(_tree(source, text), exc, trusted) from None
    except Exception as exc:  # a value it cannot read, a schema nested too deeply
        reason = str(exc).split("\n", 1)[0]
        if "Recursion limit" in reason:
            reason = "the schema is nested too deeply"
        from nous_tools.schema._schema_errors import invalid_schema

        raise invalid_schema([(reason, ())]) from None


def _any_value(value: object) -> bool:
    return True


#: The formats validation asserts. date-time, date, time and duration are read as
#: argument conversion reads them (``_iso``); the others are jsonschema-rs's checks.
CHECKED_FORMATS = ("date", "date-time", "duration", "email", "ipv4", "ipv6", "time", "uri", "uuid")


def _iso_formats() -> dict[str, c.Callable[[object], bool]]:
    """The checks of the formats read as argument conversion reads them (``_iso``,
    imported with the first schema that uses a format)."""
    from nous_tools._util import _iso

    return {
        "date": _iso.is_date,
        "date-time": _iso.is_datetime,
        "duration": _iso.is_duration,
        "time": _iso.is_time,
    }


_NATIVE_FORMATS = frozenset({"email", "ipv4", "ipv6", "uri", "uuid"})


def _is_mapping(arguments: object) -> bool:
    return type(arguments) is dict or isinstance(arguments, c.Mapping)


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


class ArgumentValidator:
    """A JSON Schema compiled once; :meth:`validate` checks tool arguments against it.

    The schema is checked (see :func:`check_schema`) and copied, so changing the
    mapping afterwards does not change what is enforced. ``trusted=False`` refuses
    patterns that need backtracking (see the module's notes). Instances are
    immutable and safe to share between threads.
    """

    __slots__ = (
        "__weakref__",
        "_engine",
        "_max_depth",
        "_native",
        "_plain",
        "_text",
        "_trusted",
        "_valid",
    )

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
        *,
        known_valid: bool = False,
    ) -> None:
        # A schema known to be valid (one made from a signature: see
        # generated_validator) is compiled when it first checks arguments.
        lazy = known_valid and registry is None and text is not None
        native = None if lazy else _compile(source, registry, trusted, text)
        self._native: t.Any = native
        self._trusted = trusted
        # The schema as it was compiled, to walk: loaded from its text when needed.
        self._text = text
        self._plain: dict[str, t.Any] | None = None if text is not None else source
        cyclic = text is None or "$ref" in text or "Ref" in text  # $dynamicRef, $recursiveRef
        cycles = cyclic and has_ref_cycle(self._schema())
        self._max_depth = MAX_RECURSIVE_DEPTH if cycles else None
        # The quick check: True only when the arguments are certainly valid.
        self._valid: c.Callable[[t.Any], bool]
        if accepts_every_mapping(source):
            self._valid, self._engine = _is_mapping, "mapping"
        elif native is None:
            self._valid, self._engine = self._compile_and_check, "jsonschema-rs"
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

    def _compiled(self) -> t.Any:
        """jsonschema-rs's validator of the schema: compiled here, once (whichever
        thread comes first), for a schema known to be valid."""
        native = self._native
        if native is None:
            with _COMPILE_LOCK:
                native = self._native
                if native is None:
                    native = _compile(self._schema(), None, self._trusted, self._text)
                    self._native = native
                    if self._engine != "mapping":  # (whose quick check needs none)
                        self._valid = (
                            native.is_valid if self._max_depth is None else self._shallow_and_valid
                        )
        return native

    def _compile_and_check(self, arguments: t.Any) -> bool:
        """The quick check of a validator not compiled yet: compiles, then checks."""
        self._compiled()
        return bool(self._valid(arguments))

    def _shallow_and_valid(self, arguments: t.Any) -> bool:
        return not _deeper_than(arguments, MAX_RECURSIVE_DEPTH) and bool(
            self._native.is_valid(arguments)
        )

    def _explain(self, arguments: t.Any) -> ValidationFailure | None:
        """The slow path: jsonschema-rs lists every violation (or finds none)."""
        try:
            if self._max_depth is not None and _deeper_than(arguments, self._max_depth):
                return failure_at_root(TOO_DEEP)
            try:
                errors = list(self._compiled().iter_errors(arguments))
            except ValueError:  # a value (or a key) jsonschema-rs cannot read
                return self._explain_view(arguments)
            if not errors:
                return None
            try:
                return describe(arguments, errors, self._schema(), [])
            except NotJson:
                return self._explain_view(arguments)
        except RecursionError:
            return failure_at_root(TOO_DEEP)
        except Exception as exc:  # never raise, whatever the arguments hold
            return failure_at_root(
                shorten(f"arguments could not be validated: {type(exc).__name__}: {exc}")
            )

    def _explain_view(self, arguments: t.Any) -> ValidationFailure | None:
        """:meth:`_explain` for arguments holding what jsonschema-rs cannot read: a
        JSON view of them, with each such value replaced in turn by one of
        ``PLACEHOLDERS``; valid only when every view is."""
        view, opaque = json_view(arguments)
        for placeholder in PLACEHOLDERS if opaque else (None,):
            if opaque:
                view = with_placeholder(view, opaque, placeholder)
            errors = list(self._compiled().iter_errors(view))
            if errors:
                for error in errors:
                    place = opaque_at(opaque, error.instance_path)
                    if place is not None and place.too_deep:
                        return failure_at_root(TOO_DEEP)
                return describe(arguments, errors, self._schema(), opaque)
        return None


def compile_validator(
    schema: c.Mapping[str, t.Any],
    *,
    registry: referencing.Registry[t.Any] | None = None,
    trusted: bool = True,
) -> ArgumentValidator:
    """Compile ``schema`` once: the same as ``ArgumentValidator(schema, ...)``."""
    return ArgumentValidator(schema, registry=registry, trusted=trusted)


#: Validators by schema (see :func:`shared_validator`); an entry goes when the last
#: tool holding its validator does.
_SHARED: weakref.WeakValueDictionary[str, ArgumentValidator] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()
#: Held while a validator known to be valid is compiled at its first check.
_COMPILE_LOCK = threading.Lock()


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
    return _shared(schema, registry, bool(trusted), known_valid=False)


def generated_validator(
    schema: c.Mapping[str, t.Any], *, trusted: bool = True
) -> ArgumentValidator:
    """:func:`shared_validator` of a schema nous_tools made from a signature
    (``schema._signature``), which needs no check against its metaschema: it is
    compiled when it first checks arguments, not now. (jsonschema-rs is imported
    then too: making a tool of a function costs no compilation.)"""
    return _shared(schema, None, bool(trusted), known_valid=True)


def _shared(
    schema: c.Mapping[str, t.Any],
    registry: referencing.Registry[t.Any] | None,
    trusted: bool,
    *,
    known_valid: bool,
) -> ArgumentValidator:
    source, text = _read(schema)
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
    validator._build(source, None, trusted, text, known_valid=known_valid)
    with _SHARED_LOCK:
        return _SHARED.setdefault(key, validator)
