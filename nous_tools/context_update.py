"""Changes a tool asks to make to ``deps``, as a value.

A tool that wants to leave something for later calls (a counter, a list of notes,
settings) returns ``Ok(value, update)`` with a ``ContextUpdate``: an ordered list
of operations on ``deps``. Nothing changes until the update is applied, and
applying never mutates its input; it returns new deps.

>>> update = (
...     ContextUpdate.new()
...     .set("user_id", 42)
...     .append("notes", "searched the docs")
...     .merge("settings", {"ui": {"theme": "dark"}})
...     .delete("scratch")
... )
>>> len(update), update.is_empty()
(4, False)
>>> deps = {"notes": ["opened a file"], "settings": {"ui": {"font": 12}}, "scratch": 1}
>>> new_deps = update.apply(deps)
>>> new_deps["notes"]
['opened a file', 'searched the docs']
>>> new_deps["settings"]
{'ui': {'font': 12, 'theme': 'dark'}}
>>> "scratch" in new_deps, "scratch" in deps   # the input is left as it was
(False, True)

Builders return a new update, so a base can be shared and extended:

>>> base = ContextUpdate().set("n", 1)
>>> (len(base), len(base.append("n", 2)), base.append("n", 2).apply(None))
(1, 2, {'n': [1, 2]})

Several tools' updates apply in order with :meth:`ContextUpdate.then` or
:meth:`ContextUpdate.merge_updates`.

A tool cannot grant itself approval or widen its own sandbox: operations on the
keys in :data:`PROTECTED_KEYS` are kept in the update but dropped when it is
applied, each with a warning on the ``nous_tools`` logger. Keys and operation
kinds are plain ``str`` by exact type (a ``str`` subclass, which could compare or
hash unlike the key it spells, is a ``TypeError``).
"""

from __future__ import annotations

import collections.abc as c
import typing as t

import attrs

from nous_tools._util._log import log as _safe_log
from nous_tools.run_context import RunContext

__all__ = ["PROTECTED_KEYS", "ContextUpdate", "Operation", "OperationKind"]

_log = _safe_log

#: Keys of ``deps`` that no update may touch: operations on them are dropped, with a
#: warning, when the update is applied. They decide what a tool is allowed to do.
PROTECTED_KEYS: frozenset[str] = frozenset(
    {"approval_handler", "approval_gated", "workspace_root", "sandbox", "hook_registry"}
)

#: The four kinds of operation.
OperationKind = t.Literal["set", "merge", "append", "delete"]

_KINDS: frozenset[str] = frozenset(t.get_args(OperationKind))


def _check_kind(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if type(value) is not str or value not in _KINDS:
        raise ValueError(
            f"ContextUpdate operation must be one of {', '.join(sorted(_KINDS))}; got {value!r}"
        )


def _check_key(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    # Exact type: a str subclass could compare or hash unlike the protected key it spells.
    if type(value) is not str:
        raise TypeError(f"ContextUpdate keys must be str (exactly), got {type(value).__name__}")


def _check_value(instance: Operation, attribute: attrs.Attribute[t.Any], value: object) -> None:
    if instance.op == "merge" and not isinstance(value, c.Mapping):
        raise TypeError(
            f"ContextUpdate.merge needs a mapping for key {instance.key!r}, "
            f"got {type(value).__name__}"
        )


@attrs.frozen(slots=True)
class Operation:
    """One step of a :class:`ContextUpdate`: ``op`` applied to ``deps[key]`` with ``value``.

    ``value`` is the new value for ``set``, the mapping for ``merge``, the item for
    ``append`` and unused (None) for ``delete``.
    """

    op: OperationKind = attrs.field(validator=_check_kind)
    key: str = attrs.field(validator=_check_key)
    value: t.Any = attrs.field(default=None, validator=_check_value)


def _to_operations(value: c.Iterable[Operation]) -> tuple[Operation, ...]:
    return tuple(value)


def _check_operations(
    instance: object, attribute: attrs.Attribute[tuple[Operation, ...]], value: object
) -> None:
    for op in t.cast("tuple[object, ...]", value):
        if type(op) is not Operation:
            raise TypeError(
                f"ContextUpdate operations must be Operation values, got {type(op).__name__}"
            )


@attrs.frozen(slots=True)
class ContextUpdate:
    """An ordered, immutable list of operations on ``deps``.

    Build one with the chaining builders (:meth:`set`, :meth:`merge`, :meth:`append`,
    :meth:`delete`), each of which returns a new update and leaves its receiver as
    it was. ``operations`` is the tuple of :class:`Operation` values, in order;
    ``len(update)`` is the number of operations, iterating yields them, and
    an empty update is falsy.
    """

    operations: tuple[Operation, ...] = attrs.field(
        default=(), converter=_to_operations, validator=_check_operations
    )

    @classmethod
    def new(cls) -> ContextUpdate:
        """Return an empty update (the same as ``ContextUpdate()``)."""
        return cls()

    @classmethod
    def _trusted(cls, operations: tuple[Operation, ...]) -> ContextUpdate:
        # The builders only ever add one checked Operation to an already checked
        # tuple, so re-validating every element would make n builder calls cost
        # O(n^2) isinstance checks. Setting a frozen slot with object.__setattr__
        # is how attrs itself initialises frozen classes.
        update = object.__new__(cls)
        object.__setattr__(update, "operations", operations)
        return update

    def _add(self, op: Operation) -> ContextUpdate:
        return self._trusted((*self.operations, op))

    def set(self, key: str, value: t.Any) -> ContextUpdate:
        """Add an operation that sets ``deps[key]`` to ``value``, replacing what was there.

        ``value`` is stored as given, not copied.
        """
        return self._add(Operation("set", key, value))

    def merge(self, key: str, mapping: c.Mapping[str, t.Any]) -> ContextUpdate:
        """Add an operation that deep-merges ``mapping`` into ``deps[key]``.

        Nested mappings are merged recursively; where either side is not a mapping
        the value from ``mapping`` wins; a missing key counts as ``{}``. The mapping
        is snapshotted now (its nested mappings copied into new dicts), so changing
        it afterwards does not change the update. Raises ``TypeError`` when
        ``mapping`` is not a mapping.
        """
        if not isinstance(mapping, c.Mapping):
            raise TypeError(
                f"ContextUpdate.merge needs a mapping for key {key!r}, got {type(mapping).__name__}"
            )
        return self._add(Operation("merge", key, _copy_mappings(mapping)))

    def append(self, key: str, item: t.Any) -> ContextUpdate:
        """Add an operation that appends ``item`` to the list at ``deps[key]``.

        A missing key or None gives ``[item]``; a list or tuple ``v`` gives the new
        list ``[*v, item]``; any other value ``v`` gives ``[v, item]``. The list in
        ``deps`` is never appended to in place.
        """
        return self._add(Operation("append", key, item))

    def delete(self, key: str) -> ContextUpdate:
        """Add an operation that removes ``deps[key]``; a missing key is not an error."""
        return self._add(Operation("delete", key))

    def then(self, *others: ContextUpdate | None) -> ContextUpdate:
        """Return this update followed by ``others``, in order; None entries are skipped."""
        return ContextUpdate.merge_updates(self, *others)

    @classmethod
    def merge_updates(cls, *updates: ContextUpdate | None) -> ContextUpdate:
        """Concatenate updates, in order, into one; None entries are skipped.

        Handy for the updates of several tool results (``Ok.update`` may be None).
        """
        operations: list[Operation] = []
        for update in updates:
            if update is None:
                continue
            if not isinstance(update, ContextUpdate):
                raise TypeError(f"can only combine ContextUpdates, got {type(update).__name__}")
            operations.extend(_operations_of(update))
        return cls._trusted(tuple(operations))

    def is_empty(self) -> bool:
        """True when the update has no operations."""
        return not self.operations

    def __len__(self) -> int:
        return len(self.operations)

    def __iter__(self) -> c.Iterator[Operation]:
        return iter(self.operations)

    def apply(self, deps: c.Mapping[str, t.Any] | None) -> dict[str, t.Any]:
        """Return new deps: ``deps`` with every operation applied in order.

        ``deps`` must be a mapping or None (which counts as ``{}``); anything else
        raises ``TypeError``. The result is always a new ``dict``; ``deps`` is never
        mutated. What an operation changes is built anew (the top-level dict, every
        dict at or under a merged key, every appended-to list); everything else is
        shared with ``deps`` and the update, as in a persistent map. Operations on
        :data:`PROTECTED_KEYS` are dropped with a warning.
        """
        return _apply(_operations_of(self), deps)

    def apply_to_run_context(self, ctx: RunContext[t.Any]) -> RunContext[t.Any]:
        """Return a copy of ``ctx`` whose ``deps`` are ``self.apply(ctx.deps)``.

        Nothing else in the context changes (approval settings and the sandbox in
        particular). An empty update returns ``ctx`` itself, whatever its deps are.

        This is the library's own code whatever ``self`` is: called as
        ``ContextUpdate.apply_to_run_context(update, ctx)`` (as
        :func:`~nous_tools.execute_tool_calls` does), a subclass's overrides of this
        method, of :meth:`apply` or of ``operations`` are not used, and every
        operation is checked again by exact type.
        """
        if not isinstance(ctx, RunContext):
            raise TypeError(f"expected a RunContext, got {type(ctx).__name__}")
        operations = _operations_of(self)
        if not operations:
            return ctx
        return attrs.evolve(ctx, deps=_apply(operations, ctx.deps))


# The slot that holds a ContextUpdate's operations, read past any subclass property.
_OPERATIONS_SLOT: t.Any = ContextUpdate.__dict__["operations"]


def _operations_of(update: object) -> tuple[Operation, ...]:
    """The operations stored in ``update``, read from the library's own slot."""
    try:
        operations = _OPERATIONS_SLOT.__get__(update, ContextUpdate)
    except (TypeError, AttributeError):
        raise TypeError(f"expected a ContextUpdate, got {type(update).__name__}") from None
    if type(operations) is not tuple:
        raise TypeError("ContextUpdate operations must be a tuple of Operation values")
    return t.cast(tuple[Operation, ...], operations)


def _apply(operations: tuple[Operation, ...], deps: object) -> dict[str, t.Any]:
    if deps is None:
        result: dict[str, t.Any] = {}
    elif isinstance(deps, c.Mapping):
        result = dict(deps)
    else:
        raise TypeError(
            "ContextUpdate can only be applied to deps that are a mapping or None, "
            f"got {type(deps).__name__}"
        )
    _apply_operations(operations, result)
    return result


def _apply_operations(operations: tuple[Operation, ...], deps: dict[str, t.Any]) -> None:
    """Apply ``operations`` to ``deps``, a dict that belongs to the caller of ``apply``."""
    # Keys whose current value is a list this call built: appending to those in
    # place is safe, which keeps n appends to one key O(n) rather than O(n^2).
    owned_lists: set[str] = set()
    for operation in operations:
        if type(operation) is not Operation:
            raise TypeError(
                f"ContextUpdate operations must be Operation values, got {type(operation).__name__}"
            )
        kind, key, value = operation.op, operation.key, operation.value
        if type(key) is not str or type(kind) is not str:
            raise TypeError("ContextUpdate operation keys and kinds must be str (exactly)")
        if key in PROTECTED_KEYS:
            _log.warning("ContextUpdate: dropped operation on protected key %r", key)
            continue
        if kind == "append":
            if key in owned_lists:
                deps[key].append(value)
                continue
            existing = deps.get(key)
            if existing is None:
                deps[key] = [value]
            elif isinstance(existing, (list, tuple)):
                deps[key] = [*existing, value]
            else:
                deps[key] = [existing, value]
            owned_lists.add(key)
            continue
        owned_lists.discard(key)
        if kind == "set":
            deps[key] = value
        elif kind == "merge":
            deps[key] = _deep_merge(deps.get(key, {}), value)
        elif kind == "delete":
            deps.pop(key, None)
        else:  # pragma: no cover - Operation validates its kind
            raise AssertionError(f"unknown ContextUpdate operation {kind!r}")


def _copy_mappings(value: t.Any) -> t.Any:
    """Return ``value`` with every nested mapping rebuilt as a new dict; other values shared."""
    if isinstance(value, c.Mapping):
        return {k: _copy_mappings(v) for k, v in value.items()}
    return value


def _deep_merge(left: t.Any, right: t.Any) -> t.Any:
    """Merge ``right`` into ``left`` into new dicts; where either is not a mapping, ``right``."""
    if not (isinstance(left, c.Mapping) and isinstance(right, c.Mapping)):
        return _copy_mappings(right)
    merged = {
        k: _deep_merge(v, right[k]) if k in right else _copy_mappings(v) for k, v in left.items()
    }
    for k, v in right.items():
        if k not in merged:
            merged[k] = _copy_mappings(v)
    return merged
