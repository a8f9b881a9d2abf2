"""The pipe between the parent and a process-isolated tool's child (issue 21, item 10).

Every message on it is framed with the sequence number of the call it belongs to;
anything a child writes out of turn (a helper thread's extra message) is
discarded and logged, and that child is replaced, and a copy a tool forked leaves
without answering, so no call ever gets another call's result. Real child processes, no mocks; every
wait is a bounded poll for a state.
"""

from __future__ import annotations

import collections.abc as c
import gc
import logging
import os
import pathlib
import threading
import time
import typing as t

import pytest

from nous_tools import Ok, Tool, ToolExecutor
from nous_tools._engine import _isolation, _pipe
from nous_tools._engine._pool import RETURNED
from nous_tools._engine._process_pool import ProcessPool
from nous_tools._util._clock import monotonic

PATIENCE = 30.0  # seconds to wait for a state that should come much sooner


def isolated(fn: c.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("retries", 0)
    options.setdefault("timeout", 30)
    return Tool.from_function(fn, isolation="process", **options)


def wait_for(condition: c.Callable[[], bool], within: float = PATIENCE) -> bool:
    end = time.monotonic() + within
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def executor() -> c.Iterator[ToolExecutor]:
    with ToolExecutor(max_workers=4, process_workers=2) as ex:
        yield ex


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="nous_tools")
    return caplog


# -- tools (module-level: the child imports them by name) ---------------------------


def echo(value: t.Any) -> t.Any:
    return value


def my_pid() -> int:
    return os.getpid()


def fork_and_return(pidfile: str) -> int:
    """Fork, and let both copies return into the child's loop: each answers."""
    copy = os.fork()
    if copy:
        tmp = pidfile + ".tmp"
        pathlib.Path(tmp).write_text(f"{os.getpid()} {copy}")
        os.replace(tmp, pidfile)
    return os.getpid()


def _the_pipe() -> t.Any:
    """The child's end of its pipe, found as a library in the tool might find it."""
    from multiprocessing.connection import Connection

    return next(
        o
        for o in gc.get_objects()
        if isinstance(o, Connection) and not o.closed and o.writable and o.readable
    )


def reply_twice(value: str, sent: str) -> tuple[str, int]:
    """Have a helper thread send the child's reply again, right after it."""
    conn = _the_pipe()
    send = conn._send_bytes  # what Connection.send_bytes calls, looked up at each call

    def send_bytes(message: t.Any) -> None:
        del conn._send_bytes  # once
        send(message)

        def helper() -> None:
            send(message)
            pathlib.Path(sent).touch()

        threading.Thread(target=helper).start()

    conn._send_bytes = send_bytes
    return value, os.getpid()


def write_junk_then_return(value: str) -> tuple[str, int]:
    """Write a message of our own to the pipe while the call runs, then answer."""
    _the_pipe().send_bytes(b"junk")
    return value, os.getpid()


#: An event kind for these tests only (16-63 are events).
TEST_EVENT = 63


def send_events(steps: int) -> int:
    events = _isolation.events
    assert events is not None
    call = events.call
    for step in range(steps):
        assert events.event(call, TEST_EVENT, f"step {step}".encode())
    return os.getpid()


def send_an_event_late(outcome: str) -> int:
    """A helper thread that outlives the call tries to send an event of it."""
    events = _isolation.events
    assert events is not None
    call = events.call

    def helper() -> None:
        while events.call == call:  # until the call has been answered
            time.sleep(0.001)
        sent = events.event(call, TEST_EVENT, b"late")
        tmp = outcome + ".tmp"
        pathlib.Path(tmp).write_text(str(sent))
        os.replace(tmp, outcome)

    threading.Thread(target=helper).start()
    return os.getpid()


# -- strays -------------------------------------------------------------------------


def test_a_forked_copy_that_returns_leaves_without_answering_and_later_calls_get_their_own_results(
    executor: ToolExecutor, tmp_path: pathlib.Path, warnings: pytest.LogCaptureFixture
) -> None:
    pidfile = tmp_path / "pids"
    first = executor.execute(isolated(fork_and_return), {"pidfile": str(pidfile)})
    assert wait_for(pidfile.exists)
    original, copy = (int(pid) for pid in pidfile.read_text().split())
    assert first == Ok(original)  # the original answers; the copy never does
    assert wait_for(lambda: not alive(copy))  # it left at once
    # The copy read nothing: every later call is answered, by the same child.
    results = [executor.execute(isolated(echo), {"value": i}) for i in range(6)]
    assert results == [Ok(i) for i in range(6)]
    assert executor.execute(isolated(my_pid), {}) == Ok(original)  # kept: it did nothing wrong
    assert executor.stats()["process_strays"] == 0
    assert "out of turn" not in warnings.text


def test_an_extra_message_from_a_helper_thread_is_discarded_and_its_child_replaced(
    executor: ToolExecutor, tmp_path: pathlib.Path, warnings: pytest.LogCaptureFixture
) -> None:
    sent = tmp_path / "sent"
    first = executor.execute(isolated(reply_twice), {"value": "first", "sent": str(sent)})
    assert isinstance(first, Ok) and first.value[0] == "first"
    child = first.value[1]
    assert wait_for(sent.exists)  # the copy of the reply is on its way
    results = [executor.execute(isolated(echo), {"value": i}) for i in range(6)]
    assert results == [Ok(i) for i in range(6)]
    assert wait_for(lambda: "out of turn" in warnings.text)
    assert f"child process {child} wrote to its pipe out of turn (a reply for call" in warnings.text
    assert "while it was idle); discarded, and the child is replaced" in warnings.text
    later = executor.execute(isolated(my_pid), {})
    assert isinstance(later, Ok) and later.value != child
    assert wait_for(lambda: not alive(child))


def test_a_message_written_during_the_call_is_discarded_and_the_child_replaced_after_it(
    executor: ToolExecutor, warnings: pytest.LogCaptureFixture
) -> None:
    first = executor.execute(isolated(write_junk_then_return), {"value": "mine"})
    assert isinstance(first, Ok) and first.value[0] == "mine"
    child = first.value[1]
    assert f"child process {child} wrote to its pipe out of turn" in warnings.text
    assert "a message that is not a frame (4 bytes), while it served call" in warnings.text
    assert "junk" not in warnings.text  # what it was, never its content
    later = executor.execute(isolated(my_pid), {})
    assert isinstance(later, Ok) and later.value != child
    assert executor.stats()["process_strays"] == 1
    assert wait_for(lambda: not alive(child))


# -- events: the room left for progress and log messages ---------------------------------


def test_events_of_a_call_go_to_its_handler_in_order_and_the_child_serves_on(
    monkeypatch: pytest.MonkeyPatch, warnings: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_pipe, "EVENT_KINDS", frozenset({*_pipe.EVENT_KINDS, TEST_EVENT}))
    pool = ProcessPool(1)
    got: list[tuple[int, bytes]] = []
    try:
        kind, child = pool.run(
            isolated(send_events),
            {"steps": 3},
            None,
            monotonic() + 30,
            on_event=lambda kind, payload: got.append((kind, bytes(payload))),
        )
        assert kind == RETURNED
        assert got == [(TEST_EVENT, f"step {step}".encode()) for step in range(3)]
        assert pool.run(isolated(my_pid), {}, None, monotonic() + 30) == (RETURNED, child)
        assert pool.stats()["strays"] == 0 and "out of turn" not in warnings.text
    finally:
        pool.shutdown()


def test_an_event_of_a_kind_the_parent_does_not_know_is_a_stray(
    executor: ToolExecutor, warnings: pytest.LogCaptureFixture
) -> None:
    first = executor.execute(isolated(send_events), {"steps": 1})
    assert isinstance(first, Ok)
    assert "a message of kind 63 for call" in warnings.text
    assert executor.execute(isolated(my_pid), {}) != first


def test_an_event_sent_after_its_call_ended_never_reaches_the_pipe(
    executor: ToolExecutor, tmp_path: pathlib.Path, warnings: pytest.LogCaptureFixture
) -> None:
    outcome = tmp_path / "sent"
    first = executor.execute(isolated(send_an_event_late), {"outcome": str(outcome)})
    assert isinstance(first, Ok)
    assert wait_for(outcome.exists)
    assert outcome.read_text() == "False"
    assert executor.execute(isolated(my_pid), {}) == first  # the same child serves on
    assert "out of turn" not in warnings.text
