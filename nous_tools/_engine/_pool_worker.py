"""A worker thread of the thread pool: its record, its bell, its shield (private).

How an idle worker sleeps and is woken (an eventfd where there is one), and how a
cancellation reaches it: ``ToolCancelled`` raised asynchronously in its thread
(``PyThreadState_SetAsyncExc``), or held back while it is in the library's own
code (:func:`shield`). The design is in :mod:`nous_tools._engine._pool`.
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import os
import sys
import threading
import typing as t

from nous_tools._util._scope import here
from nous_tools.errors import ToolCancelled

__all__ = ["shield", "unshield", "withdraw_own"]

# PyThreadState_SetAsyncExc(thread_id, exc) schedules ``exc`` in that thread;
# with exc=NULL it clears a scheduled exception that has not been delivered yet.
_set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
_clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)

_allocate_lock = _thread.allocate_lock


class _Settle(BaseException):
    """Sent by a thread to itself and caught at once (:func:`withdraw_own`)."""


def withdraw_own(me: _Worker) -> None:
    """Withdraw a cancellation sent to this thread (``me``'s) and not delivered yet,
    and leave the interpreter as if none had been sent.

    ``PyThreadState_SetAsyncExc(id, NULL)`` clears the thread's pending exception,
    but it also raises the interpreter's "an asynchronous exception is pending"
    flag, which only a thread that takes one lowers again. Left raised, every
    thread looks for pending work at every call and loop, and on CPython 3.11 a
    thread under ``sys.settrace`` (a debugger, coverage) spins for ever at the next
    function it enters. So the thread sends itself a private exception instead —
    it replaces whatever was pending — and takes it at once, which lowers the flag.
    Call it with ``me.lock`` or the pool's lock held, so nothing is sent meanwhile.
    """
    ident = me.ident
    try:
        _set_async_exc(ident, _Settle)
        # Delivered as the call returns (the eval-breaker check after a call);
        # the loop's backward jumps are further checks, should that one be skipped.
        for _ in range(8):
            pass
    except _Settle:
        return
    _clear_async_exc(ident, None)  # never delivered (not seen): at least never later


_hook_lock = threading.Lock()
_hook_installed = False


def _install_quiet_unraisable_hook() -> None:
    """A ``ToolCancelled`` that lands in a finalizer or weakref callback (code that
    happened to run in the cancelled worker) is swallowed by Python and reported
    as "Exception ignored"; it is our own signal, not the program's error, so the
    hook installed here drops it and passes everything else on."""
    global _hook_installed
    if _hook_installed:
        return
    with _hook_lock:
        if _hook_installed:
            return
        previous = sys.unraisablehook

        def hook(unraisable: t.Any) -> None:
            if unraisable.exc_type is ToolCancelled:
                return
            current = previous
            current(unraisable)

        sys.unraisablehook = hook
        _hook_installed = True


class _Worker:
    """A worker thread's record; only its own thread and the lock-holder write it.

    ``lock`` guards the shield: ``shield`` counts how deep the thread is in the
    library's own code (a nested call), where no cancellation is delivered;
    ``cancelled`` is set when its task is abandoned and stays set.
    """

    __slots__ = (
        "abandoned",
        "asleep",
        "bell",
        "cancelled",
        "completed",
        "fd",
        "gone",
        "healthy",
        "ident",
        "lock",
        "shield",
        "thread",
    )

    def __init__(self) -> None:
        self.abandoned = False
        self.cancelled = False
        self.completed = 0
        self.gone = False
        self.healthy = False
        self.ident = 0
        self.lock = threading.Lock()
        self.shield = 0
        self.thread: threading.Thread | None = None
        # What it sleeps on while idle: an eventfd (see _ring), else a lock; and
        # whether it is (about to be) asleep there, so only a sleeper's bell is rung.
        self.asleep = False
        self.fd = _take_fd()
        self.bell: t.Any = None
        if self.fd < 0:
            self.bell = _allocate_lock()
            self.bell.acquire()


# Waking an idle worker. A thread that releases a lock while it holds the GIL
# wakes the sleeper only for it to find the GIL taken and sleep again: four
# context switches where two would do, which is most of a hand-off's cost on a
# busy core. ``os.eventfd_write`` releases the GIL around the system call that
# wakes the worker, so the worker takes the GIL at once (Linux; elsewhere, a lock).
# A worker's eventfd is never closed, only handed to the next worker when it ends:
# a caller that looked at an idle worker a moment too long ago may still ring its
# bell, and must not reach another file that took the number.
_eventfd = getattr(os, "eventfd", None)
_spare_fds: list[int] = []


def _take_fd() -> int:
    """An eventfd for a new worker (a spare one if any), or -1 where there is none."""
    try:
        return _spare_fds.pop()
    except IndexError:
        pass
    if _eventfd is None:
        return -1
    try:
        return int(_eventfd(0))  # EFD_CLOEXEC by default
    except OSError:  # out of descriptors: this worker sleeps on a lock
        return -1


def _ring(worker: _Worker) -> None:
    """Wake ``worker``, which is asleep or about to be (a spare wake-up is harmless:
    it looks at the queue again). Nobody else rings it for this sleep."""
    worker.asleep = False
    fd = worker.fd
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.eventfd_write(fd, 1)  # the GIL is released while the worker wakes
    else:
        with contextlib.suppress(RuntimeError):  # rung already
            worker.bell.release()


def _sleep(worker: _Worker) -> None:
    """Sleep until ``worker``'s bell rings (at once if it rang meanwhile)."""
    fd = worker.fd
    if fd >= 0:
        os.eventfd_read(fd)
    else:
        worker.bell.acquire()


def shield() -> _Worker | None:
    """Enter the library's own code in a pool worker: from here to :func:`unshield`
    no ``ToolCancelled`` is delivered asynchronously (it could land in the middle
    of a log handler holding its lock, or of our books). A cancellation that
    arrives meanwhile is raised, synchronously, when the shield is left. Returns
    the token for :func:`unshield`; None outside a pool worker (nothing to do)."""
    me: _Worker | None = here.worker
    if me is None:
        return None
    with me.lock:
        if me.cancelled:  # one may have been sent a moment ago: raised on the way out
            withdraw_own(me)
        me.shield += 1
    return me


def unshield(me: _Worker) -> None:
    """Leave a shield; raise ``ToolCancelled`` if the worker's attempt was cancelled
    meanwhile (or before) and this was the outermost shield."""
    with me.lock:
        me.shield -= 1
        cancelled = me.shield == 0 and me.cancelled
    if cancelled:
        raise ToolCancelled
