from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import types
import typing as t
import urllib.request

import jsonschema
import jsonschema.validators
import pytest
import referencing
import referencing.jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nous_tools.validation import (
    ArgumentValidator,
    ValidationFailure,
    _compile_fast,
    _compile_flat,
    _compile_native,
    _fast_path_blocker,
    _native_blocker,
    _passes,
    check_schema,
    compile_validator,
)

PERSON: dict[str, t.Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string"},
    },
    "required": ["name", "email"],
}

SEARCH: dict[str, t.Any] = {
    "type": "object",
    "properties": {
        "filter": {
            "type": "object",
            "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
            "required": ["min"],
        },
        "tags": {"type": "array", "items": {"type": "string"}},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                "required": ["name"],
            },
        },
    },
}

# A flat schema (the commonest tool schema) and one that needs the general engines.
FLAT: dict[str, t.Any] = {
    "type": "object",
    "properties": {
        "a": {"type": "string"},
        "b": {"type": "integer", "default": 3},
        "c": {"type": "boolean", "default": False},
    },
    "required": ["a"],
}
NESTED_WITH_DEFAULTS: dict[str, t.Any] = {
    "type": "object",
    "properties": {
        "q": {"type": "string", "minLength": 1},
        "opts": {
            "type": "object",
            "properties": {"limit": {"type": "integer", "default": 10}},
            "default": {"limit": 10},
        },
    },
    "required": ["q"],
}

RECURSIVE: dict[str, t.Any] = {
    "$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "properties": {"tree": {"$ref": "#/$defs/node"}},
}


def failure_of(schema: t.Mapping[str, t.Any], arguments: t.Any) -> ValidationFailure:
    return failure_of_with(ArgumentValidator(schema), arguments)


def failure_of_with(validator: ArgumentValidator, arguments: t.Any) -> ValidationFailure:
    failure = validator.validate(arguments)
    assert failure is not None
    return failure


def reference(schema: t.Mapping[str, t.Any]) -> t.Any:
    """Plain jsonschema, with any Mapping an object and a tuple an array."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    checker = cls.TYPE_CHECKER.redefine_many(
        {
            "object": lambda _, value: isinstance(value, t.Mapping),
            "array": lambda _, value: isinstance(value, (list, tuple)),
        }
    )
    return jsonschema.validators.extend(cls, type_checker=checker)(schema)  # type: ignore[no-untyped-call]


def snapshot(value: object) -> object:
    """A comparable picture of ``value`` that tells True from 1 and a tuple from a list."""
    if isinstance(value, t.Mapping):
        return (type(value), [(snapshot(k), snapshot(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value), [snapshot(item) for item in value])
    return (type(value), value)


# -- valid arguments ----------------------------------------------------------------


@pytest.mark.parametrize("schema", [FLAT, NESTED_WITH_DEFAULTS, PERSON, SEARCH])
def test_valid_arguments_return_none_and_are_left_untouched(
    schema: dict[str, t.Any],
) -> None:
    arguments: dict[str, t.Any] = {"a": "x", "q": "find", "name": "Ada", "email": "a@b.c"}
    if schema is NESTED_WITH_DEFAULTS:
        arguments["opts"] = {}
    before = copy.deepcopy(arguments)
    assert ArgumentValidator(schema).validate(arguments) is None
    assert arguments == before  # no default injected, nothing removed


def test_compile_validator_builds_an_argument_validator() -> None:
    validator = compile_validator(PERSON)
    assert isinstance(validator, ArgumentValidator)
    assert validator.validate({"name": "Ada", "email": "a@b.c"}) is None


def test_changing_the_schema_after_compiling_changes_nothing() -> None:
    schema = copy.deepcopy(PERSON)
    validator = ArgumentValidator(schema)
    schema["required"].append("age")
    schema["properties"]["name"]["type"] = "integer"
    assert validator.validate({"name": "Ada", "email": "a@b.c"}) is None


def test_empty_object_schema_accepts_any_mapping() -> None:
    validator = ArgumentValidator({"type": "object", "properties": {}})
    assert validator.validate({}) is None
    assert validator.validate({"anything": [1, {"x": None}]}) is None
    assert validator.validate(types.MappingProxyType({"k": 1})) is None


def test_any_mapping_is_an_object_and_a_tuple_is_an_array() -> None:
    arguments = types.MappingProxyType({"tags": ("a", "b"), "filter": {"min": 1}})
    assert ArgumentValidator(SEARCH).validate(arguments) is None


def test_a_nested_mapping_that_is_not_a_dict_is_still_examined() -> None:
    schema = {"properties": {"f": {"properties": {"min": {"type": "integer"}}}}}
    failure = failure_of(schema, {"f": types.MappingProxyType({"min": "low"})})
    assert failure.original_error == ("type_mismatch", [("f.min", "integer", "string")])


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"not": {"pattern": "a$"}}, "xa\n"),  # Python's "$" matches before a final newline
        ({"multipleOf": 0.1}, 0.3),  # jsonschema divides in float
        ({"multipleOf": 3}, 1e308),
        ({"oneOf": [{"minimum": 5}, {"type": "boolean"}]}, True),
    ],
)
def test_edge_cases_are_answered_as_jsonschema_answers(
    schema: dict[str, t.Any], value: object
) -> None:
    full = {"type": "object", "properties": {"v": schema}}
    got = ArgumentValidator(full).validate({"v": value}) is None
    assert got == reference(full).is_valid({"v": value})


@pytest.mark.parametrize("name", ["hostname", "regex", "json-pointer", "made-up"])
def test_formats_outside_the_checked_list_stay_annotations(name: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": name}}}
    assert ArgumentValidator(schema).validate({"v": "\\ not (valid ["}) is None


# -- missing required fields ----------------------------------------------------------


def test_a_missing_required_field_is_named() -> None:
    failure = failure_of(PERSON, {"email": "a@b.c"})
    assert failure.message == "Missing required fields: name"
    assert failure.original_error == ("missing_required", ["name"])


def test_every_missing_required_field_is_listed_in_schema_order() -> None:
    failure = failure_of(PERSON, {})
    assert failure.message == "Missing required fields: name, email"
    assert failure.original_error == ("missing_required", ["name", "email"])


def test_nested_missing_fields_are_dotted_paths() -> None:
    failure = failure_of(SEARCH, {"filter": {}, "items": [{"name": "x"}, {"id": 2}]})
    assert failure.message == "Missing required fields: filter.min, items[1].name"
    assert failure.original_error == ("missing_required", ["filter.min", "items[1].name"])


def test_a_field_required_twice_is_reported_once() -> None:
    schema = {"allOf": [{"required": ["name"]}, {"required": ["name"]}], "required": ["name"]}
    assert failure_of(schema, {}).original_error == ("missing_required", ["name"])


# -- type mismatches --------------------------------------------------------------------


def test_type_mismatch_is_worded_as_nous_does() -> None:
    failure = failure_of(PERSON, {"name": "Ada", "email": "a@b.c", "age": "old"})
    assert failure.message == "Type mismatch: age: expected integer, got string"
    assert failure.original_error == ("type_mismatch", [("age", "integer", "string")])


def test_several_type_mismatches_share_one_prefix() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
    }
    failure = failure_of(schema, {"b": None, "a": "1"})
    assert failure.message == (
        "Type mismatch: a: expected integer, got string, b: expected boolean, got null"
    )
    assert failure.original_error == (
        "type_mismatch",
        [("a", "integer", "string"), ("b", "boolean", "null")],
    )


def test_nested_type_mismatch_paths_use_dots_and_indices() -> None:
    failure = failure_of(
        SEARCH, {"filter": {"min": "low"}, "tags": ["a", 2], "items": [{"id": "x", "name": "n"}]}
    )
    assert failure.original_error == (
        "type_mismatch",
        [
            ("filter.min", "integer", "string"),
            ("items[0].id", "integer", "string"),
            ("tags[1]", "string", "integer"),
        ],
    )
    assert "filter.min: expected integer, got string" in failure.message
    assert "tags[1]: expected string, got integer" in failure.message


def test_array_indices_sort_as_numbers() -> None:
    arguments = {"tags": ["ok"] * 2 + [1] + ["ok"] * 7 + [2]}
    paths = [path for path, _, _ in failure_of(SEARCH, arguments).original_error[1]]
    assert paths == ["tags[2]", "tags[10]"]


def test_a_list_of_types_is_joined_with_or() -> None:
    schema = {"properties": {"n": {"type": ["integer", "null"]}}}
    failure = failure_of(schema, {"n": 1.5})
    assert failure.message == "Type mismatch: n: expected integer or null, got number"


@pytest.mark.parametrize(
    ("value", "actual"),
    [
        (True, "boolean"),
        (1, "integer"),
        (1.5, "number"),
        ("s", "string"),
        ([1], "array"),
        ((1,), "array"),
        ({"k": 1}, "object"),
        (None, "null"),
        (b"raw", "bytes"),
    ],
)
def test_actual_type_is_the_json_type_name_of_the_value(value: object, actual: str) -> None:
    schema = {"properties": {"x": {"type": "object" if actual != "object" else "string"}}}
    mismatch = failure_of(schema, {"x": value}).original_error
    assert mismatch == ("type_mismatch", [("x", mismatch[1][0][1], actual)])


@pytest.mark.parametrize("schema", [FLAT, {**FLAT, "properties": {**FLAT["properties"], "d": {}}}])
def test_a_bool_is_not_an_integer(schema: dict[str, t.Any]) -> None:
    failure = failure_of(schema, {"a": "x", "b": True})
    assert failure.original_error == ("type_mismatch", [("b", "integer", "boolean")])
    general = {"type": "object", "properties": {"b": {"type": "integer", "minimum": 0}}}
    assert failure_of(general, {"b": False}).original_error == (
        "type_mismatch",
        [("b", "integer", "boolean")],
    )


def test_true_is_not_one_even_in_an_enum() -> None:
    schema = {"properties": {"n": {"enum": [1, 2]}, "z": {"const": 0}}}
    failure = failure_of(schema, {"n": True, "z": False})
    assert failure.original_error == (
        "invalid",
        [("n", "True is not one of [1, 2]"), ("z", "0 was expected")],
    )


# -- other keywords -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "arguments", "expected"),
    [
        (
            {"properties": {"n": {"anyOf": [{"type": "integer"}, {"minLength": 3}]}}},
            {"n": "ab"},
            [("n", "'ab' is not valid under any of the given schemas")],
        ),
        (
            {"properties": {"unit": {"enum": ["c", "f"]}}},
            {"unit": "k"},
            [("unit", "'k' is not one of ['c', 'f']")],
        ),
        (
            {"properties": {"age": {"type": "integer", "minimum": 0}}},
            {"age": -1},
            [("age", "-1 is less than the minimum of 0")],
        ),
        (
            {"properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}}},
            {"code": "abc"},
            [("code", "'abc' does not match '^[A-Z]{3}$'")],
        ),
        (
            {"properties": {"a": {}}, "additionalProperties": False},
            {"a": 1, "b": 2},
            [("(root)", "unknown argument 'b' (expected: a)")],
        ),
    ],
    ids=["anyOf", "enum", "minimum", "pattern", "additionalProperties"],
)
def test_other_keywords_are_invalid_values_in_jsonschema_words(
    schema: dict[str, t.Any], arguments: dict[str, t.Any], expected: list[tuple[str, str]]
) -> None:
    failure = failure_of(schema, arguments)
    assert failure.original_error == ("invalid", expected)
    path, text = expected[0]
    assert failure.message == f"Invalid values: {path}: {text}"


def test_a_oneof_matched_twice_is_invalid_without_descending() -> None:
    schema = {"properties": {"one": {"oneOf": [{"type": "integer"}, {"minimum": 0}]}}}
    failure = failure_of(schema, {"one": 5})
    [(path, text)] = failure.original_error[1]
    assert (failure.original_error[0], path) == ("invalid", "one")
    assert text.startswith("5 is valid under each of")


def test_kinds_are_listed_missing_then_type_then_invalid() -> None:
    failure = failure_of(PERSON, {"age": -1, "email": 5})
    assert failure.message == (
        "Missing required fields: name; "
        "Type mismatch: email: expected string, got integer; "
        "Invalid values: age: -1 is less than the minimum of 0"
    )
    assert failure.original_error == ("missing_required", ["name"])


def test_original_error_is_the_first_kind_present() -> None:
    failure = failure_of(PERSON, {"name": 1, "email": "e", "age": -1})
    assert failure.original_error == ("type_mismatch", [("name", "string", "integer")])
    assert failure.message.endswith("; Invalid values: age: -1 is less than the minimum of 0")


def test_a_ref_into_defs_is_followed() -> None:
    schema = {
        "$defs": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"],
            }
        },
        "type": "object",
        "properties": {"path": {"type": "array", "items": {"$ref": "#/$defs/point"}}},
        "required": ["path"],
    }
    validator = ArgumentValidator(schema)
    assert validator.validate({"path": [{"x": 1, "y": 2.5}]}) is None
    failure = validator.validate({"path": [{"x": 1, "y": 2}, {"x": "1"}]})
    assert failure == ValidationFailure(
        "Missing required fields: path[1].y; Type mismatch: path[1].x: expected number, got string",
        ("missing_required", ["path[1].y"]),
    )


def test_keywords_beside_a_ref_are_applied() -> None:
    # Draft 2020-12 applies them; a draft 7 engine would ignore them.
    schema = {
        "$defs": {"word": {"type": "string"}},
        "properties": {"w": {"$ref": "#/$defs/word", "minLength": 3}},
    }
    assert failure_of(schema, {"w": "ab"}).original_error == (
        "invalid",
        [("w", "'ab' is too short")],
    )


def test_newer_keywords_are_applied() -> None:
    schema = {
        "properties": {
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
        },
        "dependentRequired": {"pair": ["label"]},
        "unevaluatedProperties": False,
    }
    failure = failure_of(schema, {"pair": ["a", "b"], "other": 1})
    assert failure.original_error == ("type_mismatch", [("pair[1]", "integer", "string")])
    assert "'label' is a dependency of 'pair'" in failure.message
    assert "Unevaluated properties are not allowed ('other' was unexpected)" in failure.message


def test_a_draft_7_schema_is_validated_by_draft_7_rules() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"pair": {"items": [{"type": "string"}, {"type": "integer"}]}},
    }
    validator = ArgumentValidator(schema)
    assert validator.validate({"pair": ["a", 1, None]}) is None
    assert validator.validate({"pair": ["a", "b"]}) is not None


def test_a_remote_ref_is_refused_at_construction_and_never_fetched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_network(*args: object, **kwargs: object) -> t.NoReturn:
        raise AssertionError("network access")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    schema = {"properties": {"x": {"$ref": "http://127.0.0.1:9/schema.json"}}}
    with pytest.raises(ValueError) as e:
        ArgumentValidator(schema)
    message = str(e.value)
    assert "remote schema ('http://127.0.0.1:9/schema.json' (at path properties.x.$ref))" in message
    assert "never fetched" in message
    assert "Tool(schema_registry=...)" in message


def test_a_ref_into_a_registry_schema_is_resolved_and_applied() -> None:
    uri = "https://example.com/money.json"
    money = {"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}
    registry = referencing.Registry().with_resource(
        uri, referencing.jsonschema.DRAFT202012.create_resource(money)
    )
    schema = {"properties": {"price": {"$ref": uri}}, "required": ["price"]}
    validator = ArgumentValidator(schema, registry=registry)
    assert validator.validate({"price": {"cents": 5}}) is None
    assert failure_of_with(validator, {"price": {"cents": "5"}}).original_error == (
        "type_mismatch",
        [("price.cents", "integer", "string")],
    )
    check_schema(schema, registry=registry)  # no error


def test_a_pointer_into_a_registry_schema_that_finds_nothing_is_refused() -> None:
    uri = "https://example.com/defs.json"
    registry = referencing.Registry().with_resource(
        uri, referencing.jsonschema.DRAFT202012.create_resource({"$defs": {"a": {}}})
    )
    with pytest.raises(ValueError, match="points to nothing"):
        ArgumentValidator({"properties": {"x": {"$ref": f"{uri}#/$defs/b"}}}, registry=registry)


def test_a_ref_to_an_embedded_id_is_local() -> None:
    schema = {
        "$defs": {"name": {"$id": "https://example.com/name", "type": "string"}},
        "properties": {"who": {"$ref": "https://example.com/name"}},
    }
    validator = ArgumentValidator(schema)
    assert validator.validate({"who": "Ada"}) is None
    assert validator.validate({"who": 1}) is not None


def test_a_schema_registry_that_is_not_a_registry_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"'schema_registry' must be a referencing.Registry"):
        ArgumentValidator({"type": "object"}, registry=t.cast(t.Any, {"a": {}}))


# -- schemas ------------------------------------------------------------------------


def test_check_schema_accepts_a_good_schema() -> None:
    check_schema(PERSON)
    check_schema(SEARCH)
    check_schema(types.MappingProxyType({"type": "object", "required": ("a",)}))


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "objekt"}, "unknown type 'objekt'"),
        ({"properties": 5}, "5 is not of type 'object' (at path properties)"),
        ({"properties": {"a": {"pattern": "("}}}, "(at path properties.a.pattern)"),
        ({"$ref": "#/$defs/missing"}, "'#/$defs/missing' points to nothing"),
    ],
)
def test_check_schema_rejects_an_invalid_schema_naming_parameters(
    schema: dict[str, t.Any], reason: str
) -> None:
    with pytest.raises(
        ValueError, match="Tool option 'parameters' is not a valid JSON Schema"
    ) as e:
        check_schema(schema)
    assert reason in str(e.value)
    with pytest.raises(ValueError, match="'parameters'"):
        ArgumentValidator(schema)


def test_check_schema_rejects_a_non_mapping_with_type_error() -> None:
    with pytest.raises(TypeError, match=r"'parameters'.*got list"):
        check_schema([{"type": "object"}])


# -- robustness -----------------------------------------------------------------------


def test_deep_nesting_gives_a_failure_not_a_recursion_error() -> None:
    deep: list[t.Any] = []
    inner = deep
    for _ in range(1000):
        inner.append([])
        inner = inner[0]
    failure = failure_of(RECURSIVE, {"tree": deep})
    assert failure == ValidationFailure(
        "Invalid values: (root): arguments nested too deeply to validate",
        ("invalid", [("(root)", "arguments nested too deeply to validate")]),
    )


def test_a_huge_value_gives_a_short_message() -> None:
    schema = {"properties": {"text": {"type": "string", "maxLength": 10}}}
    failure = failure_of(schema, {"text": "x" * 1_000_000})
    assert len(failure.message) < 300
    assert failure.message.startswith("Invalid values: text: 'xxx")
    assert failure.message.endswith("' is too long")


def test_a_flood_of_violations_is_listed_in_part_but_kept_whole() -> None:
    failure = failure_of(SEARCH, {"tags": list(range(500))})
    assert len(failure.original_error[1]) == 500
    assert failure.message.endswith(", ... and 450 more")


def test_an_unknown_argument_is_named_with_the_ones_the_tool_takes() -> None:
    greet = {"properties": {"name": {"type": "string"}}, "additionalProperties": False}
    assert failure_of(greet, {"name": "Ada", "nme": "x"}).message == (
        "Invalid values: (root): unknown argument 'nme' (expected: name)"
    )
    nested = {
        "properties": {
            "filter": {
                "properties": {"min": {}, "max": {}},
                "additionalProperties": False,
            }
        }
    }
    assert failure_of(nested, {"filter": {"mn": 1, "mx": 2}}).message == (
        "Invalid values: filter: unknown fields 'mn', 'mx' (expected: min, max)"
    )


def test_non_string_keys_do_not_raise() -> None:
    failure = failure_of({"additionalProperties": False}, {1: "one"})
    assert failure.original_error == (
        "invalid",
        [("(root)", "unknown argument 1 (this tool takes no arguments)")],
    )
    nested = {"properties": {"m": {"additionalProperties": {"type": "string"}}}}
    assert failure_of(nested, {"m": {2: 3}}).original_error == (
        "type_mismatch",
        [("m.2", "string", "integer")],
    )
    patterned = {"patternProperties": {"^a": {"type": "string"}}}
    assert ArgumentValidator(patterned).validate(t.cast(t.Any, {3: "x"})) is not None


def test_validate_does_not_raise_for_a_non_mapping() -> None:
    failure = ArgumentValidator(FLAT).validate(t.cast(t.Any, ["a"]))
    assert failure is not None
    assert failure.original_error == ("type_mismatch", [("(root)", "object", "array")])


# -- properties -----------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.sampled_from(["a", "b", "k", "min", "name", "id"]), inner, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "k", "min"]), inner, max_size=2).map(
            types.MappingProxyType
        )
    ),
    max_leaves=12,
)
argument_keys = st.sampled_from(
    ["a", "b", "c", "d", "q", "opts", "filter", "tags", "items", "n", "name", "email", "tree"]
)
arguments_strategy = st.dictionaries(argument_keys, json_values, max_size=5) | st.dictionaries(
    st.text(max_size=3) | st.integers(), json_values, max_size=3
)

CORPUS: list[dict[str, t.Any]] = [
    FLAT,
    {**FLAT, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"enum": ["x", None]}, "b": {"const": "k"}}},
    {"type": "object", "properties": {"a": {"type": ["number", "null"]}, "b": {}}},
    NESTED_WITH_DEFAULTS,
    PERSON,
    SEARCH,
    {"properties": {"a": {"enum": [1, True, 0.5, [1], {"k": False}]}, "b": {"const": [0]}}},
    {"properties": {"a": {"type": "array", "uniqueItems": True}}},
    {"properties": {"a": {"multipleOf": 0.5}, "b": {"exclusiveMaximum": 1, "minimum": -1}}},
    {"properties": {"a": {"pattern": "^x$"}, "b": {"maxLength": 2}}},
    {"patternProperties": {"^[ab]$": {"type": "integer"}}, "additionalProperties": False},
    {"properties": {"a": {"anyOf": [{"type": "string"}, {"type": "array", "minItems": 1}]}}},
    {"properties": {"a": {"if": {"type": "string"}, "then": {"minLength": 1}, "else": False}}},
    {"properties": {"a": {"contains": {"type": "integer"}}, "b": {"not": {"type": "null"}}}},
    {"properties": {"a": {"propertyNames": {"maxLength": 1}, "minProperties": 1}}},
    {"minProperties": 1, "maxProperties": 2, "dependencies": {"a": ["b"]}},
    {
        "$defs": {"t": {"type": ["array", "integer"], "items": {"$ref": "#/$defs/t"}}},
        "properties": {"a": {"$ref": "#/$defs/t"}, "b": {"$ref": "#/$defs/t", "maxItems": 1}},
    },
    {"properties": {"a": {"prefixItems": [{"type": "integer"}], "items": False}}},
    # Object keywords without "type" (a non-dict mapping must still be examined).
    {
        "properties": {
            "a": {"properties": {"k": {"type": "integer"}}, "required": ["k"]},
            "b": {"anyOf": [{"required": ["k"]}, {"type": "string"}]},
            "c": {"items": {"additionalProperties": {"type": "boolean"}}},
        }
    },
    # Where a stricter inner check would make a looser outer one.
    {"properties": {"a": {"not": {"pattern": "a$"}}, "b": {"oneOf": [{"minimum": 1}, {}]}}},
    RECURSIVE,
    {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "properties": {"a": {"type": "integer"}, "b": {"maximum": 1, "exclusiveMaximum": True}},
    },
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"s": {"type": "string"}},
        "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 1}},
    },
]
VALIDATORS = [ArgumentValidator(schema) for schema in CORPUS]


REFERENCES = [reference(schema) for schema in CORPUS]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(min_value=0, max_value=len(CORPUS) - 1), arguments=arguments_strategy)
def test_validate_never_raises_and_answers_like_jsonschema(
    index: int, arguments: dict[t.Any, t.Any]
) -> None:
    before = snapshot(arguments)
    result = VALIDATORS[index].validate(arguments)
    assert result is None or isinstance(result, ValidationFailure)
    assert snapshot(arguments) == before
    if all(isinstance(key, str) for key in arguments):
        assert (result is None) == REFERENCES[index].is_valid(arguments)


@settings(max_examples=200)
@given(arguments=st.dictionaries(st.text(max_size=5), json_values, max_size=6))
def test_every_failure_has_a_message_and_a_known_kind(arguments: dict[str, t.Any]) -> None:
    for validator in VALIDATORS:
        failure = validator.validate(arguments)
        if failure is not None:
            assert failure.message
            assert failure.original_error[0] in ("missing_required", "type_mismatch", "invalid")
            assert failure.original_error[1]


# -- the fast path is taken where it is safe --------------------------------------------


@pytest.mark.parametrize(
    ("schema", "engine"),
    [
        (FLAT, "jsonschema-rs"),
        (PERSON, "jsonschema-rs"),
        (SEARCH, "jsonschema-rs"),
        (NESTED_WITH_DEFAULTS, "jsonschema-rs"),
        (RECURSIVE, "fastjsonschema"),
        (
            {
                "$schema": "http://json-schema.org/draft-06/schema#",
                "properties": {"b": {"const": 1}},
            },
            "jsonschema-rs",
        ),
        ({"properties": {"a": {"type": "array", "uniqueItems": True}, "b": {}}}, "fastjsonschema"),
        ({"type": "object", "properties": {}}, "mapping"),
    ],
    ids=["flat", "person", "search", "defaults", "recursive", "const", "unique", "open"],
)
def test_common_schemas_get_a_quick_check(schema: dict[str, t.Any], engine: str) -> None:
    assert ArgumentValidator(schema).engine == engine


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"a": {"not": {"type": "string"}}}},
        {"properties": {"a": {"oneOf": [{"type": "string"}, {"minLength": 1}]}}},
        {"properties": {"a": {"if": {"type": "string"}, "then": {"minLength": 1}}}},
        {"properties": {"a": {"type": "array", "uniqueItems": True}}},
        {"properties": {"a": {"type": "number", "multipleOf": 0.1}}},
        RECURSIVE,
        {"properties": {"a": {"$ref": "#"}}},
        {"properties": {"a": {"type": "string", "pattern": "^\\D+$"}}},
        {"properties": {"a": {"type": "string", "pattern": "^[^\\d]+$"}}},
        {"properties": {"a": {"type": "string", "pattern": "^\\p{L}+$"}}},
        {"properties": {"a": {"type": "string", "pattern": "(?i)^a$"}}},
        {"patternProperties": {"^\\d+$": {"type": "integer"}}},
        {"patternProperties": {"^a.$": {"type": "integer"}}},
        {"$schema": "http://json-schema.org/draft-03/schema#", "properties": {"a": {"minimum": 1}}},
    ],
    ids=[
        "not",
        "oneOf",
        "if",
        "uniqueItems",
        "multipleOf-fraction",
        "ref-cycle",
        "ref-to-root",
        "pattern-D",
        "pattern-negated-d",
        "pattern-property-class",
        "pattern-flags",
        "patternProperties-d",
        "patternProperties-dot",
        "draft-3",
    ],
)
def test_schemas_jsonschema_rs_could_misread_fall_back_at_construction(
    schema: dict[str, t.Any],
) -> None:
    assert ArgumentValidator(schema).engine != "jsonschema-rs"


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"a": {"type": "string", "pattern": "^[a-z]{2}\\d*$"}}},
        {"properties": {"a": {"type": "string", "pattern": "^(?:x|y)+\\.\\w$"}}},
        {"patternProperties": {"^x-[a-z]+": {"type": "integer"}}},
        {"properties": {"a": {"type": "integer", "multipleOf": 3}}},
        {"$defs": {"d": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/d"}}},
        {"properties": {"a": {"prefixItems": [{"type": "integer"}], "items": False}}},
        {"properties": {"when": {"type": "string", "format": "date-time"}}},
    ],
    ids=[
        "pattern",
        "pattern-group",
        "patternProperties",
        "multipleOf-int",
        "ref",
        "prefix",
        "format",
    ],
)
def test_schemas_jsonschema_rs_reads_as_jsonschema_does_use_it(schema: dict[str, t.Any]) -> None:
    assert ArgumentValidator(schema).engine == "jsonschema-rs"


def test_a_registry_keeps_jsonschema_rs_out() -> None:
    other = referencing.jsonschema.DRAFT202012.create_resource({"type": "string"})
    registry = referencing.Registry().with_resource("https://example.com/s.json", other)
    schema = {"properties": {"a": {"$ref": "https://example.com/s.json"}, "b": {"type": "integer"}}}
    validator = ArgumentValidator(schema, registry=registry)
    assert validator.engine != "jsonschema-rs"
    assert validator.validate({"a": "x", "b": 1}) is None
    assert validator.validate({"a": 1}) is not None


@pytest.mark.parametrize(
    "schema",
    [
        CORPUS[18],  # prefixItems: not in fastjsonschema
        {"$defs": {"s": {}}, "properties": {"a": {"$ref": "#/$defs/s", "minimum": 1}}},
        {"$id": "https://example.com/s", "properties": {"a": {"type": "string"}, "b": {}}},
        {"properties": {"a": {"$ref": "https://example.com/other.json"}, "b": {}}},
        {"$schema": "http://json-schema.org/draft-03/schema#", "properties": {"a": {"minimum": 1}}},
        {"properties": {"a": {"not": {"type": "string"}}}},
        {"properties": {"a": {"oneOf": [{"type": "string"}, {"minLength": 1}]}}},
        {"properties": {"a": {"type": "number", "multipleOf": 0.1}}},
    ],
    ids=[
        "prefixItems",
        "ref-siblings",
        "id",
        "remote-ref",
        "draft-3",
        "not",
        "oneOf",
        "multipleOf",
    ],
)
def test_schemas_the_compiled_path_would_misread_never_use_fastjsonschema(
    schema: dict[str, t.Any],
) -> None:
    other = referencing.jsonschema.DRAFT202012.create_resource({"type": "string"})
    registry = referencing.Registry().with_resource("https://example.com/other.json", other)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    assert _fast_path_blocker(schema, cls) is not None
    assert ArgumentValidator(schema, registry=registry).engine != "fastjsonschema"


# -- formats (issue 14) -------------------------------------------------------------

FORMATTED: dict[str, t.Any] = {
    "type": "object",
    "properties": {
        name.replace("-", "_"): {"type": "string", "format": name}
        for name in (
            "date-time",
            "date",
            "time",
            "duration",
            "uuid",
            "email",
            "uri",
            "ipv4",
            "ipv6",
        )
    },
}


@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [
        ("date_time", "2024-05-01T09:30:00Z", "2024-05-01"),
        ("date_time", "2024-05-01 09:30:00.123+02:00", "2024-13-01T09:30:00Z"),
        ("date_time", "2024-05-01T09:30", "yesterday"),
        ("date", "2024-02-29", "2023-02-29"),
        ("time", "09:30:00", "25:00"),
        ("time", "23:59:59.999999-05:00", "9:30"),
        ("duration", "P1Y2M3DT4H5M6.5S", "P"),
        ("duration", "PT0S", "1 hour"),
        ("uuid", "12345678-1234-5678-1234-567812345678", "12345678123456781234567812345678"),
        ("email", "ada@example.com", "ada.example.com"),
        ("uri", "https://example.com/a?b=c", "not a uri"),
        ("ipv4", "192.168.0.1", "256.0.0.1"),
        ("ipv6", "2001:db8::1", "2001:db8::g"),
    ],
)
def test_listed_formats_are_checked(field: str, good: str, bad: str) -> None:
    validator = ArgumentValidator(FORMATTED)
    assert validator.validate({field: good}) is None
    failure = validator.validate({field: bad})
    assert failure is not None
    expected = FORMATTED["properties"][field]["format"]
    assert failure.message == f"Type mismatch: {field}: expected {expected}, got string"


def test_a_format_applies_to_strings_only() -> None:
    schema = {"properties": {"when": {"format": "date"}}}
    assert ArgumentValidator(schema).validate({"when": 20240501}) is None


def quick_check(schema: dict[str, t.Any], engine: str) -> t.Callable[[t.Any], bool]:
    """The quick check ``engine`` would give ``schema`` (whichever one construction picks)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if engine == "flat":
        found = _compile_flat(schema)
    elif engine == "fastjsonschema":
        compiled = _compile_fast(schema, modern=True)
        found = _passes(compiled) if compiled is not None else None
    else:
        found = _compile_native(schema, cls)
    assert found is not None
    check = found

    def answer(arguments: t.Any) -> bool:
        try:
            return check(arguments)
        except Exception:  # a quick check may raise: "not sure"
            return False

    return answer


FORMAT_SCHEMAS = [
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}},
    {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string", "format": "uuid"}},
        },
    },
    {
        "$defs": {"d": {"type": "string", "format": "date"}},
        "properties": {"when": {"$ref": "#/$defs/d"}, "tags": {"items": {"$ref": "#/$defs/d"}}},
    },
]


@pytest.mark.parametrize(
    ("schema", "engine"),
    [
        (FORMAT_SCHEMAS[0], "flat"),
        (FORMAT_SCHEMAS[0], "jsonschema-rs"),
        (FORMAT_SCHEMAS[1], "fastjsonschema"),
        (FORMAT_SCHEMAS[1], "jsonschema-rs"),
        (FORMAT_SCHEMAS[2], "fastjsonschema"),
        (FORMAT_SCHEMAS[2], "jsonschema-rs"),
    ],
    ids=["flat", "flat-rs", "fast", "fast-rs", "ref", "ref-rs"],
)
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    when=st.one_of(
        st.datetimes().map(lambda d: d.isoformat()),
        st.dates().map(str),
        st.text(alphabet="0123456789-:TZ+. ", max_size=26),
        st.integers(),
    ),
    tags=st.lists(st.uuids().map(str) | st.dates().map(str) | st.text(max_size=4), max_size=3),
)
def test_every_quick_check_reads_formats_as_jsonschema_does(
    schema: dict[str, t.Any], engine: str, when: object, tags: list[str]
) -> None:
    check = quick_check(schema, engine)
    arguments = {"when": when, "tags": tags}
    assert check(arguments) == reference_with_formats(schema).is_valid(arguments)


def reference_with_formats(schema: dict[str, t.Any]) -> t.Any:
    """:func:`reference` (plain jsonschema, the schema's own draft) with the formats
    validation checks."""
    from nous_tools.validation import _FORMAT_CHECKER

    return type(reference(schema))(schema, format_checker=_FORMAT_CHECKER)


# -- patterns in the ECMA-262 dialect (issue 14) -------------------------------------

ZOD_LIKE: dict[str, t.Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "pattern": r"^\p{L}[\p{L}\p{N} ]*$"}},
    "patternProperties": {r"^x-\p{Lu}": {"type": "integer"}},
    "additionalProperties": False,
}


def test_unicode_property_classes_in_patterns_load_and_validate() -> None:
    check_schema(ZOD_LIKE)
    validator = ArgumentValidator(ZOD_LIKE)
    assert validator.validate({"name": "Zoë 2", "x-Ä": 1}) is None
    assert failure_of(ZOD_LIKE, {"name": "2 Zoë"}).original_error == (
        "invalid",
        [("name", r"'2 Zoë' does not match '^\\p{L}[\\p{L}\\p{N} ]*$'")],
    )
    assert failure_of(ZOD_LIKE, {"x-Ä": "one"}).original_error == (
        "type_mismatch",
        [("x-Ä", "integer", "string")],
    )
    assert failure_of(ZOD_LIKE, {"x-a": 1}).original_error[0] == "invalid"  # not \p{Lu}


def test_a_pattern_neither_dialect_reads_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"'\(unclosed' is not a regular expression"):
        check_schema({"properties": {"a": {"pattern": "(unclosed"}}})


def test_unevaluated_properties_beside_an_ecma_only_pattern_is_refused() -> None:
    schema = {"patternProperties": {r"^\p{L}": {}}, "unevaluatedProperties": False}
    with pytest.raises(ValueError, match="unevaluatedProperties"):
        check_schema(schema)


# -- every metaschema violation, in a fixed order (issue 14) -------------------------

MANY_WRONG: dict[str, t.Any] = {
    "type": "objekt",
    "required": "name",
    "properties": {
        "b": {"type": "integer", "minimum": "zero"},
        "a": {"maxLength": -1, "items": 5},
    },
}


def test_every_metaschema_violation_is_listed_sorted_by_path() -> None:
    with pytest.raises(ValueError) as e:
        check_schema(MANY_WRONG)
    message = str(e.value)
    assert message.startswith("Tool option 'parameters' is not a valid JSON Schema: ")
    reasons = message.split(": ", 1)[1].split("; ")
    assert [reason.rsplit(" (at path ", 1)[1] for reason in reasons] == [
        "properties.a.items)",
        "properties.a.maxLength)",
        "properties.b.minimum)",
        "required)",
        "type)",
    ]
    assert "unknown type 'objekt'" in message


def test_the_listing_is_the_same_whatever_the_hash_seed() -> None:
    program = (
        "import json, sys\n"
        "from nous_tools.validation import check_schema\n"
        "try:\n"
        f"    check_schema(json.loads({json.dumps(json.dumps(MANY_WRONG))}))\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", program],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("0", "1", "2", "12345")
    }
    assert len(outputs) == 1
    assert "is not a valid JSON Schema" in outputs.pop()


# -- jsonschema-rs says "valid" only where jsonschema does (issue 15) ----------------

#: Schemas whose patterns and keywords jsonschema-rs reads as jsonschema does (they
#: pass ``_native_blocker``), with texts where the two regex dialects could part.
NATIVE_CORPUS: list[dict[str, t.Any]] = [
    {"properties": {"a": {"type": "string", "pattern": "^[a-z]+\\d*$"}}},
    {"properties": {"a": {"type": "string", "pattern": "^\\w+ (?:x|y)$"}}},
    {"properties": {"a": {"type": "string", "pattern": "^a.c$"}}},
    {"patternProperties": {"^x-[a-z]+": {"type": "integer"}}, "additionalProperties": False},
    {"propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": {"type": "string"}},
    {"properties": {"a": {"type": "integer", "multipleOf": 3, "maximum": 2**64}}},
    {"properties": {"a": {"type": "string", "format": "date-time"}, "b": {"format": "email"}}},
    {"properties": {"a": {"enum": [1, True, "x", None, [1]]}, "b": {"const": {"k": 1.0}}}},
    {"properties": {"a": {"type": "array", "prefixItems": [{"type": "integer"}], "items": False}}},
    {"properties": {"a": {"type": "object", "minProperties": 1, "maxProperties": 2}}},
]

tricky_text = st.text(alphabet="az09_ .-x\n\r\u2028\ufeff\u00a0٣éZ:T", max_size=8)
tricky_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    tricky_text,
    st.lists(st.integers() | tricky_text, max_size=3),
    st.dictionaries(tricky_text, st.integers() | tricky_text, max_size=3),
)


@pytest.mark.parametrize("schema", NATIVE_CORPUS + CORPUS)
@settings(max_examples=120, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arguments=st.dictionaries(st.sampled_from(["a", "b", "x-y", "x-ÿ", "Ab"]), tricky_values))
def test_jsonschema_rs_says_valid_only_where_jsonschema_does(
    schema: dict[str, t.Any], arguments: dict[str, t.Any]
) -> None:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if _native_blocker(schema, cls) is not None:
        return  # the validator falls back for this schema
    native = _compile_native(schema, cls)
    assert native is not None
    if native(arguments):
        assert reference_with_formats(schema).is_valid(arguments), arguments
    assert (ArgumentValidator(schema).validate(arguments) is None) == (
        reference_with_formats(schema).is_valid(arguments)
    )


@pytest.mark.parametrize(
    ("pattern", "text"),
    [("^\\D$", "٣"), ("^[^\\d]$", "٣"), ("^\\W$", "é"), ("^\\s$", "\ufeff")],
)
def test_the_patterns_kept_from_jsonschema_rs_are_those_it_reads_more_loosely(
    pattern: str, text: str
) -> None:
    import jsonschema_rs

    schema = {"properties": {"a": {"type": "string", "pattern": pattern}}}
    assert jsonschema_rs.validator_for(schema).is_valid({"a": text})  # rs: valid
    assert not reference_with_formats(schema).is_valid({"a": text})  # jsonschema: not
    validator = ArgumentValidator(schema)
    assert validator.engine != "jsonschema-rs"
    assert validator.validate({"a": text}) is not None


def test_arguments_far_deeper_than_the_schema_do_not_crash_the_native_check() -> None:
    program = (
        "from nous_tools.validation import ArgumentValidator\n"
        "v = ArgumentValidator({'properties': {'a': {'type': 'array'}, 'b': {'type': 'string'}}})\n"
        "assert v.engine == 'jsonschema-rs', v.engine\n"
        "deep = []\n"
        "for _ in range(300_000):\n"
        "    deep = [deep]\n"
        "print(v.validate({'a': deep, 'b': 'x'}), v.validate({'a': deep, 'b': 1}) is not None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "True"]


FLAT_CORPUS: list[dict[str, t.Any]] = [
    FLAT,
    {**FLAT, "additionalProperties": False},
    {**FLAT, "required": ["a", "b", "c"], "additionalProperties": False},
    {**FLAT, "required": ["a", "z"], "additionalProperties": False},  # never valid
    {"type": "object", "properties": {"a": {"enum": ["x", None]}, "b": {"const": "k"}}},
    {"type": "object", "properties": {"a": {"type": ["number", "null"]}, "b": {}}},
    {
        "properties": {"a": {"type": "null"}, "b": {"type": "string", "enum": ["x"]}},
        "required": ["a"],
    },
    {"properties": {"a": {"type": "string", "format": "date"}}, "required": ["a"]},
]


@pytest.mark.parametrize("schema", FLAT_CORPUS)
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    arguments=st.dictionaries(st.sampled_from(["a", "b", "c", "z"]), tricky_values | json_values)
)
def test_the_flat_check_says_valid_only_where_jsonschema_does(
    schema: dict[str, t.Any], arguments: dict[str, t.Any]
) -> None:
    flat = _compile_flat(schema)
    assert flat is not None
    try:
        valid = flat(arguments)
    except TypeError:  # an unhashable value against an enum: "not sure"
        valid = False
    if valid:
        assert reference_with_formats(schema).is_valid(arguments), arguments


def test_the_flat_check_accepts_plain_valid_arguments_and_refuses_the_rest() -> None:
    check = _compile_flat({**FLAT, "required": ["a", "b", "c"], "additionalProperties": False})
    assert check is not None
    assert check({"a": "x", "b": 1, "c": True}) is True
    assert check({"a": "x", "b": 1}) is False
    assert check({"a": "x", "b": 1, "c": True, "d": 0}) is False
    assert check({"a": "x", "b": True, "c": True}) is False
    dated = _compile_flat(FLAT_CORPUS[-1])
    assert dated is not None
    assert dated({"a": "2024-01-01"}) is True and dated({"a": "2024-01-32"}) is False
