"""Schemas, descriptions and ``takes_ctx`` from signatures (``nous_tools.schema._signature``).

This module uses ``from __future__ import annotations`` on purpose: every annotation
written below is a string that the schema code has to resolve.
"""

from __future__ import annotations

import collections.abc as c
import dataclasses
import enum
import functools
import inspect
import typing as t

import attrs
import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nous_tools.run_context import RunContext
from nous_tools.schema._signature import (
    description_from_docstring,
    detect_takes_ctx,
    parameters_schema,
)

if t.TYPE_CHECKING:
    from decimal import Decimal as OnlyKnownToTypeCheckers

# --------------------------------------------------------------------------- helpers


def schema_of(fn: c.Callable[..., t.Any], *, takes_ctx: bool = False) -> dict[str, t.Any]:
    """The parameters schema of ``fn``, checked against the Draft 2020-12 metaschema."""
    schema = parameters_schema(fn, takes_ctx=takes_ctx)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def schema_for(annotation: object) -> dict[str, t.Any]:
    """The schema of a single parameter ``x`` annotated with the object ``annotation``."""

    def fn(x):  # type: ignore[no-untyped-def]
        return x

    fn.__annotations__ = {"x": annotation}
    return schema_of(fn)["properties"]["x"]


# --------------------------------------------------------------------------- types used below


@dataclasses.dataclass
class Deps:
    user: str


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    ONE = 1
    TWO = "two"


class Opaque(enum.Enum):
    SOME = object()


class Unknown:
    pass


UserId = t.NewType("UserId", int)


@attrs.define
class Filter:
    """A search filter.

    Attributes:
        field: The field to filter on.
        minimum: The smallest value kept.
    """

    field: str
    minimum: int = 0
    tags: list[str] = attrs.Factory(list)
    _secret: str = "hidden"
    computed: int = attrs.field(init=False, default=1)


@attrs.define
class TreeNode:
    value: int
    children: list[TreeNode] = attrs.Factory(list)
    parent: TreeNode | None = None


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0
    label: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class LinkedItem:
    value: str
    next: LinkedItem | None = None


class Movie(t.TypedDict):
    title: str
    year: int


class PartialMovie(t.TypedDict, total=False):
    title: t.Required[str]
    year: int


class Caller:
    """Greet someone."""

    def __call__(self, ctx: RunContext[Deps], name: str) -> str:
        return f"hi {name}"


class Service:
    def lookup(self, ctx: RunContext[Deps], key: str) -> str:
        """Look a key up."""
        return key


# --------------------------------------------------------------------------- takes_ctx


def test_first_parameter_annotated_run_context_takes_ctx() -> None:
    def fn(context: RunContext, query: str) -> str:
        return query

    assert detect_takes_ctx(fn) is True


def test_first_parameter_annotated_parametrised_run_context_takes_ctx() -> None:
    def fn(context: RunContext[Deps], query: str) -> str:
        return query

    assert detect_takes_ctx(fn) is True


def test_run_context_object_annotation_takes_ctx() -> None:
    def fn(context, query):  # type: ignore[no-untyped-def]
        return query

    fn.__annotations__ = {"context": RunContext[Deps], "query": str}
    assert detect_takes_ctx(fn) is True


def test_run_context_subclass_annotation_takes_ctx() -> None:
    class AppContext(RunContext[Deps]):
        pass

    def fn(context, query):  # type: ignore[no-untyped-def]
        return query

    fn.__annotations__ = {"context": AppContext, "query": str}
    assert detect_takes_ctx(fn) is True


def test_unresolvable_run_context_string_annotation_takes_ctx() -> None:
    def fn(context: RunContext[OnlyKnownToTypeCheckers], query: str) -> str:
        return query

    with pytest.raises(NameError):
        t.get_type_hints(fn)
    assert detect_takes_ctx(fn) is True


def test_qualified_run_context_string_annotation_takes_ctx() -> None:
    def fn(context, query):  # type: ignore[no-untyped-def]
        return query

    fn.__annotations__ = {"context": "nous_tools.NotImported.RunContext[Deps]"}
    assert detect_takes_ctx(fn) is True


def test_first_parameter_named_ctx_takes_ctx() -> None:
    def fn(ctx, query: str) -> str:  # type: ignore[no-untyped-def]
        return query

    assert detect_takes_ctx(fn) is True


def test_first_parameter_named_ctx_takes_ctx_whatever_its_annotation() -> None:
    def fn(ctx: dict[str, int], query: str) -> str:
        return query

    assert detect_takes_ctx(fn) is True


@pytest.mark.parametrize(
    "source",
    [
        "def fn(query: str): pass",
        "def fn(context, query: str): pass",
        "def fn(deps: dict, ctx: RunContext): pass",
        "def fn(query: str, ctx: RunContext): pass",
        "def fn(*, ctx: RunContext): pass",
        "def fn(*ctx): pass",
        "def fn(**ctx): pass",
        "def fn(): pass",
        "def fn(run: RunContextual): pass",
    ],
)
def test_other_first_parameters_do_not_take_ctx(source: str) -> None:
    namespace: dict[str, t.Any] = {"RunContext": RunContext, "RunContextual": Unknown}
    exec(source, namespace)
    assert detect_takes_ctx(namespace["fn"]) is False


@pytest.mark.parametrize(
    "fn",
    [len, print, max, lambda: 0, lambda x: x, lambda ctx: ctx, int, object, dict.fromkeys],
    ids=["len", "print", "max", "lambda0", "lambda1", "lambda_ctx", "int", "object", "method"],
)
def test_ctx_detection_never_raises_for_lambdas_builtins_and_classes(
    fn: c.Callable[..., t.Any],
) -> None:
    assert detect_takes_ctx(fn) in (True, False)


def test_builtin_without_a_signature_does_not_take_ctx() -> None:
    with pytest.raises(ValueError):
        inspect.signature(type)
    assert detect_takes_ctx(type) is False


def test_lambda_named_ctx_takes_ctx() -> None:
    assert detect_takes_ctx(lambda ctx, x: x) is True


def test_callable_instance_takes_ctx_from_its_call_method() -> None:
    assert detect_takes_ctx(Caller()) is True


def test_bound_method_takes_ctx_after_self() -> None:
    assert detect_takes_ctx(Service().lookup) is True


def test_partial_takes_ctx_from_the_wrapped_function() -> None:
    def fn(context: RunContext[Deps], query: str, limit: int) -> str:
        return query

    assert detect_takes_ctx(functools.partial(fn, limit=3)) is True


def test_decorated_function_takes_ctx_through_wraps() -> None:
    def decorate(f: c.Callable[..., t.Any]) -> c.Callable[..., t.Any]:
        @functools.wraps(f)
        def wrapper(*args: t.Any, **kwargs: t.Any) -> t.Any:
            return f(*args, **kwargs)

        return wrapper

    @decorate
    def fn(context: RunContext[Deps], query: str) -> str:
        return query

    assert detect_takes_ctx(fn) is True


# --------------------------------------------------------------------------- descriptions


def test_description_is_the_docstring_first_paragraph_joined_by_spaces() -> None:
    def fn() -> None:
        """Search the index
        for documents.

        A second paragraph that is not part of the description.
        """

    assert description_from_docstring(fn) == "Search the index for documents."


def test_description_is_empty_without_a_docstring() -> None:
    def fn() -> None:
        pass

    assert description_from_docstring(fn) == ""


def test_description_stops_where_the_args_section_starts() -> None:
    def fn(a: int) -> None:
        """Add one.
        Args:
            a: The number.
        """

    assert description_from_docstring(fn) == "Add one."


def test_description_stops_where_a_sphinx_field_starts() -> None:
    def fn(a: int) -> None:
        """Add one.
        :param a: The number.
        """

    assert description_from_docstring(fn) == "Add one."


def test_description_of_a_partial_comes_from_the_wrapped_function() -> None:
    def fn(a: int) -> None:
        """Wrapped."""

    assert description_from_docstring(functools.partial(fn, a=1)) == "Wrapped."


def test_description_of_a_callable_instance_comes_from_its_class() -> None:
    assert description_from_docstring(Caller()) == "Greet someone."


def test_description_of_a_callable_instance_falls_back_to_its_call_method() -> None:
    class Tool:
        def __call__(self) -> None:
            """Do the thing."""

    assert description_from_docstring(Tool()) == "Do the thing."


def test_description_of_a_class_is_never_a_base_class_docstring() -> None:
    class Child(Caller):
        pass

    assert description_from_docstring(Child) == ""


def test_description_of_a_builtin_is_its_docstring() -> None:
    assert description_from_docstring(len) == "Return the number of items in a container."


# --------------------------------------------------------------------------- parameter docs


def test_google_args_section_describes_parameters() -> None:
    def fn(query: str, limit: int = 10, *, exact: bool = False) -> None:
        """Search.

        Args:
            query (str): What to look
                for, in plain words.
            limit: At most this many.
            exact:
                Match the whole phrase.

        Returns:
            Nothing.
        """

    properties = schema_of(fn)["properties"]
    assert properties["query"]["description"] == "What to look for, in plain words."
    assert properties["limit"]["description"] == "At most this many."
    assert properties["exact"]["description"] == "Match the whole phrase."


@pytest.mark.parametrize("header", ["Arguments:", "Parameters:", "Keyword Args:"])
def test_google_section_header_variants_describe_parameters(header: str) -> None:
    def fn(query: str) -> None:
        pass

    fn.__doc__ = f"Search.\n\n{header}\n    query: What to look for.\n"
    assert schema_of(fn)["properties"]["query"]["description"] == "What to look for."


def test_google_type_with_parentheses_and_colons_in_text_is_parsed() -> None:
    def fn(callback: str) -> None:
        """Run.

        Args:
            callback (Callable[(int), str]): Called as f(x): returns text.
        """

    description = schema_of(fn)["properties"]["callback"]["description"]
    assert description == "Called as f(x): returns text."


def test_numpy_parameters_section_describes_parameters() -> None:
    def fn(query: str, limit: int = 10, low: int = 0, high: int = 9) -> None:
        """Search.

        Parameters
        ----------
        query : str
            What to look
            for.
        limit : int, optional
            At most this many.
        low, high : int
            The bounds.

        Returns
        -------
        None
            Nothing at all.
        """

    properties = schema_of(fn)["properties"]
    assert properties["query"]["description"] == "What to look for."
    assert properties["limit"]["description"] == "At most this many."
    assert properties["low"]["description"] == "The bounds."
    assert properties["high"]["description"] == "The bounds."


def test_numpy_returns_section_does_not_describe_parameters() -> None:
    def fn(query: str, none: int = 0) -> None:
        """Search.

        Parameters
        ----------
        query : str
            What to look for.

        Returns
        -------
        none
            Nothing at all.
        """

    assert "description" not in schema_of(fn)["properties"]["none"]


def test_sphinx_param_fields_describe_parameters() -> None:
    def fn(query: str, limit: int = 10) -> None:
        """Search.

        :param query: What to look
            for.
        :param int limit: At most this many.
        :returns: Nothing.
        """

    properties = schema_of(fn)["properties"]
    assert properties["query"]["description"] == "What to look for."
    assert properties["limit"]["description"] == "At most this many."


def test_parameters_without_a_docstring_entry_have_no_description() -> None:
    def fn(query: str, limit: int = 10) -> None:
        """Search.

        Args:
            query: What to look for.
        """

    assert "description" not in schema_of(fn)["properties"]["limit"]


def test_annotated_description_wins_over_the_docstring() -> None:
    def fn(query: t.Annotated[str, "From the annotation."]) -> None:
        """Search.

        Args:
            query: From the docstring.
        """

    assert schema_of(fn)["properties"]["query"] == {
        "type": "string",
        "description": "From the annotation.",
    }


# --------------------------------------------------------------------------- type mapping


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (bytes, {"type": "string"}),
    ],
    ids=["str", "int", "float", "bool", "None", "NoneType", "bytes"],
)
def test_scalar_types_map_to_json_types(annotation: object, expected: dict[str, t.Any]) -> None:
    assert schema_for(annotation) == expected


def test_string_annotations_are_resolved() -> None:
    def fn(a: str, b: int, c: list[float], d: dict[str, bool] | None) -> None:
        pass

    properties = schema_of(fn)["properties"]
    assert properties["a"] == {"type": "string"}
    assert properties["b"] == {"type": "integer"}
    assert properties["c"] == {"type": "array", "items": {"type": "number"}}
    assert properties["d"] == {
        "anyOf": [{"type": "object", "additionalProperties": {"type": "boolean"}}, {"type": "null"}]
    }


@pytest.mark.parametrize(
    "annotation",
    [list[int], t.List[int], c.Sequence[int], t.Sequence[int], c.MutableSequence[int]],  # noqa: UP006
    ids=["list", "List", "abc.Sequence", "typing.Sequence", "MutableSequence"],
)
def test_list_like_types_map_to_arrays_of_their_items(annotation: object) -> None:
    assert schema_for(annotation) == {"type": "array", "items": {"type": "integer"}}


@pytest.mark.parametrize(
    "annotation",
    [set[str], frozenset[str], t.Set[str], c.Set[str]],  # noqa: UP006
    ids=["set", "frozenset", "typing.Set", "abc.Set"],
)
def test_set_types_map_to_arrays_of_unique_items(annotation: object) -> None:
    assert schema_for(annotation) == {
        "type": "array",
        "items": {"type": "string"},
        "uniqueItems": True,
    }


@pytest.mark.parametrize("annotation", [list, t.List, list[t.Any]], ids=["list", "List", "Any"])  # noqa: UP006
def test_bare_list_maps_to_an_array_of_anything(annotation: object) -> None:
    assert schema_for(annotation) == {"type": "array"}


def test_fixed_tuple_maps_to_prefix_items_of_that_length() -> None:
    assert schema_for(tuple[int, str]) == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    }


@pytest.mark.parametrize("annotation", [tuple[int, ...], t.Tuple[int, ...]], ids=["tuple", "Tuple"])  # noqa: UP006
def test_variadic_tuple_maps_to_an_array_of_its_items(annotation: object) -> None:
    assert schema_for(annotation) == {"type": "array", "items": {"type": "integer"}}


@pytest.mark.parametrize("annotation", [tuple, t.Tuple], ids=["tuple", "Tuple"])  # noqa: UP006
def test_bare_tuple_maps_to_an_array(annotation: object) -> None:
    assert schema_for(annotation) == {"type": "array"}


def test_empty_tuple_maps_to_an_empty_array() -> None:
    assert schema_for(tuple[()]) == {"type": "array", "maxItems": 0}


@pytest.mark.parametrize(
    "annotation",
    [dict[str, int], t.Dict[str, int], c.Mapping[str, int], c.MutableMapping[str, int]],  # noqa: UP006
    ids=["dict", "Dict", "Mapping", "MutableMapping"],
)
def test_str_keyed_mappings_map_to_objects_of_their_values(annotation: object) -> None:
    assert schema_for(annotation) == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }


@pytest.mark.parametrize("annotation", [dict, t.Dict, c.Mapping, dict[str, t.Any]], ids=str)  # noqa: UP006
def test_bare_dict_maps_to_an_object_of_anything(annotation: object) -> None:
    assert schema_for(annotation) == {"type": "object"}


@pytest.mark.parametrize(
    "annotation",
    [t.Optional[int], int | None, t.Union[int, None]],  # noqa: UP007, UP045 -- the point
    ids=["Optional", "pipe", "Union"],
)
def test_optional_maps_to_any_of_the_type_and_null(annotation: object) -> None:
    assert schema_for(annotation) == {"anyOf": [{"type": "integer"}, {"type": "null"}]}


@pytest.mark.parametrize("annotation", [t.Union[int, str], int | str], ids=["Union", "pipe"])  # noqa: UP007
def test_union_maps_to_any_of_its_members(annotation: object) -> None:
    assert schema_for(annotation) == {"anyOf": [{"type": "integer"}, {"type": "string"}]}


def test_literal_of_one_json_type_maps_to_a_typed_enum() -> None:
    assert schema_for(t.Literal["a", "b"]) == {"type": "string", "enum": ["a", "b"]}


def test_literal_of_mixed_json_types_maps_to_an_untyped_enum() -> None:
    assert schema_for(t.Literal["a", 1, None]) == {"enum": ["a", 1, None]}


def test_literal_of_enum_members_uses_their_values() -> None:
    assert schema_for(t.Literal[Color.RED]) == {"type": "string", "enum": ["red"]}


def test_enum_maps_to_an_enum_of_its_values() -> None:
    assert schema_for(Color) == {"type": "string", "enum": ["red", "green"]}


def test_int_enum_maps_to_an_integer_enum() -> None:
    assert schema_for(Priority) == {"type": "integer", "enum": [1, 2]}


def test_enum_of_mixed_value_types_maps_to_an_untyped_enum() -> None:
    assert schema_for(Mixed) == {"enum": [1, "two"]}


def test_enum_whose_values_are_not_json_uses_member_names() -> None:
    assert schema_for(Opaque) == {"type": "string", "enum": ["SOME"]}


def test_annotated_maps_to_its_type_with_a_description() -> None:
    assert schema_for(t.Annotated[int, "How many."]) == {
        "type": "integer",
        "description": "How many.",
    }


def test_annotated_metadata_that_is_not_a_string_is_ignored() -> None:
    assert schema_for(t.Annotated[int, object()]) == {"type": "integer"}


def test_attrs_class_maps_to_a_nested_object() -> None:
    assert schema_for(Filter) == {
        "type": "object",
        "properties": {
            "field": {"type": "string", "description": "The field to filter on."},
            "minimum": {"type": "integer", "description": "The smallest value kept.", "default": 0},
            "tags": {"type": "array", "items": {"type": "string"}},
            "secret": {"type": "string", "default": "hidden"},
        },
        "required": ["field"],
        "additionalProperties": False,
    }


def test_dataclass_maps_to_a_nested_object() -> None:
    assert schema_for(Point) == {
        "type": "object",
        "properties": {
            "x": {"type": "number"},
            "y": {"type": "number", "default": 0.0},
            "label": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["x"],
        "additionalProperties": False,
    }


def test_typeddict_maps_to_a_nested_object_with_all_keys_required() -> None:
    assert schema_for(Movie) == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
        "required": ["title", "year"],
        "additionalProperties": False,
    }


def test_non_total_typeddict_requires_only_its_required_keys() -> None:
    schema = schema_for(PartialMovie)
    assert schema["required"] == ["title"]
    assert schema["properties"] == {"title": {"type": "string"}, "year": {"type": "integer"}}


def test_nested_classes_inside_containers_are_expanded() -> None:
    assert schema_for(list[Point])["items"]["properties"]["x"] == {"type": "number"}


def test_new_type_maps_to_its_supertype() -> None:
    assert schema_for(UserId) == {"type": "integer"}


@pytest.mark.parametrize(
    "annotation", [t.Any, object, t.TypeVar("T"), t.TypeVar("B", bound=int)], ids=str
)
def test_any_and_unbound_type_variables_map_to_any_value_and_bounds_to_theirs(
    annotation: object,
) -> None:
    bound = getattr(annotation, "__bound__", None)
    assert schema_for(annotation) == ({"type": "integer"} if bound is int else {})


def test_missing_annotation_maps_to_any_value() -> None:
    def fn(x):  # type: ignore[no-untyped-def]
        return x

    assert schema_of(fn)["properties"]["x"] == {}


@pytest.mark.parametrize(
    ("annotation", "named"),
    [
        (Unknown, "test_schema.Unknown"),
        (c.Callable[[int], str], "collections.abc.Callable[[int], str]"),
        (list[Unknown], "test_schema.Unknown"),
        (t.Optional[Unknown], "test_schema.Unknown"),  # noqa: UP045 -- a runtime value
    ],
    ids=["class", "callable", "list-of", "optional"],
)
def test_a_required_parameter_of_an_undescribable_type_is_a_type_error_naming_both(
    annotation: object, named: str
) -> None:
    def fn(x):  # type: ignore[no-untyped-def]
        return x

    fn.__annotations__ = {"x": annotation}
    with pytest.raises(TypeError) as e:
        parameters_schema(fn, takes_ctx=False)
    assert "parameter 'x'" in str(e.value)
    assert named in str(e.value)


@dataclasses.dataclass
class Holder:
    handle: Unknown


def test_a_nested_field_of_an_undescribable_type_names_the_field() -> None:
    def fn(holder: Holder) -> None:
        pass

    with pytest.raises(TypeError, match=r"parameter 'holder' \(field Holder\.handle\)"):
        parameters_schema(fn, takes_ctx=False)


def test_a_nested_field_with_a_default_and_no_schema_is_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @dataclasses.dataclass
    class Spare:
        name: str
        spare: Unknown = dataclasses.field(default_factory=Unknown)

    with caplog.at_level("WARNING", logger="nous_tools"):
        schema = schema_for(Spare)
    assert list(schema["properties"]) == ["name"]
    assert "Spare.spare" in caplog.text


def test_a_parameter_with_a_default_and_no_schema_is_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def fn(query: str, hook: c.Callable[[], None] = print) -> None:
        pass

    with caplog.at_level("WARNING", logger="nous_tools"):
        schema = schema_of(fn)
    assert list(schema["properties"]) == ["query"]
    assert schema["additionalProperties"] is False
    assert "parameter 'hook'" in caplog.text
    assert "left out of the schema" in caplog.text


def test_an_unresolvable_annotation_is_a_type_error_naming_it() -> None:
    def fn(amount: OnlyKnownToTypeCheckers, count: int) -> None:
        pass

    with pytest.raises(TypeError, match=r"parameter 'amount'.*'OnlyKnownToTypeCheckers'"):
        parameters_schema(fn, takes_ctx=False)


def test_an_unresolvable_annotation_with_a_default_is_left_out() -> None:
    def fn(count: int, amount: OnlyKnownToTypeCheckers | None = None) -> None:
        pass

    assert list(schema_of(fn)["properties"]) == ["count"]


def test_recursive_attrs_class_is_expanded_once_and_does_not_hang() -> None:
    schema = schema_for(TreeNode)
    assert schema["properties"]["children"] == {"type": "array"}
    assert schema["properties"]["parent"] == {"anyOf": [{}, {"type": "null"}], "default": None}


def test_recursive_dataclass_is_expanded_once_and_does_not_hang() -> None:
    schema = schema_for(LinkedItem)
    assert schema["properties"]["next"]["anyOf"] == [{}, {"type": "null"}]


def test_the_same_class_twice_side_by_side_is_expanded_both_times() -> None:
    schema = schema_for(tuple[Point, Point])
    assert schema["prefixItems"][0] == schema["prefixItems"][1]
    assert schema["prefixItems"][0]["type"] == "object"


# --------------------------------------------------------------------------- object shape


def test_schema_is_a_closed_object_of_the_parameters() -> None:
    def fn(query: str, limit: int = 10) -> None:
        pass

    assert schema_of(fn) == {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
        "required": ["query"],
        "additionalProperties": False,
    }


def test_default_makes_a_parameter_optional() -> None:
    def fn(a: int, b: int = 1, *, c: int, d: int = 2) -> None:
        pass

    assert schema_of(fn)["required"] == ["a", "c"]


def test_json_serialisable_default_is_recorded_as_json() -> None:
    def fn(a: tuple[int, int] = (1, 2), b: dict[str, int] | None = None) -> None:
        pass

    properties = schema_of(fn)["properties"]
    assert properties["a"]["default"] == [1, 2]
    assert properties["b"]["default"] is None


@pytest.mark.parametrize("default", [object(), float("nan")], ids=["object", "nan"])
def test_default_that_is_not_json_is_not_recorded(default: object) -> None:
    def fn(a=default):  # type: ignore[no-untyped-def]
        return a

    schema = schema_of(fn)
    assert schema["required"] == []
    assert "default" not in schema["properties"]["a"]


def test_enum_default_is_recorded_as_its_value() -> None:
    def fn(color: Color = Color.GREEN) -> None:
        pass

    assert schema_of(fn)["properties"]["color"]["default"] == "green"


def test_kwargs_leave_additional_properties_open() -> None:
    def fn(query: str, **extra: t.Any) -> None:
        pass

    schema = schema_of(fn)
    assert "additionalProperties" not in schema
    assert list(schema["properties"]) == ["query"]
    jsonschema.validate({"query": "x", "other": 1}, schema)


def test_varargs_are_left_out() -> None:
    def fn(*args: int, query: str) -> None:
        pass

    assert list(schema_of(fn)["properties"]) == ["query"]


def test_ctx_parameter_is_left_out_when_taking_ctx() -> None:
    def fn(ctx: RunContext[Deps], query: str) -> None:
        pass

    schema = schema_of(fn, takes_ctx=True)
    assert list(schema["properties"]) == ["query"]
    assert schema["required"] == ["query"]


def test_first_parameter_is_kept_when_not_taking_ctx() -> None:
    def fn(ctx: RunContext[Deps], query: str) -> None:
        pass

    assert list(schema_of(fn, takes_ctx=False)["properties"]) == ["ctx", "query"]


def test_positional_only_ctx_is_allowed_when_taking_ctx() -> None:
    def fn(ctx: RunContext[Deps], /, query: str) -> None:
        pass

    assert list(schema_of(fn, takes_ctx=True)["properties"]) == ["query"]


def test_positional_only_parameter_raises_type_error_naming_it() -> None:
    def fn(query: str, /, limit: int = 1) -> None:
        pass

    with pytest.raises(TypeError, match=r"positional-only parameter 'query'"):
        parameters_schema(fn, takes_ctx=False)


def test_builtin_with_positional_only_parameters_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"'obj'"):
        parameters_schema(len, takes_ctx=False)


def test_taking_ctx_without_a_positional_parameter_raises_type_error() -> None:
    def fn(*, query: str) -> None:
        pass

    with pytest.raises(TypeError, match=r"no positional parameter"):
        parameters_schema(fn, takes_ctx=True)


def test_callable_without_a_signature_gets_an_open_object_schema() -> None:
    assert schema_of(type) == {"type": "object", "properties": {}, "required": []}


def test_bound_method_schema_leaves_out_self() -> None:
    assert list(schema_of(Service().lookup, takes_ctx=True)["properties"]) == ["key"]


def test_partial_schema_leaves_out_bound_positional_arguments() -> None:
    def fn(a: int, b: str, c: bool = False) -> None:
        pass

    schema = schema_of(functools.partial(fn, 1))
    assert list(schema["properties"]) == ["b", "c"]
    assert schema["properties"]["b"] == {"type": "string"}


def test_callable_instance_schema_comes_from_its_call_method() -> None:
    assert schema_of(Caller(), takes_ctx=True)["properties"] == {"name": {"type": "string"}}


def test_class_schema_comes_from_its_init_and_its_docstring() -> None:
    schema = schema_of(Filter)
    assert list(schema["properties"]) == ["field", "minimum", "tags", "secret"]
    assert schema["required"] == ["field"]
    assert schema["properties"]["field"] == {
        "type": "string",
        "description": "The field to filter on.",
    }
    assert "default" not in schema["properties"]["tags"]


# --------------------------------------------------------------------------- validity


def _everything(
    ctx: RunContext[Deps],
    a: str,
    b: list[Filter],
    c: tuple[int, Color],
    d: dict[str, Point | None],
    e: t.Literal["x", 2],
    f: t.Annotated[set[Priority], "Priorities."],
    g: Movie,
    h: PartialMovie,
    i: TreeNode,
    j: LinkedItem,
    k: tuple[()] = (),
    m: frozenset[UserId] = frozenset(),
    **extra: t.Any,
) -> None:
    """Everything at once."""


@pytest.mark.parametrize(
    ("fn", "takes_ctx"),
    [(_everything, True), (Caller(), True), (Service().lookup, True), (Filter, False)],
    ids=["everything", "instance", "method", "class"],
)
def test_generated_schemas_pass_the_draft_2020_12_metaschema(
    fn: c.Callable[..., t.Any], takes_ctx: bool
) -> None:
    jsonschema.Draft202012Validator.check_schema(parameters_schema(fn, takes_ctx=takes_ctx))


_leaf_types = st.sampled_from(
    [str, int, float, bool, None, bytes, t.Any, Color, Priority, Mixed, Filter, Point, Movie,
     TreeNode, UserId, t.Literal["a", "b"], t.Literal[1, "a"]]
)  # fmt: skip


def _composite_types(inner: st.SearchStrategy[t.Any]) -> st.SearchStrategy[t.Any]:
    return st.one_of(
        inner.map(lambda x: list[x]),
        inner.map(lambda x: set[x]),
        inner.map(lambda x: tuple[x, ...]),
        inner.map(lambda x: dict[str, x]),
        inner.map(lambda x: t.Optional[x]),  # noqa: UP045 -- built at run time from a type
        inner.map(lambda x: t.Annotated[x, "described"]),
        st.tuples(inner, inner).map(lambda xy: tuple[xy[0], xy[1]]),
        st.tuples(inner, inner).map(lambda xy: t.Union[xy[0], xy[1]]),  # noqa: UP007
    )


@given(st.recursive(_leaf_types, _composite_types, max_leaves=8))
def test_any_combination_of_supported_types_gives_a_valid_schema(annotation: object) -> None:
    schema = schema_for(annotation)
    jsonschema.Draft202012Validator.check_schema({"type": "object", "properties": {"x": schema}})
