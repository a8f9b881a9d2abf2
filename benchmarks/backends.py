"""Backends against their engines' own bare round trips (issue 16).

Run it with ``.venv/bin/python benchmarks/backends.py [--quick] [--only thread,process,ray,celery]``.
It starts what it needs on this machine and stops it after: a local Ray
(``ray.init(num_cpus=2)``), a ``redis-server`` on 127.0.0.1 and a
``celery worker -P prefork -c 2`` (``tests/support/celery_app.py``). It prints figures and
gives the target beside each; it is not a test and always exits 0 (unless it crashes). An
engine that is not installed gets a line that says so.

1. **Per-call cost.** A trivial tool (``add(a, b)``, ``timeout=30``, no
   validation) through ``ToolExecutor.execute`` on each backend, against the
   engine's own bare round trip: ``ThreadPoolExecutor(2).submit(...).result()``
   (thread), ``ProcessPoolExecutor(2).submit(...).result()`` (process: reuses
   its workers, cannot kill them), ``ray.get(f.remote(...))`` with
   ``max_retries=0`` (Ray), ``bare_add.apply_async(...).get()`` (Celery, the same
   worker). Loops of N calls (N calibrated so a round takes ``--round-ms``),
   rounds interleaved across the two cases of a backend, medians. Target: at most
   1.2x the bare round trip.
2. **Throughput of 2 local workers.** 200 calls (80 with ``--quick``) of a tool
   that spins the CPU for 5 ms, all at once: ``execute_many`` on a
   ``ToolExecutor(max_workers=8)`` whose backend has 2 workers, against the
   engine's bare way of running as many at once (``map``; 8 refs in flight with
   ``ray.wait``; all ``apply_async`` then every ``get``). Calls per second and the
   ratio (no target: the figure to watch).
3. **Kill overshoot.** A tool that records its pid and sleeps 60 s: the time the
   caller gets ``Err(ToolTimeout)`` minus the timeout (p50 and max), and how long
   after that the process running it is gone (the thread backend cannot kill a
   thread sleeping in C: it only returns).
"""

from __future__ import annotations

import argparse
import collections.abc as c
import concurrent.futures
import gc
import os
import pathlib
import statistics
import sys
import tempfile
import time
import typing as t

HERE = pathlib.Path(__file__).resolve().parent
TESTS = HERE.parent / "tests" / "support"
sys.path.insert(0, str(TESTS))
try:
    import nous_tools  # noqa: F401
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(HERE.parent))

from servers import ServerError, celery_worker, redis_server, wait_dead  # noqa: E402

from nous_tools import Err, Tool, ToolExecutor, ToolTimeout  # noqa: E402
from nous_tools.backend import ProcessBackend, ThreadBackend  # noqa: E402

TARGET = 1.2
Loop = c.Callable[[int], None]


def _time(loop: Loop, n: int) -> float:
    enabled = gc.isenabled()
    gc.disable()
    try:
        began = time.perf_counter_ns()
        loop(n)
        return (time.perf_counter_ns() - began) / n
    finally:
        if enabled:
            gc.enable()


def per_call(loops: dict[str, Loop], rounds: int, round_ms: float) -> dict[str, float]:
    """Median ns per call of each loop, rounds interleaved."""
    sizes = {}
    for key, loop in loops.items():
        n = 1
        while True:
            ns = _time(loop, n)
            if ns * n >= round_ms * 1e6 / 4 or n >= 1_000_000:
                break
            n *= 2
        sizes[key] = max(1, int(round_ms * 1e6 / ns))
    times: dict[str, list[float]] = {key: [] for key in loops}
    for _ in range(rounds):
        for key, loop in loops.items():
            times[key].append(_time(loop, sizes[key]))
    return {key: statistics.median(values) for key, values in times.items()}


def ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms" if ns >= 1e5 else f"{ns / 1e3:.1f} µs"


class Engine(t.NamedTuple):
    name: str
    executor: ToolExecutor
    bare_call: Loop  # n trivial round trips
    bare_burst: c.Callable[[int], None]  # n 5 ms calls at once
    tools: dict[str, Tool]
    close: c.Callable[[], None]
    ours_call: Loop | None = None  # n trivial calls through an executor (default: executor)
    note: str = ""


def run_engine(engine: Engine, args: argparse.Namespace, module: t.Any) -> list[str]:
    lines = [f"## {engine.name}"]
    executor, tools = engine.executor, engine.tools
    add = tools["add"]

    def through_executor(n: int) -> None:
        for _ in range(n):
            executor.execute(add, {"a": 1, "b": 2})

    ours = engine.ours_call or through_executor

    for _ in range(3):  # warm up: workers started, code paths loaded
        ours(2)
        engine.bare_call(2)
    figures = per_call({"bare": engine.bare_call, "ours": ours}, args.rounds, args.round_ms)
    ratio = figures["ours"] / figures["bare"]
    lines.append(
        f"- per call: bare {ms(figures['bare'])}, through the executor {ms(figures['ours'])} "
        f"({ratio:.2f}x; +{ms(figures['ours'] - figures['bare'])}) (target ≤ {TARGET}x)"
        + (f" ({engine.note})" if engine.note else "")
    )

    calls = args.burst
    engine.bare_burst(4)  # warm up: the function registered, the workers started
    executor.execute_many([(tools["burn"], {"ms": 5.0}) for _ in range(4)])
    began = time.perf_counter()
    engine.bare_burst(calls)
    bare_s = time.perf_counter() - began
    burn = tools["burn"]
    began = time.perf_counter()
    results = executor.execute_many([(burn, {"ms": 5.0}) for _ in range(calls)])
    ours_s = time.perf_counter() - began
    failed = sum(1 for r in results if isinstance(r, Err))
    lines.append(
        f"- throughput of 2 workers, {calls} calls of 5 ms CPU: bare {calls / bare_s:.0f}/s, "
        f"through the executor {calls / ours_s:.0f}/s ({(calls / ours_s) / (calls / bare_s):.2f}x)"
        + (f" — {failed} failed" if failed else "")
    )

    hang = tools["hang"]
    overshoots, gone = [], []
    with tempfile.TemporaryDirectory() as directory:
        for k in range(args.kills):
            marker = os.path.join(directory, f"m{k}")
            began = time.monotonic()
            result = executor.execute(hang, {"marker": marker})
            returned = time.monotonic()
            assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout), result
            overshoots.append(returned - began - t.cast(float, hang.timeout))
            pids = pathlib.Path(marker).read_text().split() if os.path.exists(marker) else []
            if engine.name != "thread" and pids:
                dead = wait_dead(int(pids[0]), 30)
                gone.append(time.monotonic() - returned if dead else float("inf"))
            time.sleep(0.3 if engine.name in ("ray", "celery") else 0.05)  # let a spare start
    over = sorted(overshoots)
    text = (
        f"- kill at a {hang.timeout:g} s deadline, {len(over)} calls: Err(ToolTimeout) "
        f"{statistics.median(over) * 1000:.1f} ms after the deadline (p50), "
        f"{over[-1] * 1000:.1f} ms (max)"
    )
    if gone:
        text += (
            f"; the process running it gone {statistics.median(gone) * 1000:.0f} ms later "
            f"(p50), {max(gone) * 1000:.0f} ms (max)"
        )
    elif engine.name == "thread":
        text += "; the thread sleeping in C is interrupted only when the sleep ends"
    lines.append(text)
    lines.append(f"- stats: {executor.stats()}" if args.verbose else "")
    return [line for line in lines if line]


def thread_engine(module: t.Any) -> Engine:
    executor = ToolExecutor(backend=ThreadBackend(max_workers=2), max_workers=8)
    pool = concurrent.futures.ThreadPoolExecutor(2)
    # The per-call loops run with every thread on one CPU: on a busy 2-core machine
    # a hand-off to another core costs whatever the scheduler makes it (runs flip
    # between ~20 and ~200 µs), which says nothing about either pool.
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        pinned_pool = concurrent.futures.ThreadPoolExecutor(2)
        pinned = ToolExecutor(backend=ThreadBackend(max_workers=2), max_workers=8)
        add_tool = Tool.from_function(module.add, timeout=30, validate_args=False)
        pinned_pool.submit(module.add, 1, 2).result(30)
        pinned.execute(add_tool, {"a": 1, "b": 2})  # its workers start pinned
    finally:
        os.sched_setaffinity(0, allowed)

    def on_one_cpu(loop: Loop) -> Loop:
        def run(n: int) -> None:
            os.sched_setaffinity(0, {min(allowed)})
            try:
                loop(n)
            finally:
                os.sched_setaffinity(0, allowed)

        return run

    def bare_loop(n: int) -> None:
        for _ in range(n):
            pinned_pool.submit(module.add, 1, 2).result(30)

    def ours_loop(n: int) -> None:
        for _ in range(n):
            pinned.execute(add_tool, {"a": 1, "b": 2})

    bare = on_one_cpu(bare_loop)

    def burst(n: int) -> None:
        list(pool.map(module.burn, [5.0] * n))

    tools = {
        "add": Tool.from_function(module.add, timeout=30, validate_args=False),
        "burn": Tool.from_function(module.burn, timeout=30, validate_args=False),
        "hang": Tool.from_function(module.hang, timeout=0.2, retries=0),
    }

    def close() -> None:
        for ex in (executor, pinned):
            ex.shutdown(wait=False)
        for p in (pool, pinned_pool):
            p.shutdown(wait=False)

    return Engine(
        "thread",
        executor,
        bare,
        burst,
        tools,
        close,
        on_one_cpu(ours_loop),
        "all threads on one CPU",
    )


def process_engine(module: t.Any) -> Engine:
    executor = ToolExecutor(backend=ProcessBackend(max_workers=2), max_workers=8)
    pool = concurrent.futures.ProcessPoolExecutor(2)

    def bare(n: int) -> None:
        for _ in range(n):
            pool.submit(module.add, 1, 2).result(30)

    def burst(n: int) -> None:
        list(pool.map(module.burn, [5.0] * n))

    tools = {
        "add": Tool.from_function(module.add, timeout=30, validate_args=False),
        "burn": Tool.from_function(module.burn, timeout=30, validate_args=False),
        "hang": Tool.from_function(module.hang, timeout=0.5, retries=0),
    }

    def close() -> None:
        executor.shutdown()
        pool.shutdown()

    return Engine("process", executor, bare, burst, tools, close)


def ray_engine(module: t.Any) -> Engine:
    import ray

    from nous_tools.contrib.ray import RayBackend

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": f"{TESTS}{os.pathsep}{HERE.parent}"}},
    )
    executor = ToolExecutor(backends={"ray": RayBackend()}, backend="ray", max_workers=8)
    add = ray.remote(max_retries=0, retry_exceptions=False)(module.add)
    burn = ray.remote(max_retries=0, retry_exceptions=False)(module.burn)

    def bare(n: int) -> None:
        for _ in range(n):
            ray.get(add.remote(1, 2), timeout=30)

    def burst(n: int) -> None:
        # 8 in flight, as the executor's 8 lanes keep: with all n queued at once, Ray's
        # scheduler on 2 busy CPUs runs them about half as fast.
        pending, left = [], n
        while left or pending:
            while left and len(pending) < 8:
                pending.append(burn.remote(5.0))
                left -= 1
            done, pending = ray.wait(pending, num_returns=1, timeout=120)
            ray.get(done)

    tools = {
        "add": Tool.from_function(module.add, timeout=30, validate_args=False, backend="ray"),
        "burn": Tool.from_function(module.burn, timeout=30, validate_args=False, backend="ray"),
        "hang": Tool.from_function(module.hang, timeout=1.0, retries=0, backend="ray"),
    }

    def close() -> None:
        executor.shutdown()
        ray.shutdown()

    return Engine("ray", executor, bare, burst, tools, close)


def celery_engine(module: t.Any) -> Engine:
    from nous_tools.contrib.celery import CeleryBackend

    backend = CeleryBackend(module.app, max_timeout=5)
    executor = ToolExecutor(backends={"celery": backend}, backend="celery", max_workers=8)

    def bare(n: int) -> None:
        for _ in range(n):
            module.bare_add.apply_async((1, 2)).get(timeout=30)

    def burst(n: int) -> None:
        pending = [module.bare_burn.apply_async((5.0,)) for _ in range(n)]
        for result in pending:
            result.get(timeout=120)

    tools = {
        "add": Tool.from_function(module.add, timeout=5, validate_args=False, backend="celery"),
        "burn": Tool.from_function(module.burn, timeout=5, validate_args=False, backend="celery"),
        "hang": Tool.from_function(module.hang, timeout=1.0, retries=0, backend="celery"),
    }
    return Engine("celery", executor, bare, burst, tools, executor.shutdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--only", default="thread,process,ray,celery")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--round-ms", type=float, default=None)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    args.rounds = args.rounds or (3 if args.quick else 9)
    args.round_ms = args.round_ms or (100.0 if args.quick else 300.0)
    args.burst = 80 if args.quick else 200
    args.kills = 3 if args.quick else 8
    wanted = [name.strip() for name in args.only.split(",") if name.strip()]
    started = time.monotonic()
    print(f"# backends.py: {', '.join(wanted)} (2 CPUs: {os.cpu_count()} here)\n", flush=True)
    with redis_server() as url:
        os.environ["NOUS_TOOLS_TEST_BROKER"] = url
        import celery_app as module  # the tools, and the app the Celery worker loads

        makers = {
            "thread": thread_engine,
            "process": process_engine,
            "ray": ray_engine,
            "celery": celery_engine,
        }
        for name in wanted:
            try:
                if name == "celery":
                    with celery_worker("celery_app", url, concurrency=2):
                        engine = makers[name](module)
                        try:
                            print("\n".join(run_engine(engine, args, module)) + "\n", flush=True)
                        finally:
                            engine.close()
                    continue
                engine = makers[name](module)
            except (ImportError, ServerError) as exc:
                print(f"## {name}\n- not run: {exc}\n", flush=True)
                continue
            try:
                print("\n".join(run_engine(engine, args, module)) + "\n", flush=True)
            finally:
                engine.close()
    print(f"took {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
