"""The approval gate: who may run a tool that asks first.

``check_approval`` (the gate the pipeline runs before anything else), and the
stores that make an approval token usable once (``ApprovalStore``,
``InMemoryApprovalStore``; also importable from ``nous_tools.approval_store``).
See ``docs/concepts/approval.md``.
"""

from __future__ import annotations

from nous_tools.approval._gate import check_approval as check_approval

__all__ = ["check_approval"]
