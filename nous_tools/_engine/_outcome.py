"""What a call on a pool came to: the kinds of outcome (private).

A pool reports each call as a plain tuple whose first item is one of these kinds
(the thread pool's :data:`Outcome` is ``(kind, value, text)``); the executor
turns it into ``Ok``/``Err``. Shared by the thread pool (:mod:`nous_tools._engine._pool`),
the process pool, what crosses a child's pipe and the backends.
"""

from __future__ import annotations

import typing as t

__all__ = [
    "QUEUE_TIMED_OUT",
    "RAISED",
    "RETURNED",
    "SATURATED",
    "SHUT_DOWN",
    "TIMED_OUT",
    "Outcome",
]

RETURNED = "returned"  # value: what the callable returned
RAISED = "raised"  # value: the exception it raised; text: its str(), rendered in the worker
TIMED_OUT = "timed_out"
SATURATED = "saturated"  # value: (abandoned, cap)
SHUT_DOWN = "shut_down"

#: What :meth:`WorkerPool.run` returns: ``(kind, value, text)``.
Outcome = tuple[str, t.Any, t.Any]

#: Outcome kind: no child came free within the call's ``queue_timeout``, so the
#: tool never started (value: ``(queue_timeout, max_workers)``).
QUEUE_TIMED_OUT = "queue_timed_out"
