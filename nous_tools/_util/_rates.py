"""A tool's limits as values (private; a leaf): its ``rate_limit`` parsed, and the
:class:`ToolLimits` a :class:`~nous_tools.Tool` keeps from its options.

``Tool`` reads them when it is made (so a bad rate fails at construction);
``nous_tools._engine._admission`` enforces them. The ``limits`` library (the
``rate-limits`` extra) is imported by the first tool with a ``rate_limit``.
"""

from __future__ import annotations

import functools
import typing as t

if t.TYPE_CHECKING:
    from limits import RateLimitItem

__all__ = ["NAMESPACE", "ToolLimits", "need_limits", "parse_rate", "tool_limits"]

#: The namespace of the rate limits' storage keys.
NAMESPACE = "nous_tools"


class ToolLimits:
    """The limits of one tool, as :func:`tool_limits` read them."""

    __slots__ = (
        "admits",
        "in_lane",
        "max_calls_per_run",
        "max_concurrency",
        "overflow_error",
        "rates",
    )

    def __init__(
        self,
        name: str,
        max_concurrency: int | None,
        rates: tuple[RateLimitItem, ...] | None,
        max_calls_per_run: int | None,
        overflow_error: bool,
    ) -> None:
        self.max_concurrency = max_concurrency
        # Each rate with its storage key, its window (s) and its number of calls:
        # what a call takes from it, made once.
        self.rates: tuple[tuple[RateLimitItem, str, int, int], ...] | None = (
            None
            if rates is None
            else tuple(
                (item, item.key_for(NAMESPACE, name), item.get_expiry(), item.amount)
                for item in rates
            )
        )
        self.max_calls_per_run = max_calls_per_run
        self.overflow_error = overflow_error
        # Whether the call is admitted (or refused) before its first attempt.
        self.admits = rates is not None or max_calls_per_run is not None
        # A batch runs such a call whole in a lane: its attempts may wait for a slot,
        # or its result is checked once the attempts are over.
        self.in_lane = max_concurrency is not None or overflow_error


def tool_limits(tool: t.Any) -> ToolLimits | None:
    """The limits of ``tool``, or None when it has none to enforce."""
    rate = tool.rate_limit
    overflow_error = tool.on_result_overflow == "error"
    if (
        tool.max_concurrency is None
        and rate is None
        and tool.max_calls_per_run is None
        and not overflow_error
    ):
        return None
    return ToolLimits(
        tool.name,
        tool.max_concurrency,
        parse_rate(rate) if rate is not None else None,
        tool.max_calls_per_run,
        overflow_error,
    )


@functools.lru_cache(maxsize=256)
def parse_rate(value: str) -> tuple[RateLimitItem, ...]:
    """The rate limits of a ``rate_limit`` string (the ``limits`` library's notation:
    ``"10/minute"``, ``"5 per second"``, ``"100/hour; 1000/day"``); ``ValueError``
    naming the option when it is not one."""
    need_limits("Tool option 'rate_limit'")
    from limits import parse_many  # the first tool with a rate_limit imports it

    try:
        items = tuple(parse_many(value))
    except ValueError:
        items = ()
    if not items:
        raise ValueError(
            "Tool option 'rate_limit' must be a rate such as '10/minute', '5 per second' "
            f"or '100/hour; 1000/day', got {value!r}"
        )
    for item in items:
        if item.amount < 1:
            raise ValueError(f"Tool option 'rate_limit' must allow at least 1 call, got {value!r}")
    return items


def need_limits(option: str) -> None:
    """Raise ``ImportError`` saying what to install when the ``limits`` library (the
    ``rate-limits`` extra) is not installed: ``limits`` itself, or the extra from a
    clone (nous-tools is not on PyPI yet, so ``nous-tools[rate-limits]`` is not)."""
    try:
        import limits  # noqa: F401
    except ImportError:
        raise ImportError(
            f"{option} needs the limits library (the 'rate-limits' extra): "
            "pip install limits, or from a clone of nous-tools: pip install '.[rate-limits]'"
        ) from None
