"""``nous-tools journal``: list, show, settle and prune a call journal's records (private)."""

from __future__ import annotations

import argparse
import collections.abc as c
import datetime
import json
import math
import os
import re
import sys
import typing as t

from nous_tools._util._text import safe_str as _safe_str
from nous_tools.cli._arguments import _retries_option
from nous_tools.cli._console import (
    _PROG,
    EXIT_ERR,
    EXIT_OK,
    UsageError,
    _dumps,
    _one_line,
    _write_stdout,
)
from nous_tools.results import Err, Ok, Result

__all__: list[str] = []

_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _duration_option(text: str) -> float:
    """``3600``, ``90s``, ``15m``, ``12h``, ``30d`` → seconds."""
    unit = text[-1:].lower()
    number = text[:-1] if unit in _DURATION_UNITS else text
    try:
        value = float(number) * _DURATION_UNITS.get(unit, 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a duration (3600, 90s, 15m, 12h, 30d), got {text!r}"
        ) from None
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a duration >= 0, got {text}")
    return value


def _open_journal(target: str) -> t.Any:
    """The journal ``target`` names: a PostgreSQL DSN (``postgresql://...``,
    ``host=... dbname=...``) or the path of an SQLite journal, which must exist."""
    from nous_tools.journal import PostgresJournal, SQLiteJournal

    if target.startswith(("postgresql://", "postgres://")) or re.search(
        r"(^|\s)(host|dbname|service)=", target
    ):
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise UsageError(
                f"a PostgreSQL journal needs the 'postgres' extra: pip install "
                f"'nous-tools[postgres]' ({exc})"
            ) from exc
        return PostgresJournal(target)
    if not os.path.isfile(target):
        raise UsageError(f"no journal at {target!r} (an SQLite file, or a PostgreSQL DSN)")
    return SQLiteJournal(target)


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _clock_of(journal: t.Any) -> float | None:
    """Now on the journal's own clock (its database server's), or None (this host's)."""
    clock = getattr(journal, "clock", None)
    return float(clock()) if callable(clock) else None


def _state(record: t.Any, now: float | None = None) -> str:
    if record.state == "completed":
        return "settled" if record.settled else "completed"
    return "unknown" if record.unknown(now) else "running"


def _outcome(record: t.Any) -> str:
    outcome = record.outcome
    if outcome is None:
        return "-"
    if outcome.get("ok") is True:
        return "ok"
    error = outcome.get("error")
    return f"error ({error.get('type')})" if isinstance(error, dict) else "error"


def _show_record(record: t.Any, now: float | None = None) -> None:
    rows = [
        ("run", record.run_id),
        ("call", record.call_id),
        ("tool", record.tool),
        ("state", _state(record, now)),
        ("decision", record.decision or "-"),
        ("started", _when(record.started_at)),
        ("lease until", _when(record.lease_expires) if record.state == "started" else "-"),
        ("completed", _when(record.completed_at)),
        ("runs", str(record.runs)),
        ("owner", record.owner),
        ("arguments digest", record.digest),
        ("outcome", _outcome(record)),
    ]
    if record.state == "completed":
        from nous_tools.providers._tool_calls import format_tool_result

        try:
            rows.append(("model sees", format_tool_result(record.result(), record.tool)))
        except ValueError as exc:
            rows.append(("model sees", f"<corrupt: {exc}>"))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        _write_stdout(f"{name.ljust(width)}  {value}")


def _command_journal(options: argparse.Namespace) -> int:
    journal = _open_journal(options.target)
    try:
        return _ACTIONS[options.action](journal, options)
    except UsageError:
        raise
    except Exception as exc:  # the journal could not be read or written
        print(
            f"{_PROG}: journal: {type(exc).__name__}: {_one_line(_safe_str(exc))}",
            file=sys.stderr,
        )
        return EXIT_ERR
    finally:
        journal.close()


def _list(journal: t.Any, options: argparse.Namespace) -> int:
    """``journal list``: the calls, newest first, as a table or JSON."""
    if options.unknown:  # the API's own list: what execute calls unknown
        records = [r for r in journal.unknown() if options.run in (None, r.run_id)]
        records = records[::-1][: options.limit]  # newest first, as list shows
    else:
        records = journal.records(run_id=options.run, state=options.state, limit=options.limit)
    if options.json:
        _write_stdout(_dumps([record.to_dict() for record in records], ascii_only=False))
        return EXIT_OK
    if not records:
        _write_stdout("no calls")
        return EXIT_OK
    now = _clock_of(journal)
    rows = [("RUN", "CALL", "TOOL", "STATE", "STARTED", "OUTCOME")]
    rows += [
        (r.run_id, r.call_id, r.tool, _state(r, now), _when(r.started_at), _outcome(r))
        for r in records
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)]
        _write_stdout("  ".join([*cells, row[-1]]).rstrip())
    return EXIT_OK


def _show(journal: t.Any, options: argparse.Namespace) -> int:
    """``journal show``: one call's record."""
    record = journal.get(options.run_id, options.call_id)
    if record is None:
        print(
            f"{_PROG}: journal: call {options.call_id!r} of run {options.run_id!r} "
            "is not in the journal",
            file=sys.stderr,
        )
        return EXIT_ERR
    if options.json:
        _write_stdout(_dumps(record.to_dict(), ascii_only=False))
    else:
        _show_record(record, _clock_of(journal))
    return EXIT_OK


def _settle(journal: t.Any, options: argparse.Namespace) -> int:
    """``journal settle``: a person's outcome for a call whose outcome is unknown."""
    if options.ok is not None:
        try:
            result: Result = Ok(json.loads(options.ok))
        except ValueError as exc:
            raise UsageError(f"--ok needs a JSON value ({exc})") from None
    else:
        result = Err(options.error)
    try:
        record = journal.settle((options.run_id, options.call_id), result)
    except ValueError as exc:  # not in the journal, or completed already
        print(f"{_PROG}: journal: {exc}", file=sys.stderr)
        return EXIT_ERR
    if options.json:
        _write_stdout(_dumps(record.to_dict(), ascii_only=False))
    else:
        _show_record(record, _clock_of(journal))
    return EXIT_OK


def _prune(journal: t.Any, options: argparse.Namespace) -> int:
    """``journal prune``: completed records older than ``--older-than``, removed."""
    removed = journal.prune(older_than=options.older_than)
    if options.json:
        _write_stdout(_dumps({"removed": removed}))
    else:
        _write_stdout(f"removed {removed} completed record(s)")
    return EXIT_OK


#: Each action of ``nous-tools journal``.
_ACTIONS: dict[str, c.Callable[[t.Any, argparse.Namespace], int]] = {
    "list": _list,
    "show": _show,
    "settle": _settle,
    "prune": _prune,
}


def _add_journal_parser(commands: t.Any, common: argparse.ArgumentParser) -> None:
    journal = commands.add_parser(
        "journal",
        parents=[common],
        help="inspect a call journal: unknown calls, one call, settle, prune",
        description="Inspect the call journal at DSN_OR_PATH (an SQLite file, or a "
        "PostgreSQL DSN: postgresql://... or host=... dbname=...). See "
        "docs/concepts/journal.md.",
    )
    actions = journal.add_subparsers(dest="action", metavar="ACTION", required=True)
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON")
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("target", metavar="DSN_OR_PATH")
    key = argparse.ArgumentParser(add_help=False)
    key.add_argument("run_id", metavar="RUN_ID")
    key.add_argument("call_id", metavar="CALL_ID")

    _add_list_parser(actions, [target, output])
    _add_show_parser(actions, [target, key, output])
    _add_settle_parser(actions, [target, key, output])
    _add_prune_parser(actions, [target, output])


def _add_list_parser(actions: t.Any, parents: list[argparse.ArgumentParser]) -> None:
    listing = actions.add_parser(
        "list",
        parents=parents,
        help="list the journaled calls, newest first",
        description="List the journaled calls, newest first. STATE is running, unknown "
        "(started, never completed, its lease expired: a person must settle it), completed "
        "or settled.",
    )
    listing.add_argument(
        "--unknown", action="store_true", help="only the calls whose outcome is unknown"
    )
    listing.add_argument("--run", metavar="RUN_ID", help="only the calls of this run")
    listing.add_argument("--state", choices=("started", "completed"), help="only this state")
    listing.add_argument(
        "--limit", type=_retries_option, default=100, metavar="N", help="at most N (100)"
    )


def _add_show_parser(actions: t.Any, parents: list[argparse.ArgumentParser]) -> None:
    actions.add_parser(
        "show",
        parents=parents,
        help="show one call's record and outcome",
        description="Show the record of one call: its state, lease, runs and outcome.",
    )


def _add_settle_parser(actions: t.Any, parents: list[argparse.ArgumentParser]) -> None:
    settle = actions.add_parser(
        "settle",
        parents=parents,
        help="record the outcome a person found out for an unknown call",
        description="Record the outcome of a started call (its outcome was unknown): a "
        "repeat of the call then gets it. Exactly one of --ok and --error.",
    )
    given = settle.add_mutually_exclusive_group(required=True)
    given.add_argument("--ok", metavar="JSON", help="it succeeded, with this value (JSON)")
    given.add_argument("--error", metavar="MESSAGE", help="it failed, with this message")


def _add_prune_parser(actions: t.Any, parents: list[argparse.ArgumentParser]) -> None:
    prune = actions.add_parser(
        "prune",
        parents=parents,
        help="remove old completed records",
        description="Remove the completed records older than DURATION; started ones "
        "(running, or unknown) are kept.",
    )
    prune.add_argument(
        "--older-than",
        type=_duration_option,
        required=True,
        metavar="DURATION",
        help="3600, 90s, 15m, 12h, 30d",
    )
