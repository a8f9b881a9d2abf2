"""Rich results (issue 24): nous_tools.content values, and how each provider gets them.

The provider shapes are checked with the SDKs' own request types (``conforms``, from
``test_agent_loop``: strict pydantic validation, nothing dropped).
"""

from __future__ import annotations

import base64
import dataclasses
import typing as t

import attrs
import pydantic
import pytest
from anthropic.types import ToolResultBlockParam
from openai.types.chat import ChatCompletionToolMessageParam
from openai.types.responses import ResponseInputItemParam

from nous_tools import (
    Err,
    Ok,
    Registry,
    Tool,
    ToolCall,
    execute,
    execute_tool_calls,
    format_tool_result,
)
from nous_tools.content import Audio, Image, Resource, Text, as_content, to_json
from nous_tools.schema import _output as structured
from tests.providers.test_agent_loop import conforms

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452")
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"


# -- the values ------------------------------------------------------------------------


def test_content_values_are_frozen_and_keep_their_bytes() -> None:
    image = Image(bytearray(PNG), "image/png")
    assert image.data == PNG and type(image.data) is bytes
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        image.mime_type = "image/gif"  # type: ignore[misc]
    assert repr(image) == f"Image(data=<{len(PNG)} bytes>, mime_type='image/png')"
    assert Resource("file:///a.pdf", "application/pdf", blob=memoryview(PDF)).blob == PDF


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Image(PNG, ""), "Image needs a mime_type"),
        (lambda: Image(PNG, None), "Image needs a mime_type"),  # type: ignore[arg-type]
        (lambda: Image(PNG, "png"), "must be a MIME type"),
        (lambda: Image(PNG, "audio/wav"), r"must be an image/\* type"),
        (lambda: Audio(WAV, "image/png"), r"must be an audio/\* type"),
        (lambda: Image("not bytes", "image/png"), "data must be bytes, got str"),  # type: ignore[arg-type]
        (lambda: Text(3), "text must be a str"),  # type: ignore[arg-type]
        (lambda: Resource("", None, text="x"), "needs a uri"),
        (lambda: Resource("test://x", None), "exactly one of text= .* or blob="),
        (lambda: Resource("test://x", None, text="a", blob=b"b"), "exactly one of"),
        (lambda: Resource("test://x", "nonsense", text="a"), "must be a MIME type"),
    ],
)
def test_bad_content_is_a_value_error_where_it_is_made(
    make: t.Callable[[], object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_a_tool_that_makes_bad_content_gets_an_err_and_others_go_on() -> None:
    def careless() -> Image:
        return Image(PNG, "")

    result = execute(Tool.from_function(careless, timeout=None, retries=0), {})
    assert isinstance(result, Err) and isinstance(result.reason.original_error, ValueError)
    assert "mime_type" in result.reason.message
    fine = execute(Tool.from_function(lambda: Image(PNG, "image/png"), name="f", timeout=None))
    assert fine == Ok(Image(PNG, "image/png"))


def test_as_content_finds_content_alone_or_in_a_list_and_leaves_other_values_alone() -> None:
    assert as_content(Image(PNG, "image/png")) == [Image(PNG, "image/png")]
    assert as_content(["a", Text("b"), {"k": 1}, Audio(WAV, "audio/wav")]) == [
        Text("a"),
        Text("b"),
        Text('{"k": 1}'),
        Audio(WAV, "audio/wav"),
    ]
    for plain in ("text", ["a", "b"], {"image": "no"}, 3, None):
        assert as_content(plain) is None


MIXED = [
    "The chart:",
    Image(PNG, "image/png"),
    Audio(WAV, "audio/wav"),
    Resource("test://notes.txt", "text/plain", text="some notes"),
    Resource("file:///tmp/report.pdf", "application/pdf", blob=PDF),
    Resource("file:///tmp/data.bin", None, blob=b"\x00\x01"),
]


def test_format_tool_result_and_chat_completions_carry_text_with_placeholders() -> None:
    text = format_tool_result(Ok(MIXED), "chart")
    assert text.splitlines() == [
        "The chart:",
        f"[image/png image, {len(PNG)} bytes: not shown, this message carries text only]",
        f"[audio/wav audio, {len(WAV)} bytes: not shown, this message carries text only]",
        "[resource test://notes.txt]",
        "some notes",
        f"[application/pdf resource file:///tmp/report.pdf, {len(PDF)} bytes: not shown, "
        "this message carries text only]",
        "[resource file:///tmp/data.bin, 2 bytes: not shown, this message carries text only]",
    ]


def test_a_content_part_after_plain_json_items_still_makes_the_result_content() -> None:
    assert format_tool_result(Ok(({"a": 1}, [2], Text("x")))) == '{"a": 1}\n[2]\nx'
    assert format_tool_result(Ok([{"a": 1}, [2]])) == '[{"a": 1}, [2]]'  # no part: JSON


def rich_batch() -> t.Any:
    registry = Registry()
    registry.register(Tool(name="chart", function=lambda: MIXED, timeout=None))
    registry.register(Tool(name="photo", function=lambda: Image(PNG, "image/jpeg"), timeout=None))
    registry.register(Tool(name="plain", function=lambda: "just text", timeout=None))
    calls = [ToolCall("c1", "chart", {}), ToolCall("c2", "photo", {}), ToolCall("c3", "plain", {})]
    return execute_tool_calls(registry, calls)


def test_provider_messages_with_images_validate_against_the_sdks_own_types() -> None:
    results = rich_batch()
    for message in results.to_openai_messages():
        conforms(ChatCompletionToolMessageParam, message)
        assert isinstance(message["content"], str)
    for item in results.to_responses_items():
        conforms(ResponseInputItemParam, item)
    for block in results.to_anthropic_blocks():
        conforms(ToolResultBlockParam, block)


def test_anthropic_gets_image_and_document_blocks_and_a_placeholder_for_audio() -> None:
    chart, photo, plain = rich_batch().to_anthropic_blocks()
    blocks = chart["content"]
    assert [block["type"] for block in blocks] == [
        "text",
        "image",
        "text",
        "document",
        "document",
        "text",
    ]
    assert base64.b64decode(blocks[1]["source"]["data"]) == PNG
    assert blocks[1]["source"]["media_type"] == "image/png"
    assert blocks[2]["text"].startswith("[audio/wav audio")
    assert blocks[3]["source"] == {"type": "text", "media_type": "text/plain", "data": "some notes"}
    assert base64.b64decode(blocks[4]["source"]["data"]) == PDF
    assert blocks[5]["text"].startswith("[resource file:///tmp/data.bin")
    assert photo["content"][0]["source"]["media_type"] == "image/jpeg"
    assert plain["content"] == "just text"


def test_responses_gets_input_image_and_input_file_parts() -> None:
    chart, _, plain = rich_batch().to_responses_items()
    parts = chart["output"]
    assert [part["type"] for part in parts] == [
        "input_text",
        "input_image",
        "input_text",
        "input_text",
        "input_file",
        "input_file",
    ]
    assert parts[1]["image_url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert parts[4]["filename"] == "report.pdf"
    assert parts[4]["file_data"] == "data:application/pdf;base64," + base64.b64encode(PDF).decode()
    assert parts[5]["file_data"].startswith("data:application/octet-stream;base64,")
    assert plain["output"] == "just text"


def test_to_json_writes_bytes_in_base64() -> None:
    assert to_json(Image(PNG, "image/png")) == {
        "type": "image",
        "mime_type": "image/png",
        "data": base64.b64encode(PNG).decode(),
    }
    assert to_json(Resource("test://x", None, text="t")) == {
        "type": "resource",
        "uri": "test://x",
        "mime_type": None,
        "text": "t",
    }


# -- output schemas from return annotations --------------------------------------------


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Shape(t.TypedDict):
    name: str
    sides: int


@attrs.define
class Label:
    text: str


class Model(pydantic.BaseModel):
    values: list[int]


def point() -> Point:
    return Point(1, 2)


def shape() -> Shape:
    return {"name": "square", "sides": 4}


def label() -> Label:
    return Label("hi")


def model() -> Model:
    return Model(values=[1, 2])


@pytest.mark.parametrize(
    ("fn", "value", "plain"),
    [
        (point, Point(1, 2), {"x": 1, "y": 2}),
        (shape, {"name": "square", "sides": 4}, {"name": "square", "sides": 4}),
        (label, Label("hi"), {"text": "hi"}),
        (model, Model(values=[1, 2]), {"values": [1, 2]}),
    ],
    ids=["dataclass", "TypedDict", "attrs", "pydantic"],
)
def test_a_structured_return_annotation_gives_an_output_schema_and_a_checked_value(
    fn: t.Callable[[], object], value: object, plain: dict[str, t.Any]
) -> None:
    tool = Tool.from_function(fn)
    schema = structured.output_schema(tool)
    assert schema is not None and schema["type"] == "object"
    assert structured.structured_value(tool, value) == Ok(plain)


def test_a_value_that_does_not_match_its_annotation_is_an_err_said_plainly() -> None:
    tool = Tool.from_function(point)
    wrong = structured.structured_value(tool, {"x": 1})
    assert isinstance(wrong, Err)
    assert wrong.reason.message == (
        "Tool 'point' returned a value that does not match its return annotation Point: "
        "Missing required fields: y"
    )
    not_an_object = structured.structured_value(tool, "a string")
    assert isinstance(not_an_object, Err) and "(an object)" in not_an_object.reason.message


def test_tools_without_a_structured_annotation_have_no_output_schema() -> None:
    def plain() -> dict[str, int]:
        return {}

    def picture() -> Image:
        return Image(PNG, "image/png")

    for fn in (plain, picture, lambda: 1):
        tool = Tool.from_function(fn, name="t")
        assert structured.output_schema(tool) is None
        assert structured.structured_value(tool, {}) is None


def test_the_text_parts_of_a_rich_result_keep_to_the_tools_max_result_chars() -> None:
    long = "x" * 500
    registry = Registry()
    registry.register(
        Tool(
            name="chart",
            function=lambda: [long, Image(PNG, "image/png"), Resource("test://r", None, text=long)],
            timeout=None,
            max_result_chars=200,
        )
    )
    results = execute_tool_calls(registry, [ToolCall("c1", "chart", {})])
    (block,) = results.to_anthropic_blocks()
    text, image, document = block["content"]
    assert len(text["text"]) == 200 and "omitted" in text["text"]
    assert base64.b64decode(image["source"]["data"]) == PNG  # bytes are not text: whole
    assert len(document["source"]["data"]) == 200
    (item,) = results.to_responses_items()
    assert len(item["output"][0]["text"]) == 200
    assert len(results.to_openai_messages()[0]["content"]) <= 200


def test_a_resource_link_is_a_typed_value_shown_to_every_model_as_text() -> None:
    from nous_tools.content import ResourceLink, to_anthropic, to_responses, to_text

    link = ResourceLink(
        "file:///reports/q3.pdf",
        "q3.pdf",
        mime_type="application/pdf",
        title="Q3 report",
        description="The quarter's figures.",
        size=2048,
    )
    shown = "[resource link Q3 report: file:///reports/q3.pdf (application/pdf, 2048 bytes)]"
    assert to_text([link]) == f"{shown}\nThe quarter's figures."
    assert to_anthropic([link]) == [{"type": "text", "text": f"{shown}\nThe quarter's figures."}]
    assert to_responses([link])[0]["type"] == "input_text"
    assert to_json(link) == {
        "type": "resource_link",
        "uri": "file:///reports/q3.pdf",
        "name": "q3.pdf",
        "mime_type": "application/pdf",
        "title": "Q3 report",
        "description": "The quarter's figures.",
        "size": 2048,
    }
    assert as_content([link]) == [link]
    with pytest.raises(ValueError, match="needs a uri"):
        ResourceLink("", "x")
    with pytest.raises(ValueError, match="size must be an int >= 0"):
        ResourceLink("file:///x", "x", size=-1)


def test_a_resource_link_crosses_mcp_both_ways_as_itself() -> None:
    from nous_tools.content import ResourceLink
    from nous_tools.contrib.mcp._reports import blocks_of, content_of

    link = ResourceLink("test://doc", "doc", mime_type="text/plain", size=3)
    (block,) = blocks_of([link])
    assert block.type == "resource_link"
    assert content_of(block) == link
