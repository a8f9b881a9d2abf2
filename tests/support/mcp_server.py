"""A small MCP server on the official ``mcp`` SDK, run as a subprocess by the tests
and the benchmark: ``python tests/support/mcp_server.py [MARKER_DIR]``.

Tools: ``echo`` (quick), ``shape`` (structured content), ``read_note`` (read-only,
idempotent), ``delete_file`` (destructive), ``hang`` (sleeps; writes
``MARKER_DIR/cancelled`` when the client cancels it), ``ask_name`` (elicits a
name, on every protocol version), ``ask_name_legacy`` (elicits with a direct
server-to-client request, before 2026-07-28 only), ``haiku`` (samples the
client's model), ``fail`` (an error result),
``die`` (the process exits mid-call), ``die_idempotent`` (annotated idempotent;
counts its calls in ``MARKER_DIR/die_idempotent`` and exits mid-call) and ``pid``
(this process's id).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import anyio
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve, Sample
from mcp_types import CreateMessageResult, SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel

MARKERS = Path(sys.argv[1]) if len(sys.argv) > 1 else None

server = MCPServer("nous-tools-test-server")


class Name(BaseModel):
    name: str = "anonymous"


def ask_for_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Say it back."""
    return text


@server.tool()
def shape(side: int) -> dict[str, int]:
    """A square's numbers, as structured content."""
    return {"side": side, "area": side * side}


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def read_note() -> str:
    """Read the note."""
    return "the note"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def delete_file(path: str) -> str:
    """Delete a file (pretend)."""
    return f"deleted {path}"


@server.tool()
async def hang(seconds: float = 60.0) -> str:
    """Sleep; record a cancellation in the marker directory."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        if MARKERS is not None:
            (MARKERS / "cancelled").write_text("cancelled")
        raise
    return "woke up"


@server.tool()
def ask_name(answer: Annotated[ElicitationResult[Name], Resolve(ask_for_name)]) -> str:
    """Ask the user's name (through the SDK's dual-era elicitation)."""
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


@server.tool()
async def ask_name_legacy(ctx: Context) -> str:
    """Ask the user's name with a server-to-client request (protocol <= 2025-11-25)."""
    answer = await ctx.elicit("What is your name?", Name)
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


def ask_for_haiku() -> Sample:
    prompt = SamplingMessage(role="user", content=TextContent(text="A haiku about rain"))
    return Sample([prompt], max_tokens=30, system_prompt="You are a poet", temperature=0.2)


@server.tool()
def haiku(poem: Annotated[CreateMessageResult, Resolve(ask_for_haiku)]) -> str:
    """Ask the client's model for a haiku (sampling, on every protocol version)."""
    content = poem.content
    return f"{poem.model}: {content.text}" if isinstance(content, TextContent) else "not text"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the remote tool failed on purpose")


@server.tool()
def die() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def die_idempotent() -> str:
    """Count this call in the marker directory, then exit mid-call."""
    if MARKERS is not None:
        with open(MARKERS / "die_idempotent", "a") as calls:
            calls.write("called\n")
    os._exit(3)


@server.tool()
def pid() -> int:
    """This server process's id."""
    return os.getpid()


if __name__ == "__main__":
    server.run("stdio")
