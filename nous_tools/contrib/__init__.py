"""Integrations with other libraries, each an optional extra.

- :mod:`nous_tools.contrib.opentelemetry`: one span per tool call
  (``pip install 'nous-tools[otel]'``).
- :mod:`nous_tools.contrib.django`: ``CacheApprovalStore``, single-use approvals on
  Django's cache framework, and ``close_connections``, the worker hook that keeps
  the ORM's connections in order (``pip install 'nous-tools[django]'``).
- :mod:`nous_tools.contrib.ray`: ``RayBackend``, timed attempts as Ray tasks
  killed at their deadlines (``pip install 'nous-tools[ray]'``).
- :mod:`nous_tools.contrib.celery`: ``CeleryBackend``, timed attempts on Celery's
  prefork workers, revoked with ``SIGKILL`` at their deadlines
  (``pip install 'nous-tools[celery]'``).
- :mod:`nous_tools.contrib.mcp`: serve a registry over MCP, and call external MCP
  servers' tools synchronously (``pip install 'nous-tools[mcp]'``).

Nothing here is imported by ``nous_tools`` itself; import the module you use.
"""

from __future__ import annotations

__all__: list[str] = []
