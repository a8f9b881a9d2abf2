"""The calls this process holds, and the heartbeat that keeps their leases (private).

A journaled call's ``started`` record carries a lease: until it passes, other
processes take the call to be running. A call may run longer than any lease set
in advance (a tool without a timeout, a slow retry), so while it runs this process
**renews** its lease: a heartbeat thread writes a new ``lease_expires`` (now plus
the lease's length) a third of the way through each lease, with the journal's
``renew`` (a journal without one is not renewed). A call that ends (recorded or
not: an interrupted caller, a journal that failed) is released here, and its lease
runs out by itself.

This process also knows exactly which of its own calls run: :func:`held` is how
:func:`~nous_tools.journal._record.owner_alive` answers for an owner of this
process, whatever the lease says.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import typing as t

from nous_tools._util._clock import monotonic, wall
from nous_tools._util._log import log as _log

if t.TYPE_CHECKING:
    from nous_tools.journal._record import JournalRecord

__all__ = ["held", "hold", "release"]

#: The shortest time between two renewals of one lease (seconds).
_LEAST = 0.5


class _Held:
    __slots__ = ("due", "journal", "record", "seconds")

    def __init__(self, journal: t.Any, record: JournalRecord, seconds: float) -> None:
        self.journal = journal
        self.record = record
        self.seconds = seconds  # the lease's length
        self.due = monotonic() + max(_LEAST, seconds / 3)


_lock = threading.Lock()
_wake = threading.Condition(_lock)
_calls: dict[str, _Held] = {}  # by owner
_thread: threading.Thread | None = None
_wakes_at = math.inf  # when the heartbeat wakes next by itself (inf: when told)


def hold(journal: t.Any, record: JournalRecord, seconds: float) -> None:
    """This process runs the call ``record`` was started for: renew its lease of
    ``seconds`` while it runs (when the journal can: it has ``renew``)."""
    global _thread
    renews = seconds > 0 and callable(getattr(journal, "renew", None))
    held = _Held(journal, record, seconds if renews else 0.0)
    with _lock:
        _calls[record.owner] = held
        if renews:
            if _thread is None or not _thread.is_alive():
                _thread = threading.Thread(
                    target=_beat, name="nous-tools-journal-heartbeat", daemon=True
                )
                _thread.start()
            elif held.due < _wakes_at:  # (a wake-up a call is a thread switch a call)
                _wake.notify()


def release(owner: str) -> None:
    """The call of ``owner`` has ended (recorded, or given up on)."""
    with _lock:
        _calls.pop(owner, None)


def held(owner: str) -> bool:
    """Whether this process runs the call of ``owner`` now."""
    return owner in _calls


def _beat() -> None:
    """The heartbeat: renew each held lease when it is due, for ever (a daemon)."""
    global _wakes_at
    while True:
        with _lock:
            now = monotonic()
            due = [h for h in _calls.values() if h.seconds and h.due <= now]
            if not due:
                nexts = [h.due for h in _calls.values() if h.seconds]
                _wakes_at = min(nexts) if nexts else math.inf
                _wake.wait(_wakes_at - now if nexts else None)
                _wakes_at = -math.inf  # awake: told of nothing until it waits again
                continue
            for each in due:
                each.due = now + max(_LEAST, each.seconds / 3)
        for each in due:
            _renew(each)


def _renew(each: _Held) -> None:
    record = each.record
    journal = each.journal
    try:
        clock = getattr(journal, "clock", None)
        now = clock() if callable(clock) else wall()
        journal.renew(record, now + each.seconds)
    except Exception as exc:  # the next beat tries again; the lease may run out meanwhile
        _log.warning(
            "Call journal: could not renew the lease of call %r of run %r (%s); it is "
            "tried again, and the call reads as unknown if its lease runs out",
            record.call_id,
            record.run_id,
            type(exc).__name__,
        )


def _forget() -> None:
    """In a forked child: the calls are its parent's, and so is the heartbeat."""
    global _lock, _wake, _thread, _wakes_at
    _wakes_at = math.inf
    _lock = threading.Lock()
    _wake = threading.Condition(_lock)
    _calls.clear()
    _thread = None


if hasattr(os, "register_at_fork"):
    with contextlib.suppress(Exception):
        os.register_at_fork(after_in_child=_forget)
