"""Test helpers: a :class:`Cassette` records tool outcomes once and replays them.

Record the tools of an agent loop once, against the real services, then replay them
in tests and evals without running any tool: a cassette is usable wherever a call
journal is (``ToolExecutor(journal=...)``, ``Registry(journal=...)``).

>>> import os, tempfile
>>> from nous_tools import Tool, ToolExecutor
>>> calls = []
>>> def weather(city: str) -> dict:
...     calls.append(city)
...     return {"city": city, "temp_c": 21}
>>> tool = Tool.from_function(weather, timeout=None)
>>> path = os.path.join(tempfile.mkdtemp(), "weather.json")
>>> with ToolExecutor(journal=Cassette.record(path)) as executor:
...     executor.execute(tool, {"city": "Oslo"}).value
{'city': 'Oslo', 'temp_c': 21}
>>> with ToolExecutor(journal=Cassette.replay(path)) as executor:
...     served = executor.execute(tool, {"city": "Oslo"})      # not run
...     missed = executor.execute(tool, {"city": "Paris"})
>>> served.value, calls
({'city': 'Oslo', 'temp_c': 21}, ['Oslo'])
>>> print(missed.reason.message)  # doctest: +ELLIPSIS
Cassette 'weather.json' has no recorded outcome for tool 'weather' with arguments {"city": "Paris"} ...

Outcomes are kept by tool and canonical arguments, in the order they were recorded
for each tool: the same call made three times replays the three outcomes in turn.
Approval and validation still happen on replay (they are not the tool); the
attempts are what the cassette stands in for. Every call is recorded, whether or not
it has a ``run_id`` and a call id.
"""

from __future__ import annotations

import collections
import collections.abc as c
import json
import os
import tempfile
import threading
import typing as t

from nous_tools._engine._journal import Claim, Rest, replayed
from nous_tools._util import _canonical as _c
from nous_tools.errors import ToolError
from nous_tools.journal._record import (
    JournalRecord,
    Key,
    arguments_digest,
    decode_outcome,
    encode_outcome,
    tree_digest,
)
from nous_tools.results import Err, Result
from nous_tools.run_context import RunContext

if t.TYPE_CHECKING:
    import datetime

    from nous_tools.tool import Tool

__all__ = ["Cassette", "CassetteMiss"]

_FORMAT = "nous_tools_cassette"
_VERSION = 1


class CassetteMiss(ToolError):
    """A strict replay was asked for a call its cassette does not hold: which tool,
    with which arguments, and what the cassette has for that tool."""


def _shown(arguments: object) -> str:
    try:
        text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(arguments)
    return text if len(text) <= 500 else text[:497] + "..."


def _tree(arguments: object) -> t.Any:
    try:
        return _c.encode(dict(t.cast(t.Any, arguments)))
    except (TypeError, ValueError):
        return {"$repr": _shown(arguments)}


def _check_digest(path: str, position: int, entry: dict[str, t.Any]) -> None:
    """The entry's ``arguments`` must be the ones its ``digest`` (what a replay
    matches a call by) was made of: an edited file never answers a call whose
    arguments it does not show. Arguments kept only as their ``repr`` (they had no
    canonical form) cannot be checked."""
    arguments = entry.get("arguments")
    if isinstance(arguments, dict) and set(arguments) == {"$repr"}:
        return
    try:
        digest = tree_digest(entry["tool"], arguments)
    except (TypeError, ValueError):
        digest = None
    if digest != entry["digest"]:
        raise ValueError(
            f"{path!r}: call #{position} ({entry['tool']!r}, arguments "
            f"{_shown(arguments)}) does not match its digest: the arguments or the digest "
            "were edited; record the cassette again"
        )


class Cassette:
    """Tool outcomes kept in a JSON file at ``path``: :meth:`record` writes them as
    calls run, :meth:`replay` serves them without running the tools. Use either as
    a ``journal=``.

    In replay mode with ``strict=True`` (the default) a call the cassette does not
    hold — another tool, other arguments, or more calls than were recorded — is
    ``Err(CassetteMiss)`` naming the tool and the arguments it was asked with (and
    logged at error level); with ``strict=False`` such a call runs for real (and is
    not recorded).
    """

    #: A call journal's lease grace (unused: a cassette holds no leases).
    grace = 0.0

    def __init__(self, path: str | os.PathLike[str], mode: str, *, strict: bool = True) -> None:
        if mode not in ("record", "replay"):
            raise ValueError(f"a Cassette's mode is 'record' or 'replay', got {mode!r}")
        self.path = os.fspath(path)
        self.mode = mode
        self.strict = bool(strict)
        self._lock = threading.Lock()
        self._entries: list[dict[str, t.Any]] = []
        self._queues: dict[tuple[str, str], collections.deque[dict[str, t.Any]]] = {}
        if mode == "replay":
            self._load()
        else:
            self._save()

    @classmethod
    def record(cls, path: str | os.PathLike[str]) -> Cassette:
        """A cassette that records every call's outcome into ``path`` (replacing
        what was there), written after each call."""
        return cls(path, "record")

    @classmethod
    def replay(cls, path: str | os.PathLike[str], *, strict: bool = True) -> Cassette:
        """A cassette that serves the outcomes recorded in ``path`` without running
        the tools (``FileNotFoundError`` when there is none)."""
        return cls(path, "replay", strict=strict)

    def __repr__(self) -> str:
        return f"<Cassette {self.mode} {self.path!r} calls={len(self._entries)}>"

    @property
    def calls(self) -> list[dict[str, t.Any]]:
        """The recorded calls, in order: ``{"tool", "arguments", "digest", "outcome"}``."""
        with self._lock:
            return [dict(entry) for entry in self._entries]

    # -- the file ------------------------------------------------------------------

    def _load(self) -> None:
        with open(self.path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict) or data.get(_FORMAT) != _VERSION:
            raise ValueError(f"{self.path!r} is not a nous-tools cassette (version 1)")
        calls = data.get("calls")
        if not isinstance(calls, list):
            raise ValueError(f"{self.path!r}: 'calls' must be a list")
        for position, entry in enumerate(calls, 1):
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("tool"), str)
                and isinstance(entry.get("digest"), str)
                and isinstance(entry.get("outcome"), dict)
            ):
                raise ValueError(f"{self.path!r}: call #{position} is malformed")
            _check_digest(self.path, position, entry)
            self._entries.append(entry)
            key = (entry["tool"], entry["digest"])
            self._queues.setdefault(key, collections.deque()).append(entry)

    def _save(self) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        data = {_FORMAT: _VERSION, "calls": self._entries}
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".cassette-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=2, ensure_ascii=False, allow_nan=False)
                f.write("\n")
            os.replace(temporary, self.path)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise

    # -- the pipeline --------------------------------------------------------------

    def _run_call(
        self,
        rest: Rest,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any],
        call_id: str | None,
        skip_approval: bool,
        shielded: bool,
    ) -> Result:
        """The journal step of a call, replaced: the rest of the pipeline with a
        claim that replays or records the call."""
        claim = _CassetteClaim(self, tool.name, arguments, call_id)
        return rest(tool, arguments, ctx, call_id, skip_approval, shielded, None, claim)

    def _next(self, tool: Tool, arguments: object, call_id: str | None) -> Result | None:
        digest = arguments_digest(tool.name, arguments)
        with self._lock:
            queue = self._queues.get((tool.name, digest))
            entry = queue.popleft() if queue else None
            recorded = sum(1 for entry in self._entries if entry["tool"] == tool.name)
        if entry is not None:
            try:
                result = decode_outcome(entry["outcome"], tool.name)
            except ValueError as exc:
                return Err(
                    CassetteMiss(
                        f"Cassette {os.path.basename(self.path)!r}: the recorded outcome of "
                        f"tool '{tool.name}' is corrupt ({exc})",
                        tool_name=tool.name,
                    )
                )
            return replayed(tool, call_id, result)
        if not self.strict:
            return None
        from nous_tools._util._log import log

        message = (
            f"Cassette {os.path.basename(self.path)!r} has no recorded outcome for tool "
            f"'{tool.name}' with arguments {_shown(arguments)} ({recorded} call(s) of "
            f"'{tool.name}' recorded; every one with these arguments already replayed, "
            "or none had them)"
        )
        log.error("%s", message)
        return Err(CassetteMiss(message, tool_name=tool.name))

    def _add(self, tool: str, arguments: object, result: Result) -> None:
        entry = {
            "tool": tool,
            "arguments": _tree(arguments),
            "digest": arguments_digest(tool, arguments),
            "outcome": encode_outcome(result, tool),
        }
        with self._lock:
            self._entries.append(entry)
            self._save()

    # -- the Journal protocol (a cassette keys calls by tool and arguments) ------------

    def get(self, run_id: str, call_id: str) -> JournalRecord | None:
        """None: a cassette keeps no records by key."""
        return None

    def start(self, record: JournalRecord, *, replace: str | None = None) -> JournalRecord | None:
        """Nothing to do: a cassette keeps no records by key."""
        return None

    def complete(self, record: JournalRecord, outcome: c.Mapping[str, t.Any]) -> bool:
        """Nothing to do: a cassette keeps no records by key."""
        return True

    def unknown(self) -> list[JournalRecord]:
        """Empty: a cassette has no uncertain calls."""
        return []

    def settle(self, key: Key, result: Result) -> JournalRecord:
        """A cassette has nothing to settle: ``TypeError``."""
        raise TypeError("a Cassette has no started calls to settle")

    def prune(self, *, older_than: float | datetime.timedelta) -> int:
        """Nothing to prune: 0."""
        return 0


class _CassetteClaim(Claim):
    """A call on a cassette: replayed at the point its attempts would start, or run
    and recorded."""

    __slots__ = ("arguments", "call_id", "cassette", "name")

    def __init__(
        self, cassette: Cassette, name: str, arguments: object, call_id: str | None
    ) -> None:
        self.cassette = cassette
        self.name = name
        self.arguments = arguments
        self.call_id = call_id

    def start(self, tool: Tool, ctx: RunContext[t.Any]) -> RunContext[t.Any] | Result:
        cassette = self.cassette
        if cassette.mode == "record":
            return ctx
        served = cassette._next(tool, self.arguments, self.call_id)
        return ctx if served is None else served

    def finish(self, tool: Tool, result: Result) -> None:
        cassette = self.cassette
        if cassette.mode != "record":
            return
        try:
            cassette._add(self.name, self.arguments, result)
        except Exception:
            from nous_tools._util._log import log

            log.error("Cassette %r could not record a call of tool '%s'", cassette.path, tool.name)
