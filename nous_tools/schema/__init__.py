"""Everything JSON Schema (private; the public names are re-exported elsewhere).

Schemas from signatures and docstrings (``_signature``), JSON to the annotated
types and back (``_convert``), argument validation with Nous-worded failures
(``_validation``, ``_engines``), strict-mode schemas (``_strict``) and output
schemas of structured results (``_output``). Imported on the first tool made, so
``import nous_tools`` loads no schema engine. Above the values; below ``tool``.
"""
