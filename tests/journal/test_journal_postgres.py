"""The PostgreSQL journal against a real server (slow suite): the tests start
PostgreSQL on a Unix socket in a temporary directory. Four processes race the same
keys 200 times and each tool runs once per key; a server stopped mid-run gives
``JournalUnavailable`` and nothing runs un-journaled."""

from __future__ import annotations

import collections.abc as c
import os
import pathlib
import signal
import typing as t

import pytest

from nous_tools import (
    Err,
    JournalUnavailable,
    Ok,
    OutcomeUnknown,
    PostgresJournal,
    RunContext,
    Tool,
    ToolExecutor,
    format_tool_result,
)
from tests.journal.test_journal_crash import race

pytestmark = pytest.mark.slow

WAIT = 30.0


def dsn_of(server: dict[str, str]) -> str:
    return f"host={server['host']} user={server['user']} dbname={server['name']}"


@pytest.fixture(scope="module")
def postgres() -> c.Iterator[dict[str, str]]:
    from servers import postgres_server

    with postgres_server() as server:
        yield server


def test_four_processes_racing_200_keys_run_each_tool_once(
    postgres: dict[str, str], tmp_path: pathlib.Path
) -> None:
    answers = race(dsn_of(postgres), tmp_path, processes=4, calls=200)
    assert sum(answer.count("ok") for answer in answers) >= 200


def test_the_table_on_postgres(postgres: dict[str, str]) -> None:
    journal = PostgresJournal(dsn_of(postgres), table="journal_table", grace=0)
    runs: list[int] = []

    def charge(amount: int) -> str:
        runs.append(amount)
        return f"charged {amount}"

    tool = Tool.from_function(charge, timeout=None)
    ctx = RunContext.new(run_id="pg-run")
    with ToolExecutor(journal=journal) as executor:
        assert executor.execute(tool, {"amount": 1}, ctx, call_id="c1") == Ok("charged 1")
        assert executor.execute(tool, {"amount": 1}, ctx, call_id="c1") == Ok("charged 1")
        conflict = executor.execute(tool, {"amount": 2}, ctx, call_id="c1")
        assert type(t.cast(Err, conflict).reason).__name__ == "JournalConflict"
        from nous_tools.journal._record import JournalRecord, arguments_digest

        stuck = JournalRecord(
            run_id="pg-run", call_id="c2", tool="charge",
            digest=arguments_digest("charge", {"amount": 3}), owner="other-host:1:x",
            lease_expires=0.0, started_at=0.0,
        )  # fmt: skip
        assert journal.start(stuck) is None
        unknown = executor.execute(tool, {"amount": 3}, ctx, call_id="c2")
        assert isinstance(t.cast(Err, unknown).reason, OutcomeUnknown)
        assert [r.call_id for r in journal.unknown()] == ["c2"]
        journal.settle(("pg-run", "c2"), Err("refunded by hand"))
        settled = executor.execute(tool, {"amount": 3}, ctx, call_id="c2")
        assert (
            format_tool_result(settled, "charge") == "Error: tool 'charge' failed: refunded by hand"
        )
        assert journal.prune(older_than=0) == 2
    assert runs == [1]
    journal.close()


def test_a_server_stopped_mid_run_gives_journal_unavailable_and_runs_nothing(
    tmp_path: pathlib.Path,
) -> None:
    from servers import postgres_server

    runs: list[int] = []

    def charge(amount: int) -> str:
        runs.append(amount)
        return f"charged {amount}"

    tool = Tool.from_function(charge, timeout=5.0)
    ctx = RunContext.new(run_id="pg-stop")
    with postgres_server() as server:
        journal = PostgresJournal(dsn_of(server), connect_timeout=2)
        executor = ToolExecutor(journal=journal)
        assert executor.execute(tool, {"amount": 1}, ctx, call_id="c1") == Ok("charged 1")
        pid = int((pathlib.Path(server["host"]) / "data" / "postmaster.pid").read_text().split()[0])
        # Stop the server the way a crash would: immediate shutdown, connections cut.
        os.kill(pid, signal.SIGQUIT)
        from servers import wait_dead

        assert wait_dead(pid, WAIT)
        results = [executor.execute(tool, {"amount": n}, ctx, call_id=f"c{n}") for n in range(2, 6)]
        executor.shutdown()
    for result in results:
        assert isinstance(result, Err) and isinstance(result.reason, JournalUnavailable)
        assert "could not read call" in result.reason.message
    assert runs == [1]  # nothing ran un-journaled


def test_postgres_journal_refuses_a_bad_table_name() -> None:
    with pytest.raises(ValueError, match="plain SQL identifier"):
        PostgresJournal("host=/nowhere", table="x; DROP TABLE y")
    assert "password" not in repr(PostgresJournal("postgresql://u:password@h/db"))


def test_a_host_an_hour_ahead_still_sees_the_running_call_and_never_runs_it_again(
    postgres: dict[str, str], tmp_path: pathlib.Path
) -> None:
    """Leases are written and judged on the database server's clock: a process whose
    host is an hour ahead gets CallInProgress for a call running elsewhere, even an
    idempotent one, and the tool runs once."""
    import json
    import subprocess
    import sys
    import time

    support = pathlib.Path(__file__).parents[1] / "support"
    marker = str(tmp_path / "release")
    script = [sys.executable, str(support / "journal_clock.py"), dsn_of(postgres)]
    holder = subprocess.Popen([*script, "hold", marker], stdout=subprocess.PIPE, text=True)
    try:
        started = pathlib.Path(marker + ".started")
        for _ in range(int(WAIT / 0.02)):
            if started.exists():
                break
            time.sleep(0.02)
        assert started.exists()
        time.sleep(2.5)  # past the first lease (2 s): only its renewal keeps it
        skewed = subprocess.run(
            [*script, "skewed", marker], capture_output=True, text=True, timeout=WAIT, check=True
        )
        answer = json.loads(skewed.stdout)
        assert answer["type"] == "CallInProgress", answer
    finally:
        pathlib.Path(marker).write_text("go")
        out, _ = holder.communicate(timeout=WAIT)
    assert json.loads(out)["text"] == "charged 5"
    assert pathlib.Path(marker + ".runs").read_text().count("\n") == 1  # once


def test_on_postgres_the_journals_store_redeems_and_records_in_one_transaction(
    postgres: dict[str, str],
) -> None:
    """A start that cannot be recorded (a trigger refuses it, as a full disk would)
    rolls the approval's redeem back with it: the same token runs once it can."""
    from nous_tools import NeedsApproval, Registry

    journal = PostgresJournal(dsn_of(postgres), table="approvals_journal")
    runs: list[int] = []

    def refund(order: int) -> str:
        runs.append(order)
        return f"refunded {order}"

    tool = Tool.from_function(refund, approval="ask", timeout=10)
    registry = Registry([tool], journal=journal, approval_store=journal.approvals)
    ctx = RunContext.new(run_id="pg-approvals")
    na = registry.execute("refund", {"order": 7}, ctx, call_id="call_r")
    assert isinstance(na, NeedsApproval)
    refuse = (
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'the disk is full'; END $$",
        "CREATE TRIGGER refuse BEFORE INSERT ON approvals_journal "
        "FOR EACH ROW EXECUTE FUNCTION refuse()",
    )
    journal.get("warm-up", "warm-up")  # the tables exist
    for statement in refuse:
        journal._write(statement, ())
    failed = registry.execute_approved(na, ctx)
    assert isinstance(failed, Err) and isinstance(failed.reason, JournalUnavailable)
    assert "the disk is full" in str(failed.reason)
    assert journal._rows("SELECT count(*) FROM approvals_journal_approvals", ()) == [(0,)]
    journal._write("DROP TRIGGER refuse ON approvals_journal", ())
    assert registry.execute_approved(na, ctx) == Ok("refunded 7")
    assert registry.execute_approved(na, ctx) == Ok("refunded 7")  # replayed
    claimed = journal._rows("SELECT run_id, call_id FROM approvals_journal_approvals", ())
    assert claimed == [("pg-approvals", "call_r")]
    assert runs == [7]
    journal.close()


def test_cancel_requests_on_postgres_and_an_older_table_gains_theirs(
    postgres: dict[str, str],
) -> None:
    """Only a started call can be asked to stop; a request is found by its key; a
    journal whose table was made before cancel requests existed gains their table."""
    import psycopg

    from nous_tools.journal._record import JournalRecord

    table = "journal_before_cancels"
    *before, cancels, questions, answers = PostgresJournal(dsn_of(postgres), table=table)._schema()
    assert f"{table}_cancels" in cancels
    assert f"{table}_questions" in questions and f"{table}_answers" in answers
    with psycopg.connect(dsn_of(postgres), autocommit=True) as connection:
        for statement in before:
            connection.execute(statement)
    journal = PostgresJournal(dsn_of(postgres), table=table)
    running = JournalRecord(
        run_id="run", call_id="c1", tool="charge", digest="d", owner="other-host:1:x",
        lease_expires=4e9, started_at=1.0,
    )  # fmt: skip
    done = JournalRecord(
        run_id="run", call_id="c2", tool="charge", digest="d", owner="other-host:1:x",
        lease_expires=4e9, started_at=1.0,
    )  # fmt: skip
    assert journal.start(running) is None and journal.start(done) is None
    assert journal.complete(done, {"ok": True, "value": "charged"})
    assert journal.request_cancel("run", "c1") is True
    assert journal.request_cancel("run", "c1") is True
    assert journal.request_cancel("run", "c2") is False  # completed: nothing to stop
    assert journal.request_cancel("run", "missing") is False
    other = PostgresJournal(dsn_of(postgres), table=table)  # another process's view
    keys = [("run", "c1"), ("run", "c2"), ("other-run", "c1")]
    assert other.cancel_requests(keys) == {("run", "c1")}
    # questions and answers (issue 38): replaced, answered once, taken once, cleared
    ask = {"method": "elicitation/create", "params": {"message": "Colour?"}}
    journal.record_questions("run", "c1", {"colour": ask})
    journal.record_questions("run", "c1", {"colour": ask, "size": ask})
    assert other.questions("run", "c1")[0] == {"colour": ask, "size": ask}  # type: ignore[index]
    assert other.record_answers("run", "c1", {"colour": "teal", "other": 1}) == {"colour"}
    assert other.record_answers("run", "c1", {"colour": "red"}) == set()  # the first wins
    assert journal.take_answers([("run", "c1")]) == {("run", "c1"): {"colour": "teal"}}
    assert journal.take_answers([("run", "c1")]) == {}
    journal.record_questions("run", "c1", None)
    assert other.questions("run", "c1") is None
    journal.close()
    other.close()
