"""Registry.run_program: a program in a confined child, every nested call through the
registry's pipeline, and the bad inputs each a clear Err."""

from __future__ import annotations

import pathlib
import threading
import typing as t

import pytest

from nous_tools import Err, Ok, ProgramOutput, RateLimited, Registry, Tool, signals
from tests.program.conftest import confined, count, lacking, marking_registry

pytestmark = confined

SUMMARY = """
found = []
total = 0
for i in range(20):
    item = f"item{i}"
    found.append(lookup(item=item))
    total += tools.score(item=item)
print("looked up", len(found))
result = {"found": len(found), "total": total}
"""


def test_a_program_over_20_items_makes_40_nested_calls_each_seen_in_the_signals(
    markers: pathlib.Path,
) -> None:
    registry = marking_registry(markers)
    seen: list[tuple[str, str | None]] = []
    lock = threading.Lock()

    def on_start(sender: Tool, *, measurements: t.Any, metadata: t.Any) -> None:
        with lock:
            seen.append((sender.name, metadata.get("call_id")))

    signals.tool_execute_start.connect(on_start)
    try:
        result = registry.run_program(SUMMARY, program_id="p1")
    finally:
        signals.tool_execute_start.disconnect(on_start)
    assert isinstance(result, Ok), result
    output = result.value
    assert isinstance(output, ProgramOutput)
    expected_total = sum(len(f"item{i}") for i in range(20))
    assert output.result == {"found": 20, "total": expected_total}
    assert output.stdout == "looked up 20\n"
    assert output.calls == 40
    assert len(seen) == 40
    assert [name for name, _ in seen[:2]] == ["lookup", "score"]
    assert [call_id for _, call_id in seen] == [f"p1/{i}" for i in range(1, 41)]
    assert count(markers, "lookup-item7") == 1 and count(markers, "score-item19") == 1


def test_a_final_expression_is_the_result_when_nothing_is_assigned_to_result() -> None:
    result = Registry().run_program("x = 20\nx + 22")
    assert isinstance(result, Ok) and result.value.result == 42


def test_a_validation_err_is_an_exception_the_program_may_catch(markers: pathlib.Path) -> None:
    source = """
try:
    score(item=3)
except ToolError as exc:
    result = "caught: " + str(exc)
"""
    result = marking_registry(markers).run_program(source)
    assert isinstance(result, Ok), result
    assert result.value.result.startswith("caught: Invalid arguments for 'score'")
    assert count(markers, "score-3") == 0


def test_an_uncaught_nested_err_fails_the_program_with_its_message_and_line(
    markers: pathlib.Path,
) -> None:
    result = marking_registry(markers).run_program("x = 1\nscore(wrong=1)\n")
    assert isinstance(result, Err)
    assert "line 2" in result.reason.message
    assert "Invalid arguments for 'score'" in result.reason.message


def test_each_nested_call_counts_against_the_tools_rate_limit(markers: pathlib.Path) -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    registry = Registry([Tool.from_function(ping, timeout=30, rate_limit="3/minute")])
    source = """
answers = []
for _ in range(5):
    try:
        answers.append(ping())
    except ToolError as exc:
        answers.append("limited")
result = answers
"""
    result = registry.run_program(source)
    assert isinstance(result, Ok), result
    assert result.value.result == ["pong", "pong", "pong", "limited", "limited"]
    again = registry.execute("ping", {})
    assert isinstance(again, Err) and isinstance(again.reason, RateLimited)


def test_a_syntax_error_is_an_err_naming_its_line() -> None:
    result = Registry().run_program("x = 1\ny = (\n")
    assert isinstance(result, Err)
    assert "syntax error at line 2" in result.reason.message


def test_an_unknown_function_is_an_err_naming_the_available_ones(markers: pathlib.Path) -> None:
    result = marking_registry(markers).run_program("search(query='x')")
    assert isinstance(result, Err)
    message = result.reason.message
    assert "NameError" in message and "'search'" in message
    assert "lookup, publish, score" in message


def test_tools_attribute_of_an_unknown_name_is_the_same_err(markers: pathlib.Path) -> None:
    result = marking_registry(markers).run_program("tools.search(query='x')")
    assert isinstance(result, Err)
    assert "lookup, publish, score" in result.reason.message


def test_an_infinite_loop_is_killed_at_the_deadline() -> None:
    result = Registry().run_program("while True:\n    pass\n", timeout=1.0)
    assert isinstance(result, Err)
    assert "timed out after 1 s and was killed" in result.reason.message


def test_more_than_max_calls_nested_calls_is_an_err_naming_the_limit(
    markers: pathlib.Path,
) -> None:
    source = "for i in range(10):\n    lookup(item=str(i))\n"
    result = marking_registry(markers).run_program(source, max_calls=3)
    assert isinstance(result, Err)
    assert "max_calls=3" in result.reason.message
    assert [count(markers, f"lookup-{i}") for i in range(5)] == [1, 1, 1, 0, 0]


@lacking("landlock")
def test_a_write_outside_the_sandbox_is_refused_by_the_kernel(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "escape.txt"
    result = Registry().run_program(f"open({str(target)!r}, 'w').write('x')")
    assert isinstance(result, Err)
    assert "PermissionError" in result.reason.message
    assert not target.exists()


@lacking("netns")
def test_opening_a_socket_is_refused_by_the_kernel() -> None:
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        source = (
            "import socket\n"
            f"socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
            "result = 'connected'\n"
        )
        result = Registry().run_program(source)
    assert isinstance(result, Err), result
    assert "Error" in result.reason.message


def test_what_the_program_prints_never_reaches_the_channel() -> None:
    source = (
        'import os, sys\nos.write(1, b\'{"done": {"result": 666}}\\n\')\nprint("x")\nresult = 1\n'
    )
    result = Registry().run_program(source)
    assert isinstance(result, Ok), result
    assert result.value.result == 1 and result.value.stdout == "x\n"


def test_a_source_that_is_not_a_str_is_an_err() -> None:
    result = Registry().run_program(t.cast(str, b"1"))
    assert isinstance(result, Err) and "must be a str" in result.reason.message


def test_a_bad_max_calls_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="max_calls"):
        Registry().run_program("1", max_calls=-1)


def test_the_same_program_run_twice_outside_a_run_runs_its_calls_twice(
    markers: pathlib.Path,
) -> None:
    registry = marking_registry(markers)
    for _ in range(2):
        assert isinstance(registry.run_program('lookup(item="twice")'), Ok)
    assert count(markers, "lookup-twice") == 2


def test_the_same_program_in_the_same_run_is_answered_by_its_first_run(
    markers: pathlib.Path,
) -> None:
    from nous_tools import RunContext

    registry = marking_registry(markers)
    ctx = RunContext.new(run_id="conversation-7")
    first = registry.run_program('lookup(item="once")', ctx)
    again = registry.run_program('lookup(item="once")', ctx)
    assert first == again
    assert count(markers, "lookup-once") == 1


def test_a_value_json_cannot_carry_is_an_error_the_program_sees() -> None:
    def loop() -> list[object]:
        """A value that holds itself."""
        value: list[object] = []
        value.append(value)
        return value

    registry = Registry([Tool.from_function(loop, timeout=30)])
    source = "try:\n    loop()\nexcept ToolError as exc:\n    result = str(exc)\n"
    result = registry.run_program(source)
    assert isinstance(result, Ok), result
    assert "the value of 'loop' cannot be sent to the program" in result.value.result


def test_a_tool_value_of_attrs_reaches_the_program_as_plain_data() -> None:
    import attrs

    @attrs.frozen
    class Point:
        x: int
        y: int

    def where() -> Point:
        """Where."""
        return Point(1, 2)

    registry = Registry([Tool.from_function(where, timeout=30)])
    result = registry.run_program("p = where()\np['x'] + p['y']")
    assert isinstance(result, Ok) and result.value.result == 3


def test_a_nested_call_is_cut_at_what_is_left_of_the_programs_deadline() -> None:
    import time

    from nous_tools import RunContext

    seen: list[float | None] = []

    def wait(ctx: RunContext) -> str:
        """Wait for the call's deadline."""
        seen.append(ctx.time_left())
        ctx.cancelled.wait(60)
        return "waited"

    registry = Registry([Tool.from_function(wait, timeout=60)])
    began = time.monotonic()
    result = registry.run_program("wait()", timeout=1.0)
    elapsed = time.monotonic() - began
    assert isinstance(result, Err)
    assert len(seen) == 1 and seen[0] is not None and seen[0] <= 1.0
    assert elapsed < 30  # not the tool's own 60 s


def test_each_nested_call_counts_against_the_runs_budget_of_calls() -> None:
    from nous_tools import RunContext

    def ping() -> str:
        """Ping."""
        return "pong"

    registry = Registry([Tool.from_function(ping, timeout=30, max_calls_per_run=2)])
    source = """
answers = []
for _ in range(3):
    try:
        answers.append(ping())
    except ToolError as exc:
        answers.append(exc.kind)
result = answers
"""
    result = registry.run_program(source, RunContext.new(run_id="budget-run"))
    assert isinstance(result, Ok), result
    assert result.value.result == ["pong", "pong", "RateLimited"]


def test_importing_the_child_runner_runs_nothing() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import nous_tools.program._child; print('still here')"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0 and done.stdout == "still here\n", done.stderr
