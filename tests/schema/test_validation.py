from __future__ import annotations

import copy
import datetime
import json
import os
import subprocess
import sys
import types
import typing as t
import urllib.request

import jsonschema_rs
import pytest
import referencing
import referencing.jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nous_tools.schema._validation import (
    ArgumentValidator,
    ValidationFailure,
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


def as_json(value: object) -> object:
    """``value`` as JSON carries it: mappings as dicts with string keys, tuples as lists."""
    if isinstance(value, t.Mapping):
        return {str(key): as_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(item) for item in value]
    return value


class Reference:
    """jsonschema-rs alone (the validator's engine), on the arguments as JSON."""

    def __init__(self, schema: t.Mapping[str, t.Any]) -> None:
        self.native = jsonschema_rs.validator_for(schema)

    def is_valid(self, arguments: object) -> bool:
        return bool(self.native.is_valid(as_json(arguments)))


def reference(schema: t.Mapping[str, t.Any]) -> Reference:
    return Reference(schema)


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
    ("schema", "value", "valid"),
    [
        ({"not": {"pattern": "a$"}}, "xa\n", True),  # ECMA-262: "$" is the end of the text
        ({"pattern": "^\\d$"}, "\u0663", False),  # ECMA-262: \d is an ASCII digit
        ({"multipleOf": 0.1}, 0.3, True),  # jsonschema-rs divides exactly
        ({"multipleOf": 3}, 1e308, False),
        ({"oneOf": [{"minimum": 5}, {"type": "boolean"}]}, True, False),
    ],
)
def test_edge_cases_are_answered_as_json_schema_says(
    schema: dict[str, t.Any], value: object, valid: bool
) -> None:
    full = {"type": "object", "properties": {"v": schema}}
    assert (ArgumentValidator(full).validate({"v": value}) is None) is valid


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
        [("n", "true is not one of 1 or 2"), ("z", "0 was expected")],
    )


# -- other keywords -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "arguments", "expected"),
    [
        (
            {"properties": {"n": {"anyOf": [{"type": "integer"}, {"minLength": 3}]}}},
            {"n": "ab"},
            [("n", "\"ab\" is not valid under any of the schemas listed in the 'anyOf' keyword")],
        ),
        (
            {"properties": {"unit": {"enum": ["c", "f"]}}},
            {"unit": "k"},
            [("unit", '"k" is not one of "c" or "f"')],
        ),
        (
            {"properties": {"age": {"type": "integer", "minimum": 0}}},
            {"age": -1},
            [("age", "-1 is less than the minimum of 0")],
        ),
        (
            {"properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}}},
            {"code": "abc"},
            [("code", '"abc" does not match "^[A-Z]{3}$"')],
        ),
        (
            {"properties": {"a": {}}, "additionalProperties": False},
            {"a": 1, "b": 2},
            [("(root)", "unknown argument 'b' (expected: a)")],
        ),
    ],
    ids=["anyOf", "enum", "minimum", "pattern", "additionalProperties"],
)
def test_other_keywords_are_invalid_values_in_jsonschema_rs_words(
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
    assert text.startswith("5 is valid under more than one of the schemas")


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
        [("w", '"ab" is shorter than 3 characters')],
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
    assert failure.message == (
        "Missing required fields: label; "
        "Type mismatch: pair[1]: expected integer, got string; "
        "Invalid values: (root): Unevaluated properties are not allowed ('other' was unexpected)"
    )


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


def test_a_draft_7_registry_schema_without_dollar_schema_keeps_its_own_draft() -> None:
    """Its ``$id: "#positive"`` is a draft-7 anchor: read as 2020-12 it would not exist."""
    uri = "https://example.com/numbers.json"
    numbers = {"definitions": {"positive": {"$id": "#positive", "type": "integer", "minimum": 1}}}
    registry = referencing.Registry().with_resource(
        uri, referencing.jsonschema.DRAFT7.create_resource(numbers)
    )
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"count": {"$ref": f"{uri}#positive"}},
    }
    validator = ArgumentValidator(schema, registry=registry)
    assert validator.validate({"count": 3}) is None
    assert validator.validate({"count": 0}) is not None
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
        ({"properties": 5}, '5 is not of type "object" (at path properties)'),
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
    assert failure.message.startswith('Invalid values: text: "xxx')
    assert failure.message.endswith('" is longer than 10 characters')


def test_a_flood_of_violations_is_listed_in_part_but_kept_whole() -> None:
    failure = failure_of(SEARCH, {"tags": list(range(500))})
    assert len(failure.original_error[1]) == 500
    assert failure.message.endswith(", ... and 450 more")


def test_a_key_that_is_not_a_string_reads_as_json_writes_it() -> None:
    failure = failure_of({"additionalProperties": False}, {1: "one", "b": 2})
    assert failure.original_error == (
        "invalid",
        [("(root)", "unknown arguments 1, 'b' (this tool takes no arguments)")],
    )
    nested = {"properties": {"m": {"additionalProperties": {"type": "string"}}}}
    assert failure_of(nested, {"m": {2: 3}}).original_error == (
        "type_mismatch",
        [("m.2", "string", "integer")],
    )
    patterned = {"patternProperties": {"^a": {"type": "string"}}, "additionalProperties": False}
    assert ArgumentValidator(patterned).validate(t.cast(t.Any, {"a": "x"})) is None
    assert failure_of(patterned, t.cast(t.Any, {3: "x"})).original_error[0] == "invalid"


def test_an_object_key_that_looks_like_a_number_is_a_key_not_an_index() -> None:
    nested = {"properties": {"m": {"additionalProperties": {"type": "string"}}}}
    assert failure_of(nested, {"m": {"2": 3}}).original_error == (
        "type_mismatch",
        [("m.2", "string", "integer")],
    )


def test_every_key_additional_properties_false_refuses_is_named() -> None:
    failure = failure_of(
        {"properties": {"m": {"additionalProperties": False}}}, {"m": {"a": 1, "b": 2}}
    )
    assert failure.original_error == (
        "invalid",
        [("m", "unknown fields 'a', 'b' (it takes no fields)")],
    )


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


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        ({"type": "object"}, b"raw", "object"),
        ({"type": ["integer", "null"]}, datetime.date(2024, 5, 1), "integer or null"),
        ({"type": "number"}, float("nan"), "number"),
        ({"items": {"type": "string"}}, [object()], None),
    ],
    ids=["bytes", "date", "nan", "nested"],
)
def test_a_value_json_cannot_carry_is_a_type_mismatch_where_a_type_is_asked(
    schema: dict[str, t.Any], value: object, expected: str | None
) -> None:
    failure = failure_of({"properties": {"x": schema}}, {"x": value})
    [(path, wanted, actual)] = failure.original_error[1]
    assert failure.original_error[0] == "type_mismatch"
    if expected is None:
        assert (path, wanted, actual) == ("x[0]", "string", "object")
    else:
        assert (path, wanted) == ("x", expected)
        assert actual == ("NaN" if expected == "number" else type(value).__name__)


@pytest.mark.parametrize(
    "value", [b"raw", object(), float("inf"), {1: object()}, types.MappingProxyType({"k": b""})]
)
def test_a_value_json_cannot_carry_is_accepted_where_any_value_is(value: object) -> None:
    schema = {"type": "object", "properties": {"x": {}, "y": True, "n": {"type": "integer"}}}
    assert ArgumentValidator(schema).validate({"x": value, "y": value, "n": 1}) is None
    assert failure_of(schema, {"x": value, "n": "1"}).original_error == (
        "type_mismatch",
        [("n", "integer", "string")],
    )


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
def test_validate_never_raises_and_answers_as_jsonschema_rs_does(
    index: int, arguments: dict[t.Any, t.Any]
) -> None:
    before = snapshot(arguments)
    result = VALIDATORS[index].validate(arguments)
    assert result is None or isinstance(result, ValidationFailure)
    assert snapshot(arguments) == before
    assert (result is None) == REFERENCES[index].is_valid(arguments)


#: Schemas whose meaning jsonschema (the Python reference implementation) reads as
#: jsonschema-rs does: no pattern (ECMA-262 there, Python's re here) and no
#: ``dependencies`` (a draft 7 keyword jsonschema-rs still applies in 2020-12).
AGREED = [
    index
    for index, schema in enumerate(CORPUS)
    if "pattern" not in json.dumps(schema) and "dependencies" not in schema
]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.sampled_from(AGREED), arguments=st.dictionaries(argument_keys, json_values))
def test_verdicts_agree_with_the_python_reference_implementation(
    index: int, arguments: dict[str, t.Any]
) -> None:
    import jsonschema

    plain = as_json(arguments)
    cls = jsonschema.validators.validator_for(
        CORPUS[index], default=jsonschema.Draft202012Validator
    )
    expected = cls(CORPUS[index]).is_valid(plain)
    assert (VALIDATORS[index].validate(arguments) is None) == expected


@settings(max_examples=200)
@given(arguments=st.dictionaries(st.text(max_size=5), json_values, max_size=6))
def test_every_failure_has_a_message_and_a_known_kind(arguments: dict[str, t.Any]) -> None:
    for validator in VALIDATORS:
        failure = validator.validate(arguments)
        if failure is not None:
            assert failure.message
            assert failure.original_error[0] in ("missing_required", "type_mismatch", "invalid")
            assert failure.original_error[1]


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
        [("name", r'"2 Zoë" does not match "^\p{L}[\p{L}\p{N} ]*$"')],
    )
    assert failure_of(ZOD_LIKE, {"x-Ä": "one"}).original_error == (
        "type_mismatch",
        [("x-Ä", "integer", "string")],
    )
    assert failure_of(ZOD_LIKE, {"x-a": 1}).original_error[0] == "invalid"  # not \p{Lu}


def test_a_pattern_neither_dialect_reads_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"'\(unclosed' is not a regular expression"):
        check_schema({"properties": {"a": {"pattern": "(unclosed"}}})


def test_unevaluated_properties_beside_a_unicode_pattern_applies_both() -> None:
    schema = {"patternProperties": {r"^\p{L}": {}}, "unevaluatedProperties": False}
    validator = ArgumentValidator(schema)
    assert validator.validate({"é": 1}) is None
    assert failure_of(schema, {"1": 1}).original_error == (
        "invalid",
        [("(root)", "Unevaluated properties are not allowed ('1' was unexpected)")],
    )


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
        "from nous_tools.schema._validation import check_schema\n"
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


# -- dialects (issue 26: the metaschema check is jsonschema-rs's) ------------------------


def test_a_draft_3_schema_is_refused_naming_the_dialects_jsonschema_rs_knows() -> None:
    schema = {"$schema": "http://json-schema.org/draft-03/schema#", "properties": {}}
    with pytest.raises(ValueError) as refused:
        check_schema(schema)
    assert str(refused.value) == (
        "Tool option 'parameters' names $schema 'http://json-schema.org/draft-03/schema#', "
        "which is not a JSON Schema dialect jsonschema-rs knows (drafts 4, 6, 7, 2019-09, "
        "2020-12)"
    )


@pytest.mark.parametrize(
    "dialect",
    [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ],
)
def test_every_metaschema_violation_is_listed_in_each_known_dialect(dialect: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_schema({"$schema": dialect, "type": "objekt", "required": "name"})
    message = str(refused.value)
    assert "unknown type 'objekt'" in message and "(at path type)" in message
    assert "(at path required)" in message


def test_a_metaschema_path_through_a_key_that_looks_like_a_number_stays_a_key() -> None:
    with pytest.raises(ValueError, match=r"\(at path properties\.0\.type\)"):
        check_schema({"properties": {"0": {"type": "objekt"}}})
