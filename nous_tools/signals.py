"""Telemetry as blinker signals: ``start``, ``stop``, ``exception``, ``timeout``,
``rate_limited``, ``progress`` and ``log``.

Every signal is sent with the :class:`~nous_tools.Tool` as sender and two keyword
arguments, ``measurements`` and ``metadata`` (dicts). Times are integer
nanoseconds; ``timeout`` is the tool's timeout in seconds.

>>> from nous_tools import Tool, execute
>>> seen = []
>>> def on_stop(sender, measurements, metadata):
...     seen.append((sender.name, metadata["success"]))
>>> tool_execute_stop.connect(on_stop)  # doctest: +ELLIPSIS
<function on_stop at ...>
>>> execute(Tool.from_function(lambda: 1, name="one", timeout=None), {}).value
1
>>> seen
[('one', True)]
>>> tool_execute_stop.disconnect(on_stop)

Signals are sent from the thread that called ``execute`` (also when the attempt
runs in a pool worker), so receivers see the caller's ``contextvars``. A receiver
that raises is logged and skipped: it never changes a tool's outcome and never
stops the other receivers.

The ``exception`` event carries the raw exception (``reason``) and its
``stacktrace`` for in-process handlers. Those may hold secrets (an API key in an
error message): a receiver that forwards events off the machine must pass the
metadata through :func:`scrub` first.

The four signals are ``tool_execute_start``, ``tool_execute_stop``,
``tool_execute_exception`` and ``tool_execute_timeout``; ``tool_timeout`` is the
older name of ``tool_execute_timeout`` and is the same signal object, so a
receiver connected to either name gets every timeout. ``tool_rate_limited`` is
sent when a tool's limit refuses a call before its first attempt (see
``docs/concepts/limits.md``).

Two more report what a running tool says: ``tool_progress`` (``ctx.report_progress``)
and ``tool_log`` (``ctx.log``), sent like the others from the caller's thread, in the
order reported, before the attempt's ``stop``; see ``docs/how-to/progress.md``.

blinker holds receivers **weakly** by default: a receiver that nothing else
refers to (a lambda, a function defined inside another and returned, a bound
method of a temporary object) is dropped as soon as it is garbage-collected, and
silently stops receiving. Connect such a receiver with ``weak=False`` (and
``disconnect`` it when done):

>>> timed_out = []
>>> receiver = tool_execute_timeout.connect(
...     lambda sender, **kw: timed_out.append(sender.name), weak=False)
>>> slow = Tool.from_function(lambda ctx: ctx.cancelled.wait(5), name="slow", timeout=0.05)
>>> execute(slow).reason.message, timed_out
("Tool 'slow' timed out after 0.05 s", ['slow'])
>>> tool_execute_timeout.disconnect(receiver)
>>> tool_timeout is tool_execute_timeout
True
"""

from __future__ import annotations

import collections.abc as c
import typing as t

import blinker

from nous_tools._util._log import log as _safe_log
from nous_tools._util._scope import interrupts

__all__ = [
    "scrub",
    "send",
    "tool_execute_exception",
    "tool_execute_replayed",
    "tool_execute_start",
    "tool_execute_stop",
    "tool_execute_timeout",
    "tool_log",
    "tool_progress",
    "tool_rate_limited",
    "tool_timeout",
]

_log = _safe_log

#: Sent when an attempt starts. measurements: ``system_time``, ``monotonic_time``;
#: metadata: ``tool_name``, ``tool_module``, ``attempt``, ``max_retries`` (total
#: attempts), ``has_timeout``, and ``call_id`` (the model's tool-call id) only when
#: the call has one.
tool_execute_start = blinker.NamedSignal("nous_tools.tool.execute.start")

#: Sent when an attempt returns (a returned ``Err`` counts as returned).
#: measurements: ``duration``, ``attempt``; metadata: ``tool_name``, ``attempt``, ``success``.
tool_execute_stop = blinker.NamedSignal("nous_tools.tool.execute.stop")

#: Sent when an attempt raises or times out. measurements: ``duration``; metadata:
#: ``tool_name``, ``attempt``, ``will_retry``, ``kind`` (the exception class, or
#: ``"timeout"``), ``reason`` (the raw exception, or ``"timeout"``), ``stacktrace``
#: (``traceback.extract_tb`` frames; absent for a timeout).
tool_execute_exception = blinker.NamedSignal("nous_tools.tool.execute.exception")

#: Sent after the ``exception`` event of an attempt whose deadline passed (or
#: whose tool raised ``TimeoutError``). measurements: ``timeout`` (seconds);
#: metadata: ``tool_name``.
tool_execute_timeout = blinker.NamedSignal("nous_tools.tool.execute.timeout")

#: Sent instead of ``start``/``stop`` when the call journal answers a repeat of a
#: completed call with its stored outcome: the tool did not run (a replay is not an
#: execution). measurements: ``system_time``; metadata: ``tool_name``, ``success``
#: (whether the stored outcome is an ``Ok``), and ``call_id`` when the call has one.
#: Never an idempotency key.
tool_execute_replayed = blinker.NamedSignal("nous_tools.tool.execute.replayed")

#: The older name of :data:`tool_execute_timeout`: the same signal object, kept so
#: that code written against it goes on working.
tool_timeout = tool_execute_timeout

#: Sent when one of a tool's limits refuses a call (``Err(RateLimited)``), before
#: any attempt: a refused call sends no ``start``. measurements: ``retry_after``
#: (seconds, or None when unknown); metadata: ``tool_name``, ``limit``
#: (``"max_concurrency"``, ``"rate_limit"`` or ``"max_calls_per_run"``), and
#: ``call_id`` only when the call has one.
tool_rate_limited = blinker.NamedSignal("nous_tools.tool.rate_limited")

#: Sent when a tool reports progress (``ctx.report_progress``), from the caller's
#: thread, before the attempt's ``stop``; at most 20 a second per attempt, the last
#: always. measurements: ``progress``, ``total`` (None when unknown),
#: ``system_time`` (ns, when the tool reported it); metadata: ``tool_name``,
#: ``call_id`` (None outside a batch of model tool calls), ``attempt``,
#: ``progress``, ``total``, ``message`` (None when none).
tool_progress = blinker.NamedSignal("nous_tools.tool.progress")

#: Sent when a tool logs a line (``ctx.log``), from the caller's thread, before the
#: attempt's ``stop``. measurements: ``system_time`` (ns, when the tool logged it);
#: metadata: ``tool_name``, ``call_id``, ``attempt``, ``level`` (``"debug"``,
#: ``"info"``, ``"notice"``, ``"warning"`` or ``"error"``), ``message``, ``data``
#: (the keyword arguments given, as they are).
tool_log = blinker.NamedSignal("nous_tools.tool.log")

#: The four signals of an attempt (``tool_rate_limited`` is a call's, not an attempt's).
ALL_SIGNALS = (
    tool_execute_start,
    tool_execute_stop,
    tool_execute_exception,
    tool_execute_timeout,
)

#: The signals of what a running tool reports: progress and log lines.
REPORT_SIGNALS = (tool_progress, tool_log)

_RAW_KEYS = frozenset({"reason", "stacktrace"})


def send(
    signal: blinker.NamedSignal,
    sender: object,
    measurements: dict[str, t.Any],
    metadata: dict[str, t.Any],
) -> None:
    """Send ``signal`` to each receiver, isolating receivers that raise.

    Whatever a receiver raises — any ``Exception``, ``SystemExit``,
    ``GeneratorExit``, ``asyncio.CancelledError``, a custom ``BaseException``, a
    ``ToolCancelled`` of its own — is logged (with its traceback, at warning level)
    and the remaining receivers still run: a receiver never changes a tool's
    outcome. Two things still propagate, because they are not the receiver's: the
    user's Ctrl-C (a ``KeyboardInterrupt`` in the main thread) and the real
    cancellation of the attempt this thread works for.
    """
    for receiver in signal.receivers_for(sender):
        try:
            receiver(sender, measurements=measurements, metadata=metadata)
        except BaseException as exc:
            if interrupts(exc):
                raise
            _log.warning(
                "Signal receiver %r for %s raised %s; ignored",
                receiver,
                signal.name,
                type(exc).__name__,
                exc_info=True,
            )


def scrub(metadata: c.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """Return a copy of ``metadata`` without the raw ``reason`` and ``stacktrace``.

    ``kind`` is kept as a class *name*, so the copy is plain data that is safe to
    serialise and send off the machine.

    >>> scrub({"tool_name": "t", "kind": ValueError, "reason": ValueError("sk-1"),
    ...        "stacktrace": []})
    {'tool_name': 't', 'kind': 'ValueError'}
    """
    clean = {key: value for key, value in metadata.items() if key not in _RAW_KEYS}
    kind = clean.get("kind")
    if isinstance(kind, type):
        clean["kind"] = kind.__name__
    return clean
