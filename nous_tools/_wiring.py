"""Wiring: what ``Tool`` needs of the layers above it, handed over once.

A value (``nous_tools.tool``, ``nous_tools.content``, ...) imports no layer above
it, not even inside a function or under ``TYPE_CHECKING``
(``docs/concepts/architecture.md``; ``make lint`` checks it). Where a value needs
code of a higher layer, that layer's code is handed to it here, when
``nous_tools/__init__.py`` runs — before anything can make a tool, since importing
any ``nous_tools`` module runs the package's ``__init__`` first:

- ``Tool`` gets the schema layer's code (``nous_tools.schema._tool``: schemas from
  signatures, validators, argument conversion, strict schemas; each imports its
  engine on first use) and the registry's ``redecorate`` (``@tool(...)`` above
  ``@registry.register``).

Nothing here is imported at the top of a function on a call's path: a tool keeps
what it compiled (its validator, converter and limits) as before.
"""

from __future__ import annotations

from nous_tools import tool
from nous_tools.registry._registry import redecorate
from nous_tools.schema import _tool as _tool_schema

__all__ = ["wire"]


def wire() -> None:
    """Hand the values what they need of the layers above them (idempotent)."""
    tool.wire(_tool_schema, redecorate)
