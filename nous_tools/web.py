"""What a web view needs around a batch of tool calls (the public path).

``parse_decisions`` reads a person's decisions from a request body;
``response_messages`` and ``pending_summary`` are the batch's answer and its
pending calls; ``ToolCallEndpoints`` answers the approval flow's two endpoints,
whatever the framework (``nous_tools.contrib.django.urls`` and
``nous_tools.contrib.flask.blueprint`` serve it). They live in
``nous_tools.providers``.
"""

from __future__ import annotations

from nous_tools.providers._endpoints import ToolCallEndpoints as ToolCallEndpoints
from nous_tools.providers._web import parse_decisions as parse_decisions
from nous_tools.providers._web import pending_summary as pending_summary
from nous_tools.providers._web import response_messages as response_messages

__all__ = ["ToolCallEndpoints", "parse_decisions", "pending_summary", "response_messages"]
