"""A registry with a code tool, for the command-line and MCP tests of code mode
(tests/program/test_code_tool_surfaces.py)."""

from __future__ import annotations

from nous_tools import Registry, Tool


def lookup(item: str) -> str:
    """Find an item."""
    return f"found {item}"


def publish(text: str) -> str:
    """Publish a text (asks a person first)."""
    return f"published {text}"


registry = Registry(
    [
        Tool.from_function(lookup, timeout=30),
        Tool.from_function(publish, timeout=30, approval="ask"),
    ]
)
registry.register(registry.code_tool())
