"""Tools the MCP tests serve (``nous-tools serve mcp_served_tools:registry``, from ``tests/support/``)."""

from __future__ import annotations

import datetime
import decimal
import threading

from nous_tools import Registry, RunContext, SamplingUnavailable, tool
from nous_tools.contrib.mcp import close_sse_stream

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


TRIP = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "default": "Paris"},
        "nights": {"type": "integer", "minimum": 1},
    },
    "required": ["nights"],
}

#: How many times ``plan_trip`` started (it asks twice: on 2026-07-28 it runs again
#: for each answer).
plan_starts: list[int] = []


@registry.register
@tool(timeout=20, retries=0)
def haiku(ctx: RunContext, topic: str) -> str:
    """Ask the client's model for a haiku."""
    return ctx.sample(f"A haiku about {topic}", max_tokens=40, system="You are a poet")


@registry.register
@tool(timeout=20, retries=0)
def plan_trip(ctx: RunContext) -> dict:
    """Ask the person where and how long, then the model for a plan."""
    plan_starts.append(1)
    answer = ctx.elicit("Where to, and for how long?", TRIP)
    if answer.action != "accept":
        return {"action": answer.action}
    plan = ctx.sample(
        [
            {
                "role": "user",
                "content": f"Plan {answer.content['nights']} nights in {answer.content['city']}",
            }
        ],
        max_tokens=50,
    )
    return {"action": "accept", "trip": answer.content, "plan": plan}


@registry.register
@tool(timeout=20, retries=0)
def summary_or_text(ctx: RunContext, text: str) -> str:
    """A summary when the client can sample, else the text's start."""
    try:
        return ctx.sample(f"Summarise: {text}", max_tokens=10)
    except SamplingUnavailable:
        return text[:5]


@registry.register
@tool(timeout=20)
def stamp(shape: str) -> object:
    """Values JSON cannot hold directly, in several shapes."""
    values = {
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5),
        "price": decimal.Decimal("1.10"),
        "tags": {"a"},
        "raw": b"ab",
    }
    if shape == "object":
        return values
    if shape == "list":
        return [values["when"], values["price"]]
    return values[shape]


@registry.register
@tool(timeout=20, retries=0)
def reconnect(ctx: RunContext) -> str:
    """Close this call's SSE stream; the client reconnects for the result."""
    closed = close_sse_stream(ctx)
    return f"closed={closed}"


def _trip(ctx: RunContext) -> dict:
    answer = ctx.elicit("Where to, and for how long?", TRIP)
    if answer.action != "accept":
        return {"action": answer.action}
    plan = ctx.sample(
        f"Plan {answer.content['nights']} nights in {answer.content['city']}", max_tokens=50
    )
    return {"action": "accept", "trip": answer.content, "plan": plan}


@registry.register
@tool(timeout=60, retries=0, isolation="process")
def isolated_trip(ctx: RunContext) -> dict:
    """plan_trip in a child process: its questions cross the pipe to the server."""
    return _trip(ctx)
