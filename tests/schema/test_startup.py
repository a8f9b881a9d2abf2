"""Start-up: what ``import nous_tools`` and making the first tool leave for later.

A tool made of a function has a schema nous_tools wrote itself: it is compiled
when it first checks arguments, so making the tool imports no jsonschema-rs. A
schema given by hand, or one with parts from elsewhere (pydantic, ``Annotated``
constraints), is still checked when the tool is made.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import typing as t

import pytest

import nous_tools
from nous_tools import Err, Ok, Tool, execute
from nous_tools.schema import _validation

FIRST_TOOL = """
import sys
import nous_tools

def add(a: int, b: int = 0) -> int:
    '''Add two numbers.'''
    return a + b

add_tool = nous_tools.Tool.from_function(add)
later = ("jsonschema_rs", "datetime", "decimal", "uuid", "typing_extensions", "nous_tools.sandbox",
         "nous_tools.asking", "nous_tools.context_update", "nous_tools.providers")
print(sorted(name for name in later if name in sys.modules))
print(nous_tools.execute(add_tool, {"a": "x"}).reason.message)
print("jsonschema_rs" in sys.modules)
"""


def _run(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_making_a_tool_of_a_function_leaves_the_validator_and_rare_modules_for_later() -> None:
    loaded, message, validated = _run(FIRST_TOOL)
    assert loaded == "[]"
    assert message == "Invalid arguments for 'add': Type mismatch: a: expected integer, got string"
    assert validated == "True"


def _distinct_function(name: str) -> t.Callable[..., t.Any]:
    # A parameter name no other test uses: its schema is not shared with theirs.
    namespace: dict[str, t.Any] = {}
    exec(f"def {name}({name}_count: int, {name}_label: str = 'x') -> int:\n    return 1", namespace)
    return t.cast("t.Callable[..., t.Any]", namespace[name])


def test_a_schema_made_from_a_signature_is_compiled_at_its_first_check() -> None:
    made = Tool.from_function(_distinct_function("compiled_late"), timeout=None)
    validator = made.validator
    assert validator is not None
    assert validator._native is None
    assert execute(made, {"compiled_late_count": 2}) == Ok(1)
    assert validator._native is not None
    failed = execute(made, {"compiled_late_count": "two"})
    assert isinstance(failed, Err)
    assert "compiled_late_count: expected integer, got string" in failed.reason.message


def test_the_first_checks_from_many_threads_compile_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made = Tool.from_function(_distinct_function("raced"), timeout=None)
    validator = made.validator
    assert validator is not None
    compiled: list[object] = []
    real = _validation._compile

    def counted(*args: t.Any) -> t.Any:
        compiled.append(args)
        return real(*args)

    monkeypatch.setattr(_validation, "_compile", counted)
    start = threading.Barrier(8)
    failures: list[object] = []

    def check(number: int) -> None:
        start.wait()
        arguments = {"raced_count": number} if number % 2 else {"raced_count": "no"}
        failures.append(validator.validate(arguments))

    threads = [threading.Thread(target=check, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(compiled) == 1
    assert sum(failure is None for failure in failures) == 4
    assert all(f is None or "expected integer" in f.message for f in failures)  # type: ignore[attr-defined]


class _Pattern:
    """Stands for an ``annotated_types``/pydantic constraint with a ``pattern``."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern


def test_a_borrowed_pattern_is_still_checked_when_the_tool_is_made() -> None:
    def find(code: t.Annotated[str, _Pattern("(")]) -> str:
        return code

    with pytest.raises(ValueError, match="parameters"):
        Tool.from_function(find)


def test_an_untrusted_lookaround_in_an_annotation_is_refused_when_the_tool_is_made() -> None:
    def find(code: t.Annotated[str, _Pattern("(?=a)a")]) -> str:
        return code

    assert Tool.from_function(find).validator is not None  # trusted: bounded backtracking
    with pytest.raises(ValueError, match="backtracking"):
        Tool.from_function(find, trusted_schema=False)


def test_a_schema_given_by_hand_is_still_checked_when_the_tool_is_made() -> None:
    def shout(text: str) -> str:
        return text

    with pytest.raises(ValueError, match="objekt"):
        Tool.from_function(shout, parameters={"type": "objekt"})


def test_the_rarely_used_names_are_still_the_package_s_own() -> None:
    from nous_tools import SandboxPolicy, ToolCallResults, execute_tool_calls

    assert nous_tools.SandboxPolicy is SandboxPolicy
    assert ToolCallResults.__module__ == "nous_tools.providers._tool_calls"
    assert callable(execute_tool_calls)
    assert set(nous_tools.__all__) <= set(dir(nous_tools))
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        nous_tools.Nothing  # noqa: B018
