"""Approval stores: what makes an approval single-use.

``registry.execute_approved(needs_approval)`` runs the call only when the
registry's store *claims* the approval's id — atomically, once. A second claim of
the same id (a replayed token, a double click, two servers racing) gets False and
the call is refused with ``Err(ApprovalAlreadyUsed)``.

A store is any object with one method (:class:`ApprovalStore`):

``claim(approval_id: str, expires_at: float | None = None) -> bool``
    True the first time an id is claimed, False ever after (for as long as the
    store remembers it). Must be atomic: of two concurrent claims of one id,
    exactly one gets True. A store that raises makes the call fail closed (an
    ``Err``, the tool does not run). ``expires_at`` (Unix seconds, or None for no
    limit) is when the approval's token stops being accepted anywhere — its
    ``issued_at`` plus the ``max_age`` it was accepted under, plus the clock skew
    allowed (so a server whose clock is behind by up to that still finds the
    claim): the store must remember the claim at least until then, and need not
    after. A store whose ``claim`` takes no ``expires_at`` still works (it is called
    with the id alone, and a warning says once that it cannot know how long to
    remember).

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

import collections.abc as c
import heapq
import itertools
import math
import threading
import time
import typing as t

from nous_tools._util._log import log as _log
from nous_tools.errors import ApprovalAlreadyUsed
from nous_tools.results import Err

__all__ = ["ApprovalStore", "InMemoryApprovalStore"]


@t.runtime_checkable
class ApprovalStore(t.Protocol):
    """Remembers which approval ids were used. See the module docs."""

    def claim(self, approval_id: str, expires_at: float | None = None) -> bool:
        """Atomically mark ``approval_id`` as used; True only for the first claim.
        Remember it at least until ``expires_at`` (Unix seconds; None: no limit)."""
        ...


def already_used(name: str) -> Err:
    """The answer to a call whose approval a store had already claimed: it did not
    run."""
    return Err(
        ApprovalAlreadyUsed(
            f"Tool '{name}' was not run: its approval was already used", tool_name=name
        )
    )


def _takes_expiry(claim: c.Callable[..., t.Any]) -> bool | t.Literal["second"]:
    """Whether ``claim`` takes ``expires_at``: ``"second"`` when it is its second
    parameter, positional or keyword (then ``claim(id, expires_at)`` is the call)."""
    import inspect  # once per registry, not with the package

    try:
        parameters = list(inspect.signature(claim).parameters.values())
    except (TypeError, ValueError):  # no signature to read (a builtin, say)
        return False
    if (
        len(parameters) >= 2
        and parameters[0].kind
        in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        and parameters[1].name == "expires_at"
        and parameters[1].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    ):
        return "second"
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == "expires_at" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        for p in parameters
    )


def claimer(store: t.Any) -> c.Callable[[str, float | None], object]:
    """``claim(approval_id, expires_at)`` for ``store``, whichever protocol its
    ``claim`` speaks: the expiry is passed when it takes one, else dropped (with a
    warning, once, at the first claim)."""
    claim: c.Callable[..., object] = store.claim
    takes = _takes_expiry(claim)
    if takes == "second":  # claim(approval_id, expires_at) itself: a call fewer a claim
        return claim
    if takes:

        def with_expiry(approval_id: str, expires_at: float | None) -> object:
            return claim(approval_id, expires_at=expires_at)

        return with_expiry
    warned: list[bool] = []

    def without_expiry(approval_id: str, expires_at: float | None) -> object:
        if not warned:
            warned.append(True)
            _log.warning(
                "Approval store %s has claim(approval_id) without expires_at: it cannot "
                "know how long a token stays valid, so it must remember claims at least "
                "as long as approval_max_age plus the clock skew allowed. Add an "
                "expires_at=None parameter (see the approval store protocol).",
                type(store).__name__,
            )
        return claim(approval_id)

    return without_expiry


class InMemoryApprovalStore:
    """A thread-safe, bounded :class:`ApprovalStore` in this process's memory.

    A claim is remembered until the ``expires_at`` it was made with — the token's
    own expiry, which the registry passes — on this machine's wall clock, the clock
    tokens are checked against. ``ttl`` (seconds, or None for no limit) is how long a
    claim made *without* an expiry is remembered, counted from the claim.

    It remembers at most ``max_entries`` ids (default 100,000, about 10 MB); past
    that the claim that expires soonest is forgotten first, with a warning when it
    had not expired yet. Claims are forgotten when the process ends: for approvals
    that outlive a process or span several, use a shared store.
    """

    def __init__(self, max_entries: int = 100_000, ttl: float | None = None) -> None:
        if type(max_entries) is not int or max_entries < 1:
            raise ValueError(f"max_entries must be an int >= 1, got {max_entries!r}")
        if ttl is not None and (type(ttl) not in (int, float) or not ttl > 0):
            raise ValueError(f"ttl must be a number of seconds > 0 or None, got {ttl!r}")
        self.max_entries = max_entries
        self.ttl = None if ttl is None else float(ttl)
        self._lock = threading.Lock()
        # id -> (expiry, sequence); the heap orders the same entries by expiry (stale
        # heap entries, whose sequence no longer matches, are skipped).
        self._claimed: dict[str, tuple[float, int]] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._sequence = itertools.count()
        self._warned = False

    def claim(self, approval_id: str, expires_at: float | None = None) -> bool:
        """True the first time ``approval_id`` is claimed; False while it is remembered
        (until ``expires_at``, Unix seconds; without one, ``ttl`` from now)."""
        if type(approval_id) is not str:
            raise TypeError(f"approval ids are str, got {type(approval_id).__name__}")
        now = time.time()
        if expires_at is None:
            expiry = math.inf if self.ttl is None else now + self.ttl
        elif type(expires_at) in (int, float) and not math.isnan(expires_at):
            expiry = float(expires_at)
        else:
            raise TypeError(f"expires_at must be Unix seconds or None, got {expires_at!r}")
        with self._lock:
            self._forget_expired(now)
            if approval_id in self._claimed:
                return False
            while len(self._claimed) >= self.max_entries:
                forgotten = self._pop()
                if not self._warned and forgotten >= now:
                    self._warned = True
                    _log.warning(
                        "InMemoryApprovalStore is full (%d ids): forgot the claim that expires "
                        "soonest before it expired; raise max_entries or lower the approval "
                        "max age (warned once)",
                        self.max_entries,
                    )
            sequence = next(self._sequence)
            self._claimed[approval_id] = (expiry, sequence)
            heapq.heappush(self._heap, (expiry, sequence, approval_id))
            return True

    def _pop(self) -> float:
        """Forget the live claim that expires soonest; return its expiry."""
        heap, claimed = self._heap, self._claimed
        while heap:
            expiry, sequence, approval_id = heapq.heappop(heap)
            if claimed.get(approval_id, (None, None))[1] == sequence:
                del claimed[approval_id]
                return expiry
        return math.inf  # pragma: no cover - only called while an entry is live

    def _forget_expired(self, now: float) -> None:
        heap, claimed = self._heap, self._claimed
        while heap and heap[0][0] < now:
            _, sequence, approval_id = heapq.heappop(heap)
            if claimed.get(approval_id, (None, None))[1] == sequence:
                del claimed[approval_id]

    def __contains__(self, approval_id: object) -> bool:
        with self._lock:
            self._forget_expired(time.time())
            return approval_id in self._claimed

    def __len__(self) -> int:
        with self._lock:
            return len(self._claimed)

    def __repr__(self) -> str:
        return f"<InMemoryApprovalStore {len(self)}/{self.max_entries} ttl={self.ttl}>"
