"""``max_concurrency``: what a call that waited for a slot is told, and the order in
which waiting calls get their slots (first come, first served).

Synchronised with Events and with the debug record a call writes once it is in the
queue ("waits for a slot"), never with sleeps-and-hope: the one pause below is a
lower bound on a wait, and every time asserted has seconds of margin."""

from __future__ import annotations

import collections.abc as c
import logging
import pickle
import re
import threading
import time
import typing as t

import pytest

from nous_tools import Err, Ok, RateLimited, Tool, ToolExecutor, ToolTimeout, format_tool_result

WAIT = 30.0  # generous: the machine is small and shared


class Queued(logging.Handler):
    """Counts the calls that have joined a tool's queue of waiters (the library's
    debug record "Tool '...' waits for a slot ..."), so a test can start the next
    caller only once the one before it is in the queue."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.joined = threading.Semaphore(0)
        self.ahead: list[int] = []  # how many calls each found ahead of it

    def emit(self, record: logging.LogRecord) -> None:
        if "waits for a slot" in str(record.msg):
            self.ahead.append(t.cast(int, t.cast(tuple[t.Any, ...], record.args)[2]))
            self.joined.release()

    def next(self) -> None:
        """Wait until one more call has joined the queue."""
        assert self.joined.acquire(timeout=WAIT), "no call joined the queue"


@pytest.fixture
def queued() -> c.Iterator[Queued]:
    logger = logging.getLogger("nous_tools")
    handler = Queued()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


class Holder:
    """A call of ``tool`` that holds its slot until :meth:`release`."""

    def __init__(self, executor: ToolExecutor, name: str, cap: int) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self.tool = Tool(name=name, function=self._hold, timeout=WAIT, max_concurrency=cap)
        self.results: list[t.Any] = []
        self.thread = threading.Thread(
            target=lambda: self.results.append(executor.execute(self.tool, {}))
        )

    def _hold(self) -> str:
        self.entered.set()
        self.released.wait(WAIT)
        return "held"

    def __enter__(self) -> Holder:
        self.thread.start()
        assert self.entered.wait(WAIT)
        return self

    def release(self) -> None:
        self.released.set()
        self.thread.join(WAIT)
        assert self.results == [Ok("held")]

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.thread.join(WAIT)


def _call(
    executor: ToolExecutor, tool: Tool, arguments: dict[str, t.Any]
) -> tuple[threading.Thread, list[t.Any]]:
    """Start a call of ``tool`` in a thread of its own: the thread, and its result-to-be."""
    out: list[t.Any] = []
    thread = threading.Thread(target=lambda: out.append(executor.execute(tool, arguments)))
    thread.start()
    return thread, out


_WAITED = re.compile(
    r"Tool 'db' waited (?P<waited>\d+(\.\d{1,2})?) s for a slot \(max_concurrency=1\), "
    r"then timed out after (?P<ran>\d+(\.\d{1,2})?) s of running "
    r"\(its timeout of 4 s counts the wait\)"
)


def test_a_call_that_waited_for_a_slot_then_timed_out_says_how_long_it_waited_and_ran(
    queued: Queued,
) -> None:
    hold_for = 0.5  # the holder keeps the slot at least this long after the call queued
    running = threading.Event()
    stop = threading.Event()

    def stuck() -> str:
        running.set()
        stop.wait(WAIT)
        return "late"

    waiter = Tool(name="db", function=stuck, timeout=4, max_concurrency=1)
    with ToolExecutor(max_workers=4) as executor:
        try:
            with Holder(executor, "db", 1) as holder:
                thread, out = _call(executor, waiter, {})
                queued.next()
                threading.Event().wait(hold_for)  # a lower bound on the wait, not a sync
                holder.release()
                assert running.wait(WAIT)  # it got the slot, and ran
                thread.join(WAIT)
        finally:
            stop.set()
    [result] = out
    assert isinstance(result, Err)
    reason = result.reason
    assert type(reason) is ToolTimeout  # still a timeout, never retried
    assert reason.timeout == 4  # the tool's timeout, as before
    match = _WAITED.fullmatch(reason.message)
    assert match is not None, reason.message
    waited, ran = float(match["waited"]), float(match["ran"])
    assert reason.waited is not None
    assert hold_for <= reason.waited < 4
    assert abs(waited - reason.waited) <= 0.005 + 1e-9  # the message rounds to a hundredth
    assert abs(waited + ran - 4) <= 0.011  # the two add up to the timeout, never past it
    assert format_tool_result(result, waiter) == (
        "Error: tool 'db' " + reason.message.removeprefix("Tool 'db' ") + ", and was not retried"
    )
    copy = pickle.loads(pickle.dumps(reason))
    assert (copy.message, copy.timeout, copy.waited) == (reason.message, 4, reason.waited)


def test_a_call_that_never_got_a_slot_names_exactly_its_own_timeout(queued: Queued) -> None:
    ran: list[int] = []
    waiter = Tool(name="db", function=lambda: ran.append(1), timeout=0.25, max_concurrency=1)
    with ToolExecutor(max_workers=4) as executor, Holder(executor, "db", 1):
        result = executor.execute(waiter, {})
    assert isinstance(result, Err)
    reason = result.reason
    assert type(reason) is RateLimited
    assert (reason.limit, reason.retry_after) == ("max_concurrency", None)
    assert reason.message == (
        "rate limited: 'db' allows 1 call at once (max_concurrency=1), and no slot came "
        "free within its timeout of 0.25 s; retry later"
    )
    assert format_tool_result(result, waiter) == f"Error: {reason.message}"
    assert ran == []
    assert queued.ahead == [0]  # it did queue, and waited


def test_slots_are_granted_first_come_first_served(queued: Queued) -> None:
    order: list[int] = []
    tool = Tool(name="db", function=lambda i: order.append(i) or i, timeout=WAIT, max_concurrency=1)
    with ToolExecutor(max_workers=8) as executor, Holder(executor, "db", 1) as holder:
        calls = []
        for i in range(5):
            calls.append(_call(executor, tool, {"i": i}))
            queued.next()  # call i is in the queue before call i + 1 starts
        holder.release()
        for thread, _ in calls:
            thread.join(WAIT)
    assert queued.ahead == [0, 1, 2, 3, 4]
    assert order == [0, 1, 2, 3, 4]
    assert [out for _, out in calls] == [[Ok(i)] for i in range(5)]


def test_a_newcomer_never_takes_a_slot_past_a_call_already_waiting(queued: Queued) -> None:
    order: list[str] = []
    tool = Tool(
        name="db", function=lambda who: order.append(who) or who, timeout=WAIT, max_concurrency=1
    )
    with ToolExecutor(max_workers=8) as executor, Holder(executor, "db", 1) as holder:
        first, first_out = _call(executor, tool, {"who": "waiting"})
        queued.next()
        holder.release()  # its slot goes to the waiting call, whether it woke yet or not
        result = executor.execute(tool, {"who": "newcomer"})
        first.join(WAIT)
    assert order == ["waiting", "newcomer"]
    assert (first_out, result) == ([Ok("waiting")], Ok("newcomer"))


def test_a_call_that_gives_up_waiting_leaves_its_place_to_the_calls_behind_it(
    queued: Queued,
) -> None:
    quick = Tool(name="db", function=lambda: "quick", timeout=0.2, max_concurrency=1)
    patient = Tool(name="db", function=lambda: "patient", timeout=WAIT, max_concurrency=1)
    with ToolExecutor(max_workers=8) as executor:
        with Holder(executor, "db", 1) as holder:
            gives_up, gave_up = _call(executor, quick, {})
            queued.next()
            waits, waited = _call(executor, patient, {})
            queued.next()
            gives_up.join(WAIT)  # its 0.2 s are over: refused, and out of the queue
            holder.release()
            waits.join(WAIT)
        again = executor.execute(patient, {})  # and the slot was not lost on the way
    [refused] = gave_up
    assert isinstance(refused, Err) and type(refused.reason) is RateLimited
    assert "within its timeout of 0.2 s" in refused.reason.message
    assert waited == [Ok("patient")]
    assert again == Ok("patient")


_SECONDS = re.compile(r"(\d+(?:\.\d+)?) s\b")


def test_no_message_names_a_time_its_tool_options_did_not_set() -> None:
    """The issue's case: a tool with ``max_concurrency=2``, ``timeout=1.5``, a body of
    1 s, called 6 times at once. However the machine schedules them, each call
    either returns, or times out saying how long it waited and ran (adding up to
    1.5 s), or is refused naming its timeout of 1.5 s: no time past 1.5 s."""

    def body() -> str:
        time.sleep(1)
        return "done"

    tool = Tool(name="x", function=body, timeout=1.5, max_concurrency=2)
    with ToolExecutor(max_workers=8) as executor:
        results = executor.execute_many([(tool, {})] * 6)
    for result in results:
        text = format_tool_result(result, tool)
        if isinstance(result, Ok):
            assert text == "done"
            continue
        reason = result.unwrap_err()
        assert isinstance(reason, (ToolTimeout, RateLimited)), reason
        seconds = [float(s) for s in _SECONDS.findall(text)]
        assert seconds and max(seconds) <= 1.5, text
        if isinstance(reason, RateLimited):
            assert text == (
                "Error: rate limited: 'x' allows 2 calls at once (max_concurrency=2), and no "
                "slot came free within its timeout of 1.5 s; retry later"
            )
        elif reason.waited is not None:
            waited, ran, timeout = seconds
            assert timeout == 1.5 and abs(waited + ran - 1.5) <= 0.011, text
        else:  # it got a slot at once: the whole timeout was its own
            assert text == "Error: tool 'x' timed out after 1.5 s and was not retried"
