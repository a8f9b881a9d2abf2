"""JSON Schemas, descriptions and ``takes_ctx`` detection from a function's signature.

This is the private machinery behind :meth:`Tool.from_function`. Everything here
reads a function; nothing calls it. How each type maps to JSON Schema is
``_type_schemas``'s; docstrings are read by ``_docstrings``, signatures and
annotations by ``_annotations``.

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
"""

from __future__ import annotations

import collections.abc as c
import inspect
import re
import typing as t

from nous_tools._util._log import log as _safe_log
from nous_tools.run_context import RunContext
from nous_tools.schema._annotations import (
    POSITIONAL,
    describe_function,
    resolved_annotations,
    signature_of,
)
from nous_tools.schema._docstrings import docstring, parameter_docs, starts_section
from nous_tools.schema._type_schemas import DECIMAL_PATTERN as DECIMAL_PATTERN
from nous_tools.schema._type_schemas import (
    Build,
    Schema,
    Undescribable,
    property_schema,
    type_schema,
    undescribable_message,
)

__all__ = [
    "description_from_docstring",
    "detect_takes_ctx",
    "parameters_schema",
    "signature_schema",
]

_log = _safe_log

_EMPTY = inspect.Parameter.empty

#: ``RunContext``, ``RunContext[Deps]``, ``nous_tools.RunContext[...]`` as an unresolved string.
_RUN_CONTEXT_STRING = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*RunContext\s*(?:\[.*\])?\s*$", re.DOTALL)


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
    if first is None or first.kind not in POSITIONAL:
        return False
    if first.name == "ctx":
        return True
    annotation = resolved_annotations(fn).get(first.name, first.annotation)
    return _is_run_context(annotation)


def description_from_docstring(fn: c.Callable[..., t.Any]) -> str:
    """The first paragraph of ``fn``'s docstring, its lines joined by single spaces.

    The paragraph also ends where an argument section starts (``Args:``, a NumPy
    ``Parameters`` header, ``:param ...:``). ``""`` when there is no docstring.
    """
    lines = docstring(fn).splitlines()
    paragraph: list[str] = []
    for index, line in enumerate(lines):
        if not line.strip() or starts_section(lines, index):
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
    (see ``_type_schemas``).
    """
    return signature_schema(fn, takes_ctx=takes_ctx)[0]


def signature_schema(
    fn: c.Callable[..., t.Any], *, takes_ctx: bool
) -> tuple[dict[str, t.Any], bool]:
    """:func:`parameters_schema`, and whether nous_tools made all of it (True), so that
    it is a valid schema without a check: False when a part came from pydantic or
    from ``Annotated`` constraints (a ``pattern``, bounds)."""
    try:
        signature = signature_of(fn)
    except (TypeError, ValueError):
        return {"type": "object", "properties": {}, "required": []}, True
    parameters = list(signature.parameters.values())
    if takes_ctx and parameters:
        first = parameters[0]
        if first.kind in POSITIONAL:
            parameters = parameters[1:]
        elif first.kind is not inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(
                f"{describe_function(fn)} takes a RunContext (takes_ctx=True) but has no positional "
                f"parameter to receive it"
            )

    hints = resolved_annotations(fn)
    docs = parameter_docs(docstring(fn))
    build = Build({})
    properties: dict[str, Schema] = {}
    required: list[str] = []
    extra: Schema | bool = False
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"{describe_function(fn)} has a positional-only parameter {parameter.name!r}; "
                f"tools are called with keyword arguments"
            )
        annotation = hints.get(parameter.name, parameter.annotation)
        keywords = parameter.kind is inspect.Parameter.VAR_KEYWORD
        try:
            if keywords:
                extra = type_schema(annotation, build) or True
                continue
            properties[parameter.name] = property_schema(
                annotation,
                description=docs.get(parameter.name),
                default=parameter.default,
                build=build,
            )
        except Undescribable as error:
            if parameter.default is _EMPTY and not keywords:
                raise TypeError(undescribable_message(fn, parameter.name, error)) from None
            _log.warning(
                "%s; it is left out of the schema",
                undescribable_message(fn, parameter.name, error).split("; annotate")[0],
            )
            continue
        if parameter.default is _EMPTY:
            required.append(parameter.name)

    schema: Schema = {"type": "object", "properties": properties, "required": required}
    if extra is not True:
        schema["additionalProperties"] = extra
    if build.defs:
        schema["$defs"] = build.defs
    return schema, not build.borrowed


def _is_run_context(annotation: object) -> bool:
    if isinstance(annotation, t.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        return _RUN_CONTEXT_STRING.match(annotation) is not None
    if t.get_origin(annotation) is t.Annotated:
        return _is_run_context(t.get_args(annotation)[0])
    origin = t.get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, RunContext)
