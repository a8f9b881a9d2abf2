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

from nous_tools._engine import _fence, _isolation, _pipe
from nous_tools._util._clock import monotonic

if t.TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from nous_tools._engine._fence import Confinement

__all__: list[str] = []

_GROUPS = hasattr(os, "setsid") and hasattr(os, "killpg")


def _child_main(conn: Connection, confinement: Confinement | None = None) -> None:
    """A child's life: lead a new process group, ask to die with its parent, go
    behind the sandbox's fence (``confinement``), say so, then serve calls until
    the parent closes the pipe. A fence that cannot be entered is said instead
    of ready (``!`` and why), and the child ends without serving."""
    if _GROUPS:
        with contextlib.suppress(OSError):
            os.setsid()
    events = _isolation.events = _isolation.Events(conn)  # every frame it writes, whole
    try:
        _fence.die_with_parent()
        fenced = _fence.enter(confinement) if confinement is not None else None
    except Exception as exc:  # never serve a call unfenced: say why, and end
        events.ready(b"!" + _isolation._describe(exc).encode(errors="replace"))
        return
    watchdog = _fence.Watchdog()
    with contextlib.suppress(Exception):
        _isolation.warm_up()
    events.ready(str(os.getpgrp()).encode() if _GROUPS else b"0")
    run = _isolation.run_request
    unframe = _pipe.unframe
    parts = _pipe.call_parts
    waiting = _reader(conn)  # whether the next call is here already (a cheap look)
    message: bytes | None = None  # read ahead, while answering the call before
    closed = False  # ... and the pipe closed then
    me = os.getpid()
    while True:
        if message is None:
            if closed:
                return
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                return
        call = unframe(message)
        message = None
        if call is None:
            continue  # only the parent writes to this end, and only calls
        seq, kind, payload = call
        if kind == _pipe.CALL:
            deadline, request = parts(payload)
        elif kind == _pipe.QUEUED:  # sent ahead: say whether it starts, first
            taken = _pipe.take_queued(payload, monotonic())
            events.notice(seq, _pipe.NO_DEADLINE if taken is None else taken[0])
            if taken is None:
                continue
            deadline, request = taken
        else:
            continue
        while True:  # this call, then each queued call taken while answering the one before
            events.begin(seq)
            watchdog.arm(deadline)
            if fenced is not None:
                fenced.begin()
            result = run(request, deadline)
            watchdog.arm(None)
            if os.getpid() != me:
                # A copy the tool forked returned here: its original answers the
                # call. Leave at once, without a word, before it reads the pipe
                # (it would take the original's calls) or runs the parent's exit hooks.
                os._exit(0)
            following, taken = 0, None
            if waiting():  # the next call is here already: take it now, say so in the reply
                try:
                    message = conn.recv_bytes()
                except (EOFError, OSError):
                    closed = True
                ahead = None if message is None else unframe(message)
                if ahead is not None and ahead[1] == _pipe.QUEUED:
                    message = None
                    following = ahead[0]
                    taken = _pipe.take_queued(ahead[2], monotonic())
            if taken is None:
                events.reply(result, following, _pipe.NO_DEADLINE)
                break
            events.reply(result, following, taken[0])
            seq, (deadline, request) = following, taken


def _reader(conn: Connection) -> t.Callable[[], bool]:
    """Whether ``conn`` has something to read, without waiting: one ``poll(2)``
    object made once (``Connection.poll`` builds a selector each time)."""
    try:
        import select

        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
    except (ImportError, AttributeError, OSError):
        return conn.poll

    def waiting() -> bool:
        return bool(poller.poll(0))

    return waiting
