"""The fixed cost per call of a model's batch (issue 39): ``execute_tool_calls`` of
1,000 Chat Completions calls (JSON arguments, as a model sends them) against
``execute_many`` of the same calls already read, ``Registry.execute_many`` of them by
name, and a bare ``ThreadPoolExecutor(8)`` ``submit``/``result`` of the function, in
microseconds per call. Target: ``execute_tool_calls`` at most 1.2x ``execute_many``.

Run it with ``.venv/bin/python benchmarks/batch.py [--runs N] [--rounds N]``. The
sides are timed in turn, round after round (interleaved); each run prints min -
median - max over its rounds and the load average. A benchmark, not a test: it
prints and exits 0.
"""

from __future__ import annotations

import argparse
import collections.abc as c
import concurrent.futures
import json
import os
import pathlib
import statistics
import sys
import time

try:
    import nous_tools
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    import nous_tools

from nous_tools import Registry, Tool, ToolExecutor, execute_tool_calls

CALLS = 1_000


def echo(x: str) -> str:
    return x


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="whole runs (default 3)")
    parser.add_argument("--rounds", type=int, default=9, help="rounds per run (default 9)")
    parser.add_argument("--json", metavar="PATH", help="also write each run's figures there")
    options = parser.parse_args(argv)
    runs: list[dict[str, float]] = []
    executor = ToolExecutor()
    tool = Tool.from_function(echo, timeout=5)
    registry = Registry([tool], executor=executor)
    response = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "echo", "arguments": json.dumps({"x": "y"})},
            }
            for i in range(CALLS)
        ],
    }
    jobs = [(tool, {"x": "y"}) for _ in range(CALLS)]
    bare = concurrent.futures.ThreadPoolExecutor(8)

    def tool_calls() -> None:
        execute_tool_calls(registry, response)

    def many() -> None:
        executor.execute_many(jobs)

    named = [("echo", {"x": "y"}) for _ in range(CALLS)]

    def registry_many() -> None:
        registry.execute_many(named)

    def pool() -> None:
        for future in [bare.submit(echo, "y") for _ in range(CALLS)]:
            future.result()

    sides: list[tuple[str, c.Callable[[], None]]] = [
        ("execute_tool_calls", tool_calls),
        ("execute_many", many),
        ("Registry.execute_many", registry_many),
        ("ThreadPoolExecutor(8)", pool),
    ]
    print(f"nous_tools {nous_tools.__version__}: {CALLS} calls a batch, us per call")
    try:
        for _, side in sides:
            side()  # warm: the workers started
        for run in range(options.runs):
            times: dict[str, list[float]] = {name: [] for name, _ in sides}
            ratios: list[float] = []
            for _ in range(options.rounds):
                for name, side in sides:
                    began = time.perf_counter()
                    side()
                    times[name].append((time.perf_counter() - began) / CALLS * 1e6)
                ratios.append(times["execute_tool_calls"][-1] / times["execute_many"][-1])
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"== run {run + 1} of {options.runs} (load {load})")
            for name, values in times.items():
                print(
                    f"  {name:24} {min(values):6.1f} - {statistics.median(values):6.1f} - "
                    f"{max(values):6.1f} us"
                )
            runs.append(
                {f"{name}.us": statistics.median(values) for name, values in times.items()}
                | {"ratio": statistics.median(ratios)}
            )
            print(
                f"  execute_tool_calls / execute_many  {min(ratios):.2f}x - "
                f"{statistics.median(ratios):.2f}x - {max(ratios):.2f}x   (target ≤ 1.2x)"
            )
    finally:
        executor.shutdown()
        bare.shutdown()
    if options.json:
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
        import _results  # beside this file: --json's format

        _results.dump(options.json, "batch", [_results.run(figures) for figures in runs])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
