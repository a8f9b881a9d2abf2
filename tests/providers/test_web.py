"""The web helpers (nous_tools.providers._web): the answer in the shape the calls came in, the
pending calls for a page, and decisions read from a request body (one ValueError, a
400, for anything malformed)."""

from __future__ import annotations

import json
import typing as t

import pytest

from nous_tools import (
    Edit,
    Registry,
    Tool,
    ToolCall,
    ToolCallResults,
    ToolExecutor,
    execute_tool_calls,
    parse_decisions,
)


def delete_file(path: str) -> str:
    """Delete a file (asks a person first)."""
    return f"deleted {path}"


def weather(city: str) -> dict[str, t.Any]:
    return {"city": city, "temp_c": 21}


@pytest.fixture
def registry(executor: ToolExecutor) -> Registry:
    return Registry(
        [
            Tool.from_function(weather, timeout=None),
            Tool.from_function(delete_file, timeout=None, approval="ask"),
        ],
        executor=executor,
    )


WEATHER_TEXT = '{"city": "Paris", "temp_c": 21}'


def test_response_messages_answer_in_the_shape_the_calls_came_in(registry: Registry) -> None:
    chat = execute_tool_calls(
        registry,
        [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    )
    assert chat.response_messages() == [
        {"role": "tool", "tool_call_id": "call_1", "content": WEATHER_TEXT}
    ]
    responses = execute_tool_calls(
        registry,
        {
            "output": [
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "weather",
                    "arguments": '{"city": "Paris"}',
                }
            ]
        },
    )
    assert responses.response_messages() == [
        {"type": "function_call_output", "call_id": "call_1", "output": WEATHER_TEXT}
    ]
    anthropic = execute_tool_calls(
        registry,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}
            ],
        },
    )
    assert anthropic.response_messages() == [
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": WEATHER_TEXT,
                    "is_error": False,
                }
            ],
        }
    ]
    neutral = execute_tool_calls(registry, [ToolCall("c1", "weather", {"city": "Paris"})])
    assert neutral.provider is None
    assert neutral.response_messages() == [
        {"role": "tool", "tool_call_id": "c1", "content": WEATHER_TEXT}
    ]


def test_an_anthropic_batch_with_only_pending_calls_has_no_message_yet(
    registry: Registry,
) -> None:
    result = execute_tool_calls(
        registry,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "delete_file", "input": {"path": "/x"}}
            ],
        },
    )
    assert result.response_messages() == []
    placeholder = result.response_messages(include_pending=True)
    assert placeholder[0]["content"][0]["content"].startswith("Pending approval: tool")


def test_pending_summary_is_what_a_page_shows_in_call_order(registry: Registry) -> None:
    registry.advice.register("before", "delete_file", lambda args: {**args, "tags": ("a", "b")})
    result = execute_tool_calls(
        registry,
        [
            ToolCall("c1", "delete_file", {"path": "/tmp/a"}),
            ToolCall("c2", "weather", {"city": "Paris"}),
            ToolCall("c3", "delete_file", {"path": "/tmp/b"}),
        ],
    )
    summary = result.pending_summary()
    assert summary == [
        {
            "id": "c1",
            "call_id": "c1",
            "tool": "delete_file",
            "description": "Delete a file (asks a person first).",
            "arguments": {"path": "/tmp/a", "tags": ["a", "b"]},
        },
        {
            "id": "c3",
            "call_id": "c3",
            "tool": "delete_file",
            "description": "Delete a file (asks a person first).",
            "arguments": {"path": "/tmp/b", "tags": ["a", "b"]},
        },
    ]
    json.dumps(summary)  # JSON as it is
    assert (
        execute_tool_calls(registry, [ToolCall("c", "weather", {"city": "x"})]).pending_summary()
        == []
    )


def test_parse_decisions_reads_approve_reject_and_edits() -> None:
    body = {
        "batch": {"ignored": True},
        "decisions": {"a": "approve", "b": "reject", "c": {"edit": {"path": "/tmp/y"}}},
    }
    assert parse_decisions(body) == {"a": "approve", "b": "reject", "c": Edit({"path": "/tmp/y"})}
    assert parse_decisions({"decisions": {"a": Edit({})}}) == {"a": Edit({})}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (None, "the body must be a JSON object, got NoneType"),
        (["approve"], "the body must be a JSON object, got list"),
        ({"batch": {}}, 'the body has no "decisions"'),
        ({"decisions": "approve"}, '"decisions" must map call ids to decisions, got str'),
        ({"decisions": {}}, '"decisions" is empty'),
        ({"decisions": {"": "approve"}}, "a call id must be a non-empty string, got ''"),
        ({"decisions": {3: "approve"}}, "a call id must be a non-empty string, got 3"),
        ({"decisions": {"a": "maybe"}}, "the decision for call 'a' is 'maybe'"),
        ({"decisions": {"a": ["approve"]}}, "the decision for call 'a' must be"),
        ({"decisions": {"a": {"edit": "/tmp/y"}}}, "the edit of call 'a' must hold"),
        ({"decisions": {"a": {"edit": {}, "also": 1}}}, "the decision for call 'a' must be"),
        ({"decisions": {"a": True}}, "the decision for call 'a' must be"),
    ],
)
def test_a_malformed_body_is_one_value_error_saying_what_is_wrong(body: t.Any, why: str) -> None:
    with pytest.raises(ValueError, match=r"^cannot read the decisions: ") as raised:
        parse_decisions(body)
    assert why in str(raised.value)


def test_the_helpers_make_a_resolve_view_a_few_lines(registry: Registry) -> None:
    """The view of the docs, without a framework: every malformed body is a 400."""

    def resolve(body: t.Any) -> tuple[int, t.Any]:
        try:
            decisions = parse_decisions(body)
            batch = ToolCallResults.from_dict(body.get("batch"), registry, "s3cret")
            resolved = batch.resolve(decisions)
        except ValueError as exc:
            return 400, str(exc)
        if resolved.pending:
            return 202, resolved.pending_summary()
        return 200, resolved.response_messages()

    paused = execute_tool_calls(registry, [ToolCall("c1", "delete_file", {"path": "/tmp/a"})])
    batch = paused.to_dict("s3cret")
    assert resolve({"batch": batch})[0] == 400  # was a KeyError: a 500
    assert resolve({"decisions": {"c1": "approve"}})[0] == 400
    assert resolve({"batch": batch, "decisions": {"nope": "approve"}})[0] == 400
    assert resolve({"batch": batch, "decisions": {"c1": "approve"}}) == (
        200,
        [{"role": "tool", "tool_call_id": "c1", "content": "deleted /tmp/a"}],
    )
