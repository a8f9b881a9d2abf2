"""Tools that report progress and log lines, for ``tests/cli/test_progress_cli.py``
(the CLI imports this module as ``progress_tools``)."""

from __future__ import annotations

from nous_tools import RunContext, tool
from nous_tools.content import Image


@tool(timeout=10)
def count(ctx: RunContext, n: int = 4, pause: float = 0.06) -> str:
    """Count to n, reporting each step and logging the last."""
    for i in range(1, n + 1):
        ctx.report_progress(i, n, f"at {i}")
        ctx.cancelled.wait(pause)
    ctx.log("info", "counted", n=n, where=object())
    ctx.log("debug", "a debug line")
    return f"counted to {n}"


@tool(timeout=10)
def picture() -> Image:
    """A tiny image."""
    return Image(b"\x89PNG\r\n\x1a\n", "image/png")
