"""Usage: immutable request/tool-call/token counts summed field by field."""

from __future__ import annotations

import typing as t

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nous_tools.usage import Usage

FIELDS = (
    "requests",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def as_tuple(usage: Usage) -> tuple[int, ...]:
    return tuple(getattr(usage, name) for name in FIELDS)


def test_fields_are_the_documented_ones() -> None:
    assert tuple(f.name for f in attrs.fields(Usage)) == FIELDS


def test_every_count_is_zero_by_default() -> None:
    assert as_tuple(Usage()) == (0,) * len(FIELDS)


def test_add_and_plus_sum_field_by_field() -> None:
    left = Usage(*range(1, 8))
    right = Usage(*range(10, 80, 10))
    expected = (11, 22, 33, 44, 55, 66, 77)
    assert as_tuple(left.add(right)) == expected
    assert as_tuple(left + right) == expected


def test_adding_something_that_is_not_a_usage_is_refused() -> None:
    with pytest.raises(TypeError, match="can only add a Usage, got int"):
        Usage().add(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Usage() + 1


def test_inc_requests_grows_requests_by_one_or_n() -> None:
    assert Usage().inc_requests().requests == 1
    assert Usage(requests=2).inc_requests(5).requests == 7
    assert as_tuple(Usage().inc_requests(3))[1:] == (0,) * (len(FIELDS) - 1)


def test_inc_tool_calls_grows_tool_calls_by_one_or_n() -> None:
    assert Usage().inc_tool_calls().tool_calls == 1
    assert Usage(tool_calls=2).inc_tool_calls(5).tool_calls == 7
    assert Usage().inc_tool_calls(3).requests == 0


def test_add_tokens_grows_total_by_input_plus_output() -> None:
    usage = Usage(input_tokens=1, output_tokens=2, total_tokens=3).add_tokens(input=10, output=5)
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (11, 7, 18)
    assert Usage().add_tokens(output=4).total_tokens == 4
    assert Usage().add_tokens().total_tokens == 0


def test_from_openai_reads_prompt_completion_and_total_tokens() -> None:
    usage = Usage.from_openai({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10})
    assert usage == Usage(requests=1, input_tokens=7, output_tokens=3, total_tokens=10)


def test_from_openai_counts_missing_or_null_fields_as_zero() -> None:
    assert Usage.from_openai({}) == Usage(requests=1)
    assert Usage.from_openai({"prompt_tokens": 7}) == Usage(requests=1, input_tokens=7)
    assert Usage.from_openai({"completion_tokens": None, "total_tokens": 4}) == Usage(
        requests=1, total_tokens=4
    )


def test_from_openai_of_none_is_one_request() -> None:
    assert Usage.from_openai(None) == Usage(requests=1)


def test_from_openai_ignores_unknown_fields() -> None:
    usage = Usage.from_openai({"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": 1}})
    assert usage == Usage(requests=1, input_tokens=1)


def test_methods_return_new_values_and_leave_the_original_unchanged() -> None:
    original = Usage(requests=1, tool_calls=1, input_tokens=1, output_tokens=1, total_tokens=2)
    before = as_tuple(original)
    results = [
        original.inc_requests(),
        original.inc_tool_calls(2),
        original.add_tokens(input=3, output=4),
        original.add(Usage(requests=9)),
        original + Usage(tool_calls=9),
    ]
    assert as_tuple(original) == before
    assert all(result is not original for result in results)
    assert all(as_tuple(result) != before for result in results)


def test_usage_is_frozen() -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Usage().requests = 1  # type: ignore[misc]


@pytest.mark.parametrize("value", [1.5, "1", True, [1]])
def test_a_non_int_count_is_refused(value: object) -> None:
    with pytest.raises(TypeError, match="Usage counts must be int"):
        Usage(requests=value)
    with pytest.raises(TypeError, match="Usage counts must be int"):
        Usage(cache_read_input_tokens=value)


def test_a_non_int_count_from_a_method_or_openai_is_refused() -> None:
    with pytest.raises(TypeError, match="Usage counts must be int"):
        Usage().inc_requests(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Usage counts must be int"):
        Usage().add_tokens(input=0.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Usage counts must be int"):
        Usage.from_openai({"prompt_tokens": "7"})


def test_equal_usages_are_equal_and_hash_alike() -> None:
    assert Usage(requests=1) == Usage().inc_requests()
    assert hash(Usage(requests=1)) == hash(Usage().inc_requests())
    assert Usage(requests=1) != Usage(tool_calls=1)


counts = st.integers(min_value=0, max_value=10**15)
usages = st.builds(Usage, **t.cast("dict[str, t.Any]", {name: counts for name in FIELDS}))


@given(usages, usages, usages)
def test_addition_is_associative(a: Usage, b: Usage, c: Usage) -> None:
    assert (a + b) + c == a + (b + c)


@given(usages, usages)
def test_addition_is_commutative(a: Usage, b: Usage) -> None:
    assert a + b == b + a


@given(usages)
def test_the_empty_usage_is_the_identity(a: Usage) -> None:
    assert a + Usage() == a
    assert Usage() + a == a


@given(usages, usages)
def test_addition_sums_each_field(a: Usage, b: Usage) -> None:
    assert as_tuple(a + b) == tuple(x + y for x, y in zip(as_tuple(a), as_tuple(b), strict=True))
