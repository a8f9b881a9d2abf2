"""A batch's process calls sent ahead to busy children (issue 26).

A batch keeps calls waiting in the pipes of its busy children, so a child goes on
without waiting for the parent. These tests pin what that must not change: a call
sent ahead of a child that is killed or dies never started and runs elsewhere,
once; every call's answer is its own. Real child processes; tools talk back
through files in ``tmp_path``.
"""

from __future__ import annotations

import os
import pathlib
import time
import typing as t

from nous_tools import ChildProcessDied, Err, Ok, Tool, ToolError, ToolExecutor, ToolTimeout


def isolated(fn: t.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("retries", 0)
    options.setdefault("timeout", 30)
    return Tool.from_function(fn, isolation="process", **options)


def note(path: str, value: int) -> int:
    """Append a line to ``path`` (one per run), return ``value``."""
    with open(path, "a") as file:
        file.write("ran\n")
    return value


def hang() -> None:
    time.sleep(60)


def die() -> None:
    os._exit(3)


def runs(path: pathlib.Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_every_call_of_a_long_batch_of_quick_process_calls_runs_once_with_its_own_answer(
    tmp_path: pathlib.Path,
) -> None:
    tool = isolated(note, validate_args=False)
    with ToolExecutor(process_workers=2) as executor:
        executor.execute(tool, {"path": str(tmp_path / "warm"), "value": 0})  # a child ready
        calls = [(tool, {"path": str(tmp_path / str(i)), "value": i}) for i in range(400)]
        assert executor.execute_many(calls) == [Ok(i) for i in range(400)]
    assert all(runs(tmp_path / str(i)) == 1 for i in range(400))


def test_calls_sent_ahead_of_a_child_killed_at_a_deadline_run_elsewhere_once(
    tmp_path: pathlib.Path,
) -> None:
    # Quick calls first (the batch learns they are quick and sends many ahead),
    # then one that hangs, then more quick ones: those queued in the hanging
    # child's pipe never started there; they run on another child, once each.
    quick = isolated(note, validate_args=False)
    calls: list[tuple[Tool, dict[str, t.Any]]] = [
        (quick, {"path": str(tmp_path / str(i)), "value": i}) for i in range(60)
    ]
    calls.insert(30, (isolated(hang, timeout=1.0), {}))
    with ToolExecutor(process_workers=2) as executor:
        executor.execute(quick, {"path": str(tmp_path / "warm"), "value": 0})  # a child ready
        results = executor.execute_many(calls)
        assert executor.stats()["process_killed"] == 1
    hung = results.pop(30)
    assert isinstance(hung, Err) and isinstance(hung.reason, ToolTimeout)
    assert results == [Ok(i) for i in range(60)]
    assert all(runs(tmp_path / str(i)) == 1 for i in range(60))


def test_a_call_sent_ahead_of_a_child_that_dies_runs_elsewhere_once(
    tmp_path: pathlib.Path,
) -> None:
    with ToolExecutor(process_workers=1) as executor:
        executor.execute(isolated(note), {"path": str(tmp_path / "warm"), "value": 0})
        results = executor.execute_many(
            [
                (isolated(die), {}),
                (isolated(note), {"path": str(tmp_path / "after"), "value": 1}),
            ]
        )
    died = results[0]
    assert isinstance(died, Err) and isinstance(died.reason, ToolError)
    assert isinstance(died.reason.original_error, ChildProcessDied)
    assert results[1] == Ok(1)
    assert runs(tmp_path / "after") == 1
