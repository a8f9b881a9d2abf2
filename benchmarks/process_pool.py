"""``isolation="process"`` against pebble's reusable, killable process pool (issue 15, part 1).

Run it with ``.venv/bin/python benchmarks/process_pool.py [--quick]``. Everything is
measured in one process and one run, so the ratios hold on a noisy machine even
when the absolute times move. It prints figures and says met/missed for each
target; it is not a test and always exits 0 (unless it crashes).

1. **Round trip.** A trivial tool (``echo(a, b, c) -> a``, ``timeout=5``, no
   validation) run with ``isolation="process"`` on a ``ToolExecutor(process_workers=1)``,
   against ``pebble.ProcessPool(1).schedule(echo, kwargs=..., timeout=5).result()``
   and ``concurrent.futures.ProcessPoolExecutor(1).submit(...).result()`` (which
   reuses its worker but cannot kill it), each on a warm worker. Each case is a
   loop of N calls (N calibrated so a round takes about 50 ms), rounds interleaved
   across the cases, the median quoted. Target: ours ≤ 1.5x pebble's.
2. **Kill overshoot.** A tool that sleeps 60 s, ``timeout=0.1``: the time the caller
   gets ``Err(ToolTimeout)`` minus the deadline, p50/p99/max, over many kills
   (each call starts when a spare is ready, so it measures the kill, not a
   start-up). pebble's ``schedule(hang, timeout=0.1).result()`` for reference.
   Target: p99 ≤ 10 ms.
3. **The next call after a kill**, against a normal call measured just before the
   kill: medians and their ratio. Target: ≤ 5x.
4. **Surviving grandchildren.** A tool that starts ``sleep 60`` and hangs, killed at
   ``timeout=0.5``: how many grandchildren are still alive 2 s after the kill.
   pebble for reference (its workers share the parent's process group; the
   survivors are killed by this script afterwards). Target: 0.
"""

from __future__ import annotations

import argparse
import collections.abc as c
import concurrent.futures
import gc
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import typing as t

try:
    import nous_tools
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    import nous_tools

import contextlib

from nous_tools import Tool, ToolExecutor, ToolTimeout

ARGS: dict[str, t.Any] = {"a": "x", "b": 1, "c": True}

Loop = c.Callable[[int], None]


def echo(a: str, b: int, c: bool) -> str:
    return a


def hang() -> None:
    time.sleep(60)


def grandchild_then_hang(pidfile: str) -> None:
    grandchild = subprocess.Popen(["sleep", "60"])
    pathlib.Path(pidfile + ".tmp").write_text(str(grandchild.pid))
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(60)


# -- helpers -------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(condition: c.Callable[[], bool], within: float) -> bool:
    end = time.monotonic() + within
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.002)
    return True


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def _time_loop(loop: Loop, n: int) -> float:
    enabled = gc.isenabled()
    gc.disable()
    try:
        began = time.perf_counter_ns()
        loop(n)
        return time.perf_counter_ns() - began
    finally:
        if enabled:
            gc.enable()


def measure(loops: dict[str, Loop], rounds: int, round_ms: float) -> dict[str, float]:
    """Median ns per call of each loop, rounds interleaved across the loops."""
    sizes: dict[str, int] = {}
    for key, loop in loops.items():
        n = 1
        while (elapsed := _time_loop(loop, n)) < round_ms * 1e6 / 4 and n < 1_000_000:
            n *= 2
        sizes[key] = max(1, int(n * round_ms * 1e6 / max(elapsed, 1)))
        _time_loop(loop, sizes[key])  # warm-up at the final size
    per_call: dict[str, list[float]] = {key: [] for key in loops}
    for _ in range(rounds):
        for key, loop in loops.items():
            per_call[key].append(_time_loop(loop, sizes[key]) / sizes[key])
    return {key: statistics.median(values) for key, values in per_call.items()}


def ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


# -- the cases ---------------------------------------------------------------------------


def round_trip(executor: ToolExecutor, pebble_pool: t.Any, rounds: int) -> dict[str, float]:
    tool = Tool.from_function(echo, isolation="process", timeout=5, retries=0, validate_args=False)
    execute = executor.execute

    def ours(n: int) -> None:
        for _ in range(n):
            execute(tool, ARGS)

    def pebble(n: int) -> None:
        for _ in range(n):
            pebble_pool.schedule(echo, kwargs=ARGS, timeout=5).result()

    loops: dict[str, Loop] = {"ours": ours, "pebble": pebble}
    bare = concurrent.futures.ProcessPoolExecutor(1)

    def futures(n: int) -> None:
        for _ in range(n):
            bare.submit(echo, **ARGS).result(timeout=5)

    loops["futures"] = futures
    assert execute(tool, ARGS).unwrap() == "x"
    try:
        return measure(loops, rounds, 50.0)
    finally:
        bare.shutdown()


def kills(
    executor: ToolExecutor, pebble_pool: t.Any, count: int, pebble_count: int
) -> dict[str, t.Any]:
    """Kill overshoot, and the next call after each kill against a normal call."""
    hung = Tool.from_function(hang, isolation="process", timeout=0.1, retries=0)
    trivial = Tool.from_function(
        echo, isolation="process", timeout=5, retries=0, validate_args=False
    )

    def quiet() -> bool:  # no start-up under way: measure calls, not a start-up beside them
        figures = executor.stats()
        return figures["process_starting"] == 0 and figures["process_idle"] >= 1

    overshoot: list[float] = []
    normal: list[float] = []
    after: list[float] = []
    queued = 0
    for _ in range(count):
        wait_until(quiet, 10)
        began = time.perf_counter_ns()
        executor.execute(trivial, ARGS)
        normal.append(time.perf_counter_ns() - began)
        killed = executor.stats()["process_killed"]
        began = time.perf_counter_ns()
        result = executor.execute(hung, {})
        ended = time.perf_counter_ns()
        assert not result.is_ok() and isinstance(result.reason, ToolTimeout)
        if executor.stats()["process_killed"] == killed:
            queued += 1  # timed out waiting for a child: not a kill
        else:
            overshoot.append(ended - began - 0.1e9)
        began = time.perf_counter_ns()
        executor.execute(trivial, ARGS)
        after.append(time.perf_counter_ns() - began)

    pebble_overshoot: list[float] = []
    pebble_normal: list[float] = []
    pebble_after: list[float] = []
    for _ in range(pebble_count):
        began = time.perf_counter_ns()
        pebble_pool.schedule(echo, kwargs=ARGS, timeout=5).result()
        pebble_normal.append(time.perf_counter_ns() - began)
        began = time.perf_counter_ns()
        with contextlib.suppress(TimeoutError):
            pebble_pool.schedule(hang, timeout=0.1).result()
        pebble_overshoot.append(time.perf_counter_ns() - began - 0.1e9)
        began = time.perf_counter_ns()
        pebble_pool.schedule(echo, kwargs=ARGS, timeout=5).result()
        pebble_after.append(time.perf_counter_ns() - began)
    return {
        "overshoot": overshoot,
        "queued": queued,
        "normal": normal,
        "after": after,
        "pebble_overshoot": pebble_overshoot,
        "pebble_normal": pebble_normal,
        "pebble_after": pebble_after,
    }


def grandchildren(executor: ToolExecutor, pebble_pool: t.Any, count: int) -> tuple[int, int, int]:
    """(ours surviving, pebble surviving, tries) of grandchildren 2 s after a kill."""
    tool = Tool.from_function(grandchild_then_hang, isolation="process", timeout=0.5, retries=0)
    ours = theirs = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(count):
            pidfile = os.path.join(tmp, f"ours-{i}")
            executor.execute(tool, {"pidfile": pidfile})
            pid = int(pathlib.Path(pidfile).read_text())
            if not wait_until(lambda pid=pid: not alive(pid), 2.0):
                ours += 1
                os.kill(pid, signal.SIGKILL)
        for i in range(count):
            pidfile = os.path.join(tmp, f"pebble-{i}")
            with contextlib.suppress(TimeoutError):
                pebble_pool.schedule(grandchild_then_hang, args=(pidfile,), timeout=0.5).result()
            pid = int(pathlib.Path(pidfile).read_text())
            if not wait_until(lambda pid=pid: not alive(pid), 2.0):
                theirs += 1
                os.kill(pid, signal.SIGKILL)
    return ours, theirs, count


# -- the report -------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (fewer rounds)")
    options = parser.parse_args(argv)
    try:
        import pebble
    except ImportError:
        print("pebble is not installed: pip install -e '.[test]'")
        return 0
    rounds, kill_count, pebble_kills, grand = (3, 20, 5, 3) if options.quick else (15, 200, 30, 10)

    print(
        f"nous_tools {nous_tools.__version__}, pebble {pebble.__version__ if hasattr(pebble, '__version__') else '?'}, "
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    )
    with ToolExecutor(process_workers=1) as executor, pebble.ProcessPool(1) as pebble_pool:
        print(f"1. round trip: {rounds} rounds of ~50 ms, interleaved ...", flush=True)
        trip = round_trip(executor, pebble_pool, rounds)
        print(f"2-3. {kill_count} kills (pebble: {pebble_kills}) ...", flush=True)
        killed = kills(executor, pebble_pool, kill_count, pebble_kills)
        print(f"4. {grand} grandchildren each ...", flush=True)
        ours_left, pebble_left, tries = grandchildren(executor, pebble_pool, grand)
        stats = executor.stats()

    ratio = trip["ours"] / trip["pebble"]
    over = killed["overshoot"]
    p50, p99, worst = (percentile(over, 50), percentile(over, 99), max(over)) if over else (0, 0, 0)
    normal, after = statistics.median(killed["normal"]), statistics.median(killed["after"])
    pover = killed["pebble_overshoot"]
    pnormal = statistics.median(killed["pebble_normal"])
    pafter = statistics.median(killed["pebble_after"])
    print()
    print("| case | ours | pebble | concurrent.futures |")
    print("|---|---|---|---|")
    print(
        f"| trivial call, median per call | {ms(trip['ours'])} | {ms(trip['pebble'])} | "
        f"{ms(trip['futures'])} (cannot kill) |"
    )
    print(
        f"| kill overshoot p50 / p99 / max | {ms(p50)} / {ms(p99)} / {ms(worst)} "
        f"({len(over)} kills, {killed['queued']} queued) | {ms(percentile(pover, 50))} / "
        f"{ms(percentile(pover, 99))} / {ms(max(pover))} ({len(pover)} kills) | - |"
    )
    print(
        f"| normal call / next call after a kill, medians | {ms(normal)} / {ms(after)} "
        f"({after / normal:.2f}x) | {ms(pnormal)} / {ms(pafter)} ({pafter / pnormal:.2f}x) | - |"
    )
    print(
        f"| grandchildren alive 2 s after the kill | {ours_left} of {tries} | "
        f"{pebble_left} of {tries} | - |"
    )
    print()
    print("Targets (issue 15, part 1):")
    print(
        f"- trivial call ≤ 1.5x pebble's reused-worker round trip: {ratio:.2f}x — "
        f"{verdict(ratio <= 1.5)}"
    )
    print(f"- kill overshoot p99 ≤ 10 ms: {ms(p99)} — {verdict(bool(over) and p99 <= 10e6)}")
    print(
        f"- next call after a kill ≤ 5x a normal call: {after / normal:.2f}x — "
        f"{verdict(after / normal <= 5)}"
    )
    print(f"- 0 surviving grandchildren: {ours_left} — {verdict(ours_left == 0)}")
    print()
    print(
        f"pool after the run: started {stats['process_started']}, killed "
        f"{stats['process_killed']}, completed {stats['process_completed']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
