"""nous_tools.contrib.opentelemetry with the SDK's in-memory exporter: one span per
call, its parent across the worker thread, errors, retries, call ids, what is
recorded only when asked, and uninstrument."""

from __future__ import annotations

import collections.abc as c
import gc
import json
import typing as t

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from nous_tools import Registry, RunContext, Tool, ToolCall, ToolExecutor, execute_tool_calls
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
