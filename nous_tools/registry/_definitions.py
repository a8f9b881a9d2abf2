"""The tool definitions a registry sends to a model, made once (private).

:meth:`Registry.tool_definitions <nous_tools.Registry.tool_definitions>` is called on
every model turn, with the same answer until the registry changes. So:

- **per tool**, its parameters schema — as it is, and in OpenAI's strict form — is
  made once into a read-only tree (:class:`ReadOnlyDict` / :class:`ReadOnlyList`)
  and kept on the :class:`~nous_tools.Tool` (a tool is immutable; its schema is read
  the first time);
- **per registry**, the sorted definitions of each (provider, strict) pair are kept
  with the registry's version, which every ``register``, ``unregister`` and
  replacement moves on: the next call after a change builds the list again, from
  the tools' cached parts.

Each call returns a new list of new top-level dicts, so a caller may add or change
keys there — say, Anthropic's ``cache_control`` on the last tool. What is inside
(the schemas, and the ``"function"`` part of an OpenAI Chat Completions definition)
is shared by every call and read-only: changing it raises ``TypeError``;
``copy.deepcopy`` of a definition gives a plain, mutable copy. (A new copy of
everything would cost about as much as the definitions did before the cache.)

A tool whose schema cannot be made strict is not an error in a registry's strict
definitions: it is sent non-strict (``"strict": false``, its schema as it is), with
a warning naming the tool and the keyword, once per tool.
"""

from __future__ import annotations

import collections.abc as c
import copy
import threading
import typing as t

from nous_tools._util._log import log as _safe_log

if t.TYPE_CHECKING:
    from nous_tools.registry._registry import Registry
    from nous_tools.tool import Tool

__all__ = ["ReadOnlyDict", "ReadOnlyList", "definitions", "read_only"]

_log = _safe_log

Provider = t.Literal["openai", "responses", "anthropic"]
_PROVIDERS = ("openai", "responses", "anthropic")

_EMPTY: dict[str, t.Any] = {"type": "object", "properties": {}, "required": []}

# Held while a tool's parts are first made (re-entered for a strict tool's plain parts).
_making = threading.RLock()


def _read_only(self: object, *args: object, **kwargs: object) -> t.NoReturn:
    raise TypeError(
        f"{type(self).__name__}: tool definitions share their schemas with the registry's "
        "cache, read-only; copy.deepcopy(definition) gives one you can change"
    )


def _plain(value: t.Any, memo: dict[int, t.Any] | None = None) -> t.Any:
    """A plain, mutable deep copy of a read-only tree (``copy.deepcopy`` does this)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return copy.deepcopy(value, memo)


class ReadOnlyDict(dict[str, t.Any]):
    """A ``dict`` whose mutators raise ``TypeError``; ``copy.deepcopy`` gives a plain
    dict (and ``copy.copy`` a plain shallow one). Equal to a dict of the same items;
    ``json.dumps`` writes it as one."""

    __slots__ = ()

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        if self:  # __init__ called again on a built value: that would update it
            _read_only(self)
        super().__init__(*args, **kwargs)

    __setitem__ = __delitem__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __copy__(self) -> dict[str, t.Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, t.Any]) -> dict[str, t.Any]:
        return t.cast("dict[str, t.Any]", _plain(self, memo))

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (dict, (dict(self),))

    def __repr__(self) -> str:
        return dict.__repr__(self)


class ReadOnlyList(list[t.Any]):
    """A ``list`` whose mutators raise ``TypeError``; copies are plain lists."""

    __slots__ = ()

    def __init__(self, *args: t.Any) -> None:
        if self:
            _read_only(self)
        super().__init__(*args)

    __setitem__ = __delitem__ = _read_only
    append = extend = insert = remove = pop = clear = sort = reverse = _read_only
    __iadd__ = __imul__ = _read_only

    def __copy__(self) -> list[t.Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, t.Any]) -> list[t.Any]:
        return t.cast("list[t.Any]", _plain(self, memo))

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (list, (list(self),))

    def __repr__(self) -> str:
        return list.__repr__(self)


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


# -- per tool ---------------------------------------------------------------------------


class _Parts(t.NamedTuple):
    """A tool's definition parts: its schema for the definitions, and whether it is
    strict (False for the plain schema, and for a strict one that could not be)."""

    parameters: ReadOnlyDict
    strict: bool


def _parts(tool: Tool, strict: bool) -> _Parts:
    """The definition parts of ``tool`` (cached on it; made at the first call, once
    even when threads ask together, so a warning is logged once)."""
    cache = tool._definition_parts
    parts: _Parts | None = cache.get(strict) if cache is not None else None
    if parts is not None:
        return parts
    with _making:
        cache = tool._definition_parts
        if cache is None:
            cache = {}
            object.__setattr__(tool, "_definition_parts", cache)
        parts = cache.get(strict)
        if parts is None:
            parts = cache[strict] = _make_parts(tool, strict)
    return parts


def _make_parts(tool: Tool, strict: bool) -> _Parts:
    if not strict:
        schema = tool.parameters if tool.parameters else _EMPTY
        return _Parts(read_only(schema), False)
    try:
        return _Parts(read_only(tool.strict_parameters()), True)
    except ValueError as exc:
        _log.warning(
            '%s; it is sent with "strict": false (its own schema) in the strict tool definitions',
            exc,
        )
        return _Parts(_parts(tool, False).parameters, False)


def _template(tool: Tool, provider: str, strict: bool) -> dict[str, t.Any]:
    """The definition of ``tool`` for ``provider``, sharing the tool's read-only schema
    (for "openai", its read-only ``function`` part, which each call wraps)."""
    parts = _parts(tool, strict)
    description = tool.description or "No description provided"
    if provider == "anthropic":
        return {"name": tool.name, "description": description, "input_schema": parts.parameters}
    if provider == "responses":
        return {
            "type": "function",
            "name": tool.name,
            "description": description,
            "parameters": parts.parameters,
            "strict": parts.strict,
        }
    function = ReadOnlyDict(name=tool.name, description=description, parameters=parts.parameters)
    if strict:  # a tool that could not be strict says so: "strict": false
        dict.__setitem__(function, "strict", parts.strict)
    return function  # each call wraps it: {"type": "function", "function": function}


# -- per registry -----------------------------------------------------------------------


def definitions(registry: Registry, provider: str, strict: bool) -> list[dict[str, t.Any]]:
    """What :meth:`Registry.tool_definitions` returns (checked arguments, fresh copies
    of the cached definitions)."""
    if provider not in _PROVIDERS:
        raise ValueError(f"provider must be 'openai', 'responses' or 'anthropic', got {provider!r}")
    if strict and provider == "anthropic":
        raise ValueError("strict=True is OpenAI's strict mode; not for provider 'anthropic'")
    key = (provider, bool(strict))
    cached = registry._definitions.get(key)
    if cached is None or cached[0] != registry._version:
        with registry._lock:  # the version and the tools it counts, together
            version = registry._version
            tools = registry._tools.copy()
        templates = [
            _template(tools[name], provider, key[1])
            for name in sorted(tools)
            if tools[name].approval != "deny"
        ]
        cached = (version, templates)
        registry._definitions[key] = cached
    if provider == "openai":  # a new dict around each shared, read-only function part
        return [{"type": "function", "function": function} for function in cached[1]]
    return [template.copy() for template in cached[1]]
