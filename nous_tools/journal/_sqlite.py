"""``SQLiteJournal``: the call journal in one SQLite file, for the threads and
processes of one host (private module; the name is public in :mod:`nous_tools`)."""

from __future__ import annotations

import collections.abc as c
import contextlib
import math
import os
import threading
import time
import typing as t

from nous_tools._util._clock import monotonic
from nous_tools.journal._sql import TABLE, SQLJournal
from nous_tools.journal._wait import lock_wait

if t.TYPE_CHECKING:
    import sqlite3

__all__ = ["SQLiteJournal"]

_SYNCHRONOUS = ("FULL", "NORMAL", "EXTRA")


def _patiently(connection: sqlite3.Connection, statement: str, timeout: float) -> object:
    """Run ``statement`` (setting up a connection), retrying while another process
    holds the lock it needs: switching a new file to WAL takes no busy timeout."""
    import sqlite3

    deadline = monotonic() + timeout
    pause = 0.002
    while True:
        try:
            row = connection.execute(statement).fetchone()
            return row[0] if row else None
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _create_private(path: str) -> None:
    """Make the journal's file, if it is new, readable and writable by its owner
    only (0600): it holds arguments and results. SQLite gives its ``-wal`` and
    ``-shm`` files the database file's permissions. A file that exists keeps its own."""
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError:  # it exists (or cannot be made: sqlite3 says why)
        return
    os.close(descriptor)


class SQLiteJournal(SQLJournal):
    """The call journal in the SQLite database at ``path`` (made if missing), in
    WAL mode: many readers and one writer at a time, across the threads and the
    processes of one host (not over a network file system).

    ``synchronous`` is SQLite's setting. ``"NORMAL"`` (the default, WAL's usual
    setting) makes each record survive the crash of any process (a SIGKILL, the
    OOM killer, a deploy) the moment it is written, but the last records before a
    power cut or a kernel crash may be lost — and a call whose ``started`` was lost
    may then run again. ``"FULL"`` also syncs each ``started`` record to disk before
    the tool runs (the ``completed`` one need not wait: its loss makes the call read
    as unknown, never run twice), at the price of the disk's sync time per call.
    ``timeout`` is how long a write waits for another process's (seconds). A new
    file, and its ``-wal`` and ``-shm`` files, are made readable by their owner only
    (``0600``): they hold the calls' arguments and results.
    ``grace`` is added to a call's deadline to make its lease. ``table`` names
    the table.

    >>> import tempfile, os
    >>> from nous_tools import RunContext, Tool, ToolExecutor
    >>> charged = []
    >>> charge = Tool.from_function(lambda amount: charged.append(amount) or "paid",
    ...                             name="charge", timeout=None)
    >>> journal = SQLiteJournal(os.path.join(tempfile.mkdtemp(), "calls.db"))
    >>> with ToolExecutor(journal=journal) as executor:
    ...     ctx = RunContext.new(run_id="conversation-42")
    ...     first = executor.execute(charge, {"amount": 5}, ctx, call_id="call_1")
    ...     again = executor.execute(charge, {"amount": 5}, ctx, call_id="call_1")
    >>> first.value, again.value, charged
    ('paid', 'paid', [5])
    >>> journal.get("conversation-42", "call_1").state
    'completed'
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        grace: float = 60.0,
        synchronous: str = "NORMAL",
        timeout: float = 30.0,
        table: str = TABLE,
    ) -> None:
        if synchronous not in _SYNCHRONOUS:
            raise ValueError(
                f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, got {synchronous!r}"
            )
        if type(timeout) not in (int, float) or not timeout >= 0:
            raise ValueError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
        self.path = os.fspath(path)
        self.synchronous = synchronous
        self.timeout = float(timeout)
        super().__init__(grace=grace, table=table)
        self._lock = threading.Lock()
        self._opening = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._pid = os.getpid()
        self._ready = False
        # Connections a forked child inherited: never used, never closed (closing
        # one would touch the parent's locks and write-ahead log).
        self._inherited: list[sqlite3.Connection] = []
        self._waits: dict[int, float] = {}  # each connection's busy timeout, by id

    def __repr__(self) -> str:
        return f"<SQLiteJournal {self.path!r}>"

    def _open(self) -> sqlite3.Connection:
        import sqlite3

        _create_private(self.path)
        connection = sqlite3.connect(
            self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        try:
            with self._opening:  # one at a time here; other processes: _patiently
                mode = _patiently(connection, "PRAGMA journal_mode", self.timeout)
                if str(mode).lower() != "wal":  # a new file: WAL is kept in it once set
                    _patiently(connection, "PRAGMA journal_mode=WAL", self.timeout)
                connection.execute(f"PRAGMA synchronous={self.synchronous}")
                if not self._ready:
                    for statement in self._schema():
                        _patiently(connection, statement, self.timeout)
                    self._ready = True
        except BaseException:
            connection.close()
            raise
        self._waits[id(connection)] = self.timeout  # connect()'s busy timeout
        return connection

    def _write_unsynced(self, sql: str, parameters: c.Sequence[t.Any]) -> int:
        if self.synchronous == "NORMAL":
            return self._write(sql, parameters)
        with self._connection() as connection:
            connection.execute("PRAGMA synchronous=NORMAL")
            try:
                return int(connection.execute(sql, parameters).rowcount)
            finally:
                connection.execute(f"PRAGMA synchronous={self.synchronous}")

    def _where(self) -> object:
        return os.path.realpath(self.path)

    @contextlib.contextmanager
    def _transaction(self) -> c.Iterator[c.Callable[[str, t.Any], int]]:
        with self._connection() as connection:
            connection.execute("BEGIN IMMEDIATE")  # the write lock now, not halfway
            try:
                yield lambda sql, parameters: int(connection.execute(sql, parameters).rowcount)
            except BaseException:
                with contextlib.suppress(Exception):  # else the connection is closed
                    connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    @contextlib.contextmanager
    def _connection(self) -> c.Iterator[sqlite3.Connection]:
        pid = os.getpid()
        with self._lock:
            if pid != self._pid:  # a forked child: the parent's connections are not ours
                self._inherited.extend(self._idle)
                self._idle = []
                self._pid = pid
            connection = self._idle.pop() if self._idle else None
        if connection is None:
            connection = self._open()
        wait = lock_wait(self.timeout)
        if wait != self.timeout:  # in steps of 1/4 s: a PRAGMA only when it changes
            wait = min(self.timeout, math.ceil(wait * 4) / 4)
        if self._waits.get(id(connection)) != wait:  # the call's bound, or our own
            connection.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
            self._waits[id(connection)] = wait
        try:
            yield connection
        except BaseException:
            connection.close()  # in an unknown state: never reused
            raise
        with self._lock:
            if pid == self._pid:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close the connections not in use. The journal stays usable: it opens
        new ones when it needs them."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
