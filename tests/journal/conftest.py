"""What the journal's tests share: a SQLite journal in a temporary folder, and a call
started in it by another process (a live lease, another owner)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nous_tools import SQLiteJournal
from nous_tools.journal._record import JournalRecord


def started_elsewhere(
    journal: SQLiteJournal, run_id: str, call_id: str, tool: str = "charge"
) -> JournalRecord:
    """Record ``call_id`` of ``run_id`` as started by another host's process, its lease
    live for decades: the record another replica sees while that process runs it."""
    record = JournalRecord(
        run_id=run_id, call_id=call_id, tool=tool, digest="d", owner="other-host:1:x",
        lease_expires=4e9, started_at=1.0,
    )  # fmt: skip
    assert journal.start(record) is None
    return record


@pytest.fixture
def journal(tmp_path: Path) -> SQLiteJournal:
    return SQLiteJournal(tmp_path / "calls.db")
