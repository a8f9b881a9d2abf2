"""OpenTelemetry spans for tool calls, from the ``nous_tools`` signals.

``pip install 'nous-tools[otel]'`` (it needs ``opentelemetry-api``; an exporter
needs ``opentelemetry-sdk``), then, once at start-up::

    from nous_tools.contrib import opentelemetry as nous_otel
    nous_otel.instrument()            # the global tracer provider, or tracer_provider=...

Every tool call then makes one span, named ``execute_tool {tool name}`` (kind
``INTERNAL``), following the GenAI semantic conventions:

- ``gen_ai.operation.name = "execute_tool"``, ``gen_ai.tool.name``,
  ``gen_ai.tool.type = "function"``, ``gen_ai.tool.description`` (when the tool has
  one), ``gen_ai.tool.call.id`` (when the call has an id: calls from
  :func:`~nous_tools.execute_tool_calls`, or ``execute(..., call_id=...)``), and
  ``nous_tools.tool.attempts`` (how many attempts ran);
- on failure: ``error.type`` (the exception's class name, or ``"timeout"``) and an
  ``ERROR`` status;
- one ``retry`` event per attempt that failed and was retried, with
  ``nous_tools.tool.attempt`` (the failed attempt's number) and ``error.type``.

The span starts when the first attempt starts and ends with the call's outcome.
Signals are sent from the thread that called ``execute``, so the span is a child
of the caller's current span even when the tool runs in a worker thread; and while
it is open the span is the current one, so spans the tool makes (an HTTP client's)
are its children.

What leaves the process is scrubbed: error types by class name only, never the raw
exception or its stack trace. ``record_arguments=True`` adds
``gen_ai.tool.call.arguments`` (JSON) for the calls whose arguments are known —
those run by :func:`~nous_tools.execute_tool_calls`, since the signals do not carry
arguments. ``record_results=True`` adds a failed call's model-facing error message
(the message argument of its exception, as :func:`~nous_tools.format_tool_result`
words it) to the status and the ``retry`` events. Both are off by default: tool
arguments and error messages may hold personal data.

This module imports without OpenTelemetry installed; :func:`instrument` then raises
``ImportError``. A runnable example is in the README ("OpenTelemetry").
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import typing as t

from .. import signals as _signals
from ..tool import Tool
from ..tool_calls import ToolCall, _exception_text, current_tool_call

if t.TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["instrument", "is_instrumented", "uninstrument"]

_log = logging.getLogger("nous_tools")

#: The tracer's instrumentation scope name.
SCOPE = "nous_tools"


class _Open:
    """A call's open span, on the stack of calls running in this context."""

    __slots__ = ("attempts", "call", "span", "token", "tool")

    def __init__(self, tool: object, span: Span, token: object, call: ToolCall | None) -> None:
        self.tool = tool
        self.span = span
        self.token = token
        self.call = call
        self.attempts = 1


# Calls whose span is open, innermost last. A context variable, not a thread-local:
# the signals of one call are all sent in one context (the caller's, or the copy a
# batch lane runs in), and a worker's copy of it sees the calls it is nested in.
_open: contextvars.ContextVar[tuple[_Open, ...]] = contextvars.ContextVar(
    "nous_tools_otel_open_spans", default=()
)


def _find(sender: object) -> int:
    stack = _open.get()
    for index in range(len(stack) - 1, -1, -1):
        if stack[index].tool is sender:
            return index
    return -1


class _Instrumentation:
    """The connected receivers; strong references, so they live while connected."""

    def __init__(self, tracer: Tracer, record_arguments: bool, record_results: bool) -> None:
        from opentelemetry import context as otel_context
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self.tracer = tracer
        self.record_arguments = record_arguments
        self.record_results = record_results
        self._attach = otel_context.attach
        self._detach = otel_context.detach
        self._in_context: t.Callable[[Span], Context] = trace.set_span_in_context
        self._internal = SpanKind.INTERNAL
        self._status = Status
        self._error = StatusCode.ERROR

    # -- receivers ------------------------------------------------------------------

    def on_start(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        attempt = metadata.get("attempt", 1)
        index = _find(sender)
        if attempt != 1 and index >= 0:  # a retry of the call whose span is open
            _open.get()[index].attempts = attempt
            return
        name = str(metadata.get("tool_name", getattr(sender, "name", "unknown")))
        call = self._claim(name)
        attributes: dict[str, t.Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
        }
        description = sender.description if isinstance(sender, Tool) else ""
        if description:
            attributes["gen_ai.tool.description"] = description
        call_id = metadata.get("call_id")
        if call_id is None and call is not None:
            call_id = call.id
        if isinstance(call_id, str):
            attributes["gen_ai.tool.call.id"] = call_id
        if self.record_arguments and call is not None:
            attributes["gen_ai.tool.call.arguments"] = _json(call.arguments)
        start_time = measurements.get("system_time")
        span = self.tracer.start_span(
            f"execute_tool {name}",
            kind=self._internal,
            attributes=attributes,
            start_time=start_time if isinstance(start_time, int) else None,
        )
        token = self._attach(self._in_context(span))
        entry = _Open(sender, span, token, call)
        entry.attempts = attempt if isinstance(attempt, int) else 1
        _open.set((*_open.get(), entry))

    def on_stop(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        entry = self._pop(sender)
        if entry is not None:
            self._end(entry, None, None)

    def on_exception(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        clean = _signals.scrub(metadata)
        kind = clean.get("kind")
        error_type = kind if isinstance(kind, str) else type(kind).__name__
        message = self._message(metadata.get("reason"))
        if metadata.get("will_retry"):
            index = _find(sender)
            if index >= 0:
                attributes: dict[str, t.Any] = {
                    "nous_tools.tool.attempt": int(clean.get("attempt", 0) or 0),
                    "error.type": error_type,
                }
                if message is not None:
                    attributes["nous_tools.tool.error.message"] = message
                _open.get()[index].span.add_event("retry", attributes)
            return
        entry = self._pop(sender)
        if entry is not None:
            self._end(entry, error_type, message)

    def on_timeout(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        # The exception event before it has ended the span already; this is a
        # safety net for a timeout whose exception event this receiver missed.
        entry = self._pop(sender)
        if entry is not None:
            self._end(entry, "timeout", None)

    # -- helpers --------------------------------------------------------------------

    def _claim(self, name: str) -> ToolCall | None:
        """The model tool call this span is for, when ``execute_tool_calls`` runs it and
        no enclosing span has taken it already (calls made by a tool see the outer call)."""
        call = current_tool_call()
        if call is None or call.name != name:
            return None
        if any(entry.call is call for entry in _open.get()):
            return None
        return call

    def _message(self, reason: object) -> str | None:
        if not self.record_results:
            return None
        if isinstance(reason, BaseException):
            return _exception_text(reason)
        return reason if isinstance(reason, str) else None

    def _pop(self, sender: object) -> _Open | None:
        stack = _open.get()
        index = _find(sender)
        if index < 0:
            return None
        entry = stack[index]
        for stale in stack[index + 1 :]:  # calls whose end never came (a cancelled tool)
            stale.span.end()
        _open.set(stack[:index])
        return entry

    def _end(self, entry: _Open, error_type: str | None, message: str | None) -> None:
        span = entry.span
        try:
            span.set_attribute("nous_tools.tool.attempts", entry.attempts)
            if error_type is not None:
                span.set_attribute("error.type", error_type)
                span.set_status(self._status(self._error, message or error_type))
        finally:
            span.end()
            self._detach(t.cast(t.Any, entry.token))

    def connect(self) -> None:
        _signals.tool_execute_start.connect(self.on_start, weak=False)
        _signals.tool_execute_stop.connect(self.on_stop, weak=False)
        _signals.tool_execute_exception.connect(self.on_exception, weak=False)
        _signals.tool_timeout.connect(self.on_timeout, weak=False)

    def disconnect(self) -> None:
        _signals.tool_execute_start.disconnect(self.on_start)
        _signals.tool_execute_stop.disconnect(self.on_stop)
        _signals.tool_execute_exception.disconnect(self.on_exception)
        _signals.tool_timeout.disconnect(self.on_timeout)


def _json(value: object) -> str:
    try:
        return json.dumps(value, default=repr, ensure_ascii=False, sort_keys=True)
    except Exception:
        return f"<{type(value).__name__} that JSON cannot hold>"


_lock = threading.Lock()
_active: _Instrumentation | None = None


def instrument(
    tracer_provider: TracerProvider | None = None,
    *,
    record_arguments: bool = False,
    record_results: bool = False,
) -> None:
    """Start making a span per tool call, with ``tracer_provider`` (default: the global
    one). Calling it again replaces the earlier instrumentation and its options.

    Raises ``ImportError`` when ``opentelemetry-api`` is not installed.
    """
    try:
        from opentelemetry import trace
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError(
            "nous_tools.contrib.opentelemetry needs opentelemetry-api: "
            "pip install 'nous-tools[otel]'"
        ) from exc
    from .. import __version__

    global _active
    tracer = trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
    instrumentation = _Instrumentation(tracer, bool(record_arguments), bool(record_results))
    with _lock:
        if _active is not None:
            _active.disconnect()
        instrumentation.connect()
        _active = instrumentation


def uninstrument() -> None:
    """Stop making spans (disconnect the receivers). Idempotent. Calls in flight at
    that moment get no span (theirs is never ended, so never exported)."""
    global _active
    with _lock:
        if _active is not None:
            _active.disconnect()
            _active = None


def is_instrumented() -> bool:
    """True between :func:`instrument` and :func:`uninstrument`."""
    return _active is not None
