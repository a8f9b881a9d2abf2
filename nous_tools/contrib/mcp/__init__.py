"""MCP both ways (placeholder docstring)."""

from __future__ import annotations

from ._client import MCPElicitation, MCPServer, register_mcp
from ._serve import (
    RunningServer,
    build_server,
    describe_tool,
    serve,
    serve_http_in_thread,
    tool_title,
)

__all__ = [
    "MCPElicitation",
    "MCPServer",
    "RunningServer",
    "build_server",
    "describe_tool",
    "register_mcp",
    "serve",
    "serve_http_in_thread",
    "tool_title",
]
