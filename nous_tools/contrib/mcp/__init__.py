"""MCP both ways, synchronously (``pip install 'nous-tools[mcp]'``, on the official
``mcp`` SDK).

**Serve** a :class:`~nous_tools.Registry`: :func:`serve` (stdio or Streamable
HTTP; also ``nous-tools serve MODULE[:ATTR] [--http PORT]``),
:func:`serve_http_in_thread`, or :func:`build_server` for the SDK's low-level
``Server``. Each ``tools/call`` runs ``registry.execute`` in a worker thread; an
``ask`` tool is approved by the client's user through elicitation (fail closed
when the client cannot be asked); ``deny`` tools are not listed; a client's
cancellation sets the attempt's ``ctx.cancelled`` as the deadline would.

**Call** an external server: :class:`MCPServer` (``MCPServer.stdio(command,
args)`` / ``MCPServer.http(url, headers)``) holds one background event-loop
thread; ``server.tools()`` and ``registry.register_mcp(server, trusted=False,
prefix=None)`` make its tools :class:`~nous_tools.Tool` values whose calls are
synchronous requests under the tool's deadline. Untrusted servers' tools are all
``ask``; a trusted server's read-only tools are ``auto``. Each tool is pinned to
its definition as registered: a definition the server changes later is refused,
asked about or accepted (:func:`register_mcp`'s ``on_definition_change``), and an
approval never carries over to a new definition.

What a served tool looks like to a client:

>>> from nous_tools import tool
>>> from nous_tools.contrib.mcp import describe_tool
>>> @tool(read_only=True)
... def get_weather(city: str) -> str:
...     '''Today's weather in a city.'''
...     return "sunny"
>>> entry = describe_tool(get_weather)
>>> entry.title, entry.annotations.read_only_hint, entry.annotations.destructive_hint
('Get weather', True, None)
>>> entry.input_schema["required"]
['city']

The rules in full, with examples for both directions: ``docs/how-to/mcp.md``.
"""

from __future__ import annotations

from nous_tools.contrib.mcp._auth import FileTokenStorage, InMemoryTokenStorage, OAuth, TokenStorage
from nous_tools.contrib.mcp._client import (
    DefinitionChange,
    MCPElicitation,
    MCPServer,
    definition_change,
    register_mcp,
)
from nous_tools.contrib.mcp._dpop import DPoPKey
from nous_tools.contrib.mcp._serve import (
    RunningServer,
    build_server,
    close_sse_stream,
    describe_tool,
    serve,
    serve_http_in_thread,
    tool_title,
)
from nous_tools.contrib.mcp._task_client import TaskHandle, TaskStatus

__all__ = [
    "DPoPKey",
    "DefinitionChange",
    "FileTokenStorage",
    "InMemoryTokenStorage",
    "MCPElicitation",
    "MCPServer",
    "OAuth",
    "RunningServer",
    "TaskHandle",
    "TaskStatus",
    "TokenStorage",
    "build_server",
    "close_sse_stream",
    "definition_change",
    "describe_tool",
    "register_mcp",
    "serve",
    "serve_http_in_thread",
    "tool_title",
]
