"""The wire format of a paused batch, version 2 (private): what
:meth:`ToolCallResults.to_dict <nous_tools.ToolCallResults.to_dict>` writes and
:meth:`~nous_tools.ToolCallResults.from_dict` reads (it still reads version 1, the
format before, so that batches in flight across an upgrade are not lost).

Version 1 nested each pending call's own signed approval token in the signed batch:
the arguments twice (the call's and the token's), the tool name, call id, audience
and time twice, and a signature inside a signature. Version 2 signs once and says
each thing once::

    {"v": 2, "type": "tool_call_batch", "id", "issued_at", "audience", "provider",
     "run_id"? (the context's, when it has one),
     "calls": [
        {"id", "name", "kind", "arguments", "output": {"content", "is_error"}},
        {"id", "name", "kind", "approval": {"id", "tool_digest", "arguments",
                                            "description"?, "issued_at"?, "audience"?},
         "arguments"?},
     ],
     "signature"}

A pending call's approval is for the call it sits in (its tool is the call's
``name``, its call id the call's ``id``); ``issued_at`` and ``audience`` are the
batch's unless the approval says otherwise; the call's own ``arguments`` (what the
model sent) are the approved ones unless the call carries them — which it does
only when the registry's ``before`` advice changed them. ``description`` is the
tool's, for the person deciding. The signature — HMAC-SHA256 under the server's
secret, over a domain string and the canonical JSON of every other field — covers
every byte of every call, what is left out included: a field cannot be added,
removed or changed without the secret.
"""

from __future__ import annotations

import collections.abc as c
import hashlib
import hmac
import typing as t

from nous_tools._util import _canonical as _c
from nous_tools._util._tokens import (
    _HMAC,
    _key,
    _refused,
    limits,
    mismatch,
    refusal,
)
from nous_tools.approval import NeedsApproval, approved_arguments, approved_tool, tool_digest
from nous_tools.results import Err

if t.TYPE_CHECKING:
    from nous_tools.providers._calls_in import Provider
    from nous_tools.providers._tool_calls import ToolCallResults
    from nous_tools.registry import Registry
    from nous_tools.tool import Tool

__all__ = ["VERSION", "read", "write"]

#: The version of the batch wire format this module writes and reads.
VERSION = 2

_TYPE = "tool_call_batch"
# Signed bytes start with this: no signature made with the same secret over
# anything else (a version 1 batch, an approval token) is a version 2 signature.
_DOMAIN = b"nous-tools tool call batch v2\n"
_CHECKSUM = "sha256:"
_NONE = type(None)
_PROVIDERS = frozenset({"openai", "responses", "anthropic"})
_KINDS = ("function", "custom")
_new = object.__new__
_set = object.__setattr__


def _openssl_hmac() -> t.Callable[[bytes, bytes, t.Any], t.Any]:
    """OpenSSL's HMAC, which ``hmac.new`` itself uses for SHA-256, without its
    Python wrapper; ``hmac.new`` where there is none, or it refuses SHA-256."""
    try:
        from _hashlib import hmac_new

        hmac_new(b"key", b"", hashlib.sha256).hexdigest()
    except Exception:  # pragma: no cover - a Python without OpenSSL's, a FIPS build
        return hmac.new
    return hmac_new


#: ``hmac.new(key, data, hashlib.sha256)``: the same digest, a few calls sooner.
_hmac_new = _openssl_hmac()
_sha256 = hashlib.sha256
_compare_digest = hmac.compare_digest


def seal(payload: c.Mapping[str, t.Any], secret: str | bytes | None) -> str:
    """The signature of a version 2 payload (every field but ``signature``)."""
    return _sealed(payload, None if secret is None else _key(secret))


def _sealed(payload: c.Mapping[str, t.Any], key: bytes | None) -> str:
    """:func:`seal` with the secret's key (``_key(secret)``), or None: unsigned."""
    data = _DOMAIN + _c.dumps(payload)
    if key is None:
        return _CHECKSUM + hashlib.sha256(data).hexdigest()
    signature: str = _hmac_new(key, data, hashlib.sha256).hexdigest()
    return _HMAC + signature


def refused(why: str) -> ValueError:
    return ValueError(f"tool call batch refused: {why}")


def check_signed(signature: str, secret: str | bytes | None, allow_unsigned: bool) -> bytes | None:
    """Refuse a batch whose signature does not match how it is read (both formats):
    signed but no secret given, a secret but no HMAC, unsigned and not allowed.
    Returns the secret's HMAC key (None: no secret)."""
    if secret is not None:
        key = _key(secret)  # a bad secret is the program's error, said as such
        if not signature.startswith(_HMAC):
            raise refused("the batch is not signed (no HMAC signature)")
        return key
    if signature.startswith(_HMAC):
        raise refused("the batch is signed, but no secret was given to check it")
    if not allow_unsigned:
        raise refused(
            "unsigned batches are refused: pass the secret it was signed with "
            "(or allow_unsigned=True, for trusted storage only)"
        )
    return None


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join("None" if kind is _NONE else kind.__name__ for kind in kinds)


def _field(data: c.Mapping[str, t.Any], key: str, kinds: tuple[type, ...], where: str) -> t.Any:
    if key not in data:
        raise refused(f"{where} has no '{key}'")
    value = data[key]
    if type(value) not in kinds:
        of = "" if where == "the batch" else f" of {where}"
        raise refused(f"'{key}'{of} must be {_names(kinds)}, got {type(value).__name__}")
    return value


# -- writing ----------------------------------------------------------------------------


def write(batch: ToolCallResults, secret: str | bytes | None) -> dict[str, t.Any]:
    """``batch.to_dict(secret)``: the batch in the version 2 format, signed."""
    registry = batch.registry
    audience = registry.name if registry is not None else None
    calls: list[dict[str, t.Any]] = []
    for index, (call, result) in enumerate(zip(batch.calls, batch.results, strict=True)):
        try:
            arguments = _c.encode(call.arguments)
        except (ValueError, RecursionError) as exc:
            raise ValueError(
                f"the tool call batch cannot be written: the arguments of call "
                f"{call.id!r} cannot be encoded ({exc})"
            ) from None
        entry: dict[str, t.Any] = {"id": call.id, "name": call.name, "kind": batch._kind(index)}
        if isinstance(result, NeedsApproval):
            entry["approval"] = _approval(result, call.id, call.name, batch.issued_at, audience)
            program = getattr(result, "program", None)  # a code tool's paused program
            if program is not None:
                entry["program"] = program.to_dict(secret)
            if _c.dumps(arguments) != _c.dumps(entry["approval"]["arguments"]):
                entry["arguments"] = arguments  # the advice changed them: the model's own
        else:
            entry["arguments"] = arguments
            entry["output"] = {
                "content": batch._content(index, call, result),
                "is_error": isinstance(result, Err),
            }
        calls.append(entry)
    payload: dict[str, t.Any] = {
        "v": VERSION,
        "type": _TYPE,
        "id": batch.id,
        "issued_at": batch.issued_at,
        "audience": audience,
        "provider": batch.provider,
        "calls": calls,
    }
    run_id = getattr(batch.context, "run_id", None)
    if type(run_id) is str:  # the run the calls belong to: resolve journals under it
        payload["run_id"] = run_id
    payload["signature"] = seal(payload, secret)
    return payload


def _approval(
    na: NeedsApproval, call_id: str | None, name: str, issued_at: int, audience: str | None
) -> dict[str, t.Any]:
    """A pending call's approval, as version 2 writes it."""
    if not na.verify():
        raise ValueError(
            f"NeedsApproval for tool '{na.tool.name}': arguments no longer match the fingerprint"
        )
    if na.call_id != call_id or na.tool.name != name:
        raise ValueError(
            f"the tool call batch cannot be written: the approval of call {call_id!r} is "
            f"for another call ({na.call_id!r}, tool '{na.tool.name}')"
        )
    approval: dict[str, t.Any] = {
        "id": na.id,
        "tool_digest": tool_digest(na.tool),
        "arguments": _c.encode(na.arguments),
    }
    if na.tool.description:
        approval["description"] = na.tool.description
    if na.issued_at != issued_at:
        approval["issued_at"] = na.issued_at
    if na.audience != audience:
        approval["audience"] = na.audience
    return approval


# -- reading ----------------------------------------------------------------------------


class Read(t.NamedTuple):
    """A version 2 batch read and checked: what ``ToolCallResults`` is made of."""

    id: str
    issued_at: int
    provider: Provider | None
    run_id: str | None
    calls: list[t.Any]  # ToolCall
    kinds: list[str]
    results: list[t.Any]  # CallResult
    contents: list[str | None]


_new_read = tuple.__new__  # Read(...) without its Python-level __new__


def read(
    data: c.Mapping[str, t.Any],
    registry: Registry,
    secret: str | bytes | None,
    max_age: float | None,
    allow_unsigned: bool,
    max_clock_skew: float | None,
    make_call: t.Callable[[str | None, str, t.Any], t.Any],
    restored: t.Callable[[str, bool, str], t.Any],
) -> Read:
    """Check a version 2 batch (``data["v"] == 2``, checked) and read it; every
    refusal is a ``ValueError`` saying why, raised before anything is returned.

    (The fields are read and their exact types tested at once, and
    :func:`_refuse_fields` called only to say what is wrong: this runs for every
    batch a person decides.)"""
    try:
        well_typed = data["type"] == _TYPE
        batch_id: t.Any = data["id"]
        issued_at: t.Any = data["issued_at"]
        audience: t.Any = data["audience"]
        provider: t.Any = data["provider"]
        entries: t.Any = data["calls"]
        signature: t.Any = data["signature"]
    except KeyError:
        well_typed = False
    if not (
        well_typed
        and type(batch_id) is str
        and type(issued_at) is int
        and (audience is None or type(audience) is str)
        and (provider is None or type(provider) is str)
        and type(entries) is list
        and type(signature) is str
    ):
        _refuse_fields(data)
    if not batch_id:
        raise refused("the batch has an empty id")
    run_id: t.Any = data.get("run_id")
    if run_id is not None or "run_id" in data:
        _field(data, "run_id", (str,), "the batch")
        if not run_id:
            raise refused("the batch has an empty run_id")
    _check_signature(
        signature, secret, allow_unsigned, batch_id, issued_at, audience, provider, entries, run_id
    )
    # Signed by this server (or, unsigned, trusted): now whether it still holds.
    accepted = limits(registry, max_age, max_clock_skew)  # (each approval's, as is)
    age, skew = accepted
    why = refusal(issued_at, age, skew)
    if why is not None:
        raise refused(f"the batch {why}")
    own = getattr(registry, "name", None)
    if audience != own:
        raise refused(f"the batch was made for registry {audience!r}, not {own!r}")
    if provider is not None and provider not in _PROVIDERS:
        raise refused(f"unknown provider {provider!r}")
    calls, kinds, results, contents = _read_calls(
        entries, registry, issued_at, own, accepted, make_call, restored, secret, allow_unsigned
    )
    return _new_read(Read, (batch_id, issued_at, provider, run_id, calls, kinds, results, contents))


def _check_signature(
    signature: str,
    secret: str | bytes | None,
    allow_unsigned: bool,
    batch_id: str,
    issued_at: int,
    audience: str | None,
    provider: str | None,
    entries: list[t.Any],
    run_id: str | None,
) -> None:
    """Refuse a batch whose ``signature`` is not the seal of its other fields (with
    ``secret``: its HMAC; without, when unsigned batches are allowed: its checksum)."""
    if secret is not None and signature.startswith(_HMAC):  # check_signed's common case
        key: bytes | None = _key(secret)  # a bad secret is the program's error
    else:
        key = check_signed(signature, secret, allow_unsigned)
    payload = {
        "v": VERSION,
        "type": _TYPE,
        "id": batch_id,
        "issued_at": issued_at,
        "audience": audience,
        "provider": provider,
        "calls": entries,
    }
    if run_id is not None:
        payload["run_id"] = run_id
    try:
        if key is not None:  # _sealed(payload, key), a call fewer
            expected = _HMAC + _hmac_new(key, _DOMAIN + _c.dumps(payload), _sha256).hexdigest()
        else:
            expected = _sealed(payload, key)
    except (TypeError, ValueError, RecursionError) as exc:  # not JSON, NaN, too deep
        raise refused(f"the batch cannot be read ({type(exc).__name__})") from None
    # _same(expected, signature) of a str signature (checked) and an ASCII expected
    # one, a call fewer: a signature that is not ASCII is not it.
    if not (signature.isascii() and _compare_digest(expected, signature)):
        raise refused(mismatch("batch"))


def _read_calls(
    entries: list[t.Any],
    registry: Registry,
    issued_at: int,
    own: str | None,
    accepted: tuple[float | None, float],
    make_call: t.Callable[[str | None, str, t.Any], t.Any],
    restored: t.Callable[[str, bool, str], t.Any],
    secret: str | bytes | None = None,
    allow_unsigned: bool = False,
) -> tuple[list[t.Any], list[str], list[t.Any], list[str | None]]:
    """The calls of a batch whose signature and age were checked: ``(calls, kinds,
    results, contents)``, a finished call's result restored from its output, a
    pending call's the approval it waits for."""
    calls: list[t.Any] = []
    kinds: list[str] = []
    results: list[t.Any] = []
    contents: list[str | None] = []
    tools: dict[str, tuple[Tool, str]] = {}  # name -> (tool, its digest), checked once
    for position, entry in enumerate(entries, 1):
        if type(entry) is not dict:
            raise refused(f"{_at(position)} must be an object, got {type(entry).__name__}")
        call_id: t.Any = entry.get("id")
        if (call_id is not None and type(call_id) is not str) or "id" not in entry:
            _field(entry, "id", (str, _NONE), _at(position))
        name: t.Any = entry.get("name")
        if type(name) is not str:
            _field(entry, "name", (str,), _at(position))
        kind: t.Any = entry.get("kind")
        if kind not in _KINDS or type(kind) is not str:
            _refuse_kind(entry, position)
        pending = "approval" in entry
        if ("output" in entry) == pending:
            raise refused(f"{_at(position)} must have one of 'output' and 'approval'")
        if not pending:  # a finished call
            if "arguments" not in entry:
                raise refused(f"{_at(position)} has no 'arguments'")
            arguments = _decode(entry["arguments"], position, frozen=False)
            output: t.Any = entry["output"]
            if type(output) is not dict:
                _field(entry, "output", (dict,), _at(position))
            content: t.Any = output.get("content")
            if type(content) is not str:
                _field(output, "content", (str,), _at(position))
            is_error: t.Any = output.get("is_error")
            if type(is_error) is not bool:
                _field(output, "is_error", (bool,), _at(position))
            calls.append(make_call(call_id, name, arguments))
            results.append(restored(content, is_error, name))
            contents.append(content)
        else:
            approval = entry["approval"]
            if type(approval) is not dict:
                _field(entry, "approval", (dict,), _at(position))
            na = _pending(approval, name, call_id, issued_at, own, accepted, registry, tools)
            if "arguments" in entry:  # what the model sent, before the advice changed it
                arguments = _decode(entry["arguments"], position, frozen=False)
            else:  # the approved ones (read-only, shared with the approval)
                arguments = na.arguments
            if "program" in entry:  # a code tool's paused program
                na = _paused_program(entry["program"], na, registry, secret, allow_unsigned)
            calls.append(make_call(call_id, name, arguments))
            results.append(na)
            contents.append(None)
        kinds.append(kind)
    return calls, kinds, results, contents


def _paused_program(
    data: object,
    na: NeedsApproval,
    registry: Registry,
    secret: str | bytes | None,
    allow_unsigned: bool,
) -> NeedsApproval:
    """The pending call of a code tool whose program paused, read back."""
    from nous_tools.program import ProgramPaused
    from nous_tools.providers._tool_calls import paused_program_call

    program = ProgramPaused.from_dict(data, registry, secret, allow_unsigned=allow_unsigned)
    return paused_program_call(na.tool, program, na.call_id)


def _refuse_fields(data: c.Mapping[str, t.Any]) -> t.NoReturn:
    """The refusal of a batch whose fields :func:`read` found missing or of the wrong
    type: the first of them, in the order of the format."""
    where = "the batch"
    if data.get("type") != _TYPE:
        _field(data, "type", (str,), where)  # missing, or not a str: says which
        raise refused(f"'type' must be {_TYPE!r}")
    _field(data, "id", (str,), where)
    _field(data, "issued_at", (int,), where)
    _field(data, "audience", (str, _NONE), where)
    _field(data, "provider", (str, _NONE), where)
    _field(data, "calls", (list,), where)
    _field(data, "signature", (str,), where)
    raise AssertionError("a batch read refused for no reason")  # pragma: no cover


def _refuse_kind(entry: dict[str, t.Any], position: int) -> t.NoReturn:
    """The refusal of a call whose ``kind`` is missing, not a str, or not one we know."""
    _field(entry, "kind", (str,), _at(position))
    raise refused(f"'kind' of {_at(position)} must be 'function' or 'custom'")


def _at(position: int) -> str:
    """How a refusal names the call at ``position`` (made only for a refusal)."""
    return f"call #{position}"


def _decode(tree: object, position: int, frozen: bool) -> t.Any:
    try:
        return _c.decode(tree, frozen=frozen)
    except ValueError as exc:
        raise refused(f"{_at(position)}: {exc}") from None


def _pending(
    approval: dict[str, t.Any],
    name: str,
    call_id: str | None,
    issued_at: int,
    own: str | None,
    accepted: tuple[float | None, float],
    registry: Registry,
    tools: dict[str, tuple[Tool, str]],
) -> NeedsApproval:
    """The approval of a pending call, checked as :meth:`NeedsApproval.from_dict`
    checks a token (the batch's signature, checked, covers it whole); a refusal is
    the batch's, naming the call."""
    try:
        approval_id = approval.get("id")
        if type(approval_id) is not str or not approval_id:
            raise _refused(name, "the approval has no id (a non-empty str)")
        digest = approval.get("tool_digest")
        if type(digest) is not str:
            raise _refused(name, "the approval has no 'tool_digest' (a str)")
        if "description" in approval and type(approval["description"]) is not str:
            raise _refused(name, "'description' must be str")
        if "issued_at" in approval:
            issued_at = approval["issued_at"]
            if type(issued_at) is not int:
                raise _refused(name, f"'issued_at' must be int, got {type(issued_at).__name__}")
            why = refusal(issued_at, *accepted)
            if why is not None:
                raise _refused(name, f"the token {why}")
        if "audience" in approval:
            audience = approval["audience"]
            if audience != own:
                raise _refused(name, f"the token was issued for registry {audience!r}, not {own!r}")
        tool = approved_tool(registry, name, digest, tools)
        if "arguments" not in approval:
            raise _refused(name, "the approval has no 'arguments'")
        tree = approval["arguments"]
        arguments = approved_arguments(name, tree)
        return NeedsApproval._checked(
            tool, arguments, tree, approval_id, issued_at, call_id, own, accepted
        )
    except ValueError as exc:
        raise refused(f"call {call_id!r}: {exc}") from None
