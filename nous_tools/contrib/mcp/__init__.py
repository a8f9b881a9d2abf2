"""MCP both ways (placeholder docstring)."""

from __future__ import annotations

from ._serve import RunningServer, build_server, serve, serve_http_in_thread, tool_title

__all__ = ["RunningServer", "build_server", "serve", "serve_http_in_thread", "tool_title"]
