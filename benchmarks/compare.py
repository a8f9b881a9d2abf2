"""nous_tools side by side with the limit (a direct call), a bare thread pool and the peers.

Run it with ``make bench`` (installs the ``bench`` extra first) or
``.venv/bin/python benchmarks/compare.py [--quick] [--rounds N] [--output PATH]``.

Everything is measured in one process, as ratios: the machine is shared and noisy,
so absolute times move from run to run while ratios measured in the same run hold.
Each per-call case is a loop of N calls (N calibrated so that a round takes about
``--round-ms`` milliseconds), warmed up, then timed over several rounds with the
rounds interleaved across the cases (a slow moment of the machine hits all of
them); the median per-call time is quoted. The garbage collector is off inside a
timed loop, as with :mod:`timeit`.

This is a benchmark, not a test: it reports the targets of issue 7 as met or
missed and always exits 0 (unless it crashes). A full run writes
``benchmarks/RESULTS.md``; ``--quick`` (a smoke run, well under a minute) writes
only when ``--output`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import collections.abc as c
import concurrent.futures
import datetime
import gc
import importlib.metadata
import os
import pathlib
import platform
import statistics
import sys
import threading
import time
import tracemalloc
import typing as t

import attrs

try:
    import nous_tools
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    import nous_tools

from nous_tools import Ok, Registry, Tool, ToolExecutor

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"

Loop = c.Callable[[int], None]


def echo(a: str, b: int, c: bool) -> str:
    """Return ``a``: the trivial function every case calls.

    Args:
        a: A text.
        b: A number.
        c: A flag.
    """
    return a


ARGS: dict[str, t.Any] = {"a": "x", "b": 1, "c": True}


def sleep_50ms() -> str:
    time.sleep(0.05)
    return "slept"


# -- settings -------------------------------------------------------------------


@attrs.frozen
class Settings:
    rounds: int
    round_ms: float
    batch_rounds: int
    throughput_rounds: int
    throughput_threads: int
    throughput_calls: int
    memory_warmup: int
    memory_calls: int
    quick: bool


FULL = Settings(
    rounds=15,
    round_ms=50.0,
    batch_rounds=7,
    throughput_rounds=5,
    throughput_threads=16,
    throughput_calls=2_000,
    memory_warmup=10_000,
    memory_calls=100_000,
    quick=False,
)
QUICK = Settings(
    rounds=3,
    round_ms=15.0,
    batch_rounds=2,
    throughput_rounds=1,
    throughput_threads=16,
    throughput_calls=200,
    memory_warmup=2_000,
    memory_calls=10_000,
    quick=True,
)


# -- timing ----------------------------------------------------------------------


def _time_loop(loop: Loop, n: int) -> tuple[int, int]:
    """(wall ns, process CPU ns) for ``loop(n)``, with the garbage collector off
    (as timeit does). The CPU time of all threads excludes the moments the process
    waited for a core that another process held: a cross-check on a noisy machine."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        cpu = time.process_time_ns()
        began = time.perf_counter_ns()
        loop(n)
        wall = time.perf_counter_ns() - began
        return wall, time.process_time_ns() - cpu
    finally:
        if enabled:
            gc.enable()


def calibrate(loop: Loop, round_ns: float) -> int:
    """The N for which ``loop(N)`` takes about ``round_ns``; also warms the loop up."""
    n = 1
    while True:
        elapsed, _ = _time_loop(loop, n)
        if elapsed >= round_ns / 4 or n >= 10_000_000:
            break
        n *= 4 if elapsed < round_ns / 40 else 2
    n = max(1, int(n * round_ns / max(elapsed, 1)))
    _time_loop(loop, n)  # one more warm-up round at the final size
    return n


@attrs.frozen
class Timing:
    """Median ns per call over the rounds: wall clock and process CPU time."""

    wall: float
    cpu: float


def measure(loops: dict[str, Loop], settings: Settings) -> dict[str, Timing]:
    """Median ns per call of each loop, over rounds interleaved across the loops."""
    round_ns = settings.round_ms * 1e6
    sizes = {key: calibrate(loop, round_ns) for key, loop in loops.items()}
    walls: dict[str, list[float]] = {key: [] for key in loops}
    cpus: dict[str, list[float]] = {key: [] for key in loops}
    for _ in range(settings.rounds):
        for key, loop in loops.items():
            n = sizes[key]
            wall, cpu = _time_loop(loop, n)
            walls[key].append(wall / n)
            cpus[key].append(cpu / n)
    return {
        key: Timing(statistics.median(walls[key]), statistics.median(cpus[key])) for key in loops
    }


def measure_one_cpu(settings: Settings, kw: dict[str, t.Any]) -> dict[str, Timing] | None:
    """Cases 4 and 5 again with every thread involved pinned to one CPU.

    On a 2-core machine that another process keeps busy, a hand-off to a worker
    thread costs whatever the scheduler makes the wake-up cost, and which core a
    pool's worker lands on decides it (runs flip between ~20 and ~200 µs per call).
    Pinned to one CPU, caller and worker share a core: the figures then show the
    hand-off's own cost. Worker threads inherit the affinity of the thread that
    starts them, so fresh pools are made while the caller is pinned. None where
    affinity cannot be set (not Linux) or there is one CPU only."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    setaffinity = getattr(os, "sched_setaffinity", None)
    if getaffinity is None or setaffinity is None:
        return None
    allowed = getaffinity(0)
    if len(allowed) < 2:
        return None
    tool = Tool.from_function(echo, timeout=5, validate_args=False)
    workers = nous_tools.default_executor().max_workers
    setaffinity(0, {min(allowed)})  # this thread only; threads it starts inherit it
    try:
        with (
            ToolExecutor(max_workers=workers) as executor,
            concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool,
        ):
            loops = {
                "4": loop_execute(executor.execute, tool, kw),
                "5": loop_bare_pool(pool, kw),
            }
            return measure(loops, settings)
    finally:
        setaffinity(0, allowed)


# -- the per-call loops ----------------------------------------------------------


def loop_direct(fn: c.Callable[..., t.Any], kw: dict[str, t.Any]) -> Loop:
    def run(n: int) -> None:
        for _ in range(n):
            fn(**kw)

    return run


def loop_execute(execute: c.Callable[..., t.Any], tool: t.Any, kw: dict[str, t.Any]) -> Loop:
    def run(n: int) -> None:
        for _ in range(n):
            execute(tool, kw)

    return run


def loop_bare_pool(pool: concurrent.futures.ThreadPoolExecutor, kw: dict[str, t.Any]) -> Loop:
    submit = pool.submit

    def run(n: int) -> None:
        for _ in range(n):
            submit(echo, **kw).result(timeout=5)

    return run


def loop_invoke(invoke: c.Callable[[t.Any], t.Any], kw: dict[str, t.Any]) -> Loop:
    def run(n: int) -> None:
        for _ in range(n):
            invoke(kw)

    return run


# -- peers -------------------------------------------------------------------------


@attrs.define
class Peer:
    """A peer's loop, or why there is none (``reason``)."""

    name: str
    version: str | None = None
    loop: Loop | None = None
    reason: str = ""
    close: c.Callable[[], None] | None = None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def peer_langchain() -> Peer:
    peer = Peer("langchain-core", _version("langchain-core"))
    try:
        from langchain_core.tools import tool as lc_tool
    except ImportError:
        peer.reason = "not installed"
        return peer
    lc = lc_tool(echo)
    if lc.invoke(ARGS) != "x":
        peer.reason = "returned an unexpected value"
        return peer
    peer.loop = loop_invoke(lc.invoke, ARGS)
    return peer


def peer_smolagents() -> Peer:
    peer = Peer("smolagents", _version("smolagents"))
    try:
        from smolagents import tool as sm_tool  # type: ignore[import-untyped]
    except ImportError:
        peer.reason = "not installed"
        return peer
    sm = sm_tool(echo)  # smolagents' @tool needs the docstring's Args section
    if sm(**ARGS) != "x":
        peer.reason = "returned an unexpected value"
        return peer
    peer.loop = loop_direct(sm, ARGS)
    return peer


def peer_pydantic_ai() -> Peer:
    """pydantic-ai's function-tool path without a model: a ``FunctionToolset``, its
    ``ToolsetTool.args_validator`` (what the agent's tool manager validates with) and
    ``call_tool``, in one event loop. A ``TestModel`` only fills ``RunContext.model``;
    it is never asked anything. pydantic-ai runs a sync tool in a worker thread."""
    peer = Peer("pydantic-ai-slim", _version("pydantic-ai-slim"))
    try:
        from pydantic_ai import RunContext as PaRunContext
        from pydantic_ai.models.test import TestModel
        from pydantic_ai.toolsets import FunctionToolset
        from pydantic_ai.usage import RunUsage
    except ImportError:
        peer.reason = "not installed"
        return peer
    toolset = FunctionToolset([echo])
    ctx = PaRunContext(deps=None, model=TestModel(), usage=RunUsage())
    event_loop = asyncio.new_event_loop()
    try:
        tools = event_loop.run_until_complete(toolset.get_tools(ctx))
        pa_tool = tools["echo"]
        validate = pa_tool.args_validator.validate_python
        call_tool = toolset.call_tool

        async def many(n: int) -> None:
            for _ in range(n):
                await call_tool("echo", validate(ARGS), ctx, pa_tool)

        async def once() -> t.Any:
            return await call_tool("echo", validate(ARGS), ctx, pa_tool)

        if event_loop.run_until_complete(once()) != "x":
            raise RuntimeError("returned an unexpected value")
    except Exception as exc:
        event_loop.close()
        peer.reason = f"could not be driven without a model: {type(exc).__name__}: {exc}"
        return peer

    def run(n: int) -> None:
        event_loop.run_until_complete(many(n))

    peer.loop = run
    peer.close = event_loop.close
    return peer


# -- batch, throughput, memory ---------------------------------------------------


@attrs.frozen
class Batch:
    sequential_ns: float  # median over rounds of the sum of 8 single calls
    slowest_ns: float  # median over rounds of the slowest of those 8 calls
    batch_ns: float  # median over rounds of one execute_many of the 8


def measure_batch(settings: Settings) -> Batch:
    tools = [
        Tool.from_function(sleep_50ms, name=f"sleep_{i}", timeout=5, validate_args=False)
        for i in range(8)
    ]
    sequential: list[float] = []
    slowest: list[float] = []
    batch: list[float] = []
    with ToolExecutor(max_workers=8) as executor:
        executor.execute_many([(tool, {}) for tool in tools])  # warm-up: start the workers
        for _ in range(settings.batch_rounds):
            singles = []
            for tool in tools:
                began = time.perf_counter_ns()
                result = executor.execute(tool, {})
                singles.append(time.perf_counter_ns() - began)
                assert result == Ok("slept"), result
            sequential.append(sum(singles))
            slowest.append(max(singles))
            began = time.perf_counter_ns()
            results = executor.execute_many([(tool, {}) for tool in tools])
            batch.append(time.perf_counter_ns() - began)
            assert all(r == Ok("slept") for r in results), results
    return Batch(
        statistics.median(sequential), statistics.median(slowest), statistics.median(batch)
    )


def _run_threads(threads: int, body: c.Callable[[], int]) -> tuple[int, int]:
    """Start ``threads`` threads running ``body`` together; (wall ns, failures)."""
    barrier = threading.Barrier(threads + 1)
    failures = [0] * threads

    def worker(i: int) -> None:
        barrier.wait()
        failures[i] = body()

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    began = time.perf_counter_ns()
    for thread in pool:
        thread.join()
    return time.perf_counter_ns() - began, sum(failures)


@attrs.frozen
class Throughput:
    ours_per_s: float
    bare_per_s: float
    ours_ns: float  # wall ns / total calls
    bare_ns: float
    failures: int


def measure_throughput(settings: Settings) -> Throughput:
    threads, calls = settings.throughput_threads, settings.throughput_calls
    total = threads * calls
    tool = Tool.from_function(echo, timeout=5, validate_args=False)
    ours: list[float] = []
    bare: list[float] = []
    failures = 0
    with (
        ToolExecutor(max_workers=threads) as executor,
        concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool,
    ):

        def ours_body() -> int:
            execute = executor.execute
            bad = 0
            for _ in range(calls):
                if type(execute(tool, ARGS)) is not Ok:
                    bad += 1
            return bad

        def bare_body() -> int:
            submit = pool.submit
            bad = 0
            for _ in range(calls):
                if submit(echo, **ARGS).result(timeout=5) != "x":
                    bad += 1
            return bad

        # Warm-up: start every worker of both pools.
        _run_threads(
            threads, lambda: sum(type(executor.execute(tool, ARGS)) is not Ok for _ in range(50))
        )
        _run_threads(
            threads, lambda: sum(pool.submit(echo, **ARGS).result() != "x" for _ in range(50))
        )
        for _ in range(settings.throughput_rounds):
            wall, bad = _run_threads(threads, ours_body)
            ours.append(wall)
            failures += bad
            wall, bad = _run_threads(threads, bare_body)
            bare.append(wall)
            failures += bad
    ours_wall, bare_wall = statistics.median(ours), statistics.median(bare)
    return Throughput(
        ours_per_s=total / (ours_wall / 1e9),
        bare_per_s=total / (bare_wall / 1e9),
        ours_ns=ours_wall / total,
        bare_ns=bare_wall / total,
        failures=failures,
    )


def measure_memory(settings: Settings, tool: Tool) -> int:
    """tracemalloc growth (bytes) over ``memory_calls`` executions of case 2, after a
    warm-up of ``memory_warmup`` executions."""
    execute = nous_tools.execute
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(settings.memory_warmup):
            execute(tool, ARGS)
        gc.collect()
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(settings.memory_calls):
            execute(tool, ARGS)
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return after - before


# -- the report ------------------------------------------------------------------


@attrs.define
class Row:
    key: str
    case: str
    ns: float | None = None  # wall ns per call
    cpu: float | None = None  # process CPU ns per call
    note: str = ""  # shown instead of a time (e.g. "not installed")
    ratios: bool = True  # whether the ratio columns mean something for this row
    target: str = ""
    met: bool | None = None


@attrs.frozen
class Target:
    text: str
    figure: str
    met: bool | None  # None: could not be measured


def _us(ns: float) -> str:
    us = ns / 1000
    if us >= 10_000:
        return f"{us:,.0f}"
    if us >= 100:
        return f"{us:.1f}"
    return f"{us:.3f}" if us < 10 else f"{us:.2f}"


def _x(ratio: float) -> str:
    return f"{ratio:.0f}x" if ratio >= 100 else f"{ratio:.2f}x"


def _met(met: bool | None) -> str:
    return "—" if met is None else ("yes" if met else "**no**")


def table(rows: list[Row], direct_ns: float, us_ns: float) -> str:
    lines = [
        "| # | case | median µs per call | x direct call | x us (case 2) "
        "| CPU µs per call | target | met? |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        if row.ns is None:
            time_cell, direct_cell, us_cell = row.note or "—", "—", "—"
        else:
            time_cell = _us(row.ns)
            if row.ratios:
                direct_cell, us_cell = _x(row.ns / direct_ns), _x(row.ns / us_ns)
            else:
                direct_cell = us_cell = "—"
        cpu_cell = _us(row.cpu) if row.cpu is not None else "—"
        lines.append(
            f"| {row.key} | {row.case} | {time_cell} | {direct_cell} | {us_cell} "
            f"| {cpu_cell} | {row.target} | {_met(row.met)} |"
        )
    return "\n".join(lines)


@attrs.define
class Results:
    rows: list[Row]
    targets: list[Target]
    peers: str
    throughput_failures: int


def run(settings: Settings) -> Results:
    plain = Tool.from_function(echo, timeout=None, validate_args=False)
    validated = Tool.from_function(echo, timeout=None)
    timed = Tool.from_function(echo, timeout=5, validate_args=False)
    assert validated.parameters is not None and len(validated.parameters["properties"]) == 3
    registry = Registry([plain])
    executor = nous_tools.default_executor()
    for result in (
        nous_tools.execute(plain, ARGS),
        nous_tools.execute(validated, ARGS),
        nous_tools.execute(timed, ARGS),
        registry.execute("echo", ARGS),
    ):
        assert result == Ok("x"), result

    peers = [peer_langchain(), peer_smolagents(), peer_pydantic_ai()]
    bare_pool = concurrent.futures.ThreadPoolExecutor(max_workers=executor.max_workers)
    try:
        loops: dict[str, Loop] = {
            "1": loop_direct(echo, ARGS),
            "2": loop_execute(nous_tools.execute, plain, ARGS),
            "3": loop_execute(nous_tools.execute, validated, ARGS),
            "4": loop_execute(nous_tools.execute, timed, ARGS),
            "5": loop_bare_pool(bare_pool, ARGS),
            "6": loop_execute(registry.execute, "echo", ARGS),
        }
        for i, peer in enumerate(peers):
            if peer.loop is not None:
                loops[f"7{'abc'[i]}"] = peer.loop
        print(f"timing {len(loops)} per-call cases, {settings.rounds} rounds ...", flush=True)
        timings = measure(loops, settings)
    finally:
        bare_pool.shutdown(wait=True)
        for peer in peers:
            if peer.close is not None:
                peer.close()
    print("timing cases 4 and 5 on one CPU ...", flush=True)
    one_cpu = measure_one_cpu(settings, ARGS)
    print("timing the batch (case 8) ...", flush=True)
    batch = measure_batch(settings)
    print("timing the throughput (case 9) ...", flush=True)
    throughput = measure_throughput(settings)
    print("measuring memory (case 10) ...", flush=True)
    growth = measure_memory(settings, plain)

    ns = {key: timing.wall for key, timing in timings.items()}
    direct, us = ns["1"], ns["2"]
    targets: list[Target] = []

    def target(text: str, figure: str, met: bool | None) -> Target:
        found = Target(text, figure, met)
        targets.append(found)
        return found

    cpu = {key: timing.cpu for key, timing in timings.items()}

    def by_cpu(text: str) -> str:
        return f" (CPU time: {text})"

    r2 = us / direct
    t2 = target(
        "case 2 within 6x of the direct call",
        f"{r2:.2f}x" + by_cpu(f"{cpu['2'] / cpu['1']:.2f}x"),
        r2 <= 6,
    )
    sm = ns.get("7b")
    t2b = target(
        "case 2 no slower than the smolagents call",
        f"{us / sm:.2f}x smolagents" + by_cpu(f"{cpu['2'] / cpu['7b']:.2f}x")
        if sm
        else "smolagents not measured",
        (us <= sm) if sm else None,
    )
    add3 = (ns["3"] - us) / direct
    t3 = target(
        "case 3 adds at most 2x the direct-call time over case 2",
        f"+{add3:.2f}x direct (+{(ns['3'] - us) / 1000:.3f} µs)"
        + by_cpu(f"+{(cpu['3'] - cpu['2']) / cpu['1']:.2f}x"),
        add3 <= 2,
    )
    r4 = ns["4"] / ns["5"]
    pinned = ""
    if one_cpu is not None:
        pinned = f"; all threads on one CPU: {one_cpu['4'].wall / one_cpu['5'].wall:.2f}x"
    t4 = target(
        "case 4 at most 0.8x of case 5 (the bare pool round trip)",
        f"{r4:.2f}x" + by_cpu(f"{cpu['4'] / cpu['5']:.2f}x") + pinned,
        r4 <= 0.8,
    )
    add6 = (ns["6"] - us) / direct
    t6 = target(
        "case 6 adds at most 1x the direct-call time over case 2",
        f"+{add6:.2f}x direct (+{(ns['6'] - us) / 1000:.3f} µs)"
        + by_cpu(f"+{(cpu['6'] - cpu['2']) / cpu['1']:.2f}x"),
        add6 <= 1,
    )
    lc = ns.get("7a")
    t7 = target(
        "at least 100x faster than langchain-core's invoke",
        f"{lc / us:.0f}x" + by_cpu(f"{cpu['7a'] / cpu['2']:.0f}x")
        if lc
        else "langchain-core not measured",
        (lc / us >= 100) if lc else None,
    )
    r8 = batch.batch_ns / batch.slowest_ns
    t8 = target(
        "case 8 (execute_many of 8 tools sleeping 50 ms) within 1.3x of the slowest single call",
        f"{r8:.2f}x (the sequential sum is {batch.sequential_ns / batch.batch_ns:.1f}x the batch)",
        r8 <= 1.3,
    )
    r9 = throughput.ours_per_s / throughput.bare_per_s
    t9 = target(
        "case 9 throughput at least 1.0x of the bare pool",
        f"{r9:.2f}x ({throughput.ours_per_s:,.0f} vs {throughput.bare_per_s:,.0f} calls/s)",
        r9 >= 1.0,
    )
    t10 = target(
        "case 10 under 1 MB of growth",
        f"{growth / 1024:.1f} KB over {settings.memory_calls:,} calls",
        growth < 1_000_000,
    )

    def timed_row(
        key: str, case: str, source: dict[str, Timing] | None = None, name: str | None = None
    ) -> Row:
        timing = (timings if source is None else source).get(name or key)
        if timing is None:
            return Row(key, case)
        return Row(key, case, timing.wall, timing.cpu)

    def aim(row: Row, found: Target, text: str) -> Row:
        row.target, row.met = f"{text}: {found.figure}", found.met
        return row

    workers = executor.max_workers
    rows: list[Row] = [
        timed_row("1", "direct call `echo(**kw)` (the limit)"),
        aim(timed_row("2", "`nous_tools.execute`, timeout=None, no validation"), t2, "≤ 6x direct"),
        aim(
            timed_row("3", "… with its 3-property JSON Schema validated"),
            t3,
            "≤ +2x direct over case 2",
        ),
        aim(timed_row("4", "… with timeout=5 (worker thread)"), t4, "≤ 0.8x case 5"),
        timed_row("5", f"bare `ThreadPoolExecutor({workers}).submit(fn, **kw).result(timeout=5)`"),
    ]
    if one_cpu is not None:
        rows += [
            timed_row(
                "4p",
                f"case 4 on a fresh `ToolExecutor({workers})`, all threads pinned to one CPU",
                one_cpu,
                "4",
            ),
            timed_row("5p", "case 5 on a fresh pool, all threads pinned to one CPU", one_cpu, "5"),
        ]
    rows.append(
        aim(
            timed_row("6", "`registry.execute` by name, timeout=None, no validation"),
            t6,
            "≤ +1x direct over case 2",
        )
    )
    labels = {
        "langchain-core": "langchain-core `@tool` + `.invoke(dict)`",
        "smolagents": "smolagents `@tool` + call",
        "pydantic-ai-slim": "pydantic-ai `FunctionToolset`: `args_validator` + `call_tool`, no model",
    }
    for i, peer in enumerate(peers):
        key = f"7{'abc'[i]}"
        version = f" {peer.version}" if peer.version else ""
        row = timed_row(key, labels[peer.name] + version)
        row.note = peer.reason
        if peer.name == "langchain-core":
            aim(row, t7, "us ≥ 100x faster")
        elif peer.name == "smolagents":
            aim(row, t2b, "case 2 ≤ this")
        rows.append(row)
    threads, calls = settings.throughput_threads, settings.throughput_calls
    rows += [
        Row("8a", "8 tools sleeping 50 ms, timeout=5: the sequential sum", batch.sequential_ns),
        Row("8b", "… the slowest single call", batch.slowest_ns),
        Row(
            "8c",
            "… `ToolExecutor(8).execute_many` of the 8 (wall)",
            batch.batch_ns,
            target=f"≤ 1.3x slowest: {r8:.2f}x",
            met=t8.met,
        ),
        Row(
            "9a",
            f"{threads} threads x {calls:,} timed calls on `ToolExecutor({threads})` "
            "(wall / calls)",
            throughput.ours_ns,
            target=f"≥ 1.0x bare: {t9.figure}",
            met=t9.met,
        ),
        Row("9b", f"… bare `ThreadPoolExecutor({threads})`, the same threads", throughput.bare_ns),
        Row(
            "10",
            f"tracemalloc growth over {settings.memory_calls:,} executions of case 2",
            note=f"{growth / 1024:.1f} KB",
            target="< 1 MB",
            met=t10.met,
        ),
    ]
    for row in rows:
        if row.key.startswith("8"):
            row.ratios = False
    return Results(
        rows=rows,
        targets=targets,
        peers=", ".join(
            f"{p.name} {p.version or '—'}" + (f" ({p.reason})" if p.reason else "") for p in peers
        ),
        throughput_failures=throughput.failures,
    )


# -- conversion (issue 14) ---------------------------------------------------------


def add3(a: int, b: int, c: int) -> int:
    """A tool of three JSON scalars: it has no converter at all."""
    return a


@attrs.frozen
class Room:
    name: str
    floor: int = 0


def book(room: Room, when: datetime.datetime) -> str:
    """A tool with a dataclass-like attrs class and a datetime: both converted."""
    return "booked"


INTS: dict[str, t.Any] = {"a": 1, "b": 2, "c": 3}
BOOKING: dict[str, t.Any] = {"room": {"name": "Ada", "floor": 2}, "when": "2024-05-01T09:30:00Z"}


def measure_conversion(settings: Settings) -> str:
    """What argument conversion costs per call: a Markdown section with the figures.

    Validation is off in every case, so the differences are conversion alone."""
    converted3 = Tool.from_function(add3, timeout=None, validate_args=False)
    plain3 = Tool.from_function(add3, timeout=None, validate_args=False, convert_args=False)
    converted = Tool.from_function(book, timeout=None, validate_args=False)
    plain = Tool.from_function(book, timeout=None, validate_args=False, convert_args=False)
    assert converted3._converter is None  # all JSON scalars: nothing to do
    converter = converted._converter
    assert converter is not None
    structured = converter.convert("book", BOOKING)
    assert isinstance(structured, dict) and isinstance(structured["room"], Room)
    for tool, arguments in ((converted3, INTS), (plain3, INTS), (converted, BOOKING)):
        assert nous_tools.execute(tool, arguments).is_ok()

    def loop_convert(n: int) -> None:
        convert = converter.convert
        for _ in range(n):
            convert("book", BOOKING)

    loops: dict[str, Loop] = {
        "c1": loop_direct(add3, INTS),
        "c2": loop_execute(nous_tools.execute, plain3, INTS),
        "c3": loop_execute(nous_tools.execute, converted3, INTS),
        "c4": loop_direct(book, structured),
        "c5": loop_execute(nous_tools.execute, plain, BOOKING),
        "c6": loop_execute(nous_tools.execute, converted, BOOKING),
        "c7": loop_convert,
    }
    print(f"timing {len(loops)} conversion cases, {settings.rounds} rounds ...", flush=True)
    timings = measure(loops, settings)
    ns = {key: timing.wall for key, timing in timings.items()}
    cases = [
        ("c1", "direct call `add3(a=1, b=2, c=3)`"),
        ("c2", "`execute` of `add3`, `convert_args=False`"),
        ("c3", "`execute` of `add3`, `convert_args=True` (no converter: all JSON scalars)"),
        ("c4", "direct call `book(room=Room(...), when=datetime(...))`"),
        ("c5", "`execute` of `book` with the raw JSON, `convert_args=False`"),
        ("c6", "`execute` of `book`, `convert_args=True` (an attrs class and a datetime)"),
        ("c7", "`converter.convert` of `book`'s arguments alone"),
    ]
    lines = [
        "## Conversion (issue 14)",
        "",
        "Validation off in every case; `book(room: Room, when: datetime)` gets "
        '`{"room": {"name": "Ada", "floor": 2}, "when": "2024-05-01T09:30:00Z"}`.',
        "",
        "| # | case | µs/call | CPU µs/call |",
        "|---|---|---:|---:|",
    ]
    for key, text in cases:
        timing = timings[key]
        lines.append(f"| {key} | {text} | {_us(timing.wall)} | {_us(timing.cpu)} |")
    scalar = ns["c3"] - ns["c2"]
    dated = ns["c6"] - ns["c5"]
    scalar_met = abs(scalar) <= max(0.05 * ns["c2"], 50.0)
    lines += [
        "",
        f"- {'met' if scalar_met else '**missed**'}: conversion of the 3-int tool ≈ 0 — "
        f"{scalar / 1000:+.3f} µs ({scalar / ns['c1']:+.2f}x direct; the tool has no "
        "converter, so the pipeline does one `is not None` test)",
        f"- conversion of the tool with an attrs class and a datetime: {dated / 1000:+.2f} µs "
        f"per call ({dated / ns['c4']:.1f}x its direct call; `convert` alone "
        f"{_us(ns['c7'])} µs)",
    ]
    return "\n".join(lines) + "\n"


# -- validation at native speed (issue 15, part 2) ----------------------------------

#: A 15-property tool schema: scalars, a nested object, arrays, enums and a pattern.
SCHEMA_15: dict[str, t.Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "offset": {"type": "integer", "minimum": 0},
        "sort": {"type": "string", "enum": ["asc", "desc"]},
        "fields": {"type": "array", "items": {"type": "string"}},
        "lang": {"type": "string", "pattern": "^[a-z]{2}$"},
        "safe": {"type": "boolean"},
        "region": {"type": "string"},
        "score": {"type": "number"},
        "filter": {
            "type": "object",
            "properties": {
                "min": {"type": "integer"},
                "max": {"type": "integer"},
                "tag": {"type": "string"},
            },
            "required": ["min"],
            "additionalProperties": False,
        },
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
        "user": {"type": "string"},
        "session": {"type": "string"},
        "debug": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
    },
    "required": ["query", "limit"],
    "additionalProperties": False,
}
ARGS_15: dict[str, t.Any] = {
    "query": "q",
    "limit": 10,
    "offset": 0,
    "sort": "asc",
    "fields": ["a", "b"],
    "lang": "en",
    "safe": True,
    "region": "eu",
    "score": 1.5,
    "filter": {"min": 1, "max": 5, "tag": "x"},
    "tags": ["a", "b"],
    "user": "u",
    "session": "s",
    "debug": False,
    "mode": "fast",
}


def measure_validation(settings: Settings) -> str:
    """Issue 15's validation targets, over several runs: a Markdown section."""
    import fastjsonschema
    import jsonschema_rs

    from nous_tools.validation import ArgumentValidator

    plain = Tool.from_function(echo, timeout=None, validate_args=False)
    validated = Tool.from_function(echo, timeout=None)
    assert validated.parameters is not None and validated.validator is not None
    three = validated.validator
    fifteen = ArgumentValidator(SCHEMA_15)
    own3 = jsonschema_rs.validator_for(validated.parameters).is_valid
    own15 = jsonschema_rs.validator_for(SCHEMA_15).is_valid
    fast15 = fastjsonschema.compile(SCHEMA_15, use_default=False, use_formats=False)
    assert three.validate(ARGS) is None and fifteen.validate(ARGS_15) is None
    assert own3(ARGS) and own15(ARGS_15) and fast15(ARGS_15) is not None

    def calls(fn: c.Callable[[t.Any], object], arguments: dict[str, t.Any]) -> Loop:
        def run(n: int) -> None:
            for _ in range(n):
                fn(arguments)

        return run

    loops: dict[str, Loop] = {
        "v1": loop_direct(echo, ARGS),
        "v2": loop_execute(nous_tools.execute, plain, ARGS),
        "v3": loop_execute(nous_tools.execute, validated, ARGS),
        "v4": calls(three.validate, ARGS),
        "v5": calls(own3, ARGS),
        "v6": calls(fifteen.validate, ARGS_15),
        "v7": calls(own15, ARGS_15),
        "v8": calls(fast15, ARGS_15),
    }
    runs = 2 if settings.quick else 5
    per_run: list[dict[str, Timing]] = []
    for run_index in range(runs):
        print(f"timing the validation cases, run {run_index + 1} of {runs} ...", flush=True)
        per_run.append(measure(loops, settings))
    cases = [
        ("v1", "direct call `echo(**kw)`"),
        ("v2", "`execute`, 3-property tool, `validate_args=False`"),
        ("v3", f"`execute`, 3-property tool, validated ({three.engine})"),
        ("v4", "`validator.validate` alone, 3 properties"),
        ("v5", "jsonschema-rs `is_valid` alone, 3 properties"),
        ("v6", f"`validator.validate` alone, 15 properties ({fifteen.engine})"),
        ("v7", "jsonschema-rs `is_valid` alone, 15 properties"),
        ("v8", "fastjsonschema alone, 15 properties (the fast path before)"),
    ]
    lines = [
        "## Validation (issue 15, part 2)",
        "",
        f"Medians per run; {runs} runs, each of {settings.rounds} interleaved rounds.",
        "",
        "| # | case | µs/call (median of runs) | range over runs |",
        "|---|---|---:|---:|",
    ]
    for key, text in cases:
        walls = [timings[key].wall for timings in per_run]
        lines.append(
            f"| {key} | {text} | {_us(statistics.median(walls))} | "
            f"{_us(min(walls))} to {_us(max(walls))} |"
        )

    def target(text: str, ratios: list[float], limit: float, unit: str) -> str:
        met = sum(1 for ratio in ratios if ratio <= limit)
        verdict = "met" if statistics.median(ratios) <= limit else "**missed**"
        return (
            f"- {verdict}: {text} — median {statistics.median(ratios):.2f}{unit}, "
            f"{min(ratios):.2f} to {max(ratios):.2f}{unit} over {runs} runs "
            f"(met in {met} of {runs})"
        )

    added = [(r["v3"].wall - r["v2"].wall) / r["v1"].wall for r in per_run]
    versus = [r["v6"].wall / r["v7"].wall for r in per_run]
    lines += [
        "",
        target("validation adds ≤ 1x a direct call on the 3-property schema", added, 1.0, "x"),
        target("≤ 1.5x jsonschema-rs's own `is_valid` on the 15-property schema", versus, 1.5, "x"),
    ]
    return "\n".join(lines) + "\n"


def report(results: Results, settings: Settings) -> str:
    by_key = {row.key: row for row in results.rows}
    direct, us = t.cast(float, by_key["1"].ns), t.cast(float, by_key["2"].ns)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    mode = "quick (smoke run)" if settings.quick else "full"
    met = sum(1 for target in results.targets if target.met)
    measured = sum(1 for target in results.targets if target.met is not None)
    try:
        load = "load average {:.2f} {:.2f} {:.2f} at the end".format(*os.getloadavg())
    except OSError:
        load = "load average unknown"
    lines = [
        "# Benchmark results",
        "",
        f"- date: {now}",
        f"- CPUs (`os.cpu_count()`): {os.cpu_count()}; {load}",
        f"- Python: {platform.python_implementation()} {platform.python_version()} ({sys.platform})",
        f"- nous_tools {nous_tools.__version__}; peers: {results.peers}",
        f"- mode: {mode}; per-call cases: {settings.rounds} rounds of ~{settings.round_ms:.0f} ms "
        "each, interleaved across the cases, after a warm-up; the median is quoted",
        "- command: `.venv/bin/python benchmarks/compare.py"
        + (" --quick" if settings.quick else "")
        + "`",
        "",
        "The machine is shared and noisy: read the ratios, measured in the same run, rather "
        "than the absolute times. Every case calls `echo(a: str, b: int, c: bool) -> str`; "
        "`benchmarks/README.md` says what each case does. *CPU µs* is the process's CPU "
        "time (all threads) per call: it leaves out the time spent waiting for a core.",
        "",
        table(results.rows, direct, us),
        "",
        f"## Targets (issue 7): {met} of {measured} met",
        "",
    ]
    for target in results.targets:
        status = {True: "met", False: "**missed**", None: "not measured"}[target.met]
        lines.append(f"- {status}: {target.text} — {target.figure}")
    if results.throughput_failures:
        lines += ["", f"Throughput calls that did not return Ok: {results.throughput_failures}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (< 1 minute)")
    parser.add_argument(
        "--only",
        choices=["conversion", "validation"],
        help="run one section only (printed; written only with --output)",
    )
    parser.add_argument("--rounds", type=int, help="timing rounds per case (default 15, quick 3)")
    parser.add_argument("--round-ms", type=float, help="target milliseconds per timed round")
    parser.add_argument(
        "--output",
        type=pathlib.Path,
        help="where to write the Markdown report (default: benchmarks/RESULTS.md on a "
        "full run, nowhere on a quick one)",
    )
    options = parser.parse_args(argv)
    settings = QUICK if options.quick else FULL
    if options.rounds is not None:
        settings = attrs.evolve(settings, rounds=max(1, options.rounds))
    if options.round_ms is not None:
        settings = attrs.evolve(settings, round_ms=max(1.0, options.round_ms))
    began = time.monotonic()
    if options.only == "conversion":
        text = measure_conversion(settings)
    elif options.only == "validation":
        text = measure_validation(settings)
    else:
        text = "\n".join(
            (
                report(run(settings), settings),
                measure_conversion(settings),
                measure_validation(settings),
            )
        )
    print()
    print(text)
    default = None if settings.quick or options.only else RESULTS
    output = options.output if options.output is not None else default
    if output is not None:
        output.write_text(text, encoding="utf-8")
        print(f"written to {output}")
    print(f"took {time.monotonic() - began:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
