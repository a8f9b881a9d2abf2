"""What ``nous-tools run`` shows of progress and log lines (private).

On a terminal (stderr is one, and no ``--json``): a progress bar for a tool that
reports progress, and for ``--batch`` one bar of the calls done — drawn by
``tqdm`` when it is installed (``pip install 'nous-tools[progress]'``), else by a
bar of ``#`` on the live line. Otherwise (piped, or ``--json``): plain lines on
stderr, ``[progress] NAME 50% (50/100) MESSAGE`` at most once a second per call
(and its last), ``[batch] 3/20 done``. A tool's log lines are printed either way,
``[log] NAME LEVEL: MESSAGE key=value`` (``info`` and up; ``debug`` with ``-v``).
"""

from __future__ import annotations

import collections.abc as c
import shutil
import threading
import time
import typing as t

from nous_tools import signals
from nous_tools._engine._reporting import LEVELS, shown_data

__all__ = ["ProgressView"]

#: Seconds between two plain ``[progress]`` lines of one call.
PLAIN_INTERVAL = 1.0

Receiver = c.Callable[..., None]


class _Console(t.Protocol):  # the CLI's stderr console
    stream: t.TextIO

    def line(self, text: str) -> None: ...

    def show(self, text: str) -> None: ...

    def clear(self) -> None: ...


def _number(value: float) -> str:
    return f"{value:g}"


def _percent(progress: float, total: float | None) -> str:
    if not total:
        return _number(progress)
    return f"{100 * progress / total:.0f}% ({_number(progress)}/{_number(total)})"


class _Bar:
    """A progress bar on the terminal: tqdm's, or one of ``#`` on the live line."""

    #: tqdm's format once the total is known: no rate (progress units are the tool's).
    FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"

    def __init__(self, console: _Console, label: str, unit: str, total: float | None) -> None:
        self._console = console
        self._label = label
        self._tqdm: t.Any = None
        try:
            from tqdm import tqdm
        except ImportError:
            return
        # The terminal's size (80 x 24 where it reports none, as a new pseudo-terminal
        # does: tqdm would draw nothing in 0 rows).
        size = shutil.get_terminal_size()
        self._tqdm = tqdm(
            total=total,
            desc=label,
            bar_format=self.FORMAT if total is not None else None,
            unit=unit,
            file=console.stream,
            leave=True,
            ncols=max(40, size.columns - 1),
            nrows=max(2, size.lines),
            mininterval=0.1,
        )

    def update(self, progress: float, total: float | None, message: str | None) -> None:
        bar = self._tqdm
        if bar is not None:
            if total is not None and bar.total != total:
                bar.total = total
                bar.bar_format = self.FORMAT
            bar.n = progress
            if message:
                bar.set_postfix_str(message, refresh=False)
            bar.refresh()
            return
        text = self._label
        if total:
            filled = int(20 * min(1.0, progress / total))
            text += f" [{'#' * filled}{'.' * (20 - filled)}] {_percent(progress, total)}"
        else:
            text += f" {_number(progress)}"
        if message:
            text += f" {message}"
        self._console.show(text)

    def write(self, line: str) -> None:
        bar = self._tqdm
        if bar is not None:
            bar.write(line, file=self._console.stream)
        else:
            self._console.line(line)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        else:
            self._console.clear()


class ProgressView:
    """The receivers of ``run``: progress and log lines on stderr, a bar on a terminal.

    ``calls`` is the number of calls of a ``--batch`` (None for one call): the bar
    then counts calls, and each call's own progress is not drawn.
    """

    def __init__(
        self,
        console: _Console,
        *,
        terminal: bool,
        verbose: int = 0,
        calls: int | None = None,
        on_bar: c.Callable[[], None] | None = None,
    ) -> None:
        self._console = console
        self._terminal = terminal
        self._calls = calls
        self._on_bar = on_bar  # told when a bar appears (the live line stands aside)
        self._levels = LEVELS if verbose else LEVELS[1:]
        self._lock = threading.Lock()
        self._bar: _Bar | None = None
        # plain lines: per call, when its last line was printed and what is held back
        self._printed: dict[t.Any, float] = {}
        self._held: dict[t.Any, str] = {}

    def receivers(self) -> list[tuple[t.Any, Receiver]]:
        return [(signals.tool_progress, self.on_progress), (signals.tool_log, self.on_log)]

    # -- the signals -------------------------------------------------------------

    def on_progress(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        name = str(metadata.get("tool_name"))
        call_id = metadata.get("call_id")
        if call_id is not None:  # a call of a --batch: #i, its place in the file
            name += str(call_id)
        progress, total, message = metadata["progress"], metadata["total"], metadata["message"]
        with self._lock:
            if self._terminal:
                if self._calls is None:  # one call: its own bar
                    self._ensure_bar(name, "", total).update(progress, total, message)
                return
            key = name
            text = f"[progress] {name} {_percent(progress, total)}" + (
                f" {message}" if message else ""
            )
            now = time.monotonic()
            done = total is not None and progress >= total
            if done or now - self._printed.get(key, -PLAIN_INTERVAL) >= PLAIN_INTERVAL:
                self._printed[key] = now
                self._held.pop(key, None)
                self._console.line(text)
            else:
                self._held[key] = text  # printed if nothing comes after it

    def on_log(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        level = metadata.get("level")
        if level not in self._levels:
            return
        data = metadata.get("data") or {}
        shown = shown_data(data) if data else ""
        name = str(metadata.get("tool_name"))
        call_id = metadata.get("call_id")
        if call_id is not None:
            name += str(call_id)
        line = f"[log] {name} {level}: {metadata.get('message')}" + (f" {shown}" if shown else "")
        with self._lock:
            if self._bar is not None:
                self._bar.write(line)
            else:
                self._console.line(line)

    def on_batch(self, done: int, total: int, result: object) -> None:
        """``on_progress`` of a ``--batch``: calls done out of ``total``."""
        with self._lock:
            if self._terminal:
                self._ensure_bar("calls", " calls", total).update(done, total, None)
            elif done:
                self._console.line(f"[batch] {done}/{total} done")

    # -- the bar -----------------------------------------------------------------

    def _ensure_bar(self, label: str, unit: str, total: float | None) -> _Bar:
        bar = self._bar
        if bar is None:
            if self._on_bar is not None:
                self._on_bar()
            bar = self._bar = _Bar(self._console, label, unit, total)
        return bar

    def close(self) -> None:
        """Print the plain lines held back, and end the bar."""
        with self._lock:
            for text in self._held.values():
                self._console.line(text)
            self._held.clear()
            if self._bar is not None:
                self._bar.close()
                self._bar = None
