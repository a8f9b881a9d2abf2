"""What the command line says: exit statuses, usage errors, stderr, stdout (private).

The console on stderr (shared by trace lines, log records and the live line),
the library's log routed to it for ``-v``, and how values are written: as JSON,
or as their repr when JSON cannot hold them.
"""

from __future__ import annotations

import collections.abc as c
import contextlib
import json
import logging
import shutil
import sys
import threading
import typing as t

__all__ = ["EXIT_ERR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "UsageError"]

EXIT_OK = 0
EXIT_ERR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_PROG = "nous-tools"


class UsageError(Exception):
    """A mistake in the command line itself: reported on one line, exit status 2.

    ``detail`` is the exception behind it when that is the user's own code failing
    (an import error): ``-v`` prints its traceback.
    """

    def __init__(self, message: str, *, detail: BaseException | None = None) -> None:
        super().__init__(message)
        self.detail = detail


# -- stderr -----------------------------------------------------------------------


def _isatty(stream: t.IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _one_line(text: str) -> str:
    """``text`` with its line breaks folded into spaces."""
    return " ".join(part.strip() for part in text.strip().splitlines() if part.strip())


def _safe_repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__} whose repr() raised>"


class _Console:
    """stderr, shared by trace lines, log records and the live line.

    Whole lines first erase the live line (if one is shown); the live line is
    redrawn in place with ``\\r`` on its next refresh.
    """

    def __init__(self, stream: t.TextIO) -> None:
        self.stream = stream
        self._lock = threading.Lock()
        self._shown = 0  # width of the live line currently on screen

    def line(self, text: str) -> None:
        with self._lock:
            self._erase()
            self._write(text + "\n")

    def show(self, text: str) -> None:
        with self._lock:
            width = max(20, shutil.get_terminal_size().columns - 1)
            text = text[:width]
            self._write("\r" + text + " " * max(0, self._shown - len(text)))
            self._shown = max(len(text), self._shown)

    def clear(self) -> None:
        with self._lock:
            self._erase()

    def _erase(self) -> None:
        if self._shown:
            self._write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except UnicodeEncodeError:
            encoding = getattr(self.stream, "encoding", None) or "ascii"
            self.stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
            self.stream.flush()
        except (OSError, ValueError):  # stderr closed: nothing more to say
            pass


class _ConsoleHandler(logging.Handler):
    """Log records of the library, as lines on the console (``--verbose``)."""

    def __init__(self, console: _Console) -> None:
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.line(self.format(record))
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def _library_logging(verbosity: int, console: _Console) -> c.Iterator[None]:
    """Route the ``nous_tools`` logger for the length of a command.

    Without ``-v`` its records are dropped: the command reports failures itself,
    in one line, and Python's last-resort handler would otherwise print the
    library's warnings and errors too. ``-v`` shows INFO and up, ``-vv`` DEBUG.
    """
    logger = logging.getLogger("nous_tools")
    handler: logging.Handler
    if verbosity:
        handler = _ConsoleHandler(console)
        handler.setFormatter(logging.Formatter("[log] %(levelname)s %(message)s"))
    else:
        handler = logging.NullHandler()
    saved = (logger.propagate, logger.level)
    logger.addHandler(handler)
    logger.propagate = False
    if verbosity:
        logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate, level = saved
        logger.setLevel(level)


# -- formatting -------------------------------------------------------------------


def _seconds(value: float) -> str:
    """``0.2`` → ``"0.2"``, ``30.0`` → ``"30"``."""
    return f"{value:g}"


def _duration(nanoseconds: object) -> str:
    if not isinstance(nanoseconds, (int, float)):
        return "?"
    ms = nanoseconds / 1e6
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


def _dumps(value: object, *, indent: int | None = None, ascii_only: bool = True) -> str:
    """Strict JSON (no NaN); values JSON cannot hold inside it are written as their repr."""
    return json.dumps(
        value, default=_safe_repr, allow_nan=False, indent=indent, ensure_ascii=ascii_only
    )


_JSON_NATIVE = (dict, list, tuple, int, float, bool, type(None))


def _render_value(value: object) -> str:
    """What ``run`` prints for an ``Ok``: a string as is, other values as JSON, and
    a value JSON cannot hold (at the top, or one that fails as a whole) as its repr."""
    if isinstance(value, str):
        return value
    if isinstance(value, _JSON_NATIVE):
        try:
            return _dumps(value, indent=2, ascii_only=False)
        except (TypeError, ValueError, RecursionError):
            pass
    return _safe_repr(value)


def _json_payload(payload: dict[str, t.Any]) -> str:
    """The one JSON object of ``--json``; a value that fails as a whole becomes its repr."""
    try:
        return _dumps(payload)
    except (TypeError, ValueError, RecursionError):
        if "value" in payload:
            return _dumps({**payload, "value": _safe_repr(payload["value"])})
        raise


def _write_stdout(text: str) -> None:
    stream = sys.stdout
    try:
        stream.write(text + "\n")
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write((text + "\n").encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()
