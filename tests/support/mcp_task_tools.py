"""Tools served as MCP tasks by ``tests/contrib/test_mcp_tasks.py``: ``nous-tools serve
mcp_task_tools:registry --http PORT`` (from ``tests/support/``). With
``NOUS_TEST_TASK_JOURNAL`` (a path) the registry journals its calls in that SQLite
file; each tool appends to a marker file in ``NOUS_TEST_TASK_MARKERS`` (a directory),
so a test sees how often, and how long, a tool ran."""

from __future__ import annotations

import os
import time
from pathlib import Path

from nous_tools import Registry, RunContext, SQLiteJournal, tool

_journal = os.environ.get("NOUS_TEST_TASK_JOURNAL")
registry = Registry(journal=SQLiteJournal(_journal) if _journal else None)


def _mark(name: str, line: str) -> None:
    folder = os.environ.get("NOUS_TEST_TASK_MARKERS")
    if folder:
        with open(Path(folder) / name, "a") as marker:
            marker.write(line + "\n")


@registry.register
@tool(timeout=120, retries=0)
def count_slowly(ctx: RunContext, marker: str, seconds: float = 0) -> str:
    """Marks that it started, waits ``seconds`` (or until cancelled), says how long:
    a task-supporting tool by default (its timeout is over 60 s)."""
    _mark(marker, "started")
    ctx.cancelled.wait(seconds)
    return f"counted for {seconds} s"


@registry.register
@tool(timeout=120, retries=0, isolation="process")
def ticker(marker: str) -> str:
    """Runs in a child process and marks a tick every 0.05 s for a minute."""
    for _ in range(1200):
        _mark(marker, "tick")
        time.sleep(0.05)
    return "ticked"


@registry.register
@tool(timeout=10, retries=0, task="required")
def must_be_a_task() -> str:
    """Runs only as a task."""
    return "ran as a task"


@registry.register
@tool(timeout=10, retries=0)
def quick() -> str:
    """A sync tool (task='never' by default: its timeout is 10 s)."""
    return "quick"


@registry.register
@tool(timeout=120, retries=0)
def ask_name(ctx: RunContext) -> str:
    """Asks the person's name (a task waits for it: input_required), then greets."""
    form = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer = ctx.elicit("What is your name?", form)
    return f"Hello, {(answer.content or {}).get('name')}!"


@registry.register
@tool(timeout=120, retries=0, approval="ask")
def wipe(marker: str) -> str:
    """Needs a person's approval; marks that it ran."""
    _mark(marker, "wiped")
    return "wiped"
