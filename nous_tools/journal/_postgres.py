"""``PostgresJournal``: the call journal in PostgreSQL, for many hosts (private
module; the name is public in :mod:`nous_tools`). Needs ``pip install
'nous-tools[postgres]'`` (psycopg 3)."""

from __future__ import annotations

import collections.abc as c
import contextlib
import os
import threading
import typing as t

from nous_tools.journal._sql import TABLE, SQLJournal

__all__ = ["PostgresJournal"]


class PostgresJournal(SQLJournal):
    """The call journal in a PostgreSQL table, shared by every process and host that
    reaches the database (``pip install 'nous-tools[postgres]'``: psycopg 3).

    ``dsn`` is a libpq connection string or URL (``"postgresql://app@db/app"``,
    ``"host=/run/postgresql dbname=app"``). Each write is one statement in its own
    transaction (autocommit): a ``started`` record is durable when it returns, as the
    server's ``synchronous_commit`` makes commits; a ``completed`` one does not wait
    for the server's disk (``synchronous_commit`` off for it alone: lost to a server
    crash, the call reads as unknown, never runs twice). The table (``table``, default
    ``nous_tools_journal``) is made on first use if missing. Connections are kept
    for reuse, one per thread at a time; a broken one is dropped, and a forked
    child opens its own. ``connect_timeout`` (seconds) bounds connecting;
    ``grace`` is added to a call's deadline to make its lease.
    """

    _placeholder = "%s"
    _real = "DOUBLE PRECISION"

    def __init__(
        self,
        dsn: str,
        *,
        grace: float = 60.0,
        table: str = TABLE,
        connect_timeout: float = 10.0,
    ) -> None:
        if type(dsn) is not str or not dsn:
            raise TypeError(f"PostgresJournal needs a DSN (a non-empty str), got {dsn!r}")
        if type(connect_timeout) not in (int, float) or not connect_timeout > 0:
            raise ValueError(
                f"connect_timeout must be a number of seconds > 0, got {connect_timeout!r}"
            )
        self.dsn = dsn
        self.connect_timeout = float(connect_timeout)
        super().__init__(grace=grace, table=table)
        self._lock = threading.Lock()
        self._idle: list[t.Any] = []
        self._pid = os.getpid()
        self._ready = False
        self._inherited: list[t.Any] = []

    def __repr__(self) -> str:
        return f"<PostgresJournal table={self.table!r}>"  # the DSN may hold a password

    def _open(self) -> t.Any:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - exercised without the extra
            raise ImportError(
                "PostgresJournal needs psycopg 3: pip install 'nous-tools[postgres]'"
            ) from exc
        connection = psycopg.connect(
            self.dsn, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
        )
        try:
            if not self._ready:
                with connection.transaction():  # one process makes the table at a time
                    connection.execute(
                        "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"nous_tools:{self.table}",)
                    )
                    for statement in self._schema():
                        connection.execute(statement)
                self._ready = True
        except BaseException:
            connection.close()
            raise
        return connection

    def _where(self) -> object:
        return self.dsn

    @contextlib.contextmanager
    def _transaction(self) -> c.Iterator[c.Callable[[str, t.Any], int]]:
        with self._connection() as connection, connection.transaction():
            yield lambda sql, parameters: int(connection.execute(sql, parameters).rowcount)

    @contextlib.contextmanager
    def _connection(self) -> c.Iterator[t.Any]:
        pid = os.getpid()
        with self._lock:
            if pid != self._pid:  # a forked child: the parent's connections are not ours
                self._inherited.extend(self._idle)
                self._idle = []
                self._pid = pid
            connection = self._idle.pop() if self._idle else None
        if connection is None:
            connection = self._open()
        try:
            yield connection
        except BaseException:
            with contextlib.suppress(Exception):
                connection.close()  # broken, or in an unknown state: never reused
            raise
        with self._lock:
            if pid == self._pid and not connection.closed:
                self._idle.append(connection)
                return
        with contextlib.suppress(Exception):
            connection.close()

    def _database_now(self) -> float | None:
        """The server's clock: leases are judged on it, whatever this host's says."""
        (row,) = self._rows("SELECT EXTRACT(EPOCH FROM clock_timestamp())", ())
        return float(row[0])

    def _write_unsynced(self, sql: str, parameters: c.Sequence[t.Any]) -> int:
        with self._connection() as connection, connection.transaction():
            connection.execute("SET LOCAL synchronous_commit TO OFF")
            return int(connection.execute(sql, parameters).rowcount)

    def close(self) -> None:
        """Close the connections not in use. The journal stays usable: it opens new
        ones when it needs them."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            with contextlib.suppress(Exception):
                connection.close()
