"""Approval tokens' mechanics (private; a leaf): canonical bytes, signatures,
ids, expiry and the wire fields of a token.

``NeedsApproval`` (in ``approval``) is a token; a paused batch (``providers``)
seals its own with the same HMAC. ``hashlib``, ``hmac`` and ``uuid`` are imported
on the approval path, not with the package.
"""

from __future__ import annotations

import collections
import collections.abc as c
import math
import os
import time
import typing as t

from nous_tools._util import _canonical as _c


def _canonical(name: str, arguments: object) -> bytes:
    """The bytes a fingerprint is computed over: canonical JSON of the name and the
    type-faithful encoding of the arguments."""
    try:
        return _c.dumps({"tool": name, "arguments": _c.encode(arguments)})
    except RecursionError as exc:  # pragma: no cover - MAX_DEPTH stops this first
        raise ValueError(f"the arguments of tool '{name}' are nested too deeply") from exc


def _key(secret: object) -> bytes:
    """The HMAC key of ``secret``: a non-empty ``str`` (UTF-8) or ``bytes``."""
    if type(secret) is str and secret:
        return secret.encode("utf-8")
    if type(secret) is bytes and secret:
        return secret
    raise ValueError(
        f"an approval secret must be a non-empty str or bytes, got {type(secret).__name__}"
    )


def _fingerprint_of_tree(name: str, tree: object) -> str:
    """The plain fingerprint of arguments whose canonical encoding is ``tree``."""
    import hashlib

    return hashlib.sha256(_c.dumps({"tool": name, "arguments": tree})).hexdigest()


def _digest(name: str, arguments: object, secret: str | bytes | None) -> str:
    import hashlib
    import hmac

    data = _canonical(name, arguments)
    if secret is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(_key(secret), data, hashlib.sha256).hexdigest()


def _same(expected: str, given: object) -> bool:
    """Constant-time comparison that is False (never an error) for a non-ASCII or non-str value."""
    if type(given) is not str:
        return False
    compare = _compare_digest
    if compare is None:
        compare = _load_compare_digest()
    if given.isascii() and expected.isascii():  # str compares in constant time when ASCII
        return compare(expected, given)
    return compare(expected.encode("utf-8"), given.encode("utf-8", "replace"))


#: ``hmac.compare_digest``, once the first comparison imported ``hmac``.
_compare_digest: c.Callable[[t.Any, t.Any], bool] | None = None


def _load_compare_digest() -> c.Callable[[t.Any, t.Any], bool]:
    global _compare_digest
    import hmac

    _compare_digest = hmac.compare_digest
    return _compare_digest


#: Ids made ahead from one ``os.urandom`` read (the system call costs more than
#: making the ids): taken with ``popleft`` (atomic, whichever thread), made again
#: when none is left, and dropped in a forked child, which must not hand out the
#: ids its parent will.
_ready: collections.deque[str] = collections.deque()
_AHEAD = 64
_VERSION = bytes((byte & 0x0F) | 0x40 for byte in range(256))  # version 4
_VARIANT = bytes((byte & 0x3F) | 0x80 for byte in range(256))  # the RFC 4122 variant
if hasattr(os, "register_at_fork"):  # (not on Windows, which does not fork)
    os.register_at_fork(after_in_child=_ready.clear)


def _new_id() -> str:
    """A random (version 4) UUID in hex, as ``uuid.uuid4().hex`` writes it, faster:
    the same 122 bits of ``os.urandom``, read 64 ids at a time."""
    try:
        return _ready.popleft()
    except IndexError:
        return _make_ids()


def _make_ids() -> str:
    raw = bytearray(os.urandom(16 * _AHEAD))
    raw[6::16] = raw[6::16].translate(_VERSION)
    raw[8::16] = raw[8::16].translate(_VARIANT)
    text = raw.hex()
    _ready.extend([text[i : i + 32] for i in range(32, 32 * _AHEAD, 32)])
    return text[:32]


def _now() -> int:
    return int(time.time())


def _safe_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        return "<unrepresentable>"
    return text if len(text) <= 60 else text[:57] + "..."


def check_max_age(value: object) -> float | None:
    """``value`` as a number of seconds >= 0, or None; ``ValueError`` otherwise."""
    if value is None:
        return None
    if type(value) not in (int, float) or not t.cast(float, value) >= 0:  # NaN fails too
        raise ValueError(f"an approval max_age must be a number of seconds >= 0, got {value!r}")
    return float(t.cast(float, value))


#: How far in the future (seconds) a token's ``issued_at`` may be by default: the
#: clocks of two servers of one site disagree by less than that.
DEFAULT_MAX_CLOCK_SKEW = 60.0


def check_clock_skew(value: object) -> float:
    """``value`` as a number of seconds >= 0 (finite); ``ValueError`` otherwise."""
    if type(value) not in (int, float) or not 0 <= t.cast(float, value) < math.inf:
        raise ValueError(
            f"an approval max_clock_skew must be a finite number of seconds >= 0, got {value!r}"
        )
    return float(t.cast(float, value))


def limits(registry: object, max_age: object, max_clock_skew: object) -> tuple[float | None, float]:
    """The ``max_age`` and ``max_clock_skew`` that apply: the ones given (checked),
    else the registry's ``approval_max_age`` / ``approval_max_clock_skew``."""
    if max_age is None and max_clock_skew is None:
        known = getattr(registry, "_approval_limits", None)  # a Registry's: both, read once
        if known is not None:
            return known  # type: ignore[no-any-return]
    age = getattr(registry, "approval_max_age", None) if max_age is None else check_max_age(max_age)
    if max_clock_skew is None:
        skew = getattr(registry, "approval_max_clock_skew", DEFAULT_MAX_CLOCK_SKEW)
    else:
        skew = check_clock_skew(max_clock_skew)
    return age, skew


def _seconds(later: float, earlier: float) -> str:
    """``later - earlier`` in whole seconds, for a message, however large the numbers."""
    try:
        return f"{later - earlier:.0f}"
    except OverflowError:  # an int beyond a float's range
        return str(int(later) - int(earlier))


def refusal(
    issued_at: int, max_age: float | None, max_clock_skew: float, now: float | None = None
) -> str | None:
    """Why something issued at ``issued_at`` (Unix seconds) is not valid ``now``:
    ``"has expired (...)"`` past ``max_age``, ``"was issued in the future (...)"`` more
    than ``max_clock_skew`` ahead of this clock; else None. Never raises for a huge
    ``issued_at`` (ints compare with floats exactly)."""
    if now is None:
        now = time.time()
    if issued_at > now + max_clock_skew:
        return (
            f"was issued in the future ({_seconds(issued_at, now)} s ahead of this server's "
            f"clock; max_clock_skew {max_clock_skew} s)"
        )
    if max_age is not None and issued_at < now - max_age:
        return f"has expired (issued {_seconds(now, issued_at)} s ago; max_age {max_age} s)"
    return None


def claim_expiry(issued_at: int, max_age: float | None, max_clock_skew: float) -> float | None:
    """Until when (Unix seconds) a store must remember a claim of an approval issued
    at ``issued_at``: as long as a server whose clock is up to ``max_clock_skew``
    behind would still accept it. None: it never expires."""
    if max_age is None:
        return None
    try:
        return issued_at + max_age + max_clock_skew
    except OverflowError:  # an absurd issued_at: remember the claim for good
        return None


#: The version of the wire format that :meth:`NeedsApproval.to_dict` writes.
WIRE_VERSION = 1

# Signed bytes start with this, so a signature of anything else made with the same
# secret (a fingerprint from compute_fingerprint, say) is never a valid token.
_DOMAIN = b"nous-tools approval token v1\n"
_HMAC = "hmac-sha256:"
_PLAIN = "sha256:"


def _seal(payload: c.Mapping[str, t.Any], secret: str | bytes | None) -> str:
    import hashlib
    import hmac

    data = _DOMAIN + _c.dumps(payload)
    if secret is None:
        return _PLAIN + hashlib.sha256(data).hexdigest()
    return _HMAC + hmac.new(_key(secret), data, hashlib.sha256).hexdigest()


def mismatch(what: str) -> str:
    """Why a signed ``what`` (a token, a batch) is refused when its signature does not
    match."""
    return (
        f"the signature does not match (the {what} was changed, forged, or signed with "
        "another secret)"
    )


def _refused(name: object, why: str) -> ValueError:
    if type(name) is str:  # from the token, maybe not yet verified: kept short
        shown = f" for tool '{name if len(name) <= 80 else name[:77] + '...'}'"
    else:
        shown = ""
    return ValueError(f"approval{shown} refused: {why}")


def _wire_field(
    data: c.Mapping[str, t.Any], key: str, kinds: tuple[type, ...], name: object
) -> t.Any:
    if key not in data:
        raise _refused(name, f"the token has no '{key}'")
    value = data[key]
    if type(value) not in kinds:
        expected = " or ".join("None" if k is type(None) else k.__name__ for k in kinds)
        raise _refused(name, f"'{key}' must be {expected}, got {type(value).__name__}")
    return value
