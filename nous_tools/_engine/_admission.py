"""Per-tool limits: admission control and the size of a result's text (private).

What users see are the options — ``Tool(max_concurrency=, rate_limit=,
max_calls_per_run=, max_result_chars=, on_result_overflow=)``,
``ToolExecutor(max_result_chars=, limits_storage=, rate_limit_strategy=)`` and the
batch cap ``max_concurrency=`` — and the errors :class:`~nous_tools.RateLimited`
and :class:`~nous_tools.ResultTooLarge`; ``docs/concepts/limits.md`` tells the
rules. Here:

- :func:`tool_limits` (from ``nous_tools._util._rates``): a tool's limits, read
  once when the tool is made. A tool without any has None, and the executor pays
  one ``is None`` check for it.
- :class:`Admission`: one executor's books — a queue of slots per tool name for
  ``max_concurrency`` (first come, first served), the ``limits`` library's rate
  limiter for ``rate_limit``
  (in memory, or in a shared storage such as Redis), the counts of
  ``max_calls_per_run``.
- :func:`clip_text`: a result's model-facing text kept to ``max_result_chars``,
  head and tail, with a notice in the middle.

The ``limits`` library takes about as long to import as the rest of the package:
it is imported when the first tool with a ``rate_limit`` is made, or the first
executor with a ``limits_storage``.
"""

from __future__ import annotations

import collections
import contextvars
import functools
import math
import queue
import threading
import time
import typing as t

from nous_tools import signals as _signals
from nous_tools._util._clock import monotonic
from nous_tools._util._log import log as _log
from nous_tools._util._rates import NAMESPACE, ToolLimits, need_limits, tool_limits
from nous_tools._util._scope import here
from nous_tools._util._text import DEFAULT_MAX_RESULT_CHARS, clip_text
from nous_tools.errors import RateLimited, ResultTooLarge, ToolError
from nous_tools.results import Err

if t.TYPE_CHECKING:
    from limits import RateLimitItem
    from limits.storage import Storage
    from limits.strategies import RateLimiter

    from nous_tools.run_context import RunContext
    from nous_tools.tool import Tool


__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "EXECUTOR",
    "STRATEGIES",
    "Admission",
    "ToolLimits",
    "clip_text",
    "result_limit",
    "retry_text",
    "tool_limits",
]

#: ``Tool(max_result_chars=...)``'s default: the executor's limit applies.
EXECUTOR = "executor"

#: The ``limits`` library's strategies ``ToolExecutor(rate_limit_strategy=...)`` takes.
STRATEGIES = ("fixed-window", "moving-window", "sliding-window-counter")

#: How long a shared storage keeps a run's ``max_calls_per_run`` count (seconds).
RUN_BUDGET_SECONDS = 24 * 3600

#: How many (tool, run) counts of ``max_calls_per_run`` an executor keeps in memory;
#: past that the oldest run's count is forgotten.
RUNS_REMEMBERED = 100_000

_send = _signals.send
_rate_limited = _signals.tool_rate_limited


# -- a tool's limits -------------------------------------------------------------------


# ToolLimits, tool_limits and parse_rate are values a Tool keeps
# (nous_tools._util._rates): Tool reads them when it is made.


def result_limit(tool: object, default: int | None) -> int | None:
    """The ``max_result_chars`` that applies to ``tool``: its own, or ``default`` (the
    executor's) when it says ``"executor"`` (or is not a tool)."""
    own = getattr(tool, "max_result_chars", EXECUTOR)
    return default if own == EXECUTOR else t.cast("int | None", own)


# -- the words a model reads -----------------------------------------------------------


def seconds_text(seconds: float) -> str:
    """``seconds`` rounded up for a model: whole seconds from 10 s, else tenths."""
    if seconds >= 10:
        return f"{math.ceil(seconds):,}"
    return f"{max(math.ceil(round(seconds * 10, 6)) / 10, 0.1):g}"


def retry_text(seconds: float | None) -> str:
    """``"retry after 12 s"``, or ``"retry later"`` when the time is not known."""
    if seconds is None:
        return "retry later"
    return f"retry after {seconds_text(seconds)} s"


def _calls(n: int) -> str:
    return "1 call" if n == 1 else f"{n:,} calls"


def option_text(seconds: float) -> str:
    """A number of seconds as an option set it, never rounded: ``1.5``, ``30``, ``0.25``."""
    if float(seconds).is_integer():
        return f"{int(seconds):,}"
    return repr(float(seconds))


def _measured_text(seconds: float) -> str:
    """A measured time, to a hundredth: ``1.23``, ``0.3``, ``2``."""
    return f"{seconds:,.2f}".rstrip("0").rstrip(".")


def no_slot_text(tool: Tool, cap: int, until: str | None) -> str:
    """What a call that got no ``max_concurrency`` slot is told. ``until``: what
    ended its wait — ``"timeout"`` (its own: the number named is the option's),
    ``"outer"`` (the deadline of the call it was made in, which came first), or
    None (it did not wait: see :meth:`Admission.slot`)."""
    if until == "timeout":
        why = (
            f"no slot came free within its timeout of {option_text(t.cast(float, tool.timeout))} s"
        )
    elif until == "outer":
        why = "no slot came free before the deadline of the call it was made in"
    else:
        why = (
            "none was free (a call that holds another tool's slot and has no timeout does not wait)"
        )
    return (
        f"rate limited: '{tool.name}' allows {_calls(cap)} at once (max_concurrency={cap}), "
        f"and {why}; retry later"
    )


def waited_text(tool: Tool, slot: Slot) -> str:
    """What an attempt that waited for its slot, then timed out, is told: both times,
    which add up to its timeout (or to an enclosing call's deadline, which came first)."""
    waited = round(t.cast(float, slot.waited), 2)
    ran = max(round(t.cast(float, slot.span) - waited, 2), 0.0)
    timeout = tool.timeout
    if slot.own and timeout is not None:
        end = f" (its timeout of {option_text(timeout)} s counts the wait)"
    else:
        end = ", at the deadline of the call it was made in"
    return (
        f"Tool '{tool.name}' waited {_measured_text(waited)} s for a slot "
        f"(max_concurrency={tool.max_concurrency}), then timed out after "
        f"{_measured_text(ran)} s of running{end}"
    )


def rate_text(item: RateLimitItem) -> str:
    """``"10 calls a minute"``, ``"1 call an hour"``, ``"100 calls per 5 minutes"``."""
    unit = item.GRANULARITY.name
    if item.multiples == 1:
        per = f"an {unit}" if unit == "hour" else f"a {unit}"
    else:
        per = f"per {item.multiples} {unit}s"
    return f"{_calls(item.amount)} {per}"


# -- the executor's books --------------------------------------------------------------

#: The tools whose ``max_concurrency`` slot the running call (and the calls it is
#: nested in) holds: a nested call of one of them runs under that slot.
_HELD: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "nous_tools_held_slots", default=()
)

#: One free slot in a tool's queue of slots.
_TOKEN = object()


class _Slots:
    """A tool's ``max_concurrency`` slots, granted first come, first served.

    ``free`` holds a token per free slot, and an attempt that finds one takes it
    without a lock of ours (C code: the path of every attempt of such a tool).
    One that finds none queues in ``waiters`` (under ``lock``) and sleeps on a lock
    of its own, which is released when a slot is handed to it. A slot given back
    while anyone waits goes straight to the first of them, never through
    ``free``: a newcomer cannot take it past them. So tokens are in ``free`` only
    while nobody waits, and a call that queued before a slot was given back gets
    one before any call that came after it.
    """

    __slots__ = ("cap", "free", "lock", "waiters")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.free: queue.SimpleQueue[object] = queue.SimpleQueue()
        for _ in range(cap):
            self.free.put(_TOKEN)
        self.lock = threading.Lock()
        self.waiters: collections.deque[threading.Lock] = collections.deque()

    def wait(self, name: str, began: float, deadline: float | None) -> float | None:
        """Queue for a slot (the caller found none free at ``began``) and wait for it
        until ``deadline`` (None: as long as it takes); the time it was granted, on
        the monotonic clock, or None when none came free before the deadline (the
        call then holds none and has left the queue)."""
        me = threading.Lock()
        me.acquire()
        with self.lock:
            self.waiters.append(me)
            ahead = len(self.waiters) - 1
            self._drain()  # a slot given back as this call queued
        _log.debug(
            "Tool '%s' waits for a slot (max_concurrency=%d), %d call(s) ahead of it",
            name,
            self.cap,
            ahead,
        )
        try:
            if deadline is None:
                granted = me.acquire()
            else:
                granted = me.acquire(True, min(max(deadline - began, 0.0), threading.TIMEOUT_MAX))
            now = monotonic()
        except BaseException:  # Ctrl-C: leave the queue, pass on a slot granted meanwhile
            self._leave(me)
            raise
        if granted and (deadline is None or now < deadline):
            return now
        self._leave(me)  # granted too late to run is not granted: the next one gets it
        return None

    def give_back(self) -> None:
        """Free a slot: to the first call in the queue, else into ``free``."""
        if self.waiters:
            with self.lock:
                self._pass_on()
            return
        self.free.put(_TOKEN)
        if self.waiters:  # a call queued as the token went back, having found none
            with self.lock:
                self._drain()

    def _leave(self, me: threading.Lock) -> None:
        """A waiter leaves the queue; the slot it was granted, if any, goes on."""
        with self.lock:
            try:
                self.waiters.remove(me)
            except ValueError:  # not in the queue: it was granted a slot
                self._pass_on()

    def _pass_on(self) -> None:
        """(``lock`` held) A free slot to the first waiter, else into ``free``."""
        if self.waiters:
            self.waiters.popleft().release()
        else:
            self.free.put(_TOKEN)

    def _drain(self) -> None:
        """(``lock`` held) The tokens in ``free`` to the first waiters, in order."""
        waiters = self.waiters
        while waiters:
            try:
                self.free.get(False)
            except queue.Empty:
                return
            waiters.popleft().release()


class Slot:
    """A ``max_concurrency`` slot held by an attempt: :meth:`release` it after.

    When the attempt had to wait for it: ``deadline``, the attempt's (the wait
    counts towards it); ``waited``, the seconds it waited; ``span``, the seconds
    from the start of the wait to the deadline; ``own``, whether that deadline is
    the tool's own timeout (not an enclosing call's, which came first). Else None.
    """

    __slots__ = ("deadline", "own", "slots", "span", "token", "waited")

    def __init__(
        self,
        slots: _Slots | None,
        token: contextvars.Token[tuple[str, ...]] | None,
        deadline: float | None = None,
        waited: float | None = None,
        span: float | None = None,
        own: bool = True,
    ) -> None:
        self.slots = slots
        self.token = token
        self.deadline = deadline
        self.waited = waited
        self.span = span
        self.own = own

    def release(self) -> None:
        if self.token is not None:
            _HELD.reset(self.token)
        if self.slots is not None:
            self.slots.give_back()


#: What a nested call of a tool whose slot an enclosing call holds gets.
_REENTERED = Slot(None, None)


class Admission:
    """One executor's books of limits: see the module docstring.

    ``storage``: None (rates counted in this executor's memory, budgets in a dict),
    or a ``limits`` storage URI (``"redis://host:6379"``) or storage object, which
    then holds the rates and the budgets of every executor that uses it.
    """

    def __init__(self, storage: object, strategy: object) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(
                "ToolExecutor option 'rate_limit_strategy' must be one of "
                f"{', '.join(repr(s) for s in STRATEGIES)}, got {strategy!r}"
            )
        self._strategy: str = strategy
        self._fixed = strategy == "fixed-window"
        self._lock = threading.Lock()
        # A tool name's slots (its cap, its free slots and the calls waiting for one).
        self._slots: dict[str, _Slots] = {}
        self._budgets: collections.OrderedDict[tuple[str, str], int] = collections.OrderedDict()
        self._limiter: RateLimiter | None = None
        self._storage: Storage | None = None
        self._rate_lock: threading.Lock | None = None
        self.shared = storage is not None
        if storage is not None:
            self._storage = _make_storage(storage)
            self._limiter = _make_limiter(self._storage, self._strategy)

    @property
    def storage(self) -> Storage | None:
        """The shared ``limits`` storage, or None (counted in this executor)."""
        return self._storage

    # -- rate_limit and max_calls_per_run: once per call, before the first attempt

    def admit(
        self, tool: Tool, limits: ToolLimits, ctx: RunContext[t.Any], call_id: str | None
    ) -> Err | None:
        """None when the call may start, else the ``Err`` it gets (``RateLimited``, or
        a ``ToolError`` when a shared storage cannot be reached: the call does not run)."""
        budget = limits.max_calls_per_run
        run_id = ctx.run_id if budget is not None else None
        name = tool.name
        try:
            if run_id is not None and self._used(name, run_id) >= t.cast(int, budget):
                return self._over_budget(tool, t.cast(int, budget), call_id)
            rates = limits.rates
            if rates is not None:
                over = self._hit(name, rates)
                if over is not None:
                    item, retry_after = over
                    return self.refuse(
                        tool,
                        "rate_limit",
                        retry_after,
                        f"rate limited: '{name}' allows {rate_text(item)}; {retry_text(retry_after)}",
                        call_id,
                    )
            if run_id is not None and not self._spend(name, run_id, t.cast(int, budget)):
                return self._over_budget(tool, t.cast(int, budget), call_id)
        except Exception as exc:  # a shared storage that is down: fail closed
            return self._unavailable(tool, exc)
        return None

    def _over_budget(self, tool: Tool, budget: int, call_id: str | None) -> Err:
        return self.refuse(
            tool,
            "max_calls_per_run",
            None,
            f"rate limited: '{tool.name}' has its budget of {_calls(budget)} per run used up; "
            "do not call it again in this run",
            call_id,
        )

    def _unavailable(self, tool: Tool, exc: Exception) -> Err:
        _log.error(
            "Tool '%s' was not run: its limits could not be checked (%s)",
            tool.name,
            type(exc).__name__,
            exc_info=True,
        )
        return Err(
            ToolError(
                f"Tool '{tool.name}' was not run: its limits could not be checked "
                f"({type(exc).__name__})",
                tool_name=tool.name,
                original_error=exc,
            )
        )

    def _limiter_now(self) -> RateLimiter:
        """The rate limiter, made on first use (in memory: no storage was given)."""
        with self._lock:
            if self._limiter is None:
                self._rate_lock = threading.Lock()
                self._limiter = _make_limiter(_memory_storage(self._strategy), self._strategy)
            return self._limiter

    def _hit(
        self, name: str, rates: tuple[tuple[RateLimitItem, str, int, int], ...]
    ) -> tuple[RateLimitItem, float] | None:
        """Take one call from each rate of ``name``; the rate that refused it and the
        seconds until its window lets a call through, or None."""
        limiter = self._limiter
        if limiter is None:
            limiter = self._limiter_now()
        lock = self._rate_lock  # in memory: the storage's own locking has gaps
        for item, key, expiry, amount in rates:
            if self._fixed:  # FixedWindowRateLimiter.hit, with the key made once
                if lock is None:
                    allowed = limiter.storage.incr(key, expiry) <= amount
                else:
                    with lock:
                        allowed = limiter.storage.incr(key, expiry) <= amount
            elif lock is None:
                allowed = limiter.hit(item, NAMESPACE, name)
            else:
                with lock:
                    allowed = limiter.hit(item, NAMESPACE, name)
            if not allowed:
                reset = limiter.get_window_stats(item, NAMESPACE, name).reset_time
                return item, min(max(reset - time.time(), 0.001), float(expiry))
        return None

    def _used(self, name: str, run_id: str) -> int:
        storage = self._storage
        if storage is not None:
            return int(storage.get(_budget_key(name, run_id)))
        with self._lock:
            return self._budgets.get((name, run_id), 0)

    def _spend(self, name: str, run_id: str, budget: int) -> bool:
        """Count one call of ``name`` in run ``run_id``; False when that is over ``budget``."""
        storage = self._storage
        if storage is not None:
            return storage.incr(_budget_key(name, run_id), RUN_BUDGET_SECONDS) <= budget
        key = (name, run_id)
        budgets = self._budgets
        with self._lock:
            used = budgets.get(key, 0)
            if used >= budget:
                return False
            budgets[key] = used + 1
            budgets.move_to_end(key)
            if len(budgets) > RUNS_REMEMBERED:
                budgets.popitem(last=False)
        return True

    # -- max_concurrency: once per attempt

    def slot(self, tool: Tool, cap: int, call_id: str | None) -> Slot | Err:
        """A slot of ``tool`` for one attempt, waiting for one until the attempt's
        deadline (its ``timeout`` from now, never later than an enclosing attempt's;
        a tool without either waits as long as it takes); the ``Err`` when none
        came free. Calls that wait get their slots in the order they came.

        A call nested in a call that holds a slot of the same tool runs under that
        slot (a tool that calls itself never waits for itself). A call that holds a
        slot of another tool and has no deadline does not wait: waiting there could
        close a cycle of calls each waiting for the other's slot, for ever.
        """
        name = tool.name
        held = _HELD.get()
        if name in held:
            return _REENTERED
        slots = self._free(name, cap)
        try:
            slots.free.get(False)
        except queue.Empty:
            return self._queue(tool, slots, held, call_id)
        return Slot(slots, _HELD.set((*held, name)))

    def _queue(
        self, tool: Tool, slots: _Slots, held: tuple[str, ...], call_id: str | None
    ) -> Slot | Err:
        """:meth:`slot` when none is free: wait in the queue until the deadline."""
        began = monotonic()
        timeout = tool.timeout
        deadline = None if timeout is None else began + timeout
        own = True
        scope = here.scope
        outer = scope.deadline if scope is not None else None
        if outer is not None and (deadline is None or outer < deadline):
            deadline, own = outer, False  # nested: never later than the enclosing attempt's
        granted = None
        if deadline is not None or not held:
            granted = slots.wait(tool.name, began, deadline)
        if granted is None:
            until = None if deadline is None else "timeout" if own else "outer"
            return self.refuse(
                tool, "max_concurrency", None, no_slot_text(tool, slots.cap, until), call_id
            )
        span = None if deadline is None else deadline - began
        token = _HELD.set((*held, tool.name))
        return Slot(slots, token, deadline, granted - began, span, own)

    def _free(self, name: str, cap: int) -> _Slots:
        """The slots of the tool ``name`` (made on first use)."""
        found = self._slots.get(name)
        if found is not None and found.cap == cap:
            return found
        with self._lock:
            found = self._slots.get(name)
            if found is None or found.cap != cap:  # a new tool of that name, another cap
                found = _Slots(cap)
                self._slots[name] = found
            return found

    # -- refusals

    @staticmethod
    def refuse(
        tool: Tool, limit: str, retry_after: float | None, message: str, call_id: str | None
    ) -> Err:
        """The ``Err(RateLimited)`` of a refused call, its log line and its signal."""
        _log.warning("Tool '%s' was not run: over its %s", tool.name, limit)
        if _rate_limited.receivers:
            metadata: dict[str, t.Any] = {"tool_name": tool.name, "limit": limit}
            if call_id is not None:
                metadata["call_id"] = call_id
            _send(_rate_limited, tool, {"retry_after": retry_after}, metadata)
        return Err(RateLimited(message, tool_name=tool.name, limit=limit, retry_after=retry_after))


def _budget_key(name: str, run_id: str) -> str:
    return f"{NAMESPACE}/max_calls_per_run/{name}/{run_id}"


def _make_storage(value: object) -> Storage:
    """A ``limits`` storage from a URI or a storage object; ``ValueError``/``TypeError``
    naming the option when it cannot be one."""
    need_limits("ToolExecutor option 'limits_storage'")
    import limits.errors
    import limits.storage

    if isinstance(value, limits.storage.Storage):
        return value
    if not isinstance(value, str):
        raise TypeError(
            "ToolExecutor option 'limits_storage' must be a storage URI ('redis://host:6379', "
            f"'memcached://host:11211', 'memory://') or a limits Storage, got {type(value).__name__}"
        )
    try:
        storage = limits.storage.storage_from_string(value)
    except limits.errors.ConfigurationError as exc:
        raise ValueError(
            f"ToolExecutor option 'limits_storage' {value!r} cannot be used: {exc} "
            "(for Redis: pip install 'nous-tools[redis]')"
        ) from None
    if not isinstance(storage, limits.storage.Storage):  # an async+... URI
        raise ValueError(
            f"ToolExecutor option 'limits_storage' {value!r} is an asynchronous storage; "
            "give the synchronous one (without 'async+')"
        )
    return storage


def _memory_storage(strategy: str) -> Storage:
    """The ``limits`` in-memory storage of an executor's rates.

    For the fixed window (the default) without its expiry thread: ``MemoryStorage``
    restarts a timer thread every 10 ms while it is hit, to drop expired counters,
    and a thread start on the path of a call costs more than the rest of a
    limited call (a tenth of a timed call on a busy machine). A fixed window needs
    none of it: ``incr`` reads its counter through ``get``, which drops it when its
    window has passed. The other strategies keep lists the timer trims, and keep it.
    """
    from limits.storage import MemoryStorage

    if strategy != "fixed-window":
        return MemoryStorage()
    return _fixed_window_memory()()


@functools.cache
def _fixed_window_memory() -> type[Storage]:
    from limits.storage import MemoryStorage

    class FixedWindowMemory(MemoryStorage):
        def _MemoryStorage__schedule_expiry(self) -> None:  # the base's (mangled) name
            pass

    return FixedWindowMemory


def _make_limiter(storage: Storage, strategy: str) -> RateLimiter:
    from limits.strategies import STRATEGIES as known

    try:
        return known[strategy](storage)
    except NotImplementedError:
        raise ValueError(
            f"ToolExecutor option 'rate_limit_strategy' {strategy!r} is not supported by "
            f"the storage {type(storage).__name__}"
        ) from None


# -- results -------------------------------------------------------------------------


def overflow(tool: Tool, result: object, limit: int | None) -> Err | None:
    """``Err(ResultTooLarge)`` when the model-facing text of ``result`` is longer than
    ``limit`` (for a tool with ``on_result_overflow="error"``), else None."""
    if limit is None:
        return None
    from nous_tools._rendering import format_tool_result

    size = len(format_tool_result(t.cast(t.Any, result), tool.name, max_chars=None))
    if size <= limit:
        return None
    _log.warning("Tool '%s' returned a result over its max_result_chars", tool.name)
    return Err(ResultTooLarge(tool_name=tool.name, size=size, limit=limit))
