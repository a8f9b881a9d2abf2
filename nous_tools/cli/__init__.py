"""The command line, ``nous-tools`` (a surface: nothing in the library imports it).

``main`` is the entry point (``python -m nous_tools``); ``_main`` holds the
parser and the dispatch, one module each command (``_run``, ``_list``,
``_serve``, ``_journal``), and what they share: ``_console`` (exit statuses,
usage errors, stderr and stdout), ``_targets`` (importing tools), ``_arguments``
(reading ``--args``, ``--deps``, ``--batch`` and the option types), ``_trace``
(``--trace`` and the live line) and ``_progress`` (the live progress line).
"""

from __future__ import annotations

from nous_tools.cli._main import main as main

__all__ = ["main"]
