"""Everything JSON Schema (private; the public names are re-exported elsewhere).

Schemas from signatures and docstrings (``_signature``), JSON to the annotated
types and back (``_convert``), argument validation with Nous-worded failures
(``_validation``, ``_engines``), strict-mode schemas (``_strict``) and output
schemas of structured results (``_output``), and what a ``Tool`` compiles when it
is made (``_tool``, handed to the value by ``nous_tools._wiring``). The engines are
imported on the first tool made, so ``import nous_tools`` loads none of them.
Above the values and ``signals``; below approval, the journal and the engine.
"""
