"""What a :class:`~nous_tools.Tool` asks of the schema layer when it is made.

``Tool`` is a value and imports no layer above it (``docs/concepts/architecture.md``);
this module is the schema code it uses, which ``nous_tools/schema/__init__.py``
registers with ``nous_tools.tool`` as the package is imported
(``nous_tools._types.SchemaCode`` says what it holds). Each function imports the
schema engine it needs on first use: ``import nous_tools`` loads none of them.
"""

from __future__ import annotations

import collections.abc as c
import threading
import typing as t

if t.TYPE_CHECKING:
    from nous_tools.schema._convert import ArgumentConverter
    from nous_tools.schema._validation import ArgumentValidator

__all__ = [
    "check_registry",
    "converter",
    "detect_takes_ctx",
    "function_options",
    "strict_schema",
    "validator",
]


def detect_takes_ctx(function: c.Callable[..., t.Any]) -> bool:
    """Whether ``function``'s first parameter is annotated as a ``RunContext``."""
    from nous_tools.schema._signature import detect_takes_ctx as detect

    return detect(function)


#: The schema :func:`function_options` last made from a signature in this thread,
#: all of it nous_tools's own (so valid), until the tool being made takes it.
_made = threading.local()


def validator(
    parameters: c.Mapping[str, t.Any], registry: t.Any, trusted: bool
) -> ArgumentValidator:
    """The (shared) compiled validator of ``parameters``; compiling checks the schema
    (a ``ValueError`` naming ``parameters``). A schema made from the signature of the
    tool's function (by :func:`function_options`, just before) needs no check: it
    is compiled when it first checks arguments."""
    from nous_tools.schema import _validation

    made, _made.schema = getattr(_made, "schema", None), None
    if made is parameters and registry is None:
        return _validation.generated_validator(parameters, trusted=trusted)
    return _validation.shared_validator(parameters, registry=registry, trusted=trusted)


def converter(function: c.Callable[..., t.Any], takes_ctx: bool) -> ArgumentConverter | None:
    """The conversion of ``function``'s arguments to its annotations, or None."""
    from nous_tools.schema._convert import compile_converter

    return compile_converter(function, takes_ctx=takes_ctx)


def check_registry(registry: object) -> None:
    """Raise naming the ``schema_registry`` option when ``registry`` is not one."""
    from nous_tools.schema._validation import check_registry as check

    check(registry)


def function_options(
    function: c.Callable[..., t.Any], options: dict[str, t.Any]
) -> dict[str, t.Any]:
    """``options`` completed from ``function`` (``Tool.from_function``): its name,
    the description from its docstring, ``takes_ctx`` and the parameters schema
    from its signature, each unless given."""
    from nous_tools.schema import _signature as _schema

    _made.schema = None
    if "name" not in options:
        options["name"] = getattr(function, "__name__", None) or type(function).__name__
    if "description" not in options:
        options["description"] = _schema.description_from_docstring(function)
    if options.get("takes_ctx") is None:
        options["takes_ctx"] = _schema.detect_takes_ctx(function)
    if "parameters" not in options:
        schema, own = _schema.signature_schema(function, takes_ctx=options["takes_ctx"])
        options["parameters"] = schema
        if own:  # (the tool made of these options takes it: see validator)
            _made.schema = schema
    return options


def strict_schema(parameters: c.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """``parameters`` in OpenAI's strict form (``ValueError`` naming the keyword)."""
    from nous_tools.schema._strict import strict_schema as strict

    return strict(parameters)
