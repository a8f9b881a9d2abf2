"""Tools that report progress, log lines and rich content, served over MCP by
``tests/contrib/test_progress_mcp.py`` (``nous-tools serve mcp_rich_tools:registry``)."""

from __future__ import annotations

import dataclasses
import threading
import typing as t

from nous_tools import Registry, RunContext, execute, tool
from nous_tools.content import Audio, Image, Resource, Text

registry = Registry()

#: A 1x1 red PNG and a short WAV header: the bytes the round trip must keep.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
    "0000000c4944415408d763f8cfc0000003010100c9fe92ef0000000049454e44ae426082"
)
WAV = b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00D\xac\x00\x00\x88X\x01\x00\x02\x00\x10\x00data\x00\x00\x00\x00"
BLOB = bytes(range(256))


@registry.register
@tool(timeout=20, read_only=True)
def image() -> Image:
    """A 1x1 red PNG."""
    return Image(PNG, "image/png")


@registry.register
@tool(timeout=20, read_only=True)
def audio() -> Audio:
    """A short WAV."""
    return Audio(WAV, "audio/wav")


@registry.register
@tool(timeout=20, read_only=True)
def resource() -> list[t.Any]:
    """An embedded text resource and a binary one."""
    return [
        Resource("test://notes.json", "application/json", text='{"test":"data","value":123}'),
        Resource("test://bytes.bin", "application/octet-stream", blob=BLOB),
    ]


@registry.register
@tool(timeout=20, read_only=True)
def mixed() -> list[t.Any]:
    """Text, an image and a resource."""
    return [
        "Multiple content types test:",
        Image(PNG, "image/png"),
        Text("and a resource:"),
        Resource("test://mixed", "application/json", text='{"a":1}'),
    ]


#: Set by ``steps`` once it has reported its first step; ``go`` lets it finish.
first_step = threading.Event()


@registry.register
@tool(timeout=20, read_only=True)
def steps(ctx: RunContext, n: int = 3) -> str:
    """Report n steps of progress, each past the coalescing interval."""
    for i in range(n + 1):
        ctx.report_progress(i * 100 / n, 100, f"step {i} of {n}")
        ctx.cancelled.wait(0.06)
    return "done"


@registry.register
@tool(timeout=20, read_only=True)
def chatty(ctx: RunContext) -> str:
    """Log one line at each level, with data JSON can hold and data it cannot."""
    for level in ("debug", "info", "notice", "warning", "error"):
        ctx.log(level, f"a {level} line", n=1, thing=object())
    return "logged"


@registry.register
@tool(timeout=20, read_only=True)
def outer(ctx: RunContext) -> str:
    """Calls ``steps`` with its own ctx: the nested progress is reported under this call."""
    result = execute(steps, {"n": 2}, ctx)
    return f"outer: {result.value}"


@dataclasses.dataclass
class Weather:
    city: str
    celsius: float


@registry.register
@tool(timeout=20, read_only=True)
def weather(city: str) -> Weather:
    """Structured weather."""
    return Weather(city, 21.5)


@registry.register
@tool(timeout=20, read_only=True)
def wrong_weather(city: str) -> Weather:
    """Returns a value that does not match its annotation."""
    return {"city": city}  # type: ignore[return-value]
