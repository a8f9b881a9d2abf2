"""The call journal (issue 22) on SQLite, in one process: the table of what a repeat
of a key gets, what is stored, the idempotency key, failing closed, operators."""

from __future__ import annotations

import collections.abc as c
import contextlib
import json
import logging
import os
import select
import signal
import sqlite3
import subprocess
import threading
import time
import typing as t

import pytest

from nous_tools import (
    CallInProgress,
    ContextUpdate,
    Err,
    JournalConflict,
    JournalRecord,
    JournalUnavailable,
    NeedsApproval,
    Ok,
    OutcomeUnknown,
    Registry,
    RunContext,
    SQLiteJournal,
    Tool,
    ToolCall,
    ToolError,
    ToolExecutor,
    ToolTimeout,
    execute,
    execute_tool_calls,
    format_tool_result,
    signals,
)
from nous_tools._util._clock import wall
from nous_tools.journal import Journal, decode_outcome, encode_outcome, idempotency_key
from tests.conftest import Recorder

WAIT = 10.0
RUN = "conversation-42"


class Ledger:
    """A side effect that remembers each charge (and the idempotency key it came with)."""

    def __init__(self) -> None:
        self.charges: list[tuple[int, str | None]] = []
        self.lock = threading.Lock()

    def __call__(self, ctx: RunContext, amount: int) -> dict[str, t.Any]:
        with self.lock:
            self.charges.append((amount, ctx.idempotency_key))
        return {"charged": amount}


@pytest.fixture
def journal(tmp_path: t.Any) -> c.Iterator[SQLiteJournal]:
    j = SQLiteJournal(tmp_path / "journal.db")
    yield j
    j.close()


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def charge(ledger: Ledger) -> Tool:
    return Tool.from_function(ledger, name="charge", timeout=WAIT, retries=0)


@pytest.fixture
def journaled(journal: SQLiteJournal) -> c.Iterator[ToolExecutor]:
    with ToolExecutor(max_workers=4, journal=journal) as ex:
        yield ex


CTX = RunContext.new(run_id=RUN)


def started_record(
    journal: SQLiteJournal,
    tool: Tool,
    arguments: dict[str, t.Any],
    *,
    call_id: str = "call_1",
    lease: float = -1.0,
) -> JournalRecord:
    """A record as a process that started the call would have left it (lease from now)."""
    from nous_tools.journal._record import arguments_digest

    now = wall()
    record = JournalRecord(
        run_id=RUN, call_id=call_id, tool=tool.name,
        digest=arguments_digest(tool.name, arguments), state="started",
        owner="elsewhere:1:abc", lease_expires=now + lease, started_at=now,
    )  # fmt: skip
    assert journal.start(record) is None
    return record


# -- the table -----------------------------------------------------------------------


def test_journal_classes_implement_the_protocol(journal: SQLiteJournal) -> None:
    assert isinstance(journal, Journal)


def test_a_completed_call_replays_its_outcome_and_the_tool_does_not_run(
    journaled: ToolExecutor, charge: Tool, ledger: Ledger
) -> None:
    first = journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    again = journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert first == again == Ok({"charged": 5})
    assert [amount for amount, _ in ledger.charges] == [5]


def test_a_replay_sends_tool_execute_replayed_and_no_start_or_stop(
    journaled: ToolExecutor, charge: Tool, recorder: Recorder
) -> None:
    journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert recorder.names == ["start", "stop"]
    replays: list[tuple[t.Any, dict[str, t.Any], dict[str, t.Any]]] = []

    def on_replay(sender: t.Any, *, measurements: t.Any, metadata: t.Any) -> None:
        replays.append((sender, measurements, metadata))

    signals.tool_execute_replayed.connect(on_replay)
    try:
        journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    finally:
        signals.tool_execute_replayed.disconnect(on_replay)
    assert recorder.names == ["start", "stop"]  # nothing more: it did not run
    [(sender, measurements, metadata)] = replays
    assert sender is charge
    assert set(measurements) == {"system_time"}
    assert metadata == {"tool_name": "charge", "success": True, "call_id": "call_1"}


def test_an_err_is_stored_and_replayed_with_the_same_message_for_the_model(
    journaled: ToolExecutor,
) -> None:
    runs = []

    def login(token: str) -> str:
        runs.append(token)
        raise ValueError("login failed", "sk-secret")

    tool = Tool.from_function(login, timeout=None, retries=0)
    first = journaled.execute(tool, {"token": "t"}, CTX, call_id="call_1")
    again = journaled.execute(tool, {"token": "t"}, CTX, call_id="call_1")
    assert isinstance(again, Err) and isinstance(again.reason, ToolError)
    assert format_tool_result(again, "login") == format_tool_result(first, "login")
    assert format_tool_result(again, "login") == (
        "Error: tool 'login' failed: Tool execution failed: ValueError: login failed"
    )
    assert again.reason.error_type == "ToolError"
    assert runs == ["t"]


def test_a_timeout_is_journaled_and_replayed_as_a_timeout_never_run_again(
    journaled: ToolExecutor,
) -> None:
    release = threading.Event()
    runs = []

    def slow(ctx: RunContext) -> str:
        runs.append(1)
        ctx.cancelled.wait(WAIT)
        release.wait(WAIT)
        return "late"

    tool = Tool.from_function(slow, timeout=0.05)
    try:
        first = journaled.execute(tool, {}, CTX, call_id="call_1")
        again = journaled.execute(tool, {}, CTX, call_id="call_1")
    finally:
        release.set()
    assert isinstance(first.reason, ToolTimeout) and isinstance(again.reason, ToolTimeout)
    assert again.reason.timeout == 0.05
    assert format_tool_result(again, "slow") == format_tool_result(first, "slow")
    assert runs == [1]


def test_the_same_call_id_with_other_arguments_is_a_conflict_and_never_runs(
    journaled: ToolExecutor, charge: Tool, ledger: Ledger
) -> None:
    journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    other = journaled.execute(charge, {"amount": 500}, CTX, call_id="call_1")
    assert isinstance(other, Err) and isinstance(other.reason, JournalConflict)
    assert "other arguments" in other.reason.message and "call_1" in other.reason.message
    refund = Tool.from_function(lambda amount: "refunded", name="refund", timeout=None)
    another_tool = journaled.execute(refund, {"amount": 5}, CTX, call_id="call_1")
    assert isinstance(another_tool.reason, JournalConflict)
    assert [amount for amount, _ in ledger.charges] == [5]


def test_integral_floats_and_ints_are_different_arguments(
    journaled: ToolExecutor, charge: Tool
) -> None:
    journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert isinstance(
        journaled.execute(charge, {"amount": 5.0}, CTX, call_id="call_1").reason, JournalConflict
    )


def test_a_live_lease_answers_call_in_progress_and_wait_returns_its_outcome(
    journaled: ToolExecutor,
) -> None:
    entered, release = threading.Event(), threading.Event()
    runs = []

    def book(room: str) -> str:
        runs.append(room)
        entered.set()
        release.wait(WAIT)
        return f"booked {room}"

    tool = Tool.from_function(book, timeout=WAIT)
    results: list[t.Any] = []
    first = threading.Thread(
        target=lambda: results.append(journaled.execute(tool, {"room": "A"}, CTX, call_id="c"))
    )
    first.start()
    try:
        assert entered.wait(WAIT)
        busy = journaled.execute(tool, {"room": "A"}, CTX, call_id="c")
        assert isinstance(busy, Err) and isinstance(busy.reason, CallInProgress)
        assert "running elsewhere" in busy.reason.message
        waiter: list[t.Any] = []
        second = threading.Thread(
            target=lambda: waiter.append(
                journaled.execute(tool, {"room": "A"}, CTX, call_id="c", wait=WAIT * 3)
            )
        )
        second.start()
        release.set()
        second.join(WAIT * 3)
    finally:
        release.set()
        first.join(WAIT)
    assert results == [Ok("booked A")]
    assert waiter == [Ok("booked A")]
    assert runs == ["A"]


def test_wait_runs_out_as_call_in_progress(journal: SQLiteJournal, journaled: ToolExecutor,
                                            charge: Tool, ledger: Ledger) -> None:  # fmt: skip
    started_record(journal, charge, {"amount": 5}, lease=WAIT * 10)
    result = journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1", wait=0.05)
    assert isinstance(result.reason, CallInProgress)
    assert ledger.charges == []


def test_an_expired_lease_is_outcome_unknown_and_is_not_run_again(
    journal: SQLiteJournal, journaled: ToolExecutor, charge: Tool, ledger: Ledger
) -> None:
    started_record(journal, charge, {"amount": 5})
    result = journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert isinstance(result, Err) and isinstance(result.reason, OutcomeUnknown)
    assert "the outcome of an earlier attempt is unknown; it was not run again" in str(
        result.reason
    )
    assert ledger.charges == []
    assert [record.call_id for record in journal.unknown()] == ["call_1"]


def test_an_idempotent_tool_is_run_again_with_the_same_idempotency_key(
    journal: SQLiteJournal, journaled: ToolExecutor, ledger: Ledger
) -> None:
    charge = Tool.from_function(ledger, name="charge", timeout=WAIT, idempotent=True)
    started_record(journal, charge, {"amount": 5})
    result = journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert result == Ok({"charged": 5})
    assert ledger.charges == [(5, idempotency_key(RUN, "call_1"))]
    record = journal.get(RUN, "call_1")
    assert record is not None and (record.state, record.runs) == ("completed", 2)
    assert journal.unknown() == []


def test_a_call_without_run_id_or_call_id_is_not_journaled(
    journal: SQLiteJournal, journaled: ToolExecutor, charge: Tool, ledger: Ledger
) -> None:
    journaled.execute(charge, {"amount": 1}, RunContext.new(), call_id="call_1")
    journaled.execute(charge, {"amount": 1}, RunContext.new(), call_id="call_1")
    journaled.execute(charge, {"amount": 2}, CTX)
    journaled.execute(charge, {"amount": 2}, CTX)
    assert [amount for amount, _ in ledger.charges] == [1, 1, 2, 2]
    assert all(key is None for _, key in ledger.charges)
    assert journal.records() == []


def test_a_call_id_that_is_not_a_str_is_refused_when_journaled(
    journaled: ToolExecutor, charge: Tool, ledger: Ledger
) -> None:
    result = journaled.execute(charge, {"amount": 1}, CTX, call_id=7)  # type: ignore[arg-type]
    assert isinstance(result, Err) and "call_id" in result.reason.message
    assert ledger.charges == []


def test_the_module_level_execute_and_a_registry_journal_whichever_executor(
    journal: SQLiteJournal, charge: Tool, ledger: Ledger
) -> None:
    registry = Registry([charge], journal=journal)  # the default executor has no journal
    assert registry.execute("charge", {"amount": 3}, CTX, call_id="c") == Ok({"charged": 3})
    assert registry.execute("charge", {"amount": 3}, CTX, call_id="c") == Ok({"charged": 3})
    assert isinstance(execute(charge, {"amount": 3}, CTX, call_id="c"), Ok)  # not journaled
    assert [amount for amount, _ in ledger.charges] == [3, 3]
    assert registry.journal is journal


# -- the idempotency key --------------------------------------------------------------


def test_the_idempotency_key_is_stable_and_reveals_neither_id(
    journaled: ToolExecutor, charge: Tool, ledger: Ledger
) -> None:
    key = idempotency_key(RUN, "call_1")
    assert key == idempotency_key(RUN, "call_1") != idempotency_key(RUN, "call_2")
    assert idempotency_key("a", "bc") != idempotency_key("ab", "c")
    assert RUN not in key and "call_1" not in key and len(key) == 64
    journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert ledger.charges == [(5, key)]
    assert CTX.idempotency_key is None


def test_the_idempotency_key_reaches_a_process_isolated_tool(journal: SQLiteJournal) -> None:
    tool = Tool.from_function(report_key, timeout=WAIT, isolation="process")
    with ToolExecutor(journal=journal, process_workers=1) as executor:
        result = executor.execute(tool, {}, CTX, call_id="call_p")
    assert result == Ok(idempotency_key(RUN, "call_p"))


def report_key(ctx: RunContext) -> str | None:
    return ctx.idempotency_key


def test_the_idempotency_key_is_never_in_logs_signals_or_repr(
    journaled: ToolExecutor, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def failing(ctx: RunContext) -> str:
        seen.append(repr(ctx))
        raise RuntimeError("boom")

    tool = Tool.from_function(failing, timeout=WAIT, retries=1)
    key = idempotency_key(RUN, "call_1")
    with caplog.at_level(logging.DEBUG, logger="nous_tools"):
        journaled.execute(tool, {}, CTX, call_id="call_1")
        journaled.execute(tool, {}, CTX, call_id="call_1")  # a replay
    assert len(seen) == 2
    assert all(key not in text for text in seen)
    assert key not in caplog.text
    assert key not in repr(recorder.events)


# -- what is stored -----------------------------------------------------------------


def test_a_value_json_cannot_hold_is_stored_as_its_text_marked_as_such(
    journaled: ToolExecutor, journal: SQLiteJournal
) -> None:
    class Point:
        def __repr__(self) -> str:
            return "Point(1, 2)"

    tool = Tool.from_function(lambda: Point(), name="point", timeout=None)
    first = journaled.execute(tool, {}, CTX, call_id="call_1")
    again = journaled.execute(tool, {}, CTX, call_id="call_1")
    record = journal.get(RUN, "call_1")
    assert record is not None and record.outcome is not None
    assert record.outcome == {"v": 1, "ok": True, "text": format_tool_result(first, "point")}
    assert again == Ok(format_tool_result(first, "point"))


def test_values_come_back_type_faithfully_with_their_context_update(
    journaled: ToolExecutor,
) -> None:
    value = {"ids": (1, 2), "raw": b"hi", "ratio": 1.0, "big": 2**70, "none": None}

    def rich() -> Ok[t.Any]:
        return Ok(value, ContextUpdate().append("notes", "done").set("n", (1, 2)))

    tool = Tool.from_function(rich, timeout=None)
    first = journaled.execute(tool, {}, CTX, call_id="call_1")
    again = journaled.execute(tool, {}, CTX, call_id="call_1")
    assert again == first
    assert format_tool_result(again) == format_tool_result(first)


def test_a_value_whose_text_would_read_back_in_another_order_is_kept_as_text(
    journaled: ToolExecutor,
) -> None:
    value = {"z": 1, 3: {"x", "y", "w"}, "a": 2}
    tool = Tool.from_function(lambda: value, name="unordered", timeout=None)
    first = journaled.execute(tool, {}, CTX, call_id="call_1")
    again = journaled.execute(tool, {}, CTX, call_id="call_1")
    assert again == Ok(format_tool_result(first))


def test_outcomes_round_trip_through_the_encoding() -> None:
    timeout = Err(ToolTimeout(tool_name="slow", timeout=2.0))
    back = decode_outcome(json.loads(json.dumps(encode_outcome(timeout, "slow"))))
    assert isinstance(back.reason, ToolTimeout) and back.reason.timeout == 2.0
    assert format_tool_result(back, "slow") == format_tool_result(timeout, "slow")
    plain = Err("no such user")
    assert format_tool_result(decode_outcome(encode_outcome(plain, "find")), "find") == (
        format_tool_result(plain, "find")
    )
    with pytest.raises(ValueError):
        decode_outcome({"v": 1, "ok": True, "value": 1.0})  # not canonical
    with pytest.raises(ValueError):
        decode_outcome({"v": 2, "ok": True, "value": 1})


# -- failing closed -------------------------------------------------------------------


def test_a_journal_that_cannot_be_opened_means_the_call_does_not_run(
    tmp_path: t.Any, charge: Tool, ledger: Ledger
) -> None:
    journal = SQLiteJournal(tmp_path / "missing-dir" / "journal.db")
    with ToolExecutor(journal=journal) as executor:
        result = executor.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert isinstance(result, Err) and isinstance(result.reason, JournalUnavailable)
    assert "unable to open database file" in result.reason.message
    assert "call_1" in result.reason.message
    assert ledger.charges == []


def test_a_file_that_is_not_a_database_means_the_call_does_not_run(
    tmp_path: t.Any, charge: Tool, ledger: Ledger
) -> None:
    path = tmp_path / "journal.db"
    path.write_bytes(b"this is not an SQLite database, it is a text file" * 100)
    with ToolExecutor(journal=SQLiteJournal(path)) as executor:
        result = executor.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert isinstance(result.reason, JournalUnavailable)
    assert "not a database" in result.reason.message
    assert ledger.charges == []


def test_a_full_disk_means_the_call_does_not_run(
    tmp_path: t.Any, charge: Tool, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    with ToolExecutor(journal=journal) as executor:
        assert executor.execute(charge, {"amount": 1}, CTX, call_id="first").is_ok()
        journal.close()
        with sqlite3.connect(path) as db:
            pages = db.execute("PRAGMA page_count").fetchone()[0]
        original = journal._open

        def full() -> sqlite3.Connection:  # the database may not grow any more
            connection = original()
            connection.execute(f"PRAGMA max_page_count = {pages}")
            return connection

        monkeypatch.setattr(journal, "_open", full)
        big = RunContext.new(run_id="r" * 200_000)  # a record that needs new pages
        result = executor.execute(charge, {"amount": 2}, big, call_id="c")
    assert isinstance(result.reason, JournalUnavailable)
    assert "database or disk is full" in result.reason.message
    assert [amount for amount, _ in ledger.charges] == [1]


def test_a_corrupt_record_is_an_err_naming_its_key(
    journal: SQLiteJournal, journaled: ToolExecutor, charge: Tool, ledger: Ledger
) -> None:
    journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    with sqlite3.connect(journal.path) as db:
        db.execute("UPDATE nous_tools_journal SET outcome = '{not json'")
    result = journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert isinstance(result.reason, JournalUnavailable)
    assert "'call_1'" in result.reason.message and repr(RUN) in result.reason.message
    assert "corrupt" in result.reason.message
    assert len(ledger.charges) == 1


class BrokenJournal:
    """A journal whose every method raises what it is told to."""

    grace = 1.0

    def __init__(self, error: BaseException, where: str) -> None:
        self.error = error
        self.where = where
        self.inner: SQLiteJournal | None = None

    def _maybe(self, name: str) -> None:
        if name == self.where:
            raise self.error

    def get(self, run_id: str, call_id: str) -> JournalRecord | None:
        self._maybe("get")
        return None

    def start(self, record: JournalRecord, *, replace: str | None = None) -> JournalRecord | None:
        self._maybe("start")
        return None

    def complete(self, record: JournalRecord, outcome: t.Any) -> bool:
        self._maybe("complete")
        return True


@pytest.mark.parametrize("where", ["get", "start"])
@pytest.mark.parametrize("error", [RuntimeError("driver bug"), OSError(28, "No space left")])
def test_a_journal_that_raises_before_the_call_fails_closed(
    where: str, error: BaseException, charge: Tool, ledger: Ledger
) -> None:
    with ToolExecutor(journal=BrokenJournal(error, where)) as executor:
        result = executor.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert isinstance(result.reason, JournalUnavailable)
    assert type(error).__name__ in result.reason.message
    assert ledger.charges == []


def test_a_journal_that_raises_after_the_call_gives_the_outcome_and_logs(
    charge: Tool, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    with ToolExecutor(journal=BrokenJournal(RuntimeError("gone"), "complete")) as executor:
        result = executor.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert result == Ok({"charged": 5})
    assert "failed to record the outcome of tool 'charge'" in caplog.text


def test_something_that_is_not_a_journal_is_refused_at_construction() -> None:
    with pytest.raises(TypeError, match=r"must be a nous_tools\.Journal.*get, start, complete"):
        ToolExecutor(journal=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="journal"):
        Registry(journal="journal.db")  # type: ignore[arg-type]


@pytest.mark.parametrize("wait", [-1, "5", float("nan")])
def test_a_bad_wait_is_an_err(journaled: ToolExecutor, charge: Tool, wait: t.Any) -> None:
    result = journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1", wait=wait)
    assert isinstance(result, Err) and "wait" in result.reason.message


# -- batches -------------------------------------------------------------------------


def test_resubmitting_a_model_response_returns_the_same_messages_and_runs_nothing(
    journal: SQLiteJournal, executor: ToolExecutor, ledger: Ledger
) -> None:
    registry = Registry(
        [Tool.from_function(ledger, name="charge", timeout=WAIT), Tool.from_function(
            lambda city: f"sunny in {city}", name="weather", timeout=None)],
        executor=executor, journal=journal,
    )  # fmt: skip
    response = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "charge", "arguments": '{"amount": 5}'}},
            {"id": "call_b", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}},
            {"id": "call_c", "type": "function",
             "function": {"name": "charge", "arguments": '{"amount": 7}'}},
        ],
    }  # fmt: skip
    first = execute_tool_calls(registry, response, CTX)
    again = execute_tool_calls(registry, response, CTX)
    assert first.to_openai_messages() == again.to_openai_messages()
    assert [m["content"] for m in again.to_openai_messages()] == [
        '{"charged": 5}',
        "sunny in Oslo",
        '{"charged": 7}',
    ]
    assert sorted(amount for amount, _ in ledger.charges) == [5, 7]
    assert {key for _, key in ledger.charges} == {
        idempotency_key(RUN, "call_a"),
        idempotency_key(RUN, "call_c"),
    }


def test_execute_many_of_a_journaled_executor_journals_each_call(
    journaled: ToolExecutor, charge: Tool, ledger: Ledger
) -> None:
    calls = [ToolCall(f"call_{i}", "charge", {"amount": i}) for i in range(6)]
    first = journaled.execute_many(calls, CTX, resolve={"charge": charge}.get)
    again = journaled.execute_many(calls, CTX, resolve={"charge": charge}.get)
    assert first == again == [Ok({"charged": i}) for i in range(6)]
    assert sorted(amount for amount, _ in ledger.charges) == list(range(6))


def test_an_ask_tool_the_journal_holds_is_answered_instead_of_asked_again(
    journal: SQLiteJournal, executor: ToolExecutor
) -> None:
    deleted: list[str] = []

    def delete(path: str) -> str:
        deleted.append(path)
        return f"deleted {path}"

    registry = Registry(
        [Tool.from_function(delete, approval="ask", timeout=None)], executor=executor,
        journal=journal,
    )  # fmt: skip
    pending = registry.execute("delete", {"path": "/x"}, CTX, call_id="call_d")
    assert isinstance(pending, NeedsApproval)
    assert registry.execute_approved(pending, CTX) == Ok("deleted /x")
    assert registry.execute("delete", {"path": "/x"}, CTX, call_id="call_d") == Ok("deleted /x")
    assert registry.execute_approved(pending, CTX) == Ok("deleted /x")  # replayed, not refused
    assert deleted == ["/x"]


# -- many threads on one key ----------------------------------------------------------


def test_threads_racing_one_key_run_the_tool_once(journal: SQLiteJournal) -> None:
    runs = []
    barrier = threading.Barrier(8, timeout=WAIT)

    def once() -> str:
        runs.append(1)
        return "done"

    tool = Tool.from_function(once, timeout=WAIT)
    results: list[t.Any] = []
    lock = threading.Lock()
    with ToolExecutor(max_workers=8, journal=journal) as executor:

        def race() -> None:
            barrier.wait()
            result = executor.execute(tool, {}, CTX, call_id="call_1", wait=WAIT)
            with lock:
                results.append(result)

        threads = [threading.Thread(target=race) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT * 2)
    assert runs == [1]
    assert results == [Ok("done")] * 8


# -- operators --------------------------------------------------------------------------


def test_settle_records_what_a_person_found_out_and_a_repeat_gets_it(
    journal: SQLiteJournal, journaled: ToolExecutor, charge: Tool, ledger: Ledger
) -> None:
    started_record(journal, charge, {"amount": 5})
    [unknown] = journal.unknown()
    settled = journal.settle(unknown, Ok({"charged": 5, "checked_by": "ops"}))
    assert (settled.state, settled.settled) == ("completed", True)
    assert journal.unknown() == []
    result = journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert result == Ok({"charged": 5, "checked_by": "ops"})
    started_record(journal, charge, {"amount": 6}, call_id="call_2")
    journal.settle((RUN, "call_2"), Err("the card was declined"))
    failed = journaled.execute(charge, {"amount": 6}, CTX, call_id="call_2")
    assert (
        format_tool_result(failed, "charge") == "Error: tool 'charge' failed: the card was declined"
    )
    assert ledger.charges == []


def test_settle_refuses_a_completed_call_and_an_unknown_key(
    journal: SQLiteJournal, journaled: ToolExecutor, charge: Tool
) -> None:
    journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    with pytest.raises(ValueError, match="already completed"):
        journal.settle((RUN, "call_1"), Ok(1))
    with pytest.raises(ValueError, match="not in the journal"):
        journal.settle((RUN, "nope"), Ok(1))
    with pytest.raises(TypeError):
        journal.settle("call_1", Ok(1))  # type: ignore[arg-type]


def test_prune_removes_old_completed_records_and_keeps_started_ones(
    journal: SQLiteJournal, journaled: ToolExecutor, charge: Tool
) -> None:
    journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    started_record(journal, charge, {"amount": 6}, call_id="call_2")
    assert journal.prune(older_than=3600) == 0
    assert journal.prune(older_than=0) == 1
    assert [record.call_id for record in journal.records()] == ["call_2"]
    with pytest.raises(ValueError, match="older_than"):
        journal.prune(older_than=-1)


def test_a_forked_child_opens_its_own_connections(
    journal: SQLiteJournal, charge: Tool, ledger: Ledger
) -> None:
    with ToolExecutor(max_workers=1, journal=journal) as executor:
        executor.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert journal._idle  # a connection kept for reuse, which the child must not use
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own connection, the parent's record
        try:
            record = journal.get(RUN, "call_1")
            os.write(write, (record.state if record else "none").encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], WAIT)
        assert ready, "the child did not answer"
        assert os.read(read, 100) == b"completed"
    finally:
        os.close(read)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert journal.get(RUN, "call_1") is not None  # the parent's connections still work


# -- DjangoJournal ---------------------------------------------------------------------


def test_a_django_journal_replays_refuses_to_write_inside_a_transaction_and_redeems(
    tmp_path: t.Any,
) -> None:
    pytest.importorskip("django")
    import pathlib
    import subprocess
    import sys

    tests = pathlib.Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, str(tests / "support" / "django_journal_calls.py"), str(tmp_path / "site.db")],
        capture_output=True, text=True, timeout=120, cwd=str(tests.parent), check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["first"] == seen["again"] == "charged 5"
    assert seen["runs"] == [5, 7]
    assert seen["state"] == "completed"
    assert seen["inside_type"] == "JournalUnavailable"
    assert "cannot write inside a transaction" in seen["inside"]
    # journal.approvals on Django: redeemed with the record, the repeat replayed.
    assert seen["approved"] == ["charged 7", "charged 7"]
    assert seen["claims"] == [["django-run", "c3"]]


# -- with the tools' limits (the pipeline's order) --------------------------------------


def test_a_call_refused_by_its_limits_is_not_journaled_and_a_replay_takes_no_rate(
    journal: SQLiteJournal, journaled: ToolExecutor, ledger: Ledger
) -> None:
    from nous_tools import RateLimited

    charge = Tool.from_function(
        ledger, name="charge", timeout=WAIT, rate_limit="1/hour", max_concurrency=1
    )
    assert journaled.execute(charge, {"amount": 1}, CTX, call_id="c1") == Ok({"charged": 1})
    refused = journaled.execute(charge, {"amount": 2}, CTX, call_id="c2")
    assert isinstance(refused, Err) and isinstance(refused.reason, RateLimited)
    assert journal.get(RUN, "c2") is None  # a refused call never started
    assert journaled.execute(charge, {"amount": 1}, CTX, call_id="c1") == Ok({"charged": 1})
    assert [amount for amount, _ in ledger.charges] == [1]


def test_a_new_sqlite_journal_and_its_wal_files_are_readable_by_their_owner_only(
    tmp_path: t.Any, charge: Tool
) -> None:
    import stat

    path = tmp_path / "private.db"
    journal = SQLiteJournal(path)
    try:
        with ToolExecutor(journal=journal) as executor:
            assert executor.execute(charge, {"amount": 1}, CTX, call_id="call_1").is_ok()
            files = [p for p in tmp_path.iterdir() if p.name.startswith("private.db")]
            assert {p.name for p in files} >= {"private.db", "private.db-wal", "private.db-shm"}
            for each in files:
                assert stat.S_IMODE(each.stat().st_mode) == 0o600, each.name
    finally:
        journal.close()


def test_an_existing_journal_file_keeps_its_permissions(tmp_path: t.Any, charge: Tool) -> None:
    import stat

    path = tmp_path / "shared.db"
    path.touch(mode=0o640)
    path.chmod(0o640)
    journal = SQLiteJournal(path)
    try:
        assert journal.get(RUN, "nothing") is None
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
    finally:
        journal.close()


def test_a_sqlite_lock_held_elsewhere_is_waited_for_within_the_calls_deadline_only(
    tmp_path: t.Any, ledger: Ledger
) -> None:
    import time

    path = tmp_path / "locked.db"
    journal = SQLiteJournal(path)  # its own lock wait: 30 s
    quick = Tool.from_function(ledger, name="charge", timeout=1.0, retries=0)
    assert journal.get(RUN, "warm-up") is None  # the file and its table exist
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write lock, held
    try:
        with ToolExecutor(journal=journal) as executor:
            began = time.monotonic()
            result = executor.execute(quick, {"amount": 1}, CTX, call_id="call_1")
            waited = time.monotonic() - began
        assert isinstance(result, Err) and isinstance(result.reason, JournalUnavailable)
        assert "was not run" in result.reason.message
        assert ledger.charges == []
        assert waited < 20  # bounded by the 1 s deadline, far from the journal's 30 s
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        journal.close()


# -- leases: renewed while a call runs; one rule for unknown (issue 36) ----------------


def _other_process_unknown(path: t.Any) -> list[str]:
    """What another process (the command line) lists as unknown."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "nous_tools", "journal", "list", str(path), "--unknown", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [record["call_id"] for record in json.loads(done.stdout)]


def test_a_call_running_past_its_lease_is_never_unknown_its_lease_is_renewed(
    tmp_path: t.Any,
) -> None:
    path = tmp_path / "long.db"
    journal = SQLiteJournal(path, grace=3.0)  # a tool without a timeout: 3 s leases
    release = threading.Event()
    leases: list[float] = []

    def long_running() -> str:
        release.wait(60)
        return "done"

    tool = Tool.from_function(long_running, timeout=None, retries=0)
    answers: list[t.Any] = []
    with ToolExecutor(journal=journal) as executor:
        worker = threading.Thread(
            target=lambda: answers.append(executor.execute(tool, {}, CTX, call_id="long"))
        )
        worker.start()
        try:
            # Past two renewals (every second), well past the first 3 s lease.
            end = time.monotonic() + 60
            while len(set(leases)) < 3 and time.monotonic() < end:
                record = journal.get(RUN, "long")
                if record is not None:
                    leases.append(record.lease_expires)
                    assert not record.unknown()
                    assert journal.unknown() == []
                time.sleep(0.1)
            assert len(set(leases)) >= 3  # renewed twice
            assert _other_process_unknown(path) == []  # what the operator sees agrees
            late = executor.execute(tool, {}, CTX, call_id="long")
            assert isinstance(late, Err) and isinstance(late.reason, CallInProgress)
        finally:
            release.set()
            worker.join()
    assert answers == [Ok("done")]
    journal.close()


def _ended_process() -> tuple[subprocess.Popen[bytes], str]:
    """A child that has exited but is not reaped yet (a zombie), and its start time."""
    from nous_tools.journal._record import _start_time

    child = subprocess.Popen(["sleep", "30"])
    started = _start_time(child.pid)
    assert started is not None
    os.kill(child.pid, signal.SIGKILL)
    return child, started


def test_a_dead_owners_call_is_unknown_at_once_to_execute_unknown_and_the_cli_alike(
    tmp_path: t.Any, ledger: Ledger, charge: Tool
) -> None:
    from nous_tools.journal._record import arguments_digest, new_owner

    path = tmp_path / "dead.db"
    journal = SQLiteJournal(path)
    child, started = _ended_process()  # killed; still a zombie until we wait for it
    try:
        host, _, _, namespace, _ = new_owner().split(":")
        now = wall()
        record = JournalRecord(
            run_id=RUN, call_id="call_1", tool="charge",
            digest=arguments_digest("charge", {"amount": 5}), state="started",
            owner=f"{host}:{child.pid}:abc:{namespace}:{started}",
            lease_expires=now + 3600, started_at=now,  # a lease far from over
        )  # fmt: skip
        assert journal.start(record) is None
        assert [r.call_id for r in journal.unknown()] == ["call_1"]
        assert _other_process_unknown(path) == ["call_1"]
        with ToolExecutor(journal=journal) as executor:
            result = executor.execute(charge, {"amount": 5}, CTX, call_id="call_1")
        assert isinstance(result, Err) and isinstance(result.reason, OutcomeUnknown)
        assert ledger.charges == []
    finally:
        child.wait()
        journal.close()


def test_an_interrupted_callers_call_is_unknown_at_once_in_its_own_process(
    journal: SQLiteJournal, journaled: ToolExecutor, ledger: Ledger, charge: Tool
) -> None:
    def interrupted(ctx: RunContext, amount: int) -> None:
        raise KeyboardInterrupt

    tool = Tool.from_function(interrupted, name="charge", timeout=None, retries=0)
    with pytest.raises(KeyboardInterrupt):
        journaled.execute(tool, {"amount": 5}, CTX, call_id="call_1")
    record = journal.get(RUN, "call_1")
    assert record is not None and record.state == "started" and not record.expired()
    assert record.unknown()  # its lease is live, but this process knows it stopped
    assert [r.call_id for r in journal.unknown()] == ["call_1"]
    again = journaled.execute(charge, {"amount": 5}, CTX, call_id="call_1")
    assert isinstance(again, Err) and isinstance(again.reason, OutcomeUnknown)
    assert ledger.charges == []
