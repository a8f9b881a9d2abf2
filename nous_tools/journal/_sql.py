"""The journal on an SQL database: what SQLite, PostgreSQL and Django's databases
share (private).

One table, keyed by ``(run_id, call_id)``. Every write is one statement in
autocommit mode — an insert that does nothing when the key is there, or an update
guarded by the state and owner it expects — so each is atomic on its own and
durable when it returns, and no transaction is ever left open across a call. The
one exception is a call that redeems its approval here (``journal.approvals``):
the approval's claim and the ``started`` record are one short transaction.

A second table, ``<table>_cancels``, holds the requests to stop a started call
(:meth:`SQLJournal.request_cancel`): the process that runs the call reads them
(:meth:`SQLJournal.cancel_requests`) and stops it. Two more,
``<table>_questions`` and ``<table>_answers``, hold the questions a started call
waits on (:meth:`SQLJournal.record_questions`, read by :meth:`SQLJournal.questions`)
and the answers given to them through another process
(:meth:`SQLJournal.record_answers`), which the process running the call takes once
(:meth:`SQLJournal.take_answers`). Each is made, like the others, if missing, so a
journal made before it gains it on first use.
"""

from __future__ import annotations

import collections.abc as c
import contextlib
import functools
import json
import math
import re
import typing as t

from nous_tools._util._clock import monotonic, wall
from nous_tools.journal._approvals import ApprovalTaken, JournalApprovalStore
from nous_tools.journal._record import (
    STATES,
    Corrupt,
    JournalRecord,
    Key,
    check_grace,
    encode_outcome,
    key_of,
    older_than_seconds,
)

if t.TYPE_CHECKING:
    import datetime

    from nous_tools.results import Result

__all__ = ["SQLJournal"]

COLUMNS = (
    "run_id",
    "call_id",
    "tool",
    "tool_digest",
    "digest",
    "decision",
    "state",
    "owner",
    "lease_expires",
    "runs",
    "started_at",
    "completed_at",
    "outcome",
    "settled",
)

#: The table's default name.
TABLE = "nous_tools_journal"

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check_table(name: object) -> str:
    if type(name) is not str or not _IDENTIFIER.fullmatch(name):
        raise ValueError(
            f"a journal table name must be a plain SQL identifier (letters, digits, _), got {name!r}"
        )
    return name


def _replacing(record: JournalRecord, replace: str) -> tuple[t.Any, ...]:
    """The parameters of ``_sql_replace``: ``record`` takes over from owner ``replace``."""
    return (
        record.owner,
        record.lease_expires,
        record.started_at,
        record.tool_digest,
        record.run_id,
        record.call_id,
        replace,
    )


class _KeyTaken(Exception):
    """Undoes a transaction whose record's key another call holds."""


class SQLJournal:
    """A :class:`~nous_tools.Journal` on one SQL table. Subclasses give
    :meth:`_connection` (a DB-API connection in autocommit mode), the placeholder
    and the column types."""

    #: The DB-API placeholder of the driver (``?`` or ``%s``).
    _placeholder = "?"
    #: The column type of seconds since the epoch.
    _real = "REAL"

    grace: float
    #: Not a journal that takes whole calls (as a Cassette does).
    _run_call = None
    #: How often this process measures its clock against the database's (seconds).
    CLOCK_CHECK = 60.0

    def __init__(self, *, grace: float, table: str) -> None:
        self.grace = check_grace(grace)
        self.table = check_table(table)
        self._offset = 0.0  # the database's clock less this process's
        self._offset_until = -math.inf
        columns = ", ".join(COLUMNS)
        p = self._placeholder
        values = ", ".join([p] * len(COLUMNS))
        table = self.table
        self._sql_get = f"SELECT {columns} FROM {table} WHERE run_id = {p} AND call_id = {p}"
        self._sql_insert = (
            f"INSERT INTO {table} ({columns}) VALUES ({values}) "
            "ON CONFLICT (run_id, call_id) DO NOTHING"
        )
        self._sql_replace = (
            f"UPDATE {table} SET owner = {p}, lease_expires = {p}, started_at = {p}, "
            f"tool_digest = {p}, runs = runs + 1 "
            f"WHERE run_id = {p} AND call_id = {p} AND state = 'started' AND owner = {p}"
        )
        self._sql_renew = (
            f"UPDATE {table} SET lease_expires = {p} "
            f"WHERE run_id = {p} AND call_id = {p} AND state = 'started' AND owner = {p}"
        )
        self._sql_complete = (
            f"UPDATE {table} SET state = 'completed', outcome = {p}, completed_at = {p} "
            f"WHERE run_id = {p} AND call_id = {p} AND state = 'started' AND owner = {p}"
        )
        self._sql_settle = (
            f"UPDATE {table} SET state = 'completed', outcome = {p}, completed_at = {p}, "
            f"settled = 1 WHERE run_id = {p} AND call_id = {p} AND state = 'started'"
        )
        self._sql_unknown = (
            f"SELECT {columns} FROM {table} WHERE state = 'started' "
            "ORDER BY started_at, run_id, call_id"
        )
        self._sql_prune = f"DELETE FROM {table} WHERE state = 'completed' AND completed_at < {p}"
        self._sql_claim = (
            f"INSERT INTO {table}_approvals (approval_id, expires_at, claimed_at, run_id, "
            f"call_id) VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT (approval_id) DO NOTHING"
        )
        self._sql_forget = f"DELETE FROM {table}_approvals WHERE expires_at < {p}"
        self._sql_cancel = (  # only a call started, or waiting on questions, can be stopped
            f"INSERT INTO {table}_cancels (run_id, call_id, requested_at) "
            f"SELECT {p}, {p}, {p} WHERE EXISTS (SELECT 1 FROM {table} WHERE run_id = {p} "
            f"AND call_id = {p} AND state = 'started') OR EXISTS (SELECT 1 FROM "
            f"{table}_questions WHERE run_id = {p} AND call_id = {p}) "
            "ON CONFLICT (run_id, call_id) DO NOTHING"
        )
        self._sql_prune_cancels = (
            f"DELETE FROM {table}_cancels WHERE requested_at < {p} AND NOT EXISTS "
            f"(SELECT 1 FROM {table} WHERE {table}.run_id = {table}_cancels.run_id "
            f"AND {table}.call_id = {table}_cancels.call_id)"
        )
        self._sql_ask = (
            f"INSERT INTO {table}_questions (run_id, call_id, questions, asked_at) "
            f"VALUES ({p}, {p}, {p}, {p}) ON CONFLICT (run_id, call_id) DO UPDATE SET "
            "questions = excluded.questions, asked_at = excluded.asked_at"
        )
        self._sql_questions = (
            f"SELECT questions, asked_at FROM {table}_questions "
            f"WHERE run_id = {p} AND call_id = {p}"
        )
        self._sql_unask = f"DELETE FROM {table}_questions WHERE run_id = {p} AND call_id = {p}"
        self._sql_unanswer = f"DELETE FROM {table}_answers WHERE run_id = {p} AND call_id = {p}"
        self._sql_answer = (
            f"INSERT INTO {table}_answers (run_id, call_id, question, answer, answered_at) "
            f"VALUES ({p}, {p}, {p}, {p}, {p}) "
            "ON CONFLICT (run_id, call_id, question) DO NOTHING"
        )
        self._sql_take = (
            f"DELETE FROM {table}_answers WHERE run_id = {p} AND call_id = {p} AND question = {p}"
        )
        self._sql_prune_questions = [
            f"DELETE FROM {table}_{kind} WHERE {column} < {p} AND NOT EXISTS "
            f"(SELECT 1 FROM {table} WHERE {table}.run_id = {table}_{kind}.run_id "
            f"AND {table}.call_id = {table}_{kind}.call_id)"
            for kind, column in (("questions", "asked_at"), ("answers", "answered_at"))
        ]
        self._claims = 0  # claims made since the expired ones were last forgotten

    # -- for subclasses --------------------------------------------------------------

    def _connection(self) -> contextlib.AbstractContextManager[t.Any]:
        raise NotImplementedError

    def _transaction(self) -> contextlib.AbstractContextManager[c.Callable[[str, t.Any], int]]:
        """One transaction: yields ``execute(sql, parameters) -> rowcount``; commits
        when the block ends, rolls back when it raises."""
        raise NotImplementedError

    def _where(self) -> object:
        """What names this journal's database (two journals with the same ``_where``
        and table share their records)."""
        return id(self)

    def _schema(self) -> list[str]:
        """The statements that make the table and its indexes, if missing."""
        real = self._real
        table = self.table
        return [
            f"CREATE TABLE IF NOT EXISTS {table} ("
            "run_id TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL, "
            "tool_digest TEXT NOT NULL, digest TEXT NOT NULL, decision TEXT, "
            "state TEXT NOT NULL, owner TEXT NOT NULL, "
            f"lease_expires {real} NOT NULL, runs INTEGER NOT NULL, "
            f"started_at {real} NOT NULL, completed_at {real}, outcome TEXT, "
            "settled INTEGER NOT NULL DEFAULT 0, "
            "PRIMARY KEY (run_id, call_id))",
            f"CREATE INDEX IF NOT EXISTS {table}_state ON {table} (state, lease_expires)",
            f"CREATE INDEX IF NOT EXISTS {table}_completed ON {table} (completed_at)",
            f"CREATE TABLE IF NOT EXISTS {table}_approvals ("
            f"approval_id TEXT NOT NULL PRIMARY KEY, expires_at {real}, "
            f"claimed_at {real} NOT NULL, run_id TEXT, call_id TEXT)",
            f"CREATE TABLE IF NOT EXISTS {table}_cancels ("
            f"run_id TEXT NOT NULL, call_id TEXT NOT NULL, requested_at {real} NOT NULL, "
            "PRIMARY KEY (run_id, call_id))",
            f"CREATE TABLE IF NOT EXISTS {table}_questions ("
            "run_id TEXT NOT NULL, call_id TEXT NOT NULL, questions TEXT NOT NULL, "
            f"asked_at {real} NOT NULL, PRIMARY KEY (run_id, call_id))",
            f"CREATE TABLE IF NOT EXISTS {table}_answers ("
            "run_id TEXT NOT NULL, call_id TEXT NOT NULL, question TEXT NOT NULL, "
            f"answer TEXT NOT NULL, answered_at {real} NOT NULL, "
            "PRIMARY KEY (run_id, call_id, question))",
        ]

    # -- statements ------------------------------------------------------------------

    def _rows(self, sql: str, parameters: c.Sequence[t.Any]) -> list[t.Any]:
        with self._connection() as connection:
            cursor = connection.cursor()
            try:
                cursor.execute(sql, parameters)
                return list(cursor.fetchall())
            finally:
                cursor.close()

    def _write(self, sql: str, parameters: c.Sequence[t.Any]) -> int:
        with self._connection() as connection:
            cursor = connection.cursor()
            try:
                cursor.execute(sql, parameters)
                return int(cursor.rowcount)
            finally:
                cursor.close()

    def _write_unsynced(self, sql: str, parameters: c.Sequence[t.Any]) -> int:
        """:meth:`_write` for a record whose loss errs on the safe side (``completed``:
        lost to a power cut, the call reads as unknown, never runs twice), which
        need not wait for the disk. Subclasses that can relax syncing do."""
        return self._write(sql, parameters)

    @staticmethod
    def _record(row: c.Sequence[t.Any]) -> JournalRecord:
        values = dict(zip(COLUMNS, row, strict=True))
        run_id, call_id = values["run_id"], values["call_id"]
        try:
            state = values["state"]
            if state not in STATES:
                raise Corrupt(f"unknown state {state!r}")
            outcome = values["outcome"]
            if outcome is not None:
                outcome = json.loads(outcome)
                if not isinstance(outcome, dict):
                    raise Corrupt("its outcome is not a JSON object")
            if state == "completed" and outcome is None:
                raise Corrupt("it is completed without an outcome")
            completed_at = values["completed_at"]
            return JournalRecord(
                run_id=str(run_id),
                call_id=str(call_id),
                tool=str(values["tool"]),
                digest=str(values["digest"]),
                state=state,
                owner=str(values["owner"]),
                lease_expires=float(values["lease_expires"]),
                started_at=float(values["started_at"]),
                completed_at=float(completed_at) if completed_at is not None else None,
                outcome=outcome,
                decision=values["decision"],
                runs=int(values["runs"]),
                settled=bool(values["settled"]),
                tool_digest=str(values["tool_digest"]),
            )
        except (TypeError, ValueError) as exc:  # json's errors are ValueErrors too
            raise Corrupt(
                f"the journal's record of call {call_id!r} of run {run_id!r} is corrupt: {exc}"
            ) from None

    @staticmethod
    def _values(record: JournalRecord) -> tuple[t.Any, ...]:
        outcome = record.outcome
        return (
            record.run_id,
            record.call_id,
            record.tool,
            record.tool_digest,
            record.digest,
            record.decision,
            record.state,
            record.owner,
            record.lease_expires,
            record.runs,
            record.started_at,
            record.completed_at,
            json.dumps(outcome, ensure_ascii=False, allow_nan=False)
            if outcome is not None
            else None,
            int(record.settled),
        )

    # -- the Journal protocol ----------------------------------------------------------

    def get(self, run_id: str, call_id: str) -> JournalRecord | None:
        """The record of ``(run_id, call_id)``, or None."""
        rows = self._rows(self._sql_get, (run_id, call_id))
        return self._record(rows[0]) if rows else None

    def start(
        self,
        record: JournalRecord,
        *,
        replace: str | None = None,
        approval: tuple[str, float | None] | None = None,
    ) -> JournalRecord | None:
        """Write ``record`` as started, if its key is free (or, with ``replace``,
        still started by that owner); None when written, else the record there.
        With ``approval`` (its id and expiry), the approval is redeemed in
        :attr:`approvals` in the same transaction: ``ApprovalTaken`` (nothing
        written) when it was redeemed already."""
        if approval is not None:
            return self._start_redeeming(record, replace, approval)
        if replace is None:
            if self._write(self._sql_insert, self._values(record)) == 1:
                return None
        elif self._write(self._sql_replace, _replacing(record, replace)) == 1:
            return None
        found = self.get(record.run_id, record.call_id)
        if found is None and replace is None:  # removed meanwhile: try once more
            if self._write(self._sql_insert, self._values(record)) == 1:
                return None
            found = self.get(record.run_id, record.call_id)
        if found is None:
            raise Corrupt(
                f"the record of call {record.call_id!r} of run {record.run_id!r} vanished "
                "while it was being started"
            )
        return found

    def _start_redeeming(
        self, record: JournalRecord, replace: str | None, approval: tuple[str, float | None]
    ) -> JournalRecord | None:
        approval_id, expires_at = approval
        claim = (approval_id, expires_at, wall(), record.run_id, record.call_id)
        if replace is None:
            sql, values = self._sql_insert, self._values(record)
        else:
            sql, values = self._sql_replace, _replacing(record, replace)
        for _ in range(2):
            try:
                with self._transaction() as execute:
                    if execute(self._sql_claim, claim) != 1:
                        raise ApprovalTaken(approval_id)  # rolled back: nothing written
                    if execute(sql, values) != 1:
                        raise _KeyTaken  # the key is another call's: the claim is undone
                self._now_and_then()
                return None
            except _KeyTaken:
                pass
            found = self.get(record.run_id, record.call_id)
            if found is not None:
                return found
            if replace is not None:
                break
        raise Corrupt(
            f"the record of call {record.call_id!r} of run {record.run_id!r} vanished "
            "while it was being started"
        )

    @functools.cached_property
    def approvals(self) -> JournalApprovalStore:
        """An :class:`~nous_tools.ApprovalStore` in this journal's database. Given to
        a registry whose calls this journal records, an approved call redeems its
        approval in the same transaction that records its start (both or neither),
        instead of before it."""
        return JournalApprovalStore(self)

    def _same_database(self, other: object) -> bool:
        return (
            isinstance(other, SQLJournal)
            and type(other) is type(self)
            and other.table == self.table
            and other._where() == self._where()
        )

    def _claim_approval(self, approval_id: str, expires_at: float | None) -> bool:
        """Claim ``approval_id`` on its own (not with a call's record): True the first
        time."""
        claimed = self._write(self._sql_claim, (approval_id, expires_at, wall(), None, None)) == 1
        self._now_and_then()
        return claimed

    def _now_and_then(self) -> None:
        """After a claim: every 256th forgets the claims whose tokens have expired."""
        self._claims += 1
        if self._claims >= 256:
            self._claims = 0
            with contextlib.suppress(Exception):  # a claim made is not undone by this
                self._write(self._sql_forget, (wall(),))

    def complete(self, record: JournalRecord, outcome: c.Mapping[str, t.Any]) -> bool:
        """Record ``outcome`` if the call is still started by ``record.owner``."""
        text = json.dumps(outcome, ensure_ascii=False, allow_nan=False)
        written = self._write_unsynced(
            self._sql_complete, (text, wall(), record.run_id, record.call_id, record.owner)
        )
        return written == 1

    # -- one clock -------------------------------------------------------------------

    def _database_now(self) -> float | None:
        """The database server's clock (seconds since the epoch), or None when the
        database is on this host's clock (SQLite). Subclasses on a server say it."""
        return None

    def clock(self) -> float:
        """Now, on the journal's clock: the database server's, as this process reads
        it (its offset from this host's clock measured every :attr:`CLOCK_CHECK`
        seconds). Leases are written and judged on it, so hosts whose clocks
        disagree agree on who is still running."""
        if monotonic() >= self._offset_until:
            before = wall()
            server = self._database_now()
            after = wall()
            if server is not None:
                self._offset = server - (before + after) / 2
            self._offset_until = monotonic() + self.CLOCK_CHECK
        return wall() + self._offset

    def renew(self, record: JournalRecord, lease_expires: float) -> bool:
        """Move the lease of the call ``record`` started to ``lease_expires`` while it
        runs (the heartbeat does); False when the call is no longer started by that
        owner (completed, settled or taken over)."""
        parameters = (lease_expires, record.run_id, record.call_id, record.owner)
        return self._write_unsynced(self._sql_renew, parameters) == 1

    def unknown(self) -> list[JournalRecord]:
        """The calls whose outcome is unknown (:meth:`JournalRecord.unknown`: the
        same rule ``execute`` answers ``OutcomeUnknown`` by), oldest first."""
        now = self.clock()
        started = (self._record(row) for row in self._rows(self._sql_unknown, ()))
        return [record for record in started if record.unknown(now)]

    def settle(self, key: Key, result: Result) -> JournalRecord:
        """Record ``result`` (``Ok``/``Err``) as the outcome of a started call; a
        repeat of the call then gets it. ``ValueError`` when the call is not in the
        journal or already completed."""
        from nous_tools.results import Err, Ok

        run_id, call_id = key_of(key)
        if not isinstance(result, (Ok, Err)):
            raise TypeError(f"settle expects an Ok or an Err, got {type(result).__name__}")
        found = self.get(run_id, call_id)
        if found is None:
            raise ValueError(f"call {call_id!r} of run {run_id!r} is not in the journal")
        outcome = encode_outcome(result, found.tool)
        text = json.dumps(outcome, ensure_ascii=False, allow_nan=False)
        if self._write(self._sql_settle, (text, wall(), run_id, call_id)) != 1:
            raise ValueError(
                f"call {call_id!r} of run {run_id!r} is already completed; nothing was changed"
            )
        settled = self.get(run_id, call_id)
        assert settled is not None
        return settled

    def prune(self, *, older_than: float | datetime.timedelta) -> int:
        """Remove the completed records completed more than ``older_than`` ago
        (seconds or a timedelta); the number removed. Started records (running, or
        unknown: waiting for a person) are kept."""
        seconds = older_than_seconds(older_than)
        self._write(self._sql_forget, (wall(),))  # and the approvals no token can use now
        removed = self._write(self._sql_prune, (wall() - seconds,))
        self._write(self._sql_prune_cancels, (wall() - seconds,))  # of calls now gone
        for sql in self._sql_prune_questions:  # and their questions and answers
            self._write(sql, (wall() - seconds,))
        return removed

    # -- cancel requests -------------------------------------------------------------

    def request_cancel(self, run_id: str, call_id: str) -> bool:
        """Ask whoever runs the started call ``(run_id, call_id)`` to stop it: the
        request is recorded (once; a repeat changes nothing) for
        :meth:`cancel_requests` to find. True when the call is asked to stop (now or
        before); False when it is neither started nor waiting on questions
        (:meth:`record_questions`: an approval comes before the call starts), as a
        completed call, or one not in the journal: there is nothing to stop."""
        key = (run_id, call_id)
        if self._write(self._sql_cancel, (*key, wall(), *key, *key)) == 1:
            return True
        return (run_id, call_id) in self.cancel_requests([(run_id, call_id)])

    def cancel_requests(self, keys: c.Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those of the calls ``keys`` (``(run_id, call_id)`` pairs) that were asked
        to stop (:meth:`request_cancel`)."""
        wanted = sorted(set(keys))
        found: set[tuple[str, str]] = set()
        p = self._placeholder
        for at in range(0, len(wanted), 100):  # by the primary key, 100 keys a statement
            chunk = wanted[at : at + 100]
            pairs = " OR ".join([f"(run_id = {p} AND call_id = {p})"] * len(chunk))
            sql = f"SELECT run_id, call_id FROM {self.table}_cancels WHERE {pairs}"
            rows = self._rows(sql, [value for key in chunk for value in key])
            found.update((str(run_id), str(call_id)) for run_id, call_id in rows)
        return found

    def _pairs(
        self, keys: c.Iterable[tuple[str, str]], sql: str
    ) -> c.Iterator[tuple[tuple[str, str], list[t.Any]]]:
        """The rows of ``sql`` (``... WHERE {pairs}``) for the calls ``keys``, read by
        the primary key, 100 keys a statement: ``(key, rest of the row)``."""
        wanted = sorted(set(keys))
        p = self._placeholder
        for at in range(0, len(wanted), 100):
            chunk = wanted[at : at + 100]
            pairs = " OR ".join([f"(run_id = {p} AND call_id = {p})"] * len(chunk))
            rows = self._rows(sql.format(pairs=pairs), [value for key in chunk for value in key])
            for run_id, call_id, *rest in rows:
                yield (str(run_id), str(call_id)), rest

    # -- questions and their answers ---------------------------------------------------

    def record_questions(
        self, run_id: str, call_id: str, questions: c.Mapping[str, t.Any] | None
    ) -> None:
        """Record that the call ``(run_id, call_id)`` waits on ``questions`` (each
        key's question, JSON: MCP's ``{"method", "params"}``), replacing what it
        waited on; None (or none) when it waits on nothing now: its questions and
        any answers not taken are forgotten."""
        if not questions:
            self._write(self._sql_unask, (run_id, call_id))
            self._write(self._sql_unanswer, (run_id, call_id))
            return
        text = json.dumps(dict(questions), ensure_ascii=False, allow_nan=False)
        self._write(self._sql_ask, (run_id, call_id, text, wall()))

    def questions(self, run_id: str, call_id: str) -> tuple[dict[str, t.Any], float] | None:
        """The questions the call waits on (:meth:`record_questions`) and when they
        were recorded (seconds since the epoch); None when it waits on none."""
        rows = self._rows(self._sql_questions, (run_id, call_id))
        if not rows:
            return None
        text, asked_at = rows[0]
        return dict(json.loads(text)), float(asked_at)

    def record_answers(self, run_id: str, call_id: str, answers: c.Mapping[str, t.Any]) -> set[str]:
        """Record ``answers`` (key -> JSON value) to the questions the call waits on,
        for the process running it to take (:meth:`take_answers`); an answer to no
        question it waits on, or to one already answered, is ignored. The keys
        recorded now."""
        found = self.questions(run_id, call_id)
        if found is None:
            return set()
        recorded: set[str] = set()
        for key, value in answers.items():
            if key not in found[0]:
                continue
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
            if self._write(self._sql_answer, (run_id, call_id, key, text, wall())) == 1:
                recorded.add(key)
        return recorded

    def take_answers(
        self, keys: c.Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[str, t.Any]]:
        """The answers recorded for the calls ``keys`` (:meth:`record_answers`), by
        call then question, each removed as it is taken: an answer is taken once,
        even by two processes at a time."""
        sql = f"SELECT run_id, call_id, question, answer FROM {self.table}_answers WHERE {{pairs}}"
        taken: dict[tuple[str, str], dict[str, t.Any]] = {}
        for key, (question, text) in self._pairs(keys, sql):
            if self._write(self._sql_take, (*key, question)) == 1:  # this one took it
                taken.setdefault(key, {})[str(question)] = json.loads(text)
        return taken

    def records(
        self, *, run_id: str | None = None, state: str | None = None, limit: int | None = None
    ) -> list[JournalRecord]:
        """The records, newest first: of one run, in one state (``"started"``,
        ``"completed"``), at most ``limit`` of them."""
        p = self._placeholder
        where: list[str] = []
        parameters: list[t.Any] = []
        if run_id is not None:
            where.append(f"run_id = {p}")
            parameters.append(run_id)
        if state is not None:
            if state not in STATES:
                raise ValueError(f"state must be one of {', '.join(STATES)}, got {state!r}")
            where.append(f"state = {p}")
            parameters.append(state)
        sql = f"SELECT {', '.join(COLUMNS)} FROM {self.table}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started_at DESC, run_id, call_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [self._record(row) for row in self._rows(sql, parameters)]
