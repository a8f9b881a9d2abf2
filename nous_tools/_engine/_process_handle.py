"""The parent's end of one child process (private).

:class:`_Child` is the pool's handle on a child: its pipe, the wait for its
reply or its exit (``poll(2)``, to the millisecond), the ``SIGKILL`` of its
process group, and how it ended. :func:`_wait_reply` reads one call's reply off
a child's pipe, handing the call's events and questions on as they come
(a question is answered in a thread of its own, while the call's :class:`_Gate`
is open). The design is in :mod:`nous_tools._engine._process_pool`.
"""

from __future__ import annotations

import collections.abc as c
import contextlib
import math
import os
import signal
import threading
import time
import typing as t

from nous_tools._engine import _pipe
from nous_tools._util._clock import monotonic
from nous_tools._util._log import log as _log

if t.TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

__all__: list[str] = []

_SIGKILL: int = getattr(signal, "SIGKILL", signal.SIGTERM)
_MAX_WAIT = 86_400.0  # one poll(2) at most (its timeout is an int of milliseconds)
_LATE = object()  # _wait_reply: the deadline passed
_ENDED = object()  # _wait_reply: the child ended without answering
_CANCEL_POLL = 0.1  # _wait_reply: how often it looks at the caller's cancellation


class _Gate:
    """Whether a call is still on, for the answers written to its child from other
    threads: closed when the call ends, under the lock the writers take."""

    __slots__ = ("lock", "open")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = True

    def close(self) -> None:
        with self.lock:
            self.open = False


def _answer(
    child: _Child,
    seq: int,
    kind: int,
    payload: bytes,
    on_request: c.Callable[[int, bytes], bytes],
    gate: _Gate,
) -> None:
    """Answer a child's question in a thread of its own; the answer is written only
    while the call is on (a killed or finished call's child gets nothing)."""

    def run() -> None:
        try:
            answer = on_request(kind, payload)
        except BaseException:  # on_request packs what it raises; this is its own failure
            _log.exception("nous_tools: answering a child's question failed")
            return
        with gate.lock:
            if gate.open:
                with contextlib.suppress(OSError, ValueError):
                    child.conn.send_bytes(_pipe.frame(seq, _pipe.ANSWER, answer))

    threading.Thread(target=run, name="nous-tools-child-question", daemon=True).start()


class _Child:
    """One child process, its end of the pipe, and how many attempts it ran."""

    __slots__ = ("conn", "group", "pid", "poller", "process", "sentinel", "tasks", "unread")

    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.pid: int | None = None
        self.sentinel = -1
        self.group = False  # True once the child leads its own process group
        self.tasks = 0
        self.poller: t.Any = None
        self.unread = False  # found readable while idle: a message out of turn, or its end

    def started(self) -> None:
        self.pid = self.process.pid
        self.sentinel = self.process.sentinel
        try:
            import select

            poller = select.poll()
            poller.register(self.conn.fileno(), select.POLLIN)
            poller.register(self.sentinel, select.POLLIN)
            self.poller = poller
        except (ImportError, AttributeError):  # no poll(2): use multiprocessing's wait
            self.poller = None

    def wait(self, timeout: float) -> tuple[bool, bool]:
        """Wait up to ``timeout`` seconds: (the pipe is readable, the child exited)."""
        end = monotonic() + timeout
        while True:
            remaining = min(max(0.0, end - monotonic()), _MAX_WAIT)
            if self.poller is not None:
                # poll(2) counts whole milliseconds: wait the whole ones there and
                # sleep the last fraction, so a kill is not a millisecond late.
                milliseconds = math.floor(remaining * 1000)
                if milliseconds == 0 and remaining > 0:
                    time.sleep(remaining)
                events = self.poller.poll(milliseconds)
                fds = {fd for fd, _ in events}
                readable, exited = self.conn.fileno() in fds, self.sentinel in fds
            else:
                from multiprocessing.connection import wait

                ready = wait([self.conn, self.sentinel], remaining)
                readable, exited = self.conn in ready, self.sentinel in ready
            if readable or exited or monotonic() >= end:
                return readable, exited

    def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the child to exit."""
        from multiprocessing.connection import wait

        return bool(wait([self.sentinel], timeout))

    def kill(self) -> None:
        """SIGKILL the child's process group (the child and what it started).

        The group's id is the child's pid, and it cannot be reused while any
        member lives, so this never hits a stranger; when the group is gone
        (ESRCH), there is no one left to kill. (The forkserver, the children's
        real parent, reaps a child as soon as it dies: its bare pid is no safe
        target once it has exited, its group id is.)"""
        if self.group and self.pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, _SIGKILL)
            return
        with contextlib.suppress(Exception):
            self.process.kill()

    def describe_exit(self) -> str:
        code = self.process.exitcode
        if code is None:
            return "closed its pipe without answering"
        if code < 0:
            try:
                return f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with code {code}"


def _wait_reply(
    child: _Child,
    seq: int,
    deadline: float,
    on_event: c.Callable[[int, memoryview], object] | None,
    on_request: c.Callable[[int, bytes], bytes] | None = None,
    gate: _Gate | None = None,
    cancelled: threading.Event | None = None,
) -> object:
    """Wait until ``deadline`` for call ``seq``'s reply on ``child``'s pipe:
    ``(reply, stray)`` (stray: something else came on the pipe meanwhile),
    :data:`_LATE` (the deadline passed) or :data:`_ENDED` (the child ended
    without answering). Events of the call go to ``on_event``; its requests
    (``ctx.sample``, ``ctx.elicit``) to ``on_request``, answered in a thread of
    their own while ``gate`` is open. Counts nothing, kills nothing: the caller
    decides. A set ``cancelled`` (the caller's) ends the wait as the deadline does."""
    stray = False
    while True:
        wait = deadline - monotonic()
        if cancelled is not None:
            if cancelled.is_set():
                return _LATE
            wait = min(wait, _CANCEL_POLL)
        readable, exited = child.wait(wait)
        if not readable and not exited:
            if cancelled is not None and monotonic() < deadline:
                continue
            return _LATE
        try:
            message = child.conn.recv_bytes() if readable else None
        except (EOFError, OSError):
            message = None
        if message is None:  # the child ended without answering
            return _ENDED
        parsed = _pipe.unframe(message)
        if parsed is not None and parsed[0] == seq:
            kind = parsed[1]
            if kind in _pipe.REPLY_KINDS:
                return parsed[2], stray
            if kind in _pipe.EVENT_KINDS:
                if on_event is not None:
                    _event(on_event, kind, parsed[2])
                continue
            if kind in _pipe.REQUEST_KINDS and on_request is not None and gate is not None:
                _answer(child, seq, kind, bytes(parsed[2]), on_request, gate)
                continue
        stray = True
        _log.warning(
            "nous_tools: child process %s wrote to its pipe out of turn (%s, while "
            "it served call %s); discarded, and the child will be replaced",
            child.pid,
            _pipe.describe(message),
            seq,
        )


def _event(on_event: c.Callable[[int, memoryview], object], kind: int, payload: memoryview) -> None:
    """Hand a call's event to its handler; what the handler raises is logged."""
    try:
        on_event(kind, payload)
    except Exception:
        _log.exception("nous_tools: the handler of a child's event (kind %s) raised; ignored", kind)
