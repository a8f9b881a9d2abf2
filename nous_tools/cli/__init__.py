"""The command line, ``nous-tools`` (a surface: nothing in the library imports it).

``main`` is the entry point (``python -m nous_tools``); ``_main`` holds the
parser and the commands, ``_progress`` the live progress line.
"""

from __future__ import annotations

from nous_tools.cli._main import main as main

__all__ = ["main"]
