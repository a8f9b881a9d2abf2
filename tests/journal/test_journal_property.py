"""A property of the journal (hypothesis): whatever the interleaving of repeats,
crashes (at each of the points of a call) and settlements over a few keys, a tool that
is not idempotent never runs twice for one key, and every answer is the one the table
gives; an ``idempotent=True`` tool may run again after a crash, always with the same
idempotency key, so its side effect happens once.

A crash is a ``KeyboardInterrupt`` in the caller's thread at that point (it leaves
the journal exactly as a killed process would: ``started``, never ``completed``);
the journal's grace is 0 and the tools have no timeout, so its lease has expired by
the next step. ``tests/journal/test_journal_crash.py`` kills real processes.
"""

from __future__ import annotations

import collections
import os
import tempfile
import typing as t

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nous_tools import (
    Err,
    JournalConflict,
    Ok,
    OutcomeUnknown,
    RunContext,
    SQLiteJournal,
    Tool,
    ToolExecutor,
    format_tool_result,
    signals,
)

RUN = "run-property"
OPERATIONS = [
    "call",
    "crash-after-started",
    "crash-in-tool",
    "crash-after-returned",
    "settle-ok",
    "settle-err",
    "other-arguments",
]
STEPS = st.lists(st.tuples(st.sampled_from(OPERATIONS), st.integers(0, 2)), max_size=20)


class Crash:
    """Where the next call dies (None: it does not)."""

    point: str | None = None


def _die_at(point: str) -> t.Callable[..., None]:
    def receiver(sender: t.Any, **kw: t.Any) -> None:
        if Crash.point == point:
            raise KeyboardInterrupt  # the caller's Ctrl-C: out of execute, nothing recorded

    return receiver


ON_START = _die_at("after-started")
ON_STOP = _die_at("after-returned")


@pytest.fixture(autouse=True)
def crash_points() -> t.Iterator[None]:
    signals.tool_execute_start.connect(ON_START)
    signals.tool_execute_stop.connect(ON_STOP)
    yield
    signals.tool_execute_start.disconnect(ON_START)
    signals.tool_execute_stop.disconnect(ON_STOP)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS, idempotent=st.booleans())
def test_no_interleaving_runs_a_tool_that_is_not_idempotent_twice_for_one_key(
    steps: list[tuple[str, int]], idempotent: bool
) -> None:
    runs: collections.Counter[str] = collections.Counter()
    effects: dict[str, set[str | None]] = collections.defaultdict(set)

    def charge(ctx: RunContext, amount: int) -> str:
        runs[ctx.idempotency_key or ""] += 1
        effects[ctx.idempotency_key or ""].add(ctx.idempotency_key)  # de-duplicated downstream
        if Crash.point == "in-tool":
            raise KeyboardInterrupt
        return f"charged {amount}"

    tool = Tool.from_function(
        charge, timeout=None, retries=0, idempotent=True if idempotent else None
    )
    ctx = RunContext.new(run_id=RUN)
    # What the journal must hold for each key: the amount it was called with, and
    # "unknown" or the text a model gets.
    model: dict[str, tuple[int, str]] = {}
    with tempfile.TemporaryDirectory() as directory:
        journal = SQLiteJournal(os.path.join(directory, "journal.db"), grace=0)
        with ToolExecutor(max_workers=2, journal=journal) as executor:
            for operation, k in steps:
                call_id = f"call_{k}"
                held = model.get(call_id)
                if operation.startswith("settle"):
                    result = Ok("found: charged") if operation == "settle-ok" else Err("refunded")
                    if held is not None and held[1] == "unknown":
                        journal.settle((RUN, call_id), result)
                        model[call_id] = (held[0], format_tool_result(result, "charge"))
                    else:
                        with pytest.raises(ValueError):
                            journal.settle((RUN, call_id), result)
                    continue
                amount = 99 if operation == "other-arguments" else 5
                Crash.point = operation.removeprefix("crash-") if "crash" in operation else None
                runs_before = sum(runs.values())
                try:
                    answer = executor.execute(tool, {"amount": amount}, ctx, call_id=call_id)
                except KeyboardInterrupt:
                    answer = None
                finally:
                    Crash.point = None
                ran = sum(runs.values()) > runs_before
                if held is not None and held[0] != amount:
                    assert isinstance(answer, Err) and isinstance(answer.reason, JournalConflict)
                    assert not ran
                elif held is None or (held[1] == "unknown" and idempotent):
                    if operation == "crash-after-started":
                        assert answer is None and not ran
                        model[call_id] = (amount, "unknown")
                    elif answer is None:
                        assert ran
                        model[call_id] = (amount, "unknown")
                    else:
                        assert ran and answer == Ok(f"charged {amount}")
                        model[call_id] = (amount, format_tool_result(answer, "charge"))
                elif held[1] == "unknown":
                    assert isinstance(answer, Err) and isinstance(answer.reason, OutcomeUnknown)
                    assert not ran
                else:
                    assert answer is not None and format_tool_result(answer, "charge") == held[1]
                    assert not ran
        journal.close()
    if not idempotent:
        assert all(count <= 1 for count in runs.values()), runs
    assert all(len(keys) <= 1 for keys in effects.values())  # one key per call, ever
