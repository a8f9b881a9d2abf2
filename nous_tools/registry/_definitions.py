"""The tool definitions a registry sends to a model, kept up to date (private).

:meth:`Registry.tool_definitions <nous_tools.Registry.tool_definitions>` is called on
every model turn, with the same answer until the registry changes. So:

- **per schema**, the parameters schema — as it is, and in OpenAI's strict form —
  is made once into a read-only tree (:class:`ReadOnlyDict` / :class:`ReadOnlyList`),
  shared by every tool whose schema reads the same: the tools that share one
  compiled validator (:attr:`Tool.validator <nous_tools.Tool.validator>`: one per
  schema text) and whose schemas still equal the tree, or that have no parameters;
  it is kept while one of those tools lives;
- **per tool**, the trees of a tool that shares none (its arguments are not
  validated) and a strict form that could not be made (sent non-strict, with a
  warning once) are kept on the :class:`~nous_tools.Tool` (a tool is immutable);
- **per registry**, :class:`Definitions` keeps the sorted definitions of each
  (provider, strict) pair with the count of changes they reflect. Each
  ``register``, ``unregister`` and replacement reports the names it changed; the
  next call patches just those entries of the list (a copy of it, so a reader never
  sees one half made), and makes the list again only after many changes.

Each call returns a new list (yours to reorder, extend or cut) of the kept
definitions themselves, read-only all the way down, shared by every call: changing
one raises ``TypeError``. To add a key — say, Anthropic's ``cache_control`` on the
last tool — put a new dict in its place (``tools[-1] = {**tools[-1], "cache_control":
...}``); ``copy.deepcopy`` of a definition gives a plain, mutable copy of it all.
(A new dict per tool per call would fill the garbage collector's oldest generation
while an agent loop keeps the last answer, and stall every few turns in a full
collection: about 50 ms at 5,000 tools.)

A tool whose schema cannot be made strict is not an error in a registry's strict
definitions: it is sent non-strict (``"strict": false``, its schema as it is), with
a warning naming the tool and the keyword, once per tool.
"""

from __future__ import annotations

import bisect
import collections
import collections.abc as c
import copy
import itertools
import threading
import typing as t
import weakref

from nous_tools._util._canonical import FrozenDict, FrozenList
from nous_tools._util._log import log as _safe_log

if t.TYPE_CHECKING:
    from nous_tools.tool import Tool

__all__ = ["Definitions", "ReadOnlyDict", "ReadOnlyList", "read_only"]

_log = _safe_log

Provider = t.Literal["openai", "responses", "anthropic"]
_PROVIDERS = ("openai", "responses", "anthropic")

_EMPTY: dict[str, t.Any] = {"type": "object", "properties": {}, "required": []}

# Held while a tool's parts are first made (re-entered for a strict tool's plain parts).
_making = threading.RLock()


#: What a definition's mutators say, after the class's name.
_REFUSED = (
    ": tool definitions share their schemas with the registry's cache, read-only; "
    "{**definition, key: value} or copy.deepcopy(definition) gives one you can change"
)


def _plain(value: t.Any, memo: dict[int, t.Any] | None = None) -> t.Any:
    """A plain, mutable deep copy of a read-only tree (``copy.deepcopy`` does this)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return copy.deepcopy(value, memo)


class ReadOnlyDict(FrozenDict):
    """A frozen ``dict`` (its mutators raise ``TypeError``) whose copies are plain:
    ``copy.deepcopy`` gives a plain dict, ``copy.copy`` a plain shallow one, so a
    caller can change a definition's copy. Equal to a dict of the same items;
    ``json.dumps`` writes it as one."""

    __slots__ = ()
    _REFUSED = _REFUSED

    def __copy__(self) -> dict[str, t.Any]:  # type: ignore[override]
        return dict(self)

    def __deepcopy__(self, memo: dict[int, t.Any]) -> dict[str, t.Any]:  # type: ignore[override]
        return t.cast("dict[str, t.Any]", _plain(self, memo))

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (dict, (dict(self),))


class ReadOnlyList(FrozenList):
    """A frozen ``list`` whose copies are plain lists."""

    __slots__ = ()
    _REFUSED = _REFUSED

    def __copy__(self) -> list[t.Any]:  # type: ignore[override]
        return list(self)

    def __deepcopy__(self, memo: dict[int, t.Any]) -> list[t.Any]:  # type: ignore[override]
        return t.cast("list[t.Any]", _plain(self, memo))

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (list, (list(self),))


_new_dict = dict.__new__
_fill_dict = dict.update
_new_list = list.__new__
_fill_list = list.extend


def read_only(value: t.Any) -> t.Any:
    """A read-only deep copy of a JSON tree (mappings and lists made read-only; any
    other value deep-copied)."""
    if isinstance(value, c.Mapping):
        mapping = _new_dict(ReadOnlyDict)
        _fill_dict(mapping, {key: read_only(item) for key, item in value.items()})
        return mapping
    if isinstance(value, (list, tuple)):
        sequence = _new_list(ReadOnlyList)
        _fill_list(sequence, [read_only(item) for item in value])
        return sequence
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return copy.deepcopy(value)


# -- per schema -------------------------------------------------------------------------


class _Parts(t.NamedTuple):
    """A tool's definition parts: its schema for the definitions, and whether it is
    strict (False for the plain schema, and for a strict one that could not be)."""

    parameters: ReadOnlyDict
    strict: bool


class _Shared:
    """The parts of the tools whose schemas read as ``source`` does (the first such
    tool's parameters): ``plain`` and ``strict``, each made when a tool first asks
    for it (None until then). A strict form that cannot be made is not here: each
    tool keeps its own (and its warning)."""

    __slots__ = ("plain", "source", "strict")

    def __init__(self, source: c.Mapping[str, t.Any] | None) -> None:
        self.source = source
        self.plain: _Parts | None = None
        self.strict: _Parts | None = None


# Every tool without parameters shares these.
_NO_PARAMETERS = _Shared(None)
# By compiled validator: an entry goes with the last tool holding its validator.
_by_validator: weakref.WeakKeyDictionary[object, _Shared] = weakref.WeakKeyDictionary()


def _shared(tool: Tool) -> _Shared | None:
    """The parts ``tool`` shares (a new entry if it is the first of its schema), or
    None for a tool with a schema of its own: its arguments are not validated, or its
    schema no longer reads as the one its validator was compiled from. Called under
    ``_making``."""
    parameters = tool.parameters
    if not parameters:
        return _NO_PARAMETERS
    validator = tool.validator
    if validator is None:
        return None
    shared = _by_validator.get(validator)
    if shared is None:
        shared = _by_validator[validator] = _Shared(parameters)
    elif shared.source is not parameters and shared.source != parameters:
        return None
    return shared


# -- per tool ---------------------------------------------------------------------------


def _own(tool: Tool, strict: bool) -> _Parts | None:
    """The parts kept on ``tool`` itself, if any."""
    own = tool._definition_parts
    parts: _Parts | None = own.get(strict) if own is not None else None
    return parts


def _parts(tool: Tool, strict: bool) -> _Parts:
    """The definition parts of ``tool``: those it shares with the tools whose schemas
    read the same, else its own (kept on it: those of a schema it shares with no
    tool, and a strict form that could not be made). Made at the first call, once
    even when threads ask together, so a warning is logged once per tool."""
    parts = _own(tool, strict)
    if parts is not None:
        return parts
    with _making:
        parts = _own(tool, strict)
        if parts is not None:
            return parts
        shared = _shared(tool)
        if shared is not None:
            parts = shared.strict if strict else shared.plain
        if parts is None:
            parts = _make_parts(tool, strict)
            if shared is not None and parts.strict == strict:  # made as asked: shared
                if strict:
                    shared.strict = parts
                else:
                    shared.plain = parts
            else:
                own = tool._definition_parts
                if own is None:
                    own = {}
                    object.__setattr__(tool, "_definition_parts", own)
                own[strict] = parts
    return parts


def _make_parts(tool: Tool, strict: bool) -> _Parts:
    """The parts of ``tool`` (a strict form that cannot be made: its plain schema,
    sent non-strict, and a warning)."""
    if not strict:
        return _Parts(read_only(tool.parameters if tool.parameters else _EMPTY), False)
    try:
        return _Parts(read_only(tool.strict_parameters()), True)
    except ValueError as exc:
        _log.warning(
            '%s; it is sent with "strict": false (its own schema) in the strict tool definitions',
            exc,
        )
        return _Parts(_parts(tool, False).parameters, False)


def _read_only_dict(**items: t.Any) -> ReadOnlyDict:
    """A :class:`ReadOnlyDict` of ``items`` as they are (no copy)."""
    mapping: ReadOnlyDict = _new_dict(ReadOnlyDict)
    _fill_dict(mapping, items)
    return mapping


def _definition(tool: Tool, provider: str, strict: bool) -> ReadOnlyDict:
    """The read-only definition of ``tool`` for ``provider``, around the tool's
    read-only schema (for "openai", around a read-only ``function`` part)."""
    parts = _parts(tool, strict)
    description = tool.description or "No description provided"
    if provider == "anthropic":
        return _read_only_dict(
            name=tool.name, description=description, input_schema=parts.parameters
        )
    if provider == "responses":
        return _read_only_dict(
            type="function",
            name=tool.name,
            description=description,
            parameters=parts.parameters,
            strict=parts.strict,
        )
    function = _read_only_dict(name=tool.name, description=description, parameters=parts.parameters)
    if strict:  # a tool that could not be strict says so: "strict": false
        dict.__setitem__(function, "strict", parts.strict)
    return _read_only_dict(type="function", function=function)


# -- per registry -----------------------------------------------------------------------

#: The most changes the next call patches in; after more, it makes the list again.
_PATCH_LIMIT = 64


class _Listing(t.NamedTuple):
    """The definitions of one (provider, strict) pair as of ``version`` changes:
    ``names`` sorted (the tools not "deny"), ``definitions`` in the same order.
    Never changed once made: a change makes a new listing."""

    version: int
    names: list[str]
    definitions: list[ReadOnlyDict]


def _listing(tools: c.Mapping[str, Tool], provider: str, strict: bool, version: int) -> _Listing:
    """The listing of ``tools`` (a snapshot of the registry's table), made anew."""
    names = sorted(name for name, tool in tools.items() if tool.approval != "deny")
    return _Listing(version, names, [_definition(tools[name], provider, strict) for name in names])


def _patched(
    listing: _Listing,
    changed: c.Mapping[str, Tool | None],
    provider: str,
    strict: bool,
    version: int,
) -> _Listing:
    """``listing`` with the tools of the ``changed`` names as they are now (None:
    removed), in a copy of its lists."""
    names, definitions = listing.names.copy(), listing.definitions.copy()
    for name, tool in changed.items():
        at = bisect.bisect_left(names, name)
        if at < len(names) and names[at] == name:
            del names[at], definitions[at]
        if tool is not None and tool.approval != "deny":
            names.insert(at, name)
            definitions.insert(at, _definition(tool, provider, strict))
    return _Listing(version, names, definitions)


class Definitions:
    """A registry's tool definitions, kept up to date with its table.

    ``tools`` is the registry's table and ``lock`` the lock its writes hold; each
    write reports the names it changed (:meth:`changed`, under that lock). A call
    (:meth:`get`) reads the kept listing of its (provider, strict) pair without the
    lock; when changes came since it was made, it takes a snapshot of what they
    changed under the lock, then patches a copy of the listing outside it.
    """

    __slots__ = ("_changed", "_listings", "_lock", "_tools", "version")

    def __init__(self, tools: c.Mapping[str, Tool], lock: threading.Lock) -> None:
        self._tools = tools
        self._lock = lock
        #: How many changes were reported (the version the listings are made at).
        self.version = 0
        # The names of the last changes, oldest first; older ones are forgotten.
        self._changed: collections.deque[str] = collections.deque(maxlen=_PATCH_LIMIT)
        self._listings: dict[tuple[str, bool], _Listing] = {}

    def changed(self, *names: str) -> None:
        """The tools of ``names`` were registered, replaced or removed (called with
        the registry's lock held)."""
        self._changed.extend(names)
        self.version += len(names)

    def get(self, provider: str, strict: bool) -> list[dict[str, t.Any]]:
        """What :meth:`Registry.tool_definitions` returns (checked arguments, a new
        list of the kept, read-only definitions)."""
        if provider not in _PROVIDERS:
            raise ValueError(
                f"provider must be 'openai', 'responses' or 'anthropic', got {provider!r}"
            )
        if strict and provider == "anthropic":
            raise ValueError("strict=True is OpenAI's strict mode; not for provider 'anthropic'")
        key = (provider, bool(strict))
        listing = self._listings.get(key)
        if listing is None or listing.version != self.version:
            listing = self._update(key, listing)
        answer: list[dict[str, t.Any]] = [*listing.definitions]
        return answer

    def _update(self, key: tuple[str, bool], listing: _Listing | None) -> _Listing:
        """The listing of ``key`` as of now: ``listing`` patched with the changes
        since it was made, or (with too many of them) made anew."""
        with self._lock:  # the version and the tools it counts, together
            version = self.version
            if listing is not None and version - listing.version <= len(self._changed):
                since = itertools.islice(reversed(self._changed), version - listing.version)
                changed = {name: self._tools.get(name) for name in since}
            else:
                listing, tools = None, dict(self._tools)
        provider, strict = key
        if listing is None:
            listing = _listing(tools, provider, strict, version)
        else:
            listing = _patched(listing, changed, provider, strict, version)
        self._listings[key] = listing
        return listing
