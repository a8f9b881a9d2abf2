"""Tools the MCP tests serve (``nous-tools serve tests.mcp_served_tools:registry``)."""

from __future__ import annotations

import threading

from nous_tools import Registry, RunContext, tool

registry = Registry()

#: Set by ``wait_for_cancel`` when it starts, and when its ctx.cancelled fires
#: (the HTTP tests serve this registry in-process and look at them).
started = threading.Event()
cancelled = threading.Event()


@registry.register
@tool(timeout=20, read_only=True, idempotent=True)
def add(a: int, b: int = 0) -> int:
    """Add two numbers."""
    return a + b


@registry.register
@tool(timeout=20)
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@registry.register
@tool(timeout=20, approval="ask", destructive=True)
def remove_file(path: str) -> str:
    """Remove a file (pretend)."""
    return f"removed {path}"


@registry.register
@tool(timeout=20, approval="deny")
def format_disk() -> str:
    """Never runs."""
    return "formatted"


@registry.register
@tool(timeout=20, retries=0)
def boom() -> str:
    """Always fails."""
    raise RuntimeError("boom on purpose")


@registry.register
@tool(timeout=20)
def whoami(ctx: RunContext) -> str:
    """Who the server's context says the caller is."""
    deps = ctx.deps if isinstance(ctx.deps, dict) else {}
    return str(deps.get("user", "nobody"))


@registry.register
@tool(timeout=60, retries=0)
def wait_for_cancel(ctx: RunContext) -> str:
    """Wait until the call is cancelled (at most 60 s)."""
    started.set()
    if ctx.cancelled.wait(60):
        cancelled.set()
        return "cancelled"
    return "not cancelled"
