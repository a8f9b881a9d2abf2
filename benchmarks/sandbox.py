"""The sandbox the kernel enforces (issue 35): what a fence costs.

Run it with ``.venv/bin/python benchmarks/sandbox.py [--quick] [--json PATH]``. Every
section interleaves its cases round by round, so a noisy machine moves both sides
of a ratio together; each figure is min-median-max over the rounds, with the load
average beside it. Not a test: it always exits 0 (unless it crashes).

1. **A confined process call on a warm pool**: a trivial tool
   (``echo(x) -> x``, ``isolation="process"``) on ``ToolExecutor(process_workers=1)``,
   called with a context whose sandbox is ``workspace_write`` (Landlock, a network
   namespace), against the same call with no sandbox; per round, N calls of each,
   the ratio of their times. Target: ≤ 1.15x.
2. **The first confined call**: a fresh executor's first call (a child started,
   confined, warmed up) against a fresh executor's first unconfined call. The probe,
   paid once per process before the first fenced call, is timed on its own.
3. **``policy.run(["true"])``** against ``subprocess.run(["true"])``, with
   ``network=True`` (target ≤ 1.5x) and ``network=False`` (target ≤ 2x), with a
   resource limit (the ``preexec_fn`` way, for scale), and against
   ``bwrap --ro-bind / / --dev /dev --unshare-net true`` when bubblewrap is installed
   (and ``unshare -n true`` for scale).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import typing as t

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _results

from nous_tools import RunContext, SandboxPolicy, ToolExecutor, tool
from nous_tools import sandbox as sandbox_module


@tool(timeout=10, isolation="process", retries=0, validate_args=False)
def echo(x: int) -> int:
    return x


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return "-".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def timed(fn: t.Callable[[], object], n: int) -> float:
    began = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - began) / n


def warm_pool(root: str, rounds: int, n: int) -> list[float]:
    fenced = RunContext.new(sandbox=SandboxPolicy.new("workspace_write", workspace_root=root))
    plain = RunContext.new()
    ratios = []
    with ToolExecutor(process_workers=1) as executor:
        for ctx in (plain, fenced):  # start both children, warm them
            for _ in range(50):
                executor.execute(echo, {"x": 1}, ctx).unwrap()
        # ... and let both pools start their spare child before timing anything
        settle = time.monotonic() + 30
        while time.monotonic() < settle and executor.stats()["process_workers"] < 4:
            time.sleep(0.05)
        time.sleep(0.5)
        for _ in range(rounds):  # each round: chunks of both, alternating, summed
            a = b = 0.0
            for _ in range(10):
                a += timed(lambda: executor.execute(echo, {"x": 1}, fenced), n // 10)
                b += timed(lambda: executor.execute(echo, {"x": 1}, plain), n // 10)
            ratios.append(a / b)
    return ratios


def first_call(root: str, rounds: int) -> tuple[list[float], list[float]]:
    fenced_ms, plain_ms = [], []
    for _ in range(rounds):
        for ctx, into in (
            (
                RunContext.new(sandbox=SandboxPolicy.new("workspace_write", workspace_root=root)),
                fenced_ms,
            ),
            (RunContext.new(), plain_ms),
        ):
            with ToolExecutor(process_workers=1) as executor:
                began = time.perf_counter()
                executor.execute(echo, {"x": 1}, ctx).unwrap()
                into.append((time.perf_counter() - began) * 1000)
    return fenced_ms, plain_ms


def programs(root: str, rounds: int, n: int) -> dict[str, list[float]]:
    with_net = SandboxPolicy.new("workspace_write", workspace_root=root, network=True)
    without = SandboxPolicy.new("workspace_write", workspace_root=root)
    limited = SandboxPolicy.new("workspace_write", workspace_root=root, max_open_files=1024)
    cases: dict[str, t.Callable[[], object]] = {
        "subprocess": lambda: subprocess.run(["true"], check=True),
        "network=True": lambda: with_net.run(["true"], check=True),
        "network=False": lambda: without.run(["true"], check=True),
        # a limit needs code in the child: the preexec_fn way (a fork of this process)
        "with a limit": lambda: limited.run(["true"], check=True),
    }
    if shutil.which("unshare"):
        cases["unshare -n"] = lambda: subprocess.run(["unshare", "-n", "true"], check=True)
    if shutil.which("bwrap"):
        bwrap = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net", "true"]
        cases["bwrap"] = lambda: subprocess.run(bwrap, check=True)
    for fn in cases.values():
        fn()
    times: dict[str, list[float]] = {key: [] for key in cases}
    for _ in range(rounds):
        for key, fn in cases.items():
            times[key].append(timed(fn, n))
    base = times["subprocess"]
    return {
        key: [v / b for v, b in zip(values, base, strict=False)] for key, values in times.items()
    } | {"subprocess_ms": [v * 1000 for v in base]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    options = parser.parse_args()
    rounds = 5 if options.quick else 21
    found = sandbox_module.probe()
    print(f"probe: {found.grade}; missing: {', '.join(found.missing) or 'none'}")
    began = time.perf_counter()
    sandbox_module.probe(refresh=True)
    probe_ms = (time.perf_counter() - began) * 1000
    print(f"  the probe itself (once per process): {probe_ms:.0f} ms")
    figures: dict[str, float] = {"probe_ms": probe_ms}
    with tempfile.TemporaryDirectory() as root:
        ratios = warm_pool(root, rounds, 200 if options.quick else 400)
        print(
            f"1. confined / unconfined process call, warm pool: {spread(ratios)}x "
            f"(target <= 1.15x)   load {load()}"
        )
        figures["warm_ratio"] = statistics.median(ratios)
        fenced_ms, plain_ms = first_call(root, 3 if options.quick else 7)
        print(
            f"2. first call, confined child: {spread(fenced_ms, '{:.1f}')} ms; unconfined "
            f"child: {spread(plain_ms, '{:.1f}')} ms   load {load()}"
        )
        figures["first_fenced_ms"] = statistics.median(fenced_ms)
        figures["first_plain_ms"] = statistics.median(plain_ms)
        ratios_by_case = programs(root, rounds, 20 if options.quick else 50)
        print(
            f"3. subprocess.run(['true']): {spread(ratios_by_case.pop('subprocess_ms'), '{:.3f}')} ms"
        )
        targets = {"network=True": "<= 1.5x", "network=False": "<= 2x"}
        for key, values in ratios_by_case.items():
            if key == "subprocess":
                continue
            name = f"policy.run, {key}" if key.startswith(("network", "with")) else key
            target = f" (target {targets[key]})" if key in targets else ""
            print(f"   {name}: {spread(values)}x subprocess.run{target}   load {load()}")
            figures[f"run_{key}"] = statistics.median(values)
    if options.json:
        _results.dump(options.json, "sandbox", [_results.run(figures)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
