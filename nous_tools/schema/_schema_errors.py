"""Why a schema is not valid, in words naming the tool option ``parameters``:
every metaschema violation and every bad pattern, or the ``$ref`` (or
``$schema``) that cannot be resolved. Imported only when a schema is refused.
"""

from __future__ import annotations

import collections.abc as c
import functools
import typing as t
import urllib.parse

import jsonschema_rs

from nous_tools.schema._failures import MAX_LISTED, format_path, locate, shorten, sort_key
from nous_tools.schema._patterns import pattern_problems
from nous_tools.schema._schema_walk import each_ref, steps

_Kind = jsonschema_rs.ValidationErrorKind

_JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")


def invalid_schema(problems: list[tuple[str, tuple[object, ...]]]) -> ValueError:
    shown = "; ".join(
        f"{shorten(reason)} (at path {shorten(format_path(where))})"
        for reason, where in problems[:MAX_LISTED]
    )
    if len(problems) > MAX_LISTED:
        shown += f"; ... and {len(problems) - MAX_LISTED} more"
    return ValueError(f"Tool option 'parameters' is not a valid JSON Schema: {shown}")


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


def why_invalid(plain: dict[str, t.Any], error: t.Any, trusted: bool) -> ValueError:
    """The ``ValueError`` for a schema jsonschema-rs refused with ``error`` (its
    first problem): every metaschema violation and every bad pattern, or the
    ``$ref`` that cannot be resolved, or the ``$schema`` that is unknown."""
    first = str(error).split("\n", 1)[0]
    if type(error.kind) is _Kind.Referencing:
        return _reference_problem(plain, first)
    problems = set(_metaschema_problems(plain))
    problems.update(pattern_problems(plain, trusted))
    if not problems:
        problems.add((first, tuple(error.instance_path)))
    return invalid_schema(sorted(problems, key=lambda p: (sort_key(p[1]), p[0])))


def _metaschema_problems(plain: dict[str, t.Any]) -> c.Iterator[tuple[str, tuple[object, ...]]]:
    """Every metaschema violation as ``(reason, path)`` (a path in ``plain``)."""
    try:
        name = jsonschema_rs.validator_cls_for(plain).__name__
        meta = _metaschema_validator(name)
    except Exception:  # an unknown $schema: said elsewhere
        return
    for error in meta.iter_errors(plain):
        path = tuple(steps(plain, error.instance_path))
        reason = str(error.message)
        if type(error.kind) is _Kind.AnyOf and path and path[-1] == "type":
            value = locate(plain, path)[1]
            if isinstance(value, str):
                reason = f"unknown type {value!r}, expected one of {', '.join(_JSON_TYPES)}"
        yield reason, path


def _reference_problem(plain: dict[str, t.Any], first: str) -> ValueError:
    """The ``ValueError`` for a ``$ref`` (or ``$schema``) jsonschema-rs cannot
    resolve, naming where it is."""
    import re  # only here: the start-up of a tool pays for nothing it does not use

    refs = [(ref, where) for ref, where in each_ref(plain)]
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
        return invalid_schema(
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
        shown = ", ".join(f"{ref!r} (at path {format_path(at)})" for ref, at in sorted(remote))
        return ValueError(
            f"Tool option 'parameters' refers to a remote schema ({shorten(shown)}), which is "
            "never fetched: add it to a referencing.Registry and pass it as "
            "Tool(schema_registry=...)"
        )
    return invalid_schema([(first, ())])
