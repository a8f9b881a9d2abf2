"""The agent loop with the real provider SDKs (issue 13): calls in, definitions out,
results out — with the SDKs' own types, built offline with ``model_validate``.

The request-side types of the SDKs are TypedDicts, which check nothing at run time;
:func:`conforms` validates a value with ``pydantic.TypeAdapter(ParamType)`` in strict
mode (required keys, ``Literal`` tags, value types) and then checks that nothing was
dropped on the way (the TypeAdapter ignores unknown keys), so a key we misspell or
add fails the test.
"""

from __future__ import annotations

import collections.abc as c
import enum
import json
import re
import typing as t

import jsonschema
import pydantic
import pytest
from anthropic.types import Message, MessageParam, ToolParam, ToolResultBlockParam
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types import CompletionUsage
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionToolMessageParam,
    ChatCompletionToolParam,
)
from openai.types.responses import (
    FunctionToolParam,
    Response,
    ResponseCustomToolCallOutputParam,
    ResponseInputItemParam,
)
from openai.types.responses.response_input_item_param import FunctionCallOutput
from typing_extensions import TypedDict

from nous_tools import (
    Err,
    NeedsApproval,
    Ok,
    Registry,
    Tool,
    ToolCall,
    ToolError,
    ToolExecutor,
    ToolNotFound,
    execute_tool_calls,
)

# -- checking values against the SDKs' request types -----------------------------------

_ADAPTERS: dict[object, pydantic.TypeAdapter[t.Any]] = {}


def _materialise(value: t.Any) -> t.Any:
    """Lists for the lazy iterators pydantic returns for ``Iterable[...]`` fields
    (iterating them is what validates their items)."""
    if isinstance(value, dict):
        return {k: _materialise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_materialise(v) for v in value]
    if isinstance(value, c.Iterator):
        return [_materialise(v) for v in value]
    return value


def conforms(param_type: object, value: t.Any) -> None:
    """Fail unless ``value`` validates as ``param_type`` with nothing dropped."""
    adapter = _ADAPTERS.get(param_type)
    if adapter is None:  # kept alive: pydantic's lazy iterators need their validator
        adapter = _ADAPTERS[param_type] = pydantic.TypeAdapter(param_type)
    validated = _materialise(adapter.validate_python(value, strict=True))
    assert validated == value, f"{param_type} dropped or changed keys of {value!r}"


# -- realistic SDK objects, built offline ----------------------------------------------


def chat_completion(
    tool_calls: list[dict[str, t.Any]] | None, content: str | None = None
) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
            "object": "chat.completion",
            "created": 1741569952,
            "model": "gpt-4.1-2025-04-14",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls" if tool_calls else "stop",
                    "logprobs": None,
                    "message": {
                        "role": "assistant",
                        "content": content,
                        "refusal": None,
                        "annotations": [],
                        "tool_calls": tool_calls,
                    },
                }
            ],
            "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99},
        }
    )


def chat_call(call_id: str, name: str, arguments: str) -> dict[str, t.Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def responses_response(output: list[dict[str, t.Any]]) -> Response:
    return Response.model_validate(
        {
            "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
            "object": "response",
            "created_at": 1741476542,
            "status": "completed",
            "model": "gpt-5-2025-08-07",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": output,
        }
    )


def function_call(call_id: str, name: str, arguments: str) -> dict[str, t.Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "The user wants the weather in two cities."}],
}
OUTPUT_MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
}


def anthropic_message(content: list[dict[str, t.Any]], stop_reason: str = "tool_use") -> Message:
    return Message.model_validate(
        {
            "id": "msg_01Aq9w938a90dw8q",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 472, "output_tokens": 89},
            "content": content,
        }
    )


def tool_use(call_id: str, name: str, arguments: dict[str, t.Any]) -> dict[str, t.Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


THINKING = {"type": "thinking", "thinking": "Two cities: two calls.", "signature": "EqQBCg..."}


# -- the tools -------------------------------------------------------------------------


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


def get_weather(city: str, unit: Unit = Unit.C, days: int = 1) -> dict[str, t.Any]:
    """Current weather for a city.

    Args:
        city: The city name.
        unit: The temperature unit.
        days: How many days of forecast.
    """
    return {"city": city, "unit": unit if isinstance(unit, str) else unit.value, "days": days}


def run_sql(query: str) -> str:
    """Run a read-only SQL query."""
    return f"1 row for {query}"


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def nuke() -> str:
    """Never to be run."""
    return "boom"


def make(fn: c.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("timeout", None)
    return Tool.from_function(fn, **options)


@pytest.fixture
def registry(executor: ToolExecutor) -> Registry:
    return Registry(
        [
            make(get_weather),
            make(run_sql),
            make(add),
            make(delete_file, approval="ask"),
            make(nuke, approval="deny"),
        ],
        executor=executor,
    )


PARALLEL_CHAT = [
    chat_call("call_paris", "get_weather", '{"city": "Paris"}'),
    chat_call("call_oslo", "get_weather", '{"city": "Oslo", "days": 3}'),
]


def whole_responses() -> list[tuple[str, object]]:
    """The same two parallel calls as each SDK and each dict form carries them."""
    chat = chat_completion(PARALLEL_CHAT, content=None)
    response = responses_response(
        [
            REASONING,
            function_call("call_paris", "get_weather", '{"city": "Paris"}'),
            function_call("call_oslo", "get_weather", '{"city": "Oslo", "days": 3}'),
        ]
    )
    message = anthropic_message(
        [
            THINKING,
            {"type": "text", "text": "I'll check both.", "citations": None},
            tool_use("call_paris", "get_weather", {"city": "Paris"}),
            tool_use("call_oslo", "get_weather", {"city": "Oslo", "days": 3}),
        ]
    )
    return [
        ("ChatCompletion", chat),
        ("ChatCompletionMessage", chat.choices[0].message),
        ("Response", response),
        ("Message", message),
        ("ChatCompletion dict", chat.model_dump()),
        ("ChatCompletionMessage dict", chat.choices[0].message.model_dump()),
        ("Response dict", {"output": response.model_dump()["output"]}),
        ("Message dict", {"role": "assistant", "content": message.model_dump()["content"]}),
    ]


# -- calls in --------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "answer"), whole_responses(), ids=lambda v: str(v)[:30])
def test_a_whole_response_of_each_sdk_runs_its_tool_calls(
    registry: Registry, shape: str, answer: object
) -> None:
    result = execute_tool_calls(registry, answer)
    assert [call.id for call in result.calls] == ["call_paris", "call_oslo"], shape
    assert result.results == [
        Ok({"city": "Paris", "unit": "celsius", "days": 1}),
        Ok({"city": "Oslo", "unit": "celsius", "days": 3}),
    ]
    assert result.calls[1].arguments == {"city": "Oslo", "days": 3}


def test_a_text_only_answer_is_an_empty_batch_in_every_shape(registry: Registry) -> None:
    chat = chat_completion(None, content="It is sunny in Paris.")
    answers: list[object] = [
        None,
        chat,
        chat.choices[0].message,
        chat.model_dump(),
        {"role": "assistant", "content": "It is sunny in Paris."},
        responses_response([OUTPUT_MESSAGE]),
        {"output": [OUTPUT_MESSAGE]},
        anthropic_message([{"type": "text", "text": "Sunny."}], stop_reason="end_turn"),
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]},
        [],
    ]
    for answer in answers:
        result = execute_tool_calls(registry, answer)
        assert len(result) == 0 and result.all_ok, answer
        assert result.to_openai_messages() == []
        assert result.to_responses_items() == []
        assert result.to_anthropic_blocks() == []


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("get_weather", "got a single str"),
        (42, "got an int"),
        ({"foo": "bar"}, "got a dict"),
        (chat_call("c", "add", "{}"), "that is a single tool call (pass a list)"),
        (object(), "got an object"),
        (  # an SDK object that is not a response (pydantic models iterate as fields)
            CompletionUsage(prompt_tokens=1, completion_tokens=1, total_tokens=2),
            "got a CompletionUsage",
        ),
    ],
)
def test_a_container_that_is_not_recognised_is_a_type_error_naming_what_was_expected(
    registry: Registry, value: object, words: str
) -> None:
    with pytest.raises(TypeError) as raised:
        execute_tool_calls(registry, value)
    message = str(raised.value)
    assert words in message
    for expected in ("None", "ChatCompletion", "Response", "Anthropic Message", "list"):
        assert expected in message


@pytest.mark.parametrize(("shape", "answer"), whole_responses()[:4], ids=lambda v: str(v)[:30])
def test_a_list_holding_a_whole_response_is_a_type_error_not_a_silent_empty_batch(
    registry: Registry, shape: str, answer: object
) -> None:
    with pytest.raises(TypeError, match=r"a list holding an? .* \(item #1\); pass the"):
        execute_tool_calls(registry, [answer])


def test_a_chat_completion_with_several_choices_is_a_type_error(registry: Registry) -> None:
    chat = chat_completion(PARALLEL_CHAT).model_dump()
    chat["choices"].append({**chat["choices"][0], "index": 1})
    with pytest.raises(TypeError, match=r"2 choices; pass the message"):
        execute_tool_calls(registry, chat)


def test_provider_hosted_items_are_skipped_and_listed(registry: Registry) -> None:
    hosted = [
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "weather"},
        },
        {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"]},
        {"type": "mcp_list_tools", "id": "ml_1", "server_label": "wiki", "tools": []},
        {
            "type": "mcp_call",
            "id": "mc_1",
            "server_label": "wiki",
            "name": "ask",
            "arguments": "{}",
            "output": "x",
        },
        {
            "type": "mcp_approval_request",
            "id": "ma_1",
            "server_label": "wiki",
            "name": "ask",
            "arguments": "{}",
        },
        {
            "type": "code_interpreter_call",
            "id": "ci_1",
            "status": "completed",
            "code": "1 + 1",
            "container_id": "cntr_1",
            "outputs": [],
        },
        {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": None},
    ]
    response = responses_response(
        [REASONING, *hosted, OUTPUT_MESSAGE, function_call("c1", "add", '{"a": 1, "b": 2}')]
    )
    result = execute_tool_calls(registry, response)
    assert result.results == [Ok(3)]
    assert [item.type for item in result.skipped] == [
        "reasoning",
        "web_search_call",
        "file_search_call",
        "mcp_list_tools",
        "mcp_call",
        "mcp_approval_request",
        "code_interpreter_call",
        "image_generation_call",
        "message",
    ]
    assert result.skipped == response.output[:-1]  # the items as given, in order

    message = anthropic_message(
        [
            THINKING,
            {"type": "redacted_thinking", "data": "EmwKAhgB..."},
            {"type": "text", "text": "Searching first."},
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {"query": "weather"},
            },
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            tool_use("toolu_1", "add", {"a": 2, "b": 2}),
        ]
    )
    result = execute_tool_calls(registry, message)
    assert result.results == [Ok(4)]
    assert [block.type for block in result.skipped] == [
        "thinking",
        "redacted_thinking",
        "text",
        "server_tool_use",
        "web_search_tool_result",
    ]


def test_a_custom_tool_call_runs_its_tool_with_the_raw_input_text(registry: Registry) -> None:
    query = 'SELECT name FROM "users" WHERE id = 1; -- not JSON {'
    response = responses_response(
        [
            REASONING,
            {
                "type": "custom_tool_call",
                "id": "ctc_1",
                "call_id": "call_sql",
                "name": "run_sql",
                "input": query,
            },
            function_call("call_add", "add", '{"a": 1, "b": 1}'),
        ]
    )
    result = execute_tool_calls(registry, response)
    assert result.results == [Ok(f"1 row for {query}"), Ok(2)]
    assert result.kinds == ["custom", "function"]
    assert result.calls[0].arguments == {"query": query}
    custom_output, function_output = result.to_responses_items()
    assert custom_output == {
        "type": "custom_tool_call_output",
        "call_id": "call_sql",
        "output": f"1 row for {query}",
    }
    assert function_output["type"] == "function_call_output"
    conforms(ResponseCustomToolCallOutputParam, custom_output)
    conforms(ResponseInputItemParam, custom_output)

    chat = chat_completion(
        [{"id": "call_c", "type": "custom", "custom": {"name": "run_sql", "input": query}}]
    )
    result = execute_tool_calls(registry, chat)
    assert result.results == [Ok(f"1 row for {query}")]
    assert result.to_openai_messages() == [
        {"role": "tool", "tool_call_id": "call_c", "content": f"1 row for {query}"}
    ]


def test_a_custom_tool_call_without_a_fitting_tool_is_a_clear_err(registry: Registry) -> None:
    response = responses_response(
        [
            {"type": "custom_tool_call", "call_id": "c1", "name": "add", "input": "1 + 1"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*"},
            function_call("c3", "add", '{"a": 1, "b": 1}'),
        ]
    )
    result = execute_tool_calls(registry, response)
    wrong, missing, fine = result.results
    assert isinstance(wrong, Err) and isinstance(wrong.reason, ToolError)
    assert wrong.reason.message == (
        "Invalid arguments for 'add': a custom tool call sends one input text, and "
        "this tool has 2 parameters (a, b); it needs exactly one"
    )
    assert isinstance(missing, Err) and isinstance(missing.reason, ToolNotFound)
    assert fine == Ok(2)
    assert [item["type"] for item in result.to_responses_items()] == [
        "custom_tool_call_output",
        "custom_tool_call_output",
        "function_call_output",
    ]


# -- definitions out -------------------------------------------------------------------


def test_tool_definitions_for_each_provider_validate_against_the_sdk_param_types(
    registry: Registry,
) -> None:
    expected_names = ["add", "delete_file", "get_weather", "run_sql"]  # no "deny" tool, sorted

    chat = registry.tool_definitions("openai")
    assert [d["function"]["name"] for d in chat] == expected_names
    for definition in chat + registry.tool_definitions("openai", strict=True):
        conforms(ChatCompletionToolParam, definition)

    responses = registry.tool_definitions("responses")
    assert [d["name"] for d in responses] == expected_names
    assert {d["strict"] for d in responses} == {False}
    for definition in responses + registry.tool_definitions("responses", strict=True):
        conforms(FunctionToolParam, definition)

    anthropic = registry.tool_definitions("anthropic")
    assert [d["name"] for d in anthropic] == expected_names
    for definition in anthropic:
        conforms(ToolParam, definition)

    weather = registry.lookup("get_weather")
    assert weather is not None
    assert weather.to_anthropic_schema() == {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "input_schema": dict(weather.parameters or {}),
    }
    assert weather.to_responses_schema(strict=True) == {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": weather.strict_parameters(),
        "strict": True,
    }
    with pytest.raises(ValueError, match="provider must be 'openai', 'responses' or 'anthropic'"):
        registry.tool_definitions("gemini")  # type: ignore[arg-type]


def test_to_openai_schema_without_strict_is_as_before(registry: Registry) -> None:
    weather = registry.lookup("get_weather")
    assert weather is not None
    assert weather.to_openai_schema() == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": dict(weather.parameters or {}),
        },
    }
    bare = Tool(name="ping", function=lambda: "pong")
    assert bare.to_openai_schema()["function"] == {
        "name": "ping",
        "description": "No description provided",
        "parameters": {"type": "object", "properties": {}, "required": []},
    }


class Window(TypedDict, total=False):
    start: int
    end: int


def book(
    room: str,
    window: Window,
    attendees: list[str],
    note: str | None = None,
    priority: t.Literal["low", "high"] = "low",
    size: int = 2,
) -> dict[str, t.Any]:
    """Book a room."""
    return {
        "room": room,
        "window": window,
        "attendees": attendees,
        "note": note,
        "priority": priority,
        "size": size,
    }


def _objects(schema: t.Any) -> c.Iterator[dict[str, t.Any]]:
    if isinstance(schema, dict):
        if schema.get("type") == "object" or (
            isinstance(schema.get("type"), list) and "object" in schema["type"]
        ):
            yield schema
        for value in schema.values():
            yield from _objects(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _objects(value)


def test_strict_mode_requires_every_property_and_closes_every_object() -> None:
    tool = Tool.from_function(book)
    strict = tool.strict_parameters()
    objects = list(_objects(strict))
    assert len(objects) == 2  # the parameters and the window
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    assert "default" not in json.dumps(strict)
    properties = strict["properties"]
    assert properties["room"] == {"type": "string"}  # required: not nullable
    assert properties["size"] == {"type": ["integer", "null"]}
    assert properties["priority"] == {"type": ["string", "null"], "enum": ["low", "high", None]}
    assert properties["window"]["properties"]["start"] == {"type": ["integer", "null"]}
    # what a model sends in strict mode validates, nulls for the optional parameters
    model_sends = {
        "room": "B2",
        "window": {"start": 9, "end": None},
        "attendees": ["ana"],
        "note": None,
        "priority": None,
        "size": None,
    }
    jsonschema.validate(model_sends, strict)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**model_sends, "room": None}, strict)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**model_sends, "extra": 1}, strict)
    assert tool.parameters is not None and "default" in json.dumps(tool.parameters)  # untouched
    definition = tool.to_openai_schema(strict=True)
    assert definition["function"]["strict"] is True
    assert definition["function"]["parameters"] == strict


def test_a_null_for_an_optional_parameter_becomes_its_default_before_approval_and_validation(
    executor: ToolExecutor,
) -> None:
    registry = Registry(
        [make(book), make(book, name="book_later", approval="ask")], executor=executor
    )
    arguments = json.dumps(
        {
            "room": "B2",
            "window": {"start": 9, "end": None},
            "attendees": ["ana"],
            "note": None,
            "priority": None,
            "size": None,
        }
    )
    result = execute_tool_calls(
        registry,
        chat_completion(
            [chat_call("c1", "book", arguments), chat_call("c2", "book_later", arguments)]
        ),
    )
    booked, pending = result.results
    assert booked == Ok(
        {
            "room": "B2",
            "window": {"start": 9},  # the TypedDict key left out, as the model meant
            "attendees": ["ana"],
            "note": None,  # its own type takes None: kept
            "priority": "low",
            "size": 2,
        }
    )
    # Substituted once, before the approval step: the person approves what will run.
    assert isinstance(pending, NeedsApproval)
    assert pending.arguments == {
        "room": "B2",
        "window": {"start": 9},
        "attendees": ["ana"],
        "note": None,
    }
    # A null for a required parameter is not a default: validation refuses it.
    refused = execute_tool_calls(
        registry, [chat_call("c3", "book", arguments.replace('"B2"', "null"))]
    )
    (err,) = refused.results
    assert isinstance(err, Err) and "room: expected string, got null" in err.reason.message


@pytest.mark.parametrize(
    ("annotation", "keyword"),
    [
        (dict[str, int], "additionalProperties"),
        (dict, "additionalProperties"),
        (set[str], "uniqueItems"),
        (tuple[int, int], "prefixItems"),
        (t.Any, "type"),
        (list, "items"),
    ],
)
def test_a_parameter_that_cannot_be_strict_raises_value_error_naming_the_keyword(
    annotation: object, keyword: str
) -> None:
    def fn(value: t.Any) -> None:
        """A tool."""

    fn.__annotations__["value"] = annotation
    tool = Tool.from_function(fn, name="odd")
    with pytest.raises(
        ValueError, match=rf"Tool 'odd' cannot be made strict: '{keyword}' \(at value\)"
    ):
        tool.strict_parameters()
    with pytest.raises(ValueError, match=f"'{keyword}'"):
        tool.to_openai_schema(strict=True)
    tool.to_openai_schema()  # without strict it is fine
    # a registry's strict definitions send it non-strict (tests/registry/test_definitions.py)
    (definition,) = Registry([tool]).tool_definitions("openai", strict=True)
    assert definition["function"]["strict"] is False


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "string", "minLength": 1}, "minLength"),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "oneOf"),
        ({"type": "string", "format": "uri"}, "format"),
        ({"allOf": [{"type": "string"}]}, "allOf"),
    ],
)
def test_a_hand_written_schema_that_cannot_be_strict_names_the_keyword(
    schema: dict[str, t.Any], keyword: str
) -> None:
    parameters = {"type": "object", "properties": {"x": schema}, "required": ["x"]}
    tool = Tool(name="hand", function=lambda x: x, parameters=parameters, validate_args=False)
    with pytest.raises(ValueError, match=rf"'{re.escape(keyword)}' \(at x\)"):
        tool.strict_parameters()


# -- results out -----------------------------------------------------------------------


def test_every_result_message_validates_against_the_sdk_request_types(
    registry: Registry,
) -> None:
    response = responses_response(
        [
            REASONING,
            function_call("c_ok", "add", '{"a": 1, "b": 2}'),
            function_call("c_invalid", "add", '{"a": "one"}'),
            function_call("c_json", "add", '{"a": '),
            function_call("c_unknown", "divide", "{}"),
            function_call("c_denied", "nuke", "{}"),
            {"type": "custom_tool_call", "call_id": "c_custom", "name": "run_sql", "input": "q"},
            function_call("c_pending", "delete_file", '{"path": "/tmp/x"}'),
        ]
    )
    result = execute_tool_calls(registry, response)
    assert [type(r).__name__ for r in result] == [
        "Ok",
        "Err",
        "Err",
        "Err",
        "Err",
        "Ok",
        "NeedsApproval",
    ]

    messages = result.to_openai_messages()
    assert [m["tool_call_id"] for m in messages] == [
        "c_ok", "c_invalid", "c_json", "c_unknown", "c_denied", "c_custom"
    ]  # fmt: skip
    for message in messages:
        conforms(ChatCompletionToolMessageParam, message)

    items = result.to_responses_items()
    assert len(items) == 6
    for item in items:
        conforms(ResponseInputItemParam, item)
        assert isinstance(item["call_id"], str) and item["call_id"]
        if item["type"] == "function_call_output":
            conforms(FunctionCallOutput, item)
        else:
            conforms(ResponseCustomToolCallOutputParam, item)

    blocks = result.to_anthropic_blocks()
    for block in blocks:
        conforms(ToolResultBlockParam, block)
    assert [b["is_error"] for b in blocks] == [False, True, True, True, True, False]
    message = result.to_anthropic_message()
    assert message == {"role": "user", "content": blocks}
    conforms(MessageParam, message)


def test_pending_calls_are_left_out_of_every_output_unless_asked(registry: Registry) -> None:
    message = anthropic_message(
        [
            tool_use("toolu_add", "add", {"a": 1, "b": 1}),
            tool_use("toolu_rm", "delete_file", {"path": "/srv/data"}),
        ]
    )
    result = execute_tool_calls(registry, message)
    assert isinstance(result.results[1], NeedsApproval)
    assert [m["tool_call_id"] for m in result.to_openai_messages()] == ["toolu_add"]
    assert [i["call_id"] for i in result.to_responses_items()] == ["toolu_add"]
    assert [b["tool_use_id"] for b in result.to_anthropic_blocks()] == ["toolu_add"]
    assert [b["tool_use_id"] for b in result.to_anthropic_message()["content"]] == ["toolu_add"]
    placeholders = result.to_anthropic_blocks(include_pending=True)
    assert [b["tool_use_id"] for b in placeholders] == ["toolu_add", "toolu_rm"]
    assert placeholders[1]["content"].startswith("Pending approval: tool 'delete_file'")
    for block in placeholders:
        conforms(ToolResultBlockParam, block)


# -- hostile model input (issue 11, items 7 and 11) ------------------------------------


def test_a_json_integer_of_more_than_4300_digits_is_a_per_call_err(registry: Registry) -> None:
    huge = "9" * 5000
    result = execute_tool_calls(
        registry,
        [
            chat_call("c1", "add", f'{{"a": {huge}, "b": 1}}'),
            chat_call("c2", "add", '{"a": 1, "b": 1}'),
        ],
    )
    err, fine = result.results
    assert isinstance(err, Err) and isinstance(err.reason, ToolError)
    assert err.reason.message.startswith("Invalid JSON arguments for 'add': ")
    assert "4300 digits" in err.reason.message
    assert isinstance(err.reason.original_error, ValueError)
    assert fine == Ok(2)


def test_a_100000_deep_array_is_a_per_call_err(registry: Registry) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    result = execute_tool_calls(
        registry,
        [chat_call("c1", "add", f'{{"a": {deep}}}'), chat_call("c2", "add", '{"a": 2, "b": 2}')],
    )
    err, fine = result.results
    assert isinstance(err, Err)
    assert err.reason.message == "Invalid JSON arguments for 'add': nested too deeply"
    assert fine == Ok(4)


def test_a_broken_iterator_is_an_err_and_the_calls_read_before_it_still_run(
    registry: Registry,
) -> None:
    def calls() -> c.Iterator[dict[str, t.Any]]:
        yield chat_call("c1", "add", '{"a": 1, "b": 2}')
        yield chat_call("c2", "add", '{"a": 3, "b": 4}')
        raise ConnectionResetError("the stream broke")

    result = execute_tool_calls(registry, calls())
    first, second, broken = result.results
    assert (first, second) == (Ok(3), Ok(7))
    assert isinstance(broken, Err)
    assert broken.reason.message == (
        "The tool calls could not be read past call #2: ConnectionResetError: the stream broke"
    )
    assert [m["tool_call_id"] for m in result.to_openai_messages()] == ["c1", "c2"]


class Hostile:
    """An SDK-like item whose every attribute raises."""

    def __getattr__(self, name: str) -> t.Any:
        raise RuntimeError(f"no {name} for you")


class HostileMapping(c.Mapping[str, t.Any]):
    def __getitem__(self, key: str) -> t.Any:
        raise KeyError(key)

    def get(self, key: str, default: t.Any = None) -> t.Any:
        raise RuntimeError("get is broken")

    def __iter__(self) -> c.Iterator[str]:
        raise RuntimeError("iteration is broken")

    def __len__(self) -> int:
        return 1


def test_items_whose_attribute_access_raises_are_errs_and_the_batch_goes_on(
    registry: Registry,
) -> None:
    result = execute_tool_calls(
        registry, [Hostile(), HostileMapping(), chat_call("c3", "add", '{"a": 1, "b": 1}')]
    )
    first, second, third = result.results
    for err in (first, second):
        assert isinstance(err, Err) and isinstance(err.reason, ToolError)
        assert "could not be read" in err.reason.message
    assert "Tool call #1" in first.reason.message and "Tool call #2" in second.reason.message
    assert third == Ok(2)


def test_strict_mode_keeps_local_references_and_a_tool_without_parameters_is_strict() -> None:
    parameters = {  # the shape pydantic gives a model parameter: $defs and $ref
        "type": "object",
        "$defs": {
            "Room": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "floor": {"type": "integer"}},
                "required": ["name"],
            }
        },
        "properties": {
            "room": {"$ref": "#/$defs/Room"},
            "backup": {"$ref": "#/$defs/Room", "description": "If the room is taken."},
            "spare": {"$ref": "#/$defs/Room"},
        },
        "required": ["room"],
    }
    tool = Tool(
        name="reserve", function=lambda room, backup=None, spare=None: room, parameters=parameters
    )
    strict = tool.strict_parameters()
    room = strict["$defs"]["Room"]
    assert room["required"] == ["name", "floor"] and room["additionalProperties"] is False
    assert strict["properties"]["room"] == {"$ref": "#/$defs/Room"}  # a $ref alone stays
    backup = strict["properties"]["backup"]  # a $ref with a sibling is inlined, then nullable
    assert backup["description"] == "If the room is taken."
    assert backup["type"] == ["object", "null"] and backup["additionalProperties"] is False
    assert backup["properties"]["floor"] == {"type": ["integer", "null"]}
    assert strict["properties"]["spare"] == {"anyOf": [{"$ref": "#/$defs/Room"}, {"type": "null"}]}
    model_sends = {"room": {"name": "B2", "floor": None}, "backup": None, "spare": None}
    jsonschema.validate(model_sends, strict)
    # and back: the nulls of optional fields are dropped, through the reference
    result = execute_tool_calls(Registry([tool]), [ToolCall("c1", "reserve", model_sends)])
    assert result.results == [Ok({"name": "B2"})]

    ping = Tool(name="ping", function=lambda: "pong")
    conforms(ChatCompletionToolParam, ping.to_openai_schema(strict=True))
    conforms(FunctionToolParam, ping.to_responses_schema(strict=True))
    assert ping.strict_parameters() == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


# -- the walk that turns nulls into defaults is planned once per tool (issue 26) ----------

_PLAN_SCHEMAS: list[dict[str, t.Any]] = [
    Tool.from_function(book).parameters,  # type: ignore[list-item]
    {
        "$defs": {
            "Room": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "floor": {"type": "integer"}},
                "required": ["name"],
            },
            "Tree": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
                },
            },
        },
        "properties": {
            "room": {"$ref": "#/$defs/Room"},
            "maybe": {"anyOf": [{"$ref": "#/$defs/Room"}, {"type": "null"}]},
            "rooms": {"type": "array", "items": {"$ref": "#/$defs/Room"}},
            "grid": {
                "type": "array",
                "items": {"type": "array", "items": {"$ref": "#/$defs/Room"}},
            },
            "tree": {"$ref": "#/$defs/Tree"},
            "free": {},
        },
        "required": ["room"],
    },
]

_null_json = st.recursive(
    st.none() | st.integers() | st.sampled_from(["x", "B2"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["name", "floor", "label", "kids", "start", "end", "x"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=10,
)


@settings(max_examples=300)
@given(
    index=st.sampled_from(range(len(_PLAN_SCHEMAS))),
    arguments=st.dictionaries(
        st.sampled_from(
            ["room", "maybe", "rooms", "grid", "tree", "free", "window", "note", "size", "q"]
        ),
        _null_json,
        max_size=6,
    ),
)
def test_the_planned_walk_drops_exactly_the_nulls_the_full_walk_drops(
    index: int, arguments: dict[str, t.Any]
) -> None:
    from nous_tools.schema._strict import apply_null_plan, null_plan, nulls_to_defaults

    schema = _PLAN_SCHEMAS[index]
    plan = null_plan(schema)
    assert plan is not None
    expected = nulls_to_defaults(schema, arguments)
    got = apply_null_plan(plan, arguments)
    assert got == expected
    assert (got is arguments) == (expected is arguments)


def test_a_schema_without_an_optional_parameter_that_refuses_null_is_never_walked() -> None:
    from nous_tools.schema._strict import null_plan

    rows = {
        "type": "object",
        "properties": {
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "note": {"type": ["string", "null"]}},
                    "required": ["id"],
                },
            }
        },
        "required": ["rows"],
    }
    assert null_plan(rows) is None  # "note" takes null itself: nothing to drop anywhere

    visits: list[str] = []

    class Watched(dict[str, t.Any]):
        def items(self) -> t.Any:
            visits.append("items")
            return super().items()

        def get(self, *args: t.Any) -> t.Any:
            visits.append("get")
            return super().get(*args)

    tool = Tool(name="ingest", function=lambda rows: len(rows), parameters=rows, timeout=None)
    row = Watched(id=1, note=None)
    result = execute_tool_calls(Registry([tool]), [ToolCall("c1", "ingest", {"rows": [row]})])
    assert result.results == [Ok(1)]
    assert visits == []
