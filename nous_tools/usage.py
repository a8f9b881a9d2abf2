"""Token and request counts of a run.

``Usage`` is immutable: every method returns a new value and leaves the old one
as it was, so a ``Usage`` can be shared between threads and stored in a frozen
:class:`~nous_tools.RunContext`.

>>> u = Usage().inc_requests().add_tokens(input=10, output=5)
>>> (u.requests, u.input_tokens, u.output_tokens, u.total_tokens)
(1, 10, 5, 15)
>>> (u + Usage(tool_calls=2)).tool_calls
2
>>> Usage.from_openai({"prompt_tokens": 7}).total_tokens
0
"""

from __future__ import annotations

import collections.abc as c
import typing as t

import attrs

__all__ = ["Usage"]


def _count(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Usage counts must be int, got {type(value).__name__}")
    return value


@attrs.frozen(slots=True)
class Usage:
    """Requests, tool calls and tokens, summed field by field with ``+``.

    Each count is an int >= 0: ``requests`` (model requests), ``tool_calls``,
    ``input_tokens``, ``output_tokens``, ``total_tokens``, and the prompt cache's
    ``cache_creation_input_tokens`` and ``cache_read_input_tokens``.
    """

    requests: int = attrs.field(default=0, converter=_count)
    tool_calls: int = attrs.field(default=0, converter=_count)
    input_tokens: int = attrs.field(default=0, converter=_count)
    output_tokens: int = attrs.field(default=0, converter=_count)
    total_tokens: int = attrs.field(default=0, converter=_count)
    cache_creation_input_tokens: int = attrs.field(default=0, converter=_count)
    cache_read_input_tokens: int = attrs.field(default=0, converter=_count)

    def add(self, other: Usage) -> Usage:
        """Return the field-by-field sum of ``self`` and ``other``."""
        if not isinstance(other, Usage):
            raise TypeError(f"can only add a Usage, got {type(other).__name__}")
        return Usage(
            requests=self.requests + other.requests,
            tool_calls=self.tool_calls + other.tool_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
        )

    def __add__(self, other: object) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return self.add(other)

    def inc_requests(self, n: int = 1) -> Usage:
        """Return a copy with ``requests`` grown by ``n``."""
        return attrs.evolve(self, requests=self.requests + n)

    def inc_tool_calls(self, n: int = 1) -> Usage:
        """Return a copy with ``tool_calls`` grown by ``n``."""
        return attrs.evolve(self, tool_calls=self.tool_calls + n)

    def add_tokens(self, input: int = 0, output: int = 0) -> Usage:
        """Return a copy with input/output tokens grown; ``total_tokens`` grows by both."""
        return attrs.evolve(
            self,
            input_tokens=self.input_tokens + input,
            output_tokens=self.output_tokens + output,
            total_tokens=self.total_tokens + input + output,
        )

    @classmethod
    def from_openai(cls, usage: c.Mapping[str, t.Any] | None) -> Usage:
        """Read an OpenAI ``usage`` mapping; missing fields count as 0, ``requests`` is 1."""
        usage = usage or {}
        return cls(
            requests=1,
            input_tokens=usage.get("prompt_tokens") or 0,
            output_tokens=usage.get("completion_tokens") or 0,
            total_tokens=usage.get("total_tokens") or 0,
        )
