"""The MCP tasks of one process and the journal's cancel requests (issue 38,
replicas), in one process on a SQLite journal: a request recorded by another
replica (another journal object on the same file) cancels the running task here;
a task that ends after such a request reads as cancelled; the watcher reads the
journal only while a task runs; a local cancel is recorded for the other replicas."""

from __future__ import annotations

import threading
import time
import typing as t
from pathlib import Path

import pytest

from nous_tools import SQLiteJournal
from nous_tools.contrib.mcp._tasks import Task, Tasks, run_id_of
from nous_tools.journal._record import JournalRecord

WAIT = 30.0
IDENTITY = "auth-alice"


def _running(journal: SQLiteJournal, tasks: Tasks, task_id: str) -> tuple[Task, threading.Event]:
    """A task of this process whose call the journal holds as started."""
    record = JournalRecord(
        run_id=run_id_of(IDENTITY), call_id=task_id, tool="tick", digest="d",
        owner="other-host:1:x", lease_expires=4e9, started_at=time.time(),
    )  # fmt: skip
    assert journal.start(record) is None
    stopped = threading.Event()
    now = time.time()
    task = Task(task_id, IDENTITY, "tick", now, stopped.set, updated=now)
    tasks.add(task)
    return task, stopped


def _watcher_stops(tasks: Tasks) -> None:
    deadline = time.monotonic() + WAIT
    while tasks._watching:  # set False as the watcher's thread returns
        assert time.monotonic() < deadline, "the watcher kept reading the journal"
        time.sleep(0.05)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "calls.db"


def test_a_cancel_another_replica_records_stops_the_task_running_here(path: Path) -> None:
    here = Tasks(SQLiteJournal(path))
    task, stopped = _running(t.cast(SQLiteJournal, here.journal), here, "task-1")
    other = Tasks(SQLiteJournal(path))  # another replica, on the same journal
    assert other.cancel("task-1", IDENTITY) is True
    assert other.cancelled_in_journal("task-1", IDENTITY)
    assert stopped.wait(WAIT), "the task running here was not cancelled"
    assert task.status == "cancelled"
    _watcher_stops(here)  # nothing runs: the journal is no longer read


def test_a_task_that_ends_after_a_cancel_request_reads_cancelled(path: Path) -> None:
    journal = SQLiteJournal(path)
    here = Tasks(journal)
    task, _ = _running(journal, here, "task-2")
    assert SQLiteJournal(path).request_cancel(run_id_of(IDENTITY), "task-2")
    here.settle(task, "completed", {"content": []})  # before the watcher's next read
    assert task.status == "cancelled" and task.result is None


def test_a_local_cancel_is_recorded_for_the_other_replicas(path: Path) -> None:
    journal = SQLiteJournal(path)
    here = Tasks(journal)
    _, stopped = _running(journal, here, "task-3")
    assert here.cancel("task-3", IDENTITY) is True
    assert stopped.is_set()
    assert Tasks(SQLiteJournal(path)).cancelled_in_journal("task-3", IDENTITY)
    assert not Tasks(SQLiteJournal(path)).cancelled_in_journal("task-3", "auth-bob")
    _watcher_stops(here)


def test_an_ended_task_is_not_asked_to_stop(path: Path) -> None:
    journal = SQLiteJournal(path)
    here = Tasks(journal)
    task, _ = _running(journal, here, "task-4")
    here.settle(task, "completed", {"content": []})
    other = Tasks(SQLiteJournal(path))
    record = journal.get(run_id_of(IDENTITY), "task-4")
    assert record is not None
    assert journal.complete(record, {"ok": True, "value": "done"})
    assert other.cancel("task-4", IDENTITY) is True  # acknowledged
    assert not other.cancelled_in_journal("task-4", IDENTITY)
    assert other.cancel("no-such-task", IDENTITY) is False
    _watcher_stops(here)
