"""A program's nested calls are traced as children of the code tool's span."""

from __future__ import annotations

import json
import pathlib

import pytest

from nous_tools import execute_tool_calls
from tests.program.conftest import confined, marking_registry

pytestmark = confined

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from nous_tools.contrib import opentelemetry as nous_otel  # noqa: E402


def test_nested_calls_are_spans_under_the_programs_span(markers: pathlib.Path) -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = marking_registry(markers)
    registry.register(registry.code_tool())
    code = 'lookup(item="a")\nscore(item="b")\n'
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "run_python", "arguments": json.dumps({"code": code})},
    }
    nous_otel.instrument(provider)
    try:
        batch = execute_tool_calls(registry, [call])
    finally:
        nous_otel.uninstrument()
    assert batch.all_ok, batch.results
    spans = {span.name: span for span in exporter.get_finished_spans()}
    program = spans["execute_tool run_python"]
    for name in ("execute_tool lookup", "execute_tool score"):
        parent = spans[name].parent
        assert parent is not None and parent.span_id == program.context.span_id


def test_the_programs_span_carries_its_batch_call_id(markers: pathlib.Path) -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = marking_registry(markers)
    registry.register(registry.code_tool())
    call = {
        "id": "c7",
        "type": "function",
        "function": {"name": "run_python", "arguments": json.dumps({"code": 'lookup(item="s")'})},
    }
    nous_otel.instrument(provider)
    try:
        batch = execute_tool_calls(registry, [call])
    finally:
        nous_otel.uninstrument()
    assert batch.all_ok, batch.results
    spans = {span.name: span for span in exporter.get_finished_spans()}
    program = spans["execute_tool run_python"].attributes or {}
    nested = spans["execute_tool lookup"].attributes or {}
    assert program.get("gen_ai.tool.call.id") == "c7"
    assert nested.get("gen_ai.tool.call.id") == "c7/1"
