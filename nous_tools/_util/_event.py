"""The ``cancelled`` event of one timed attempt, made cheap to create.

A leaf: it imports nothing of the package. The executor makes one per timed attempt
and hands it to the tool as ``ctx.cancelled``.
"""

from __future__ import annotations

import threading

__all__ = ["AttemptCancelled"]


class AttemptCancelled(threading.Event):
    """The ``cancelled`` event of one timed attempt: a :class:`threading.Event`
    whose condition is made the first time anything waits on it, sets or clears it.

    Most attempts end without anyone touching their event, and a
    ``threading.Condition`` costs more to make than the rest of the hand-off to a
    worker, so it is made on first use, once (a ``set()`` and a ``wait()`` racing
    to make it share one, with no lock an interruption could leave held).
    ``is_set()`` reads the flag alone.
    """

    # Class-level defaults: an event nobody touches never gets a ``__dict__``, and
    # making one runs no Python code at all (no Condition: see _condition).
    _flag = False
    _cond: threading.Condition | None = None
    __init__ = object.__init__

    def _condition(self) -> threading.Condition:
        cond = self._cond
        if cond is None:
            # dict.setdefault is atomic: of two threads racing to make it, both get
            # the one stored first. No lock, so no interruption can leave one held.
            made = threading.Condition(threading.Lock())
            cond = self.__dict__.setdefault("_cond", made)
        return cond

    def _at_fork_reinit(self) -> None:
        if self._cond is not None:
            self._cond._at_fork_reinit()  # type: ignore[attr-defined]

    def set(self) -> None:
        cond = self._condition()
        with cond:
            self._flag = True
            cond.notify_all()

    def clear(self) -> None:
        with self._condition():
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        cond = self._condition()
        with cond:
            signaled = self._flag
            if not signaled:
                signaled = cond.wait(timeout)
            return signaled
