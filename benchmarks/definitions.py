"""What ``Registry.tool_definitions`` costs per model turn (issue 26): a registry of
10,000 tools, each shape, strict and not, called again and again on an unchanged
registry — against what it cost before the definitions were cached (each tool's
``to_*_schema`` made anew on every call, as the registry did).

Run it with ``.venv/bin/python benchmarks/definitions.py [--tools N] [--runs N]
[--rounds N]``. Each run builds a fresh registry, times the first call of each case
(which makes and caches the definitions), then the repeated calls, interleaved
round by round (a slow moment of the machine hits all of them); a run's figure is
the median over its rounds. The summary gives min-median-max over the runs, with the
load average. Target: a repeated call at most 5 ms at 10,000 tools, any shape.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import pathlib
import statistics
import sys
import time
import typing as t

try:
    import nous_tools  # noqa: F401
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from nous_tools import Registry, Tool

TARGET_MS = 5.0

#: A tool schema as models see them: five parameters, described, one nested object.
SCHEMA: dict[str, t.Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to look for."},
        "limit": {"type": "integer", "description": "How many results.", "default": 10},
        "sort": {"type": "string", "enum": ["asc", "desc"], "description": "The order."},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags to match."},
        "where": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "radius_km": {"type": "number"}},
            "required": ["city"],
            "description": "Where to look.",
        },
    },
    "required": ["query"],
}

Shape = t.Literal["openai", "responses", "anthropic"]
CASES: list[tuple[str, Shape, bool]] = [
    ("openai", "openai", False),
    ("openai strict", "openai", True),
    ("responses", "responses", False),
    ("responses strict", "responses", True),
    ("anthropic", "anthropic", False),
]


def search(**arguments: t.Any) -> str:
    return "found"


def registry_of(n: int) -> Registry:
    return Registry(
        Tool(
            name=f"search_{i:05d}",
            function=search,
            description=f"Search collection number {i}.",
            parameters=SCHEMA,
            timeout=None,
        )
        for i in range(n)
    )


def uncached(registry: Registry, shape: Shape, strict: bool) -> list[dict[str, t.Any]]:
    """The definitions as the registry made them before the cache: every tool's
    ``to_*_schema`` anew (a deep copy of its schema, strict made again)."""
    tools = [tool for tool in registry.all() if tool.approval != "deny"]
    if shape == "openai":
        return [tool.to_openai_schema(strict=strict) for tool in tools]
    if shape == "responses":
        return [tool.to_responses_schema(strict=strict) for tool in tools]
    return [tool.to_anthropic_schema() for tool in tools]


class Timing(t.NamedTuple):
    """Milliseconds per call: wall clock, and this process's CPU time (which leaves
    out the time spent waiting for a core another process holds)."""

    wall: float
    cpu: float


def _time(function: t.Callable[[], object], n: int) -> Timing:
    enabled = gc.isenabled()
    gc.disable()
    try:
        cpu = time.process_time()
        began = time.perf_counter()
        for _ in range(n):
            function()
        wall = (time.perf_counter() - began) / n * 1e3
        return Timing(wall, (time.process_time() - cpu) / n * 1e3)
    finally:
        if enabled:
            gc.enable()


def _median(timings: list[Timing]) -> Timing:
    return Timing(
        statistics.median(x.wall for x in timings), statistics.median(x.cpu for x in timings)
    )


def one_run(tools: int, rounds: int) -> dict[str, tuple[float, Timing, Timing]]:
    """case -> (first call ms, repeated call, uncached call)."""
    registry = registry_of(tools)
    first: dict[str, float] = {}
    for name, shape, strict in CASES:
        began = time.perf_counter()
        registry.tool_definitions(shape, strict=strict)
        first[name] = (time.perf_counter() - began) * 1e3
        assert registry.tool_definitions(shape, strict=strict) == uncached(registry, shape, strict)
    repeated: dict[str, list[Timing]] = {name: [] for name, _, _ in CASES}
    before: dict[str, list[Timing]] = {name: [] for name, _, _ in CASES}
    # The repeated calls first, interleaved across the shapes; the uncached path
    # after (its garbage, hundreds of megabytes, would otherwise flush the caches
    # the next repeated call is measured with).
    gc.collect()
    for _ in range(rounds):
        for name, shape, strict in CASES:

            def cached(shape: Shape = shape, strict: bool = strict) -> object:
                return registry.tool_definitions(shape, strict=strict)

            repeated[name].append(_time(cached, 10))
    gc.collect()
    for _ in range(max(1, rounds // 2)):
        for name, shape, strict in CASES:

            def anew(shape: Shape = shape, strict: bool = strict) -> object:
                return uncached(registry, shape, strict)

            before[name].append(_time(anew, 1))
    return {
        name: (first[name], _median(repeated[name]), _median(before[name])) for name, _, _ in CASES
    }


def _spread(values: list[float]) -> str:
    return f"{min(values):6.2f} - {statistics.median(values):6.2f} - {max(values):6.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000, help="tools (default 10,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs (default 3)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per run (default 5)")
    parser.add_argument("--json", metavar="PATH", help="also write each run's figures there")
    options = parser.parse_args(argv)
    import _results  # beside this file: --json's format

    kept = []
    logging.getLogger("nous_tools").propagate = False

    load = os.getloadavg()
    print(
        f"{options.tools:,} tools; load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    figures: dict[str, list[tuple[float, Timing, Timing]]] = {}
    for run in range(1, options.runs + 1):
        results = one_run(options.tools, options.rounds)
        print(f"run {run} (load {os.getloadavg()[0]:.2f}):")
        for name, (first, repeated, before) in results.items():
            print(
                f"  {name:<17} first {first:7.1f} ms   repeated {repeated.wall:5.2f} ms "
                f"(CPU {repeated.cpu:5.2f})   uncached {before.wall:7.1f} ms "
                f"(CPU {before.cpu:7.1f})"
            )
            figures.setdefault(name, []).append((first, repeated, before))
        kept.append(
            _results.run(
                {
                    f"{name.replace(' ', '_')}.{what}": value
                    for name, (first, repeated, before) in results.items()
                    for what, value in (
                        ("first_ms", first),
                        ("repeated_ms", repeated.wall),
                        ("repeated_cpu_ms", repeated.cpu),
                        ("uncached_ms", before.wall),
                    )
                }
                | {"tools": options.tools}
            )
        )
    if options.json:
        _results.dump(options.json, "definitions", kept)
    load = os.getloadavg()
    print(f"load average after:  {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(
        f"a repeated call, ms, over {options.runs} runs, min - median - max "
        f"(target ≤ {TARGET_MS} ms):"
    )
    for name, values in figures.items():
        print(
            f"  {name:<17} wall {_spread([r.wall for _, r, _ in values])}   "
            f"CPU {_spread([r.cpu for _, r, _ in values])}   "
            f"(uncached: wall {statistics.median(b.wall for _, _, b in values):7.1f}; "
            f"first call {statistics.median(f for f, _, _ in values):7.1f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
