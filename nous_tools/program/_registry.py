"""What a program needs of a registry (private): the registry's public face, typed
without importing it (the registry is the layer above, and hands itself in)."""

from __future__ import annotations

import collections.abc as c
import typing as t

if t.TYPE_CHECKING:
    from nous_tools.approval import NeedsApproval
    from nous_tools.journal import Journal
    from nous_tools.results import Result
    from nous_tools.run_context import RunContext
    from nous_tools.tool import Tool

__all__ = ["RegistryLike"]


class RegistryLike(t.Protocol):
    """The part of :class:`~nous_tools.Registry` a program's nested calls use."""

    @property
    def name(self) -> str | None: ...

    def lookup(self, name: str) -> Tool | None: ...

    def names(self) -> list[str]: ...

    def execute(
        self,
        name: t.Any,
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Result | NeedsApproval: ...

    def run_approval(
        self,
        na: NeedsApproval,
        ctx: RunContext[t.Any] | None = None,
        call_id: str | None = None,
        *,
        claim: t.Any = None,
        wait: float | None = None,
    ) -> Result: ...

    def claim_approval(self, approval_id: str, expires_at: float | None = None) -> bool: ...

    def effective_journal(self, executor: t.Any = None) -> Journal | None: ...
