"""nous_tools side by side with the limit (a direct call), a bare thread pool and the peers.

Run it with ``make bench`` (installs the ``bench`` extra first) or
``.venv/bin/python benchmarks/compare.py [--quick] [--runs N] [--rounds N] [--output PATH]``.

Everything is measured in one process, as ratios: the machine is shared and noisy,
so absolute times move from run to run while ratios measured in the same run hold.
Each per-call case is a loop of N calls (N calibrated so that a round takes about
``--round-ms`` milliseconds), warmed up, then timed over several rounds with the
rounds interleaved across the cases (a slow moment of the machine hits all of
them); the median per-call time is quoted. The garbage collector is off inside a
timed loop, as with :mod:`timeit`.

A full run repeats the whole measurement ``--runs`` times (default 5) and reports,
for every figure, the median of the runs and their range, with the target of issues
7, 15, 23 and 26 beside the figures that have one: one lucky run proves nothing on a
shared machine.

This is a benchmark, not a test: it prints figures and always exits 0 (unless it
crashes). A full run writes its section of ``benchmarks/RESULTS.md`` (the rest of the
file, ``record.py``'s, stays as it is); ``--quick`` (a smoke run) writes only when
``--output`` is given. ``--json PATH`` also writes each run's raw figures there, for
``benchmarks/record.py``.
"""

from __future__ import annotations

import _thread
import argparse
import asyncio
import collections.abc as c
import concurrent.futures
import datetime
import gc
import importlib.metadata
import logging
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
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

from nous_tools import Ok, Registry, RunContext, Tool, ToolExecutor

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


def echo_ctx(ctx: RunContext[t.Any], a: str, b: int, c: bool) -> str:
    """``echo`` that takes the run context (case 4c)."""
    return a


ARGS: dict[str, t.Any] = {"a": "x", "b": 1, "c": True}


def sleep_50ms() -> str:
    time.sleep(0.05)
    return "slept"


#: The worker count of the contention cases: the default executor's size on this
#: 2-core machine before issue 15 (``min(32, cpus + 4)``), as the issue measured it.
CONTENTION_WORKERS = 6


# -- settings -------------------------------------------------------------------


@attrs.frozen
class Settings:
    runs: int
    rounds: int
    round_ms: float
    batch_rounds: int
    contention_rounds: int
    contention_calls: int  # calls per round, shared among the caller threads
    fanout_rounds: int
    memory_warmup: int
    memory_calls: int
    registry_tools: int
    startup_runs: int
    overshoot_samples: int
    quick: bool


FULL = Settings(
    runs=5,
    rounds=15,
    round_ms=50.0,
    batch_rounds=7,
    contention_rounds=5,
    contention_calls=12_800,
    fanout_rounds=5,
    memory_warmup=10_000,
    memory_calls=100_000,
    registry_tools=100_000,
    startup_runs=20,
    overshoot_samples=200,
    quick=False,
)
QUICK = Settings(
    runs=1,
    rounds=3,
    round_ms=15.0,
    batch_rounds=2,
    contention_rounds=1,
    contention_calls=1_280,
    fanout_rounds=1,
    memory_warmup=2_000,
    memory_calls=10_000,
    registry_tools=20_000,
    startup_runs=4,
    overshoot_samples=30,
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


class Floor:
    """The floor of a timed call: a raw ``_thread`` lock ping-pong with one waiting
    thread, two hand-offs per call (to the thread and back) and nothing else: no
    queue, no deadline, no context, no result object."""

    def __init__(self) -> None:
        self._go = _thread.allocate_lock()
        self._go.acquire()
        self._back = _thread.allocate_lock()
        self._back.acquire()
        self._job: tuple[c.Callable[..., t.Any], dict[str, t.Any]] | None = None
        self._result: t.Any = None
        _thread.start_new_thread(self._serve, ())

    def _serve(self) -> None:
        go, back = self._go, self._back
        while True:
            go.acquire()
            job = self._job
            if job is None:
                back.release()
                return
            fn, kw = job
            self._result = fn(**kw)
            back.release()

    def call(self, fn: c.Callable[..., t.Any], kw: dict[str, t.Any]) -> t.Any:
        self._job = (fn, kw)
        self._go.release()
        self._back.acquire()
        return self._result

    def close(self) -> None:
        self._job = None
        self._go.release()
        self._back.acquire()


def loop_floor(floor: Floor, kw: dict[str, t.Any]) -> Loop:
    call = floor.call

    def run(n: int) -> None:
        for _ in range(n):
            call(echo, kw)

    return run


def measure_one_cpu(settings: Settings, kw: dict[str, t.Any]) -> dict[str, Timing] | None:
    """The timed round trip with every thread involved pinned to one CPU: ours (4p),
    ours with a ctx-taking tool (4cp), a tool with the defaults (Dp), the bare pool
    (5p) and the floor (Fp).

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
    tool_ctx = Tool.from_function(echo_ctx, timeout=5, validate_args=False)
    default = Tool.from_function(echo)  # case D: timeout=30, validated
    assert tool_ctx.takes_ctx
    ctx = RunContext.new()
    workers = CONTENTION_WORKERS
    setaffinity(0, {min(allowed)})  # this thread only; threads it starts inherit it
    floor = Floor()
    try:
        with (
            ToolExecutor(max_workers=workers) as executor,
            concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool,
        ):
            execute = executor.execute

            def run_ctx(n: int) -> None:
                for _ in range(n):
                    execute(tool_ctx, kw, ctx)

            loops = {
                "4p": loop_execute(execute, tool, kw),
                "4cp": run_ctx,
                "Dp": loop_execute(execute, default, kw),
                "5p": loop_bare_pool(pool, kw),
                "Fp": loop_floor(floor, kw),
            }
            return measure(loops, settings)
    finally:
        floor.close()
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


# -- contention, fan-out, batches (issue 15, parts 3 and 5) -----------------------


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


CALLERS = (1, 4, 16, 64)


def measure_contention(settings: Settings, figures: dict[str, float]) -> int:
    """Throughput (calls/s) of 1, 4, 16 and 64 caller threads sharing one
    ``ToolExecutor(6)``, against the same threads on a bare ``ThreadPoolExecutor(6)``
    doing ``submit(...).result(timeout=5)``; rounds interleaved, medians. Returns how
    many calls did not come back right."""
    tool = Tool.from_function(echo, timeout=5, validate_args=False)
    failures = 0
    with (
        ToolExecutor(max_workers=CONTENTION_WORKERS) as executor,
        concurrent.futures.ThreadPoolExecutor(max_workers=CONTENTION_WORKERS) as pool,
    ):
        for callers in CALLERS:
            calls = max(1, settings.contention_calls // callers)
            total = calls * callers

            def ours(calls: int = calls) -> int:
                execute = executor.execute
                return sum(type(execute(tool, ARGS)) is not Ok for _ in range(calls))

            def bare(calls: int = calls) -> int:
                submit = pool.submit
                return sum(submit(echo, **ARGS).result(timeout=5) != "x" for _ in range(calls))

            warm = max(1, calls // 4)
            _run_threads(callers, lambda warm=warm: ours(warm))  # warm-up
            _run_threads(callers, lambda warm=warm: bare(warm))
            walls: dict[str, list[int]] = {"ours": [], "bare": []}
            for _ in range(settings.contention_rounds):
                for key, body in (("ours", ours), ("bare", bare)):
                    wall, bad = _run_threads(callers, body)
                    walls[key].append(wall)
                    failures += bad
            for key in walls:
                figures[f"k{callers}.{key}"] = total / (statistics.median(walls[key]) / 1e9)
    return failures


FANOUT = (64, 512)


def measure_fanout(settings: Settings, figures: dict[str, float]) -> None:
    """``ToolExecutor(max_workers=N).execute_many`` of N tools sleeping 50 ms against
    ``ThreadPoolExecutor(N).map`` of the same function, N = 64 and 512 (ms, wall).
    *cold*: a fresh pool each round (its threads start inside the timed call, for
    both); *warm*: one pool per side, warmed by a first batch."""
    tool = Tool.from_function(sleep_50ms, timeout=5, validate_args=False)

    def ours_batch(executor: ToolExecutor, n: int) -> int:
        began = time.perf_counter_ns()
        results = executor.execute_many([(tool, {})] * n)
        wall = time.perf_counter_ns() - began
        assert all(type(r) is Ok for r in results), [r for r in results if type(r) is not Ok][:1]
        return wall

    def map_batch(pool: concurrent.futures.ThreadPoolExecutor, n: int) -> int:
        began = time.perf_counter_ns()
        results = list(pool.map(lambda _: sleep_50ms(), range(n)))
        wall = time.perf_counter_ns() - began
        assert results == ["slept"] * n
        return wall

    for n in FANOUT:
        walls: dict[str, list[int]] = {"ours": [], "map": [], "ours_cold": [], "map_cold": []}
        with (
            ToolExecutor(max_workers=n) as executor,
            concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool,
        ):
            ours_batch(executor, n)
            map_batch(pool, n)
            for _ in range(settings.fanout_rounds):
                walls["ours"].append(ours_batch(executor, n))
                walls["map"].append(map_batch(pool, n))
        for _ in range(settings.fanout_rounds):
            with ToolExecutor(max_workers=n) as executor:
                walls["ours_cold"].append(ours_batch(executor, n))
            with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
                walls["map_cold"].append(map_batch(pool, n))
        for key, values in walls.items():
            figures[f"f{n}.{key}"] = statistics.median(values) / 1e6


def measure_default_batch(settings: Settings, figures: dict[str, float]) -> None:
    """``nous_tools.execute_many`` of 8 tools sleeping 50 ms on the default executor
    against one ``nous_tools.execute`` of such a tool (ms, wall; medians)."""
    tools = [
        Tool.from_function(sleep_50ms, name=f"sleep_{i}", timeout=5, validate_args=False)
        for i in range(8)
    ]
    nous_tools.execute_many([(tool, {}) for tool in tools])  # warm-up: start the workers
    one: list[int] = []
    batch: list[int] = []
    for _ in range(settings.batch_rounds):
        began = time.perf_counter_ns()
        result = nous_tools.execute(tools[0], {})
        one.append(time.perf_counter_ns() - began)
        assert result == Ok("slept"), result
        began = time.perf_counter_ns()
        results = nous_tools.execute_many([(tool, {}) for tool in tools])
        batch.append(time.perf_counter_ns() - began)
        assert all(r == Ok("slept") for r in results), results
    figures["8.one"] = statistics.median(one) / 1e6
    figures["8.batch"] = statistics.median(batch) / 1e6
    figures["8.workers"] = nous_tools.default_executor().max_workers


# -- the registry (issue 15, part 5) -----------------------------------------------


def measure_registry(settings: Settings, figures: dict[str, float]) -> None:
    """Seconds to register ``registry_tools`` tools (built beforehand, untimed) in one
    registry, the cost of the first and the last 1,000 registrations, and whether two
    tools with identical schemas share one compiled validator."""
    count = settings.registry_tools
    tools = [
        Tool(name=f"tool_{i}", function=echo, convert_args=False, validate_args=False)
        for i in range(count)
    ]
    registry = Registry()
    register = registry.register
    marks: list[int] = []
    began = time.perf_counter_ns()
    for i, tool in enumerate(tools):
        if i % 1000 == 0:
            marks.append(time.perf_counter_ns())
        register(tool)
    ended = time.perf_counter_ns()
    marks.append(ended)
    assert len(registry) == count and registry.lookup(f"tool_{count - 1}") is tools[-1]
    figures["r.total"] = (ended - began) / 1e9
    figures["r.first"] = (marks[1] - marks[0]) / 1000 / 1000  # µs per registration
    figures["r.last"] = (marks[-1] - marks[-2]) / 1000 / 1000

    def first(query: str, limit: int = 10) -> list[str]:
        """Search."""
        return []

    def second(query: str, limit: int = 10) -> list[str]:
        """Search again."""
        return []

    one, two = Tool.from_function(first), Tool.from_function(second)
    assert one.parameters == two.parameters
    figures["r.shared"] = float(one.validator is not None and one.validator is two.validator)


# -- memory, deadlines, start-up ---------------------------------------------------


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


def measure_overshoot(settings: Settings, figures: dict[str, float]) -> None:
    """Deadline overshoot p99 (ms) of ``benchmarks/deadlines.py``, timeout 20 ms: a
    tool waiting on ``ctx.cancelled`` and one spinning in a Python loop."""
    from deadlines import overshoot_ours, percentile

    for hang in ("wait", "spin"):
        overshoots, wrong, _ = overshoot_ours(settings.overshoot_samples, 0.02, hang)
        figures[f"o.{hang}.p99"] = percentile(overshoots, 99)
        figures[f"o.{hang}.p50"] = percentile(overshoots, 50)
        figures[f"o.{hang}.wrong"] = wrong


def _console_script() -> list[str]:
    """How to start ``nous-tools`` here: the console script beside the interpreter."""
    script = pathlib.Path(sys.executable).with_name("nous-tools")
    if script.exists():
        return [str(script)]
    found = shutil.which("nous-tools")
    return [found] if found else [sys.executable, "-m", "nous_tools"]


STARTUP = {
    "pass": [sys.executable, "-c", "pass"],
    "import": [sys.executable, "-c", "import nous_tools"],
    "help": [*_console_script(), "--help"],
}


def measure_startup(settings: Settings, figures: dict[str, float]) -> None:
    """Wall ms of ``python -c pass``, ``python -c "import nous_tools"`` and
    ``nous-tools --help``, each started ``startup_runs`` times, interleaved; the
    median (and the minimum, the least disturbed run) of each."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="")
    env.pop("PYTHONDONTWRITEBYTECODE")
    for argv in STARTUP.values():  # warm the file cache and the bytecode
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    walls: dict[str, list[float]] = {key: [] for key in STARTUP}
    for _ in range(settings.startup_runs):
        for key, argv in STARTUP.items():
            began = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
            walls[key].append((time.perf_counter() - began) * 1000)
    for key, values in walls.items():
        figures[f"s.{key}"] = statistics.median(values)
        figures[f"s.{key}.min"] = min(values)
    # Paired differences: each import/help run against the `pass` run just before it.
    for key in ("import", "help"):
        diffs = [b - a for a, b in zip(walls["pass"], walls[key], strict=True)]
        figures[f"s.{key}.over"] = statistics.median(diffs)


# -- one run -------------------------------------------------------------------------

Figures = dict[str, float]

#: Each run's figures and the load average when it ended, for ``--json``.
JSON_RUNS: list[dict[str, t.Any]] = []


def keep(figures: Figures) -> None:
    """Keep one run's figures, with the load average now, for ``--json``."""
    import _results  # beside this file

    JSON_RUNS.append(_results.run(figures))


@attrs.define
class RunInfo:
    peers: str = ""
    failures: int = 0  # calls of the contention cases that did not come back right


def run_once(settings: Settings, index: int, info: RunInfo) -> Figures:
    """Measure everything once; the figures by key (see :data:`ROWS` and :data:`TARGETS`)."""
    figures: Figures = {}
    plain = Tool.from_function(echo, timeout=None, validate_args=False)
    validated = Tool.from_function(echo, timeout=None)
    timed = Tool.from_function(echo, timeout=5, validate_args=False)
    timed_ctx = Tool.from_function(echo_ctx, timeout=5, validate_args=False)
    default = Tool.from_function(echo)  # every option its default: timeout=30, validated
    assert validated.parameters is not None and len(validated.parameters["properties"]) == 3
    registry = Registry([plain])
    executor = nous_tools.default_executor()
    ctx = RunContext.new()
    for result in (
        nous_tools.execute(plain, ARGS),
        nous_tools.execute(validated, ARGS),
        nous_tools.execute(default, ARGS),
        nous_tools.execute(timed, ARGS),
        nous_tools.execute(timed_ctx, ARGS, ctx),
        registry.execute("echo", ARGS),
    ):
        assert result == Ok("x"), result

    peers = [peer_langchain(), peer_smolagents(), peer_pydantic_ai()]
    info.peers = ", ".join(
        f"{p.name} {p.version or '—'}" + (f" ({p.reason})" if p.reason else "") for p in peers
    )
    bare_pool = concurrent.futures.ThreadPoolExecutor(max_workers=executor.max_workers)
    step = f"run {index + 1} of {settings.runs}:"
    try:
        execute = nous_tools.execute

        def run_ctx(n: int) -> None:
            for _ in range(n):
                execute(timed_ctx, ARGS, ctx)

        loops: dict[str, Loop] = {
            "1": loop_direct(echo, ARGS),
            "2": loop_execute(execute, plain, ARGS),
            "3": loop_execute(execute, validated, ARGS),
            "D": loop_execute(execute, default, ARGS),
            "4": loop_execute(execute, timed, ARGS),
            "4c": run_ctx,
            "5": loop_bare_pool(bare_pool, ARGS),
            "6": loop_execute(registry.execute, "echo", ARGS),
        }
        for i, peer in enumerate(peers):
            if peer.loop is not None:
                loops[f"7{'abc'[i]}"] = peer.loop
        print(f"{step} timing {len(loops)} per-call cases ...", flush=True)
        timings = measure(loops, settings)
    finally:
        bare_pool.shutdown(wait=True)
        for peer in peers:
            if peer.close is not None:
                peer.close()
    print(f"{step} the timed round trip on one CPU ...", flush=True)
    pinned = measure_one_cpu(settings, ARGS) or {}
    for key, timing in {**timings, **pinned}.items():
        figures[key] = timing.wall
        figures[f"{key}.cpu"] = timing.cpu
    figures["pool.workers"] = executor.max_workers
    print(f"{step} contention (1 to 64 callers) ...", flush=True)
    info.failures += measure_contention(settings, figures)
    print(f"{step} wide fan-out (64 and 512) ...", flush=True)
    measure_fanout(settings, figures)
    print(f"{step} a batch of 8 on the default executor ...", flush=True)
    measure_default_batch(settings, figures)
    print(f"{step} the registry ...", flush=True)
    measure_registry(settings, figures)
    print(f"{step} memory ...", flush=True)
    figures["10"] = measure_memory(settings, plain)
    print(f"{step} deadline overshoot ...", flush=True)
    measure_overshoot(settings, figures)
    print(f"{step} start-up ...", flush=True)
    measure_startup(settings, figures)
    return figures


# -- targets -------------------------------------------------------------------------


@attrs.frozen
class TargetSpec:
    """A figure with a target: ``value`` of a run's figures (None: not measured),
    ``shown`` formats it; ``target`` says the target, printed beside the figure."""

    issue: str
    text: str
    value: c.Callable[[Figures], float | None]
    target: str
    unit: str = "x"

    def shown(self, value: float) -> str:
        if self.unit == "x":
            return f"{value:.2f}x"
        if self.unit == "+x":
            return f"+{value:.2f}x"
        if self.unit == "ms":
            return f"{value:.1f} ms"
        if self.unit == "s":
            return f"{value:.2f} s"
        if self.unit == "KB":
            return f"{value:.1f} KB"
        if self.unit == "yes":
            return "yes" if value else "no"
        return f"{value:.2f}{self.unit}"


def _ratio(a: str, b: str) -> c.Callable[[Figures], float | None]:
    def value(f: Figures) -> float | None:
        if a not in f or b not in f:
            return None
        return f[a] / f[b]

    return value


def _added(a: str, b: str, unit_of: str) -> c.Callable[[Figures], float | None]:
    """(a - b) / unit_of: what case ``a`` adds over case ``b``, in direct calls."""

    def value(f: Figures) -> float | None:
        if a not in f or b not in f or unit_of not in f:
            return None
        return (f[a] - f[b]) / f[unit_of]

    return value


def _key(key: str, scale: float = 1.0) -> c.Callable[[Figures], float | None]:
    def value(f: Figures) -> float | None:
        return f[key] * scale if key in f else None

    return value


#: The GIL switch interval (ms): what a tool spinning in pure Python can add to a
#: deadline's overshoot, since the caller needs the GIL back to return.
SWITCH_MS = sys.getswitchinterval() * 1000

TARGETS: list[TargetSpec] = [
    TargetSpec("7, 15 keep", "inline execute (case 2) / the direct call", _ratio("2", "1"), "≤ 6x; aim ≤ 5x"),
    TargetSpec("15 keep (aim)", "inline execute (case 2) / the smolagents call (7b)", _ratio("2", "7b"), "aim ≤ 1x"),
    TargetSpec("7", "what validating the 3-property schema adds (case 3 - case 2), in direct calls", _added("3", "2", "1"), "≤ +2x", unit="+x"),
    TargetSpec("7", "what execution by name adds (case 6 - case 2), in direct calls", _added("6", "2", "1"), "≤ +1x", unit="+x"),
    TargetSpec("7, 15 keep", "langchain-core's invoke (7a) / inline execute (case 2)", _ratio("7a", "2"), "≥ 100x"),
    TargetSpec("7, 15 keep", "memory: tracemalloc growth over the calls of case 10", _key("10", 1 / 1024), "< 1 MB", unit="KB"),
    TargetSpec("15 keep", "deadline overshoot p99, a tool waiting on ctx.cancelled", _key("o.wait.p99"), "≤ 5 ms", unit="ms"),
    TargetSpec("3, 15 keep", "deadline overshoot p99, a tool spinning in pure Python", _key("o.spin.p99"), f"≤ 5 ms plus one GIL switch interval ({SWITCH_MS:.0f} ms)", unit="ms"),
    *[
        TargetSpec("15.3", f"contention, {n} caller thread(s): our throughput / the bare pool's", _ratio(f"k{n}.ours", f"k{n}.bare"), "≥ 0.9x")
        for n in CALLERS
    ],
    *[
        TargetSpec("15.3", f"wide fan-out of {n} x 50 ms ({temp} pools) / `ThreadPoolExecutor.map`", _ratio(f"f{n}.{ours}", f"f{n}.{bare}"), "≤ 1.3x")
        for n in FANOUT
        for temp, ours, bare in (("warm", "ours", "map"), ("cold", "ours_cold", "map_cold"))
    ],
    TargetSpec("15.4", "`python -c \"import nous_tools\"` over `python -c pass`", _key("s.import.over"), "≤ 60 ms", unit="ms"),
    TargetSpec("15.4", "`nous-tools --help` over `python -c pass`", _key("s.help.over"), "≤ 80 ms", unit="ms"),
    TargetSpec("7, 15.5", "timed execute (case 4) / the bare pool round trip (case 5), as scheduled", _ratio("4", "5"), "≤ 0.8x"),
    TargetSpec("15.5", "timed execute pinned to one CPU (4p) / the bare pool (5p)", _ratio("4p", "5p"), "≤ 0.8x"),
    TargetSpec("15.5", "timed execute pinned to one CPU (4p) / the floor (Fp)", _ratio("4p", "Fp"), "≤ 1.3x"),
    TargetSpec("15.5", "a ctx-taking timed tool / a plain one, pinned (4cp / 4p)", _ratio("4cp", "4p"), "≤ 1.05x"),
    TargetSpec("15.5", "`Registry.register` of 100,000 tools", _key("r.total"), "< 1 s", unit="s"),
    TargetSpec("15.5", "tools with identical schemas share one compiled validator", _key("r.shared"), "yes", unit="yes"),
    TargetSpec("15.5", "`execute_many` of 8 x 50 ms on the default executor / one call", _ratio("8.batch", "8.one"), "≤ 1.3x"),
]  # fmt: skip


# -- the report ----------------------------------------------------------------------


def _us(ns: float) -> str:
    us = ns / 1000
    if us >= 10_000:
        return f"{us:,.0f}"
    if us >= 100:
        return f"{us:.1f}"
    return f"{us:.3f}" if us < 10 else f"{us:.2f}"


def _x(ratio: float) -> str:
    return f"{ratio:.0f}x" if ratio >= 100 else f"{ratio:.2f}x"


def _spread(values: list[float], fmt: c.Callable[[float], str]) -> tuple[str, str]:
    """(median, "min to max") of ``values`` through ``fmt``; "—" when there are none."""
    if not values:
        return "—", "—"
    if len(values) == 1:
        return fmt(values[0]), "—"
    return fmt(statistics.median(values)), f"{fmt(min(values))} to {fmt(max(values))}"


def _values(runs: list[Figures], key: str) -> list[float]:
    return [f[key] for f in runs if key in f]


PER_CALL_ROWS = [
    ("1", "direct call `echo(**kw)` (the limit)"),
    ("2", "`nous_tools.execute`, timeout=None, no validation"),
    ("3", "… with its 3-property JSON Schema validated"),
    (
        "D",
        "a `Tool` with the defaults (`Tool.from_function(echo)`: timeout=30 s, a pool worker; validated)",
    ),
    ("4", "… with timeout=5 (a pool worker under a deadline)"),
    ("4c", "… timeout=5, a tool that takes `ctx`"),
    ("5", "bare `ThreadPoolExecutor(W).submit(fn, **kw).result(timeout=5)`"),
    ("6", "`registry.execute` by name, timeout=None, no validation"),
    ("7a", "langchain-core `@tool` + `.invoke(dict)`"),
    ("7b", "smolagents `@tool` + call"),
    ("7c", "pydantic-ai `FunctionToolset`: `args_validator` + `call_tool`, no model"),
    ("4p", "case 4 on a fresh `ToolExecutor(6)`, every thread pinned to one CPU"),
    ("4cp", "case 4c, the same way"),
    ("Dp", "case D, the same way"),
    ("5p", "case 5 on a fresh `ThreadPoolExecutor(6)`, the same way"),
    ("Fp", "the floor: a raw `_thread` lock ping-pong (two hand-offs), the same way"),
]


def per_call_table(runs: list[Figures]) -> list[str]:
    lines = [
        "| # | case | µs per call (median of runs) | range over runs | x direct call "
        "| CPU µs per call |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for key, text in PER_CALL_ROWS:
        walls = _values(runs, key)
        if not walls:
            lines.append(f"| {key} | {text} | not measured | — | — | — |")
            continue
        median, spread = _spread(walls, _us)
        ratios = [f[key] / f["1"] for f in runs if key in f]
        cpus = _values(runs, f"{key}.cpu")
        lines.append(
            f"| {key} | {text} | {median} | {spread} | {_x(statistics.median(ratios))} "
            f"| {_us(statistics.median(cpus))} |"
        )
    return lines


def contention_table(runs: list[Figures]) -> list[str]:
    lines = [
        "| callers | ours (calls/s) | bare pool (calls/s) | ours / bare (median) | range |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n in CALLERS:
        ours = _values(runs, f"k{n}.ours")
        bare = _values(runs, f"k{n}.bare")
        ratios = [f[f"k{n}.ours"] / f[f"k{n}.bare"] for f in runs if f"k{n}.ours" in f]
        median, spread = _spread(ratios, lambda r: f"{r:.2f}x")
        lines.append(
            f"| {n} | {statistics.median(ours):,.0f} | {statistics.median(bare):,.0f} "
            f"| {median} | {spread} |"
        )
    return lines


def fanout_table(runs: list[Figures]) -> list[str]:
    lines = [
        "| N | pools | ours (ms) | `map` (ms) | ours / `map` (median) | range |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for n in FANOUT:
        for temp, ours, bare in (("warm", "ours", "map"), ("cold", "ours_cold", "map_cold")):
            a, b = f"f{n}.{ours}", f"f{n}.{bare}"
            ratios = [f[a] / f[b] for f in runs if a in f]
            median, spread = _spread(ratios, lambda r: f"{r:.2f}x")
            lines.append(
                f"| {n} | {temp} | {statistics.median(_values(runs, a)):.1f} "
                f"| {statistics.median(_values(runs, b)):.1f} | {median} | {spread} |"
            )
    return lines


def misc_table(runs: list[Figures]) -> list[str]:
    def ms(v: float) -> str:
        return f"{v:.1f} ms"

    def us(v: float) -> str:
        return f"{v:.2f} µs"

    rows = [
        ("`python -c pass`", "s.pass", ms),
        ('`python -c "import nous_tools"`', "s.import", ms),
        ("… its paired difference over `pass`", "s.import.over", ms),
        ("`nous-tools --help`", "s.help", ms),
        ("… its paired difference over `pass`", "s.help.over", ms),
        ("one `execute` of a tool sleeping 50 ms (default executor)", "8.one", ms),
        ("`execute_many` of 8 such tools (default executor)", "8.batch", ms),
        ("`Registry.register` of all the tools", "r.total", lambda v: f"{v:.3f} s"),
        ("… per registration, the first 1,000", "r.first", us),
        ("… per registration, the last 1,000", "r.last", us),
        ("deadline overshoot p50, tool waiting on `ctx.cancelled`", "o.wait.p50", ms),
        ("deadline overshoot p99, tool waiting on `ctx.cancelled`", "o.wait.p99", ms),
        ("deadline overshoot p50, tool spinning in Python", "o.spin.p50", ms),
        ("deadline overshoot p99, tool spinning in Python", "o.spin.p99", ms),
        ("memory growth over the calls of case 10", "10", lambda v: f"{v / 1024:.1f} KB"),
    ]
    lines = ["| figure | median of runs | range over runs |", "|---|---:|---:|"]
    for text, key, fmt in rows:
        median, spread = _spread(_values(runs, key), fmt)
        lines.append(f"| {text} | {median} | {spread} |")
    return lines


def targets_section(runs: list[Figures]) -> list[str]:
    """Each figure with a target: its median over the runs, their range, the target."""
    lines: list[str] = []
    for spec in TARGETS:
        values = [v for v in (spec.value(f) for f in runs) if v is not None]
        if not values:
            lines.append(f"- {spec.text}: not measured; target {spec.target} (issue {spec.issue})")
            continue
        median = statistics.median(values)
        if len(values) > 1:
            figure = (
                f"{spec.shown(median)} ({spec.shown(min(values))} to "
                f"{spec.shown(max(values))} over {len(values)} runs)"
            )
        else:
            figure = f"{spec.shown(median)} (one run)"
        lines.append(f"- {spec.text}: {figure}; target {spec.target} (issue {spec.issue})")
    return lines


def report(runs: list[Figures], info: RunInfo, settings: Settings) -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    mode = "quick (smoke run)" if settings.quick else "full"
    try:
        load = "load average {:.2f} {:.2f} {:.2f} at the end".format(*os.getloadavg())
    except OSError:
        load = "load average unknown"
    workers = int(runs[0].get("pool.workers", 0))
    batch_workers = int(runs[0].get("8.workers", 0))
    target_lines = targets_section(runs)
    lines = [
        "## compare.py: every case (issues 7, 14, 15, 23, 26)",
        "",
        f"- date: {now}",
        f"- CPUs (`os.cpu_count()`): {os.cpu_count()}; {load}",
        f"- Python: {platform.python_implementation()} {platform.python_version()} ({sys.platform})",
        f"- nous_tools {nous_tools.__version__}; peers: {info.peers}",
        f"- mode: {mode}; {len(runs)} run(s), each timing the per-call cases over "
        f"{settings.rounds} rounds of ~{settings.round_ms:.0f} ms, interleaved across the "
        "cases, after a warm-up (the median of the rounds is a run's figure)",
        f"- the default executor here has {workers} workers (W in case 5); case 8 ran on "
        f"it with {batch_workers}",
        "- command: `.venv/bin/python benchmarks/compare.py"
        + (" --quick" if settings.quick else "")
        + (
            f" --runs {settings.runs}"
            if settings.runs != (QUICK if settings.quick else FULL).runs
            else ""
        )
        + "`",
        "",
        "The machine is shared and noisy: read the ratios, measured in the same run, rather "
        "than the absolute times, and the ranges over runs rather than any one figure. "
        "Every per-call case calls `echo(a: str, b: int, c: bool) -> str`; "
        "`benchmarks/README.md` says what each case does. *CPU µs* is the process's CPU "
        "time (all threads) per call: it leaves out the time spent waiting for a core.",
        "",
        "### Figures with a target (the median of the runs, their range; the target beside)",
        "",
        *target_lines,
        "",
        "### Per call",
        "",
        *per_call_table(runs),
        "",
        f"### Contention: caller threads sharing `ToolExecutor({CONTENTION_WORKERS})` "
        f"against `ThreadPoolExecutor({CONTENTION_WORKERS})`",
        "",
        *contention_table(runs),
        "",
        "### Wide fan-out: `ToolExecutor(max_workers=N).execute_many` of N x 50 ms "
        "against `ThreadPoolExecutor(N).map`",
        "",
        *fanout_table(runs),
        "",
        "### Start-up, batches, the registry, deadlines, memory",
        "",
        *misc_table(runs),
        "",
        *default_tool_section(runs, [f"{os.getloadavg()[0]:.2f} (at the end)"]),
    ]
    if info.failures:
        lines += ["", f"Contention calls that did not come back right: {info.failures}"]
    return "\n".join(lines) + "\n"


# -- a tool with the defaults (issue 26) ---------------------------------------------


def default_tool_section(runs: list[Figures], loads: list[str]) -> list[str]:
    """Case D — what a user gets without choosing anything — against the direct call,
    the inline figure (case 2) and langchain-core's ``invoke`` (7a), per run."""

    def line(text: str, a: str, b: str) -> str:
        ratios = [f[a] / f[b] for f in runs if a in f and b in f]
        if not ratios:
            return f"- {text}: not measured"
        return (
            f"- {text}: {statistics.median(ratios):.2f}x "
            f"({min(ratios):.2f}x to {max(ratios):.2f}x over {len(ratios)} run(s))"
        )

    median, spread = _spread(_values(runs, "D"), _us)
    cpu_median, cpu_spread = _spread(_values(runs, "D.cpu"), _us)
    return [
        "### A tool with the defaults (issue 26)",
        "",
        "`Tool.from_function(echo)` with every option left as it is: `timeout=30` (the "
        "call runs in a pool worker, under a deadline) and its 3-property schema "
        "validated — what a user gets without choosing anything. Ratios in the same "
        f"run, median (min to max); 1-minute load average after each run: {', '.join(loads)}.",
        "",
        f"- µs per call: {median} (range {spread}); CPU µs per call (all threads, leaving "
        f"out the waits for a core): {cpu_median} (range {cpu_spread})",
        line("a default `Tool` / the direct call (case D / case 1)", "D", "1"),
        line("a default `Tool` / the inline call (case D / case 2, `timeout=None`)", "D", "2"),
        line("langchain-core's `invoke` / a default `Tool` (case 7a / case D)", "7a", "D"),
        line(
            "a default `Tool` pinned to one CPU with its worker (case Dp / case 1): the "
            "hand-off's own cost, without the cross-core wake-up",
            "Dp",
            "1",
        ),
        line("the inline call / the direct call (case 2 / case 1), beside it", "2", "1"),
    ]


def measure_default_tool(settings: Settings) -> str:
    """``--only default``: case D with the direct call, case 2 and langchain-core,
    interleaved, then case D pinned to one CPU (Dp, see :func:`measure_one_cpu`),
    over 3 runs (2 with ``--quick``)."""
    plain = Tool.from_function(echo, timeout=None, validate_args=False)
    default = Tool.from_function(echo)
    assert default.timeout == 30.0 and default.validator is not None
    assert nous_tools.execute(default, ARGS) == Ok("x")
    langchain = peer_langchain()
    loops: dict[str, Loop] = {
        "1": loop_direct(echo, ARGS),
        "2": loop_execute(nous_tools.execute, plain, ARGS),
        "D": loop_execute(nous_tools.execute, default, ARGS),
    }
    if langchain.loop is not None:
        loops["7a"] = langchain.loop
    runs = 2 if settings.quick else 3
    figures: list[Figures] = []
    loads: list[str] = []
    for run_index in range(runs):
        print(f"timing a default Tool, run {run_index + 1} of {runs} ...", flush=True)
        timings = measure(loops, settings)
        pinned = measure_one_cpu(settings, ARGS) or {}
        timings.update({key: pinned[key] for key in ("Dp", "Fp") if key in pinned})
        figures.append(
            {
                **{key: timing.wall for key, timing in timings.items()},
                **{f"{key}.cpu": timing.cpu for key, timing in timings.items()},
            }
        )
        keep(figures[-1])
        loads.append(f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "?")
    peer = f"langchain-core {langchain.version or '—'}" + (
        f" ({langchain.reason})" if langchain.reason else ""
    )
    return "\n".join([*default_tool_section(figures, loads), "", f"Peer: {peer}."]) + "\n"


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
    keep(ns)
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
        "### Conversion (issue 14)",
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
    lines += [
        "",
        f"- conversion of the 3-int tool: {scalar / 1000:+.3f} µs ({scalar / ns['c1']:+.2f}x "
        "direct; the tool has no converter, so the pipeline does one `is not None` test); "
        "target ≈ 0",
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
    import jsonschema_rs

    from nous_tools.schema._validation import ArgumentValidator

    plain = Tool.from_function(echo, timeout=None, validate_args=False)
    validated = Tool.from_function(echo, timeout=None)
    assert validated.parameters is not None and validated.validator is not None
    three = validated.validator
    fifteen = ArgumentValidator(SCHEMA_15)
    own3 = jsonschema_rs.validator_for(validated.parameters).is_valid
    own15 = jsonschema_rs.validator_for(SCHEMA_15).is_valid
    assert three.validate(ARGS) is None and fifteen.validate(ARGS_15) is None
    assert own3(ARGS) and own15(ARGS_15)

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
    }
    runs = 2 if settings.quick else 5
    per_run: list[dict[str, Timing]] = []
    for run_index in range(runs):
        print(f"timing the validation cases, run {run_index + 1} of {runs} ...", flush=True)
        per_run.append(measure(loops, settings))
        keep({key: timing.wall for key, timing in per_run[-1].items()})
    cases = [
        ("v1", "direct call `echo(**kw)`"),
        ("v2", "`execute`, 3-property tool, `validate_args=False`"),
        ("v3", f"`execute`, 3-property tool, validated ({three.engine})"),
        ("v4", "`validator.validate` alone, 3 properties"),
        ("v5", "jsonschema-rs `is_valid` alone, 3 properties"),
        ("v6", f"`validator.validate` alone, 15 properties ({fifteen.engine})"),
        ("v7", "jsonschema-rs `is_valid` alone, 15 properties"),
    ]
    lines = [
        "### Validation (issue 15, part 2)",
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

    def target(text: str, ratios: list[float], limit: str) -> str:
        return (
            f"- {text}: {statistics.median(ratios):.2f}x ({min(ratios):.2f}x to "
            f"{max(ratios):.2f}x over {runs} runs); target {limit}"
        )

    added = [(r["v3"].wall - r["v2"].wall) / r["v1"].wall for r in per_run]
    versus = [r["v6"].wall / r["v7"].wall for r in per_run]
    lines += [
        "",
        target("what validation adds on the 3-property schema, in direct calls", added, "≤ 1x"),
        target("`validate` / jsonschema-rs's own `is_valid`, 15 properties", versus, "≤ 1.5x"),
    ]
    return "\n".join(lines) + "\n"


def measure_limits(settings: Settings) -> str:
    """What per-tool limits (issue 23) cost per call: a Markdown section.

    The same timed tool (``timeout=5``, no validation) unlimited, with
    ``max_concurrency=4`` (one caller: the slot is always free), and with a
    ``rate_limit`` it never reaches (in memory, the default fixed window), each as
    a ratio to the unlimited one measured in the same rounds; the inline
    (``timeout=None``) trio as well, where a limit is a larger share of the call.
    Each run measures the cases with every thread pinned to one CPU where the
    platform allows (see :func:`measure_one_cpu`: the hand-off's own cost), then
    the timed trio as scheduled (what a caller sees on this shared machine)."""
    rate = "1000000000/second"
    timed = {
        "": Tool.from_function(echo, timeout=5, validate_args=False),
        "cap": Tool.from_function(echo, timeout=5, validate_args=False, max_concurrency=4),
        "rate": Tool.from_function(echo, timeout=5, validate_args=False, rate_limit=rate),
    }
    inline = {
        "": Tool.from_function(echo, timeout=None, validate_args=False),
        "cap": Tool.from_function(echo, timeout=None, validate_args=False, max_concurrency=4),
        "rate": Tool.from_function(echo, timeout=None, validate_args=False, rate_limit=rate),
    }
    getaffinity = getattr(os, "sched_getaffinity", None)
    setaffinity = getattr(os, "sched_setaffinity", None)
    allowed = getaffinity(0) if getaffinity is not None else set()
    pinned = setaffinity is not None and len(allowed) >= 2
    runs = 2 if settings.quick else 3
    per_run: list[dict[str, Timing]] = []
    loads: list[str] = []

    def loops_of(
        execute: c.Callable[..., t.Any], prefix: str, tools: dict[str, Tool]
    ) -> dict[str, Loop]:
        for tool in tools.values():
            assert execute(tool, ARGS) == Ok("x")
        return {
            f"{prefix}{i}": loop_execute(execute, tool, ARGS)
            for i, tool in enumerate(tools.values(), 1)
        }

    for run_index in range(runs):
        print(f"timing the limits cases, run {run_index + 1} of {runs} ...", flush=True)
        timings: dict[str, Timing] = {}
        if pinned:
            t.cast(t.Any, setaffinity)(0, {min(allowed)})  # threads started now inherit it
        try:
            with ToolExecutor(max_workers=CONTENTION_WORKERS) as executor:
                loops = loops_of(executor.execute, "L", timed)
                loops.update(loops_of(executor.execute, "I", inline))
                timings.update(measure(loops, settings))
        finally:
            if pinned:
                t.cast(t.Any, setaffinity)(0, allowed)
        with ToolExecutor(max_workers=CONTENTION_WORKERS) as executor:
            timings.update(measure(loops_of(executor.execute, "S", timed), settings))
        per_run.append(timings)
        keep({key: timing.wall for key, timing in timings.items()})
        loads.append(f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "?")
    where = "every thread pinned to one CPU" if pinned else "as scheduled (no CPU affinity here)"
    cases = [
        ("L1", f"timed tool, no limit (the plain timed call), {where}", "L1"),
        ("L2", "… `max_concurrency=4`", "L1"),
        ("L3", f'… `rate_limit="{rate}"` (in memory, never reached)', "L1"),
        ("S1", "timed tool, no limit, as scheduled", "S1"),
        ("S2", "… `max_concurrency=4`", "S1"),
        ("S3", f'… `rate_limit="{rate}"`', "S1"),
        ("I1", f"inline tool (`timeout=None`), no limit, {where}", "I1"),
        ("I2", "… `max_concurrency=4`", "I1"),
        ("I3", f'… `rate_limit="{rate}"`', "I1"),
    ]
    lines = [
        "### Limits (issue 23)",
        "",
        f"A fresh `ToolExecutor({CONTENTION_WORKERS})` per measurement; {runs} runs of "
        f"{settings.rounds} interleaved rounds (1-minute load average after each run: "
        f"{', '.join(loads)}).",
        "",
        "| # | case | µs/call (median of runs) | range over runs | x its unlimited case (median) |",
        "|---|---|---:|---:|---:|",
    ]
    for key, text, base in cases:
        walls = [timings[key].wall for timings in per_run]
        ratios = [timings[key].wall / timings[base].wall for timings in per_run]
        lines.append(
            f"| {key} | {text} | {_us(statistics.median(walls))} | "
            f"{_us(min(walls))} to {_us(max(walls))} | {statistics.median(ratios):.2f}x |"
        )
    lines.append("")
    for key, base, text in (
        ("L2", "L1", f"`max_concurrency`, {where}"),
        ("L3", "L1", f"`rate_limit` (in memory), {where}"),
        ("S2", "S1", "`max_concurrency`, as scheduled"),
        ("S3", "S1", "`rate_limit` (in memory), as scheduled"),
    ):
        ratios = [timings[key].wall / timings[base].wall for timings in per_run]
        median = statistics.median(ratios)
        lines.append(
            f"- a timed call with {text} / the unlimited one: {median:.2f}x "
            f"({min(ratios):.2f}x to {max(ratios):.2f}x over {runs} runs); target ≤ 1.1x"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (one run)")
    parser.add_argument(
        "--only",
        choices=["conversion", "validation", "limits", "default"],
        help="run one section only (printed; written only with --output)",
    )
    parser.add_argument("--runs", type=int, help="whole runs to aggregate (default 5, quick 1)")
    parser.add_argument("--rounds", type=int, help="timing rounds per case (default 15, quick 3)")
    parser.add_argument("--round-ms", type=float, help="target milliseconds per timed round")
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write each run's raw figures (and the load average) there, as JSON",
    )
    parser.add_argument(
        "--output",
        type=pathlib.Path,
        help="where to write the Markdown report (default: benchmarks/RESULTS.md on a "
        "full run, nowhere on a quick one)",
    )
    options = parser.parse_args(argv)
    settings = QUICK if options.quick else FULL
    if options.runs is not None:
        settings = attrs.evolve(settings, runs=max(1, options.runs))
    if options.rounds is not None:
        settings = attrs.evolve(settings, rounds=max(1, options.rounds))
    if options.round_ms is not None:
        settings = attrs.evolve(settings, round_ms=max(1.0, options.round_ms))
    # Timeouts log an error each (deadline overshoot): keep the records, print nothing.
    logging.getLogger("nous_tools").propagate = False
    began = time.monotonic()
    if options.only == "conversion":
        text = measure_conversion(settings)
    elif options.only == "validation":
        text = measure_validation(settings)
    elif options.only == "limits":
        text = measure_limits(settings)
    elif options.only == "default":
        text = measure_default_tool(settings)
    else:
        info = RunInfo()
        runs = []
        for i in range(settings.runs):
            runs.append(run_once(settings, i, info))
            keep(runs[-1])
        main_runs = list(JSON_RUNS)
        text = "\n".join(
            (
                report(runs, info, settings),
                measure_conversion(settings),
                measure_validation(settings),
                measure_limits(settings),
            )
        )
        JSON_RUNS[:] = main_runs  # the sections' own runs are --only's
    print()
    print(text)
    default = None if settings.quick or options.only else RESULTS
    output = options.output if options.output is not None else default
    if output is not None:
        from record import replace_section  # beside this file

        replace_section(output, "compare.py", text)
        print(f"written to {output}")
    if options.json:
        import _results

        _results.dump(
            options.json, "compare" + (f".{options.only}" if options.only else ""), JSON_RUNS
        )
    print(f"took {time.monotonic() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))  # deadlines.py, for the overshoot figures
    raise SystemExit(main())
