"""Approval: who may run a tool that asks first, and what a person's approval is.

- ``check_approval``, the gate the pipeline runs before anything else, and what
  it asks an approval handler (:class:`ApprovalRequest`) and may be answered
  (``"approve"``, ``"reject"`` or an :class:`Edit`);
- :class:`NeedsApproval`, the registry's answer for an ``"ask"`` tool nobody has
  approved yet, its signed token (``to_dict``/``from_dict``) and
  :func:`tool_digest`, what a token says its tool is (``approved_tool`` and
  ``approved_arguments``: the one check a token and a paused batch's call pass);
- the stores that make an approval usable once (:class:`ApprovalStore`,
  :class:`InMemoryApprovalStore`).

See ``docs/concepts/approval.md``.
"""

from __future__ import annotations

from nous_tools.approval._gate import check_approval as check_approval
from nous_tools.approval._request import ApprovalRequest as ApprovalRequest
from nous_tools.approval._request import Edit as Edit
from nous_tools.approval._store import ApprovalStore as ApprovalStore
from nous_tools.approval._store import InMemoryApprovalStore as InMemoryApprovalStore
from nous_tools.approval._token import NeedsApproval as NeedsApproval
from nous_tools.approval._token import approved_arguments as approved_arguments
from nous_tools.approval._token import approved_tool as approved_tool
from nous_tools.approval._token import tool_digest as tool_digest

__all__ = [
    "ApprovalRequest",
    "ApprovalStore",
    "Edit",
    "InMemoryApprovalStore",
    "NeedsApproval",
    "check_approval",
    "tool_digest",
]
