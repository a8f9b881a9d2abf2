"""``Advice``: before/after/around/override functions around a tool call, by tool name.

Advice follows Minga's ``Minga.Config.Advice`` (itself after Emacs's
``advice-add``). Each :class:`~nous_tools.Registry` has one table,
``registry.advice``; it wraps the whole executor call (validation, attempts), so a
``before`` can rewrite the arguments before they are validated — and before a
person or an approval handler approves them — and an ``after`` sees the final
``Ok``/``Err``:

>>> from nous_tools import Ok, Registry, Tool
>>> registry = Registry([Tool.from_function(lambda text: text, name="echo", timeout=None)])
>>> registry.advice.register("before", "echo", lambda args: {"text": args["text"].strip()})
>>> registry.advice.register("after", "echo", lambda result: Ok(result.value.upper()))
>>> registry.execute("echo", {"text": "  hi  "})
Ok(value='HI', update=None)
>>> def cached(proceed, args):
...     return "from cache" if args["text"] == "known" else proceed(args)
>>> registry.advice.register("around", "echo", cached)
>>> registry.execute("echo", {"text": "known"}).value
'FROM CACHE'

The four phases:

* ``before(args) -> args``: runs first, in registration order.
* ``after(result) -> result``: runs last, in registration order.
* ``override(args) -> result``: replaces the core call; the last registered wins.
* ``around(proceed, args) -> result``: wraps the call (or the override); the
  first registered is outermost. It may call ``proceed(args)`` or skip it and
  return its own value.

:meth:`Advice.wrap` is value-agnostic, as Minga's ``wrap/2`` is: whatever the core
and the advice return passes through unchanged. The registry, whose core returns
``Ok``/``Err``, turns a bare value from an ``override`` or ``around`` into ``Ok``
(as a tool's return value), and there a ``before`` must return a mapping and an
``after`` an ``Ok``/``Err``, else it is skipped as if it had raised.

A ``before``/``after`` that raises is logged (warning, logger ``nous_tools``) and
skipped: what it got passes through unchanged. After 5 consecutive failures that
function is disabled — the circuit breaker opens — for ``breaker_cooldown``
seconds (default 60; :meth:`Advice.retry_after` says how long is left, and the log
line says it in the words of a rate limit: "retry after 60 s"); then it half-opens:
the next call tries the function again, and a success closes the breaker while a
failure opens it for another cooldown. ``Advice(breaker_cooldown=None)`` keeps it
disabled until :meth:`Advice.reset_breakers` (or :meth:`Advice.reset`, which
removes all advice). A success resets the count. An ``around``/``override``
that raises turns the call into an ``Err(ToolError)`` naming the advice.

When a name has no advice, :meth:`Advice.wrap` returns the core itself, and the
registry pays one dict lookup per call. The full story, with the registry's
approval path, is in ``docs/concepts/advice.md``.
"""

from __future__ import annotations

import collections.abc as c
import inspect
import math
import threading
import time
import typing as t

from nous_tools._engine._admission import retry_text
from nous_tools._util._log import log as _safe_log
from nous_tools.approval import NeedsApproval
from nous_tools.errors import ToolCancelled, ToolError
from nous_tools.results import Err, Ok

__all__ = ["PHASES", "Advice"]

_log = _safe_log

#: The advice phases, in the order they are documented.
PHASES: tuple[str, ...] = ("before", "after", "around", "override")

Phase = t.Literal["before", "after", "around", "override"]

#: Consecutive failures after which a ``before``/``after`` function is disabled.
BREAKER_THRESHOLD = 5

#: Seconds a tripped breaker stays open before it half-opens (``Advice``'s default).
BREAKER_COOLDOWN = 60.0

_ARITY = {"before": 1, "after": 1, "around": 2, "override": 1}
_SHAPE = {
    "before": "(args) -> args",
    "after": "(result) -> result",
    "around": "(proceed, args) -> result",
    "override": "(args) -> result",
}

Core = c.Callable[[t.Any], t.Any]

_RESULT_TYPES = (Ok, Err, NeedsApproval)


def _label(fn: object) -> str:
    """How logs and errors name an advice function: its qualified name, less any
    ``<locals>`` prefix (``Class.method``, ``helper``, ``<lambda>``)."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return type(fn).__name__
    return name.rpartition("<locals>.")[2]


def _check_arity(phase: str, fn: c.Callable[..., t.Any]) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return
    expected = _ARITY[phase]
    P = inspect.Parameter
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is P.empty]
    var_positional = any(p.kind is P.VAR_POSITIONAL for p in params)
    required_keywords = [p for p in params if p.kind is P.KEYWORD_ONLY and p.default is P.empty]
    if (
        len(required) <= expected
        and (var_positional or len(positional) >= expected)
        and not required_keywords
    ):
        return
    plural = "argument" if expected == 1 else "arguments"
    raise ValueError(
        f"Advice '{phase}' functions take {expected} positional {plural} "
        f"{_SHAPE[phase]}; {_label(fn)}{signature} does not"
    )


class _Entry:
    """One registered function and its circuit-breaker state."""

    __slots__ = ("disabled", "failures", "fn", "label", "name", "opened_at", "phase")

    def __init__(self, phase: str, name: str, fn: c.Callable[..., t.Any]) -> None:
        self.phase = phase
        self.name = name
        self.fn = fn
        self.label = _label(fn)
        self.failures = 0
        self.disabled = False  # the breaker is open (or half-open, once the cooldown passed)
        self.opened_at = 0.0  # when it opened, on time.monotonic


class _Chain:
    """The advice of one name, per phase, in registration order. Never mutated."""

    __slots__ = ("after", "around", "before", "override")

    def __init__(
        self,
        before: tuple[_Entry, ...] = (),
        after: tuple[_Entry, ...] = (),
        around: tuple[_Entry, ...] = (),
        override: tuple[_Entry, ...] = (),
    ) -> None:
        self.before = before
        self.after = after
        self.around = around
        self.override = override

    def entries(self, phase: str) -> tuple[_Entry, ...]:
        return t.cast(tuple[_Entry, ...], getattr(self, phase))

    def with_entries(self, phase: str, entries: tuple[_Entry, ...]) -> _Chain | None:
        parts = {p: self.entries(p) for p in PHASES}
        parts[phase] = entries
        if not any(parts.values()):
            return None
        return _Chain(**parts)

    def all(self) -> c.Iterator[_Entry]:
        for phase in PHASES:
            yield from self.entries(phase)


def _as_result(value: object) -> t.Any:
    return value if isinstance(value, _RESULT_TYPES) else Ok(value)


class Advice:
    """A table of advice functions by tool name. Thread-safe.

    Writes (:meth:`register`, :meth:`unregister`, :meth:`reset`) take a lock and
    publish a new table (copy-on-write); :meth:`wrap` and :meth:`advised` read the
    current table without a lock. A call already wrapped keeps the advice it was
    wrapped with.
    """

    #: The valid phases.
    PHASES = PHASES

    def __init__(self, *, breaker_cooldown: float | None = BREAKER_COOLDOWN) -> None:
        if breaker_cooldown is not None and (
            isinstance(breaker_cooldown, bool)
            or not isinstance(breaker_cooldown, (int, float))
            or not breaker_cooldown > 0
            or math.isinf(breaker_cooldown)
        ):
            raise ValueError(
                "Advice option 'breaker_cooldown' must be a number of seconds > 0 or None "
                f"(disabled until reset_breakers()), got {breaker_cooldown!r}"
            )
        #: Seconds a tripped breaker stays open before it half-opens (None: until
        #: :meth:`reset_breakers`).
        self.breaker_cooldown = None if breaker_cooldown is None else float(breaker_cooldown)
        self._lock = threading.Lock()
        # name -> _Chain; a name is present only while it has at least one function.
        self._chains: dict[str, _Chain] = {}

    # -- registration -----------------------------------------------------------

    def register(self, phase: Phase | str, name: str, fn: c.Callable[..., t.Any]) -> None:
        """Add ``fn`` to the ``phase`` advice of the tool called ``name``.

        Raises ``ValueError`` for an unknown phase or a function of the wrong arity
        (``before``/``after``/``override``: 1 positional argument; ``around``: 2),
        ``TypeError`` when ``fn`` is not callable or ``name`` is not a string.
        Registering a function twice runs it twice.
        """
        self._check_phase(phase)
        if not isinstance(name, str) or not name:
            raise TypeError(f"Advice name must be a non-empty str, got {name!r}")
        if not callable(fn):
            raise TypeError(f"Advice functions must be callable, got {type(fn).__name__}")
        _check_arity(phase, fn)
        entry = _Entry(phase, name, fn)
        with self._lock:
            chains = dict(self._chains)
            chain = chains.get(name) or _Chain()
            chains[name] = t.cast(_Chain, chain.with_entries(phase, (*chain.entries(phase), entry)))
            self._chains = chains

    def unregister(self, phase: Phase | str, name: str, fn: c.Callable[..., t.Any]) -> bool:
        """Remove every registration of ``fn`` (compared with ``==``) from ``phase``
        of ``name``; True when something was removed."""
        self._check_phase(phase)
        with self._lock:
            chain = self._chains.get(name)
            if chain is None:
                return False
            kept = tuple(e for e in chain.entries(phase) if not (e.fn is fn or e.fn == fn))
            if len(kept) == len(chain.entries(phase)):
                return False
            chains = dict(self._chains)
            new = chain.with_entries(phase, kept)
            if new is None:
                del chains[name]
            else:
                chains[name] = new
            self._chains = chains
            return True

    def reset(self) -> None:
        """Remove all advice, and with it all circuit-breaker state (Minga's ``reset/0``)."""
        with self._lock:
            self._chains = {}

    def clear(self) -> None:
        """The same as :meth:`reset`."""
        self.reset()

    def reset_breakers(self) -> None:
        """Reset the circuit breaker only: forget every failure count and re-enable every
        disabled function. The registered advice stays."""
        with self._lock:
            for chain in self._chains.values():
                for entry in chain.all():
                    entry.failures = 0
                    entry.disabled = False

    # -- queries ----------------------------------------------------------------

    def advised(self, name: str) -> bool:
        """True when any advice, of any phase, is registered for ``name``."""
        return name in self._chains

    def has_advice(self, phase: Phase | str, name: str) -> bool:
        """True when ``phase`` advice is registered for ``name``."""
        self._check_phase(phase)
        chain = self._chains.get(name)
        return chain is not None and bool(chain.entries(phase))

    def disabled(self, phase: Phase | str, name: str, fn: c.Callable[..., t.Any]) -> bool:
        """True when the circuit breaker has disabled ``fn`` in ``phase`` of ``name``
        (it is open: the next call skips ``fn``; once the cooldown has passed it is
        half-open, and the next call tries ``fn`` again)."""
        return self.retry_after(phase, name, fn) is not None

    def retry_after(
        self, phase: Phase | str, name: str, fn: c.Callable[..., t.Any]
    ) -> float | None:
        """Seconds until the open breaker of ``fn`` in ``phase`` of ``name`` half-opens
        (``math.inf`` with ``breaker_cooldown=None``: until :meth:`reset_breakers`);
        None when ``fn`` is not disabled."""
        self._check_phase(phase)
        chain = self._chains.get(name)
        if chain is None:
            return None
        left: float | None = None
        for entry in chain.entries(phase):
            if (entry.fn is fn or entry.fn == fn) and entry.disabled:
                wait = self._open_for(entry)
                if wait > 0 and (left is None or wait > left):
                    left = wait
        return left

    def _open_for(self, entry: _Entry) -> float:
        """Seconds the disabled ``entry`` stays skipped (0 once it is half-open)."""
        cooldown = self.breaker_cooldown
        if cooldown is None:
            return math.inf
        return max(entry.opened_at + cooldown - time.monotonic(), 0.0)

    def names(self) -> list[str]:
        """The advised names, sorted."""
        return sorted(self._chains)

    # -- running ----------------------------------------------------------------

    def wrap(self, name: str, core: Core) -> Core:
        """Return ``core`` wrapped in the advice of ``name`` — or ``core`` itself when
        ``name`` has no advice.

        Value-agnostic, like Minga's ``wrap/2``: ``core`` may take and return any
        values, and what the advice returns passes through unchanged (an ``around``
        that skips ``proceed`` returns its own value; a ``before`` or ``after`` may
        return anything). Only a raise is caught: a ``before``/``after`` that raises
        is skipped (and counts towards its breaker), an ``around``/``override`` that
        raises makes the result an ``Err(ToolError)``.
        """
        chain = self._chains.get(name)
        if chain is None:
            return core

        def advised(arguments: t.Any) -> t.Any:
            return self._run(chain, name, core, arguments, checked=False, befores=True)

        return advised

    def _wrap_results(self, name: str, core: Core, *, befores: bool = True) -> Core:
        """The registry's :meth:`wrap`, for a core that returns ``Ok``/``Err``: a bare
        value from an ``override`` or ``around`` becomes ``Ok``, a ``before`` must
        return a mapping and an ``after`` an ``Ok``/``Err`` (else it is skipped, as if
        it had raised). ``befores=False`` leaves the befores out (they already ran)."""
        chain = self._chains.get(name)
        if chain is None:
            return core

        def advised(arguments: t.Any) -> t.Any:
            return self._run(chain, name, core, arguments, checked=True, befores=befores)

        return advised

    def _run_befores(self, name: str, arguments: t.Any) -> t.Any:
        """Only the ``before`` advice of ``name`` (checked, as in :meth:`_wrap_results`)."""
        chain = self._chains.get(name)
        if chain is None:
            return arguments
        return self._befores(chain, arguments, checked=True)

    def _befores(self, chain: _Chain, arguments: t.Any, checked: bool) -> t.Any:
        expected = c.Mapping if checked else None
        for entry in chain.before:
            if not entry.disabled or not self._open_for(entry):
                arguments = self._step(entry, arguments, expected, "a mapping of arguments")
        return arguments

    def _run(
        self, chain: _Chain, name: str, core: Core, arguments: t.Any, checked: bool, befores: bool
    ) -> t.Any:
        if befores:
            arguments = self._befores(chain, arguments, checked)
        call = core
        if chain.override:
            call = self._overriding(chain.override[-1], name, checked)
        for entry in reversed(chain.around):
            call = self._surrounding(entry, name, call, checked)
        result = call(arguments)
        expected = _RESULT_TYPES if checked else None
        for entry in chain.after:
            if not entry.disabled or not self._open_for(entry):
                result = self._step(entry, result, expected, "an Ok or Err")
        return result

    def _step(
        self,
        entry: _Entry,
        value: t.Any,
        expected: type[t.Any] | tuple[type[t.Any], ...] | None,
        what: str,
    ) -> t.Any:
        """Run a ``before``/``after``; on failure, log, count and pass ``value`` through."""
        try:
            new = entry.fn(value)
        except (KeyboardInterrupt, ToolCancelled):
            raise
        except Exception as exc:
            _log.warning(
                "Advice %s %s for tool '%s' raised %s; skipped",
                entry.phase,
                entry.label,
                entry.name,
                type(exc).__name__,
            )
            _log.debug("Advice %s %s failure", entry.phase, entry.label, exc_info=True)
            self._failed(entry)
            return value
        if expected is not None and not isinstance(new, expected):
            _log.warning(
                "Advice %s %s for tool '%s' returned %s, expected %s; skipped",
                entry.phase,
                entry.label,
                entry.name,
                type(new).__name__,
                what,
            )
            self._failed(entry)
            return value
        if entry.failures:
            with self._lock:  # a success closes the breaker (a half-open one too)
                entry.failures = 0
                entry.disabled = False
        return new

    def _failed(self, entry: _Entry) -> None:
        with self._lock:
            entry.failures += 1
            trip = entry.failures >= BREAKER_THRESHOLD
            again = entry.disabled  # a half-open breaker's trial failed: open again
            if trip:
                entry.disabled = True
                entry.opened_at = time.monotonic()
        if trip:
            cooldown = self.breaker_cooldown
            _log.warning(
                "Advice %s %s for tool '%s' failed %s; disabled, %s",
                entry.phase,
                entry.label,
                entry.name,
                "again after its cooldown" if again else f"{BREAKER_THRESHOLD} times in a row",
                "until reset_breakers()" if cooldown is None else f"{retry_text(cooldown)}",
            )

    @staticmethod
    def _error(entry: _Entry, name: str, exc: Exception) -> Err:
        _log.warning(
            "Advice %s %s for tool '%s' raised %s; the call fails",
            entry.phase,
            entry.label,
            name,
            type(exc).__name__,
        )
        try:
            text = str(exc)
        except Exception:
            text = "<str() raised>"
        return Err(
            ToolError(
                f"Advice {entry.phase} {entry.label} for tool '{name}' raised "
                f"{type(exc).__name__}: {text}",
                tool_name=name,
                original_error=exc,
            )
        )

    def _overriding(self, entry: _Entry, name: str, to_result: bool) -> Core:
        fn = entry.fn

        def override(arguments: t.Any) -> t.Any:
            try:
                value = fn(arguments)
                return _as_result(value) if to_result else value
            except (KeyboardInterrupt, ToolCancelled):
                raise
            except Exception as exc:
                return self._error(entry, name, exc)

        return override

    def _surrounding(self, entry: _Entry, name: str, proceed: Core, to_result: bool) -> Core:
        fn = entry.fn

        def around(arguments: t.Any) -> t.Any:
            try:
                value = fn(proceed, arguments)
                return _as_result(value) if to_result else value
            except (KeyboardInterrupt, ToolCancelled):
                raise
            except Exception as exc:
                return self._error(entry, name, exc)

        return around

    @staticmethod
    def _check_phase(phase: object) -> None:
        if not isinstance(phase, str) or phase not in _ARITY:
            raise ValueError(
                f"Advice phase must be one of {', '.join(repr(p) for p in PHASES)}, got {phase!r}"
            )

    def __repr__(self) -> str:
        return f"<Advice names={self.names()!r}>"
