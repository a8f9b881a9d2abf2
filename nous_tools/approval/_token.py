"""A pending approval and its token: :class:`NeedsApproval`, and the one check a
token or a paused batch's call passes before it runs.

The registry answers a :class:`NeedsApproval` for an ``"ask"`` tool that nobody has
approved yet. It is a value (frozen, compared by its fields) that can travel:
:meth:`NeedsApproval.to_dict` writes it as a signed token and
:meth:`NeedsApproval.from_dict` reads it back, checking the signature, its age, the
registry it was issued by, and the tool. :func:`approved_tool` and
:func:`approved_arguments` are that check of the tool and the arguments, shared
with a paused batch's calls (``nous_tools.providers``); :func:`tool_digest` is what
makes a tool *this* tool. The signing, the wire fields and the expiry arithmetic
are in ``nous_tools._util._tokens``; ``docs/concepts/approval.md`` says what a
token guarantees.
"""

from __future__ import annotations

import collections.abc as c
import functools
import json
import typing as t

import attrs

from nous_tools._util import _canonical as _c
from nous_tools._util._canonical import _NotPlain, _plain
from nous_tools._util._tokens import (
    _HMAC,
    WIRE_VERSION,
    _digest,
    _fingerprint_of_tree,
    _key,
    _new_id,
    _now,
    _refused,
    _safe_repr,
    _same,
    _seal,
    _wire_field,
    claim_expiry,
    limits,
    mismatch,
    refusal,
)

if t.TYPE_CHECKING:
    from nous_tools._types import RegistryLike
    from nous_tools.tool import Tool

__all__ = ["NeedsApproval", "approved_arguments", "approved_tool", "edited", "tool_digest"]

_new = object.__new__


def _freeze_arguments(value: object) -> c.Mapping[str, t.Any]:
    """A deep, read-only copy of the arguments; names must be plain ``str``."""
    if value is None:
        return _c.FrozenDict()
    if not isinstance(value, c.Mapping):
        raise TypeError(f"NeedsApproval arguments must be a mapping, got {type(value).__name__}")
    items = dict(value.items())
    for key in items:
        if type(key) is not str:
            raise ValueError(
                f"the argument names of an approval must be str, got {type(key).__name__} "
                f"{_safe_repr(key)}"
            )
    try:
        frozen: c.Mapping[str, t.Any] = _c.freeze(items)
    except ValueError as exc:
        raise ValueError(f"the arguments cannot be fingerprinted: {exc}") from None
    return frozen


def _check_id(instance: object, attribute: object, value: object) -> None:
    if type(value) is not str or not value:
        raise ValueError(f"NeedsApproval id must be a non-empty str, got {_safe_repr(value)}")


def _check_optional_str(instance: object, attribute: attrs.Attribute[t.Any], value: object) -> None:
    if value is not None and type(value) is not str:
        raise TypeError(
            f"NeedsApproval {attribute.name} must be a str or None, got {type(value).__name__}"
        )


def _check_issued_at(instance: object, attribute: object, value: object) -> None:
    if type(value) is not int:
        raise TypeError(
            f"NeedsApproval issued_at must be an int (Unix seconds), got {type(value).__name__}"
        )


@functools.cache
def _identity_module() -> t.Any:
    """The ``_identity`` module, imported at the first digest, not with the package."""
    from nous_tools._util import _identity

    return _identity


def approved_tool(
    registry: RegistryLike,
    name: str,
    digest: object,
    known: dict[str, tuple[Tool, str]] | None = None,
) -> Tool:
    """The tool an approval (a token, or a paused batch's call) names, checked: still
    registered, not ``"deny"``, and the very tool approved (its :func:`tool_digest`,
    compared in constant time). A refusal is the ``ValueError`` ``from_dict`` raises.
    ``known``: the tools (and digests) a batch has already looked up, by name."""
    found = known.get(name) if known is not None else None
    if found is None:
        tool = registry.lookup(name)
        if tool is None:
            raise _refused(name, f"tool '{name}' is not registered")
        if tool.approval == "deny":
            raise _refused(name, f"tool '{name}' is denied")
        try:
            current = tool_digest(tool)
        except ValueError as exc:  # its configuration cannot be told apart
            raise _refused(name, str(exc)) from None
        if known is not None:
            known[name] = (tool, current)
    else:
        tool, current = found
    if not _same(current, digest):
        raise _refused(
            name,
            f"tool '{name}' is not the tool that was approved (its code, the values "
            "it captured or its schema changed since the token was issued)",
        )
    return tool


def approved_arguments(name: str, tree: object) -> _c.FrozenDict:
    """The arguments of an approval from their canonical tree, checked: an object whose
    names are str (a refusal is the ``ValueError`` ``from_dict`` raises)."""
    if type(tree) is not dict:
        raise _refused(name, "'arguments' must be an object")
    try:
        arguments = _plain(tree, 0, True)  # decode's common case: str names, no "$" key
        plain = True
    except (_NotPlain, RecursionError):
        try:
            arguments = _c.decode(tree)
        except ValueError as exc:
            raise _refused(name, str(exc)) from None
        plain = False
    if type(arguments) is not _c.FrozenDict:
        raise _refused(name, "'arguments' must be an object")
    if not plain:
        for key in arguments:
            if type(key) is not str:
                raise _refused(
                    name,
                    f"the argument names of an approval must be str, got {type(key).__name__} "
                    f"{_safe_repr(key)}",
                )
    return arguments


def tool_digest(tool: Tool) -> str:
    """SHA-256 hex of what makes a tool *this* tool: its function's module and
    qualified name, its code (bytecode and constants, recursively for nested code),
    its defaults and the values its closure captured (see below), and its parameters
    schema.

    A token carries it, so a tool re-registered under the same name as different
    code — another function, a redeployed body, a closure or ``functools.partial``
    configured otherwise, a changed schema — does not redeem an old approval. Line
    numbers and file names are not part of it (moving code changes nothing); the
    Python version is, in effect (bytecode differs between versions).

    Captured values and defaults must be representable canonically: ``None``,
    ``bool``, ``int``, ``float``, ``str``, ``bytes``, and lists, tuples, dicts,
    sets and frozensets of them; functions (followed the same way); classes,
    modules, builtins and enum members (by name). Anything else — a client object a
    closure captured, say — raises ``ValueError`` saying which value it is: two
    such tools configured differently could not be told apart, so no token is
    issued or accepted for them. Pass such objects in ``ctx.deps`` instead. A
    closure that keeps *state* in a captured dict or list (a cache, a counter)
    changes its digest as it runs, which refuses the tokens issued before: keep
    such state in ``ctx.deps`` or at module level. A
    callable object is identified by its class and the code of its ``__call__`` (not
    its attributes), a bound method by its function and its instance's class.

    The digest is cached per :class:`Tool`, and recomputed when the function's
    code, defaults or captured values are no longer the same objects (or, for
    mutable ones, always).
    """
    function: t.Any = tool.function
    cached = tool._digest
    _identity = _identity_module()
    if cached is not None and _identity.unchanged(function, cached[0]):
        return cached[1]
    try:
        tree, snapshot = _identity.identity(function)
    except _identity.Unrepresentable as exc:
        raise ValueError(
            f"tool '{tool.name}' cannot be approved with a token: {exc}. Capture plain "
            "values only, or pass such objects to the tool in ctx.deps"
        ) from None
    while isinstance(function, functools.partial):
        function = function.func
    named = function if hasattr(function, "__qualname__") else type(function)
    identity = {
        "module": str(getattr(named, "__module__", None)),
        "qualname": str(getattr(named, "__qualname__", None)),
        "function": tree,
        "parameters": json.dumps(
            tool.parameters, sort_keys=True, separators=(",", ":"), default=repr
        ),
    }
    import hashlib

    digest = hashlib.sha256(_c.dumps(identity)).hexdigest()
    if snapshot is not None:
        object.__setattr__(tool, "_digest", (snapshot, digest))
    return digest


def _check_signature(
    name: str,
    payload: dict[str, t.Any],
    signature: str,
    secret: str | bytes | None,
    allow_unsigned: bool,
    sealed: bool,
) -> None:
    """Refuse a token whose ``signature`` does not match how it is read (signed but
    no secret given, a secret but no HMAC, unsigned and not allowed), or is not the
    seal of ``payload`` — unless ``sealed``: a batch's HMAC, checked, covers it."""
    if secret is not None:
        _key(secret)  # a bad secret is the program's error, said as such
        if not signature.startswith(_HMAC):
            raise _refused(name, "the token is not signed (no HMAC signature)")
    elif signature.startswith(_HMAC):
        raise _refused(name, "the token is signed, but no secret was given to check it")
    elif not allow_unsigned:
        raise _refused(
            name,
            "unsigned tokens are refused: pass the secret it was signed with "
            "(or allow_unsigned=True, for trusted storage only)",
        )
    if not sealed:
        try:
            expected = _seal(payload, secret)
        except (TypeError, ValueError, RecursionError) as exc:  # not JSON, NaN, too deep
            raise _refused(name, f"the token cannot be read ({type(exc).__name__})") from None
        if not _same(expected, signature):
            raise _refused(name, mismatch("token"))


@attrs.frozen(slots=True)
class NeedsApproval:
    """The registry's answer for an ``"ask"`` tool that nobody has approved yet.

    The tool did not run. Show ``tool``/``arguments`` to a person, then run it with
    ``registry.execute_approved(needs_approval)`` — once: the registry's approval
    store lets each ``id`` run a single time.

    ``arguments`` is a deep, read-only copy of the arguments the person approves
    (after the registry's ``before`` advice): changing the caller's dict afterwards
    changes nothing, and the copy itself refuses changes (``TypeError``). The tool
    gets a fresh mutable copy. Arguments are made of ``None``, ``bool``, ``int``,
    ``float``, ``str``, ``bytes``, ``list``, ``tuple``, ``dict``, ``set`` and
    ``frozenset`` (by exact type); anything else is a ``ValueError``, so no two
    different calls can look the same. ``fingerprint`` is the SHA-256 of their
    canonical, type-faithful encoding and the tool name; ``issued_at`` is when the
    value was made (Unix seconds); ``call_id`` the model's tool-call id, when the
    call came from a model; ``audience`` the name of the registry that made it.

    To resume in a later request, send :meth:`to_dict` (signed with a server-side
    secret) to the client and read it back with :meth:`from_dict`, which checks the
    signature, the age, the registry and the tool before anything runs. See
    ``docs/concepts/approval.md`` for what a token guarantees.

    >>> from nous_tools import Registry, Tool
    >>> def rm(path: str) -> str:
    ...     return f"removed {path}"
    >>> registry = Registry([Tool.from_function(rm, approval="ask")], name="files")
    >>> na = registry.execute("rm", {"path": "/tmp/x"})
    >>> na.is_ok(), na.tool.name, na.arguments, na.audience
    (False, 'rm', {'path': '/tmp/x'}, 'files')
    >>> import json
    >>> wire = json.dumps(na.to_dict(secret="s3cret"))
    >>> back = NeedsApproval.from_dict(json.loads(wire), registry, secret="s3cret")
    >>> back.id == na.id, back.arguments
    (True, {'path': '/tmp/x'})
    >>> registry.execute_approved(back).value
    'removed /tmp/x'
    >>> registry.execute_approved(na).reason.message
    "Tool 'rm' was not run: its approval was already used"
    """

    tool: Tool = attrs.field(repr=lambda tool: repr(tool.name))
    arguments: c.Mapping[str, t.Any] = attrs.field(converter=_freeze_arguments)
    id: str = attrs.field(
        factory=_new_id,
        validator=_check_id,
        metadata={"description": "The approval's id (random): the store claims it once."},
    )
    fingerprint: str = attrs.field()
    issued_at: int = attrs.field(factory=_now, validator=_check_issued_at, repr=False)
    call_id: str | None = attrs.field(default=None, validator=_check_optional_str)
    audience: str | None = attrs.field(default=None, validator=_check_optional_str, repr=False)
    # (max_age, max_clock_skew) it was accepted under by from_dict; None: the
    # registry's, looked up when it runs.
    _limits: tuple[float | None, float] | None = attrs.field(
        init=False, default=None, eq=False, repr=False
    )
    # True when from_dict computed the fingerprint from these very (frozen)
    # arguments: the registry need not check it again.
    _verified: bool = attrs.field(init=False, default=False, eq=False, repr=False)

    @fingerprint.default
    def _default_fingerprint(self) -> str:
        return _digest(self.tool.name, self.arguments, None)

    def is_ok(self) -> t.Literal[False]:
        """Always False: the tool has not run."""
        return False

    @staticmethod
    def compute_fingerprint(name: str, arguments: object, secret: str | bytes | None = None) -> str:
        """The fingerprint of ``name`` and ``arguments``: SHA-256 hex of their canonical,
        type-faithful JSON, or HMAC-SHA256 hex under ``secret``. Raises ``ValueError``
        for arguments that cannot be represented faithfully."""
        return _digest(name, arguments, secret)

    def verify(self, secret: str | bytes | None = None) -> bool:
        """True when ``fingerprint`` is still the fingerprint of the arguments and tool
        name (computed under ``secret`` when given). Only a value rebuilt with other
        arguments (``attrs.evolve``) or another fingerprint fails."""
        try:
            expected = _digest(self.tool.name, self.arguments, secret)
        except ValueError:
            return False
        return _same(expected, self.fingerprint)

    def _payload(self) -> dict[str, t.Any]:
        payload: dict[str, t.Any] = {
            "v": WIRE_VERSION,
            "id": self.id,
            "tool": self.tool.name,
            "tool_digest": tool_digest(self.tool),
            "arguments": _c.encode(self.arguments),
            "issued_at": self.issued_at,
            "audience": self.audience,
            "call_id": self.call_id,
        }
        if self.tool.description:
            payload["description"] = self.tool.description
        return payload

    def to_dict(self, secret: str | bytes | None = None) -> dict[str, t.Any]:
        """The approval as a JSON-safe token: ``v`` (the format, 1), ``id``, ``tool``
        (the name), ``tool_digest`` (:func:`tool_digest`), ``arguments`` (their
        type-faithful encoding: plain JSON where JSON says it exactly, ``{"$tuple":
        [...]}`` and the like where it does not), ``issued_at``, ``audience``,
        ``call_id``, ``description`` (when the tool has one) and ``signature``.

        With ``secret`` (a non-empty ``str`` or ``bytes`` kept on the server) the
        signature is ``"hmac-sha256:<hex>"`` over every other field, so a client can
        read the token but change nothing in it. Without one it is a plain
        ``"sha256:<hex>"`` checksum, which anyone can recompute: for trusted storage
        only (:meth:`from_dict` refuses it unless told ``allow_unsigned=True``).

        Raises ``ValueError`` when the arguments no longer match the fingerprint (a
        value rebuilt with other arguments is never signed).
        """
        if not self.verify():
            raise ValueError(
                f"NeedsApproval for tool '{self.tool.name}': "
                "arguments no longer match the fingerprint"
            )
        payload = self._payload()
        payload["signature"] = _seal(payload, secret)
        return payload

    @classmethod
    def from_dict(
        cls,
        data: c.Mapping[str, t.Any],
        registry: RegistryLike,
        secret: str | bytes | None = None,
        *,
        max_age: float | None = None,
        allow_unsigned: bool = False,
        max_clock_skew: float | None = None,
    ) -> NeedsApproval:
        """Read back a token that :meth:`to_dict` wrote, for a tool of ``registry``.

        Every check happens before anything is returned, and each refusal is a
        ``ValueError`` saying why:

        - the token is malformed (a missing key, a value of the wrong *exact* type, an
          unknown format version, arguments not in canonical form);
        - the signature does not match (with ``secret``: an HMAC compared in constant
          time, so no field — id, tool, arguments, time, audience, call id — can have
          changed); without ``secret`` the token is refused unless
          ``allow_unsigned=True`` (for trusted storage only, e.g. your own database),
          and then only its checksum is checked;
        - it is older than ``max_age`` seconds (default: ``registry.approval_max_age``;
          None there means no limit), or was issued more than ``max_clock_skew``
          seconds in the future by this server's clock (default:
          ``registry.approval_max_clock_skew``, 60 s);
        - it was issued by another registry (``audience`` is not ``registry.name``);
        - its tool is no longer registered, is now ``"deny"``, or is different code
          under the same name (its :func:`tool_digest` changed).

        A token whose ``id`` was already used is still read; running it with
        ``registry.execute_approved`` is what fails (the store remembers ids, until
        the token's own expiry: ``issued_at + max_age``, plus the clock skew allowed).
        """
        return cls._read(data, registry, secret, max_age, allow_unsigned, max_clock_skew)

    @classmethod
    def _read(
        cls,
        data: c.Mapping[str, t.Any],
        registry: RegistryLike,
        secret: str | bytes | None,
        max_age: float | None,
        allow_unsigned: bool,
        max_clock_skew: float | None,
        sealed: bool = False,
    ) -> NeedsApproval:
        """:meth:`from_dict`; ``sealed``: the token came inside a batch whose HMAC
        under ``secret`` was checked, which covers every byte of it, so its own
        signature is not computed again."""
        if type(data) is not dict and not isinstance(data, c.Mapping):
            raise _refused(None, f"a token must be a mapping, got {type(data).__name__}")
        name = data.get("tool")
        if type(name) is not str or not name:
            raise _refused(None, "the token has no tool name (key 'tool')")
        version = _wire_field(data, "v", (int,), name)
        if version != WIRE_VERSION:
            raise _refused(name, f"unknown token version {version} (this library reads 1)")
        payload: dict[str, t.Any] = {"v": version, "tool": name}
        payload["id"] = _wire_field(data, "id", (str,), name)
        if not payload["id"]:
            raise _refused(name, "the token has an empty id")
        payload["tool_digest"] = _wire_field(data, "tool_digest", (str,), name)
        payload["issued_at"] = _wire_field(data, "issued_at", (int,), name)
        payload["audience"] = _wire_field(data, "audience", (str, type(None)), name)
        payload["call_id"] = _wire_field(data, "call_id", (str, type(None)), name)
        if "description" in data:
            payload["description"] = _wire_field(data, "description", (str,), name)
        if "arguments" not in data:
            raise _refused(name, "the token has no 'arguments'")
        payload["arguments"] = data["arguments"]
        signature = _wire_field(data, "signature", (str,), name)
        _check_signature(name, payload, signature, secret, allow_unsigned, sealed)

        max_age, max_clock_skew = limits(registry, max_age, max_clock_skew)
        why = refusal(payload["issued_at"], max_age, max_clock_skew)
        if why is not None:
            raise _refused(name, f"the token {why}")
        own = getattr(registry, "name", None)
        if payload["audience"] != own:
            raise _refused(
                name,
                f"the token was issued for registry {payload['audience']!r}, not {own!r}",
            )
        tool = approved_tool(registry, name, payload["tool_digest"])
        tree = payload["arguments"]
        arguments = approved_arguments(name, tree)
        return cls._checked(
            tool,
            arguments,
            tree,
            payload["id"],
            payload["issued_at"],
            payload["call_id"],
            payload["audience"],
            (max_age, max_clock_skew),
        )

    @classmethod
    def _checked(
        cls,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        tree: object,
        approval_id: str,
        issued_at: int,
        call_id: str | None,
        audience: str | None,
        accepted_under: tuple[float | None, float],
    ) -> NeedsApproval:
        """An approval read back and checked (a token, or a batch's pending call):
        built as ``__init__`` would build it, without copying again what ``decode``
        made (frozen already) or encoding the arguments again — ``tree`` is their
        canonical encoding (decode checked it), so the fingerprint is the hash of
        its canonical bytes, known to match them — computed when first read (see
        :class:`_Fingerprint`): the registry does not need it for an approval whose
        arguments came from a checked signature."""
        approval: NeedsApproval = _new(cls)
        _set_tool(approval, tool)
        _set_arguments(approval, arguments)
        _set_id(approval, approval_id)
        _set_fingerprint(approval, _unhashed(_Unhashed, (tool.name, tree)))
        _set_issued_at(approval, issued_at)
        _set_call_id(approval, call_id)
        _set_audience(approval, audience)
        _set_limits(approval, accepted_under)
        _set_verified(approval, True)
        return approval

    def _claim_expiry(self, registry: object) -> float | None:
        """Until when (Unix seconds) ``registry``'s store must remember this approval's
        claim: its token's expiry plus the clock skew allowed (None: never)."""
        max_age, skew = self._limits_in(registry)
        return claim_expiry(self.issued_at, max_age, skew)

    def _limits_in(self, registry: object) -> tuple[float | None, float]:
        known = self._limits
        return known if known is not None else limits(registry, None, None)


def edited(na: NeedsApproval, arguments: object, call: str) -> NeedsApproval:
    """``na`` for a person's edited ``arguments`` (an ``Edit``): its own id (running the
    edit uses up the approval), its token's time, call id and audience, accepted under
    the same limits. ``ValueError`` naming ``call`` (e.g. ``"call 'c1'"``) for arguments
    that are not a mapping or cannot be an approval's; the tool's schema is not checked
    here."""
    if not isinstance(arguments, c.Mapping):
        raise ValueError(
            f"cannot resolve: the edit of {call} must give the arguments as a mapping, "
            f"got {type(arguments).__name__}"
        )
    try:
        approval = NeedsApproval(
            na.tool,
            arguments,
            id=na.id,
            issued_at=na.issued_at,
            call_id=na.call_id,
            audience=na.audience,
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cannot resolve: the edit of {call}: {exc}") from None
    _set_limits(approval, na._limits)
    return approval


class _Unhashed(tuple[str, object]):
    """What a read-back approval's ``fingerprint`` slot holds until it is first read:
    ``(name, tree)``, the tool name and the canonical tree of the arguments it is the
    hash of (a tuple, made in C: ``_unhashed(_Unhashed, (name, tree))``)."""

    __slots__ = ()


_unhashed = tuple.__new__


class _Fingerprint:
    """``NeedsApproval.fingerprint``: the slot, with one difference — an
    :class:`_Unhashed` value is hashed when first read (and stored), so reading the
    attribute always gives the fingerprint, whoever reads it (``==``, ``repr``,
    ``attrs.evolve``, pickling, ``verify``)."""

    def __init__(self, slot: t.Any) -> None:
        self.slot = slot

    def __get__(self, instance: object, owner: type | None = None) -> t.Any:
        if instance is None:
            return self
        value = self.slot.__get__(instance, owner)
        if type(value) is _Unhashed:
            value = _fingerprint_of_tree(*value)
            self.slot.__set__(instance, value)
        return value

    def __set__(self, instance: object, value: object) -> None:
        self.slot.__set__(instance, value)

    def __delete__(self, instance: object) -> None:
        self.slot.__delete__(instance)


_fingerprint_slot = NeedsApproval.__dict__["fingerprint"]
setattr(NeedsApproval, "fingerprint", _Fingerprint(_fingerprint_slot))  # noqa: B010

# The slots' own setters, that _checked fills (no frozen __setattr__).
_APPROVAL_SLOTS: list[t.Callable[[object, object], None]] = [
    (_fingerprint_slot if name == "fingerprint" else NeedsApproval.__dict__[name]).__set__
    for name in (
        "tool",
        "arguments",
        "id",
        "fingerprint",
        "issued_at",
        "call_id",
        "audience",
        "_limits",
        "_verified",
    )
]
(
    _set_tool,
    _set_arguments,
    _set_id,
    _set_fingerprint,
    _set_issued_at,
    _set_call_id,
    _set_audience,
    _set_limits,
    _set_verified,
) = _APPROVAL_SLOTS
