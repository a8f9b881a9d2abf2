"""Validation that no argument can turn against the process (issue 21, item 1).

Patterns are matched in linear time (a schema ``pattern`` once froze every deadline
in the process), a pattern that needs backtracking is refused from an untrusted
schema and bounded in a trusted one, and validation and conversion count inside
the call's deadline.
"""

import dataclasses
import subprocess
import sys
import textwrap
import typing as t

import pytest

from nous_tools import Err, Ok, Registry, RunContext, Tool, ToolExecutor, ToolTimeout, execute
from nous_tools.executor import _attempts, _batch, _call, _handoff
from nous_tools.schema._validation import BACKTRACK_LIMIT, ArgumentValidator, check_schema

REDOS: dict[str, t.Any] = {
    "type": "object",
    "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
}


def run_program(program: str) -> list[str]:
    """Run ``program`` in a fresh interpreter; its output lines. A generous bound
    ends it if it hangs (before the fix, one match took hours)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_catastrophic_pattern_answers_at_once_and_holds_no_other_call() -> None:
    # Under Python's backtracking re, each of these matches would take about 9 hours
    # holding the GIL, and the other thread's 0.3 s call could not come back.
    out = run_program(
        """
        import threading
        from nous_tools import Registry, Tool

        started, release, done = threading.Event(), threading.Event(), threading.Event()

        def slow():
            started.set()
            release.wait(60)
            return "late"

        registry = Registry([
            Tool(name="redos", function=lambda **kw: "ran", timeout=1, parameters={
                "type": "object",
                "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}),
            Tool(name="slow", function=slow, timeout=0.3, retries=0),
        ])
        second = {}

        def call_slow():
            second["result"] = registry.execute("slow", {})
            done.set()

        thread = threading.Thread(target=call_slow)
        thread.start()
        started.wait(60)
        answers = set()
        while True:  # validate the hostile text until the other call has answered
            answers.add(registry.execute("redos", {"s": "a" * 40 + "!"}).reason.message)
            if done.is_set():
                break
        release.set()
        thread.join(60)
        result = second["result"]
        print(type(result).__name__, type(result.reason).__name__)
        print(*sorted(answers), sep="\\n")
        """
    )
    assert out[0] == "Err ToolTimeout"  # the 0.3 s call answered at its deadline
    assert out[1:] == [
        "Invalid arguments for 'redos': Invalid values: s: "
        '"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!" does not match "^(a+)+$"'
    ]


def test_a_catastrophic_pattern_in_pattern_properties_or_property_names_is_linear() -> None:
    out = run_program(
        """
        from nous_tools.schema._validation import ArgumentValidator

        hostile = "a" * 40 + "!"
        keys = ArgumentValidator({"patternProperties": {"^(a+)+$": {"type": "integer"}},
                                  "additionalProperties": False})
        names = ArgumentValidator({"propertyNames": {"pattern": "^(a|aa)+$"}})
        print(keys.validate({hostile: 1}).original_error[0])
        print(names.validate({hostile: 1}).original_error[0])
        print(keys.validate({"aaa": 1}), names.validate({"aaaa": 1}))
        """
    )
    assert out == ["invalid", "invalid", "None None"]


def test_a_trusted_backtracking_pattern_gives_up_within_its_bound() -> None:
    out = run_program(
        """
        from nous_tools.schema._validation import ArgumentValidator

        validator = ArgumentValidator(
            {"properties": {"s": {"type": "string", "pattern": "^(a|a)+\\\\1b"}}})
        print(validator.validate({"s": "a" * 40 + "!"}).message)
        print(validator.validate({"s": "aab"}))
        """
    )
    assert out == [
        f"Invalid values: s: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!' could not be matched "
        f"within {BACKTRACK_LIMIT} backtracking steps",
        "None",
    ]


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        (
            {"properties": {"p": {"type": "string", "pattern": "^(?=.*\\d).{8,}$"}}},
            "properties.p.pattern",
        ),
        ({"properties": {"p": {"type": "string", "pattern": "^(a)\\1$"}}}, "properties.p.pattern"),
        ({"patternProperties": {"(?<!x)y": {}}}, "patternProperties"),
        ({"propertyNames": {"pattern": "^(?!tmp)"}}, "propertyNames.pattern"),
    ],
    ids=["lookahead", "backreference", "lookbehind-key", "negative-lookahead-names"],
)
def test_an_untrusted_schema_may_not_use_a_pattern_that_needs_backtracking(
    schema: dict[str, t.Any], where: str
) -> None:
    with pytest.raises(ValueError) as refused:
        Tool(name="remote", function=lambda **kw: None, parameters=schema, trusted_schema=False)
    message = str(refused.value)
    assert message.startswith("Tool option 'parameters' is not a valid JSON Schema: ")
    assert "needs a backtracking regular expression engine (lookaround or a backreference)" in (
        message
    )
    assert "untrusted schema" in message and f"(at path {where}" in message
    with pytest.raises(ValueError, match="untrusted schema"):
        check_schema(schema, trusted=False)
    with pytest.raises(ValueError, match="untrusted schema"):
        ArgumentValidator(schema, trusted=False)


def test_a_trusted_schema_keeps_its_lookaround_patterns() -> None:
    schema = {"properties": {"p": {"type": "string", "pattern": "^(?=.*\\d)(?=.*[a-z]).{8,}$"}}}
    tool = Tool(name="local", function=lambda **kw: "ok", parameters=schema, timeout=None)
    assert execute(tool, {"p": "abcdefg1"}) == Ok("ok")
    failed = execute(tool, {"p": "abcdefgh"})
    assert isinstance(failed, Err)
    assert failed.reason.message.startswith("Invalid arguments for 'local': Invalid values: p: ")


def test_an_untrusted_schema_keeps_every_pattern_that_needs_no_backtracking() -> None:
    schema = {
        "properties": {"name": {"type": "string", "pattern": "^\\p{Lu}\\p{L}*$"}},
        "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    tool = Tool(
        name="remote",
        function=lambda **kw: "ok",
        parameters=schema,
        timeout=None,
        trusted_schema=False,
    )
    assert execute(tool, {"name": "Zoë", "x-count": 2}) == Ok("ok")
    failed = execute(tool, {"name": "zoë"})
    assert isinstance(failed, Err) and "does not match" in failed.reason.message


def test_the_trust_of_a_schema_is_part_of_what_tools_share() -> None:
    schema = {"properties": {"p": {"type": "string", "pattern": "^a"}}}
    trusted = Tool(name="a", function=lambda **kw: None, parameters=schema)
    untrusted = Tool(name="b", function=lambda **kw: None, parameters=schema, trusted_schema=False)
    assert trusted.validator is not untrusted.validator


def test_trusted_schema_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="Tool option 'trusted_schema' must be True or False"):
        Tool(name="x", function=len, trusted_schema=t.cast(t.Any, "no"))


# -- validation and conversion count inside the deadline -------------------------------


class FakeClock:
    """The executor's clock (in each module of its pipeline), jumping ahead by ``jump``
    seconds while an argument is converted (at the moment recorded in ``jumped_at``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.real = _call.monotonic
        self.offset = 0.0
        self.jumped_at: float | None = None
        for module in (_attempts, _handoff, _call, _batch):
            monkeypatch.setattr(module, "monotonic", self)

    def __call__(self) -> float:
        return self.real() + self.offset

    def jump(self, seconds: float) -> None:
        self.jumped_at = self()
        self.offset += seconds


def slow_to_convert(clock: FakeClock, seconds: float) -> type:
    @dataclasses.dataclass
    class Slow:
        name: str

        def __post_init__(self) -> None:  # runs while the argument is converted
            clock.jump(seconds)

    return Slow


def test_a_call_whose_validation_and_conversion_outlast_its_timeout_is_a_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock(monkeypatch)
    ran: list[object] = []
    slow = slow_to_convert(clock, 10)

    def book(room: slow) -> str:  # type: ignore[valid-type]
        ran.append(room)
        return "booked"

    tool = Tool.from_function(book, timeout=5, retries=2)
    result = execute(tool, {"room": {"name": "Ada"}})
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert result.reason.timeout == 5 and result.reason.attempt == 1
    assert "validating and converting its arguments took the whole deadline" in str(result.reason)
    assert ran == []  # the tool never ran, and a timeout is never retried


@pytest.mark.parametrize("batch", [False, True], ids=["execute", "execute_many"])
def test_the_first_attempts_deadline_counts_from_before_validation(
    monkeypatch: pytest.MonkeyPatch, batch: bool
) -> None:
    clock = FakeClock(monkeypatch)
    slow = slow_to_convert(clock, 2)

    def book(ctx: RunContext[None], room: slow) -> float:  # type: ignore[valid-type]
        assert ctx.deadline is not None
        return ctx.deadline

    tool = Tool.from_function(book, timeout=30)
    with ToolExecutor(max_workers=2) as executor:
        if batch:
            [result] = executor.execute_many([(tool, {"room": {"name": "Ada"}})])
        else:
            result = executor.execute(tool, {"room": {"name": "Ada"}})
    assert isinstance(result, Ok), result
    assert clock.jumped_at is not None
    # Set before the conversion began: at most 30 s after the clock's jump, not 32.
    assert result.value <= clock.jumped_at + 30


def test_a_registry_call_also_counts_validation_inside_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock(monkeypatch)
    slow = slow_to_convert(clock, 10)

    def book(room: slow) -> str:  # type: ignore[valid-type]
        return "booked"

    registry = Registry([Tool.from_function(book, timeout=5)])
    result = registry.execute("book", {"room": {"name": "Ada"}})
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)


def test_arguments_far_deeper_than_any_schema_never_crash_the_process() -> None:
    out = run_program(
        """
        import threading
        from nous_tools.schema._validation import ArgumentValidator

        deep = []
        for _ in range(300_000):
            deep = [deep]
        flat = ArgumentValidator({"properties": {"a": {"type": "array"}, "b": {"type": "string"}}})
        typed = ArgumentValidator({"properties": {"a": {"type": "string"}}})
        tree = ArgumentValidator({
            "$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "properties": {"a": {"$ref": "#/$defs/node"}},
        })
        answers = []

        def validate():  # in a thread of its own, as in a pool worker
            answers.append(flat.validate({"a": deep, "b": "x"}))
            answers.append(flat.validate({"a": deep, "b": 1}).message)
            answers.append(typed.validate({"a": deep}).message)
            answers.append(tree.validate({"a": deep}).message)
            answers.append(tree.validate({"a": [[[]]]}))

        thread = threading.Thread(target=validate)
        thread.start()
        thread.join()
        print(*answers, sep="\\n")
        """
    )
    assert out == [
        "None",
        "Type mismatch: b: expected string, got integer",
        "Type mismatch: a: expected string, got array",
        "Invalid values: (root): arguments nested too deeply to validate",
        "None",
    ]
