"""Cancel requests in the call journal (issue 38, replicas) on SQLite: only a started
call can be asked to stop, a request is kept once and found by its key, a journal
made before the requests existed gains their table, and pruning forgets the
requests of pruned calls."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nous_tools import SQLiteJournal
from nous_tools.journal._record import JournalRecord
from tests.journal.conftest import started_elsewhere


def _started(journal: SQLiteJournal, run_id: str, call_id: str) -> JournalRecord:
    return started_elsewhere(journal, run_id, call_id, "charge")


def test_a_started_call_is_asked_to_stop_once_and_found_by_its_key(
    journal: SQLiteJournal,
) -> None:
    _started(journal, "run", "c1")
    _started(journal, "other-run", "c1")
    assert journal.cancel_requests([("run", "c1")]) == set()
    assert journal.request_cancel("run", "c1") is True
    assert journal.request_cancel("run", "c1") is True  # a repeat: still asked, once
    asked = journal.cancel_requests([("run", "c1"), ("other-run", "c1"), ("run", "c2")])
    assert asked == {("run", "c1")}  # the same call_id in another run is not asked
    assert journal.get("run", "c1").state == "started"  # type: ignore[union-attr]


def test_a_call_not_started_cannot_be_asked_to_stop(journal: SQLiteJournal) -> None:
    assert journal.request_cancel("run", "missing") is False
    record = _started(journal, "run", "done")
    assert journal.complete(record, {"ok": True, "value": "charged"})
    assert journal.request_cancel("run", "done") is False
    assert journal.cancel_requests([("run", "missing"), ("run", "done")]) == set()


def test_many_keys_are_read_in_chunks(journal: SQLiteJournal) -> None:
    keys = [("run", f"c{i}") for i in range(450)]
    for run_id, call_id in keys:
        _started(journal, run_id, call_id)
    for run_id, call_id in keys[::3]:
        assert journal.request_cancel(run_id, call_id)
    assert journal.cancel_requests(keys) == set(keys[::3])


def test_a_journal_made_before_cancel_requests_gains_their_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = SQLiteJournal(path)
    before = [statement for statement in old._schema() if "_cancels" not in statement]
    before = [s for s in before if "_questions" not in s and "_answers" not in s]
    with sqlite3.connect(path) as connection:  # the tables a journal had before
        for statement in before:
            connection.execute(statement)
        connection.execute(
            "INSERT INTO nous_tools_journal (run_id, call_id, tool, tool_digest, digest, "
            "state, owner, lease_expires, runs, started_at) VALUES "
            "('run', 'c1', 'charge', '', 'd', 'started', 'other-host:1:x', 4e9, 1, 1.0)"
        )
    connection.close()
    journal = SQLiteJournal(path)
    assert journal.get("run", "c1") is not None  # the old record is kept
    assert journal.request_cancel("run", "c1") is True
    assert journal.cancel_requests([("run", "c1")]) == {("run", "c1")}


def test_prune_forgets_the_requests_of_pruned_calls_only(journal: SQLiteJournal) -> None:
    gone = _started(journal, "run", "gone")
    _started(journal, "run", "running")
    assert journal.request_cancel("run", "gone")
    assert journal.request_cancel("run", "running")
    assert journal.complete(gone, {"ok": True, "value": "stopped"})
    assert journal.prune(older_than=0) == 1
    asked = journal.cancel_requests([("run", "gone"), ("run", "running")])
    assert asked == {("run", "running")}
