"""Schemas for every common type (issue 14), and how they compare with pydantic's.

``Tool.from_function`` describes dates, UUIDs, decimals, paths, pydantic models,
``Annotated`` constraints and ``**kwargs: T``; the schemas must be what pydantic's
``TypeAdapter(...).json_schema()`` produces for the same signature, up to the
differences that are decisions (listed in ``docs/concepts/types.md``).
"""

from __future__ import annotations

import collections.abc as c
import dataclasses
import datetime as dt
import decimal
import enum
import ipaddress
import json
import pathlib
import typing as t
import uuid

import annotated_types as at
import pydantic
import pytest
import typing_extensions

from nous_tools import Tool
from nous_tools.schema._signature import DECIMAL_PATTERN, parameters_schema
from nous_tools.schema._validation import ArgumentValidator, check_schema


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass
class Room:
    """A room.

    Attributes:
        name: Its name.
    """

    name: str
    floor: int = 0


class Span(t.NamedTuple):
    start: dt.date
    days: int = 1


class Contact(typing_extensions.TypedDict):  # pydantic reads only these before 3.12
    email: str
    since: dt.date


class Address(pydantic.BaseModel):
    street: str
    city: str


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(description="Full name")
    home: Address
    born: dt.date | None = None


def _another_address() -> type[pydantic.BaseModel]:
    class Address(pydantic.BaseModel):  # the same name as the module's, another model
        zip: str

    return Address


class Shipment(pydantic.BaseModel):
    to: _another_address()  # type: ignore[valid-type]


def schema_of(fn: c.Callable[..., t.Any]) -> dict[str, t.Any]:
    schema = parameters_schema(fn, takes_ctx=False)
    check_schema(schema)
    return schema


def properties_of(fn: c.Callable[..., t.Any]) -> dict[str, t.Any]:
    return t.cast("dict[str, t.Any]", schema_of(fn)["properties"])


# --------------------------------------------------------------------------- formats


@pytest.mark.parametrize(
    ("annotation", "schema"),
    [
        (dt.datetime, {"type": "string", "format": "date-time"}),
        (dt.date, {"type": "string", "format": "date"}),
        (dt.time, {"type": "string", "format": "time"}),
        (dt.timedelta, {"type": "string", "format": "duration"}),
        (uuid.UUID, {"type": "string", "format": "uuid"}),
        (decimal.Decimal, {"type": "string", "pattern": DECIMAL_PATTERN}),
        (pathlib.Path, {"type": "string", "format": "path"}),
        (ipaddress.IPv4Address, {"type": "string", "format": "ipv4"}),
        (ipaddress.IPv6Address, {"type": "string", "format": "ipv6"}),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_standard_library_types_are_formatted_strings(
    annotation: type, schema: dict[str, t.Any]
) -> None:
    def fn(x):  # type: ignore[no-untyped-def]
        return x

    fn.__annotations__ = {"x": annotation}
    assert properties_of(fn)["x"] == schema


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("12.50", True),
        ("-3", True),
        (".5", True),
        ("1e-3", True),
        ("+7.", True),
        ("1,5", False),
        ("NaN", False),
        ("", False),
        ("1.2.3", False),
    ],
)
def test_the_decimal_pattern_accepts_decimal_numbers_only(text: str, valid: bool) -> None:
    def fn(x: decimal.Decimal) -> None:
        pass

    validator = ArgumentValidator(schema_of(fn))
    assert (validator.validate({"x": text}) is None) is valid


def test_a_datetime_default_is_recorded_as_iso_text() -> None:
    def fn(when: dt.date = dt.date(2024, 1, 2), color: Color = Color.RED) -> None:
        pass

    properties = properties_of(fn)
    assert properties["when"]["default"] == "2024-01-02"
    assert properties["color"]["default"] == "red"


def test_a_namedtuple_is_an_array_of_its_fields() -> None:
    def fn(span: Span) -> None:
        pass

    assert properties_of(fn)["span"] == {
        "type": "array",
        "prefixItems": [{"type": "string", "format": "date"}, {"type": "integer", "default": 1}],
        "minItems": 1,
        "maxItems": 2,
    }


def test_dict_keys_that_are_not_strings_are_described_by_property_names() -> None:
    def fn(a: dict[int, str], b: dict[uuid.UUID, int], c: dict[Color, int]) -> None:
        pass

    properties = properties_of(fn)
    assert properties["a"]["propertyNames"] == {"pattern": r"^-?\d+$"}
    assert properties["b"]["propertyNames"] == {"type": "string", "format": "uuid"}
    assert properties["c"]["propertyNames"] == {"type": "string", "enum": ["red", "green"]}
    validator = ArgumentValidator(schema_of(fn))
    assert validator.validate({"a": {"12": "x"}, "b": {}, "c": {"red": 1}}) is None
    assert validator.validate({"a": {"twelve": "x"}, "b": {}, "c": {}}) is not None


# --------------------------------------------------------------------------- Annotated


def test_annotated_types_constraints_become_keywords() -> None:
    def fn(
        count: t.Annotated[int, at.Ge(0), at.Lt(10)],
        ratio: t.Annotated[float, at.Interval(gt=0, le=1), at.MultipleOf(0.25)],
        name: t.Annotated[str, at.Len(1, 20), "The name."],
        tags: t.Annotated[list[str], at.MinLen(1), at.MaxLen(3)],
        extra: t.Annotated[dict[str, int], at.MaxLen(2)],
    ) -> None:
        pass

    properties = properties_of(fn)
    assert properties["count"] == {"type": "integer", "minimum": 0, "exclusiveMaximum": 10}
    assert properties["ratio"] == {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1,
        "multipleOf": 0.25,
    }
    assert properties["name"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 20,
        "description": "The name.",
    }
    assert properties["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 1,
        "maxItems": 3,
    }
    assert properties["extra"]["maxProperties"] == 2


def test_pydantic_field_constraints_and_texts_become_keywords() -> None:
    def fn(
        page: t.Annotated[
            int, pydantic.Field(ge=1, le=100, description="Page number", examples=[1, 2])
        ],
        code: t.Annotated[str, pydantic.Field(pattern=r"^[A-Z]{3}$", title="Code")],
        word: t.Annotated[str, pydantic.Field(pattern=r"^\p{L}+$")],
    ) -> None:
        pass

    properties = properties_of(fn)
    assert properties["page"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "description": "Page number",
        "examples": [1, 2],
    }
    assert properties["code"] == {"type": "string", "pattern": "^[A-Z]{3}$", "title": "Code"}
    validator = ArgumentValidator(schema_of(fn))
    assert validator.validate({"page": 1, "code": "ABC", "word": "Ünïcode"}) is None
    failure = validator.validate({"page": 0, "code": "abc", "word": "a1"})
    assert failure is not None
    assert [path for path, _ in failure.original_error[1]] == ["code", "page", "word"]


def test_a_field_description_wins_over_the_docstring() -> None:
    def fn(q: t.Annotated[str, pydantic.Field(description="From the field")]) -> None:
        """Search.

        Args:
            q: From the docstring.
        """

    assert properties_of(fn)["q"]["description"] == "From the field"


# --------------------------------------------------------------------------- pydantic models


def test_a_pydantic_model_is_described_by_pydantic_with_resolvable_defs() -> None:
    def fn(person: Person, shipment: Shipment) -> None:
        pass

    schema = schema_of(fn)
    assert schema["properties"]["person"]["properties"]["home"] == {"$ref": "#/$defs/Address"}
    assert schema["$defs"]["Address"] == Address.model_json_schema()
    # Two different models named Address: the second is renamed, its $ref with it.
    assert schema["properties"]["shipment"]["properties"]["to"] == {"$ref": "#/$defs/Address_2"}
    assert schema["$defs"]["Address_2"]["required"] == ["zip"]
    validator = ArgumentValidator(schema)
    good = {
        "person": {"name": "Ada", "home": {"street": "S", "city": "C"}},
        "shipment": {"to": {"zip": "123"}},
    }
    assert validator.validate(good) is None
    bad = {"person": {"name": "Ada", "home": {"street": "S"}}, "shipment": {"to": {"city": "C"}}}
    failure = validator.validate(bad)
    assert failure is not None
    assert failure.original_error == ("missing_required", ["person.home.city", "shipment.to.zip"])


def test_a_pydantic_model_inside_a_dataclass_is_described_too() -> None:
    @dataclasses.dataclass
    class Envelope:
        to: Address

    def fn(envelope: Envelope) -> None:
        pass

    fn.__annotations__ = {"envelope": Envelope}
    schema = schema_of(fn)
    assert schema["properties"]["envelope"]["properties"]["to"]["required"] == ["street", "city"]


# --------------------------------------------------------------------------- **kwargs: T


def test_kwargs_of_a_type_describe_every_extra_key() -> None:
    def fn(query: str, **limits: t.Annotated[int, at.Ge(0)]) -> None:
        pass

    schema = schema_of(fn)
    assert schema["additionalProperties"] == {"type": "integer", "minimum": 0}
    validator = ArgumentValidator(schema)
    assert validator.validate({"query": "q", "a": 1, "b": 2}) is None
    assert validator.validate({"query": "q", "a": -1}) is not None
    assert validator.validate({"query": "q", "a": "1"}) is not None


def test_untyped_kwargs_leave_extra_keys_open() -> None:
    def fn(query: str, **extra):  # type: ignore[no-untyped-def]
        pass

    assert "additionalProperties" not in schema_of(fn)


def test_kwargs_of_an_undescribable_type_close_the_object_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def fn(query: str, **hooks: c.Callable[[], None]) -> None:
        pass

    with caplog.at_level("WARNING", logger="nous_tools"):
        schema = schema_of(fn)
    assert schema["additionalProperties"] is False
    assert "parameter 'hooks'" in caplog.text


def test_tool_construction_raises_for_an_undescribable_required_parameter() -> None:
    class Socket:
        pass

    def connect(sock: Socket) -> None:
        pass

    connect.__annotations__ = {"sock": Socket}
    with pytest.raises(TypeError, match=r"connect' parameter 'sock'.*Socket"):
        Tool.from_function(connect)


# --------------------------------------------------------------------------- against pydantic


def signature_pydantic_also_reads(
    when: dt.datetime,
    day: dt.date,
    at_time: dt.time,
    wait: dt.timedelta,
    ident: uuid.UUID,
    path: pathlib.Path,
    host: ipaddress.IPv4Address,
    color: Color,
    mode: t.Literal["fast", "slow"],
    room: Room,
    span: Span,
    contact: Contact,
    person: Person,
    tags: set[str],
    pair: tuple[int, str],
    many: tuple[float, ...],
    rooms: list[Room],
    by_name: dict[str, dt.date],
    maybe: dt.date | None,
    either: int | str,
    count: t.Annotated[int, pydantic.Field(ge=0, lt=10)],
    label: t.Annotated[str, at.Len(2, 5)],
    note: str = "",
    **extra: int,
) -> None:
    """Every kind of parameter both libraries describe."""


#: Keywords that say nothing about which instances are valid.
_ANNOTATION_KEYS = {"title", "description", "default", "examples"}


def _normalise(node: t.Any, root: dict[str, t.Any]) -> t.Any:
    """``node`` with every ``$ref`` resolved, annotations dropped, and objects open
    (pydantic lets dataclasses and TypedDicts ignore unknown keys, ours refuse them:
    a decision)."""
    if isinstance(node, dict):
        if "$ref" in node:
            target = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
            return _normalise({**target, **{k: v for k, v in node.items() if k != "$ref"}}, root)
        kept = {
            key: _normalise(value, root)
            for key, value in node.items()
            if key not in _ANNOTATION_KEYS and key != "$defs"
        }
        if kept.get("additionalProperties") is False:
            del kept["additionalProperties"]
        if "required" in kept:
            kept["required"] = sorted(kept["required"])
        if "properties" in kept:
            kept["properties"] = dict(sorted(kept["properties"].items()))
        return kept
    if isinstance(node, list):
        return [_normalise(item, root) for item in node]
    return node


def test_schemas_are_equivalent_to_pydantic_type_adapter_schemas() -> None:
    ours = schema_of(signature_pydantic_also_reads)
    theirs = pydantic.TypeAdapter(signature_pydantic_also_reads).json_schema()
    assert sorted(ours["required"]) == sorted(theirs["required"])
    assert ours["properties"].keys() == theirs["properties"].keys()
    mine, pydantics = _normalise(ours, ours), _normalise(theirs, theirs)
    for name in ours["properties"]:
        assert mine["properties"][name] == pydantics["properties"][name], name
    assert mine["additionalProperties"] == pydantics["additionalProperties"]


_GOOD = {
    "when": "2024-05-01T09:30:00Z",
    "day": "2024-05-01",
    "at_time": "09:30:00Z",
    "wait": "PT1H",
    "ident": "12345678-1234-5678-1234-567812345678",
    "path": "/tmp/x",
    "host": "10.0.0.1",
    "color": "red",
    "mode": "fast",
    "room": {"name": "Ada"},
    "span": ["2024-05-01", 3],
    "contact": {"email": "a@b.c", "since": "2024-01-01"},
    "person": {"name": "Ada", "home": {"street": "S", "city": "C"}},
    "tags": ["a", "b"],
    "pair": [1, "x"],
    "many": [1.5, 2],
    "rooms": [{"name": "A", "floor": 2}],
    "by_name": {"a": "2024-01-01"},
    "maybe": None,
    "either": "x",
    "count": 3,
    "label": "abc",
    "other": 5,
}


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"when": "yesterday"},
        {"day": "2024-02-30"},
        {"ident": "1234"},
        {"host": "999.0.0.1"},
        {"color": "blue"},
        {"mode": "medium"},
        {"room": {"floor": 1}},
        {"span": []},
        {"span": ["2024-05-01", 1, 2]},
        {"contact": {"email": "a@b.c"}},
        {"person": {"name": "Ada", "home": {}}},
        {"tags": ["a", "a"]},
        {"pair": [1, 2]},
        {"many": ["x"]},
        {"rooms": [{"name": 1}]},
        {"by_name": {"a": "01/02/2024"}},
        {"maybe": 5},
        {"either": 1.5},
        {"count": 10},
        {"label": "a"},
        {"other": "5"},
    ],
    ids=lambda change: ",".join(change) or "valid",
)
def test_validation_agrees_with_pydantic_schemas_on_model_shaped_arguments(
    change: dict[str, t.Any],
) -> None:
    arguments = {**_GOOD, **change}
    ours = ArgumentValidator(schema_of(signature_pydantic_also_reads))
    theirs = ArgumentValidator(pydantic.TypeAdapter(signature_pydantic_also_reads).json_schema())
    assert (ours.validate(arguments) is None) == (theirs.validate(arguments) is None)
    assert (ours.validate(arguments) is None) == (not change)


def test_the_deliberate_differences_from_pydantic() -> None:
    def fn(amount: decimal.Decimal, room: Room) -> None:
        pass

    ours = ArgumentValidator(schema_of(fn))
    theirs = ArgumentValidator(pydantic.TypeAdapter(fn).json_schema())
    both = {"amount": "1.5", "room": {"name": "A"}}
    assert ours.validate(both) is None and theirs.validate(both) is None
    # A Decimal is a string (a number would lose digits on the way); pydantic takes both.
    assert ours.validate({**both, "amount": 1.5}) is not None
    assert theirs.validate({**both, "amount": 1.5}) is None
    # An unknown key in a dataclass is refused (pydantic ignores it).
    assert ours.validate({**both, "room": {"name": "A", "wing": "E"}}) is not None
    assert theirs.validate({**both, "room": {"name": "A", "wing": "E"}}) is None


def test_the_generated_schema_round_trips_through_json() -> None:
    schema = schema_of(signature_pydantic_also_reads)
    assert json.loads(json.dumps(schema)) == schema
