"""nous_tools.contrib.opentelemetry with the SDK's in-memory exporter: one span per
call, its parent across the worker thread, errors, retries, call ids, what is
recorded only when asked, and uninstrument."""

from __future__ import annotations

import collections.abc as c
import gc
import json
import threading
import typing as t

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Histogram, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from nous_tools import (
    Err,
    ExecutorSaturated,
    Registry,
    RunContext,
    Tool,
    ToolCall,
    ToolExecutor,
    execute_tool_calls,
)
from nous_tools.contrib import opentelemetry as nous_otel

SECRET = "sk-live-0123456789"


@pytest.fixture
def provider() -> TracerProvider:
    return TracerProvider()


@pytest.fixture
def exporter(provider: TracerProvider) -> c.Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    nous_otel.instrument(provider)
    yield exporter
    nous_otel.uninstrument()


@pytest.fixture
def tracer(provider: TracerProvider) -> trace.Tracer:
    return provider.get_tracer("test")


def tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool ")]


def only(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = tool_spans(exporter)
    return span


def everything_recorded(exporter: InMemorySpanExporter) -> str:
    parts = []
    for span in exporter.get_finished_spans():
        parts.append(json.dumps(dict(span.attributes or {}), default=str))
        parts.append(str(span.status.description))
        for event in span.events:
            parts.append(event.name + json.dumps(dict(event.attributes or {}), default=str))
    return "\n".join(parts)


def search(query: str) -> str:
    """Search the docs."""
    return f"found {query}"


def test_one_internal_span_per_call_with_gen_ai_attributes(
    exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    result = executor.execute(Tool.from_function(search, timeout=None), {"query": "q"})
    assert result.is_ok()
    span = only(exporter)
    assert span.name == "execute_tool search"
    assert span.kind is SpanKind.INTERNAL
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Search the docs.",
        "nous_tools.tool.attempts": 1,
    }
    assert span.status.status_code is StatusCode.UNSET
    assert span.start_time is not None and span.end_time is not None
    assert span.start_time <= span.end_time


def test_the_span_is_a_child_of_the_callers_span_across_the_worker_thread(
    exporter: InMemorySpanExporter, executor: ToolExecutor, tracer: trace.Tracer
) -> None:
    def fetch(url: str) -> str:
        # a span the tool makes itself, in the worker thread
        with tracer.start_as_current_span("http GET"):
            return f"body of {url}"

    tool = Tool.from_function(fetch, timeout=5.0)
    with tracer.start_as_current_span("request") as parent:
        assert executor.execute(tool, {"url": "u"}).is_ok()
        assert trace.get_current_span() is parent  # restored after the call
    spans = {s.name: s for s in exporter.get_finished_spans()}
    tool_span, inner = spans["execute_tool fetch"], spans["http GET"]
    assert tool_span.parent is not None
    assert tool_span.parent.span_id == parent.get_span_context().span_id
    assert (
        tool_span.context is not None
        and tool_span.context.trace_id == parent.get_span_context().trace_id
    )
    assert inner.parent is not None and inner.parent.span_id == tool_span.context.span_id


def test_a_nested_call_is_a_child_of_the_outer_calls_span(
    exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    inner = Tool.from_function(search, timeout=None)

    def outer(query: str) -> str:
        return t.cast(str, executor.execute(inner, {"query": query}).unwrap())

    assert executor.execute(Tool.from_function(outer, timeout=5.0), {"query": "q"}).is_ok()
    spans = {s.name: s for s in tool_spans(exporter)}
    outer_span, inner_span = spans["execute_tool outer"], spans["execute_tool search"]
    assert inner_span.parent is not None and outer_span.context is not None
    assert inner_span.parent.span_id == outer_span.context.span_id


def test_a_failure_sets_error_type_and_an_error_status_without_the_message(
    exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    def login(api_key: str) -> str:
        raise PermissionError(f"bad key {api_key}")

    result = executor.execute(
        Tool.from_function(login, retries=0, timeout=5.0), {"api_key": SECRET}
    )
    assert not result.is_ok()
    span = only(exporter)
    assert span.attributes is not None and span.attributes["error.type"] == "PermissionError"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "PermissionError"
    assert span.events == ()
    assert SECRET not in everything_recorded(exporter)
    assert "Traceback" not in everything_recorded(exporter)


def test_each_retried_attempt_is_an_event_on_the_one_span(
    exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    attempts = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("try again", SECRET)
        return "ok"

    result = executor.execute(Tool.from_function(flaky, retries=2, timeout=5.0), {})
    assert result.is_ok()
    span = only(exporter)
    assert [e.name for e in span.events] == ["retry", "retry"]
    assert [dict(e.attributes or {}) for e in span.events] == [
        {"nous_tools.tool.attempt": 1, "error.type": "ConnectionError"},
        {"nous_tools.tool.attempt": 2, "error.type": "ConnectionError"},
    ]
    assert span.attributes is not None and span.attributes["nous_tools.tool.attempts"] == 3
    assert "error.type" not in span.attributes
    assert span.status.status_code is StatusCode.UNSET
    assert SECRET not in everything_recorded(exporter)


def test_a_call_that_fails_after_retries_ends_with_an_error(
    exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    def broken() -> str:
        raise ValueError("broken")

    executor.execute(Tool.from_function(broken, retries=1, timeout=None), {})
    span = only(exporter)
    assert [e.name for e in span.events] == ["retry"]
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["nous_tools.tool.attempts"] == 2


def test_a_timeout_is_error_type_timeout(
    exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    def hang(ctx: RunContext[t.Any]) -> str:
        ctx.cancelled.wait(5.0)
        return "late"

    result = executor.execute(Tool.from_function(hang, timeout=0.05, retries=3), {})
    assert not result.is_ok()
    span = only(exporter)
    assert span.attributes is not None and span.attributes["error.type"] == "timeout"
    assert span.status.status_code is StatusCode.ERROR
    assert span.events == ()  # never retried


def test_model_tool_calls_carry_their_call_ids(
    exporter: InMemorySpanExporter, executor: ToolExecutor, tracer: trace.Tracer
) -> None:
    registry = Registry([Tool.from_function(search, timeout=5.0)], executor=executor)
    calls = [ToolCall(f"call_{i}", "search", {"query": str(i)}) for i in range(3)]
    with tracer.start_as_current_span("agent turn") as parent:
        result = execute_tool_calls(registry, calls)
    assert result.all_ok
    spans = tool_spans(exporter)
    assert sorted((s.attributes or {})["gen_ai.tool.call.id"] for s in spans) == [
        "call_0",
        "call_1",
        "call_2",
    ]
    for span in spans:  # concurrent lanes: every span still under the caller's span
        assert span.parent is not None
        assert span.parent.span_id == parent.get_span_context().span_id
        assert "gen_ai.tool.call.arguments" not in (span.attributes or {})


def test_a_call_id_passed_to_execute_is_recorded(
    exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    executor.execute(Tool.from_function(search, timeout=None), {"query": "q"}, call_id="c-42")
    assert (only(exporter).attributes or {})["gen_ai.tool.call.id"] == "c-42"


def test_arguments_and_error_messages_are_recorded_only_when_asked(
    provider: TracerProvider, exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    nous_otel.instrument(provider, record_arguments=True, record_results=True)

    def login(user: str) -> str:
        raise PermissionError("no such user", SECRET)

    registry = Registry(
        [Tool.from_function(search, timeout=None), Tool.from_function(login, retries=1)],
        executor=executor,
    )
    execute_tool_calls(
        registry,
        [ToolCall("c1", "search", {"query": "docs"}), ToolCall("c2", "login", {"user": "ada"})],
    )
    spans = {s.name: s for s in tool_spans(exporter)}
    search_span, login_span = spans["execute_tool search"], spans["execute_tool login"]
    assert (search_span.attributes or {})["gen_ai.tool.call.arguments"] == '{"query": "docs"}'
    assert (login_span.attributes or {})["gen_ai.tool.call.arguments"] == '{"user": "ada"}'
    assert login_span.status.description == "no such user"
    assert dict(login_span.events[0].attributes or {}) == {
        "nous_tools.tool.attempt": 1,
        "error.type": "PermissionError",
        "nous_tools.tool.error.message": "no such user",
    }
    assert SECRET not in everything_recorded(exporter)


def test_uninstrument_stops_the_spans(
    exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    tool = Tool.from_function(search, timeout=None)
    assert nous_otel.is_instrumented()
    nous_otel.uninstrument()
    nous_otel.uninstrument()  # idempotent
    assert not nous_otel.is_instrumented()
    executor.execute(tool, {"query": "q"})
    assert tool_spans(exporter) == []


def test_instrumenting_again_replaces_the_receivers(
    provider: TracerProvider, exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    nous_otel.instrument(provider)
    nous_otel.instrument(provider)
    executor.execute(Tool.from_function(search, timeout=None), {"query": "q"})
    assert len(tool_spans(exporter)) == 1


def test_the_receivers_survive_garbage_collection(
    exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    gc.collect()
    executor.execute(Tool.from_function(search, timeout=None), {"query": "q"})
    assert len(tool_spans(exporter)) == 1


# -- the GenAI conventions: whole batch calls, error.type, the duration metric ---------


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def traced(
    provider: TracerProvider, reader: InMemoryMetricReader
) -> c.Iterator[InMemorySpanExporter]:
    """Spans and metrics both, with the SDK's in-memory exporter and reader."""
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    nous_otel.instrument(provider, meter_provider=MeterProvider(metric_readers=[reader]))
    yield exporter
    nous_otel.uninstrument()


def durations(reader: InMemoryMetricReader) -> list[t.Any]:
    """The data points of ``gen_ai.execute_tool.duration`` (and check the instrument)."""
    data = reader.get_metrics_data()
    points = []
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "gen_ai.execute_tool.duration":
                    assert metric.unit == "s"
                    assert isinstance(metric.data, Histogram)
                    points.extend(metric.data.data_points)
    return points


def by_call_id(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {str((s.attributes or {}).get("gen_ai.tool.call.id")): s for s in tool_spans(exporter)}


def refuse(request: t.Any) -> str:
    return "reject"


def test_calls_refused_at_approval_have_error_type_rejected(
    traced: InMemorySpanExporter, executor: ToolExecutor, reader: InMemoryMetricReader
) -> None:
    ran: list[str] = []

    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    registry = Registry(
        [
            Tool.from_function(delete, approval="ask", timeout=None),
            Tool.from_function(delete, name="wipe", approval="deny", timeout=None),
        ],
        executor=executor,
    )
    calls = [
        ToolCall("c_reject", "delete", {"path": "/"}),
        ToolCall("c_deny", "wipe", {"path": "/"}),
    ]
    execute_tool_calls(registry, calls, RunContext.new(approval_handler=refuse))
    # without a handler the call waits for a person: nothing executed, no span
    pending = execute_tool_calls(registry, [ToolCall("c_pending", "delete", {"path": "/"})])
    assert pending.pending and ran == []
    spans = by_call_id(traced)
    assert sorted(spans) == ["c_deny", "c_reject"]
    for span in spans.values():
        attributes = span.attributes or {}
        assert attributes["error.type"] == "rejected"
        assert attributes["nous_tools.tool.attempts"] == 0
        assert span.status.status_code is StatusCode.ERROR
        assert span.kind is SpanKind.INTERNAL
    assert sorted(dict(p.attributes)["error.type"] for p in durations(reader)) == [
        "rejected",
        "rejected",
    ]


def test_arguments_refused_before_running_have_error_type_invalid_arguments(
    traced: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    registry = Registry([Tool.from_function(add, timeout=None)], executor=executor)
    execute_tool_calls(
        registry,
        [
            {"id": "c_json", "type": "function", "function": {"name": "add", "arguments": "{"}},
            {"type": "tool_use", "id": "c_schema", "name": "add", "input": {"a": "one"}},
            {"type": "custom_tool_call", "call_id": "c_custom", "name": "add", "input": "1+1"},
            {"type": "tool_use", "id": "c_unknown", "name": "divide", "input": {}},
        ],
    )
    spans = by_call_id(traced)
    assert sorted(spans) == ["c_custom", "c_json", "c_schema"]  # an unknown tool: no span
    for span in spans.values():
        assert (span.attributes or {})["error.type"] == "invalid_arguments"
        assert span.name == "execute_tool add"


def test_timeouts_and_raised_exceptions_have_their_error_type(
    traced: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    def hang(ctx: RunContext[t.Any]) -> str:
        ctx.cancelled.wait(5.0)
        return "late"

    def broken() -> str:
        raise PermissionError("no", SECRET)

    def declined() -> Err:
        return Err("not today")

    registry = Registry(
        [
            Tool.from_function(hang, timeout=0.05),
            Tool.from_function(broken, retries=1, timeout=None),
            Tool.from_function(declined, timeout=None),
            Tool.from_function(search, timeout=None),
        ],
        executor=executor,
    )
    execute_tool_calls(
        registry,
        [
            ToolCall("c_hang", "hang", {}),
            ToolCall("c_broken", "broken", {}),
            ToolCall("c_declined", "declined", {}),
            ToolCall("c_ok", "search", {"query": "q"}),
        ],
    )
    spans = by_call_id(traced)
    assert {k: (s.attributes or {}).get("error.type") for k, s in spans.items()} == {
        "c_hang": "timeout",
        "c_broken": "PermissionError",
        "c_declined": "_OTHER",
        "c_ok": None,
    }
    assert (spans["c_broken"].attributes or {})["nous_tools.tool.attempts"] == 2
    assert [e.name for e in spans["c_broken"].events] == ["retry"]
    assert spans["c_ok"].status.status_code is StatusCode.UNSET
    assert SECRET not in everything_recorded(traced)


def test_a_call_the_executor_cannot_start_has_error_type_saturated(
    traced: InMemorySpanExporter,
) -> None:
    release = threading.Event()

    def stuck() -> str:
        release.wait(30.0)
        return "late"

    with ToolExecutor(max_workers=2, max_abandoned=1, on_timeout="abandon") as small:
        registry = Registry([Tool.from_function(stuck, timeout=0.05, retries=0)], executor=small)
        try:
            first = execute_tool_calls(registry, [ToolCall("c_stuck", "stuck", {})])
            second = execute_tool_calls(registry, [ToolCall("c_refused", "stuck", {})])
        finally:
            release.set()
    assert isinstance(first.results[0], Err) and isinstance(second.results[0], Err)
    assert isinstance(second.results[0].reason, ExecutorSaturated)
    spans = by_call_id(traced)
    assert (spans["c_stuck"].attributes or {})["error.type"] == "timeout"
    assert (spans["c_refused"].attributes or {})["error.type"] == "saturated"


def test_the_duration_metric_is_the_span_duration_with_the_conventions_buckets(
    traced: InMemorySpanExporter, executor: ToolExecutor, reader: InMemoryMetricReader
) -> None:
    def broken() -> str:
        raise ConnectionError("down")

    registry = Registry(
        [Tool.from_function(search, timeout=5.0), Tool.from_function(broken, retries=0)],
        executor=executor,
    )
    execute_tool_calls(
        registry, [ToolCall("c1", "search", {"query": "q"}), ToolCall("c2", "broken", {})]
    )
    points = {dict(p.attributes).get("gen_ai.tool.name"): p for p in durations(reader)}
    assert dict(points["search"].attributes) == {
        "gen_ai.tool.name": "search",
        "gen_ai.tool.type": "function",
    }
    assert dict(points["broken"].attributes) == {
        "gen_ai.tool.name": "broken",
        "gen_ai.tool.type": "function",
        "error.type": "ConnectionError",
    }
    spans = {s.name: s for s in tool_spans(traced)}
    for name, point in points.items():
        span = spans[f"execute_tool {name}"]
        assert span.start_time is not None and span.end_time is not None
        assert point.count == 1
        assert point.sum == pytest.approx((span.end_time - span.start_time) / 1e9, abs=1e-9)
        assert tuple(point.explicit_bounds) == nous_otel.DURATION_BUCKETS


def test_direct_calls_are_measured_too(
    traced: InMemorySpanExporter, executor: ToolExecutor, reader: InMemoryMetricReader
) -> None:
    executor.execute(Tool.from_function(search, timeout=None), {"query": "q"})
    (point,) = durations(reader)
    assert point.count == 1 and dict(point.attributes)["gen_ai.tool.name"] == "search"


def test_results_and_arguments_are_captured_only_when_asked(
    provider: TracerProvider, traced: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    def lookup(user: str) -> dict[str, str]:
        """Look a user up."""
        return {"user": user, "email": "ada@example.com"}

    registry = Registry([Tool.from_function(lookup, timeout=None)], executor=executor)
    execute_tool_calls(registry, [ToolCall("c1", "lookup", {"user": "ada"})])
    (span,) = tool_spans(traced)
    assert "gen_ai.tool.call.arguments" not in (span.attributes or {})
    assert "gen_ai.tool.call.result" not in (span.attributes or {})
    assert "ada" not in everything_recorded(traced)

    traced.clear()
    nous_otel.instrument(provider, capture_arguments=True, capture_results=True)
    execute_tool_calls(registry, [ToolCall("c2", "lookup", {"user": "ada"})])
    (span,) = tool_spans(traced)
    attributes = span.attributes or {}
    assert attributes["gen_ai.tool.call.arguments"] == '{"user": "ada"}'
    assert attributes["gen_ai.tool.call.result"] == '{"user": "ada", "email": "ada@example.com"}'


def test_a_batch_calls_span_is_the_parent_of_the_spans_its_tool_makes(
    traced: InMemorySpanExporter, executor: ToolExecutor, tracer: trace.Tracer
) -> None:
    def fetch(url: str) -> str:
        with tracer.start_as_current_span("http GET"):
            return f"body of {url}"

    registry = Registry([Tool.from_function(fetch, timeout=5.0)], executor=executor)
    with tracer.start_as_current_span("agent turn") as turn:
        execute_tool_calls(
            registry, [ToolCall("c1", "fetch", {"url": "a"}), ToolCall("c2", "fetch", {"url": "b"})]
        )
        assert trace.get_current_span() is turn
    spans = traced.get_finished_spans()
    tool_by_id = by_call_id(traced)
    for http in (s for s in spans if s.name == "http GET"):
        assert http.parent is not None
        assert http.parent.span_id in {
            s.context.span_id for s in tool_by_id.values() if s.context is not None
        }
    for span in tool_by_id.values():
        assert span.parent is not None
        assert span.parent.span_id == turn.get_span_context().span_id


def test_a_rate_limited_model_tool_call_has_a_span_with_error_type_rate_limited(exporter):
    registry = Registry([Tool.from_function(search, timeout=None, rate_limit="1/hour")])
    calls = [ToolCall(f"call_{i}", "search", {"query": "x"}) for i in range(2)]
    results = execute_tool_calls(registry, calls)
    assert [r.is_ok() for r in results] == [True, False]
    spans = sorted(tool_spans(exporter), key=lambda s: s.attributes["gen_ai.tool.call.id"])
    assert [s.attributes.get("error.type") for s in spans] == [None, "rate_limited"]
    assert spans[1].status.status_code is StatusCode.ERROR


# -- what a running tool reports (issue 24) ---------------------------------------------


def report(ctx: RunContext[t.Any]) -> str:
    ctx.report_progress(1, 4, f"token {SECRET}")
    ctx.log("warning", f"log {SECRET}", key=SECRET)
    return "ok"


def test_progress_and_log_lines_are_span_events_without_their_text_by_default(
    exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    assert executor.execute(Tool.from_function(report, timeout=5.0), {}).is_ok()
    span = only(exporter)
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        ("progress", {"nous_tools.progress": 1.0, "nous_tools.progress.total": 4.0}),
        ("log", {"nous_tools.log.level": "warning"}),
    ]
    assert span.start_time is not None and span.end_time is not None
    assert all(span.start_time <= e.timestamp <= span.end_time for e in span.events)
    assert SECRET not in everything_recorded(exporter)


def test_progress_and_log_text_is_recorded_with_capture_results(
    provider: TracerProvider, exporter: InMemorySpanExporter, executor: ToolExecutor
) -> None:
    nous_otel.instrument(provider, capture_results=True)
    assert executor.execute(Tool.from_function(report, timeout=None), {}).is_ok()
    progress, log = only(exporter).events
    assert (progress.attributes or {})["nous_tools.progress.message"] == f"token {SECRET}"
    assert (log.attributes or {})["nous_tools.log.message"] == f"log {SECRET}"
    assert (log.attributes or {})["nous_tools.log.data"] == json.dumps({"key": SECRET})


# -- the call journal: a replay is not an execution ------------------------------------


def test_a_replayed_call_makes_no_span_and_no_measurement(
    traced: InMemorySpanExporter,
    reader: InMemoryMetricReader,
    executor: ToolExecutor,
    tmp_path: t.Any,
) -> None:
    from nous_tools import SQLiteJournal
    from nous_tools.journal import idempotency_key

    registry = Registry(
        [Tool.from_function(search, timeout=5.0)],
        executor=executor,
        journal=SQLiteJournal(tmp_path / "journal.db"),
    )
    ctx = RunContext.new(run_id="conversation-1")
    calls = [ToolCall("call_1", "search", {"query": "q"})]
    execute_tool_calls(registry, calls, ctx)
    assert len(tool_spans(traced)) == 1
    assert len(durations(reader)) == 1 and durations(reader)[0].count == 1
    again = execute_tool_calls(registry, calls, ctx)  # the same response posted again
    assert again.to_openai_messages()[0]["content"] == "found q"
    assert len(tool_spans(traced)) == 1  # the replay reported nothing as executed
    assert durations(reader)[0].count == 1
    # direct calls too: a replay sends no start, so no span
    registry.execute("search", {"query": "q"}, ctx, call_id="call_1")
    assert len(tool_spans(traced)) == 1
    key = idempotency_key("conversation-1", "call_1")
    assert key not in everything_recorded(traced)
    assert key not in repr(reader.get_metrics_data())


def test_a_call_the_journal_refuses_is_an_error_span_of_its_class(
    traced: InMemorySpanExporter, executor: ToolExecutor, tmp_path: t.Any
) -> None:
    from nous_tools import SQLiteJournal

    registry = Registry(
        [Tool.from_function(search, timeout=5.0)],
        executor=executor,
        journal=SQLiteJournal(tmp_path / "journal.db"),
    )
    ctx = RunContext.new(run_id="conversation-1")
    execute_tool_calls(registry, [ToolCall("call_1", "search", {"query": "q"})], ctx)
    execute_tool_calls(registry, [ToolCall("call_1", "search", {"query": "other"})], ctx)
    spans = tool_spans(traced)
    assert len(spans) == 2
    assert (spans[1].attributes or {})["error.type"] == "JournalConflict"
