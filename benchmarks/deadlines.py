"""Deadlines (issue 3): the cost of a timed call and how late a timeout comes back.

Run it with ``.venv/bin/python benchmarks/deadlines.py [--quick] [--samples N]
[--timeout S] [--hang wait|sleep|spin]``.

1. **Per-call cost.** ``nous_tools.execute`` of a trivial tool with ``timeout=5``
   (a hand-off to a pool worker and back) against a bare
   ``ThreadPoolExecutor.submit(fn, **kw).result(timeout=5)`` round trip on the same
   function: loops of N calls, rounds interleaved, medians. Target: at most 0.8x of
   the bare round trip. The same pair is timed again with every thread pinned to one
   CPU, where a hand-off costs what the code costs rather than what the scheduler
   makes a cross-core wake-up cost on a busy machine.
2. **Deadline overshoot.** A tool that hangs, ``--samples`` times (default 200) with
   ``--timeout`` (default 0.02 s): p50/p99/max of (the time ``execute`` returned minus
   the timeout), counted from the call. Target: p99 under 5 ms on an idle machine.
   The bare pool's ``future.result(timeout)`` is measured the same way for reference
   (it raises at the deadline too, but cannot stop or even tell its worker).

``--hang`` picks how the tool hangs: ``wait`` (default) waits on
``ctx.cancelled``, so the worker ends as soon as it is told; ``sleep`` sleeps in C
for 4x the timeout (the interrupt lands only after the sleep: abandoned workers
pile up for a while); ``spin`` runs a Python loop, which ``ToolCancelled`` stops.

A benchmark, not a test: it prints figures and ratios and exits 0.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import logging
import os
import pathlib
import platform
import sys
import threading
import time
import typing as t

import attrs

try:
    import nous_tools
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    import nous_tools

from nous_tools import Ok, RunContext, Tool, ToolExecutor, ToolTimeout

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from compare import ARGS, FULL, QUICK, Timing, echo, loop_bare_pool, loop_execute, measure


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values``."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def per_call_cost(rounds: int, round_ms: float, pin: bool) -> dict[str, Timing] | None:
    """Median ns per call of the timed execute and the bare round trip."""
    settings = attrs.evolve(FULL, rounds=rounds, round_ms=round_ms)
    tool = Tool.from_function(echo, timeout=5, validate_args=False)
    workers = nous_tools.default_executor().max_workers
    allowed: set[int] | None = None
    if pin:
        getaffinity = getattr(os, "sched_getaffinity", None)
        if getaffinity is None or len(getaffinity(0)) < 2:
            return None
        allowed = getaffinity(0)
        os.sched_setaffinity(0, {min(allowed)})  # this thread; the pools' threads inherit it
    try:
        with (
            ToolExecutor(max_workers=workers) as executor,
            concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool,
        ):
            assert executor.execute(tool, ARGS) == Ok("x")
            loops = {
                "ours": loop_execute(executor.execute, tool, ARGS),
                "bare": loop_bare_pool(pool, ARGS),
            }
            return measure(loops, settings)
    finally:
        if allowed is not None:
            os.sched_setaffinity(0, allowed)


def hanging_tool(hang: str, timeout: float) -> Tool:
    if hang == "wait":

        def hang_wait(ctx: RunContext[t.Any]) -> str:
            ctx.cancelled.wait(60)
            return "late"

        return Tool.from_function(hang_wait, timeout=timeout, retries=0)
    if hang == "sleep":

        def hang_sleep() -> str:
            time.sleep(4 * timeout)
            return "late"

        return Tool.from_function(hang_sleep, timeout=timeout, retries=0)

    def hang_spin() -> str:
        while True:
            pass

    return Tool.from_function(hang_spin, timeout=timeout, retries=0)


def overshoot_ours(
    samples: int, timeout: float, hang: str, overlap: bool = False
) -> tuple[list[float], int, dict[str, int]]:
    """Overshoots (ms) of ``execute`` on a hanging tool; and how many answers were not
    ``Err(ToolTimeout)``, and the executor's stats at the end.

    Each call starts once the worker of the one before has ended (untimed), so a
    sample measures one hanging tool, not the one before it still holding the GIL;
    ``overlap=True`` starts each call at once (abandoned workers pile up)."""
    tool = hanging_tool(hang, timeout)
    # Each timeout logs an error; keep the record (its cost is part of the answer)
    # but print nothing.
    log = logging.getLogger("nous_tools")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    overshoots: list[float] = []
    wrong = 0
    with ToolExecutor(max_workers=4) as executor:
        for _ in range(samples):
            began = time.perf_counter()
            result = executor.execute(tool, {})
            overshoots.append((time.perf_counter() - began - timeout) * 1000)
            reason = getattr(result, "reason", None)
            if not isinstance(reason, ToolTimeout):
                wrong += 1
            if not overlap:
                quiet = time.monotonic() + 2.0
                while executor.stats()["abandoned"] and time.monotonic() < quiet:
                    time.sleep(0.001)
        stats = executor.stats()
    return overshoots, wrong, stats


def overshoot_bare(samples: int, timeout: float) -> list[float]:
    """Overshoots (ms) of ``future.result(timeout)`` on a task that waits for an event
    (set after each timeout, so the bare pool's one worker is free again)."""
    overshoots: list[float] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(samples):
            release = threading.Event()
            began = time.perf_counter()
            future = pool.submit(release.wait, 60)
            with contextlib.suppress(concurrent.futures.TimeoutError):
                future.result(timeout=timeout)
            overshoots.append((time.perf_counter() - began - timeout) * 1000)
            release.set()
            future.result()
    return overshoots


def describe(values: list[float]) -> str:
    return (
        f"p50 {percentile(values, 50):.3f} ms, p99 {percentile(values, 99):.3f} ms, "
        f"max {max(values):.3f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and samples")
    parser.add_argument("--samples", type=int, help="hanging calls (default 200, quick 40)")
    parser.add_argument("--timeout", type=float, default=0.02, help="seconds (default 0.02)")
    parser.add_argument("--hang", choices=("wait", "sleep", "spin"), default="wait")
    parser.add_argument(
        "--overlap",
        action="store_true",
        help="start each hanging call at once, not after the last one's worker ended",
    )
    parser.add_argument("--rounds", type=int, help="timing rounds (default 15, quick 3)")
    options = parser.parse_args(argv)
    quick = options.quick
    rounds = options.rounds or (QUICK.rounds if quick else FULL.rounds)
    round_ms = QUICK.round_ms if quick else FULL.round_ms
    samples = options.samples or (40 if quick else 200)

    print(
        f"CPUs: {os.cpu_count()}; Python {platform.python_version()}; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print()
    print(
        f"Per-call cost of a timed call (timeout=5, trivial function), median of {rounds} rounds:"
    )
    for label, pin in (("as scheduled", False), ("all threads on one CPU", True)):
        timings = per_call_cost(rounds, round_ms, pin)
        if timings is None:
            print(f"  {label}: cannot pin threads on this machine")
            continue
        ours, bare = timings["ours"], timings["bare"]
        ratio = ours.wall / bare.wall
        print(
            f"  {label}: execute {ours.wall / 1000:.2f} µs, bare pool {bare.wall / 1000:.2f} µs"
            f" -> {ratio:.2f}x (target ≤ 0.8x);"
            f" CPU time {ours.cpu / 1000:.2f} vs {bare.cpu / 1000:.2f} µs"
            f" -> {ours.cpu / bare.cpu:.2f}x"
        )
    print()
    print(
        f"Deadline overshoot, {samples} hanging calls ({options.hang}), timeout {options.timeout} s:"
    )
    ours_ms, wrong, stats = overshoot_ours(
        samples, options.timeout, options.hang, overlap=options.overlap
    )
    print(f"  execute:            {describe(ours_ms)} (target p99 < 5 ms on an idle machine)")
    if wrong:
        print(f"  answers that were not Err(ToolTimeout): {wrong}")
    print(
        f"  executor stats at the end: timed_out {stats['timed_out']}, "
        f"abandoned {stats['abandoned']}, saturated {stats.get('saturated', 0)}"
    )
    bare_ms = overshoot_bare(samples, options.timeout)
    print(f"  bare future.result: {describe(bare_ms)} (reference: it cannot stop its worker)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
