"""What makes a tool's function *this* code and configuration (private): the part of
:func:`nous_tools.approval.tool_digest` that reads the function.

A token carries the digest, so that an approval is not redeemed by other code
registered later under the same name. Names alone (module and qualified name) miss
two cases that matter:

- a redeployed function whose **body** changed (same name, other behaviour);
- two closures of one factory, or two ``functools.partial`` of one function, whose
  **captured configuration** differs (``make_refund(account="A")`` and
  ``make_refund(account="B")``).

So the identity of a function is its name, its code object — bytecode, constants,
names, argument layout and exception table, recursively for nested code (line
numbers and file names are left out: moving code does not change it) — its
defaults and keyword defaults, and the values of its closure cells; functions found
there are followed the same way. Values must be representable canonically (see
:mod:`nous_tools._util._canonical`; besides, classes, modules, builtins and enum members
are written by name). Anything else — a captured client object, say — cannot be told
apart from another of its kind, and raises :class:`Unrepresentable` saying where.

A callable object is identified by its class and the code of its ``__call__`` (not
its attributes), a bound method by its function and its instance's class.

:func:`identity` returns the JSON tree and the *snapshot* — the objects read from
mutable places (a function's ``__code__``, ``__defaults__``, keyword defaults and
cell contents) — or None when a mutable container (a list, dict, set) is part of the
configuration: :func:`unchanged` then tells, far faster than a new digest, whether a
digest computed earlier still holds.
"""

from __future__ import annotations

import base64
import enum
import functools
import types
import typing as t

from nous_tools._util import _canonical as _c

__all__ = ["Unrepresentable", "identity", "unchanged"]

#: How deep functions may reach functions (closures of closures...).
MAX_DEPTH = 50

_EMPTY_CELL = object()
_PLAIN = (type(None), bool, int, float, str, bytes)
_MUTABLE = (list, dict, set, bytearray, _c.FrozenDict, _c.FrozenList, _c.FrozenSet)


class Unrepresentable(ValueError):
    """A function's configuration holds a value a token cannot represent."""


def _name(value: t.Any) -> str:
    return f"{getattr(value, '__module__', None)}.{getattr(value, '__qualname__', None)}"


class _Walk:
    """One walk over a function's identity; ``encode=False`` only takes the snapshot."""

    def __init__(self, encode: bool) -> None:
        self.encode = encode
        self.snapshot: list[t.Any] | None = []
        self.functions: dict[int, str] = {}  # id -> name, against cycles

    def point(self, value: object) -> None:
        if self.snapshot is not None:
            self.snapshot.append(value)

    def value(self, value: t.Any, where: str, depth: int) -> t.Any:
        """The tree of a configuration value (a default, a cell, a partial's argument)."""
        kind = type(value)
        if kind in _PLAIN:
            return _c.encode(value) if self.encode else None
        if depth >= MAX_DEPTH:
            raise Unrepresentable(f"{where} is nested more than {MAX_DEPTH} deep")
        depth += 1
        if kind is tuple or kind is frozenset:
            items = [self.value(item, f"an item of {where}", depth) for item in value]
            if not self.encode:
                return None
            if kind is tuple:
                return {"$tuple": items}
            return {"$frozenset": sorted(items, key=_c.dumps)}
        if isinstance(value, _MUTABLE):
            self.snapshot = None  # its contents may change: no cached digest
            try:
                return _c.encode(value, where) if self.encode else None
            except ValueError as exc:
                raise Unrepresentable(str(exc)) from None
        if kind is types.FunctionType or kind is functools.partial:
            return self.callable(value, where, depth)
        if kind is types.MethodType:
            return {
                "$method": self.callable(value.__func__, where, depth),
                "self": _name(type(value.__self__)),
            }
        if kind is types.ModuleType:
            return {"$module": value.__name__}
        if isinstance(value, type):
            return {"$type": _name(value)}
        if isinstance(value, enum.Enum):
            return {"$enum": f"{_name(kind)}.{value.name}"}
        if kind is types.CodeType:
            return self.code(value)
        if kind is types.BuiltinFunctionType and type(value.__self__) in (types.ModuleType,
                                                                         type(None)):  # fmt: skip
            return {"$builtin": _name(value)}  # len, math.sqrt: not bound to any state
        raise Unrepresentable(
            f"{where} is a {kind.__module__}.{kind.__qualname__}, which a token cannot "
            "represent faithfully (two of them configured differently would look the same)"
        )

    def callable(self, function: t.Any, where: str, depth: int) -> t.Any:
        """The tree of a function, a ``functools.partial`` or a callable object."""
        if depth >= MAX_DEPTH:
            raise Unrepresentable(f"{where} reaches functions more than {MAX_DEPTH} deep")
        kind = type(function)
        if kind is functools.partial:
            return self.partial(function, where, depth)
        if kind is types.MethodType:
            return {
                "$method": self.callable(function.__func__, where, depth + 1),
                "self": _name(type(function.__self__)),
            }
        if kind is not types.FunctionType:
            call = getattr(kind, "__call__", None)  # noqa: B004  (the class's, not the instance's)
            if isinstance(function, type) or type(call) is not types.FunctionType:
                return {"$named": _name(function if hasattr(function, "__qualname__") else kind)}
            return {"$object": _name(kind), "call": self.callable(call, where, depth + 1)}
        return self.function(function, depth)

    def partial(self, function: functools.partial[t.Any], where: str, depth: int) -> t.Any:
        """The tree of a ``functools.partial``: its function and its arguments."""
        self.point(function.func)
        self.point(function.args)
        keywords = function.keywords
        self.point(len(keywords))
        for key, item in keywords.items():
            self.point(key)
            self.point(item)
        inner = self.callable(function.func, where, depth + 1)
        args = self.value(function.args, f"the arguments of the partial {where}", depth + 1)
        kwargs = {
            key: self.value(item, f"the argument {key!r} of the partial {where}", depth + 1)
            for key, item in sorted(keywords.items())
        }
        return {"$partial": inner, "args": args, "keywords": kwargs} if self.encode else None

    def function(self, function: types.FunctionType, depth: int) -> t.Any:
        """The tree of a plain function: its name, code, defaults and closure cells."""
        known = self.functions.get(id(function))
        if known is not None:
            return {"$again": known}  # a function that reaches itself
        name = _name(function)
        self.functions[id(function)] = name
        here = str(function.__qualname__)
        code = function.__code__
        defaults = function.__defaults__
        kwdefaults = function.__kwdefaults__ or {}
        closure = function.__closure__ or ()
        self.point(code)
        self.point(defaults)
        self.point(len(kwdefaults))
        for key, item in kwdefaults.items():
            self.point(key)
            self.point(item)
        cells = []
        for variable, cell in zip(code.co_freevars, closure, strict=True):
            try:
                content = cell.cell_contents
            except ValueError:  # an empty cell (a name not yet bound)
                content = _EMPTY_CELL
            self.point(content)
            if content is _EMPTY_CELL:
                cells.append([variable, {"$empty": True}])
                continue
            tree = self.value(content, f"the variable {variable!r} captured by {here}", depth + 1)
            cells.append([variable, tree])
        default_trees = (
            None
            if defaults is None
            else [self.value(item, f"a default value of {here}", depth + 1) for item in defaults]
        )
        kwdefault_trees = {
            key: self.value(item, f"the default of {key!r} in {here}", depth + 1)
            for key, item in kwdefaults.items()
        }
        if not self.encode:
            return None
        return {
            "$function": name,
            "code": self.code(code),
            "defaults": default_trees,
            "kwdefaults": dict(sorted(kwdefault_trees.items())),
            "closure": cells,
        }

    def code(self, code: types.CodeType) -> t.Any:
        """The tree of a code object: what it does, not where it is written."""
        if not self.encode:
            return None
        return {
            "$code": code.co_name,
            "argcount": [code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount],
            "flags": code.co_flags,
            "bytecode": base64.b64encode(code.co_code).decode("ascii"),
            "exceptions": base64.b64encode(getattr(code, "co_exceptiontable", b"")).decode("ascii"),
            "consts": [self.constant(item) for item in code.co_consts],
            "names": list(code.co_names),
            "varnames": list(code.co_varnames),
            "freevars": list(code.co_freevars),
            "cellvars": list(code.co_cellvars),
        }

    def constant(self, value: t.Any) -> t.Any:
        kind = type(value)
        if kind is types.CodeType:
            return self.code(value)
        if kind is tuple:
            return {"$tuple": [self.constant(item) for item in value]}
        if kind is frozenset:
            return {"$frozenset": sorted((self.constant(item) for item in value), key=_c.dumps)}
        if kind is complex:
            return {"$complex": repr(value)}
        if value is Ellipsis:
            return {"$ellipsis": True}
        if kind is slice:
            return {"$slice": [self.constant(value.start), self.constant(value.stop),
                               self.constant(value.step)]}  # fmt: skip
        return _c.encode(value, "a constant")


def identity(function: t.Any) -> tuple[t.Any, tuple[t.Any, ...] | None]:
    """``(tree, snapshot)`` of ``function`` (see the module docs); raises
    :class:`Unrepresentable` naming the value that cannot be represented."""
    walk = _Walk(encode=True)
    tree = walk.callable(function, "the tool's function", 0)
    snapshot = walk.snapshot
    return tree, None if snapshot is None else tuple(snapshot)


def unchanged(function: t.Any, snapshot: tuple[t.Any, ...]) -> bool:
    """True when ``function`` still reads the very objects of ``snapshot``."""
    if (
        len(snapshot) == 3  # a function whose defaults hold no function: the common case
        and type(function) is types.FunctionType
        and function.__closure__ is None
        and function.__kwdefaults__ is None
    ):
        return snapshot[0] is function.__code__ and snapshot[1] is function.__defaults__
    walk = _Walk(encode=False)
    try:
        walk.callable(function, "the tool's function", 0)
    except Unrepresentable:
        return False
    now = walk.snapshot
    if now is None or len(now) != len(snapshot):
        return False
    return all(a is b for a, b in zip(now, snapshot, strict=True))
