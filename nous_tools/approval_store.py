"""Approval stores: what makes an approval single-use.

``registry.execute_approved(needs_approval)`` runs the call only when the
registry's store *claims* the approval's id — atomically, once. A second claim of
the same id (a replayed token, a double click, two servers racing) gets False and
the call is refused with ``Err(ApprovalAlreadyUsed)``.

A store is any object with one method (:class:`ApprovalStore`):

``claim(approval_id: str) -> bool``
    True the first time an id is claimed, False ever after (for as long as the
    store remembers it). Must be atomic: of two concurrent claims of one id,
    exactly one gets True. A store that raises makes the call fail closed (an
    ``Err``, the tool does not run).

:class:`InMemoryApprovalStore` is the default (one process). For several processes
use a shared store: ``nous_tools.contrib.django.CacheApprovalStore`` (Django's
cache framework, ``cache.add``), or a few lines on Redis (``SET NX`` with an
expiry), shown in ``docs/concepts/approval.md``.

>>> store = InMemoryApprovalStore(max_entries=2)
>>> store.claim("a"), store.claim("a"), store.claim("b")
(True, False, True)
>>> "a" in store, len(store)
(True, 2)
"""

from __future__ import annotations

import collections
import threading
import time
import typing as t

from ._log import log as _log

__all__ = ["ApprovalStore", "InMemoryApprovalStore"]


@t.runtime_checkable
class ApprovalStore(t.Protocol):
    """Remembers which approval ids were used. See the module docs."""

    def claim(self, approval_id: str) -> bool:
        """Atomically mark ``approval_id`` as used; True only for the first claim."""
        ...


class InMemoryApprovalStore:
    """A thread-safe, bounded :class:`ApprovalStore` in this process's memory.

    It remembers at most ``max_entries`` ids (default 100,000, about 10 MB); past
    that the oldest claim is forgotten first, with a warning when it was younger
    than ``ttl``. ``ttl`` (seconds, or None for no limit) is how long a claim is
    remembered: set it to at least the registry's ``approval_max_age``, since a
    token older than that is refused anyway (the registry does this for the store
    it makes by default). Claims are forgotten when the process ends: for
    approvals that outlive a process or span several, use a shared store.
    """

    def __init__(self, max_entries: int = 100_000, ttl: float | None = None) -> None:
        if type(max_entries) is not int or max_entries < 1:
            raise ValueError(f"max_entries must be an int >= 1, got {max_entries!r}")
        if ttl is not None and (type(ttl) not in (int, float) or not ttl > 0):
            raise ValueError(f"ttl must be a number of seconds > 0 or None, got {ttl!r}")
        self.max_entries = max_entries
        self.ttl = None if ttl is None else float(ttl)
        self._lock = threading.Lock()
        self._claimed: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._warned = False

    def claim(self, approval_id: str) -> bool:
        """True the first time ``approval_id`` is claimed; False while it is remembered."""
        if type(approval_id) is not str:
            raise TypeError(f"approval ids are str, got {type(approval_id).__name__}")
        now = time.monotonic()
        with self._lock:
            self._forget_expired(now)
            if approval_id in self._claimed:
                return False
            if len(self._claimed) >= self.max_entries:
                _, claimed_at = self._claimed.popitem(last=False)
                if not self._warned and (self.ttl is None or now - claimed_at < self.ttl):
                    self._warned = True
                    _log.warning(
                        "InMemoryApprovalStore is full (%d ids): forgot the oldest claim "
                        "before it expired; raise max_entries or lower the approval max age "
                        "(warned once)",
                        self.max_entries,
                    )
            self._claimed[approval_id] = now
            return True

    def _forget_expired(self, now: float) -> None:
        if self.ttl is None:
            return
        claimed = self._claimed
        while claimed:
            oldest = next(iter(claimed.values()))
            if now - oldest < self.ttl:
                return
            claimed.popitem(last=False)

    def __contains__(self, approval_id: object) -> bool:
        with self._lock:
            if self.ttl is not None:
                self._forget_expired(time.monotonic())
            return approval_id in self._claimed

    def __len__(self) -> int:
        with self._lock:
            return len(self._claimed)

    def __repr__(self) -> str:
        return f"<InMemoryApprovalStore {len(self)}/{self.max_entries} ttl={self.ttl}>"
