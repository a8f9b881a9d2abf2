"""Approvals inside a program: a handler asked and the program goes on; without one the
program pauses, and its resolve re-runs it with every completed nested call replayed,
not run again (from the journal, or without one from this process's record)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import typing as t

import pytest

from nous_tools import (
    BatchAlreadyResolved,
    Edit,
    Err,
    Ok,
    ProgramDiverged,
    ProgramPaused,
    RunContext,
    SQLiteJournal,
)
from tests.program.conftest import confined, count, marking_registry

pytestmark = confined

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRASH = ROOT / "tests" / "support" / "program_crash.py"

PUBLISHING = """
a = lookup(item="a")
b = score(item="b")
try:
    p = publish(text="hello")
except ToolError as exc:
    p = "refused: " + str(exc)
c = lookup(item="c")
result = [a, b, p, c]
"""


@pytest.fixture(params=["journal", "no-journal"])
def journal_kind(request: pytest.FixtureRequest) -> str:
    return t.cast(str, request.param)


def registry_for(kind: str, markers: pathlib.Path, tmp_path: pathlib.Path) -> t.Any:
    if kind == "journal":
        return marking_registry(markers, journal=SQLiteJournal(str(tmp_path / "calls.db")))
    return marking_registry(markers)


def test_a_nested_ask_call_asks_the_handler_and_the_program_goes_on(
    markers: pathlib.Path,
) -> None:
    asked: list[tuple[str, str | None]] = []

    def handler(request: t.Any) -> str:
        asked.append((request.name, request.id))
        return "approve"

    ctx = RunContext.new(approval_handler=handler)
    result = marking_registry(markers).run_program(PUBLISHING, ctx, program_id="h")
    assert isinstance(result, Ok), result
    assert result.value.result == ["found a", 1, "published hello", "found c"]
    assert asked == [("publish", "h/3")]
    assert count(markers, "publish-hello") == 1


def test_without_a_handler_the_program_pauses_and_approving_replays_the_earlier_calls(
    markers: pathlib.Path, tmp_path: pathlib.Path, journal_kind: str
) -> None:
    registry = registry_for(journal_kind, markers, tmp_path)
    paused = registry.run_program(PUBLISHING, program_id="prog")
    assert isinstance(paused, ProgramPaused), paused
    assert paused.ids == ["prog/3"]
    assert paused.pending_summary()[0]["tool"] == "publish"
    assert paused.pending_summary()[0]["arguments"] == {"text": "hello"}
    assert count(markers, "publish-hello") == 0
    assert count(markers, "lookup-c") == 0  # stopped at the waiting call

    result = paused.resolve({"prog/3": "approve"})
    assert isinstance(result, Ok), result
    assert result.value.result == ["found a", 1, "published hello", "found c"]
    assert count(markers, "lookup-a") == 1  # replayed, not run again
    assert count(markers, "score-b") == 1
    assert count(markers, "publish-hello") == 1  # the approved call, once
    assert count(markers, "lookup-c") == 1


def test_a_paused_program_resolves_once(markers: pathlib.Path, tmp_path: pathlib.Path) -> None:
    paused = registry_for("journal", markers, tmp_path).run_program(PUBLISHING)
    assert isinstance(paused, ProgramPaused)
    paused.resolve({paused.ids[0]: "approve"})
    with pytest.raises(BatchAlreadyResolved):
        paused.resolve({paused.ids[0]: "approve"})
    assert count(markers, "publish-hello") == 1


def test_a_rejected_nested_call_is_an_exception_the_program_sees(
    markers: pathlib.Path, tmp_path: pathlib.Path, journal_kind: str
) -> None:
    registry = registry_for(journal_kind, markers, tmp_path)
    paused = registry.run_program(PUBLISHING, program_id="rej")
    assert isinstance(paused, ProgramPaused)
    result = paused.resolve({"rej/3": "reject"})
    assert isinstance(result, Ok), result
    assert (
        result.value.result[2] == "refused: Tool 'publish' was rejected by the user and did not run"
    )
    assert count(markers, "publish-hello") == 0
    assert count(markers, "lookup-a") == 1 and count(markers, "lookup-c") == 1


def test_an_unknown_id_or_decision_is_a_value_error_and_runs_nothing(
    markers: pathlib.Path,
) -> None:
    paused = marking_registry(markers).run_program(PUBLISHING, program_id="bad")
    assert isinstance(paused, ProgramPaused)
    with pytest.raises(ValueError, match="not a nested call waiting"):
        paused.resolve({"bad/1": "approve"})
    with pytest.raises(ValueError, match="'approve', 'reject' or an Edit"):
        paused.resolve({"bad/3": "maybe"})
    with pytest.raises(ValueError, match="as a mapping"):
        paused.resolve({"bad/3": Edit(t.cast(t.Any, ["not", "a", "mapping"]))})
    assert count(markers, "publish-hello") == 0


def test_a_rerun_that_asks_another_call_at_a_recorded_position_diverges(
    markers: pathlib.Path, tmp_path: pathlib.Path, journal_kind: str
) -> None:
    choice = tmp_path / "choice.txt"
    choice.write_text("a")
    source = f"""
item = open({str(choice)!r}).read()
first = lookup(item=item)
published = publish(text="hello")
result = [first, published]
"""
    registry = registry_for(journal_kind, markers, tmp_path)
    paused = registry.run_program(source, program_id="div")
    assert isinstance(paused, ProgramPaused)
    choice.write_text("z")  # the program is not deterministic: it asks another call
    result = paused.resolve({"div/2": "approve"})
    assert isinstance(result, Err)
    assert isinstance(result.reason, ProgramDiverged)
    message = result.reason.message
    assert "#1" in message and "lookup" in message and "item='z'" in message
    assert count(markers, "lookup-z") == 0
    assert count(markers, "publish-hello") == 0


def test_a_rerun_that_asks_another_call_at_the_approved_position_diverges(
    markers: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    text = tmp_path / "text.txt"
    text.write_text("hello")
    source = f"publish(text=open({str(text)!r}).read())"
    paused = marking_registry(markers).run_program(source, program_id="div2")
    assert isinstance(paused, ProgramPaused)
    text.write_text("goodbye")
    result = paused.resolve({"div2/1": "approve"})
    assert isinstance(result, Err) and isinstance(result.reason, ProgramDiverged)
    assert "publish(text='hello')" in result.reason.message
    assert "publish(text='goodbye')" in result.reason.message
    assert count(markers, "publish-hello") == 0 and count(markers, "publish-goodbye") == 0


@pytest.mark.slow
def test_a_program_whose_parent_was_killed_resumes_with_no_nested_call_run_twice(
    markers: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    journal = tmp_path / "calls.db"

    def run(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(CRASH), str(journal), str(markers), mode],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=str(ROOT),
            check=False,
        )

    crashed = run("crash")
    assert crashed.returncode == -9, crashed.stderr
    assert [count(markers, n) for n in ("lookup-a", "score-b", "crash-c", "lookup-d")] == [
        1,
        1,
        1,
        0,
    ]
    resumed = run("resume")
    assert resumed.returncode == 0, resumed.stderr
    outcome = json.loads(resumed.stdout)
    # The call that was running when the parent died is not run again: nobody can
    # know its outcome (its tool is not idempotent), and the program is told so.
    assert outcome == {"ok": ["found a", 1, "OutcomeUnknown", "found d"]}
    assert [count(markers, n) for n in ("lookup-a", "score-b", "crash-c", "lookup-d")] == [
        1,
        1,
        1,
        1,
    ]


def test_a_paused_program_crosses_requests_signed_and_refuses_a_change(
    markers: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    registry = registry_for("journal", markers, tmp_path)
    paused = registry.run_program(PUBLISHING, RunContext.new(run_id="r-9"))
    assert isinstance(paused, ProgramPaused)
    wire = json.loads(json.dumps(paused.to_dict(secret="k")))
    back = ProgramPaused.from_dict(wire, registry, secret="k")
    assert back.ids == paused.ids and back.run_id == "r-9"
    assert back.sandbox == paused.sandbox

    changed = dict(wire, source=PUBLISHING.replace("hello", "evil"))
    with pytest.raises(ValueError, match="signature does not match"):
        ProgramPaused.from_dict(changed, registry, secret="k")
    with pytest.raises(ValueError, match="no secret"):
        ProgramPaused.from_dict(wire, registry)

    result = back.resolve({back.ids[0]: "approve"})
    assert isinstance(result, Ok), result
    assert result.value.result[2] == "published hello"
    assert count(markers, "lookup-a") == 1 and count(markers, "publish-hello") == 1
    with pytest.raises(BatchAlreadyResolved):  # the original, once the copy was used
        paused.resolve({paused.ids[0]: "approve"})


# -- a nested call approved with changed arguments (an Edit) --------------------------

TWO_PUBLISHES = """
a = lookup(item="a")
one = publish(text="one")
two = publish(text="two")
result = [a, one, two]
"""


def test_an_edited_nested_call_runs_with_the_edited_arguments(
    markers: pathlib.Path, tmp_path: pathlib.Path, journal_kind: str
) -> None:
    registry = registry_for(journal_kind, markers, tmp_path)
    paused = registry.run_program(PUBLISHING, program_id="ed")
    assert isinstance(paused, ProgramPaused)
    result = paused.resolve({"ed/3": Edit({"text": "edited"})})
    assert isinstance(result, Ok), result
    assert result.value.result == ["found a", 1, "published edited", "found c"]
    assert count(markers, "publish-edited") == 1
    assert count(markers, "publish-hello") == 0  # the asked arguments never ran
    assert count(markers, "lookup-a") == 1 and count(markers, "lookup-c") == 1


def test_an_edit_the_schema_refuses_is_the_nested_calls_validation_error_in_the_program(
    markers: pathlib.Path, tmp_path: pathlib.Path, journal_kind: str
) -> None:
    registry = registry_for(journal_kind, markers, tmp_path)
    paused = registry.run_program(PUBLISHING, program_id="bad-edit")
    assert isinstance(paused, ProgramPaused)
    result = paused.resolve({"bad-edit/3": Edit({"text": 5})})
    assert isinstance(result, Ok), result
    refused = result.value.result[2]
    assert refused.startswith("refused: Invalid arguments for 'publish'"), refused
    assert count(markers, "publish-5") == 0 and count(markers, "publish-hello") == 0
    assert count(markers, "lookup-c") == 1  # the program caught it and went on


def test_an_edited_call_is_accepted_at_its_position_on_every_later_rerun(
    markers: pathlib.Path, tmp_path: pathlib.Path, journal_kind: str
) -> None:
    registry = registry_for(journal_kind, markers, tmp_path)
    paused = registry.run_program(TWO_PUBLISHES, program_id="later")
    assert isinstance(paused, ProgramPaused) and paused.ids == ["later/2"]
    again = paused.resolve({"later/2": Edit({"text": "uno"})})
    # the re-run got past the edited call (the program asked "one" there) to the next
    assert isinstance(again, ProgramPaused), again
    assert again.ids == ["later/3"]
    if journal_kind == "journal":  # across a request: the edit is carried, signed
        wire = json.loads(json.dumps(again.to_dict(secret="k")))
        forged = json.loads(json.dumps(wire))
        forged["edited"][0]["arguments"] = {"text": "evil"}
        with pytest.raises(ValueError, match="signature does not match"):
            ProgramPaused.from_dict(forged, registry, secret="k")
        again = ProgramPaused.from_dict(wire, registry, secret="k")
    result = again.resolve({"later/3": "approve"})
    assert isinstance(result, Ok), result
    assert result.value.result == ["found a", "published uno", "published two"]
    assert count(markers, "publish-uno") == 1  # replayed on the second re-run
    assert count(markers, "publish-one") == 0 and count(markers, "publish-two") == 1
    assert count(markers, "lookup-a") == 1


def test_a_rerun_that_asks_another_call_at_an_edited_position_diverges(
    markers: pathlib.Path, tmp_path: pathlib.Path, journal_kind: str
) -> None:
    text = tmp_path / "text.txt"
    text.write_text("one")
    source = f"""
one = publish(text=open({str(text)!r}).read())
two = publish(text="two")
"""
    registry = registry_for(journal_kind, markers, tmp_path)
    paused = registry.run_program(source, program_id="ed-div")
    assert isinstance(paused, ProgramPaused)
    again = paused.resolve({"ed-div/1": Edit({"text": "uno"})})
    assert isinstance(again, ProgramPaused) and again.ids == ["ed-div/2"]
    text.write_text("changed")  # the program now asks another call at the edited position
    result = again.resolve({"ed-div/2": "approve"})
    assert isinstance(result, Err) and isinstance(result.reason, ProgramDiverged), result
    assert "#1" in result.reason.message and "text='changed'" in result.reason.message
    assert count(markers, "publish-uno") == 1 and count(markers, "publish-changed") == 0
    assert count(markers, "publish-two") == 0


def test_an_edit_with_nested_values_crosses_a_request_and_replays(
    markers: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    from nous_tools import Tool

    def tag(items: list[str], labels: dict[str, list[int]]) -> str:
        """Tag items (asks a person first)."""
        return ",".join(items) + ":" + json.dumps(labels, sort_keys=True)

    registry = registry_for("journal", markers, tmp_path)
    registry.register(Tool.from_function(tag, timeout=30, approval="ask"))
    source = 't = tag(items=["a"], labels={"x": [1]})\np = publish(text="after")\nresult = [t, p]\n'
    paused = registry.run_program(source, program_id="nest")
    assert isinstance(paused, ProgramPaused) and paused.ids == ["nest/1"]
    again = paused.resolve({"nest/1": Edit({"items": ["b", "c"], "labels": {"y": [2, 3]}})})
    assert isinstance(again, ProgramPaused) and again.ids == ["nest/2"]
    wire = json.loads(json.dumps(again.to_dict(secret="k")))
    back = ProgramPaused.from_dict(wire, registry, secret="k")
    result = back.resolve({"nest/2": "approve"})
    assert isinstance(result, Ok), result
    assert result.value.result == ['b,c:{"y": [2, 3]}', "published after"]
