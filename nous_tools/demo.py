"""The built-in demo toolbox, run by ``nous-tools demo`` (and ``make demo``).

A small toolbox runs end to end through one :class:`~nous_tools.ToolExecutor`,
and each case prints one line: a flaky tool that succeeds on its second
attempt, a hung tool cut at its deadline and not re-run, a tool that needs
approval (approved, then rejected), a tool with ``before``/``after`` advice, a
batch of calls run concurrently, and a :class:`~nous_tools.ContextUpdate`
applied to deps. Every case checks its own outcome; the demo exits 0 when all
behaved as expected. It takes about a second.
"""

from __future__ import annotations

import collections.abc as c
import time
import typing as t

import attrs

from nous_tools import signals
from nous_tools.context_update import ContextUpdate
from nous_tools.errors import ToolTimeout
from nous_tools.executor import ToolExecutor
from nous_tools.registry import Registry
from nous_tools.results import Err, Ok
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool

__all__ = ["run_demo"]

#: How long the hung tool may run, and how long each call of the batch sleeps.
HUNG_TIMEOUT = 0.3
BATCH_SIZE = 4
BATCH_SLEEP = 0.3

_LABEL_WIDTH = 10
_TOOL_WIDTH = 14


@attrs.frozen
class _Case:
    label: str
    tool: str
    outcome: str
    expected: bool


def _short(result: object, limit: int = 60) -> str:
    """``Ok 'value'`` or ``Err ToolTimeout: message``, cut to ``limit`` characters."""
    if isinstance(result, Ok):
        text = f"Ok {result.value!r}"
    elif isinstance(result, Err):
        reason = result.reason
        text = f"Err {type(reason).__name__}: {getattr(reason, 'message', reason)}"
    else:
        text = repr(result)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(result: object) -> str:
    """The class name of an ``Err``'s reason (``"?"`` for anything else)."""
    return type(result.reason).__name__ if isinstance(result, Err) else "?"


def _flaky(executor: ToolExecutor) -> _Case:
    attempts: list[str] = []

    def fetch_quote(ctx: RunContext[t.Any], symbol: str) -> str:
        """Fetch a stock quote; the first attempt fails, like a flaky network call."""
        attempts.append(f"retry={ctx.retry}")
        if ctx.retry == 0:
            raise ConnectionError("connection reset by peer")
        return f"{symbol} 101.50"

    tool = Tool.from_function(fetch_quote, retries=2, timeout=5)
    result = executor.execute(tool, {"symbol": "ACME"})
    return _Case(
        "flaky",
        tool.name,
        f"{_short(result)} on attempt {len(attempts)} of {tool.retries + 1} "
        "(attempt 1: ConnectionError)",
        isinstance(result, Ok) and len(attempts) == 2,
    )


def _hung(executor: ToolExecutor) -> _Case:
    runs: list[int] = []

    def crawl(ctx: RunContext[t.Any], url: str) -> str:
        """Crawl a page that never answers."""
        runs.append(1)
        ctx.cancelled.wait(30)  # an interruptible sleep: it ends when the deadline passes
        return "too late"

    tool = Tool.from_function(crawl, retries=3, timeout=HUNG_TIMEOUT)
    began = time.monotonic()
    result = executor.execute(tool, {"url": "https://example.invalid/slow"})
    took = time.monotonic() - began
    timed_out = isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    return _Case(
        "hung",
        tool.name,
        f"Err {_kind(result)} at {took:.2f} s of {HUNG_TIMEOUT} s; "
        f"ran {len(runs)}x, never re-run (retries={tool.retries})",
        timed_out and len(runs) == 1 and took < HUNG_TIMEOUT + 1.0,
    )


def _approval(executor: ToolExecutor) -> list[_Case]:
    deleted: list[str] = []

    def delete_file(path: str) -> str:
        """Delete a file (every call needs approval)."""
        deleted.append(path)
        return f"deleted {path}"

    tool = Tool.from_function(delete_file, approval="ask", timeout=5)
    asked: list[str] = []

    def approve(request: t.Any) -> str:
        asked.append(request.name)
        return "approve"

    approved = executor.execute(
        tool, {"path": "/tmp/report.txt"}, RunContext.new(approval_handler=approve)
    )
    first = _Case(
        "approved",
        tool.name,
        f"{_short(approved)} (handler: 'approve')",
        isinstance(approved, Ok) and deleted == ["/tmp/report.txt"] and asked == [tool.name],
    )
    rejected = executor.execute(
        tool, {"path": "/etc/passwd"}, RunContext.new(approval_handler=lambda request: "reject")
    )
    second = _Case(
        "rejected",
        tool.name,
        f"Err {_kind(rejected)} (handler: 'reject'); the tool never ran",
        isinstance(rejected, Err) and deleted == ["/tmp/report.txt"],
    )
    return [first, second]


def _advice(executor: ToolExecutor) -> _Case:
    seen: list[str] = []

    def read_note(path: str) -> str:
        """Read a note."""
        seen.append(path)
        return f"{path}: buy milk"

    tool = Tool.from_function(read_note, timeout=5)
    registry = Registry([tool], executor=executor)
    registry.advice.register(
        "before", tool.name, lambda args: {**args, "path": args["path"].strip()}
    )
    registry.advice.register(
        "after",
        tool.name,
        lambda result: Ok(result.value.upper()) if isinstance(result, Ok) else result,
    )
    result = registry.execute(tool.name, {"path": "  notes/todo.txt  "})
    return _Case(
        "advice",
        tool.name,
        f"{_short(result)} (before: strip; after: upper)",
        isinstance(result, Ok)
        and result.value == "NOTES/TODO.TXT: BUY MILK"
        and seen == ["notes/todo.txt"],
    )


def _batch(executor: ToolExecutor) -> _Case:
    def nap(ctx: RunContext[t.Any], seconds: float) -> float:
        """Sleep, like a slow API call."""
        ctx.cancelled.wait(seconds)
        return seconds

    tool = Tool.from_function(nap, timeout=5)
    durations: list[int] = []

    def on_stop(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        durations.append(int(measurements["duration"]))

    signals.tool_execute_stop.connect(on_stop, sender=tool, weak=False)
    try:
        began = time.monotonic()
        results = executor.execute_many(
            [(tool, {"seconds": BATCH_SLEEP}) for _ in range(BATCH_SIZE)]
        )
        took = time.monotonic() - began
    finally:
        signals.tool_execute_stop.disconnect(on_stop, sender=tool)
    total = sum(durations) / 1e9
    return _Case(
        "batch",
        f"{tool.name} x{BATCH_SIZE}",
        f"batch of {BATCH_SIZE} took {took:.2f} s; sequential sum {total:.2f} s (execute_many)",
        all(isinstance(r, Ok) for r in results)
        and len(durations) == BATCH_SIZE
        and took < 0.75 * total,
    )


def _context(executor: ToolExecutor) -> _Case:
    def remember(ctx: RunContext[t.Any], note: str) -> Ok[str]:
        """Remember a note for later calls."""
        update = ContextUpdate.new().append("notes", note).set("last", note)
        return Ok(f"noted {note!r}", update)

    tool = Tool.from_function(remember, timeout=5)
    ctx = RunContext.new({"notes": ["milk"]})
    before = dict(ctx.deps)
    result = executor.execute(tool, {"note": "eggs"}, ctx)
    if isinstance(result, Ok) and result.update is not None:
        after = result.update.apply_to_run_context(ctx).deps
    else:
        after = ctx.deps
    return _Case(
        "context",
        tool.name,
        f"deps {before} -> {after}",
        ctx.deps == before and after == {"notes": ["milk", "eggs"], "last": "eggs"},
    )


_CASES: tuple[c.Callable[[ToolExecutor], _Case | list[_Case]], ...] = (
    _flaky,
    _hung,
    _approval,
    _advice,
    _batch,
    _context,
)


def run_demo(write: c.Callable[[str], object] = print) -> int:
    """Run every case, writing one report line each as it finishes; returns the exit
    status: 0 when every case behaved as expected, else 1."""
    began = time.monotonic()
    write("nous-tools demo: a small toolbox, run end to end through one ToolExecutor")
    write("")
    cases: list[_Case] = []
    with ToolExecutor(max_workers=8) as executor:
        for run_case in _CASES:
            found = run_case(executor)
            for case in found if isinstance(found, list) else [found]:
                cases.append(case)
                mark = " " if case.expected else "!"
                write(
                    f"{mark} {case.label:<{_LABEL_WIDTH}}{case.tool:<{_TOOL_WIDTH}}{case.outcome}"
                )
    took = time.monotonic() - began
    write("")
    unexpected = [case.label for case in cases if not case.expected]
    if unexpected:
        write(
            f"{len(unexpected)} of {len(cases)} cases did not behave as expected "
            f"({', '.join(unexpected)}), in {took:.1f} s"
        )
        return 1
    write(f"all {len(cases)} cases behaved as expected, in {took:.1f} s")
    return 0
