"""Progress and log lines from a running tool to the caller's thread (private).

A tool calls ``ctx.report_progress(...)`` or ``ctx.log(...)``
(:class:`~nous_tools.RunContext`). When nobody listens, the context has no
channel and the call costs a check of its arguments and one attribute test.
When someone listens (a receiver of :data:`~nous_tools.signals.tool_progress` or
:data:`~nous_tools.signals.tool_log`), each attempt of a tool that takes ``ctx``
gets a :class:`Channel`, and its events travel:

* **inline** (no timeout): the tool runs in the caller's thread, which delivers
  each event as the tool reports it;
* **in a pool worker**: the worker queues the event and wakes the caller, who
  waits for the attempt and delivers events as they come
  (``WorkerPool.run_watched``; a batch's coordinator does the same);
* **in a child process**: the child sends the event over its pipe, and the caller,
  who waits on that pipe, delivers it;
* **nested calls** made with the tool's ``ctx`` report into the channel of the
  call that made them: under that call, from its caller's thread.

Every event an attempt reported before it ended is delivered before the
attempt's ``stop`` (or ``exception``) signal, in the order reported.

**Coalescing.** Progress is delivered at most every :data:`PROGRESS_INTERVAL`
seconds (20 a second) per attempt; an update that comes sooner is held, and
replaced by a later one: the caller delivers the held update when its time
comes (inline: at the tool's next report), and the last one always before the
attempt's end. A log line is never held: it first lets a held progress update
through, so the order holds. Log lines are limited by a token bucket
(:data:`LOG_BURST` lines at once, :data:`LOG_RATE` a second after that); lines
over the limit are dropped and counted, and a ``warning`` line saying how many
follows as soon as the limit allows, or at the end of the attempt.
"""

from __future__ import annotations

import collections
import collections.abc as c
import json
import queue
import threading
import time
import typing as t

from nous_tools._util._clock import monotonic
from nous_tools.run_context import LEVELS, check_log, check_progress

__all__ = [
    "LEVELS",
    "LOG_BURST",
    "LOG_RATE",
    "PROGRESS_INTERVAL",
    "Channel",
    "check_log",
    "check_progress",
    "shown_data",
    "wire_data",
]

#: Seconds between two progress updates of one attempt (20 a second).
PROGRESS_INTERVAL = 0.05
#: Log lines an attempt may send at once before the rate applies.
LOG_BURST = 100
#: Log lines a second an attempt may send after its burst.
LOG_RATE = 20.0

PROGRESS = "progress"
LOG = "log"

#: An event: ``(PROGRESS, system_time, progress, total, message)`` or
#: ``(LOG, system_time, level, message, data)``.
Event = tuple[str, int, t.Any, t.Any, t.Any]


def wire_data(data: c.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The entries of a log line's ``data`` that JSON can carry, as plain JSON data;
    the others are dropped (for a protocol: MCP's ``notifications/message``)."""
    kept: dict[str, t.Any] = {}
    for key, value in data.items():
        try:
            kept[key] = json.loads(json.dumps(value, allow_nan=False))
        except (TypeError, ValueError, RecursionError):
            continue
    return kept


def shown_data(data: c.Mapping[str, t.Any]) -> str:
    """A log line's ``data`` as text for people: ``key=value`` pairs, each value as
    JSON when it can be, else its ``repr``."""
    parts = []
    for key, value in data.items():
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            try:
                text = repr(value)
            except Exception:
                text = f"<{type(value).__name__} object (its repr() raised)>"
        parts.append(f"{key}={text}")
    return " ".join(parts)


class Channel:
    """The progress and log events of one attempt, on their way to whoever delivers them.

    ``deliver(event)`` delivers one event. ``owner`` is the thread ident that
    delivers (the caller's), or None when any thread may (serialised); an event
    reported in another thread than the owner's is queued, and ``wake()`` (when
    given) tells the owner, who then calls :meth:`serve`. :meth:`finish` ends the
    channel: what is queued or held is delivered there and then, and later
    reports are dropped.
    """

    __slots__ = (
        "_closed",
        "_deliver",
        "_dropped",
        "_due",
        "_events",
        "_filled",
        "_held",
        "_lock",
        "_owner",
        "_sending",
        "_tokens",
        "_wake",
        "inbox",
    )

    def __init__(
        self,
        deliver: c.Callable[[Event], None],
        owner: int | None = None,
        wake: c.Callable[[], None] | None = None,
    ) -> None:
        self._deliver = deliver
        self._owner = owner
        self._wake = wake
        self._lock = threading.Lock()
        self._sending = threading.RLock()
        self._events: collections.deque[Event] = collections.deque()
        self._held: Event | None = None
        self._due = 0.0  # progress reported before this time is held
        self._closed = False
        self._tokens = float(LOG_BURST)
        self._filled = monotonic()
        self._dropped = 0
        #: The queue the owner waits on, when it waits for a worker (see signal_channel).
        self.inbox: queue.SimpleQueue[t.Any] | None = None

    # -- the tool's side ---------------------------------------------------------

    def progress(
        self, progress: float, total: float | None, message: str | None, when: int = 0
    ) -> None:
        event: Event = (PROGRESS, when or time.time_ns(), progress, total, message)
        with self._lock:
            if self._closed:
                return
            now = monotonic()
            if now < self._due:
                self._held = event  # a later update replaces it
                return
            self._held = None
            self._due = now + PROGRESS_INTERVAL
            self._events.append(event)
        self._flow()

    def log(self, level: str, message: str, data: dict[str, t.Any], when: int = 0) -> None:
        event: Event = (LOG, when or time.time_ns(), level, message, data)
        with self._lock:
            if self._closed:
                return
            now = monotonic()
            tokens = min(float(LOG_BURST), self._tokens + (now - self._filled) * LOG_RATE)
            self._filled = now
            if tokens < 1.0:
                self._tokens = tokens
                self._dropped += 1
                return
            self._tokens = tokens - 1.0
            self._release_held(now)  # reported before this line: delivered before it
            self._note_dropped()
            self._events.append(event)
        self._flow()

    def _release_held(self, now: float) -> None:  # with the lock
        held = self._held
        if held is not None:
            self._held = None
            self._due = now + PROGRESS_INTERVAL
            self._events.append(held)

    def _note_dropped(self) -> None:  # with the lock
        dropped = self._dropped
        if dropped:
            self._dropped = 0
            self._events.append(
                (
                    LOG,
                    time.time_ns(),
                    "warning",
                    f"{dropped} log line(s) of this call were dropped: more than "
                    f"{LOG_BURST} at once, or {LOG_RATE:g} a second after that",
                    {"dropped": dropped},
                )
            )

    def _flow(self) -> None:
        owner = self._owner
        if owner is None or owner == threading.get_ident():
            self._drain()
        elif self._wake is not None:
            self._wake()

    # -- the deliverer's side ----------------------------------------------------

    def _drain(self) -> None:
        """Deliver the queued events in order (one thread at a time)."""
        events = self._events
        with self._sending:
            while True:
                with self._lock:
                    if not events:
                        return
                    event = events.popleft()
                self._deliver(event)

    def serve(self) -> float | None:
        """In the owner's thread: deliver what is queued, and a held progress update
        whose time has come. Returns when to call again (a monotonic time: a held
        update is due then, or progress arrived within the interval), or None."""
        with self._lock:
            now = monotonic()
            if self._held is not None and now >= self._due:
                self._release_held(now)
            due = self._due if (self._held is not None or now < self._due) else None
        self._drain()
        return due

    def finish(self) -> None:
        """The attempt has ended: deliver everything queued and held, in this thread,
        and drop whatever is reported from now on."""
        with self._lock:
            if self._closed and not self._events:
                return
            self._closed = True
            self._release_held(monotonic())
            self._note_dropped()
        self._drain()

    @property
    def closed(self) -> bool:
        return self._closed

    def owned(self) -> bool:
        """Whether this thread delivers the channel's events (the attempt's caller):
        only it may wait on :attr:`inbox`."""
        return self._owner == threading.get_ident()


def signal_channel(
    tool: t.Any,
    call_id: str | None,
    attempt: int,
    inbox: queue.SimpleQueue[t.Any] | None = None,
) -> Channel:
    """The channel of one attempt whose events become the ``tool_progress`` and
    ``tool_log`` signals, sent with ``tool`` as sender by this thread (the caller's).
    With ``inbox``, an event reported in another thread puts the channel there (the
    caller waits on it and calls :meth:`Channel.serve`); ``inbox=None`` makes one."""
    from nous_tools import signals

    progress_signal = signals.tool_progress
    log_signal = signals.tool_log
    send = signals.send
    name = tool.name

    def deliver(event: Event) -> None:
        kind, when, first, second, third = event
        if kind == PROGRESS:
            if progress_signal.receivers:
                send(
                    progress_signal,
                    tool,
                    {"progress": first, "total": second, "system_time": when},
                    {
                        "tool_name": name,
                        "call_id": call_id,
                        "attempt": attempt,
                        "progress": first,
                        "total": second,
                        "message": third,
                    },
                )
        elif log_signal.receivers:
            send(
                log_signal,
                tool,
                {"system_time": when},
                {
                    "tool_name": name,
                    "call_id": call_id,
                    "attempt": attempt,
                    "level": first,
                    "message": second,
                    "data": third,
                },
            )

    if inbox is None:
        inbox = queue.SimpleQueue()
    box = inbox

    def wake() -> None:
        box.put(channel)

    channel = Channel(deliver, threading.get_ident(), wake)
    channel.inbox = inbox
    return channel


def listening() -> bool:
    """Whether anyone receives progress or log signals now."""
    from nous_tools import signals

    return bool(signals.tool_progress.receivers or signals.tool_log.receivers)


# -- across a process boundary -----------------------------------------------------------


def encode(event: Event) -> list[t.Any]:
    """An event as plain JSON data, to cross to the caller from another process (a
    log line's ``data`` keeps what JSON can hold: :func:`wire_data`)."""
    kind, when, first, second, third = event
    if kind == LOG:
        third = wire_data(third)
    return [kind, when, first, second, third]


def replay(channel: Channel, encoded: object) -> None:
    """Report an event :func:`encode` made (in another process) into ``channel``, the
    attempt's in the caller; something that is not such an event is ignored."""
    if not isinstance(encoded, (list, tuple)) or len(encoded) != 5:
        return
    kind, when, first, second, third = encoded
    when = when if isinstance(when, int) else 0
    try:
        if kind == PROGRESS:
            check_progress(first, second, third)
            channel.progress(first, second, third, when)
        elif kind == LOG and isinstance(third, dict):
            check_log(first, second)
            channel.log(first, second, third, when)
    except ValueError:  # not what the tool's side sends: dropped
        return


def from_child(channel: Channel) -> c.Callable[[int, memoryview], None]:
    """The ``on_event`` of a process-isolated attempt (``ProcessPool.run``): each
    progress or log event its child sends is reported into ``channel``, in the
    caller's thread."""
    from nous_tools._engine._pipe import PROGRESS_EVENT

    def on_event(kind: int, payload: memoryview) -> None:
        try:
            fields = json.loads(bytes(payload))
        except ValueError:
            return
        if isinstance(fields, list):
            replay(channel, [PROGRESS if kind == PROGRESS_EVENT else LOG, *fields])

    return on_event
