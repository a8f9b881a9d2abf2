"""Everything JSON Schema (private; the public names are re-exported elsewhere).

Schemas from signatures (``_signature``: reading signatures and annotations in
``_annotations``, docstrings in ``_docstrings``, each type's schema in
``_type_schemas``), JSON to the annotated types and back (``_convert``, its cattrs
hooks in ``_structuring``), argument validation (``_validation``: walking a schema
in ``_schema_walk``, pattern safety in ``_patterns``, why a schema is refused in
``_schema_errors``, failures in Nous's words in ``_failures``), strict-mode
schemas (``_strict``) and output schemas of structured results (``_output``), and
what a ``Tool`` compiles when it is made (``_tool``), which this package registers
with ``nous_tools.tool`` as it is imported (``register_schema_code``: the value
imports no layer above it, so the arrow runs from here down to it, where the
contracts see it). The engines are imported on the first tool made, so
``import nous_tools`` loads none of them.
Above the values and ``signals``; below approval, the journal and the engine.
"""

from __future__ import annotations

from nous_tools.schema import _tool
from nous_tools.tool import register_schema_code

register_schema_code(_tool)
