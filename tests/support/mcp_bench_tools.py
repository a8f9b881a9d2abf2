"""Tools for ``benchmarks/mcp.py``'s MCP Tasks section (issue 38), served with
``nous-tools serve mcp_bench_tools:registry --http PORT`` (from ``tests/support/``):
the same 10 ms body as a plain tool (``task="never"``) and as a task
(``task="required"``), ``seconds`` long (10 ms by default). Each returns the
``time.time()`` at which it finished, so the client can tell how long after the
tool's end it got the result."""

from __future__ import annotations

import time

from nous_tools import Registry, tool

registry = Registry()

#: How long each tool works by default, in seconds.
WORK = 0.010


def _work(seconds: float) -> str:
    time.sleep(seconds)
    return repr(time.time())


@registry.register
@tool(timeout=30, retries=0, task="never")
def pause_plain(seconds: float = WORK) -> str:
    """Works ``seconds`` and returns when it finished (a plain ``tools/call``)."""
    return _work(seconds)


@registry.register
@tool(timeout=30, retries=0, task="required")
def pause_task(seconds: float = WORK) -> str:
    """Works ``seconds`` and returns when it finished (run only as a task)."""
    return _work(seconds)
