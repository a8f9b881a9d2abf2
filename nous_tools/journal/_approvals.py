"""An approval store in the journal's own database: an approval redeemed and the
call's decision recorded in one transaction.

``journal.approvals`` (an :class:`~nous_tools.ApprovalStore`) keeps each claimed
approval id in a table beside the journal's. Given to the registry whose calls
that journal records (``Registry(journal=journal,
approval_store=journal.approvals)``), an approved call of a run redeems its
approval *in the same transaction* that writes its ``started`` record: both are
written or neither is. A request that loses the redeem finds the winner's record
already there and answers its outcome; a crash between the two cannot leave an
approval used by a call that was never recorded. Other stores (a cache, Redis)
redeem first and let the journal's record win (``docs/concepts/journal.md``).
"""

from __future__ import annotations

import typing as t

__all__ = ["ApprovalTaken", "JournalApprovalStore", "joins"]


class ApprovalTaken(Exception):
    """Raised by a journal's ``start(record, approval=...)`` when the approval was
    redeemed already: nothing was written."""


class JournalApprovalStore:
    """The :class:`~nous_tools.ApprovalStore` of a journal's database:
    ``journal.approvals``. Given to the registry whose calls that journal records,
    an approved call of a run redeems its approval in the transaction that records
    its start: both are written, or neither (``docs/concepts/journal.md``).

    A claim is an ``INSERT`` of the approval id (autocommit when made on its own);
    claims past their ``expires_at`` are forgotten from time to time.
    """

    __slots__ = ("journal",)

    def __init__(self, journal: t.Any) -> None:
        self.journal = journal

    def __repr__(self) -> str:
        return f"<JournalApprovalStore of {self.journal!r}>"

    def claim(self, approval_id: str, expires_at: float | None = None) -> bool:
        """True the first time ``approval_id`` is claimed; False while it is remembered
        (until ``expires_at``, Unix seconds; None: for ever)."""
        if type(approval_id) is not str:
            raise TypeError(f"approval ids are str, got {type(approval_id).__name__}")
        if expires_at is not None and type(expires_at) not in (int, float):
            raise TypeError(f"expires_at must be Unix seconds or None, got {expires_at!r}")
        return bool(self.journal._claim_approval(approval_id, expires_at))

    def joins(self, journal: object) -> bool:
        """Whether a call recorded in ``journal`` can redeem its approval here in the
        same transaction (the same database and table)."""
        same = getattr(self.journal, "_same_database", None)
        return journal is self.journal or (callable(same) and bool(same(journal)))


def joins(store: object, journal: object) -> bool:
    """Whether ``store`` redeems approvals in ``journal``'s own transaction."""
    return type(store) is JournalApprovalStore and store.joins(journal)
