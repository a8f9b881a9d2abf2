"""The real monotonic clock, out of freezegun's reach (private).

``freezegun.freeze_time`` replaces ``time.monotonic`` (and module globals that
hold it) while a freeze is active. Deadlines must keep real time there, so the
real function is captured at import and kept as a class attribute, which
freezegun does not patch.
"""

from __future__ import annotations

import sys
import time
import typing as t

__all__ = ["monotonic", "wall"]


def _real_monotonic() -> t.Callable[[], float]:
    # Imported inside an active freeze: take the real function freezegun kept.
    api = sys.modules.get("freezegun.api")
    real = getattr(api, "real_monotonic", None) if api is not None else None
    if real is not None and time.monotonic is not real:
        return t.cast(t.Callable[[], float], real)
    return time.monotonic


def _real_time() -> t.Callable[[], float]:
    api = sys.modules.get("freezegun.api")
    real = getattr(api, "real_time", None) if api is not None else None
    if real is not None and time.time is not real:
        return t.cast(t.Callable[[], float], real)
    return time.time


class _Clock:
    monotonic = staticmethod(_real_monotonic())
    time = staticmethod(_real_time())


def monotonic() -> float:
    """Seconds on the real monotonic clock, unaffected by freezegun."""
    return _Clock.monotonic()


def wall() -> float:
    """Seconds since the epoch on the real clock, unaffected by freezegun (the
    call journal's leases: they follow the real deadlines)."""
    return _Clock.time()
