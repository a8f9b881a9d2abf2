"""Questions and answers in the call journal (issue 38, replicas) on SQLite: the
questions a call waits on are recorded, replaced and cleared by its key; answers are
kept only for questions asked, first answer wins, and each is taken once; a journal
made before them gains their tables; pruning forgets those of pruned calls."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from nous_tools import SQLiteJournal
from nous_tools.journal._record import JournalRecord
from tests.journal.conftest import started_elsewhere

ELICIT = {"method": "elicitation/create", "params": {"message": "Colour?"}}
SAMPLE = {"method": "sampling/createMessage", "params": {"maxTokens": 5}}


def _started(journal: SQLiteJournal, run_id: str, call_id: str) -> JournalRecord:
    return started_elsewhere(journal, run_id, call_id, "ask")


def test_questions_are_recorded_replaced_and_cleared_by_their_call(
    journal: SQLiteJournal,
) -> None:
    assert journal.questions("run", "c1") is None
    journal.record_questions("run", "c1", {"colour": ELICIT})
    found = journal.questions("run", "c1")
    assert found is not None and found[0] == {"colour": ELICIT} and found[1] > 0
    assert journal.questions("other-run", "c1") is None  # another identity's run
    journal.record_questions("run", "c1", {"colour": ELICIT, "n": SAMPLE})
    assert journal.questions("run", "c1")[0] == {"colour": ELICIT, "n": SAMPLE}  # type: ignore[index]
    journal.record_questions("run", "c1", None)
    assert journal.questions("run", "c1") is None
    journal.record_questions("run", "c1", {})  # none: cleared as well
    assert journal.questions("run", "c1") is None


def test_answers_are_kept_for_asked_questions_only_and_the_first_wins(
    journal: SQLiteJournal,
) -> None:
    assert journal.record_answers("run", "c1", {"colour": {"action": "accept"}}) == set()
    journal.record_questions("run", "c1", {"colour": ELICIT})
    recorded = journal.record_answers(
        "run", "c1", {"colour": {"action": "accept", "content": {"c": "red"}}, "other": 1}
    )
    assert recorded == {"colour"}
    assert journal.record_answers("run", "c1", {"colour": {"action": "decline"}}) == set()
    assert journal.record_answers("other-run", "c1", {"colour": 2}) == set()
    taken = journal.take_answers([("run", "c1"), ("other-run", "c1")])
    assert taken == {("run", "c1"): {"colour": {"action": "accept", "content": {"c": "red"}}}}


def test_an_answer_is_taken_once_even_by_two_takers_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "calls.db"
    keys = [("run", f"c{i}") for i in range(150)]  # more than one statement's chunk
    writer = SQLiteJournal(path)
    for run_id, call_id in keys:
        writer.record_questions(run_id, call_id, {"q": ELICIT})
        assert writer.record_answers(run_id, call_id, {"q": call_id}) == {"q"}
    takers = [SQLiteJournal(path), SQLiteJournal(path)]
    taken: list[dict[tuple[str, str], dict[str, object]]] = [{}, {}]
    start = threading.Barrier(2)

    def take(i: int) -> None:
        start.wait()
        taken[i] = takers[i].take_answers(keys)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not set(taken[0]) & set(taken[1])  # none taken twice
    assert {**taken[0], **taken[1]} == {key: {"q": key[1]} for key in keys}
    assert writer.take_answers(keys) == {}


def test_clearing_the_questions_forgets_their_answers_not_taken(journal: SQLiteJournal) -> None:
    journal.record_questions("run", "c1", {"q": ELICIT})
    assert journal.record_answers("run", "c1", {"q": "late"}) == {"q"}
    journal.record_questions("run", "c1", None)
    assert journal.take_answers([("run", "c1")]) == {}


def test_a_journal_made_before_questions_gains_their_tables(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = SQLiteJournal(path)
    before = [s for s in old._schema() if "_questions" not in s and "_answers" not in s]
    assert len(before) == len(old._schema()) - 2
    with sqlite3.connect(path) as connection:  # the tables a journal had before
        for statement in before:
            connection.execute(statement)
    connection.close()
    journal = SQLiteJournal(path)
    journal.record_questions("run", "c1", {"q": ELICIT})
    assert journal.record_answers("run", "c1", {"q": 1}) == {"q"}
    assert journal.take_answers([("run", "c1")]) == {("run", "c1"): {"q": 1}}


def test_prune_forgets_the_questions_and_answers_of_pruned_calls_only(
    journal: SQLiteJournal,
) -> None:
    gone = _started(journal, "run", "gone")
    _started(journal, "run", "running")
    for call_id in ("gone", "running"):
        journal.record_questions("run", call_id, {"q": ELICIT})
        assert journal.record_answers("run", call_id, {"q": call_id}) == {"q"}
    assert journal.complete(gone, {"ok": True, "value": "done"})
    assert journal.prune(older_than=0) == 1
    assert journal.questions("run", "gone") is None
    assert journal.questions("run", "running") is not None
    assert journal.take_answers([("run", "gone"), ("run", "running")]) == {
        ("run", "running"): {"q": "running"}
    }


def test_a_call_waiting_on_questions_before_it_started_can_be_asked_to_stop(
    journal: SQLiteJournal,
) -> None:
    assert journal.request_cancel("run", "approving") is False  # nothing known yet
    journal.record_questions("run", "approving", {"nous_tools.approval": ELICIT})
    assert journal.request_cancel("run", "approving") is True
    assert journal.cancel_requests([("run", "approving")]) == {("run", "approving")}
