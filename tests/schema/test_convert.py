"""Arguments converted to their annotations; results written back as JSON (issue 14).

The arguments here are what a model sends: JSON text parsed with ``json.loads``,
strings for dates, objects for dataclasses, values for enums.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import ipaddress
import json
import pathlib
import subprocess
import sys
import threading
import typing as t
import uuid

import attrs
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nous_tools import Err, Ok, RunContext, Tool, ToolExecutor, format_tool_result, tool
from nous_tools.schema._convert import compile_converter, needs_conversion, structure, unstructure

# --------------------------------------------------------------------------- types used below


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Level(enum.IntEnum):
    ONE = 1
    TWO = 2


class Opaque(enum.Enum):
    """An enum whose values are not JSON: the schema and conversion use the names."""

    SOME = object()
    OTHER = object()


@dataclasses.dataclass(frozen=True)
class Room:
    name: str
    floor: int = 0


@attrs.frozen
class Guest:
    name: str
    _badge: str = "none"  # a private attribute: its key is the alias, "badge"


@dataclasses.dataclass
class Booking:
    when: dt.datetime
    room: Room
    guests: list[Guest]
    level: Priority = Priority.LOW


class Slot(t.NamedTuple):
    start: dt.time
    minutes: int = 30


class Window(t.TypedDict):
    first: dt.date
    last: dt.date


class Invoice(pydantic.BaseModel):
    total: decimal.Decimal
    due: dt.date
    lines: list[str] = []


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node] = dataclasses.field(default_factory=list)


def model_json(text: str) -> dict[str, t.Any]:
    """Arguments as a model sends them: JSON text, parsed."""
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


def make(fn: t.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("timeout", None)
    return Tool.from_function(fn, **options)


# --------------------------------------------------------------------------- round trips


def test_a_booking_arrives_as_datetime_dataclass_attrs_objects_and_an_enum(
    executor: ToolExecutor,
) -> None:
    received: dict[str, t.Any] = {}

    def book(
        when: dt.datetime, room: Room, guests: list[Guest], level: Priority = Priority.LOW
    ) -> str:
        received.update(when=when, room=room, guests=guests, level=level)
        return f"{room.name} {level.value}"

    arguments = model_json(
        '{"when": "2024-05-01T09:30:00+02:00", "room": {"name": "Ada", "floor": 3},'
        ' "guests": [{"name": "Grace"}, {"name": "Alan", "badge": "b-7"}], "level": "high"}'
    )
    assert executor.execute(make(book), arguments, RunContext.new()) == Ok("Ada high")
    tz = dt.timezone(dt.timedelta(hours=2))
    assert received == {
        "when": dt.datetime(2024, 5, 1, 9, 30, tzinfo=tz),
        "room": Room("Ada", 3),
        "guests": [Guest("Grace"), Guest("Alan", "b-7")],
        "level": Priority.HIGH,
    }
    assert arguments["room"] == {"name": "Ada", "floor": 3}  # the input is not changed


def test_a_default_is_left_to_the_function(executor: ToolExecutor) -> None:
    def book(room: Room, level: Priority = Priority.LOW) -> Priority:
        return level

    result = executor.execute(make(book), model_json('{"room": {"name": "Ada"}}'))
    assert result == Ok(Priority.LOW)


@pytest.mark.parametrize(
    ("annotation", "sent", "received"),
    [
        (dt.datetime, "2024-05-01T09:30:00Z", dt.datetime(2024, 5, 1, 9, 30, tzinfo=dt.UTC)),
        (dt.datetime, "2024-05-01 09:30", dt.datetime(2024, 5, 1, 9, 30)),
        (dt.date, "2024-02-29", dt.date(2024, 2, 29)),
        (dt.time, "07:05:09.25", dt.time(7, 5, 9, 250000)),
        (dt.timedelta, "P1DT2H", dt.timedelta(days=1, hours=2)),
        (dt.timedelta, "PT1.5S", dt.timedelta(seconds=1.5)),
        (uuid.UUID, "12345678-1234-5678-1234-567812345678", uuid.UUID(int=0x12345678123456781234567812345678)),
        (decimal.Decimal, "12.50", decimal.Decimal("12.50")),
        (pathlib.Path, "/tmp/report.txt", pathlib.Path("/tmp/report.txt")),
        (ipaddress.IPv4Address, "10.0.0.1", ipaddress.IPv4Address("10.0.0.1")),
        (ipaddress.IPv6Address, "::1", ipaddress.IPv6Address("::1")),
        (bytes, "héllo", "héllo".encode()),
        (Priority, "high", Priority.HIGH),
        (Level, 2, Level.TWO),
        (Opaque, "OTHER", Opaque.OTHER),
        (t.Literal["a", Priority.HIGH], "high", Priority.HIGH),
        (Room, {"name": "Ada"}, Room("Ada")),
        (Guest, {"name": "Al", "badge": "b"}, Guest("Al", "b")),
        (Slot, ["08:00"], Slot(dt.time(8), 30)),
        (Window, {"first": "2024-01-01", "last": "2024-01-02"},
         {"first": dt.date(2024, 1, 1), "last": dt.date(2024, 1, 2)}),
        (Invoice, {"total": "9.99", "due": "2024-06-01"},
         Invoice(total=decimal.Decimal("9.99"), due=dt.date(2024, 6, 1))),
        (tuple[int, str], [1, "a"], (1, "a")),
        (tuple[dt.date, ...], ["2024-01-01"], (dt.date(2024, 1, 1),)),
        (set[int], [3, 1], {1, 3}),
        (frozenset[Priority], ["low"], frozenset({Priority.LOW})),
        (dict[str, Room], {"a": {"name": "A"}}, {"a": Room("A")}),
        (dict[int, Priority], {"7": "low"}, {7: Priority.LOW}),
        (dict[uuid.UUID, int], {"12345678-1234-5678-1234-567812345678": 1},
         {uuid.UUID("12345678-1234-5678-1234-567812345678"): 1}),
        (dt.date | None, None, None),
        (dt.date | None, "2024-01-01", dt.date(2024, 1, 1)),
        (int | dt.date, 5, 5),
        (str | dt.date, "2024-01-01", "2024-01-01"),  # a member that takes it as it is wins
        (t.Annotated[dt.date, "A day."], "2024-01-01", dt.date(2024, 1, 1)),
        (Node, {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]},
         Node(1, [Node(2, [Node(3)])])),
    ],
    ids=lambda value: getattr(value, "__name__", None) if isinstance(value, type) else None,
)  # fmt: skip
def test_each_supported_type_is_converted_from_model_json(
    annotation: object, sent: object, received: object
) -> None:
    def fn(x):  # type: ignore[no-untyped-def]
        return x

    fn.__annotations__ = {"x": annotation}
    the_tool = make(fn)
    result = the_tool.validator.validate({"x": sent}) if the_tool.validator else None
    assert result is None  # the generated schema accepts what a model sends
    converted = compile_converter(fn, takes_ctx=False)
    assert converted is not None
    arguments = converted.convert("fn", json.loads(json.dumps({"x": sent})))
    assert arguments == {"x": received}
    assert type(arguments["x"]) is type(received)  # type: ignore[index]


# --------------------------------------------------------------------------- failures


def test_a_conversion_failure_is_worded_as_validation_and_not_retried(
    executor: ToolExecutor, recorder: t.Any
) -> None:
    calls: list[object] = []

    def book(when: dt.datetime) -> None:
        calls.append(when)

    the_tool = make(book, retries=3, validate_args=False)
    result = executor.execute(the_tool, {"when": "next tuesday"})
    assert isinstance(result, Err)
    assert result.reason.message == (
        "Invalid arguments for 'book': Type mismatch: when: expected date-time, got string"
    )
    assert result.reason.attempt == 1
    assert result.reason.original_error == ("type_mismatch", [("when", "date-time", "string")])
    assert calls == []
    assert recorder.names == []  # no attempt started


def test_validation_words_a_bad_format_exactly_as_conversion_does(executor: ToolExecutor) -> None:
    def book(when: dt.datetime) -> None:
        pass

    validated = executor.execute(make(book), {"when": "next tuesday"})
    converted = executor.execute(make(book, validate_args=False), {"when": "next tuesday"})
    assert isinstance(validated, Err)
    assert isinstance(converted, Err)
    assert validated.reason.message == converted.reason.message


def test_every_failure_is_named_with_its_path() -> None:
    def book(booking: Booking, count: set[int], total: decimal.Decimal) -> None:
        pass

    converter = compile_converter(book, takes_ctx=False)
    assert converter is not None
    result = converter.convert(
        "book",
        {
            "booking": {
                "when": "2024-05-01T10:00",
                "room": {"name": 5, "wing": "east"},
                "guests": [{"name": "Al"}, {}],
            },
            "count": "3",
            "total": "ten",
        },
    )
    assert isinstance(result, Err)
    assert result.reason.message == (
        "Invalid arguments for 'book': Missing required fields: booking.guests[1].name; "
        "Type mismatch: booking.room.name: expected string, got integer, "
        "count: expected array, got string, total: expected decimal, got string; "
        "Invalid values: booking.room: unexpected field(s): wing"
    )


@pytest.mark.parametrize(
    ("annotation", "sent", "expected"),
    [
        (int, "3", "integer"),
        (int, 1.5, "integer"),
        (int, True, "integer"),
        (str, 3, "string"),
        (bool, 1, "boolean"),
        (list[int], "abc", "array"),
        (Room, "Ada", "object"),
        (dt.date, "2024-02-30", "date"),
        (uuid.UUID, "not-a-uuid", "uuid"),
        (Priority, "urgent", 'one of "low", "high"'),
    ],
)
def test_conversion_is_strict(annotation: object, sent: object, expected: str) -> None:
    def fn(x):  # type: ignore[no-untyped-def]
        return x

    fn.__annotations__ = {"x": tuple[annotation]}  # type: ignore[valid-type]
    converter = compile_converter(fn, takes_ctx=False)
    assert converter is not None
    result = converter.convert("fn", {"x": [sent]})
    assert isinstance(result, Err)
    assert f"x[0]: expected {expected}, got" in result.reason.message


def test_a_pydantic_failure_keeps_pydantic_words() -> None:
    def pay(invoice: Invoice) -> None:
        pass

    converter = compile_converter(pay, takes_ctx=False)
    assert converter is not None
    result = converter.convert("pay", {"invoice": {"total": "1", "due": "soon"}})
    assert isinstance(result, Err)
    assert result.reason.message.startswith(
        "Invalid arguments for 'pay': Invalid values: invoice.due: "
    )
    missing = converter.convert("pay", {"invoice": {"total": "1"}})
    assert isinstance(missing, Err)
    assert missing.reason.original_error == ("missing_required", ["invoice.due"])


def test_conversion_never_raises_for_absurd_input() -> None:
    def fn(node: Node) -> None:
        pass

    converter = compile_converter(fn, takes_ctx=False)
    assert converter is not None
    deep: dict[str, t.Any] = {"value": 0}
    for _ in range(5000):
        deep = {"value": 0, "children": [deep]}
    result = converter.convert("fn", {"node": deep})
    assert isinstance(result, Err)
    assert "nested too deeply" in result.reason.message


# --------------------------------------------------------------------------- when it runs


def test_conversion_runs_once_per_call_not_per_retry(executor: ToolExecutor) -> None:
    seen: list[int] = []

    def flaky(room: Room) -> str:
        seen.append(id(room))
        if len(seen) == 1:
            raise ConnectionError("try again")
        return room.name

    result = executor.execute(make(flaky, retries=2), {"room": {"name": "Ada"}})
    assert result == Ok("Ada")
    assert len(seen) == 2 and seen[0] == seen[1]  # the very same Room both times


def test_convert_args_false_passes_the_json_through(executor: ToolExecutor) -> None:
    def book(room: Room) -> object:
        return room

    the_tool = make(book, convert_args=False)
    assert the_tool._converter is None
    assert executor.execute(the_tool, {"room": {"name": "Ada"}}) == Ok({"name": "Ada"})


def test_a_tool_with_a_schema_and_no_annotations_is_not_converted(executor: ToolExecutor) -> None:
    def book(**kwargs):  # type: ignore[no-untyped-def]
        return kwargs

    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}}
    the_tool = Tool(name="book", function=book, parameters=schema, timeout=None)
    assert the_tool._converter is None
    assert executor.execute(the_tool, {"when": "2024-01-01"}) == Ok({"when": "2024-01-01"})


def test_json_scalar_tools_get_no_converter_at_all() -> None:
    def plain(
        a: int,
        b: str,
        c: float | None,
        d: list[int],
        e: dict[str, bool],
        f: t.Literal["x", "y"] = "x",
        g: t.Any = None,
        *args: int,
        **kwargs: str,
    ) -> None:
        pass

    def with_ctx(ctx: RunContext[Room], a: int) -> None:
        pass

    assert make(plain)._converter is None
    assert make(with_ctx)._converter is None  # the context is never converted


@pytest.mark.parametrize(
    ("annotation", "needed"),
    [
        (int, False),
        (list[str], False),
        (dict[str, list[float]], False),
        (t.Optional[str], False),  # noqa: UP045 -- built at run time
        (t.Literal[1, "a"], False),
        (t.Literal[Priority.LOW], True),
        (dict[int, str], True),
        (list[dt.date], True),
        (tuple[int, int], True),
        (set[str], True),
        (Priority, True),
        (Window, True),
        (Room, True),
        (Invoice, True),
        (t.Annotated[int, "n"], False),
        (str | Room, True),
    ],
    ids=str,
)
def test_only_annotations_that_json_does_not_satisfy_need_conversion(
    annotation: object, needed: bool
) -> None:
    assert needs_conversion(annotation) is needed


def test_kwargs_of_a_type_are_each_converted(executor: ToolExecutor) -> None:
    def dates(first: dt.date, **more: dt.date) -> list[dt.date]:
        return [first, *more.values()]

    the_tool = make(dates)
    assert the_tool.parameters is not None
    assert the_tool.parameters["additionalProperties"] == {"type": "string", "format": "date"}
    result = executor.execute(the_tool, {"first": "2024-01-01", "b": "2024-01-02"})
    assert result == Ok([dt.date(2024, 1, 1), dt.date(2024, 1, 2)])


def test_a_ctx_tool_receives_the_context_and_converted_arguments(executor: ToolExecutor) -> None:
    def when(ctx: RunContext[str], on: dt.date) -> str:
        return f"{ctx.deps} {on:%d %b}"

    result = executor.execute(make(when), {"on": "2024-03-05"}, RunContext.new("us"))
    assert result == Ok("us 05 Mar")


def test_a_value_of_the_annotated_type_from_a_python_caller_is_kept(
    executor: ToolExecutor,
) -> None:
    room = Room("Ada")

    def keep(room: Room, on: dt.date) -> object:
        return room

    result = executor.execute(
        make(keep, validate_args=False), {"room": room, "on": dt.date.today()}
    )
    assert isinstance(result, Ok) and result.value is room


def test_converters_are_safe_to_share_between_threads() -> None:
    def book(booking: Booking) -> None:
        pass

    converter = compile_converter(book, takes_ctx=False)
    assert converter is not None
    arguments = {
        "booking": {"when": "2024-05-01T10:00Z", "room": {"name": "A"}, "guests": [{"name": "G"}]}
    }
    start = threading.Event()
    results: list[object] = []

    def run() -> None:
        start.wait(5)
        for _ in range(50):
            results.append(converter.convert("book", arguments))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    start.set()
    for thread in threads:
        thread.join(10)
    assert len(results) == 200
    assert all(isinstance(r, dict) and r["booking"].room == Room("A") for r in results)


# --------------------------------------------------------------------------- results


def test_returned_values_become_json_ready_content() -> None:
    invoice = Invoice(total=decimal.Decimal("9.90"), due=dt.date(2024, 6, 1))
    value = {
        "booking": Booking(
            when=dt.datetime(2024, 5, 1, 9, 30, tzinfo=dt.UTC),
            room=Room("Ada"),
            guests=[Guest("Al", "b-1")],
        ),
        "invoice": invoice,
        "level": Level.TWO,
        "opaque": Opaque.SOME,
        "id": uuid.UUID(int=1),
        "wait": dt.timedelta(minutes=90),
        "slots": {Slot(dt.time(8))},
    }
    assert json.loads(format_tool_result(Ok(value))) == {
        "booking": {
            "when": "2024-05-01T09:30:00+00:00",
            "room": {"name": "Ada", "floor": 0},
            "guests": [{"name": "Al", "badge": "b-1"}],
            "level": "low",
        },
        "invoice": {"total": "9.90", "due": "2024-06-01", "lines": []},
        "level": 2,
        "opaque": "SOME",
        "id": "00000000-0000-0000-0000-000000000001",
        "wait": "PT1H30M",
        "slots": [["08:00:00", 30]],
    }
    assert format_tool_result(Ok(Priority.HIGH)) == '"high"'
    assert format_tool_result(Ok(dt.date(2024, 1, 2))) == '"2024-01-02"'


def test_a_tool_result_reads_back_into_the_type_it_came_from(executor: ToolExecutor) -> None:
    @tool(timeout=None)
    def plan(start: dt.datetime, length: dt.timedelta) -> Booking:
        return Booking(when=start + length, room=Room("Ada"), guests=[])

    result = executor.execute(plan, {"start": "2024-05-01T09:00Z", "length": "PT30M"})
    assert isinstance(result, Ok)
    text = format_tool_result(result)
    assert structure(json.loads(text), Booking) == result.value


# --------------------------------------------------------------------------- round-trip property


def _fixed_offsets() -> st.SearchStrategy[dt.tzinfo | None]:
    minutes = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59)
    return st.none() | minutes.map(lambda m: dt.timezone(dt.timedelta(minutes=m)))


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=10)

#: ``(annotation, strategy of its values)``: every leaf type conversion supports.
_LEAVES: list[tuple[object, st.SearchStrategy[t.Any]]] = [
    (int, st.integers()),
    (float, st.floats(allow_nan=False, allow_infinity=False)),
    (str, _text),
    (bool, st.booleans()),
    (dt.datetime, st.datetimes(timezones=_fixed_offsets())),
    (dt.date, st.dates()),
    (dt.time, st.times(timezones=_fixed_offsets())),
    (dt.timedelta, st.timedeltas()),
    (uuid.UUID, st.uuids()),
    (decimal.Decimal, st.decimals(allow_nan=False, allow_infinity=False)),
    (pathlib.PurePosixPath, _text.map(pathlib.PurePosixPath)),
    (ipaddress.IPv4Address, st.ip_addresses(v=4)),
    (ipaddress.IPv6Address, st.ip_addresses(v=6)),
    (bytes, _text.map(str.encode)),
    (Priority, st.sampled_from(Priority)),
    (Level, st.sampled_from(Level)),
    (Opaque, st.sampled_from(Opaque)),
    (t.Literal["a", 2, Priority.HIGH], st.sampled_from(["a", 2, Priority.HIGH])),
    (Room, st.builds(Room, _text, st.integers())),
    (Guest, st.builds(Guest, _text, _text)),
    (Slot, st.builds(Slot, st.times(), st.integers())),
    (Window, st.fixed_dictionaries({"first": st.dates(), "last": st.dates()})),
    (Invoice, st.builds(Invoice, total=st.decimals(allow_nan=False, allow_infinity=False),
                        due=st.dates(), lines=st.lists(_text, max_size=2))),
]  # fmt: skip
_HASHABLE = [pair for pair in _LEAVES if pair[0] not in (Window, Invoice)]


def _composite(
    inner: st.SearchStrategy[tuple[object, st.SearchStrategy[t.Any]]],
) -> st.SearchStrategy[tuple[object, st.SearchStrategy[t.Any]]]:
    def listed(pair: tuple[t.Any, t.Any]) -> tuple[object, st.SearchStrategy[t.Any]]:
        return list[pair[0]], st.lists(pair[1], max_size=3)

    def homogeneous(pair: tuple[t.Any, t.Any]) -> tuple[object, st.SearchStrategy[t.Any]]:
        return tuple[pair[0], ...], st.lists(pair[1], max_size=3).map(tuple)

    def pair_of(two: tuple[t.Any, t.Any]) -> tuple[object, st.SearchStrategy[t.Any]]:
        (a, sa), (b, sb) = two
        return tuple[a, b], st.tuples(sa, sb)

    def by_text(pair: tuple[t.Any, t.Any]) -> tuple[object, st.SearchStrategy[t.Any]]:
        return dict[str, pair[0]], st.dictionaries(_text, pair[1], max_size=3)

    def by_int(pair: tuple[t.Any, t.Any]) -> tuple[object, st.SearchStrategy[t.Any]]:
        return dict[int, pair[0]], st.dictionaries(st.integers(), pair[1], max_size=3)

    def optional(pair: tuple[t.Any, t.Any]) -> tuple[object, st.SearchStrategy[t.Any]]:
        return t.Optional[pair[0]], st.none() | pair[1]  # noqa: UP045 -- built at run time

    def set_of(pair: tuple[t.Any, t.Any]) -> tuple[object, st.SearchStrategy[t.Any]]:
        return frozenset[pair[0]], st.frozensets(pair[1], max_size=3)

    return st.one_of(
        inner.map(listed),
        inner.map(homogeneous),
        st.tuples(inner, inner).map(pair_of),
        inner.map(by_text),
        inner.map(by_int),
        inner.map(optional),
        st.sampled_from(_HASHABLE).map(set_of),
    )


_TYPED_VALUES = st.recursive(st.sampled_from(_LEAVES), _composite, max_leaves=4)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), typed=_TYPED_VALUES)
def test_structure_reads_back_what_unstructure_writes_through_json(
    data: st.DataObject, typed: tuple[object, st.SearchStrategy[t.Any]]
) -> None:
    annotation, values = typed
    value = data.draw(values)
    sent = json.loads(json.dumps(unstructure(value)))
    assert structure(sent, annotation) == value


@pytest.mark.parametrize("annotation", [pathlib.Path, pathlib.PurePath])
def test_paths_read_back_as_the_annotated_class(annotation: type) -> None:
    assert structure("/a/b", annotation) == annotation("/a/b")


# --------------------------------------------------------------------------- the Tool options


def test_tool_schema_registry_lets_a_hand_schema_name_known_schemas(
    executor: ToolExecutor,
) -> None:
    import referencing
    import referencing.jsonschema

    uri = "https://schemas.example.com/room.json"
    room = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    registry = referencing.Registry().with_resource(
        uri, referencing.jsonschema.DRAFT202012.create_resource(room)
    )
    schema = {"type": "object", "properties": {"room": {"$ref": uri}}, "required": ["room"]}

    def book(room: Room) -> str:
        return room.name

    with pytest.raises(ValueError, match=r"remote schema .*Tool\(schema_registry=\.\.\.\)"):
        Tool(name="book", function=book, parameters=schema)
    the_tool = Tool(
        name="book", function=book, parameters=schema, schema_registry=registry, timeout=None
    )
    assert executor.execute(the_tool, {"room": {"name": "Ada"}}) == Ok("Ada")
    failed = executor.execute(the_tool, {"room": {}})
    assert isinstance(failed, Err)
    assert (
        failed.reason.message == "Invalid arguments for 'book': Missing required fields: room.name"
    )
    with pytest.raises(TypeError, match="schema_registry"):
        Tool(name="book", function=book, schema_registry=t.cast(t.Any, {uri: room}))


def test_pydantic_is_never_imported_for_tools_that_do_not_use_it() -> None:
    program = (
        "import sys\n"
        "sys.modules['pydantic'] = None  # any import of pydantic fails\n"
        "import dataclasses, datetime, json\n"
        "from nous_tools import Ok, execute, format_tool_result, tool\n"
        "@dataclasses.dataclass\n"
        "class Room:\n"
        "    name: str\n"
        "@tool(timeout=None)\n"
        "def book(room: Room, when: datetime.date) -> Room:\n"
        "    return room\n"
        "result = execute(book, {'room': {'name': 'Ada'}, 'when': '2024-01-01'})\n"
        "print(format_tool_result(result))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '{"name": "Ada"}'


def days_until(start: dt.date, room: Room) -> str:
    """A module-level tool function: a process-isolated child can import it."""
    return f"{room.name}: {(start - dt.date(2024, 1, 1)).days}"


def test_converted_arguments_reach_a_process_isolated_tool(executor: ToolExecutor) -> None:
    isolated = make(days_until, timeout=60, isolation="process")
    result = executor.execute(isolated, {"start": "2024-01-11", "room": {"name": "Ada"}})
    assert result == Ok("Ada: 10")


def test_a_union_failure_names_every_member() -> None:
    def fn(x: dt.date | Room | list[int] | None) -> None:
        pass

    converter = compile_converter(fn, takes_ctx=False)
    assert converter is not None
    result = converter.convert("fn", {"x": 5})
    assert isinstance(result, Err)
    assert result.reason.message.endswith("x: expected date or Room or array or null, got integer")
