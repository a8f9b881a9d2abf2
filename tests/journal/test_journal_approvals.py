"""The journal's own approval store (issue 36): ``journal.approvals`` redeems an
approval in the transaction that records the call's start — both written or
neither — so a failure between the two cannot use an approval up for a call that
was never recorded, and a lost redeem answers the winner's journaled outcome.
"""

from __future__ import annotations

import pathlib
import sqlite3
import threading
import typing as t

import pytest

from nous_tools import (
    ApprovalAlreadyUsed,
    ApprovalStore,
    Err,
    JournalUnavailable,
    NeedsApproval,
    Ok,
    Registry,
    RunContext,
    SQLiteJournal,
    Tool,
    ToolCall,
    ToolCallResults,
    execute_tool_calls,
    format_tool_result,
)

SECRET = "a server-side secret"
WAIT = 10.0


class Refunds:
    def __init__(self) -> None:
        self.orders: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, order: int) -> str:
        with self.lock:
            self.orders.append(order)
        return f"refunded {order}"


def _registry(journal: SQLiteJournal, refunds: Refunds, store: t.Any = None) -> Registry:
    tool = Tool.from_function(refunds, name="refund", approval="ask", timeout=10)
    return Registry(
        [tool],
        name="shop",
        journal=journal,
        approval_store=journal.approvals if store is None else store,
    )


def _paused(registry: Registry, run_id: str = "conversation-1") -> NeedsApproval:
    result = registry.execute("refund", {"order": 7}, _ctx(run_id), call_id="call_r")
    assert isinstance(result, NeedsApproval)
    return result


def _ctx(run_id: str = "conversation-1") -> RunContext[None]:
    return RunContext.new(run_id=run_id)


def _fail_the_journals_inserts(path: pathlib.Path) -> None:
    """A trigger that aborts every new record of the journal (a full disk, say)."""
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON nous_tools_journal "
            "BEGIN SELECT RAISE(ABORT, 'the disk is full'); END"
        )


def _heal(path: pathlib.Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER refuse")


def _approvals(path: pathlib.Path) -> list[tuple[t.Any, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT approval_id, run_id, call_id FROM nous_tools_journal_approvals"
        ).fetchall()


def test_the_journals_store_is_an_approval_store_that_claims_an_id_once(
    tmp_path: pathlib.Path,
) -> None:
    journal = SQLiteJournal(tmp_path / "journal.db")
    store = journal.approvals
    assert isinstance(store, ApprovalStore)
    assert journal.approvals is store
    assert [store.claim("a"), store.claim("a"), store.claim("b", 2e9)] == [True, False, True]
    # Another journal on the same file shares the claims (another process, say).
    assert SQLiteJournal(tmp_path / "journal.db").approvals.claim("a") is False
    with pytest.raises(TypeError, match="approval ids are str"):
        store.claim(7)  # type: ignore[arg-type]


def test_prune_forgets_the_claims_whose_tokens_have_expired_and_keeps_the_others(
    tmp_path: pathlib.Path,
) -> None:
    journal = SQLiteJournal(tmp_path / "journal.db")
    store = journal.approvals
    assert store.claim("old", 1.0) and store.claim("live", 4e9) and store.claim("forever")
    journal.prune(older_than=0)
    assert sorted(row[0] for row in _approvals(tmp_path / "journal.db")) == ["forever", "live"]
    assert store.claim("old", 1.0) is True  # no token of that id is accepted any more


def test_an_approved_call_redeems_its_approval_with_its_start_record(
    tmp_path: pathlib.Path,
) -> None:
    journal = SQLiteJournal(tmp_path / "journal.db")
    refunds = Refunds()
    registry = _registry(journal, refunds)
    na = _paused(registry)
    assert registry.execute_approved(na, _ctx()) == Ok("refunded 7")
    assert _approvals(tmp_path / "journal.db") == [(na.id, "conversation-1", "call_r")]
    # The token again: the journal answers the first outcome; nothing runs again.
    assert registry.execute_approved(na, _ctx()) == Ok("refunded 7")
    assert refunds.orders == [7]


def test_a_start_that_cannot_be_recorded_leaves_the_approval_unused(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    refunds = Refunds()
    registry = _registry(journal, refunds)
    na = _paused(registry)
    _fail_the_journals_inserts(path)
    failed = registry.execute_approved(na, _ctx())
    assert isinstance(failed, Err) and isinstance(failed.reason, JournalUnavailable)
    assert "the disk is full" in str(failed.reason)
    assert _approvals(path) == []  # rolled back with the record
    _heal(path)
    assert registry.execute_approved(na, _ctx()) == Ok("refunded 7")  # the same token, still good
    assert refunds.orders == [7]


def test_with_a_store_of_its_own_that_failure_uses_the_approval_up(
    tmp_path: pathlib.Path,
) -> None:
    """The other form, for contrast: redeemed first, the approval is gone with the failure."""
    path = tmp_path / "journal.db"
    refunds = Refunds()
    registry = _registry(
        SQLiteJournal(path), refunds, store=SQLiteJournal(tmp_path / "other.db").approvals
    )
    na = _paused(registry)
    _fail_the_journals_inserts(path)
    assert isinstance(registry.execute_approved(na, _ctx()), Err)
    _heal(path)
    again = registry.execute_approved(na, _ctx())
    assert isinstance(again, Err) and isinstance(again.reason, ApprovalAlreadyUsed)
    assert refunds.orders == []


def test_a_rejection_is_redeemed_and_recorded_together(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    refunds = Refunds()
    registry = _registry(journal, refunds)
    ctx = RunContext.new(run_id="conversation-2")
    paused = execute_tool_calls(registry, [ToolCall("call_r", "refund", {"order": 7})], ctx)
    wire = paused.to_dict(SECRET)
    _fail_the_journals_inserts(path)
    failed = ToolCallResults.from_dict(wire, registry, SECRET).resolve({"call_r": "reject"})
    assert isinstance(failed.results[0], Err)
    assert isinstance(failed.results[0].reason, JournalUnavailable)
    _heal(path)
    rejected = ToolCallResults.from_dict(wire, registry, SECRET).resolve({"call_r": "reject"})
    approved = ToolCallResults.from_dict(wire, registry, SECRET).resolve({"call_r": "approve"})
    shown = [format_tool_result(batch.results[0], "refund") for batch in (rejected, approved)]
    # The first decision's outcome, both times.
    assert shown == ["Error: tool 'refund' was rejected by the user and did not run"] * 2
    assert len(_approvals(path)) == 1
    assert refunds.orders == []


def _redeem(
    registry: Registry,
    na: NeedsApproval,
    run_id: str,
    barrier: threading.Barrier,
    answers: list[t.Any],
    i: int,
) -> None:
    barrier.wait()
    answers[i] = registry.execute_approved(na, _ctx(run_id), wait=WAIT)


def test_threads_racing_one_token_run_it_once_and_all_answer_its_outcome(
    tmp_path: pathlib.Path,
) -> None:
    journal = SQLiteJournal(tmp_path / "journal.db")
    refunds = Refunds()
    registry = _registry(journal, refunds)
    for round_ in range(5):
        run_id = f"conversation-{round_}"
        na = _paused(registry, run_id=run_id)
        barrier = threading.Barrier(6, timeout=WAIT)
        answers: list[t.Any] = [None] * 6
        threads = [
            threading.Thread(target=_redeem, args=(registry, na, run_id, barrier, answers, i))
            for i in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        assert answers == [Ok("refunded 7")] * 6, (round_, answers)
    assert refunds.orders == [7] * 5  # once a round


def test_the_store_joins_only_a_journal_on_the_same_database(tmp_path: pathlib.Path) -> None:
    journal = SQLiteJournal(tmp_path / "journal.db")
    same_file = SQLiteJournal(str(tmp_path / "." / "journal.db"))
    store = journal.approvals
    assert store.joins(journal) and store.joins(same_file)
    assert not store.joins(SQLiteJournal(tmp_path / "other.db"))
    assert not store.joins(SQLiteJournal(tmp_path / "journal.db", table="elsewhere"))
    assert not store.joins(None)
