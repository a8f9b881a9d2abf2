"""What runs in a child process of the process pool (private).

The child's whole life is :func:`_child_main`: lead a new process group, say it
is ready, then answer the calls the parent writes to its pipe until the parent
closes it. The pool starts it (:mod:`nous_tools._engine._process_keeper`) as a
``multiprocessing`` target, and has the forkserver import this module before it
forks children, so it imports only what a child needs: what crosses the pipe
(:mod:`nous_tools._engine._pipe`, :mod:`nous_tools._engine._isolation`). The
design is in :mod:`nous_tools._engine._process_pool`.
"""

from __future__ import annotations

import contextlib
import os
import typing as t

from nous_tools._engine import _isolation, _pipe

if t.TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__: list[str] = []

_GROUPS = hasattr(os, "setsid") and hasattr(os, "killpg")


def _child_main(conn: Connection) -> None:
    """A child's life: lead a new process group, say so, then serve calls until
    the parent closes the pipe."""
    if _GROUPS:
        with contextlib.suppress(OSError):
            os.setsid()
    with contextlib.suppress(Exception):
        _isolation.warm_up()
    events = _isolation.events = _isolation.Events(conn)  # every frame it writes, whole
    events.ready(str(os.getpgrp()).encode() if _GROUPS else b"0")
    run = _isolation.run_request
    unframe = _pipe.unframe
    parts = _pipe.call_parts
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        call = unframe(message)
        if call is None or call[1] != _pipe.CALL:
            continue  # only the parent writes to this end, and only calls
        events.begin(call[0])
        deadline, request = parts(call[2])
        events.reply(run(request, deadline))
