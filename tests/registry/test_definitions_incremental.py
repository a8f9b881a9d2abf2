"""``Registry.tool_definitions`` after a change: a ``register``, ``unregister`` or
replacement changes exactly the definitions of the names it touched, the others are
kept as they were made, and whatever the sequence of changes the answer equals a
fresh registry's of the same tools; tools whose schemas read the same share one
read-only schema."""

from __future__ import annotations

import copy
import typing as t

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nous_tools import Registry, Tool, tool
from nous_tools.schema import _strict as strict_module

Provider = t.Literal["openai", "responses", "anthropic"]
PAIRS: list[tuple[Provider, bool]] = [
    ("openai", False),
    ("openai", True),
    ("responses", False),
    ("responses", True),
    ("anthropic", False),
]


def run(**arguments: t.Any) -> str:
    return "done"


def schema(*words: str, note: str = "incremental") -> dict[str, t.Any]:
    """An object schema of string properties (``note`` tells it from any other)."""
    return {
        "type": "object",
        "properties": {word: {"type": "string", "description": note} for word in words},
        "required": list(words),
    }


#: A dict parameter: OpenAI's strict mode cannot say it.
CANNOT_BE_STRICT: dict[str, t.Any] = {
    "type": "object",
    "properties": {"labels": {"type": "object", "additionalProperties": {"type": "integer"}}},
    "required": ["labels"],
}
SHARED = schema("query")


def make(name: str, parameters: dict[str, t.Any] | None = None, **options: t.Any) -> Tool:
    options.setdefault("description", f"{name}, as first made")
    return Tool(name=name, function=run, parameters=parameters, timeout=None, **options)


def names(definitions: list[dict[str, t.Any]]) -> list[str]:
    return [d["function"]["name"] if "function" in d else d["name"] for d in definitions]


def fresh(registry: Registry, provider: Provider, strict: bool) -> list[dict[str, t.Any]]:
    """The same tools' definitions, made from scratch by a registry never asked."""
    return Registry(registry.all()).tool_definitions(provider, strict=strict)


# -- one change ----------------------------------------------------------------------------


def test_a_register_adds_its_definition_in_order_and_keeps_every_other() -> None:
    registry = Registry([make("b", SHARED), make("d", SHARED)])
    before = registry.tool_definitions("openai")
    registry.register(make("c", SHARED))
    after = registry.tool_definitions("openai")
    assert names(after) == ["b", "c", "d"]
    assert [after[0], after[2]] == before
    # the others were kept as made, not made again
    assert after[0]["function"] is before[0]["function"]
    assert after[2]["function"] is before[1]["function"]
    assert after == fresh(registry, "openai", False)


def test_a_replacement_changes_only_the_replaced_definition() -> None:
    registry = Registry([make("a"), make("b"), make("c")])
    before = registry.tool_definitions("responses")
    registry.register(make("b", schema("city"), description="b, made again"))
    after = registry.tool_definitions("responses")
    assert names(after) == ["a", "b", "c"]
    assert after[1]["description"] == "b, made again"
    assert after[1]["parameters"] == schema("city")
    assert [after[0], after[2]] == [before[0], before[2]]
    assert after == fresh(registry, "responses", False)


def test_an_unregister_removes_only_its_definition() -> None:
    registry = Registry([make("a"), make("b"), make("c")])
    before = registry.tool_definitions("anthropic")
    assert registry.unregister("b") is not None
    after = registry.tool_definitions("anthropic")
    assert after == [before[0], before[2]]
    assert registry.unregister("nothing") is None  # no such tool: nothing changes
    assert registry.tool_definitions("anthropic") == after


def test_a_tool_replaced_by_a_deny_one_leaves_the_definitions_and_comes_back() -> None:
    registry = Registry([make("a"), make("b")])
    assert names(registry.tool_definitions("openai", strict=True)) == ["a", "b"]
    registry.register(make("a", approval="deny"))
    assert names(registry.tool_definitions("openai", strict=True)) == ["b"]
    registry.register(make("a", description="a, allowed again"))
    (first, _) = registry.tool_definitions("openai", strict=True)
    assert first["function"]["description"] == "a, allowed again"


def test_a_decorator_that_renames_the_registered_tool_moves_its_definition() -> None:
    registry = Registry([make("middle")])
    assert names(registry.tool_definitions("anthropic")) == ["middle"]

    @tool(name="zzz_loud", timeout=None)
    @registry.register
    def aaa_quiet(text: str) -> str:
        """Say it."""
        return text

    assert names(registry.tool_definitions("anthropic")) == ["middle", "zzz_loud"]


def test_a_copy_a_caller_changed_never_reaches_the_next_answer_after_a_change() -> None:
    registry = Registry([make("a"), make("b")])
    got = registry.tool_definitions("anthropic")
    got[-1] = {**got[-1], "cache_control": {"type": "ephemeral"}}
    got[0] = {**got[0], "name": "renamed"}
    registry.register(make("c"))
    after = registry.tool_definitions("anthropic")
    assert names(after) == ["a", "b", "c"]
    assert all("cache_control" not in definition for definition in after)
    assert after == fresh(registry, "anthropic", False)


def test_many_changes_at_once_give_what_a_fresh_registry_gives() -> None:
    registry = Registry([make(f"tool_{i:03d}", SHARED) for i in range(0, 300, 2)])
    for provider, strict in PAIRS:
        registry.tool_definitions(provider, strict=strict)
    for i in range(1, 300, 2):  # more changes than are patched in: the list is made again
        registry.register(make(f"tool_{i:03d}", schema("city")))
    for i in range(0, 300, 3):
        registry.unregister(f"tool_{i:03d}")
    for provider, strict in PAIRS:
        assert registry.tool_definitions(provider, strict=strict) == fresh(
            registry, provider, strict
        )


# -- shared schemas ------------------------------------------------------------------------


def test_tools_whose_schemas_read_the_same_share_one_read_only_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    own = schema("query", "city", note="shared by two tools")
    made: list[object] = []
    real = strict_module.strict_schema

    def counting(value: t.Any) -> dict[str, t.Any]:
        made.append(value)
        return real(value)

    monkeypatch.setattr(strict_module, "strict_schema", counting)
    registry = Registry([make("one", own), make("two", copy.deepcopy(own))])
    one, two = registry.tool_definitions("responses", strict=True)
    assert one["parameters"] is two["parameters"]
    assert one["strict"] is two["strict"] is True
    assert len(made) == 1  # one strict form for both
    one, two = registry.tool_definitions("anthropic")
    assert one["input_schema"] is two["input_schema"] == own


def test_tools_without_parameters_share_one_empty_schema() -> None:
    registry = Registry([make("a"), make("b", {})])
    a, b = registry.tool_definitions("openai")
    assert a["function"]["parameters"] is b["function"]["parameters"]
    assert a["function"]["parameters"] == {"type": "object", "properties": {}, "required": []}


def test_a_schema_changed_after_its_tool_was_made_is_sent_as_it_reads_now() -> None:
    own = schema("query", note="changed later")
    mine = copy.deepcopy(own)
    registry = Registry([make("first", own), make("second", mine)])  # one validator
    mine["properties"]["extra"] = {"type": "integer"}
    first, second = registry.tool_definitions("anthropic")
    assert first["input_schema"] == own
    assert second["input_schema"] == mine  # never the other tool's schema


def test_one_tool_that_cannot_be_strict_warns_once_each_even_when_its_schema_is_shared(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = Registry([make("a", CANNOT_BE_STRICT), make("b", copy.deepcopy(CANNOT_BE_STRICT))])
    with caplog.at_level("WARNING", logger="nous_tools"):
        for _ in range(2):
            definitions = registry.tool_definitions("openai", strict=True)
            registry.tool_definitions("responses", strict=True)
    assert [d["function"]["strict"] for d in definitions] == [False, False]
    warned = sorted(
        r.getMessage()[:8] for r in caplog.records if "cannot be made strict" in r.getMessage()
    )
    assert warned == ["Tool 'a'", "Tool 'b'"]


# -- any sequence of changes ---------------------------------------------------------------

NAMES = ["alpha", "beta", "gamma", "delta", "omega"]
#: Each name in several versions: one shared schema object, a copy that reads the
#: same, a schema of its own, none, one that cannot be strict, and "deny".
POOL = [
    variant
    for name in NAMES
    for variant in (
        make(name, SHARED),
        make(name, copy.deepcopy(SHARED), description=f"{name}, a copy"),
        make(name, schema("city", note=name), description=f"{name}, its own"),
        make(name, None, description=f"{name}, no parameters"),
        make(name, CANNOT_BE_STRICT, description=f"{name}, not strict"),
        make(name, SHARED, approval="deny"),
    )
]
#: More tools than the changes a call patches in.
BULK = [make(f"bulk_{i:03d}", SHARED) for i in range(80)]

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("register"), st.integers(0, len(POOL) - 1)),
        st.tuples(st.just("unregister"), st.integers(0, len(NAMES) - 1)),
        st.tuples(st.just("ask"), st.integers(0, len(PAIRS) - 1)),
        st.tuples(st.just("bulk"), st.integers(0, 1)),
    ),
    max_size=30,
)


@given(steps=STEPS)
def test_definitions_after_any_changes_equal_a_fresh_registrys(
    steps: list[tuple[str, int]],
) -> None:
    registry = Registry([POOL[0], POOL[-1]])
    for operation, value in steps:
        if operation == "register":
            registry.register(POOL[value])
        elif operation == "unregister":
            registry.unregister(NAMES[value])
        elif operation == "bulk":
            for one in BULK:
                registry.register(one) if value else registry.unregister(one.name)
        else:
            provider, strict = PAIRS[value]
            got = registry.tool_definitions(provider, strict=strict)
            assert got == fresh(registry, provider, strict)
            got.clear()  # the caller's list: changing it changes nothing kept
    for provider, strict in PAIRS:
        assert registry.tool_definitions(provider, strict=strict) == fresh(
            registry, provider, strict
        )
