"""Two requests racing one paused call (issue 36): two Django worker processes on a
real PostgreSQL, a ``DjangoJournal`` and the approval store of Django's database cache,
or the journal's own store (``journal.approvals``: one transaction), both submitting
the same batch at once — the same decision twice (a double click), and
approve against reject (two tabs). 15 rounds each (slow suite): the tool runs at most
once, both requests answer the first outcome, and the journal holds nothing but the
call's outcome (never "its approval was already used").
"""

from __future__ import annotations

import collections.abc as c
import json
import multiprocessing
import pathlib
import typing as t

import pytest

pytest.importorskip("django")
pytest.importorskip("psycopg")

import approval_journal_race as race

from nous_tools import (
    PostgresJournal,
    RunContext,
    ToolCall,
    execute_tool_calls,
    format_tool_result,
)

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")
WAIT = 120.0
ROUNDS = 15


@pytest.fixture(scope="module")
def postgres() -> c.Iterator[dict[str, str]]:
    from servers import postgres_server

    with postgres_server() as server:
        setup = SPAWN.Process(target=race.create_cache_table, args=(server,))
        setup.start()
        setup.join(WAIT)
        assert setup.exitcode == 0
        yield server


def _wire(run_id: str) -> dict[str, t.Any]:
    registry = race.make_registry()
    ctx = RunContext.new(run_id=run_id)
    paused = execute_tool_calls(registry, [ToolCall("call_r", "refund", {"order": 7})], ctx)
    assert paused.pending
    return t.cast(dict[str, t.Any], json.loads(json.dumps(paused.to_dict(race.SECRET))))


@pytest.mark.parametrize("store", ["cache", "journal"], ids=["cache store", "journal's store"])
@pytest.mark.parametrize("second", ["approve", "reject"], ids=["double click", "two tabs"])
def test_two_django_processes_racing_one_approval_run_it_once_and_agree(
    postgres: dict[str, str], tmp_path: pathlib.Path, second: str, store: str
) -> None:
    runs = tmp_path / "runs.txt"
    run_ids = [f"conversation-{second}-{store}-{n}" for n in range(ROUNDS)]
    wires = [_wire(run_id) for run_id in run_ids]
    barrier = SPAWN.Barrier(2)
    results = SPAWN.Queue()
    processes = [
        SPAWN.Process(
            target=race.submit,
            args=(postgres, wires, [decision] * ROUNDS, str(runs), barrier, results, store),
        )
        for decision in ("approve", second)
    ]
    for process in processes:
        process.start()
    answers: dict[int, list[str]] = {n: [] for n in range(ROUNDS)}
    for _ in range(2 * ROUNDS):
        round_, text = results.get(timeout=WAIT)
        answers[round_].append(text)
    for process in processes:
        process.join(WAIT)
        assert process.exitcode == 0
    lines = runs.read_text().splitlines() if runs.exists() else []
    assert len(lines) <= ROUNDS  # at most once a round
    dsn = f"host={postgres['host']} user={postgres['user']} dbname={postgres['name']}"
    journal = PostgresJournal(dsn)
    try:
        for n, run_id in enumerate(run_ids):
            record = journal.get(run_id, "call_r")
            assert record is not None and record.state == "completed", (n, record)
            stored = format_tool_result(record.result(), "refund")
            assert stored in (
                "refunded 7",
                "Error: tool 'refund' was rejected by the user and did not run",
            )
            assert "already used" not in stored
            assert answers[n] == [stored, stored], (n, answers[n], stored)
        if store == "journal":  # each round's approval redeemed once, with its record
            claims = journal._rows(
                "SELECT run_id, call_id FROM nous_tools_journal_approvals WHERE run_id = ANY(%s)",
                (run_ids,),
            )
            assert sorted(claims) == sorted((run_id, "call_r") for run_id in run_ids)
    finally:
        journal.close()
    ran = sum(1 for n in range(ROUNDS) if answers[n][0] == "refunded 7")
    assert len(lines) == ran  # each round that says it ran, ran once; the others never
