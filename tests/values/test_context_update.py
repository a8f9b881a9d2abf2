"""ContextUpdate: ordered operations on deps, applied without mutating anything."""

from __future__ import annotations

import copy
import logging
import types
import typing as t

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nous_tools.context_update import PROTECTED_KEYS, ContextUpdate, Operation
from nous_tools.run_context import RunContext

# --- the four operations ---------------------------------------------------------------


def test_set_replaces_the_value() -> None:
    assert ContextUpdate().set("k", 1).apply({"k": 0, "other": 2}) == {"k": 1, "other": 2}


def test_set_then_append_extends_the_set_value() -> None:
    assert ContextUpdate().set("k", 1).append("k", 2).apply({}) == {"k": [1, 2]}


def test_set_after_append_wins() -> None:
    update = ContextUpdate().append("k", 1).append("k", 2).set("k", "final")
    assert update.apply({"k": [0]}) == {"k": "final"}


def test_append_after_set_list_does_not_mutate_the_set_value() -> None:
    given_list = [1]
    deps = ContextUpdate().set("k", given_list).append("k", 2).apply({})
    assert deps == {"k": [1, 2]}
    assert given_list == [1]


def test_delete_resets_so_the_next_append_starts_a_new_list() -> None:
    update = ContextUpdate().append("k", "a").delete("k").append("k", "x")
    assert update.apply({"k": ["old"]}) == {"k": ["x"]}


def test_append_to_a_missing_or_none_key_gives_a_one_item_list() -> None:
    update = ContextUpdate().append("missing", 1).append("none", 2)
    assert update.apply({"none": None}) == {"missing": [1], "none": [2]}


def test_append_to_a_non_list_value_wraps_it() -> None:
    update = ContextUpdate().append("s", "b").append("d", 2)
    assert update.apply({"s": "a", "d": {"x": 1}}) == {"s": ["a", "b"], "d": [{"x": 1}, 2]}


def test_append_to_a_tuple_extends_it_into_a_list() -> None:
    assert ContextUpdate().append("k", 3).apply({"k": (1, 2)}) == {"k": [1, 2, 3]}


def test_appending_a_list_adds_it_as_one_item() -> None:
    assert ContextUpdate().append("k", [2, 3]).apply({"k": [1]}) == {"k": [1, [2, 3]]}


def test_two_thousand_appends_keep_their_order() -> None:
    update = ContextUpdate()
    for i in range(2000):
        update = update.append("log", i)
    deps = update.apply({"log": [-1]})
    assert deps["log"] == list(range(-1, 2000))
    assert len(update) == 2000


def test_delete_of_a_missing_key_is_not_an_error() -> None:
    assert ContextUpdate().delete("nope").apply({"a": 1}) == {"a": 1}


def test_deep_merge_merges_nested_mappings_and_replaces_non_mappings() -> None:
    deps = {
        "cfg": {
            "ui": {"theme": "light", "font": 12},
            "tags": ["a"],
            "limit": {"max": 5},
            "keep": 1,
        }
    }
    update = ContextUpdate().merge(
        "cfg", {"ui": {"theme": "dark"}, "tags": ["b"], "limit": 10, "new": {"x": 1}}
    )
    assert update.apply(deps) == {
        "cfg": {
            "ui": {"theme": "dark", "font": 12},
            "tags": ["b"],
            "limit": 10,
            "keep": 1,
            "new": {"x": 1},
        }
    }


def test_merge_of_a_mapping_over_a_non_mapping_replaces_it() -> None:
    update = ContextUpdate().merge("cfg", {"ui": {"theme": "dark"}})
    assert update.apply({"cfg": {"ui": "plain"}}) == {"cfg": {"ui": {"theme": "dark"}}}
    assert update.apply({"cfg": 3}) == {"cfg": {"ui": {"theme": "dark"}}}


def test_merge_on_a_missing_key_counts_it_as_empty() -> None:
    assert ContextUpdate().merge("cfg", {"a": {"b": 1}}).apply({}) == {"cfg": {"a": {"b": 1}}}


def test_merge_on_a_none_value_replaces_it() -> None:
    assert ContextUpdate().merge("cfg", {"a": 1}).apply({"cfg": None}) == {"cfg": {"a": 1}}


def test_merge_accepts_any_mapping_and_produces_dicts() -> None:
    proxy = types.MappingProxyType({"a": types.MappingProxyType({"b": 1})})
    deps = ContextUpdate().merge("cfg", proxy).apply(types.MappingProxyType({"cfg": {}}))
    assert type(deps) is dict
    assert type(deps["cfg"]) is dict
    assert type(deps["cfg"]["a"]) is dict
    assert deps == {"cfg": {"a": {"b": 1}}}


# --- nothing is mutated, nothing is aliased ------------------------------------------


def test_apply_never_mutates_the_input_deps() -> None:
    deps = {
        "list": [1, 2],
        "cfg": {"ui": {"theme": "light"}, "n": 1},
        "gone": {"x": [1]},
        "tuple": (1,),
        "scalar": "s",
    }
    snapshot = copy.deepcopy(deps)
    update = (
        ContextUpdate()
        .append("list", 3)
        .append("list", 4)
        .merge("cfg", {"ui": {"theme": "dark", "font": 9}})
        .delete("gone")
        .append("tuple", 2)
        .set("scalar", "t")
        .append("scalar", "u")
    )
    result = update.apply(deps)
    assert deps == snapshot
    assert result is not deps
    assert result["list"] is not deps["list"]


def test_mutating_a_merged_result_does_not_reach_the_input_or_the_update() -> None:
    deps = {"cfg": {"ui": {"theme": "light"}, "untouched": {"a": 1}}}
    snapshot = copy.deepcopy(deps)
    update = ContextUpdate().merge("cfg", {"ui": {"font": 9}, "added": {"deep": {"z": 1}}})
    update_snapshot = copy.deepcopy(update.operations[0].value)

    result = update.apply(deps)
    result["cfg"]["ui"]["theme"] = "hacked"
    result["cfg"]["untouched"]["a"] = 2
    result["cfg"]["added"]["deep"]["z"] = 2

    assert deps == snapshot
    assert update.operations[0].value == update_snapshot
    assert update.apply(deps)["cfg"]["added"] == {"deep": {"z": 1}}


def test_a_mapping_merged_over_a_non_mapping_is_not_shared_with_the_update() -> None:
    update = ContextUpdate().merge("cfg", {"ui": {"theme": "dark"}})
    for deps in ({"cfg": 3}, {"cfg": {"ui": "plain"}}):
        result = update.apply(deps)
        result["cfg"]["ui"]["theme"] = "hacked"
        assert update.apply(deps) == {"cfg": {"ui": {"theme": "dark"}}}
        assert update.operations[0].value == {"ui": {"theme": "dark"}}


def test_changing_the_callers_mapping_after_merge_does_not_change_the_update() -> None:
    mapping: dict[str, t.Any] = {"ui": {"theme": "dark"}}
    update = ContextUpdate().merge("cfg", mapping)
    mapping["ui"]["theme"] = "changed"
    mapping["extra"] = 1
    assert update.apply({}) == {"cfg": {"ui": {"theme": "dark"}}}


def test_appending_to_a_result_list_does_not_reach_the_input() -> None:
    deps = {"log": ["a"]}
    result = ContextUpdate().append("log", "b").apply(deps)
    result["log"].append("c")
    assert deps == {"log": ["a"]}


def test_none_deps_count_as_empty() -> None:
    assert ContextUpdate().apply(None) == {}
    assert ContextUpdate().set("a", 1).append("b", 2).apply(None) == {"a": 1, "b": [2]}


def test_apply_always_returns_a_new_dict() -> None:
    deps = {"a": 1}
    result = ContextUpdate().apply(deps)
    assert result == deps
    assert result is not deps
    assert type(result) is dict


def test_apply_refuses_deps_that_are_not_a_mapping() -> None:
    @attrs.frozen
    class Deps:
        a: int = 1

    with pytest.raises(TypeError, match="mapping or None, got Deps"):
        ContextUpdate().set("a", 2).apply(Deps())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got list"):
        ContextUpdate().apply([("a", 1)])  # type: ignore[arg-type]


# --- protected keys ----------------------------------------------------------------------


def test_protected_keys_are_the_five_documented_ones() -> None:
    assert (
        frozenset(
            {"approval_handler", "approval_gated", "workspace_root", "sandbox", "hook_registry"}
        )
        == PROTECTED_KEYS
    )


@pytest.mark.parametrize("key", sorted(PROTECTED_KEYS))
def test_operations_on_a_protected_key_are_dropped_with_a_warning(
    key: str, caplog: pytest.LogCaptureFixture
) -> None:
    deps = {key: "original", "other": 1}
    update = (
        ContextUpdate()
        .set(key, "granted")
        .merge(key, {"x": 1})
        .append(key, "more")
        .delete(key)
        .set("other", 2)
    )
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        result = update.apply(deps)

    assert result == {key: "original", "other": 2}
    dropped = [r for r in caplog.records if r.name == "nous_tools"]
    assert [r.levelno for r in dropped] == [logging.WARNING] * 4
    assert {r.getMessage() for r in dropped} == {
        f"ContextUpdate: dropped operation on protected key '{key}'"
    }


@pytest.mark.parametrize("key", sorted(PROTECTED_KEYS))
def test_a_protected_key_missing_from_deps_is_not_created(key: str) -> None:
    assert ContextUpdate().set(key, True).append(key, 1).merge(key, {}).apply(None) == {}


def test_a_tool_cannot_grant_itself_approval_through_the_run_context(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def handler(request: object) -> str:
        return "reject"

    ctx = RunContext.new({"workspace_root": "/safe"}, approval_handler=handler)
    update = (
        ContextUpdate()
        .set("approval_gated", True)
        .set("approval_handler", lambda request: "approve")
        .set("workspace_root", "/")
        .set("sandbox", "danger_full_access")
        .set("hook_registry", {})
        .set("note", "hi")
    )
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        new_ctx = update.apply_to_run_context(ctx)

    assert new_ctx.deps == {"workspace_root": "/safe", "note": "hi"}
    assert new_ctx.approval_gated is False
    assert new_ctx.approval_handler is handler
    assert new_ctx.sandbox is None
    assert len([r for r in caplog.records if "protected key" in r.getMessage()]) == 5


def test_an_operation_on_a_protected_key_is_kept_until_applied() -> None:
    update = ContextUpdate().set("approval_gated", True)
    assert update.operations == (Operation("set", "approval_gated", True),)


# --- apply_to_run_context ----------------------------------------------------------------


def test_apply_to_run_context_replaces_only_deps() -> None:
    def handler(request: object) -> str:
        return "approve"

    ctx = RunContext.new({"n": 1}, retry=2, approval_handler=handler, approval_gated=True)
    ctx = attrs.evolve(ctx, deadline=123.0)
    new_ctx = ContextUpdate().set("n", 2).apply_to_run_context(ctx)

    assert new_ctx is not ctx
    assert new_ctx.deps == {"n": 2}
    assert ctx.deps == {"n": 1}
    for name in ("retry", "usage", "approval_handler", "approval_gated", "sandbox", "deadline"):
        assert getattr(new_ctx, name) is getattr(ctx, name), name
    assert new_ctx.cancelled is ctx.cancelled


def test_apply_to_run_context_with_none_deps_gives_a_dict() -> None:
    new_ctx = ContextUpdate().append("a", 1).apply_to_run_context(RunContext.new())
    assert new_ctx.deps == {"a": [1]}


def test_an_empty_update_returns_the_context_itself() -> None:
    ctx = RunContext.new(object())
    assert ContextUpdate().apply_to_run_context(ctx) is ctx


def test_apply_to_run_context_refuses_a_non_context() -> None:
    with pytest.raises(TypeError, match="expected a RunContext, got dict"):
        ContextUpdate().set("a", 1).apply_to_run_context({})  # type: ignore[arg-type]


# --- building -----------------------------------------------------------------------------


def test_new_and_the_bare_constructor_are_both_empty() -> None:
    assert ContextUpdate.new() == ContextUpdate()
    assert ContextUpdate().is_empty()
    assert len(ContextUpdate()) == 0
    assert not ContextUpdate()


def test_builders_record_operations_in_order() -> None:
    update = ContextUpdate().set("a", 1).merge("b", {"c": 2}).append("d", 3).delete("e")
    assert update.operations == (
        Operation("set", "a", 1),
        Operation("merge", "b", {"c": 2}),
        Operation("append", "d", 3),
        Operation("delete", "e"),
    )
    assert list(update) == list(update.operations)
    assert len(update) == 4
    assert not update.is_empty()
    assert update


def test_builders_leave_the_base_update_unchanged() -> None:
    base = ContextUpdate().set("a", 1)
    with_append = base.append("b", 2)
    with_delete = base.delete("a")

    assert base.operations == (Operation("set", "a", 1),)
    assert len(with_append) == 2
    assert len(with_delete) == 2
    assert with_append.apply({}) == {"a": 1, "b": [2]}
    assert with_delete.apply({}) == {}


def test_updates_are_frozen() -> None:
    update = ContextUpdate().set("a", 1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        update.operations = ()  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        update.operations[0].key = "b"  # type: ignore[misc]


@pytest.mark.parametrize(
    "build",
    [
        lambda u: u.set(1, "v"),
        lambda u: u.merge(None, {}),
        lambda u: u.append(b"k", 1),
        lambda u: u.delete(("k",)),
    ],
    ids=["set", "merge", "append", "delete"],
)
def test_a_non_str_key_is_refused(build: t.Callable[[ContextUpdate], object]) -> None:
    with pytest.raises(TypeError, match="keys must be str"):
        build(ContextUpdate())


@pytest.mark.parametrize("value", [[("a", 1)], "abc", 3, None])
def test_merge_with_a_non_mapping_is_refused(value: object) -> None:
    with pytest.raises(TypeError, match="needs a mapping for key 'k'"):
        ContextUpdate().merge("k", value)  # type: ignore[arg-type]


def test_operations_are_checked_when_built_directly() -> None:
    with pytest.raises(ValueError, match="must be one of append, delete, merge, set"):
        Operation("update", "k", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keys must be str"):
        Operation("set", 1, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a mapping"):
        Operation("merge", "k", [1])
    with pytest.raises(TypeError, match="must be Operation values"):
        ContextUpdate(operations=(("set", "k", 1),))  # type: ignore[arg-type]


def test_an_update_built_from_a_list_of_operations_holds_a_tuple() -> None:
    update = ContextUpdate(operations=[Operation("set", "k", 1)])
    assert update.operations == (Operation("set", "k", 1),)
    assert update.apply({}) == {"k": 1}


def test_then_applies_updates_one_after_another() -> None:
    first = ContextUpdate().set("k", 1)
    second = ContextUpdate().append("k", 2)
    assert first.then(second).apply({}) == {"k": [1, 2]}
    assert second.then(first).apply({}) == {"k": 1}
    assert first.then(None, second, second).apply({}) == {"k": [1, 2, 2]}
    assert len(first) == 1


def test_merge_updates_concatenates_in_order_and_skips_none() -> None:
    updates = [ContextUpdate().append("k", i) for i in range(3)]
    combined = ContextUpdate.merge_updates(updates[0], None, updates[1], updates[2])
    assert combined.apply({}) == {"k": [0, 1, 2]}
    assert ContextUpdate.merge_updates() == ContextUpdate()


def test_merge_updates_refuses_something_that_is_not_an_update() -> None:
    with pytest.raises(TypeError, match="can only combine ContextUpdates, got dict"):
        ContextUpdate.merge_updates(ContextUpdate(), {"k": 1})  # type: ignore[arg-type]


def test_applying_an_update_twice_gives_equal_independent_results() -> None:
    update = ContextUpdate().append("log", "x").merge("cfg", {"a": {"b": 1}})
    first = update.apply({})
    first["log"].append("mutated")
    first["cfg"]["a"]["b"] = 2
    assert update.apply({}) == {"log": ["x"], "cfg": {"a": {"b": 1}}}


# --- against an independent reference model ---------------------------------------------

KEYS = ["a", "b", "c", "sandbox"]

json_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["", "x", "y"])
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
    ),
    max_leaves=8,
)
json_mappings = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=3)

operations = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(KEYS), json_values),
    st.tuples(st.just("merge"), st.sampled_from(KEYS), json_mappings),
    st.tuples(st.just("append"), st.sampled_from(KEYS), json_values),
    st.tuples(st.just("delete"), st.sampled_from(KEYS), st.none()),
)


def reference_merge(left: t.Any, right: t.Any) -> t.Any:
    if not (isinstance(left, dict) and isinstance(right, dict)):
        return copy.deepcopy(right)
    out = copy.deepcopy(left)
    for key, value in right.items():
        out[key] = reference_merge(out[key], value) if key in out else copy.deepcopy(value)
    return out


def reference_apply(
    steps: list[tuple[str, str, t.Any]], deps: dict[str, t.Any]
) -> dict[str, t.Any]:
    out = copy.deepcopy(deps)
    for kind, key, value in steps:
        if key in {
            "approval_handler",
            "approval_gated",
            "workspace_root",
            "sandbox",
            "hook_registry",
        }:
            continue
        if kind == "set":
            out[key] = copy.deepcopy(value)
        elif kind == "merge":
            out[key] = reference_merge(out.get(key, {}), value)
        elif kind == "append":
            current = out.get(key)
            if current is None:
                out[key] = [copy.deepcopy(value)]
            elif isinstance(current, list):
                out[key] = [*current, copy.deepcopy(value)]
            else:
                out[key] = [current, copy.deepcopy(value)]
        elif kind == "delete":
            out.pop(key, None)
    return out


def build(steps: list[tuple[str, str, t.Any]]) -> ContextUpdate:
    update = ContextUpdate()
    for kind, key, value in steps:
        if kind == "set":
            update = update.set(key, value)
        elif kind == "merge":
            update = update.merge(key, value)
        elif kind == "append":
            update = update.append(key, value)
        else:
            update = update.delete(key)
    return update


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(operations, max_size=12), deps=json_mappings)
def test_apply_matches_a_reference_model(
    steps: list[tuple[str, str, t.Any]], deps: dict[str, t.Any]
) -> None:
    snapshot = copy.deepcopy(deps)
    update = build(steps)
    update_snapshot = copy.deepcopy(update.operations)

    result = update.apply(deps)

    assert result == reference_apply(steps, snapshot)
    assert deps == snapshot
    assert update.operations == update_snapshot
