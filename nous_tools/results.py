"""Result values: ``Ok`` and ``Err``.

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

For a type checker, ``execute`` of a ``Tool[P, R]`` returns ``Ok[R] | Err[ToolError]``:
``.unwrap()`` is the value (an ``Err`` raises its reason) and ``.unwrap_err()`` the
reason (an ``Ok`` raises ``ValueError``), both typed, without narrowing first:

>>> Ok(42).unwrap(), Err(ValueError("boom")).unwrap_err()
(42, ValueError('boom'))

:data:`Result` is ``Ok | Err``, what running a tool gives. A call that needs a
person's approval first gives neither: the registry answers a
:class:`~nous_tools.NeedsApproval` (``nous_tools.approval``, a layer above the
values), so the types of the calls where approval can happen spell it out,
``Ok[R] | Err[ToolError] | NeedsApproval`` (``Registry.execute``), and no union of
the three lives here:

>>> from nous_tools import NeedsApproval, Registry, Tool
>>> pending = Registry([Tool.from_function(lambda: 1, name="f", approval="ask")]).execute("f", {})
>>> isinstance(pending, (Ok, Err)), isinstance(pending, NeedsApproval), pending.is_ok()
(False, True, False)
"""

from __future__ import annotations

import typing as t

import attrs

from nous_tools.errors import ToolError

if t.TYPE_CHECKING:
    from nous_tools.context_update import ContextUpdate

__all__ = ["Err", "Ok", "Result"]

T = t.TypeVar("T")
#: The type of an ``Err``'s reason: ``Err[ToolError]`` for what the executor
#: reports; a bare ``Err`` is ``Err[Any]``.
if t.TYPE_CHECKING:
    from typing_extensions import TypeVar

    E = TypeVar("E", default=t.Any)
else:
    # typing's at run time: the defaults are for type checkers, and importing
    # typing_extensions would cost every program's start-up.
    E = t.TypeVar("E")


@attrs.frozen(slots=True)
class Ok(t.Generic[T]):
    """A successful call: its ``value`` and an optional :class:`ContextUpdate`,
    ``update``, to apply to the run's ``deps``."""

    value: T
    update: ContextUpdate | None = None

    def is_ok(self) -> t.Literal[True]:
        """Always True."""
        return True

    def unwrap(self) -> T:
        """Return the value."""
        return self.value

    def unwrap_err(self) -> t.NoReturn:
        """Raise ``ValueError``: an ``Ok`` has no reason (see :meth:`Err.unwrap_err`)."""
        raise ValueError("unwrap_err() on an Ok: the call succeeded")


@attrs.frozen(slots=True)
class Err(t.Generic[E]):
    """A failed call. ``reason`` is what went wrong: a :class:`ToolError` (or one of
    its subclasses) for every failure the executor reports, or what a tool put in the
    ``Err`` it returned itself."""

    reason: E

    def is_ok(self) -> t.Literal[False]:
        """Always False."""
        return False

    def unwrap(self) -> t.NoReturn:
        """Raise the reason (or a :class:`ToolError` wrapping a reason that is not an exception)."""
        if isinstance(self.reason, BaseException):
            raise self.reason
        raise ToolError(str(self.reason), original_error=self.reason)

    def unwrap_err(self) -> E:
        """Return the reason (on an ``Ok``, the same call raises ``ValueError``)."""
        return self.reason


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


Result = t.Union[Ok[t.Any], Err]  # noqa: UP007  (a runtime alias)
"""What running a tool gives: ``Ok`` or ``Err`` (to test a value:
``isinstance(x, (Ok, Err))``)."""
