"""The library's logger, which Ctrl-C cannot wedge (private).

A ``logging.Handler`` takes its lock and then enters ``try``; a
``KeyboardInterrupt`` that lands between the two leaves the lock held by the
main thread for good, and every other thread that logs through that handler
then blocks forever. A program that catches Ctrl-C and goes on (a shell, a
server, a notebook) would be wedged by one unlucky press during a tool call.
So in the main thread the library's records are written with SIGINT deferred:
a Ctrl-C that arrives meanwhile is raised right after the record is written.
Other threads receive no SIGINT; there the logger is used as it is.
"""

from __future__ import annotations

import logging
import signal
import threading
import typing as t

__all__ = ["log"]

_MAIN = threading.main_thread().ident


class _SafeLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """``logging.getLogger("nous_tools")``, writing with SIGINT deferred in the main thread."""

    def log(self, level: int, msg: object, *args: t.Any, **kwargs: t.Any) -> None:
        logger = self.logger
        if not logger.isEnabledFor(level):
            return
        kwargs.setdefault("stacklevel", 3)  # the record names the library's caller line
        if threading.get_ident() != _MAIN:
            logger.log(level, msg, *args, **kwargs)
            return
        pressed: list[tuple[int, t.Any]] = []
        try:
            previous = signal.signal(
                signal.SIGINT, lambda signum, frame: pressed.append((signum, frame))
            )
        except (ValueError, TypeError, OSError):  # not the main interpreter, or no signals
            logger.log(level, msg, *args, **kwargs)
            return
        try:
            logger.log(level, msg, *args, **kwargs)
        finally:
            signal.signal(signal.SIGINT, previous)
        if pressed:  # deliver the deferred Ctrl-C as the program's own handler would
            if callable(previous):
                previous(*pressed[0])
            elif previous == signal.SIG_DFL:
                signal.raise_signal(signal.SIGINT)

    def process(self, msg: t.Any, kwargs: t.MutableMapping[str, t.Any]) -> tuple[t.Any, t.Any]:
        return msg, kwargs


#: The logger every library module writes to (name ``nous_tools``).
log = _SafeLog(logging.getLogger("nous_tools"), {})
