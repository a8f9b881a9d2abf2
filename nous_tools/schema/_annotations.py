"""Reading a function: its signature (remembered while the function stays the
same) and its annotations, resolved where they can be (a name that cannot be
resolved yet stays a string). Nothing here calls the function.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import types
import typing as t
import weakref

#: The kinds of parameter a positional argument (the ``RunContext``) can fill.
POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def signature_of(fn: t.Callable[..., t.Any]) -> inspect.Signature:
    """``inspect.signature(fn)``, remembered for a plain function while its code,
    defaults and annotations stay the same (making a tool reads it more than once,
    and tools often share a function)."""
    if (
        not isinstance(fn, types.FunctionType)
        or "__wrapped__" in vars(fn)
        or "__signature__" in vars(fn)
    ):
        return inspect.signature(fn)
    marks = (fn.__code__, fn.__defaults__, fn.__kwdefaults__, fn.__annotations__)
    known = _SIGNATURES.get(fn)
    if known is not None and all(a is b for a, b in zip(known[0], marks, strict=True)):
        return known[1]
    signature = inspect.signature(fn)
    _SIGNATURES[fn] = (marks, signature)
    return signature


_SIGNATURES: weakref.WeakKeyDictionary[
    types.FunctionType, tuple[tuple[object, ...], inspect.Signature]
] = weakref.WeakKeyDictionary()


def resolved_annotations(fn: object) -> dict[str, t.Any]:
    """Resolved annotations of the function behind ``fn``; unresolvable ones stay strings.

    Remembered per function (a tool per server tool, say, share one): a function's
    annotations are resolved once, unless some could not be resolved yet (a class
    defined later in its module), which are tried again next time."""
    target = _annotation_source(fn)
    try:
        known = _RESOLVED.get(target)
    except TypeError:  # not weakly referable, or unhashable
        known = None
    if known is not None and known[0] is getattr(target, "__annotations__", None):
        return dict(known[1])
    try:
        hints = dict(t.get_type_hints(target, include_extras=True))
    except Exception:  # any error in user annotations: fall back to resolving one by one
        pass
    else:
        if not any(isinstance(hint, (str, t.ForwardRef)) for hint in hints.values()):
            with contextlib.suppress(TypeError):
                _RESOLVED[target] = (getattr(target, "__annotations__", None), hints)
        return hints
    try:
        raw = dict(getattr(target, "__annotations__", None) or {})
    except Exception:
        return {}
    namespace = globals_of(target)
    return {name: resolve(annotation, namespace) for name, annotation in raw.items()}


#: Resolved annotations by function, with the ``__annotations__`` they came from.
_RESOLVED: weakref.WeakKeyDictionary[object, tuple[object, dict[str, t.Any]]] = (
    weakref.WeakKeyDictionary()
)


def _annotation_source(fn: object) -> object:
    """The object whose ``__annotations__`` describe ``fn``'s parameters."""
    target = unwrap_partial(fn)
    if inspect.isclass(target):
        init = getattr(target, "__init__", None)
        if init is not None and init is not object.__init__:
            return init
        return getattr(target, "__new__", target)
    if inspect.isroutine(target):
        return target
    call = inspect.getattr_static(type(target), "__call__", None)
    return call if call is not None else target


def unwrap_partial(fn: object) -> object:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def globals_of(target: object) -> dict[str, t.Any]:
    """The names ``target``'s string annotations may refer to: its module's globals,
    then its own ``__globals__`` (generated methods, e.g. attrs', have a private one)."""
    try:
        unwrapped = inspect.unwrap(target)  # type: ignore[arg-type]
    except ValueError:  # a __wrapped__ cycle
        unwrapped = target
    module = sys.modules.get(getattr(unwrapped, "__module__", None) or "")
    namespace = dict(vars(module)) if module is not None else {}
    own = getattr(unwrapped, "__globals__", None)
    if isinstance(own, dict):
        namespace.update(own)
    return namespace


def resolve(annotation: object, namespace: dict[str, t.Any]) -> t.Any:
    """``annotation`` evaluated when it is a string and can be; else as it is."""
    if isinstance(annotation, t.ForwardRef):
        annotation = annotation.__forward_arg__
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, namespace)  # what typing.get_type_hints does, too
    except Exception:
        return annotation


def describe_function(fn: object) -> str:
    target = unwrap_partial(fn)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    return f"Tool function {name!r}" if isinstance(name, str) else f"Tool function {fn!r}"
