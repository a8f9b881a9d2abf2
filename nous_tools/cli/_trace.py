"""What ``run`` shows of an attempt on stderr: ``--trace`` lines and the live line (private)."""

from __future__ import annotations

import collections.abc as c
import threading
import time
import typing as t

from nous_tools import signals
from nous_tools.cli._console import (
    _Console,
    _duration,
    _seconds,
)

__all__ = ["LIVE_DELAY", "LIVE_INTERVAL", "Receiver"]

#: How long an attempt runs before the live line appears, and how often it refreshes.
LIVE_DELAY = 0.5
LIVE_INTERVAL = 0.25


# -- signals: --trace and the live line -------------------------------------------

Receiver = c.Callable[..., None]


def _trace_receivers(console: _Console) -> list[tuple[t.Any, Receiver]]:
    """One readable stderr line per signal, from scrubbed metadata only (type names,
    never raw exception messages or stack traces)."""

    def on_start(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        meta = signals.scrub(metadata)
        timeout = getattr(sender, "timeout", None)
        deadline = f"timeout {_seconds(timeout)} s" if timeout else "no timeout"
        console.line(
            f"[trace] start {meta.get('tool_name')} attempt "
            f"{meta.get('attempt')}/{meta.get('max_retries')} ({deadline})"
        )

    def on_stop(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        meta = signals.scrub(metadata)
        console.line(
            f"[trace] stop {meta.get('tool_name')} attempt {meta.get('attempt')} "
            f"in {_duration(measurements.get('duration'))}"
        )

    def on_exception(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        meta = signals.scrub(metadata)
        retry = "will retry" if meta.get("will_retry") else "not retried"
        console.line(
            f"[trace] exception {meta.get('tool_name')} attempt {meta.get('attempt')}: "
            f"{meta.get('kind')}, {retry}"
        )

    def on_timeout(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        meta = signals.scrub(metadata)
        timeout = measurements.get("timeout")
        shown = _seconds(timeout) if isinstance(timeout, (int, float)) else "?"
        console.line(f"[trace] timeout {meta.get('tool_name')} after {shown} s")

    return [
        (signals.tool_execute_start, on_start),
        (signals.tool_execute_stop, on_stop),
        (signals.tool_execute_exception, on_exception),
        (signals.tool_execute_timeout, on_timeout),
    ]


def _ellipsis(stream: t.TextIO) -> str:
    """``…`` when ``stream`` can encode it, else ``...``."""
    try:
        "\u2026".encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "..."
    return "\u2026"


class _LiveLine:
    """``search_web … 3.2 s / 30 s`` on stderr while an attempt runs past ``delay``.

    A daemon thread redraws it every ``interval`` seconds; the ``start`` signal
    begins an attempt, ``stop`` and ``exception`` end it (and erase the line).
    """

    def __init__(
        self, console: _Console, delay: float = LIVE_DELAY, interval: float = LIVE_INTERVAL
    ) -> None:
        self._console = console
        self._delay = delay
        self._interval = interval
        self._cond = threading.Condition()
        self._attempt: tuple[str, float | None, int, int, float] | None = None
        self._closed = False
        self._ellipsis = _ellipsis(console.stream)
        self._thread = threading.Thread(target=self._run, name="nous-tools-live", daemon=True)
        self._thread.start()

    def receivers(self) -> list[tuple[t.Any, Receiver]]:
        def on_start(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
            timeout = getattr(sender, "timeout", None)
            with self._cond:
                self._attempt = (
                    str(metadata.get("tool_name")),
                    timeout if isinstance(timeout, (int, float)) else None,
                    int(metadata.get("attempt") or 1),
                    int(metadata.get("max_retries") or 1),
                    time.monotonic(),
                )
                self._cond.notify_all()

        def on_end(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
            with self._cond:
                self._attempt = None
                self._console.clear()
                self._cond.notify_all()

        return [
            (signals.tool_execute_start, on_start),
            (signals.tool_execute_stop, on_end),
            (signals.tool_execute_exception, on_end),
        ]

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._attempt = None
            self._console.clear()
            self._cond.notify_all()
        self._thread.join(1.0)

    def suspend(self) -> None:
        """Stop drawing (a progress bar takes the line over)."""
        with self._cond:
            self._closed = True
            self._attempt = None
            self._console.clear()
            self._cond.notify_all()

    def _text(
        self, name: str, timeout: float | None, attempt: int, total: int, elapsed: float
    ) -> str:
        label = name if total == 1 or attempt == 1 else f"{name} (attempt {attempt}/{total})"
        limit = f" / {_seconds(timeout)} s" if timeout else ""
        return f"{label} {self._ellipsis} {elapsed:.1f} s{limit}"

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                current = self._attempt
                if current is None:
                    self._cond.wait()
                    continue
                name, timeout, attempt, total, began = current
                elapsed = time.monotonic() - began
                if elapsed < self._delay:
                    self._cond.wait(self._delay - elapsed)
                    continue
                self._console.show(self._text(name, timeout, attempt, total, elapsed))
                self._cond.wait(self._interval)
