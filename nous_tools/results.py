"""Result values: ``Ok`` and ``Err``, and the approval request/answer values.

Results are explicit values, never exceptions across the boundary. Match on them:

>>> def describe(result):
...     match result:
...         case Ok(value, None):
...             return f"ok: {value}"
...         case Ok(value, update):
...             return f"ok: {value} (+{len(update.operations)} update)"
...         case Err(reason):
...             return f"failed: {reason}"
>>> describe(Ok(42))
'ok: 42'
>>> describe(Err(ValueError("boom")))
'failed: boom'
>>> Ok(1).is_ok(), Err("x").is_ok()
(True, False)
"""

from __future__ import annotations

import collections.abc as c
import hashlib
import hmac
import json
import typing as t
import uuid

import attrs

from .errors import ToolError

if t.TYPE_CHECKING:
    from .context_update import ContextUpdate
    from .registry import Registry
    from .tool import Tool

__all__ = ["ApprovalRequest", "Edit", "Err", "NeedsApproval", "Ok", "Result"]

T = t.TypeVar("T")


@attrs.frozen(slots=True)
class Ok(t.Generic[T]):
    """A successful call: its ``value`` and an optional :class:`ContextUpdate`."""

    value: T
    update: ContextUpdate | None = None

    def is_ok(self) -> t.Literal[True]:
        """Always True."""
        return True

    def unwrap(self) -> T:
        """Return the value."""
        return self.value


@attrs.frozen(slots=True)
class Err:
    """A failed call. ``reason`` is usually a :class:`ToolError`."""

    reason: t.Any

    def is_ok(self) -> t.Literal[False]:
        """Always False."""
        return False

    def unwrap(self) -> t.NoReturn:
        """Raise the reason (or a :class:`ToolError` wrapping a reason that is not an exception)."""
        if isinstance(self.reason, BaseException):
            raise self.reason
        raise ToolError(str(self.reason), original_error=self.reason)


_new = object.__new__
# The slots' descriptors: setting through them skips the frozen __setattr__.
_set_value: t.Callable[[object, object], None] = Ok.__dict__["value"].__set__
_set_update: t.Callable[[object, object], None] = Ok.__dict__["update"].__set__


def ok_fast(value: object) -> Ok[t.Any]:
    """``Ok(value)`` without attrs' frozen ``__init__`` (the executor's hot path)."""
    result = _new(Ok)
    _set_value(result, value)
    _set_update(result, None)
    return result


Result = t.Union[Ok[t.Any], Err]  # noqa: UP007  (a runtime alias, usable in isinstance)


@attrs.frozen(slots=True)
class Edit:
    """An approval handler's answer: run the tool with these arguments instead.

    The edited arguments are validated against the tool's schema like any other;
    an edit never changes which tool runs.
    """

    arguments: c.Mapping[str, t.Any]


@attrs.frozen(slots=True)
class ApprovalRequest:
    """What an approval handler receives: the tool's ``name``, the call's ``id``
    (the model's tool-call id, or None outside a batch of model tool calls), the
    ``arguments`` and the ``tool`` itself."""

    name: str
    id: str | None
    arguments: c.Mapping[str, t.Any]
    tool: Tool = attrs.field(repr=False)


def _canonical(name: str, arguments: object) -> bytes:
    """The bytes a fingerprint is computed over: canonical JSON of the name and arguments."""
    try:
        text = json.dumps(
            {"tool": name, "arguments": arguments},
            sort_keys=True,
            separators=(",", ":"),
            default=repr,
        )
    except (TypeError, ValueError, RecursionError) as exc:  # mixed keys, a cycle, too deep
        raise ValueError(f"the arguments of tool '{name}' cannot be fingerprinted: {exc}") from exc
    return text.encode("utf-8")


def _digest(name: str, arguments: object, secret: str | bytes | None) -> str:
    data = _canonical(name, arguments)
    if secret is None:
        return hashlib.sha256(data).hexdigest()
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def _same(expected: str, given: object) -> bool:
    """Constant-time comparison that is False (never an error) for a non-ASCII or non-str value."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8", "replace"))


def _new_id() -> str:
    return uuid.uuid4().hex


@attrs.frozen(slots=True)
class NeedsApproval:
    """The registry's answer for an ``"ask"`` tool that nobody has approved yet.

    The tool did not run. Show ``tool``/``arguments`` to a person, then run it with
    ``registry.execute_approved(needs_approval)``. ``id`` is stable (a uuid4 hex
    unless given) and ``fingerprint`` is the SHA-256 of the canonical JSON of the
    tool name and the arguments, taken when the value is made. If the arguments
    change afterwards (mutated in place, or ``attrs.evolve(na, arguments=...)``),
    :meth:`verify` is False and ``execute_approved`` refuses to run it.

    To resume in a later request, send :meth:`to_dict` to the client and read it
    back with :meth:`from_dict`. Pass a server-side ``secret`` to both: the
    fingerprint on the wire is then an HMAC-SHA256 that a browser cannot forge.

    >>> from nous_tools import Registry, Tool
    >>> registry = Registry([Tool.from_function(lambda path: path, name="rm", approval="ask")])
    >>> na = registry.execute("rm", {"path": "/tmp/x"})
    >>> na.is_ok(), na.tool.name, na.arguments, na.verify()
    (False, 'rm', {'path': '/tmp/x'}, True)
    >>> import json
    >>> wire = json.dumps(na.to_dict(secret="s3cret"))
    >>> back = NeedsApproval.from_dict(json.loads(wire), registry, secret="s3cret")
    >>> back.id == na.id, back.arguments
    (True, {'path': '/tmp/x'})
    """

    tool: Tool = attrs.field(repr=lambda tool: repr(tool.name))
    arguments: c.Mapping[str, t.Any]
    id: str = attrs.field(factory=_new_id)
    fingerprint: str = attrs.field()

    @fingerprint.default
    def _default_fingerprint(self) -> str:
        return _digest(self.tool.name, self.arguments, None)

    def is_ok(self) -> t.Literal[False]:
        """Always False: the tool has not run."""
        return False

    @staticmethod
    def compute_fingerprint(name: str, arguments: object, secret: str | bytes | None = None) -> str:
        """The fingerprint of ``name`` and ``arguments``: SHA-256 hex of their canonical
        JSON, or HMAC-SHA256 hex under ``secret``. Raises ``ValueError`` for arguments
        that cannot be put in canonical JSON (keys of mixed types, a cycle)."""
        return _digest(name, arguments, secret)

    def verify(self, secret: str | bytes | None = None) -> bool:
        """True when ``fingerprint`` is still the fingerprint of the current arguments
        (computed under ``secret`` when given; values made by the registry and by
        :meth:`from_dict` carry the plain, unkeyed fingerprint)."""
        try:
            expected = _digest(self.tool.name, self.arguments, secret)
        except ValueError:
            return False
        return _same(expected, self.fingerprint)

    def to_dict(self, secret: str | bytes | None = None) -> dict[str, t.Any]:
        """A JSON-safe dict: ``id``, ``tool`` (the name), ``arguments``, ``fingerprint``
        (an HMAC under ``secret`` when given) and ``description`` when the tool has one.

        Values that JSON cannot hold are written as their ``repr`` (as in the
        fingerprint). Raises ``ValueError`` when the arguments no longer match the
        fingerprint: a changed call is never re-signed.
        """
        if not (self.verify() or (secret is not None and self.verify(secret))):
            raise ValueError(
                f"NeedsApproval for tool '{self.tool.name}': "
                "arguments no longer match the fingerprint"
            )
        data: dict[str, t.Any] = {
            "id": self.id,
            "tool": self.tool.name,
            "arguments": json.loads(json.dumps(self.arguments, default=repr)),
            "fingerprint": _digest(self.tool.name, self.arguments, secret),
        }
        if self.tool.description:
            data["description"] = self.tool.description
        return data

    @classmethod
    def from_dict(
        cls,
        data: c.Mapping[str, t.Any],
        registry: Registry,
        secret: str | bytes | None = None,
    ) -> NeedsApproval:
        """Read back what :meth:`to_dict` wrote, finding the tool by name in ``registry``.

        Raises ``ValueError`` when the data is malformed, the tool is not registered,
        or the arguments no longer match the fingerprint (checked with ``secret``
        when given, in constant time).
        """
        if not isinstance(data, c.Mapping):
            raise ValueError(f"NeedsApproval data must be a mapping, got {type(data).__name__}")
        name = data.get("tool")
        arguments = data.get("arguments", {})
        fingerprint = data.get("fingerprint")
        request_id = data.get("id")
        if not isinstance(name, str):
            raise ValueError("NeedsApproval data has no tool name (key 'tool')")
        if not isinstance(arguments, c.Mapping):
            raise ValueError(
                f"NeedsApproval data for tool '{name}': 'arguments' must be a mapping, "
                f"got {type(arguments).__name__}"
            )
        if not isinstance(fingerprint, str):
            raise ValueError(f"NeedsApproval data for tool '{name}' has no fingerprint")
        if not isinstance(request_id, str) or not request_id:
            raise ValueError(f"NeedsApproval data for tool '{name}' has no id")
        tool = registry.lookup(name)
        if tool is None:
            raise ValueError(f"NeedsApproval data names tool '{name}', which is not registered")
        expected = _digest(name, arguments, secret)
        if not _same(expected, fingerprint):
            raise ValueError(
                f"NeedsApproval for tool '{name}': arguments no longer match the fingerprint"
            )
        return cls(tool=tool, arguments=arguments, id=request_id)
