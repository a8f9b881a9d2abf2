"""``Registry.tool_definitions``: made once per tool, kept until the registry
changes, safe against a caller who changes what it got; OpenAI's strict mode
without the keywords outside its subset, and one tool that cannot be strict sent
non-strict instead of failing the whole registry (issue 26; issue 25's strict-mode
items, with a real MCP server)."""

from __future__ import annotations

import copy
import json
import logging
import pickle
import re
import sys
import threading
import typing as t
from pathlib import Path

import jsonschema
import pytest

from nous_tools import Registry, Tool, tool
from nous_tools.schema import _strict as strict_module

SUPPORT = Path(__file__).resolve().parents[1] / "support"
PROVIDERS: list[tuple[t.Literal["openai", "responses", "anthropic"], bool]] = [
    ("openai", False),
    ("openai", True),
    ("responses", False),
    ("responses", True),
    ("anthropic", False),
]


def weather(city: str, days: int = 1, units: list[str] | None = None) -> str:
    """Current weather for a city.

    Args:
        city: The city.
        days: How many days.
        units: Units to use.
    """
    return city


def tag(labels: dict[str, int]) -> str:
    """Tag things (a dict parameter: strict mode cannot say it)."""
    return ",".join(labels)


def make(fn: t.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("timeout", None)
    return Tool.from_function(fn, **options)


def names(definitions: list[dict[str, t.Any]]) -> list[str]:
    return [d["function"]["name"] if "function" in d else d["name"] for d in definitions]


def schema_of(definition: dict[str, t.Any]) -> dict[str, t.Any]:
    if "function" in definition:
        return t.cast("dict[str, t.Any]", definition["function"]["parameters"])
    return t.cast("dict[str, t.Any]", definition.get("parameters", definition.get("input_schema")))


@pytest.fixture
def registry() -> Registry:
    return Registry([make(weather), make(lambda: "pong", name="ping")])


# -- the cache ---------------------------------------------------------------------------


@pytest.mark.parametrize(("provider", "strict"), PROVIDERS)
def test_repeated_definitions_are_equal_new_lists_of_the_same_kept_definitions(
    registry: Registry, provider: t.Literal["openai", "responses", "anthropic"], strict: bool
) -> None:
    first = registry.tool_definitions(provider, strict=strict)
    second = registry.tool_definitions(provider, strict=strict)
    assert first == second
    assert first is not second  # the list is the caller's
    # no new dict per tool per call: the kept, read-only definitions themselves
    assert all(a is b for a, b in zip(first, second, strict=True))
    # what the tools themselves say, as before the cache
    expected = [
        tool.to_anthropic_schema()
        if provider == "anthropic"
        else tool.to_responses_schema(strict=strict)
        if provider == "responses"
        else tool.to_openai_schema(strict=strict)
        for tool in registry.all()
    ]
    assert first == expected


@pytest.mark.parametrize(("provider", "strict"), PROVIDERS)
def test_changing_a_returned_definition_raises_and_the_next_answer_is_unchanged(
    registry: Registry, provider: t.Literal["openai", "responses", "anthropic"], strict: bool
) -> None:
    before = copy.deepcopy(registry.tool_definitions(provider, strict=strict))
    got = registry.tool_definitions(provider, strict=strict)
    schemas = [schema_of(definition) for definition in got]
    with pytest.raises(TypeError, match=r"read-only; \{\*\*definition, key: value\}"):
        got[-1]["cache_control"] = {"type": "ephemeral"}
    # the way to add a key: a new dict in the list, which is the caller's
    got[-1] = {**got[-1], "cache_control": {"type": "ephemeral"}}  # Anthropic prompt caching
    assert got[-1]["cache_control"] == {"type": "ephemeral"}
    for definition in got[:-1]:
        with pytest.raises(TypeError, match="read-only"):
            del definition["type" if provider != "anthropic" else "name"]
        with pytest.raises(TypeError, match="read-only"):
            definition.update(name="renamed")
        if provider == "openai":
            with pytest.raises(TypeError, match="read-only"):
                definition["function"]["name"] = "renamed"
    got.reverse()
    got.append({"type": "function", "name": "extra"})
    for schema in schemas:
        with pytest.raises(TypeError, match=r"read-only; .*copy\.deepcopy"):
            schema["properties"]["x"] = {"type": "string"}
        with pytest.raises(TypeError, match="read-only"):
            schema["required"].append("x")
        with pytest.raises(TypeError, match="read-only"):
            schema.pop("properties")
    assert registry.tool_definitions(provider, strict=strict) == before


def test_a_deep_copy_of_a_definition_is_plain_and_yours_to_change(registry: Registry) -> None:
    (_, definition) = registry.tool_definitions("openai")  # ping, weather
    mine = copy.deepcopy(definition)
    schema = mine["function"]["parameters"]
    assert type(mine["function"]) is dict and type(schema) is dict
    assert type(schema["required"]) is list
    assert type(schema["properties"]["city"]) is dict
    schema["properties"]["city"]["description"] = "Where."
    schema["required"].append("days")
    assert registry.tool_definitions("openai")[1] != mine  # the registry's is unchanged
    shallow = copy.copy(definition["function"]["parameters"])
    assert type(shallow) is dict
    shallow["extra"] = True
    assert "extra" not in registry.tool_definitions("openai")[1]["function"]["parameters"]


def test_definitions_serialise_as_plain_json_and_pickle_as_plain_dicts(
    registry: Registry,
) -> None:
    for provider, strict in PROVIDERS:
        definitions = registry.tool_definitions(provider, strict=strict)
        plain = copy.deepcopy(definitions)
        assert json.dumps(definitions, sort_keys=True) == json.dumps(plain, sort_keys=True)
        back = pickle.loads(pickle.dumps(definitions))
        assert back == plain
        assert type(schema_of(back[0])) is dict
        schema_of(back[0])["changed"] = True  # an unpickled copy is the caller's own


def test_each_tools_definition_is_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Schemas of this test's own: a tool whose schema reads as another's shares the
    # strict form made for that one, in whichever test it was made.
    def own(word: str) -> dict[str, t.Any]:
        return {
            "type": "object",
            "properties": {word: {"type": "string", "description": "made once"}},
            "required": [word],
        }

    registry = Registry(
        [make(weather, parameters=own("city")), make(lambda x: x, name="ping", parameters=own("x"))]
    )
    made: list[str] = []
    real = strict_module.strict_schema

    def counting(schema: t.Any) -> dict[str, t.Any]:
        made.append(schema.get("title", "?"))
        return real(schema)

    monkeypatch.setattr(strict_module, "strict_schema", counting)
    for _ in range(3):
        registry.tool_definitions("openai", strict=True)
        registry.tool_definitions("responses", strict=True)
    assert len(made) == 2  # weather and ping, once each, for both OpenAI shapes
    registry.register(make(tag, parameters=own("labels")))  # a change: only the new tool is made
    registry.tool_definitions("openai", strict=True)
    assert len(made) == 3


def test_definitions_follow_register_unregister_and_replace(registry: Registry) -> None:
    assert names(registry.tool_definitions("anthropic")) == ["ping", "weather"]
    registry.register(make(tag))
    assert names(registry.tool_definitions("anthropic")) == ["ping", "tag", "weather"]
    registry.register(make(weather, description="Another forecast."))  # same name
    definitions = registry.tool_definitions("anthropic")
    assert definitions[2]["description"] == "Another forecast."
    assert registry.unregister("ping") is not None
    assert names(registry.tool_definitions("anthropic")) == ["tag", "weather"]
    registry.register(make(lambda: None, name="hidden", approval="deny"))
    assert names(registry.tool_definitions("anthropic")) == ["tag", "weather"]
    registry.unregister("nothing")  # no such tool: nothing changes
    assert names(registry.tool_definitions("anthropic")) == ["tag", "weather"]


def test_a_tool_replaced_by_a_decorator_above_register_changes_the_definitions() -> None:
    registry = Registry()

    @tool(description="Said with options.", timeout=None)
    @registry.register
    def shout(text: str) -> str:
        """Say it loud."""
        return text.upper()

    (definition,) = registry.tool_definitions("anthropic")
    assert definition["description"] == "Said with options."
    assert registry.lookup("shout") is shout


def test_register_mcp_changes_the_definitions(mcp_strict: t.Any) -> None:
    registry = Registry([make(weather)])
    assert names(registry.tool_definitions("openai")) == ["weather"]
    registry.register_mcp(mcp_strict, trusted=True, prefix="far_")
    assert names(registry.tool_definitions("openai")) == ["far_lookup", "far_tag", "weather"]


def test_definitions_read_while_tools_are_registered_are_always_whole() -> None:
    registry = Registry([make(weather)])
    tools = [make(lambda: None, name=f"tool_{i:03d}") for i in range(200)]
    started = threading.Barrier(3)
    done = threading.Event()
    seen: list[list[str]] = []
    failures: list[BaseException] = []

    def read() -> None:
        try:
            started.wait()
            while not done.is_set():
                seen.append(names(registry.tool_definitions("openai", strict=True)))
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    def write() -> None:
        started.wait()
        try:
            for one in tools:
                registry.register(one)
            for one in tools[::2]:
                registry.unregister(one.name)
        finally:
            done.set()

    threads = [threading.Thread(target=read), threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    write()
    for thread in threads:
        thread.join()
    assert not failures
    valid = {one.name for one in tools} | {"weather"}
    for answer in seen:
        assert answer == sorted(answer) and set(answer) <= valid
    final = names(registry.tool_definitions("openai", strict=True))
    assert final == sorted(["weather", *(one.name for one in tools[1::2])])


# -- strict mode ---------------------------------------------------------------------------


def test_strict_definitions_leave_out_schema_and_other_annotations() -> None:
    parameters = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/find",
        "$comment": "generated",
        "type": "object",
        "title": "find",
        "x-vendor": {"anything": True},
        "properties": {
            "query": {
                "type": "string",
                "description": "What to find.",
                "examples": ["cats"],
                "deprecated": False,
                "readOnly": False,
                "$comment": "inner",
                "nullable": False,
                "pattern": "^[a-z]+$",
            },
            "limit": {"type": "integer", "default": 10, "minimum": 1, "maximum": 50},
            "where": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {"city": {"type": "string", "contentMediaType": "text/plain"}},
                "required": ["city"],
            },
        },
        "required": ["query"],
    }
    found = Tool(name="find", function=lambda **kw: kw, parameters=parameters, timeout=None)
    strict = found.strict_parameters()
    text = json.dumps(strict)
    for keyword in (
        "$schema", "$id", "$comment", "x-vendor", "examples", "deprecated", "readOnly",
        "nullable", "default", "contentMediaType",
    ):  # fmt: skip
        assert f'"{keyword}"' not in text, keyword
    assert strict["title"] == "find"
    assert strict["properties"]["query"] == {
        "type": "string",
        "description": "What to find.",
        "pattern": "^[a-z]+$",
    }
    assert strict["properties"]["limit"] == {
        "type": ["integer", "null"],
        "minimum": 1,
        "maximum": 50,
    }
    # what a model sends under it still validates under the tool's own schema
    sent = {"query": "cats", "limit": None, "where": {"city": "Oslo"}}
    jsonschema.validate(sent, strict)
    (definition,) = Registry([found]).tool_definitions("responses", strict=True)
    assert definition["strict"] is True and "$schema" not in json.dumps(definition)
    assert parameters["$schema"]  # the tool's own schema is left as it is


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "object", "properties": {"a": {"type": "string"}}, "dependencies": {}}, "dependencies"),
        ({"type": "array", "items": {"type": "string"}, "additionalItems": False}, "additionalItems"),
        ({"$dynamicRef": "#node"}, "$dynamicRef"),
        ({"$ref": "#node"}, "$ref"),  # an anchor, not a JSON pointer
        ({"$ref": "https://example.com/schema.json"}, "$ref"),
    ],
)  # fmt: skip
def test_strict_mode_refuses_a_constraint_or_reference_it_cannot_express(
    schema: dict[str, t.Any], keyword: str
) -> None:
    parameters = {
        "type": "object",
        "properties": {"x": schema},
        "required": ["x"],
        "$defs": {"node": {"$anchor": "node", "$dynamicAnchor": "node", "type": "string"}},
    }
    with pytest.raises(ValueError, match=re.escape(f"'{keyword}' (at x)")):
        strict_module.strict_schema(parameters)


def test_a_tool_that_cannot_be_strict_is_sent_non_strict_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = Registry([make(weather), make(tag)])
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        chat = registry.tool_definitions("openai", strict=True)
        responses = registry.tool_definitions("responses", strict=True)
        registry.tool_definitions("openai", strict=True)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "Tool 'tag' cannot be made strict: 'additionalProperties' (at labels)" in warnings[0]
    assert '"strict": false' in warnings[0]
    by_name = {d["function"]["name"]: d["function"] for d in chat}
    assert by_name["weather"]["strict"] is True
    assert by_name["tag"]["strict"] is False
    assert by_name["tag"]["parameters"] == make(tag).parameters  # its own schema
    assert {d["name"]: d["strict"] for d in responses} == {"tag": False, "weather": True}
    # the non-strict definitions say nothing about strict, as before
    assert "strict" not in registry.tool_definitions("openai")[0]["function"]
    with pytest.raises(ValueError, match="cannot be made strict"):
        make(tag).to_openai_schema(strict=True)  # asked of the tool itself: an error


def test_threads_asking_together_make_a_tools_strict_parts_once_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = Registry([make(weather), make(tag)])
    start = threading.Barrier(4)
    answers: list[list[dict[str, t.Any]]] = []

    def ask() -> None:
        start.wait()
        answers.append(registry.tool_definitions("responses", strict=True))

    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        threads = [threading.Thread(target=ask) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(answers) == 4 and all(answer == answers[0] for answer in answers)
    warnings = [r for r in caplog.records if "cannot be made strict" in r.getMessage()]
    assert len(warnings) == 1


# -- a real MCP server's schemas (issue 25) ----------------------------------------------


@pytest.fixture(scope="module")
def mcp_strict() -> t.Iterator[t.Any]:
    pytest.importorskip("mcp")
    from nous_tools.contrib.mcp import MCPServer

    server = MCPServer.stdio(sys.executable, [str(SUPPORT / "mcp_strict_server.py")])
    with server:
        yield server


def test_an_mcp_servers_schema_keyword_is_left_out_of_strict_definitions(
    mcp_strict: t.Any,
) -> None:
    registry = Registry()
    registry.register_mcp(mcp_strict, trusted=True)
    lookup = registry.lookup("lookup")
    assert lookup is not None and lookup.parameters is not None
    assert "$schema" in lookup.parameters  # what the server sent
    for provider in ("openai", "responses"):
        definitions = registry.tool_definitions(provider, strict=True)  # type: ignore[arg-type]
        found = next(d for d in definitions if "lookup" in json.dumps(d)[:80])
        schema = schema_of(found)
        assert "$schema" not in schema
        assert "examples" not in schema["properties"]["city"]
        assert schema["required"] == ["city", "days"]
        assert (found.get("function", found))["strict"] is True


def test_one_mcp_tool_that_cannot_be_strict_does_not_stop_the_others(
    mcp_strict: t.Any, caplog: pytest.LogCaptureFixture
) -> None:
    registry = Registry([make(weather)])
    registry.register_mcp(mcp_strict, trusted=True)
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        definitions = registry.tool_definitions("openai", strict=True)
    strictness = {d["function"]["name"]: d["function"]["strict"] for d in definitions}
    assert strictness == {"lookup": True, "tag": False, "weather": True}
    assert any("Tool 'tag' cannot be made strict" in r.getMessage() for r in caplog.records)
    # and the model's call of the non-strict tool runs as any other
    tag_tool = registry.lookup("tag")
    assert tag_tool is not None
    assert registry.execute_approved(tag_tool, {"labels": {"b": 1, "a": 2}}).value == "a,b"
