"""The tools of another MCP server, served again: ``nous-tools serve
mcp_chain_tools:registry`` publishes ``mcp_rich_tools``' tools through a second
server, so what they report crosses two servers (``tests/contrib/test_progress_mcp.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

from nous_tools import Registry
from nous_tools.contrib.mcp import MCPServer

server = MCPServer.stdio(
    sys.executable,
    ["-m", "nous_tools", "serve", "mcp_rich_tools:registry"],
    cwd=Path(__file__).resolve().parent,
    name="inner",
)
registry = Registry()
registry.register_mcp(server, trusted=True)  # read-only tools of a trusted server: auto
