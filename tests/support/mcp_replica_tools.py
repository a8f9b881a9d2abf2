"""Tools served by two ``nous-tools serve`` replicas on one PostgreSQL journal in
``tests/contrib/test_mcp_replicas.py``: ``nous-tools serve mcp_replica_tools:registry
--http PORT`` (from ``tests/support/``), with ``NOUS_TEST_REPLICA_DSN`` (the journal's
libpq DSN) and ``NOUS_TEST_REPLICA_MARKERS`` (a directory). Each tool appends to
marker files there, so a test sees how often, and how long, a tool ran."""

from __future__ import annotations

import os
import time
from pathlib import Path

from nous_tools import PostgresJournal, Registry, RunContext, tool

_dsn = os.environ.get("NOUS_TEST_REPLICA_DSN")
#: A short grace: a lease of a replica that died runs out soon after its deadline.
registry = Registry(journal=PostgresJournal(_dsn, grace=2.0) if _dsn else None)


def _marker(name: str) -> Path:
    return Path(os.environ["NOUS_TEST_REPLICA_MARKERS"]) / name


def _mark(name: str, line: str) -> None:
    with open(_marker(name), "a") as marker:
        marker.write(line + "\n")


@registry.register
@tool(timeout=120, retries=0, isolation="process")
def tick(marker: str) -> str:
    """Runs in a child process and marks a tick every 0.1 s for two minutes."""
    for _ in range(1200):
        _mark(marker, "tick")
        time.sleep(0.1)
    return "ticked"


@registry.register
@tool(timeout=120, retries=0)
def wait_for_gate(ctx: RunContext, marker: str, gate: str) -> str:
    """Marks each run (``started``), then waits until the file ``gate`` exists (or
    the call is cancelled) and says what it found there."""
    _mark(marker, "started")
    path = _marker(gate)
    while not path.exists():
        if ctx.cancelled.wait(0.05):
            return "cancelled"
    return f"gate said {path.read_text().strip()}"


COLOUR = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}


@registry.register
@tool(timeout=120, retries=0)
def ask_colour(ctx: RunContext, marker: str) -> str:
    """Marks each run (``started``), asks the client's favourite colour (the question
    keyed ``colour``) and says what it was told."""
    _mark(marker, "started")
    answer = ctx.elicit("Your favourite colour?", COLOUR, key="colour")
    return f"you like {(answer.content or {}).get('colour')} ({answer.action})"
