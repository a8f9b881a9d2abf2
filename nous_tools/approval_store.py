"""Approval stores: what makes an approval token usable once.

The public path of :class:`~nous_tools.ApprovalStore` and
:class:`~nous_tools.InMemoryApprovalStore`, which live in ``nous_tools.approval``
(see ``docs/concepts/approval.md``).
"""

from __future__ import annotations

from nous_tools.approval._store import ApprovalStore as ApprovalStore
from nous_tools.approval._store import InMemoryApprovalStore as InMemoryApprovalStore

__all__ = ["ApprovalStore", "InMemoryApprovalStore"]
