"""The SQLite journal across real crashes: a process killed with SIGKILL at each of
the four points of a journaled call, then a fresh process repeating the key (at once:
a dead process of this host holds no lease). The side
effect never happens twice; the repeat gets ``OutcomeUnknown`` where nobody can know
the outcome, the stored outcome where the journal has it, and an ``idempotent=True``
tool runs again with the same idempotency key (which its downstream de-duplicates)."""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys
import typing as t

import pytest

from nous_tools import SQLiteJournal

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
CHILD = SUPPORT / "journal_crash.py"
WAIT = 60.0


def run_child(
    journal: pathlib.Path, effects: pathlib.Path, point: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), str(journal), str(effects), point, *extra],
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
        cwd=str(ROOT),
        check=False,
    )


def effects_of(path: pathlib.Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


POINTS = ["after-started", "in-tool", "after-returned", "after-completed"]

#: What the fresh process gets, for a tool that is not idempotent: the stored outcome
#: once ``completed`` is written, else nobody can know.
EXPECTED = {
    "after-started": "OutcomeUnknown",
    "in-tool": "OutcomeUnknown",
    "after-returned": "OutcomeUnknown",
    "after-completed": None,
}
#: How many times the side effect happened, at most once in every case.
EFFECTS = {"after-started": 0, "in-tool": 1, "after-returned": 1, "after-completed": 1}


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_each_point_never_repeats_the_side_effect(
    tmp_path: pathlib.Path, point: str
) -> None:
    journal, effects = tmp_path / "journal.db", tmp_path / "effects"
    crashed = run_child(journal, effects, point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert len(effects_of(effects)) == EFFECTS[point]
    # A fresh process repeats the key. The dead process's lease (65 s) is still live,
    # but it was on this host and is gone: its call's outcome is unknown at once.
    repeat = run_child(journal, effects, "none")
    assert repeat.returncode == 0, repeat.stderr
    outcome = json.loads(repeat.stdout)
    assert outcome["error"] == EXPECTED[point]
    if point == "after-completed":
        assert outcome == {"ok": True, "error": None, "text": '{"charged": 5}'}
    else:
        assert (
            "the outcome of an earlier attempt is unknown; it was not run again"
            in (outcome["text"])
        )
    assert len(effects_of(effects)) == EFFECTS[point]  # not again
    record = SQLiteJournal(journal).get("run-crash", "call-1")
    assert record is not None
    assert record.state == ("completed" if point == "after-completed" else "started")


@pytest.mark.parametrize("point", POINTS)
def test_an_idempotent_tool_is_run_again_with_the_same_key_and_its_effect_happens_once(
    tmp_path: pathlib.Path, point: str
) -> None:
    journal, effects = tmp_path / "journal.db", tmp_path / "effects"
    crashed = run_child(journal, effects, point, "--idempotent")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    repeat = run_child(journal, effects, "none", "--idempotent")
    assert repeat.returncode == 0, repeat.stderr
    assert json.loads(repeat.stdout) == {"ok": True, "error": None, "text": '{"charged": 5}'}
    keys = effects_of(effects)
    assert len(keys) == 1 and len(keys[0]) == 64  # one effect, under the idempotency key
    record = SQLiteJournal(journal).get("run-crash", "call-1")
    assert record is not None and record.state == "completed"
    assert record.runs == (1 if point == "after-completed" else 2)
    again = run_child(journal, effects, "none", "--idempotent")  # and then it is replayed
    assert json.loads(again.stdout)["ok"] is True
    assert t.cast(int, SQLiteJournal(journal).get("run-crash", "call-1").runs) == record.runs  # type: ignore[union-attr]


RACER = SUPPORT / "journal_race.py"


def race(target: str, tmp_path: pathlib.Path, processes: int, calls: int) -> list[list[str]]:
    """``processes`` processes racing over ``calls`` keys of one journal; their answers.
    Asserts that every call's side effect happened exactly once."""
    effects, go = tmp_path / "effects", tmp_path / "go"
    racers = [
        subprocess.Popen(
            [sys.executable, str(RACER), target, str(effects), str(go), str(calls)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=str(ROOT),
        )
        for _ in range(processes)
    ]
    go.touch()
    answers = []
    for racer in racers:
        out, err = racer.communicate(timeout=WAIT * 5)
        assert racer.returncode == 0, err
        answers.append(json.loads(out))
    ran = effects_of(effects)
    assert sorted(ran) == sorted(f"call-{n}" for n in range(calls))  # each once
    for n in range(calls):
        kinds = [answer[n] for answer in answers]
        assert set(kinds) <= {"ok", "CallInProgress"}, kinds
        assert "ok" in kinds
    return answers


def test_processes_racing_the_same_keys_on_one_sqlite_file_run_each_once(
    tmp_path: pathlib.Path,
) -> None:
    race(str(tmp_path / "journal.db"), tmp_path, processes=4, calls=25)
