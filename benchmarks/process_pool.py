"""``isolation="process"`` against pebble's reusable, killable process pool (issue 15, part 1).

Run it with ``.venv/bin/python benchmarks/process_pool.py [--quick]``. Everything is
measured in one process and one run, so the ratios hold on a noisy machine even
when the absolute times move. It prints figures with the target beside each; it is
not a test and always exits 0 (unless it crashes).

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

Issue 26 (plain figures; the target beside each; the load average with each row):

5. **Queued calls.** 100 calls of 20 ms of work, ``timeout=0.1``, on
   ``process_workers=2``: as one ``execute_many`` batch, and from 100 caller threads
   at once; pebble's ``ProcessPool(2)`` with 100 ``schedule(..., timeout=0.1)``. How
   many came back ok, how many as a timeout of a call that never started (the tool
   writes a file when it starts), how many timed out while running, and (ours) how
   many were refused as not started (``ExecutorSaturated``: no child came free
   within ``queue_timeout``, here the timeout). Target: no timeout of a call that
   never started. Rounds interleaved, min-median-max over them.
6. **A batch of 1,000 tiny calls** on 2 workers: ``execute_many`` against pebble's
   1,000 ``schedule`` then ``result()``; the ratio of each interleaved round,
   min-median-max. Target: ≤ 1.0x.
7. **Back-to-back kills.** 60 calls in a row of a tool that hangs, ``timeout=0.1``,
   on ``process_workers=1``, with no pause for the spare: the overshoot is when the
   caller gets ``Err(ToolTimeout)`` minus the attempt's deadline (the tool's
   ``ctx.deadline``, written to a file when it starts); a call lost is one that
   never ran or did not come back as a timeout. Target: p99 ≤ 10 ms, none lost,
   under two busy loops (``--busy 2`` starts them beside the run, each
   ``python3 -c "while True: pass"``, and ends them by pid).

``--only issue26`` runs sections 5-7 alone, ``--only kills`` section 7 alone;
``--json PATH`` also writes sections 5-7's figures there (for ``record.py``).
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

from nous_tools import Err, ExecutorSaturated, RunContext, Tool, ToolExecutor, ToolTimeout

ARGS: dict[str, t.Any] = {"a": "x", "b": 1, "c": True}

Loop = c.Callable[[int], None]


def echo(a: str, b: int, c: bool) -> str:
    return a


def hang() -> None:
    time.sleep(60)


def work(path: str, seconds: float = 0.02) -> int:
    """Say "started" (a file), then keep a CPU busy for ``seconds``."""
    pathlib.Path(path).touch()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return 1


def hang_noting_deadline(ctx: RunContext[t.Any], path: str) -> None:
    """Write the attempt's deadline (``ctx.deadline``) to ``path``, then hang."""
    pathlib.Path(path + ".tmp").write_text(repr(ctx.deadline))
    os.replace(path + ".tmp", path)
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


# -- issue 26: queued calls, a batch of 1,000, back-to-back kills ------------------------


def spread(values: c.Sequence[float], fmt: str = "{:.2f}") -> str:
    """min-median-max of ``values``."""
    return "-".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def queued(pebble_pool: t.Any, rounds: int) -> dict[str, list[int]]:
    """Section 5: per round, ours (batch, threads) and pebble's counts."""
    import threading

    tool = Tool.from_function(work, isolation="process", timeout=0.1, retries=0)
    counts: dict[str, list[int]] = {}

    def count(prefix: str, results: list[t.Any], started: c.Callable[[int], bool]) -> None:
        ok = never = ran = refused = 0
        for i, result in enumerate(results):
            if result is True or (not isinstance(result, (Err, bool)) and result.is_ok()):
                ok += 1
            elif isinstance(result, Err) and isinstance(result.reason, ExecutorSaturated):
                refused += 1
            elif result is False or isinstance(result.reason, ToolTimeout):
                if started(i):
                    ran += 1
                else:
                    never += 1
        for key, value in (("ok", ok), ("never", never), ("ran", ran), ("refused", refused)):
            counts.setdefault(f"{prefix} {key}", []).append(value)

    with ToolExecutor(process_workers=2) as executor, tempfile.TemporaryDirectory() as tmp:
        executor.execute_many([(tool, {"path": os.path.join(tmp, "warm")})] * 4)
        for r in range(rounds):
            paths = [os.path.join(tmp, f"b{r}-{i}") for i in range(100)]
            results = executor.execute_many([(tool, {"path": p}) for p in paths])
            count("batch", results, lambda i, paths=paths: os.path.exists(paths[i]))

            paths = [os.path.join(tmp, f"t{r}-{i}") for i in range(100)]
            answers: list[t.Any] = [None] * 100
            barrier = threading.Barrier(100)

            def call(
                i: int,
                paths: list[str] = paths,
                answers: list[t.Any] = answers,
                barrier: threading.Barrier = barrier,
            ) -> None:
                barrier.wait()
                answers[i] = executor.execute(tool, {"path": paths[i]})

            threads = [threading.Thread(target=call, args=(i,)) for i in range(100)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            count("threads", answers, lambda i, paths=paths: os.path.exists(paths[i]))

            paths = [os.path.join(tmp, f"p{r}-{i}") for i in range(100)]
            futures = [pebble_pool.schedule(work, args=(p,), timeout=0.1) for p in paths]
            outcomes: list[t.Any] = []
            for future in futures:
                try:
                    future.result()
                    outcomes.append(True)
                except TimeoutError:
                    outcomes.append(False)
            count("pebble", outcomes, lambda i, paths=paths: os.path.exists(paths[i]))
    return counts


def batch_of_1000(pebble_pool: t.Any, rounds: int) -> list[float]:
    """Section 6: ours / pebble's time per interleaved round."""
    tool = Tool.from_function(echo, isolation="process", timeout=5, retries=0, validate_args=False)
    ratios: list[float] = []
    with ToolExecutor(process_workers=2) as executor:
        calls = [(tool, ARGS)] * 1000
        executor.execute_many(calls[:100])
        for f in [pebble_pool.schedule(echo, kwargs=ARGS, timeout=5) for _ in range(100)]:
            f.result()
        for _ in range(rounds):
            began = time.perf_counter()
            results = executor.execute_many(calls)
            ours = time.perf_counter() - began
            assert all(result.is_ok() for result in results)
            began = time.perf_counter()
            futures = [pebble_pool.schedule(echo, kwargs=ARGS, timeout=5) for _ in range(1000)]
            for future in futures:
                future.result()
            ratios.append(ours / (time.perf_counter() - began))
    return ratios


def back_to_back(count: int) -> tuple[list[float], int]:
    """Section 7: overshoot in ms of each kill against the attempt's deadline; calls lost."""
    tool = Tool.from_function(hang_noting_deadline, isolation="process", timeout=0.1, retries=0)
    over: list[float] = []
    lost = 0
    with ToolExecutor(process_workers=1) as executor, tempfile.TemporaryDirectory() as tmp:
        executor.execute(Tool.from_function(echo, isolation="process", timeout=5), ARGS)
        for i in range(count):
            path = os.path.join(tmp, str(i))
            result = executor.execute(tool, {"path": path})
            ended = time.monotonic()
            try:
                deadline = float(pathlib.Path(path).read_text())
            except OSError:
                lost += 1  # it never ran
                continue
            if not (isinstance(result, Err) and isinstance(result.reason, ToolTimeout)):
                lost += 1
                continue
            over.append((ended - deadline) * 1000)
    return over, lost


def issue_26(pebble_pool: t.Any | None, quick: bool, kills_only: bool = False) -> dict[str, float]:
    """Sections 5-7 (``kills_only``: section 7 alone); their figures, for ``--json``."""
    rounds, batch_rounds, kills_in_a_row = (2, 3, 30) if quick else (5, 9, 60)
    figures: dict[str, float] = {}
    if not kills_only:
        assert pebble_pool is not None
        print(f"5. queued calls: {rounds} rounds ... (load {load()})", flush=True)
        counts = queued(pebble_pool, rounds)
        print(f"6. a batch of 1,000: {batch_rounds} rounds ... (load {load()})", flush=True)
        ratios = batch_of_1000(pebble_pool, batch_rounds)
    print(f"7. {kills_in_a_row} kills back to back ... (load {load()})", flush=True)
    over, lost = back_to_back(kills_in_a_row)
    print()
    print("Issue 26 (min-median-max over the rounds):")
    print()
    if not kills_only:
        print(
            "| case | ok | timeout, never started | timeout, ran | not started (refused) | load |"
        )
        print("|---|---|---|---|---|---|")
        names = {"batch": "ours, one batch", "threads": "ours, 100 callers", "pebble": "pebble"}
        for prefix, name in names.items():
            cells = " | ".join(
                spread(counts[f"{prefix} {key}"], "{:.0f}")
                for key in ("ok", "never", "ran", "refused")
            )
            print(
                f"| 5. 100 queued 20 ms calls, timeout 0.1 s, 2 workers: {name} | {cells} "
                f"| {load()} |"
            )
            for key in ("ok", "never", "ran", "refused"):  # totals over the rounds
                figures[f"queued.{prefix}.{key}"] = sum(counts[f"{prefix} {key}"])
        figures["queued.calls"] = 100 * rounds
        never = max(counts["batch never"] + counts["threads never"])
        print(
            f"   target: no timeout of a call that never started; ours at most {never} in a round"
        )
        print(
            f"6. 1,000 tiny calls as a batch, 2 workers: ours / pebble {spread(ratios)}x "
            f"(target ≤ 1.0x; load {load()})"
        )
        figures["batch1000.ratio"] = statistics.median(ratios)
    figures["kills.count"] = kills_in_a_row
    figures["kills.lost"] = lost
    if over:
        print(
            f"7. back-to-back kills: overshoot p50 {percentile(over, 50):.2f} ms, p99 "
            f"{percentile(over, 99):.2f} ms, max {max(over):.2f} ms over {len(over)} kills; "
            f"{lost} of {kills_in_a_row} calls lost (target p99 ≤ 10 ms, none lost; load {load()})"
        )
        figures["kills.p50_ms"] = percentile(over, 50)
        figures["kills.p99_ms"] = percentile(over, 99)
        figures["kills.max_ms"] = max(over)
    else:
        print(f"7. back-to-back kills: every call lost ({lost})")
    return figures


def busy_loops(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` processes that each keep a CPU busy (``python3 -c "while True: pass"``)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


# -- the report -------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (fewer rounds)")
    parser.add_argument(
        "--busy", type=int, default=0, help="busy loops to run beside the benchmark (default 0)"
    )
    parser.add_argument(
        "--only",
        choices=["issue26", "kills"],
        help="run sections 5-7 only (issue26) or section 7 only (kills)",
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write sections 5-7's figures there (with --only)"
    )
    options = parser.parse_args(argv)
    loops = busy_loops(options.busy)
    try:
        return report(options)
    finally:
        for loop in loops:  # ended by pid
            os.kill(loop.pid, signal.SIGKILL)
            loop.wait()


def report(options: argparse.Namespace) -> int:
    try:
        import pebble
    except ImportError:
        print("pebble is not installed: pip install -e '.[test]'")
        return 0
    rounds, kill_count, pebble_kills, grand = (3, 20, 5, 3) if options.quick else (15, 200, 30, 10)

    print(
        f"nous_tools {nous_tools.__version__}, pebble {pebble.__version__ if hasattr(pebble, '__version__') else '?'}, "
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {options.busy} busy loop(s) "
        f"beside, load average {load()}"
    )
    if options.only == "kills":
        save(options, issue_26(None, options.quick, kills_only=True))
        return 0
    if options.only == "issue26":
        with pebble.ProcessPool(2) as pebble_pool:
            save(options, issue_26(pebble_pool, options.quick))
        return 0
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
    print("Figures with a target (issue 15, part 1):")
    print(f"- trivial call / pebble's reused-worker round trip: {ratio:.2f}x (target ≤ 1.5x)")
    print(f"- kill overshoot p99: {ms(p99)} (target ≤ 10 ms)")
    print(f"- next call after a kill / a normal call: {after / normal:.2f}x (target ≤ 5x)")
    print(f"- surviving grandchildren: {ours_left} of {tries} (target 0)")
    print()
    print(
        f"pool after the run: started {stats['process_started']}, killed "
        f"{stats['process_killed']}, completed {stats['process_completed']}"
    )
    print()
    with pebble.ProcessPool(2) as pebble_pool:
        save(options, issue_26(pebble_pool, options.quick))
    return 0


def save(options: argparse.Namespace, figures: dict[str, float]) -> None:
    """``--json``: sections 5-7's figures as one run, with the busy loops beside it."""
    if options.json:
        import _results  # beside this file

        _results.dump(
            options.json, "process_pool", [_results.run({**figures, "busy": options.busy})]
        )


if __name__ == "__main__":
    raise SystemExit(main())
