"""What crosses to a remote engine's worker (``nous_tools._engine._remote``, issue 16),
checked in one process: the deadline travels as wall-clock time, ``ctx.cancelled``
is set by the clock, and what cannot be sent is named."""

from __future__ import annotations

import threading
import time

import pytest

from nous_tools import RunContext, Tool
from nous_tools._engine._isolation import UNPICKLABLE, Unpicklable
from nous_tools._engine._pool import RAISED, RETURNED, TIMED_OUT
from nous_tools._engine._remote import DeadlineEvent, decode, encode, run
from nous_tools._util._clock import monotonic

cloudpickle = pytest.importorskip("ray.cloudpickle")


def seen(ctx: RunContext, n: int) -> tuple[int, int, float | None, bool]:
    return n, ctx.retry, ctx.time_left(), ctx.cancelled.is_set()


def raises(n: int) -> None:
    raise KeyError(n)


def test_the_attempt_round_trips_with_its_retry_and_deadline() -> None:
    tool = Tool.from_function(seen, timeout=10)
    deadline = monotonic() + 10
    ctx = RunContext(deps={"a": 1}, retry=2, deadline=deadline)
    kind, value = decode(run(encode(tool, {"n": 5}, ctx, deadline, engine="Celery")))
    assert kind == RETURNED
    n, retry, left, cancelled = value
    assert (n, retry, cancelled) == (5, 2, False)
    assert left is not None and 9.0 < left <= 10.0


def test_an_exception_comes_back_with_its_remote_traceback() -> None:
    tool = Tool.from_function(raises, timeout=10)
    kind, value = decode(run(encode(tool, {"n": 5}, None, monotonic() + 10, engine="Celery")))
    assert kind == RAISED and isinstance(value, KeyError)
    assert "raises" in str(value.__cause__)


def test_an_attempt_that_arrives_after_its_deadline_is_not_run() -> None:
    calls: list[int] = []
    tool = Tool.from_function(seen, timeout=10)
    request = encode(tool, {"n": 1}, None, monotonic() + 0.05, engine="Celery")
    time.sleep(0.1)
    assert decode(run(request)) == (TIMED_OUT, None)
    assert calls == []


def test_a_closure_needs_a_pickler_that_sends_it_by_value() -> None:
    factor = 3

    def times(n: int) -> int:
        return n * factor

    tool = Tool.from_function(times, timeout=10)
    with pytest.raises(Unpicklable, match="module-level function"):
        encode(tool, {"n": 2}, None, monotonic() + 10, engine="Celery")
    request = encode(
        tool, {"n": 2}, None, monotonic() + 10, engine="Ray", by_value=cloudpickle.dumps
    )
    assert decode(run(request, cloudpickle.dumps)) == (RETURNED, 6)


def test_an_argument_or_deps_that_cannot_be_pickled_is_named() -> None:
    tool = Tool.from_function(seen, timeout=10)
    with pytest.raises(Unpicklable, match="the argument 'n'"):
        encode(tool, {"n": threading.Lock()}, None, monotonic() + 10, engine="Celery")
    ctx = RunContext(deps={"lock": threading.Lock()})
    with pytest.raises(Unpicklable, match="the context's deps"):
        encode(tool, {"n": 1}, ctx, monotonic() + 10, engine="Celery")


def test_a_function_the_worker_cannot_load_is_named_in_the_reply() -> None:
    tool = Tool.from_function(seen, timeout=10)
    request = encode(tool, {"n": 1}, None, monotonic() + 10, engine="Celery")
    broken = request.replace(b"test_remote_framing", b"xest_remote_framing")  # same length
    kind, message = decode(run(broken))
    assert kind == UNPICKLABLE and "could not be loaded on the worker" in message


def test_the_deadline_event_reads_as_set_from_the_deadline_on() -> None:
    event = DeadlineEvent(monotonic() + 0.2)
    assert not event.is_set()
    assert event.wait(0.01) is False
    began = monotonic()
    assert event.wait(30) is True  # returns at the deadline, not after 30 s
    assert monotonic() - began < 10
    assert event.is_set()
    early = DeadlineEvent(monotonic() + 60)
    early.set()
    assert early.is_set() and early.wait(0)
