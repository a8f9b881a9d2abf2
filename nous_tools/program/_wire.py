"""A paused program across requests (private): :meth:`ProgramPaused.to_dict
<nous_tools.ProgramPaused.to_dict>` and :meth:`ProgramPaused.from_dict
<nous_tools.ProgramPaused.from_dict>`.

The program crosses as a signed dict: its source, ids, limits, policy and the nested
calls waiting (each its own signed approval token, read back by
:meth:`NeedsApproval.from_dict`, which checks its tool, age and audience). With a
secret every byte is covered by an HMAC under a domain of its own, so neither a
token's nor a batch's signature is ever a valid program signature.
"""

from __future__ import annotations

import hashlib
import hmac
import typing as t

from nous_tools._util import _canonical as _c
from nous_tools._util._tokens import _HMAC, _key, _same, mismatch
from nous_tools.approval import NeedsApproval
from nous_tools.program._values import EditedCall
from nous_tools.sandbox import SandboxPolicy

if t.TYPE_CHECKING:
    from nous_tools.program._registry import RegistryLike
    from nous_tools.program._values import ProgramPaused

__all__ = ["read", "write"]

VERSION = 1
_TYPE = "paused_program"
_DOMAIN = b"nous-tools paused program v1\n"
_PLAIN = "sha256:"
_POLICY_KEYS = (
    "mode",
    "confine_reads",
    "network",
    "memory_mb",
    "cpu_seconds",
    "max_processes",
    "max_file_mb",
    "max_open_files",
)


def _seal(payload: t.Mapping[str, t.Any], secret: str | bytes | None) -> str:
    data = _DOMAIN + _c.dumps(payload)
    if secret is None:
        return _PLAIN + hashlib.sha256(data).hexdigest()
    return _HMAC + hmac.new(_key(secret), data, hashlib.sha256).hexdigest()


def _refused(why: str) -> ValueError:
    return ValueError(f"paused program refused: {why}")


def _policy(policy: SandboxPolicy | None) -> dict[str, t.Any] | None:
    if policy is None:
        return None
    shown: dict[str, t.Any] = {key: getattr(policy, key) for key in _POLICY_KEYS}
    shown["workspace_root"] = str(policy.workspace_root)
    return shown


def write(paused: ProgramPaused, secret: str | bytes | None) -> dict[str, t.Any]:
    """``paused.to_dict(secret)``."""
    payload: dict[str, t.Any] = {
        "v": VERSION,
        "type": _TYPE,
        "program_id": paused.program_id,
        "run_id": paused.run_id,
        "source": paused.source,
        "timeout": paused.timeout,
        "max_calls": paused.max_calls,
        "functions": None if paused.functions is None else list(paused.functions),
        "rejected": list(paused.rejected),
        "edited": [
            {"id": e.call_id, "tool": e.tool, "asked": e.asked, "arguments": dict(e.arguments)}
            for e in paused.edited
        ],
        "sandbox": _policy(paused.sandbox),
        "audience": getattr(paused.registry, "name", None),
        "waiting": [na.to_dict(secret) for na in paused.waiting],
    }
    payload["signature"] = _seal(payload, secret)
    return payload


def _field(data: t.Mapping[str, t.Any], key: str, kinds: tuple[type, ...]) -> t.Any:
    if key not in data:
        raise _refused(f"it has no '{key}'")
    value = data[key]
    if type(value) not in kinds:
        names = " or ".join("None" if k is type(None) else k.__name__ for k in kinds)
        raise _refused(f"'{key}' must be {names}, got {type(value).__name__}")
    return value


def read(
    cls: type[ProgramPaused],
    data: object,
    registry: RegistryLike,
    secret: str | bytes | None,
    max_age: float | None,
    allow_unsigned: bool,
    max_clock_skew: float | None,
) -> ProgramPaused:
    """``ProgramPaused.from_dict(...)``: every check before anything is returned."""
    if not isinstance(data, t.Mapping):
        raise _refused(f"it must be a mapping, got {type(data).__name__}")
    if _field(data, "v", (int,)) != VERSION or data.get("type") != _TYPE:
        raise _refused("it is not a paused program of a version this library reads (1)")
    signature = _field(data, "signature", (str,))
    payload = {key: value for key, value in data.items() if key != "signature"}
    if secret is None and not allow_unsigned:
        raise _refused(
            "no secret was given to check its signature (pass secret=..., or "
            "allow_unsigned=True for trusted storage only)"
        )
    if secret is not None and not signature.startswith(_HMAC):
        raise _refused("it is not signed (a plain checksum), and a secret was given")
    try:
        expected = _seal(payload, secret)
    except (TypeError, ValueError, RecursionError) as exc:
        raise _refused(f"it cannot be read ({type(exc).__name__})") from None
    if not _same(expected, signature):
        raise _refused(mismatch("paused program"))
    own = getattr(registry, "name", None)
    audience = _field(data, "audience", (str, type(None)))
    if audience != own:
        raise _refused(f"it was made for registry {audience!r}, not {own!r}")
    waiting = []
    for token in _field(data, "waiting", (list,)):
        waiting.append(
            NeedsApproval.from_dict(
                token,
                t.cast(t.Any, registry),
                secret,
                max_age=max_age,
                allow_unsigned=allow_unsigned,
                max_clock_skew=max_clock_skew,
            )
        )
    policy = _field(data, "sandbox", (dict, type(None)))
    functions = _field(data, "functions", (list, type(None)))
    timeout = _field(data, "timeout", (int, float, type(None)))
    rejected = _field(data, "rejected", (list,))
    if not all(type(x) is str for x in [*(functions or ()), *rejected]):
        raise _refused("'functions' and 'rejected' must hold str only")
    edited = []
    entries = data.get("edited", [])  # (none before edits were carried)
    if type(entries) is not list:
        raise _refused(f"'edited' must be list, got {type(entries).__name__}")
    for entry in entries:
        if not (
            isinstance(entry, dict)
            and all(type(entry.get(k)) is str for k in ("id", "tool", "asked"))
            and isinstance(entry.get("arguments"), dict)
        ):
            raise _refused("'edited' must hold {id, tool, asked, arguments} entries only")
        edited.append(EditedCall(entry["id"], entry["tool"], entry["asked"], entry["arguments"]))
    return cls(
        source=_field(data, "source", (str,)),
        program_id=_field(data, "program_id", (str,)),
        run_id=_field(data, "run_id", (str,)),
        waiting=tuple(waiting),
        rejected=tuple(rejected),
        edited=tuple(edited),
        timeout=timeout,
        max_calls=_field(data, "max_calls", (int,)),
        sandbox=None if policy is None else SandboxPolicy.new(policy),
        functions=None if functions is None else tuple(functions),
        registry=registry,
    )
