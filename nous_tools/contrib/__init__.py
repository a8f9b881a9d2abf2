"""Integrations with other libraries, each an optional extra.

- :mod:`nous_tools.contrib.opentelemetry`: one span per tool call
  (``pip install 'nous-tools[otel]'``).
- :mod:`nous_tools.contrib.django`: ``CacheApprovalStore``, single-use approvals on
  Django's cache framework (``pip install 'nous-tools[django]'``).
- :mod:`nous_tools.contrib.mcp`: serve a registry over MCP, and call external MCP
  servers' tools synchronously (``pip install 'nous-tools[mcp]'``).

Nothing here is imported by ``nous_tools`` itself; import the module you use.
"""

from __future__ import annotations

__all__: list[str] = []
