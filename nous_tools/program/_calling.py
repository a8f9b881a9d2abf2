"""Which model tool call runs in this context (private): a batch of model tool calls
says it before each call, and a code tool takes it as its program's id. Its own
module, so that a batch imports nothing else of code mode to say it."""

from __future__ import annotations

import contextvars

__all__ = ["call_id", "calling"]

_call_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "nous_tools_program_call_id", default=None
)


def calling(call_id: str | None) -> None:
    """Say, in the context a model's tool call runs in, which call it is."""
    _call_id.set(call_id)


def call_id() -> str | None:
    """The id :func:`calling` said in this context, or None."""
    return _call_id.get()
