"""Cancel scopes: what a cancellation reaches, and where this thread stands (private).

Every timed attempt is a *task*, and a task is a scope: calls a tool makes from
inside its attempt (nested calls) are its children, and so are the batches it
runs. A batch of calls (``execute_many``) is a scope too, whose children are the
attempts its lanes start. Cancelling a scope — at a task's deadline, or on Ctrl-C
during a batch — cancels everything under it: no new child starts, and each
running child is cancelled as at its own deadline.

A thread knows where it stands through :data:`here`: ``scope`` is the scope new
work started from this thread belongs to (the task a pool worker runs, the batch a
lane serves), and ``nested`` says that work started from this thread must never
wait for pool capacity (it runs inside a worker, so waiting could deadlock).
"""

from __future__ import annotations

import threading
import typing as t

from nous_tools.errors import ToolCancelled

__all__ = ["Scope", "cancelled_here", "here", "in_worker", "interrupts"]


class Scope:
    """A node of the cancellation tree.

    ``deadline`` (on the pool's monotonic clock, or None) bounds every child:
    a child's deadline is the earlier of its own and this one. ``event`` is set
    when the scope is cancelled (a tool's ``ctx.cancelled``), when there is one.
    ``children`` is only ever added to by the thread that works in the scope, or
    made at construction when several threads do (a batch).
    """

    __slots__ = ("cancelled", "children", "deadline", "event")

    #: How a scope of another kind (a submitted process call) is cancelled:
    #: ``stop(kind)``. None for a plain scope, which is marked cancelled and whose
    #: children are cancelled in turn.
    stop: t.ClassVar[t.Callable[..., None] | None] = None

    def __init__(
        self,
        deadline: float | None = None,
        event: threading.Event | None = None,
        *,
        shared: bool = False,
    ) -> None:
        self.cancelled = False
        self.deadline = deadline
        self.event = event
        self.children: set[Scope] | None = set() if shared else None

    def adopt(self, child: Scope) -> bool:
        """Make ``child`` cancellable through this scope; False when this scope is
        already cancelled (then ``child`` must not start).

        The child is added before the flag is read, and a canceller sets the flag
        before it reads the children, so one of the two always sees the other.
        """
        children = self.children
        if children is None:
            children = self.children = set()
        children.add(child)
        return not self.cancelled

    def release(self, child: Scope) -> None:
        """Forget a child that has ended."""
        children = self.children
        if children is not None:
            children.discard(child)


class _Here(threading.local):
    scope: Scope | None = None
    nested: bool = False
    worker: t.Any = None  # the pool worker record of this thread (``_pool._Worker``)


#: Where this thread stands: its current ``scope`` and whether it is ``nested``.
here = _Here()


def in_worker() -> bool:
    """True in a pool worker (and in lanes it started): calls made here must not
    wait for pool capacity."""
    return here.nested


def cancelled_here() -> bool:
    """True when the scope this thread works in has been cancelled: a
    ``ToolCancelled`` seen now is the real thing, not one a tool raised itself."""
    scope = here.scope
    return scope is not None and scope.cancelled


def interrupts(exc: BaseException) -> bool:
    """True when ``exc`` must propagate rather than become an ``Err`` or a log line:
    the user's Ctrl-C (a ``KeyboardInterrupt`` in the main thread, where Python
    delivers it) or the real cancellation of the attempt this thread works for —
    not a ``KeyboardInterrupt`` or ``ToolCancelled`` that some code raised itself."""
    if isinstance(exc, KeyboardInterrupt):
        return threading.current_thread() is threading.main_thread()
    if isinstance(exc, ToolCancelled):
        return cancelled_here()
    return False
