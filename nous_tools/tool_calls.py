"""Tool calls as LLM providers send them in, tool results as providers want them out.

The public path of :func:`~nous_tools.execute_tool_calls`,
:class:`~nous_tools.ToolCallResults`, :func:`~nous_tools.format_tool_result` and
:func:`current_tool_call`; they live in ``nous_tools.providers`` (the agent loop:
``docs/how-to/agent-loop.md``).
"""

from __future__ import annotations

from nous_tools.executor import ToolCall as ToolCall
from nous_tools.providers._tool_calls import ToolCallResults as ToolCallResults
from nous_tools.providers._tool_calls import current_tool_call as current_tool_call
from nous_tools.providers._tool_calls import execute_tool_calls as execute_tool_calls
from nous_tools.providers._tool_calls import format_tool_result as format_tool_result

__all__ = [
    "ToolCall",
    "ToolCallResults",
    "current_tool_call",
    "execute_tool_calls",
    "format_tool_result",
]
