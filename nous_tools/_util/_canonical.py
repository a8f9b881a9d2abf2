"""The canonical, type-faithful form of approved arguments (private).

Three things an approval needs from its arguments, and one place that does them:

- :func:`freeze` — a deep, read-only copy (what a ``NeedsApproval`` holds), made of
  :class:`FrozenDict`, :class:`FrozenList` and :class:`FrozenSet` (subclasses of
  ``dict``/``list``/``set`` whose mutators raise ``TypeError``), tuples, frozensets
  and immutable scalars; :func:`thaw` turns it back into plain mutable values for
  the tool.
- :func:`encode` / :func:`decode` — a JSON tree that says *exactly* what the value
  was: JSON values stand for themselves, everything else is a one-key object whose
  key starts with ``$`` (``{"$tuple": [...]}``, ``{"$set": [...]}``,
  ``{"$bytes": "<base64>"}``, ``{"$dict": [[key, value], ...]}`` for a dict whose
  keys are not all plain strings, ``{"$float": "1.0"}`` for integral and non-finite
  floats, ``{"$int": "..."}`` beyond 2**53). So ``{1: x}`` and ``{"1": x}``, a list
  and a tuple, a set and its repr string, bytes and their repr string never share
  an encoding, and the tree survives a JavaScript ``JSON.parse``/``JSON.stringify``
  round trip (which turns ``1.0`` into ``1`` and rounds big integers).
- :func:`dumps` — the canonical bytes of a tree (sorted keys, no spaces, ASCII),
  what fingerprints and signatures are computed over.

Supported values: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``,
``list``, ``tuple``, ``dict``, ``set`` and ``frozenset``, checked by *exact* type
(a ``str`` subclass, an ``IntEnum`` or an ``OrderedDict`` is refused rather than
silently turned into something else), nested at most :data:`MAX_DEPTH` deep.
Anything else raises ``ValueError`` naming the value's type and where it is.

>>> tree = encode({"ids": (1, 2), "raw": b"hi", 3: {"x"}})
>>> tree
{'$dict': [['ids', {'$tuple': [1, 2]}], ['raw', {'$bytes': 'aGk='}], [3, {'$set': ['x']}]]}
>>> decode(tree) == {"ids": (1, 2), "raw": b"hi", 3: {"x"}}
True
>>> encode({"a": [1.0, 2.5]})
{'a': [{'$float': '1.0'}, 2.5]}
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import typing as t

__all__ = [
    "MAX_DEPTH",
    "FrozenDict",
    "FrozenList",
    "FrozenSet",
    "decode",
    "dumps",
    "encode",
    "freeze",
    "thaw",
]

#: How deep arguments may nest (containers inside containers).
MAX_DEPTH = 100

#: Integers beyond this magnitude are written as strings (JavaScript rounds them).
_SAFE_INT = 2**53
_MIN_SAFE_INT = -_SAFE_INT  # (made once: -_SAFE_INT is a new int each time)

_TAGS = frozenset({"$int", "$float", "$bytes", "$tuple", "$set", "$frozenset", "$dict"})


def _read_only(self: object, *args: object, **kwargs: object) -> t.NoReturn:
    kind = type(self)
    raise TypeError(f"{kind.__name__}{getattr(kind, '_REFUSED', _FROZEN)}")


#: What a mutator of a frozen value says (after the class's name); a subclass that is
#: read-only for another reason (the registry's definitions) says its own ``_REFUSED``.
_FROZEN = " is read-only: approved arguments cannot change"


class FrozenDict(dict[t.Any, t.Any]):
    """A ``dict`` whose mutators raise ``TypeError``; equal to a dict with the same items."""

    __slots__ = ()

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        if self:  # __init__ called again on a built value: that would update it
            _read_only(self)
        super().__init__(*args, **kwargs)

    __setitem__ = __delitem__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (type(self), (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, t.Any]) -> FrozenDict:
        return self

    def __repr__(self) -> str:
        return dict.__repr__(self)


class FrozenList(list[t.Any]):
    """A ``list`` whose mutators raise ``TypeError``; equal to a list with the same items."""

    __slots__ = ()

    def __init__(self, *args: t.Any) -> None:
        if self:
            _read_only(self)
        super().__init__(*args)

    __setitem__ = __delitem__ = _read_only
    append = extend = insert = remove = pop = clear = sort = reverse = _read_only
    __iadd__ = __imul__ = _read_only

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (type(self), (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, t.Any]) -> FrozenList:
        return self

    def __repr__(self) -> str:
        return list.__repr__(self)


class FrozenSet(set[t.Any]):
    """A ``set`` whose mutators raise ``TypeError`` (a ``frozenset`` would lose the
    difference between a set and a frozenset); equal to a set with the same items."""

    __slots__ = ()

    def __init__(self, *args: t.Any) -> None:
        if self:
            _read_only(self)
        super().__init__(*args)

    add = discard = remove = pop = clear = update = _read_only
    difference_update = intersection_update = symmetric_difference_update = _read_only
    __ior__ = __iand__ = __isub__ = __ixor__ = _read_only

    def __reduce__(self) -> tuple[t.Any, ...]:
        return (type(self), (set(self),))

    def __copy__(self) -> FrozenSet:
        return self

    def __deepcopy__(self, memo: dict[int, t.Any]) -> FrozenSet:
        return self

    def __repr__(self) -> str:
        return repr(set(self))


# The built-in constructors and mutators, for filling a frozen container once,
# without the Python-level __init__ (what decode does for every container it reads).
_new_dict = dict.__new__
_update = dict.update
_new_list = list.__new__
_extend = list.extend
_set_item = dict.__setitem__
_set_element = list.__setitem__

_SCALARS = (type(None), bool, int, float, str, bytes)
_SCALAR_KINDS = frozenset(_SCALARS)  # (a type in a set: one hash, not up to six ==)
_DICTS = (dict, FrozenDict)
_LISTS = (list, FrozenList)
_SETS = (set, FrozenSet)


# Where a value is, for error messages: a str ("arguments"), or a tuple made as the
# walk goes down — (0, parent, key) for ``parent[key]`` (an index or a dict key),
# (1, parent, None) for "a key of parent", (2, parent, None) for "an item of parent"
# — turned into text only when an error is raised.
Path = t.Union[str, tuple[int, t.Any, t.Any]]  # noqa: UP007


def _text(path: Path) -> str:
    if type(path) is str:
        return path
    kind, parent, key = t.cast(tuple[int, t.Any, t.Any], path)
    if kind == 0:
        return f"{_text(parent)}[{key!r}]"
    return f"{'a key' if kind == 1 else 'an item'} of {_text(parent)}"


def _unsupported(value: object, path: Path) -> ValueError:
    return ValueError(
        f"{_text(path)} is a {type(value).__module__}.{type(value).__qualname__}, which an "
        "approval cannot represent faithfully (supported: None, bool, int, float, str, bytes, "
        "list, tuple, dict, set, frozenset, by exact type)"
    )


def _too_deep(path: Path) -> ValueError:
    return ValueError(f"{_text(path)} is nested more than {MAX_DEPTH} deep (or is a cycle)")


def freeze(value: t.Any, path: Path = "arguments", depth: int = 0) -> t.Any:
    """A deep, read-only copy of ``value``; ``ValueError`` for what cannot be represented."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if depth >= MAX_DEPTH:
        raise _too_deep(path)
    depth += 1
    if kind in _DICTS:
        items = {}
        for key, item in value.items():
            items[freeze(key, (1, path, None), depth)] = freeze(item, (0, path, key), depth)
        return FrozenDict(items)
    if kind in _LISTS:
        return FrozenList([freeze(item, (0, path, i), depth) for i, item in enumerate(value)])
    if kind is tuple:
        return tuple([freeze(item, (0, path, i), depth) for i, item in enumerate(value)])
    if kind in _SETS:
        return FrozenSet([freeze(item, (2, path, None), depth) for item in value])
    if kind is frozenset:
        return frozenset([freeze(item, (2, path, None), depth) for item in value])
    raise _unsupported(value, path)


def thaw(value: t.Any) -> t.Any:
    """A plain, mutable deep copy of a frozen value (dicts, lists and sets made anew)."""
    kind = type(value)
    if kind in _SCALAR_KINDS:
        return value
    if kind is FrozenDict or kind is dict:  # a copy in C, then its containers copied
        mapping = dict(value)
        for key, item in mapping.items():
            if type(item) not in _SCALAR_KINDS:  # (a scalar is its own copy)
                mapping[key] = thaw(item)
        return mapping
    if kind is FrozenList or kind is list:
        elements = list(value)
        for index, item in enumerate(value):
            if type(item) not in _SCALAR_KINDS:
                elements[index] = thaw(item)
        return elements
    if kind is tuple:
        return tuple(thaw(item) for item in value)
    if kind in _SETS:
        return {thaw(item) for item in value}
    if kind is frozenset:
        return frozenset(thaw(item) for item in value)
    return value  # pragma: no cover - freeze admits nothing else


_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
)
_encode_json = _ENCODER.encode


def _not_json(value: object) -> t.NoReturn:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


try:  # the C encoder json.dumps itself uses (CPython), made once instead of per call
    from _json import encode_basestring_ascii as _c_ascii
    from _json import make_encoder as _c_make_encoder
except ImportError:  # pragma: no cover - another Python: JSONEncoder's own path
    _c_iterencode = None
else:
    # No circular-reference markers: a tree is made by encode (or read from JSON), so
    # it has no cycles; one given by mistake is a RecursionError, never a hang.
    _c_iterencode = _c_make_encoder(None, _not_json, _c_ascii, None, ":", ",", True, False, False)


def dumps(tree: t.Any) -> bytes:
    """The canonical bytes of a JSON tree: sorted keys, no spaces, ASCII, no NaN
    (``ValueError``), nothing but JSON values (``TypeError``)."""
    if _c_iterencode is not None:
        return "".join(_c_iterencode(tree, 0)).encode("ascii")
    return _encode_json(tree).encode("ascii")  # pragma: no cover - not CPython


def _sorted_by_encoding(trees: t.Iterable[t.Any]) -> list[t.Any]:
    return sorted(trees, key=dumps)


def encode(value: t.Any, path: Path = "arguments", depth: int = 0) -> t.Any:
    """The JSON tree of ``value`` (plain or frozen); ``ValueError`` for what cannot be
    represented faithfully."""
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if _MIN_SAFE_INT <= value <= _SAFE_INT else {"$int": str(value)}
    if kind is float:
        if math.isfinite(value) and not value.is_integer():
            return value
        return {"$float": repr(value)}
    if kind is bytes:
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if depth >= MAX_DEPTH:
        raise _too_deep(path)
    depth += 1
    if kind in _DICTS:
        for key in value:
            if type(key) is not str or key.startswith("$"):
                break
        else:
            return {key: encode(item, (0, path, key), depth) for key, item in value.items()}
        pairs = [
            [encode(key, (1, path, None), depth), encode(item, (0, path, key), depth)]
            for key, item in value.items()
        ]
        return {"$dict": sorted(pairs, key=lambda pair: dumps(pair[0]))}
    if kind in _LISTS:
        return [encode(item, (0, path, i), depth) for i, item in enumerate(value)]
    if kind is tuple:
        return {"$tuple": [encode(item, (0, path, i), depth) for i, item in enumerate(value)]}
    if kind in _SETS or kind is frozenset:
        tag = "$frozenset" if kind is frozenset else "$set"
        return {tag: _sorted_by_encoding([encode(item, (2, path, None), depth) for item in value])}
    raise _unsupported(value, path)


def _malformed(path: Path, why: str) -> ValueError:
    return ValueError(f"{_text(path)} is not a canonical approval value: {why}")


def _decode_items(
    tree: object, path: Path, depth: int, tagged: list[bool], frozen: bool
) -> list[t.Any]:
    if type(tree) is not list:
        raise _malformed(path, f"expected a list, got {type(tree).__name__}")
    return [_decode(item, (0, path, i), depth, tagged, frozen) for i, item in enumerate(tree)]


def _hashable(value: t.Any, path: Path) -> t.Any:
    try:
        hash(value)
    except TypeError:
        raise _malformed(path, f"a {type(value).__name__} cannot be a set item or a key") from None
    return value


def _decode(tree: t.Any, path: Path, depth: int, tagged: list[bool], frozen: bool) -> t.Any:
    """The value of ``tree`` (frozen, or plain and mutable as :func:`thaw` makes it);
    ``tagged`` becomes ``[True]`` when a ``$`` tag was read (only a tagged tree can be
    in a form that is not canonical)."""
    kind = type(tree)
    if tree is None or kind is bool or kind is str:
        return tree
    if kind is int:
        if not _MIN_SAFE_INT <= tree <= _SAFE_INT:
            raise _malformed(path, "a big integer must be written as {'$int': ...}")
        return tree
    if kind is float:
        if not math.isfinite(tree) or tree.is_integer():
            raise _malformed(path, "an integral float must be written as {'$float': ...}")
        return tree
    if depth >= MAX_DEPTH:
        raise _too_deep(path)
    depth += 1
    if kind is list:
        elements = _decode_items(tree, path, depth, tagged, frozen)
        if not frozen:
            return elements
        frozen_list = _new_list(FrozenList)
        _extend(frozen_list, elements)  # list's own extend: FrozenList refuses it
        return frozen_list
    if kind is not dict:
        raise _malformed(path, f"unexpected {kind.__name__}")
    for key in tree:
        if type(key) is not str or key.startswith("$"):
            break
    else:
        mapping = {
            key: _decode(item, (0, path, key), depth, tagged, frozen) for key, item in tree.items()
        }
        if not frozen:
            return mapping
        frozen_dict = _new_dict(FrozenDict)
        _update(frozen_dict, mapping)  # dict's own update: FrozenDict refuses it
        return frozen_dict
    tags = [key for key in tree if type(key) is not str or key.startswith("$")]
    if len(tree) != 1 or tags[0] not in _TAGS:
        raise _malformed(path, f"unknown or mixed tag(s) {sorted(map(str, tags))}")
    tagged[0] = True
    tag, body = next(iter(tree.items()))
    if tag in ("$int", "$float", "$bytes"):
        if type(body) is not str:
            raise _malformed(path, f"{tag} needs a string")
        try:
            if tag == "$int":
                return int(body)
            if tag == "$float":
                return float(body)
            return base64.b64decode(body.encode("ascii"), validate=True)
        except (ValueError, binascii.Error, UnicodeEncodeError) as exc:
            raise _malformed(path, f"bad {tag} {body[:40]!r}") from exc
    if tag == "$tuple":
        return tuple(_decode_items(body, path, depth, tagged, frozen))
    if tag in ("$set", "$frozenset"):
        members = _decode_items(body, path, depth, tagged, frozen)
        kind_of_set: type[set[t.Any] | frozenset[t.Any]] = (
            frozenset if tag == "$frozenset" else FrozenSet if frozen else set
        )
        return kind_of_set(_hashable(item, path) for item in members)
    pairs = _decode_items(body, path, depth, tagged, frozen)  # $dict
    pair_kind = FrozenList if frozen else list
    items: dict[t.Any, t.Any] = {}
    for pair in pairs:
        if type(pair) is not pair_kind or len(pair) != 2:
            raise _malformed(path, "$dict needs [key, value] pairs")
        items[_hashable(pair[0], path)] = pair[1]
    return FrozenDict(items) if frozen else items


class _NotPlain(Exception):
    """A tree that :func:`_plain` leaves to the full decoder (a tag, a number that
    must be tagged, too deep, not JSON)."""


def _plain(tree: t.Any, depth: int, frozen: bool) -> t.Any:
    """The value of a tree of plain JSON in canonical form — no ``$`` key, integers
    within 2**53, floats neither integral nor non-finite — in one quick walk, or
    :class:`_NotPlain` for anything else (the full decoder then reads it, and says
    what is wrong, where)."""
    kind = type(tree)
    if kind is dict:  # a copy in C, then the items that are not a str or an int replaced
        if depth >= MAX_DEPTH:
            raise _NotPlain
        depth += 1
        mapping = _new_dict(FrozenDict) if frozen else {}
        _update(mapping, tree)  # dict's own update: FrozenDict refuses it
        for key, item in tree.items():
            if type(key) is not str or key[:1] == "$":
                raise _NotPlain
            of = type(item)
            if of is str or (of is int and _MIN_SAFE_INT <= item <= _SAFE_INT):
                continue  # (its own copy)
            _set_item(mapping, key, _plain(item, depth, frozen))
        return mapping
    if kind is list:
        if depth >= MAX_DEPTH:
            raise _NotPlain
        depth += 1
        elements = _new_list(FrozenList) if frozen else []
        _extend(elements, tree)  # list's own extend: FrozenList refuses it
        index = -1
        for item in tree:
            index += 1
            of = type(item)
            if of is str or (of is int and _MIN_SAFE_INT <= item <= _SAFE_INT):
                continue
            _set_element(elements, index, _plain(item, depth, frozen))
        return elements
    if kind is str or kind is bool or tree is None:
        return tree
    if kind is int:
        if _MIN_SAFE_INT <= tree <= _SAFE_INT:
            return tree
        raise _NotPlain
    if kind is float:
        if math.isfinite(tree) and not tree.is_integer():
            return tree
        raise _NotPlain
    raise _NotPlain


def decode(tree: t.Any, path: Path = "arguments", *, frozen: bool = True) -> t.Any:
    """The frozen value of a JSON tree made by :func:`encode` (with ``frozen=False``,
    the plain mutable value, as :func:`thaw` would make it, in one walk).

    Raises ``ValueError`` for a tree that :func:`encode` would not have written
    (unknown tags, bad base64, an integral float written as a plain number, a
    duplicate set item, keys out of order in ``$dict``...): each value has exactly
    one encoding, so ``encode(decode(tree)) == tree``.
    """
    try:  # the common case: plain JSON, its own encoding
        return _plain(tree, 0, frozen)
    except _NotPlain:
        pass
    except RecursionError:  # pragma: no cover - MAX_DEPTH stops this first
        pass
    tagged = [False]
    value = _decode(tree, path, 0, tagged, frozen)
    if not tagged[0]:
        # Plain JSON that _decode accepted (str keys without "$", no integral or
        # non-finite float, no integer beyond 2**53) is its own encoding.
        return value
    try:
        # Compared as trees, not as their JSON text: decode keeps every scalar's
        # exact type (a bool stays a bool, an int an int, a float a float), so the two
        # trees can only differ in structure, order or tags, which == sees.
        same = encode(value, path) == tree
    except (TypeError, ValueError) as exc:
        raise _malformed(path, str(exc)) from exc
    if not same:
        raise _malformed(path, "it is not in canonical form")
    return value
