"""What a call journal stores, and the protocol a journal implements (private module;
the names are public through :mod:`nous_tools.journal`).

A record is one call, keyed by ``(run_id, call_id)``: the tool's name, a digest of
its identity (:func:`~nous_tools.approval.tool_digest`) and one of the canonical
arguments, who runs it and until when (the lease), and once it is over its outcome,
encoded as :func:`encode_outcome` writes it.
"""

from __future__ import annotations

import collections.abc as c
import hashlib
import json
import os
import typing as t

import attrs

from nous_tools import errors as _errors_module
from nous_tools._util import _canonical as _c
from nous_tools._util._clock import wall
from nous_tools.errors import ToolError, _rebuild
from nous_tools.results import Err, Ok

if t.TYPE_CHECKING:
    import datetime

    from nous_tools.results import Result

__all__ = [
    "OUTCOME_VERSION",
    "Journal",
    "JournalRecord",
    "arguments_digest",
    "decode_outcome",
    "encode_outcome",
    "idempotency_key",
    "new_owner",
    "owner_alive",
    "owner_gone",
]

#: The version of the outcome encoding (the ``"v"`` of a stored outcome).
OUTCOME_VERSION = 1

#: The states of a record: ``started`` (written before the first attempt) and
#: ``completed`` (written with the outcome).
STATES = ("started", "completed")

State = t.Literal["started", "completed"]


class Corrupt(ValueError):
    """A record the journal holds cannot be read back (its outcome, its state)."""


def _seconds(value: object, what: str) -> float:
    if type(value).__name__ == "timedelta" and hasattr(value, "total_seconds"):
        return float(value.total_seconds())  # datetime is imported only by those who use it
    if type(value) in (int, float) and t.cast(float, value) >= 0:  # NaN fails the >=
        return float(t.cast(float, value))
    raise ValueError(f"{what} must be a number of seconds >= 0 or a timedelta, got {value!r}")


@attrs.frozen(slots=True)
class JournalRecord:
    """One journaled call, as the journal holds it.

    ``run_id`` and ``call_id`` are its key. ``tool`` is the tool's name,
    ``tool_digest`` the digest of its identity (its code and schema) when it
    started, ``digest`` the SHA-256 of the tool name and the canonical arguments.
    ``decision`` is a person's decision for a call resolved from a paused batch
    (``"approve"``, ``"reject"``, or ``"edit:<digest of the edited arguments>"``),
    None otherwise. ``state`` is ``"started"`` or ``"completed"``; ``owner`` names
    the process that started it and ``lease_expires`` (Unix seconds) until when it
    may still be running there; ``started_at`` and ``completed_at`` are when it was
    started and completed (Unix seconds; None while it is not completed). ``runs`` counts the times it was started (more than
    one only for an ``idempotent=True`` tool re-run after a crash). ``outcome`` is
    the stored outcome (:meth:`result` rebuilds it); ``settled`` is True when a
    person recorded it with ``journal.settle``.
    """

    run_id: str
    call_id: str
    tool: str
    digest: str
    state: State = "started"
    owner: str = ""
    lease_expires: float = 0.0
    started_at: float = 0.0
    completed_at: float | None = None
    outcome: c.Mapping[str, t.Any] | None = attrs.field(default=None, repr=False)
    decision: str | None = None
    runs: int = 1
    settled: bool = False
    tool_digest: str = attrs.field(default="", repr=False)

    @property
    def key(self) -> tuple[str, str]:
        """``(run_id, call_id)``."""
        return (self.run_id, self.call_id)

    def expired(self, now: float | None = None) -> bool:
        """True when the record is started and its lease has passed (the call's
        outcome is unknown: whoever ran it stopped before recording it)."""
        if self.state != "started":
            return False
        if now is None:
            now = wall()
        return self.lease_expires <= now

    def unknown(self, now: float | None = None) -> bool:
        """True when the call's outcome is unknown: started, never completed, and
        whoever ran it stopped. The one rule, for ``execute``, ``Journal.unknown()``
        and the command line alike: the process that started it is certainly gone
        (this host, this PID namespace, no live process with its pid and start
        time), or its lease has passed (a running call keeps renewing it). The
        process that runs a call knows it exactly, whatever the lease says."""
        if self.state != "started":
            return False
        alive = owner_alive(self.owner)
        if alive is not None:
            return not alive
        return self.expired(now)

    def result(self) -> Result:
        """The stored outcome as ``Ok``/``Err`` (see :func:`decode_outcome`);
        ``ValueError`` when the record is not completed or its outcome is corrupt."""
        if self.state != "completed" or self.outcome is None:
            raise Corrupt(
                f"the record of call {self.call_id!r} of run {self.run_id!r} has no outcome"
            )
        return decode_outcome(self.outcome, self.tool)

    def to_dict(self) -> dict[str, t.Any]:
        """The record as JSON-safe data (what ``nous-tools journal show --json`` prints)."""
        return {
            "run_id": self.run_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "tool_digest": self.tool_digest,
            "digest": self.digest,
            "decision": self.decision,
            "state": self.state,
            "unknown": self.unknown(),
            "owner": self.owner,
            "lease_expires": self.lease_expires,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
            "runs": self.runs,
            "settled": self.settled,
            "outcome": dict(self.outcome) if self.outcome is not None else None,
        }


#: What ``settle`` accepts as a key: ``(run_id, call_id)``, or a record.
Key = t.Union[tuple[str, str], JournalRecord]  # noqa: UP007  (a runtime alias)


def key_of(key: object) -> tuple[str, str]:
    """``(run_id, call_id)`` of a key given to ``settle``; ``TypeError`` otherwise."""
    if isinstance(key, JournalRecord):
        return key.key
    if isinstance(key, tuple) and len(key) == 2 and all(type(part) is str and part for part in key):
        return t.cast(tuple[str, str], key)
    raise TypeError(
        f"a journal key is a (run_id, call_id) tuple of non-empty str or a JournalRecord, "
        f"got {type(key).__name__}"
    )


@t.runtime_checkable
class Journal(t.Protocol):
    """Where journaled calls are recorded: :class:`SQLiteJournal` (one host),
    :class:`PostgresJournal` (many hosts), or your own.

    The pipeline uses :meth:`get`, :meth:`start` and :meth:`complete`; operators use
    :meth:`unknown`, :meth:`settle` and :meth:`prune`; MCP tasks across replicas
    use ``request_cancel`` and ``cancel_requests`` when a journal has them (the SQL
    journals do). Each method may raise: the
    executor turns any exception into ``Err(JournalUnavailable)`` and does not
    run the call (fail closed). ``grace`` is added to a call's deadline to make its
    lease.
    """

    grace: float

    def get(self, run_id: str, call_id: str) -> JournalRecord | None:
        """The record of ``(run_id, call_id)``, or None."""
        ...

    def start(self, record: JournalRecord, *, replace: str | None = None) -> JournalRecord | None:
        """Write ``record`` (state ``started``), durably, if no record has its key —
        or, with ``replace``, if the record there is still started by the owner
        ``replace`` (an ``idempotent=True`` call taken over after a crash; then
        ``runs`` goes up by one). None when it was written, else the record found
        there (the caller decides again from it). Atomic across every process that
        shares the journal."""
        ...

    def complete(self, record: JournalRecord, outcome: c.Mapping[str, t.Any]) -> bool:
        """Record ``outcome`` for the call ``record`` started, if it is still
        started by ``record.owner``; True when written."""
        ...

    def unknown(self) -> list[JournalRecord]:
        """The uncertain calls: those whose record says so
        (:meth:`JournalRecord.unknown`), oldest first."""
        ...

    def settle(self, key: Key, result: Result) -> JournalRecord:
        """Record what a person found out about a started call (``Ok(...)`` or
        ``Err(...)``); a repeat then gets it. ``ValueError`` when the call is not
        in the journal or is already completed."""
        ...

    def prune(self, *, older_than: float | datetime.timedelta) -> int:
        """Remove the completed records older than ``older_than`` (seconds or a
        timedelta); the number removed. Started records are kept."""
        ...


# -- digests and keys ----------------------------------------------------------------


def _fallback_tree(value: object, depth: int = 0) -> t.Any:
    """A JSON tree for arguments the canonical encoding refuses (a datetime, an
    attrs value passed to ``execute`` directly): values it cannot hold are tagged
    with their type and ``repr``, so equal calls still share a digest."""
    if depth > _c.MAX_DEPTH:
        return {"$repr": "<too deep>"}
    try:
        return _c.encode(value)
    except ValueError:
        pass
    if isinstance(value, c.Mapping):
        return {
            "$mapping": sorted(
                ([repr(k), _fallback_tree(v, depth + 1)] for k, v in value.items()),
                key=lambda pair: pair[0],
            )
        }
    if isinstance(value, (list, tuple)):
        return [_fallback_tree(item, depth + 1) for item in value]
    kind = type(value)
    try:
        shown = repr(value)
    except Exception:
        shown = "<repr raised>"
    return {"$repr": f"{kind.__module__}.{kind.__qualname__}:{shown}"}


def arguments_digest(tool: str, arguments: object) -> str:
    """SHA-256 hex of the tool name and the canonical, type-faithful encoding of the
    arguments (an approval's fingerprint): the same call has the same digest in
    every process, ``{"a": 1}`` and ``{"a": 1.0}`` do not."""
    try:
        tree = _c.encode(arguments if type(arguments) is dict else dict(t.cast(t.Any, arguments)))
    except (ValueError, TypeError):
        tree = _fallback_tree(arguments)
    return tree_digest(tool, tree)


def tree_digest(tool: str, tree: t.Any) -> str:
    """:func:`arguments_digest` of arguments already in their canonical encoding
    (``tree``, as a cassette keeps them)."""
    data = _c.dumps({"tool": tool, "arguments": tree})
    return hashlib.sha256(data).hexdigest()


def idempotency_key(run_id: str, call_id: str) -> str:
    """The ``ctx.idempotency_key`` of the call ``(run_id, call_id)``: SHA-256 hex of
    both, so it is stable (every process, every re-run) and reveals neither id."""
    data = json.dumps(["nous-tools idempotency key v1", run_id, call_id]).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


_owner_prefix: tuple[int, str] | None = None


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from ``/proc``), or None
    when there is no such process (or no ``/proc``), or only its zombie is left."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()
    if not fields or fields[0] in (b"Z", b"X"):  # it ended; its parent has not reaped it
        return None
    return fields[19].decode("ascii") if len(fields) > 19 else None


def _namespace() -> str:
    """This process's PID namespace (its inode), or "" where there is none to read."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def new_owner() -> str:
    """A new owner name for a call being started: ``host:pid:random:namespace:start``
    (the PID namespace and the start time of the process let :func:`owner_gone` tell
    a dead process from a live one, and from a later process with the same pid)."""
    global _owner_prefix
    pid = os.getpid()
    prefix = _owner_prefix
    if prefix is None or prefix[0] != pid:
        import socket

        identity = f"{_namespace()}:{_start_time(pid) or ''}"
        prefix = _owner_prefix = (pid, f"{socket.gethostname()}:{pid}:{{}}:{identity}")
    return prefix[1].format(os.urandom(6).hex())


def owner_alive(owner: str) -> bool | None:
    """Whether the call of ``owner`` may still run: for a call of this process,
    whether it runs now (exactly); for another process of this host, in this PID
    namespace, False when that process is gone (its pid and start time are looked
    up; a zombie is gone), else None; None whenever nothing can be known (another
    host, another container, no ``/proc``). None: the lease decides, which a
    running call keeps renewing (``nous_tools.journal._leases``)."""
    parts = owner.split(":")
    if len(parts) != 5 or not parts[3] or not parts[4]:
        return None
    host, pid_text, _, namespace, started = parts
    if not pid_text.isdigit():
        return None
    mine = _owner_prefix
    if mine is None or mine[0] != os.getpid():
        new_owner()
        mine = _owner_prefix
    assert mine is not None
    own_host, _, _, own_namespace, own_start = mine[1].split(":")
    if host != own_host or namespace != own_namespace:
        return None
    if int(pid_text) == mine[0] and started == own_start:  # a call of this process:
        from nous_tools.journal._leases import held  # it knows exactly which run

        return held(owner)
    # Another process of this host: gone, or alive and renewing the leases of the
    # calls it runs (one it gave up on lets its lease run out).
    return False if _start_time(int(pid_text)) != started else None


def owner_gone(owner: str) -> bool:
    """True only when the process that started a call is certainly gone (see
    :func:`owner_alive`): then its lease need not be waited out."""
    return owner_alive(owner) is False


# -- outcomes ------------------------------------------------------------------------


def _update_tree(update: object) -> list[t.Any] | None:
    """A ContextUpdate's operations as ``[[op, key, value], ...]``, or None when a
    value cannot be encoded faithfully."""
    operations = getattr(update, "operations", None)
    if not operations:
        return []
    try:
        return [[op.op, op.key, _c.encode(op.value)] for op in operations]
    except (ValueError, RecursionError):
        return None


def encode_outcome(result: Result, tool: str) -> dict[str, t.Any]:
    """An outcome as the journal stores it (JSON-safe):

    - ``Ok`` whose value the canonical encoding holds (JSON values, and tuples,
      sets, bytes, non-string keys, tagged as approval tokens and batches write
      them) and whose text for a model reads back the same:
      ``{"v": 1, "ok": true, "value": <tree>}`` (with ``"plain": true`` when the
      tree is the JSON value itself, with no tags);
    - any other ``Ok``: ``{"v": 1, "ok": true, "text": <the text a model gets>}``
      (replayed as ``Ok(text)``);
    - ``Err``: ``{"v": 1, "ok": false, "error": {"type", "message", "text",
      "tool_name"[, "timeout"]}}`` — the error's class name and message and the
      text a model gets, so a replay gives the provider the same message.

    An ``Ok``'s context update is kept as ``"update"`` when its values can be
    encoded (else ``"update_dropped": true``).

    >>> from nous_tools import Err, Ok, ToolTimeout
    >>> encode_outcome(Ok({"id": 7, "tags": ("a",)}), "charge")
    {'v': 1, 'ok': True, 'value': {'id': 7, 'tags': {'$tuple': ['a']}}}
    >>> encode_outcome(Ok({"id": 7}), "charge")  # JSON as it is
    {'v': 1, 'ok': True, 'plain': True, 'value': {'id': 7}}
    >>> encode_outcome(Err(ToolTimeout(tool_name="slow", timeout=2.0)), "slow")["error"]["text"]
    "Error: tool 'slow' timed out after 2.0 s and was not retried"
    """
    from nous_tools._rendering import format_tool_result

    if isinstance(result, Ok):
        tree: dict[str, t.Any] = {"v": OUTCOME_VERSION, "ok": True}
        try:
            value = _c.encode(result.value)
            dumped = _c.dumps(value)
            if b'"$' not in dumped:
                tree["plain"] = True  # JSON as it is: read back without decoding
            elif _unordered(dumped):  # sets and non-str keys come back in another order
                text = format_tool_result(result, tool)
                back = Ok(_c.thaw(_c.decode(value)))
                if format_tool_result(back, tool) != text:
                    raise ValueError("its text would change")
            tree["value"] = value
        except (ValueError, RecursionError):
            tree["text"] = format_tool_result(result, tool)
        if result.update is not None and len(getattr(result.update, "operations", ())):
            operations = _update_tree(result.update)
            if operations is None:
                tree["update_dropped"] = True
            else:
                tree["update"] = operations
        return tree
    reason = getattr(result, "reason", None)
    error: dict[str, t.Any] = {
        "type": type(reason).__name__,
        "message": _message(reason),
        "text": format_tool_result(result, tool),
        "tool_name": tool,
    }
    timeout = getattr(reason, "timeout", None)
    if type(timeout) in (int, float):
        error["timeout"] = timeout
    return {"v": OUTCOME_VERSION, "ok": False, "error": error}


def _unordered(dumped: bytes) -> bool:
    """Whether an encoded value (its canonical bytes) holds a set or a dict with keys
    that are not all str, whose items the encoding sorts."""
    return any(tag in dumped for tag in (b'"$set"', b'"$frozenset"', b'"$dict"'))


def _message(reason: object) -> str:
    if isinstance(reason, ToolError):
        return reason.message
    if isinstance(reason, str):
        return reason
    from nous_tools._util._text import safe_str

    return safe_str(reason)


def _error_classes() -> dict[str, type[ToolError]]:
    found: dict[str, type[ToolError]] = {}
    for name in _errors_module.__all__:
        kind = getattr(_errors_module, name)
        if isinstance(kind, type) and issubclass(kind, ToolError):
            found[name] = kind
    return found


#: nous-tools' own error classes by name: what a stored error comes back as.
_ERRORS = _error_classes()


def _field(tree: c.Mapping[str, t.Any], key: str, kinds: tuple[type, ...]) -> t.Any:
    value = tree.get(key)
    if type(value) not in kinds:
        raise Corrupt(f"'{key}' is {type(value).__name__}")
    return value


def decode_outcome(tree: c.Mapping[str, t.Any], tool: str | None = None) -> Result:
    """The ``Ok``/``Err`` an encoded outcome stands for; ``ValueError`` for a tree
    :func:`encode_outcome` would not have written.

    An ``Err`` comes back with a :class:`~nous_tools.ToolError` of the stored class
    when it is one of nous_tools' own (``ToolTimeout``, ...), else a ``ToolError``;
    either way ``format_tool_result`` gives the stored text.

    >>> from nous_tools import Ok, format_tool_result
    >>> decode_outcome(encode_outcome(Ok({"id": 7}), "charge"))
    Ok(value={'id': 7}, update=None)
    """
    if not isinstance(tree, c.Mapping) or tree.get("v") != OUTCOME_VERSION:
        raise Corrupt("not an outcome of version 1")
    ok = tree.get("ok")
    if ok is True:
        update = None
        if "update" in tree:
            update = _decode_update(tree["update"])
        if "value" in tree:
            try:  # plain JSON is its own value; a tagged tree is decoded in one walk
                value = tree["value"]
                value = (
                    _c.thaw(value)
                    if tree.get("plain") is True
                    else _c.decode(value, "the value", frozen=False)
                )
            except (ValueError, RecursionError) as exc:
                raise Corrupt(str(exc)) from None
        else:
            value = _field(tree, "text", (str,))
        return Ok(value, update)
    if ok is not False:
        raise Corrupt("'ok' is neither true nor false")
    error = tree.get("error")
    if not isinstance(error, c.Mapping):
        raise Corrupt("an error outcome without its 'error'")
    kind = _field(error, "type", (str,))
    message = _field(error, "message", (str,))
    text = _field(error, "text", (str,))
    name = error.get("tool_name", tool)
    if name is not None and type(name) is not str:
        raise Corrupt("'tool_name' is not a str")
    cls = _ERRORS.get(kind, ToolError)
    reason = _rebuild(cls, message, name, None, None)
    if kind == "ToolTimeout":
        timeout = error.get("timeout")
        reason.timeout = timeout if type(timeout) in (int, float) else None  # type: ignore[attr-defined]
    if kind in ("ToolNotFound", "ToolDenied"):
        reason.name = name  # type: ignore[attr-defined]
    reason._model_text = text  # type: ignore[attr-defined]  # what format_tool_result gives
    reason.error_type = kind  # type: ignore[attr-defined]
    return Err(reason)


def _decode_update(tree: object) -> t.Any:
    from nous_tools.context_update import ContextUpdate, Operation

    if type(tree) is not list:
        raise Corrupt("'update' is not a list")
    operations = []
    for entry in tree:
        if type(entry) is not list or len(entry) != 3:
            raise Corrupt("an update operation is not [op, key, value]")
        op, key, value = entry
        try:
            operations.append(Operation(op, key, _c.thaw(_c.decode(value, "an update value"))))
        except (TypeError, ValueError) as exc:
            raise Corrupt(str(exc)) from None
    return ContextUpdate(operations)


def check_grace(value: object) -> float:
    """A journal's ``grace`` option, checked."""
    return _seconds(value, "grace")


def older_than_seconds(value: object) -> float:
    """``prune``'s ``older_than``, checked."""
    return _seconds(value, "older_than")
