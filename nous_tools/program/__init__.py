"""Code mode: a model's program calls the registry's tools, and every nested call
keeps every guarantee.

:meth:`Registry.run_program <nous_tools.Registry.run_program>` runs a short Python
program in a confined child (``read_only``, no network, a memory limit); each tool
of the registry is a function there, and each call of one goes through the
parent's whole pipeline — approval, validation, admission, deadlines, retries, the
journal, the signals. See ``docs/how-to/code-mode.md``.
"""

from __future__ import annotations

from nous_tools.program._values import ProgramOutput, ProgramPaused

__all__ = ["ProgramOutput", "ProgramPaused"]
