"""OpenTelemetry spans and metrics for tool calls, after the GenAI semantic conventions.

``pip install 'nous-tools[otel]'`` (``opentelemetry-api``, and ``opentelemetry-sdk``
to export; the module itself needs only the API), then, once at start-up::

    from nous_tools.contrib import opentelemetry as nous_otel
    nous_otel.instrument()   # the global tracer and meter providers, or tracer_provider=...

Every tool call then makes one span and one measurement, as the OpenTelemetry GenAI
semantic conventions for tool execution describe them ("Execute tool span" and the
``gen_ai.execute_tool.duration`` metric):

- the span ``execute_tool {gen_ai.tool.name}``, kind ``INTERNAL``, with
  ``gen_ai.operation.name = "execute_tool"``, ``gen_ai.tool.name``,
  ``gen_ai.tool.type = "function"``, ``gen_ai.tool.description`` (when the tool has
  one), ``gen_ai.tool.call.id`` (when the call has one: calls from
  :func:`~nous_tools.execute_tool_calls`, or ``execute(..., call_id=...)``), and
  ``nous_tools.tool.attempts`` (how many attempts ran); one ``retry`` event per
  attempt that failed and was retried;
- on failure, ``error.type`` and an ``ERROR`` status. ``error.type`` takes one of a
  fixed, low-cardinality set: ``timeout`` (the deadline passed, or the tool raised
  ``TimeoutError``), ``rejected`` (the approval step refused the call: ``deny``, a
  handler's rejection, no handler), ``invalid_arguments`` (arguments that are not
  JSON, not an object, or fail the schema), ``saturated`` (``ExecutorSaturated``),
  ``rate_limited`` (``RateLimited``: one of the tool's limits refused the call),
  else the class name of the exception the tool raised (``ConnectionError``), or
  ``_OTHER`` for an ``Err`` that holds no exception;
- the histogram ``gen_ai.execute_tool.duration`` (seconds, the span's duration, the
  conventions' bucket boundaries) with ``gen_ai.tool.name``, ``gen_ai.tool.type``
  and ``error.type``;
- what a running tool reports (``ctx.report_progress``, ``ctx.log``) as span events:
  ``progress`` with ``nous_tools.progress`` and ``nous_tools.progress.total``, and
  ``log`` with ``nous_tools.log.level`` (their ``message`` and ``data``, text the
  tool wrote, only with ``capture_results=True``), at the time the tool reported them.

Calls run by :func:`~nous_tools.execute_tool_calls` are traced whole: the span
starts when the call starts and covers approval and validation, and a call refused
there (``rejected``, ``invalid_arguments``) gets its span too. A call waiting for
approval (``NeedsApproval``) has not executed and gets none; nor does a call the
call journal answered with its stored outcome (a replay: ``tool_execute_replayed``),
since a replay must not report an external effect as newly executed; nor does a call
of an unknown tool (its name is the model's, and would make the metric's cardinality the
model's too). Calls made with ``execute``/``Registry.execute`` directly are traced
from the signals, which start with the first attempt: a call refused before any
attempt makes no span there.

Signals are sent from the thread that called ``execute``, so the span is a child of
the caller's current span even when the tool runs in a worker thread; and while an
attempt runs the span is the current one, so spans the tool makes (an HTTP
client's) are its children.

**Sensitive data stays out unless asked for.** By default only names, ids, counts and
error classes are recorded, never argument values, results, exception messages or
stack traces. ``capture_arguments=True`` adds ``gen_ai.tool.call.arguments`` (JSON)
and ``capture_results=True`` adds ``gen_ai.tool.call.result`` (the text the model
gets for a successful call) and a failed call's model-facing error message (the
status description and the ``retry`` events). Both may hold personal data, secrets
and whatever a tool returns: turn them on only where the telemetry backend may hold
that. Arguments and results are known for calls run by ``execute_tool_calls`` only
(the signals carry neither).

This module imports without OpenTelemetry installed; :func:`instrument` then raises
``ImportError``. A runnable example is in ``docs/how-to/tracing.md``.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
import typing as t

from nous_tools import signals as _signals
from nous_tools.approval import NeedsApproval
from nous_tools.errors import ExecutorSaturated, RateLimited, ToolDenied, ToolError, ToolTimeout
from nous_tools.providers._tool_calls import (
    ToolCall,
    _exception_text,
    call_observer,
    current_tool_call,
    format_tool_result,
    observe_calls,
)
from nous_tools.results import Err, Ok
from nous_tools.tool import Tool

if t.TYPE_CHECKING:
    from opentelemetry.metrics import Histogram, MeterProvider
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = [
    "DURATION_BUCKETS",
    "ERROR_TYPES",
    "error_type",
    "instrument",
    "is_instrumented",
    "uninstrument",
]

_log = logging.getLogger("nous_tools")

#: The tracer's and meter's instrumentation scope name.
SCOPE = "nous_tools"

#: The histogram's name, unit and bucket boundaries (seconds), as the conventions give them.
DURATION_METRIC = "gen_ai.execute_tool.duration"
DURATION_BUCKETS: tuple[float, ...] = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip

#: The ``error.type`` values this module reports besides exception class names.
ERROR_TYPES = ("timeout", "rejected", "invalid_arguments", "saturated", "rate_limited", "_OTHER")

_INVALID_PREFIXES = ("Invalid arguments for ", "Invalid JSON arguments for ")


def error_type(result: object) -> str | None:
    """The ``error.type`` of a call's outcome: None for ``Ok`` (and a pending call),
    else one of :data:`ERROR_TYPES` or the class name of the exception the tool raised
    (of the ``Err``'s reason when it holds none: ``ToolError``, ``ExecutorShutdown``).

    >>> from nous_tools import ToolTimeout
    >>> error_type(Err(ToolTimeout(tool_name="slow", timeout=1.0)))
    'timeout'
    >>> error_type(Err(ToolError("Tool execution failed: boom", original_error=OSError())))
    'OSError'
    """
    if not isinstance(result, Err):
        return None
    reason = result.reason
    if isinstance(reason, ToolTimeout):
        return "timeout"
    if isinstance(reason, ExecutorSaturated):
        return "saturated"
    if isinstance(reason, RateLimited):
        return "rate_limited"
    if isinstance(reason, ToolDenied):
        return "rejected"
    if isinstance(reason, ToolError):
        message = reason.message
        if message.startswith(_INVALID_PREFIXES):
            return "invalid_arguments"
        if " was rejected" in message or " requires approval" in message:
            return "rejected"
        original = reason.original_error
        if isinstance(original, TimeoutError):
            return "timeout"
        if isinstance(original, BaseException):
            return type(original).__name__
        return type(reason).__name__
    if isinstance(reason, BaseException):
        return type(reason).__name__
    return "_OTHER"


def _signal_error_type(kind: object) -> str:
    """``error.type`` from an ``exception`` signal's ``kind`` (a class, or "timeout")."""
    if isinstance(kind, str):
        return kind
    if isinstance(kind, type):
        if issubclass(kind, ExecutorSaturated):
            return "saturated"
        return kind.__name__
    return "_OTHER"


class _Open:
    """A call being traced, on the stack of calls running in this context."""

    __slots__ = (
        "attempts",
        "batch",
        "call",
        "message",
        "replayed",
        "span",
        "start",
        "token",
        "tool",
    )

    def __init__(self, tool: object, call: ToolCall | None, *, batch: bool, start: int) -> None:
        self.tool = tool
        self.call = call
        self.batch = batch  # a call of execute_tool_calls, ended by its outcome
        self.start = start  # time.time_ns() at the start of the call
        self.span: Span | None = None
        self.token: object = None
        self.attempts = 0
        self.message: str | None = None
        self.replayed = False  # answered by the call journal: nothing executed


# Calls being traced, innermost last. A context variable, not a thread-local: the
# signals of one call are all sent in one context (the caller's, or the copy a batch
# lane runs in), and a worker's copy of it sees the calls it is nested in.
_open: contextvars.ContextVar[tuple[_Open, ...]] = contextvars.ContextVar(
    "nous_tools_otel_open_spans", default=()
)


def _find(sender: object) -> int:
    stack = _open.get()
    for index in range(len(stack) - 1, -1, -1):
        if stack[index].tool is sender:
            return index
    return -1


def _json(value: object) -> str:
    try:
        return json.dumps(value, default=repr, ensure_ascii=False, sort_keys=True)
    except Exception:
        return f"<{type(value).__name__} that JSON cannot hold>"


class _Instrumentation:
    """The connected receivers and the batch observer; strong references, so they
    live while connected."""

    def __init__(
        self,
        tracer: Tracer,
        histogram: Histogram,
        capture_arguments: bool,
        capture_results: bool,
    ) -> None:
        from opentelemetry import context as otel_context
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self.tracer = tracer
        self.histogram = histogram
        self.capture_arguments = capture_arguments
        self.capture_results = capture_results
        self._attach = otel_context.attach
        self._detach = otel_context.detach
        self._in_context = trace.set_span_in_context
        self._internal = SpanKind.INTERNAL
        self._status = Status
        self._error = StatusCode.ERROR

    # -- spans ----------------------------------------------------------------------

    def _begin(self, entry: _Open, attach: bool, call_id: object = None) -> None:
        """Start ``entry``'s span (at ``entry.start``), current while attached."""
        tool = entry.tool
        name = tool.name if isinstance(tool, Tool) else str(getattr(tool, "name", "unknown"))
        attributes: dict[str, t.Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
        }
        description = tool.description if isinstance(tool, Tool) else ""
        if description:
            attributes["gen_ai.tool.description"] = description
        call = entry.call
        if call_id is None and call is not None:
            call_id = call.id
        if isinstance(call_id, str):
            attributes["gen_ai.tool.call.id"] = call_id
        if self.capture_arguments and call is not None:
            attributes["gen_ai.tool.call.arguments"] = _json(call.arguments)
        span = self.tracer.start_span(
            f"execute_tool {name}",
            kind=self._internal,
            attributes=attributes,
            start_time=entry.start,
        )
        entry.span = span
        if attach:
            entry.token = self._attach(self._in_context(span))

    def _end(
        self,
        entry: _Open,
        error: str | None,
        message: str | None,
        result_text: str | None = None,
    ) -> None:
        span = entry.span
        if span is None:
            return
        end = time.time_ns()
        try:
            span.set_attribute("nous_tools.tool.attempts", entry.attempts)
            if result_text is not None:
                span.set_attribute("gen_ai.tool.call.result", result_text)
            if error is not None:
                span.set_attribute("error.type", error)
                span.set_status(self._status(self._error, message or error))
        finally:
            span.end(end_time=end)
            if entry.token is not None:
                self._detach(t.cast(t.Any, entry.token))
                entry.token = None
        self._measure(entry, error, end)

    def _measure(self, entry: _Open, error: str | None, end: int) -> None:
        tool = entry.tool
        attributes: dict[str, str] = {
            "gen_ai.tool.name": str(getattr(tool, "name", "unknown")),
            "gen_ai.tool.type": "function",
        }
        if error is not None:
            attributes["error.type"] = error
        try:
            self.histogram.record(max(end - entry.start, 0) / 1e9, attributes)
        except Exception:
            _log.warning("Could not record %s", DURATION_METRIC, exc_info=True)

    def _message(self, reason: object) -> str | None:
        if not self.capture_results:
            return None
        if isinstance(reason, BaseException):
            return _exception_text(reason)
        return reason if isinstance(reason, str) else None

    def _pop(self, entry: _Open) -> bool:
        stack = _open.get()
        for index in range(len(stack) - 1, -1, -1):
            if stack[index] is entry:
                for stale in stack[index + 1 :]:  # calls whose end never came (cancelled)
                    if stale.span is not None:
                        stale.span.end()
                _open.set(stack[:index])
                return True
        return False

    # -- the signals: attempts ------------------------------------------------------

    def on_start(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        attempt = metadata.get("attempt", 1)
        attempt = attempt if isinstance(attempt, int) else 1
        index = _find(sender)
        if index >= 0:
            entry = _open.get()[index]
            if entry.batch and entry.span is None:  # the first attempt of a batch call
                entry.attempts = attempt
                self._begin(entry, attach=True, call_id=metadata.get("call_id"))
                return
            if attempt != 1:  # a retry of the call whose span is open
                entry.attempts = attempt
                return
        start = measurements.get("system_time")
        entry = _Open(
            sender,
            self._claim(sender),
            batch=False,
            start=start if isinstance(start, int) else time.time_ns(),
        )
        entry.attempts = attempt
        self._begin(entry, attach=True, call_id=metadata.get("call_id"))
        _open.set((*_open.get(), entry))

    def on_stop(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        index = _find(sender)
        if index < 0:
            return
        entry = _open.get()[index]
        if entry.batch:
            if entry.token is not None:  # the attempts are over: no longer the current span
                self._detach(t.cast(t.Any, entry.token))
                entry.token = None
            return  # its outcome (an Ok, or an Err the tool returned) ends it
        self._pop(entry)
        self._end(entry, None, None)

    def on_exception(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        clean = _signals.scrub(metadata)
        error = _signal_error_type(clean.get("kind"))
        message = self._message(metadata.get("reason"))
        index = _find(sender)
        if index < 0:
            return
        entry = _open.get()[index]
        if metadata.get("will_retry"):
            if entry.span is not None:
                attributes: dict[str, t.Any] = {
                    "nous_tools.tool.attempt": int(clean.get("attempt", 0) or 0),
                    "error.type": error,
                }
                if message is not None:
                    attributes["nous_tools.tool.error.message"] = message
                entry.span.add_event("retry", attributes)
            return
        if entry.batch:
            entry.message = message
            if entry.token is not None:
                self._detach(t.cast(t.Any, entry.token))
                entry.token = None
            return
        self._pop(entry)
        self._end(entry, error, message)

    def on_timeout(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        # The exception event before it has ended the span already; this is a
        # safety net for a timeout whose exception event this receiver missed.
        index = _find(sender)
        if index < 0:
            return
        entry = _open.get()[index]
        if not entry.batch:
            self._pop(entry)
            self._end(entry, "timeout", None)

    # -- the signals: what a running tool reports -----------------------------------

    def _open_span(self, sender: object) -> Span | None:
        index = _find(sender)
        return _open.get()[index].span if index >= 0 else None

    def on_progress(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        span = self._open_span(sender)
        if span is None:
            return
        attributes: dict[str, t.Any] = {"nous_tools.progress": float(metadata["progress"])}
        total = metadata.get("total")
        if total is not None:
            attributes["nous_tools.progress.total"] = float(total)
        message = metadata.get("message")
        if self.capture_results and isinstance(message, str):
            attributes["nous_tools.progress.message"] = message
        when = measurements.get("system_time")
        span.add_event("progress", attributes, timestamp=when if isinstance(when, int) else None)

    def on_log(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        span = self._open_span(sender)
        if span is None:
            return
        attributes: dict[str, t.Any] = {"nous_tools.log.level": str(metadata["level"])}
        if self.capture_results:
            attributes["nous_tools.log.message"] = str(metadata["message"])
            data = metadata.get("data")
            if data:
                attributes["nous_tools.log.data"] = _json(data)
        when = measurements.get("system_time")
        span.add_event("log", attributes, timestamp=when if isinstance(when, int) else None)

    def on_replayed(self, sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        # A stored outcome, not an execution: the batch call ends without a span.
        index = _find(sender)
        if index >= 0:
            entry = _open.get()[index]
            if entry.batch and entry.span is None:
                entry.replayed = True

    def _claim(self, sender: object) -> ToolCall | None:
        """The model tool call a directly traced span is for (arguments to record)."""
        call = current_tool_call()
        if call is None or call.name != getattr(sender, "name", None):
            return None
        if any(entry.call is call for entry in _open.get()):
            return None
        return call

    # -- the observer: whole calls of execute_tool_calls ----------------------------

    def call_started(self, tool: Tool, call: ToolCall) -> object:
        entry = _Open(tool, call, batch=True, start=time.time_ns())
        _open.set((*_open.get(), entry))
        return entry

    def call_ended(self, token: object, result: object) -> None:
        if not isinstance(token, _Open):
            return
        entry = token
        self._pop(entry)
        if isinstance(result, NeedsApproval) or entry.replayed:
            # Nothing executed (a pending approval, a replayed outcome): no span, no
            # measurement.
            if entry.span is not None:
                entry.span.end()
            return
        if result is None:  # interrupted (Ctrl-C, a cancelled outer call)
            error: str | None = "_OTHER"
        else:
            error = error_type(result)
        if entry.span is None:
            self._begin(entry, attach=False)
        message = None
        result_text = None
        if isinstance(result, Ok):
            if self.capture_results:
                result_text = format_tool_result(result, entry.call.name if entry.call else None)
        elif isinstance(result, Err) and self.capture_results:
            message = entry.message or format_tool_result(
                result, entry.call.name if entry.call else None
            )
        self._end(entry, error, message, result_text)

    # -- wiring ---------------------------------------------------------------------

    def connect(self) -> None:
        _signals.tool_execute_start.connect(self.on_start, weak=False)
        _signals.tool_execute_stop.connect(self.on_stop, weak=False)
        _signals.tool_execute_exception.connect(self.on_exception, weak=False)
        _signals.tool_execute_timeout.connect(self.on_timeout, weak=False)
        _signals.tool_progress.connect(self.on_progress, weak=False)
        _signals.tool_log.connect(self.on_log, weak=False)
        _signals.tool_execute_replayed.connect(self.on_replayed, weak=False)
        observe_calls(self)

    def disconnect(self) -> None:
        _signals.tool_execute_start.disconnect(self.on_start)
        _signals.tool_execute_stop.disconnect(self.on_stop)
        _signals.tool_execute_exception.disconnect(self.on_exception)
        _signals.tool_execute_timeout.disconnect(self.on_timeout)
        _signals.tool_progress.disconnect(self.on_progress)
        _signals.tool_log.disconnect(self.on_log)
        _signals.tool_execute_replayed.disconnect(self.on_replayed)
        if call_observer() is self:
            observe_calls(None)


_lock = threading.Lock()
_active: _Instrumentation | None = None


def instrument(
    tracer_provider: TracerProvider | None = None,
    *,
    meter_provider: MeterProvider | None = None,
    capture_arguments: bool = False,
    capture_results: bool = False,
    record_arguments: bool | None = None,
    record_results: bool | None = None,
) -> None:
    """Start making a span and a duration measurement per tool call, with
    ``tracer_provider`` and ``meter_provider`` (default: the global ones). Calling it
    again replaces the earlier instrumentation and its options.

    ``capture_arguments`` and ``capture_results`` (off by default) record
    ``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result`` and error messages:
    **sensitive** data (see the module documentation). ``record_arguments`` and
    ``record_results`` are their former names.

    Raises ``ImportError`` when ``opentelemetry-api`` is not installed.
    """
    try:
        from opentelemetry import metrics, trace
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError(
            "nous_tools.contrib.opentelemetry needs opentelemetry-api: "
            "pip install 'nous-tools[otel]'"
        ) from exc
    from nous_tools import __version__

    if record_arguments is not None:
        capture_arguments = record_arguments
    if record_results is not None:
        capture_results = record_results

    global _active
    tracer = trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
    meter = metrics.get_meter(SCOPE, __version__, meter_provider=meter_provider)
    description = "The duration of a single tool execution."
    try:
        histogram = meter.create_histogram(
            DURATION_METRIC,
            unit="s",
            description=description,
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
    except TypeError:  # pragma: no cover - an API older than the advisory parameter
        histogram = meter.create_histogram(DURATION_METRIC, unit="s", description=description)
    instrumentation = _Instrumentation(
        tracer, histogram, bool(capture_arguments), bool(capture_results)
    )
    with _lock:
        if _active is not None:
            _active.disconnect()
        instrumentation.connect()
        _active = instrumentation


def uninstrument() -> None:
    """Stop making spans and measurements (disconnect the receivers). Idempotent.
    Calls in flight at that moment get no span (theirs is never ended, so never
    exported)."""
    global _active
    with _lock:
        if _active is not None:
            _active.disconnect()
            _active = None


def is_instrumented() -> bool:
    """True between :func:`instrument` and :func:`uninstrument`."""
    return _active is not None
