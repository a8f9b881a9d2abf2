"""``nous-tools journal list|show|settle|prune DSN_OR_PATH``: an operator's view of a
call journal, in tables or ``--json``."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from nous_tools import Ok, RunContext, SQLiteJournal, Tool, ToolExecutor
from nous_tools.cli import main
from nous_tools.journal._record import JournalRecord, arguments_digest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def path(tmp_path: pathlib.Path) -> str:
    """A journal with one completed call (r/c1) and one whose outcome is unknown (r/c2)."""
    target = tmp_path / "journal.db"
    journal = SQLiteJournal(target)
    charge = Tool.from_function(lambda amount: f"charged {amount}", name="charge", timeout=None)
    with ToolExecutor(journal=journal) as executor:
        executor.execute(charge, {"amount": 1}, RunContext.new(run_id="r"), call_id="c1")
    journal.start(
        JournalRecord(
            run_id="r", call_id="c2", tool="charge", digest=arguments_digest("charge", {"amount": 2}),
            owner="gone:1:x", lease_expires=0.0, started_at=1.0,
        )
    )  # fmt: skip
    journal.close()
    return str(target)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["journal", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_list_shows_each_call_with_its_state(capsys: pytest.CaptureFixture[str], path: str) -> None:
    status, out, _ = run(capsys, "list", path)
    assert status == 0
    lines = out.splitlines()
    assert lines[0].split() == ["RUN", "CALL", "TOOL", "STATE", "STARTED", "OUTCOME"]
    assert [line.split()[:4] for line in lines[1:]] == [
        ["r", "c1", "charge", "completed"],
        ["r", "c2", "charge", "unknown"],
    ]


def test_list_unknown_as_json(capsys: pytest.CaptureFixture[str], path: str) -> None:
    status, out, _ = run(capsys, "list", path, "--unknown", "--json")
    assert status == 0
    [record] = json.loads(out)
    assert (record["call_id"], record["state"], record["unknown"]) == ("c2", "started", True)


def test_show_prints_the_record_and_what_the_model_sees(
    capsys: pytest.CaptureFixture[str], path: str
) -> None:
    status, out, _ = run(capsys, "show", path, "r", "c1")
    assert status == 0
    assert "model sees        charged 1" in out
    status, out, _ = run(capsys, "show", path, "r", "c1", "--json")
    assert json.loads(out)["outcome"] == {"v": 1, "ok": True, "plain": True, "value": "charged 1"}
    status, _, err = run(capsys, "show", path, "r", "nope")
    assert status == 1 and "not in the journal" in err


def test_settle_records_the_outcome_once(capsys: pytest.CaptureFixture[str], path: str) -> None:
    status, out, _ = run(capsys, "settle", path, "r", "c2", "--ok", '{"charged": 2}', "--json")
    assert status == 0
    assert json.loads(out)["settled"] is True
    assert SQLiteJournal(path).get("r", "c2").result() == Ok({"charged": 2})  # type: ignore[union-attr]
    status, _, err = run(capsys, "settle", path, "r", "c2", "--error", "refunded")
    assert status == 1 and "already completed" in err
    status, _, err = run(capsys, "settle", path, "r", "c9", "--ok", "not json")
    assert status == 2 and "--ok needs a JSON value" in err


def test_prune_removes_old_completed_records(capsys: pytest.CaptureFixture[str], path: str) -> None:
    status, out, _ = run(capsys, "prune", path, "--older-than", "30d")
    assert (status, out.strip()) == (0, "removed 0 completed record(s)")
    status, out, _ = run(capsys, "prune", path, "--older-than", "0", "--json")
    assert (status, json.loads(out)) == (0, {"removed": 1})
    with pytest.raises(SystemExit) as exited:
        main(["journal", "prune", path, "--older-than", "soon"])
    assert exited.value.code == 2


def test_a_missing_journal_is_a_usage_error_and_creates_no_file(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    status, _, err = run(capsys, "list", str(tmp_path / "nope.db"))
    assert status == 2 and "no journal at" in err
    assert not (tmp_path / "nope.db").exists()


def test_a_journal_that_cannot_be_read_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database" * 100)
    status, _, err = run(capsys, "list", str(garbage))
    assert status == 1 and "DatabaseError" in err


def test_the_command_line_itself(path: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nous_tools", "journal", "list", path, "--unknown"],
        capture_output=True, text=True, cwd=str(ROOT), timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "c2" in result.stdout and "c1" not in result.stdout
