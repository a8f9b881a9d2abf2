"""How long a journal write may wait for another's lock (private).

A call's journal records are written in the caller's thread: the ``started``
record before the tool runs, the ``completed`` one after. Waiting for another
process's lock must not stretch the call past its deadline, so the claim bounds
the writes it makes with :func:`bounded`, and a journal that waits for locks
(:class:`~nous_tools.SQLiteJournal`) takes the smaller of its own ``timeout`` and
:func:`lock_wait`. A write that runs out of time fails (``database is locked``),
and the call is ``Err(JournalUnavailable)`` without running.
"""

from __future__ import annotations

import collections.abc as c
import contextlib
import threading

__all__ = ["bounded", "lock_wait"]

_here = threading.local()


@contextlib.contextmanager
def bounded(seconds: float | None) -> c.Iterator[None]:
    """Journal writes in this thread, inside, wait at most ``seconds`` for a lock."""
    before = getattr(_here, "seconds", None)
    _here.seconds = seconds
    try:
        yield
    finally:
        _here.seconds = before


def lock_wait(default: float) -> float:
    """How long a write in this thread may wait for a lock: ``default``, or less."""
    seconds: float | None = getattr(_here, "seconds", None)
    if seconds is None:
        return default
    return max(0.0, min(default, seconds))
