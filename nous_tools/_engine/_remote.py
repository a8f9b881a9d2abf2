"""What crosses to a remote engine's worker for one attempt (private).

The Ray and Celery backends send an attempt to a worker process that may run
on another machine. The framing is :mod:`nous_tools._engine._isolation`'s (the function,
the arguments and the context pickled each on its own, so a failure names the
part that did not pickle; the reply names a result that cannot cross back), with
three differences:

* **The deadline travels as wall-clock time.** ``time.monotonic()`` means
  nothing on another machine, so the request carries the deadline as a
  ``time.time()`` value and the worker turns it back into its own monotonic
  clock. Across machines this is as exact as their clocks agree (NTP: a few
  milliseconds); on one machine it is exact. An attempt that reaches its worker
  after its deadline is not run (the reply says "timed out").
* **``ctx.cancelled`` is set by the clock** on the worker: an event that reads as
  set from the deadline on, and whose ``wait`` ends there, with no thread behind
  it. The engine kills the worker at the deadline anyway; a tool that polls
  ``ctx.cancelled`` can stop on its own first.
* **Functions the worker cannot import** (a closure, a function of ``__main__``)
  are pickled by value where the engine ships a pickler that can
  (``by_value``: Ray's cloudpickle); otherwise they are refused with a message
  that says to move them into a module the workers import.
"""

from __future__ import annotations

import collections.abc as c
import pickle
import threading
import time
import typing as t

from nous_tools._engine import _isolation
from nous_tools._engine._isolation import Unpicklable, _describe
from nous_tools._engine._pool import TIMED_OUT
from nous_tools._util._clock import monotonic
from nous_tools._util._text import safe_str

if t.TYPE_CHECKING:
    from nous_tools.run_context import RunContext
    from nous_tools.tool import Tool

__all__ = ["DeadlineEvent", "Tally", "decode", "encode", "run"]

_PROTOCOL = pickle.HIGHEST_PROTOCOL

Dumps = c.Callable[[t.Any], bytes]


def _std_dumps(value: object) -> bytes:
    return pickle.dumps(value, _PROTOCOL)


class Tally:
    """A remote backend's books: the attempts it sent and how each ended, the ones
    it waits for now (``running``), and whether it was shut down."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._idle = threading.Condition(self.lock)
        self.closed = False
        self._counts = dict.fromkeys(
            ("submitted", "completed", "timed_out", "died", "not_sent", "running"), 0
        )

    def count(self, key: str, running: int = 0) -> None:
        """Count one attempt under ``key``; ``running`` +1 when it was sent, -1 when
        it ended."""
        with self.lock:
            self._counts[key] += 1
            if running:
                self._counts["running"] += running
                if self._counts["running"] == 0:
                    self._idle.notify_all()

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self._counts)

    def close(self, wait: bool) -> int:
        """Take no more attempts; with ``wait``, wait until none is running (each
        ends by its deadline). The number still running."""
        with self.lock:
            self.closed = True
            if wait:
                while self._counts["running"]:
                    self._idle.wait()
            return self._counts["running"]


class DeadlineEvent(threading.Event):
    """``ctx.cancelled`` on a remote worker: reads as set from ``deadline`` (on this
    process's monotonic clock) on; ``wait`` returns there at the latest."""

    def __init__(self, deadline: float) -> None:
        super().__init__()
        self._deadline = deadline

    def is_set(self) -> bool:
        return super().is_set() or monotonic() >= self._deadline

    def wait(self, timeout: float | None = None) -> bool:
        remaining = max(0.0, self._deadline - monotonic())
        if timeout is None or timeout > remaining:
            timeout = remaining
        super().wait(timeout)
        return self.is_set()


def _function_bytes(tool: Tool, engine: str, by_value: Dumps | None) -> bytes:
    function = tool.function
    name = safe_str(getattr(function, "__qualname__", function))
    if by_value is not None:
        # The engine's pickler (cloudpickle) sends importable functions by reference
        # and the rest (closures, __main__, a module-level @tool) by value.
        try:
            return by_value(function)
        except Exception as exc:
            error: Exception = exc
        try:
            return _isolation._function_bytes(tool)
        except Unpicklable:
            raise Unpicklable(
                f"the function {name!r} cannot be pickled for a {engine} worker: {_describe(error)}"
            ) from None
    if getattr(function, "__module__", None) == "__main__":
        raise Unpicklable(
            f"the function {name!r} is defined in the __main__ module, which a {engine} "
            "worker cannot import: define it in a module the workers import"
        )
    try:
        return _isolation._function_bytes(tool)  # by reference, or the @tool's path
    except Unpicklable as exc:
        raise Unpicklable(
            f"the function {name!r} cannot be sent to a {engine} worker: it must be "
            "a module-level function of a module the workers import"
        ) from exc


def encode(
    tool: Tool,
    arguments: c.Mapping[str, t.Any],
    ctx: RunContext[t.Any] | None,
    deadline: float,
    *,
    engine: str,
    by_value: Dumps | None = None,
) -> bytes:
    """The bytes a remote worker needs to run one attempt by ``deadline`` (on this
    process's monotonic clock). Raises :class:`~nous_tools._engine._isolation.Unpicklable`
    naming the function, the argument or the context field that cannot be sent."""
    dumps = by_value or _std_dumps
    function = _function_bytes(tool, engine, by_value)
    args = _isolation._arguments_bytes(
        arguments if type(arguments) is dict else dict(arguments), dumps
    )
    context = _isolation._context_bytes(ctx, dumps) if ctx is not None else None
    wall_deadline = time.time() + (deadline - monotonic())
    return pickle.dumps((tool.name, function, args, context, wall_deadline), _PROTOCOL)


_unsent = _isolation._unpicklable_reply


def run(
    request: bytes,
    dumps: Dumps | None = None,
    sink: c.Callable[[list[t.Any]], object] | None = None,
) -> bytes:
    """On the worker: run one attempt and return the reply's bytes. Never raises
    for anything the tool or its data do. ``sink`` carries what the tool reports
    back to the caller, when the engine can (see :func:`nous_tools._engine._isolation.load_and_reply`)."""
    name, function, args, context, wall_deadline = pickle.loads(request)  # our own framing
    deadline = monotonic() + (wall_deadline - time.time())
    if deadline <= monotonic():
        return pickle.dumps((TIMED_OUT, pickle.dumps(None), "", ""), _PROTOCOL)

    def make_context(fields: dict[str, t.Any]) -> RunContext[t.Any]:
        from nous_tools.run_context import RunContext

        fields["deadline"] = deadline
        return RunContext(**fields, cancelled=DeadlineEvent(deadline))

    return _isolation.load_and_reply(
        name, function, args, context, "on the worker", make_context, dumps or _std_dumps, sink
    )


def decode(reply: bytes) -> tuple[str, t.Any]:
    """In the caller: the ``(kind, value)`` a worker's reply carries."""
    return _isolation.decode_reply(reply)
