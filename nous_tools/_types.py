"""What a value may say of a higher layer: small Protocols (private).

A value (``tool``, ``results``, ``run_context``, ...) imports no layer above it,
not even under ``TYPE_CHECKING`` (``docs/concepts/architecture.md``). Where it
must name a type of a higher layer, it names the Protocol here instead, which
says just what the value uses of it: ``Registry`` is a :class:`RegistryLike`, the
engine's report channel a :class:`ReportSink`, the schema layer's compiled
argument validator and converter a :class:`Validator` and a :class:`Converter`,
and the schema layer's code a :class:`SchemaCode` (which ``nous_tools.schema``
registers with ``tool`` as it is imported: ``register_schema_code``).
"""

from __future__ import annotations

import collections.abc as c
import typing as t

if t.TYPE_CHECKING:
    from nous_tools.results import Err
    from nous_tools.tool import Tool

__all__ = ["Converter", "Failure", "RegistryLike", "ReportSink", "SchemaCode", "Validator"]


class RegistryLike(t.Protocol):
    """What an approval token is read against: a :class:`~nous_tools.Registry`."""

    def lookup(self, name: str) -> Tool[..., t.Any] | None: ...


class ReportSink(t.Protocol):
    """Where a context sends its tool's progress and log lines (the engine's
    channel of the attempt)."""

    def progress(self, progress: float, total: float | None, message: str | None) -> None: ...

    def log(self, level: str, message: str, data: dict[str, t.Any]) -> None: ...


class Failure(t.Protocol):
    """Everything wrong with a set of arguments (``ValidationFailure``)."""

    @property
    def message(self) -> str: ...

    @property
    def original_error(self) -> tuple[str, list[t.Any]]: ...


class Validator(t.Protocol):
    """A tool's compiled argument validator (``ArgumentValidator``)."""

    def validate(self, arguments: c.Mapping[str, t.Any]) -> Failure | None: ...


class Converter(t.Protocol):
    """A tool's compiled argument conversion (``ArgumentConverter``)."""

    def convert(
        self, tool_name: str, arguments: c.Mapping[str, t.Any]
    ) -> dict[str, t.Any] | Err: ...


class SchemaCode(t.Protocol):
    """What a :class:`~nous_tools.Tool` asks of the schema layer when it is made
    (``nous_tools.schema._tool``; each imports the schema engines on first use)."""

    def detect_takes_ctx(self, function: c.Callable[..., t.Any]) -> bool: ...

    def validator(
        self, parameters: c.Mapping[str, t.Any], registry: t.Any, trusted: bool
    ) -> Validator: ...

    def converter(self, function: c.Callable[..., t.Any], takes_ctx: bool) -> Converter | None: ...

    def check_registry(self, registry: object) -> None: ...

    def function_options(
        self, function: c.Callable[..., t.Any], options: dict[str, t.Any]
    ) -> dict[str, t.Any]: ...

    def strict_schema(self, parameters: c.Mapping[str, t.Any]) -> dict[str, t.Any]: ...
