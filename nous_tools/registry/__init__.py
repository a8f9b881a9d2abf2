"""The registry: a named set of tools, their definitions, and the Minga path.

``Registry`` (``_registry``), what it runs once a person approved
(``_approvals``) and the cache of its tool definitions per provider
(``_definitions``). Built on the executor; the providers and the surfaces build
on it.
"""

from __future__ import annotations

from nous_tools.registry._registry import Registry as Registry

__all__ = ["Registry"]
