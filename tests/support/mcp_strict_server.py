"""An MCP server (the official SDK) whose tool schemas are what servers in the wild
send: run as a subprocess by ``tests/registry/test_definitions.py``.

``lookup`` has a ``"$schema"`` key (as zod-to-json-schema writes, for one) and
``examples``; ``tag`` takes a ``dict[str, int]``, which OpenAI's strict mode cannot
express.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("strict-test-server")


@server.tool(structured_output=False)
def lookup(city: str, days: int = 1) -> str:
    """Look up the weather."""
    return f"{city}: sunny for {days} day(s)"


@server.tool(structured_output=False)
def tag(labels: dict[str, int]) -> str:
    """Tag things."""
    return ",".join(sorted(labels))


_lookup = server._tool_manager.get_tool("lookup")
assert _lookup is not None
_lookup.parameters["$schema"] = "http://json-schema.org/draft-07/schema#"
_lookup.parameters["properties"]["city"]["examples"] = ["Oslo"]

if __name__ == "__main__":
    server.run("stdio")
