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


def _time(function: t.Callable[[], object], n: int) -> float:
    enabled = gc.isenabled()
    gc.disable()
    try:
        began = time.perf_counter()
        for _ in range(n):
            function()
        return (time.perf_counter() - began) / n
    finally:
        if enabled:
            gc.enable()


def one_run(tools: int, rounds: int) -> dict[str, tuple[float, float, float]]:
    """case -> (first call ms, repeated call ms, uncached call ms)."""
    registry = registry_of(tools)
    first: dict[str, float] = {}
    for name, shape, strict in CASES:
        began = time.perf_counter()
        registry.tool_definitions(shape, strict=strict)
        first[name] = (time.perf_counter() - began) * 1e3
        assert registry.tool_definitions(shape, strict=strict) == uncached(registry, shape, strict)
    repeated: dict[str, list[float]] = {name: [] for name, _, _ in CASES}
    before: dict[str, list[float]] = {name: [] for name, _, _ in CASES}
    for _ in range(rounds):
        for name, shape, strict in CASES:

            def cached(shape: Shape = shape, strict: bool = strict) -> object:
                return registry.tool_definitions(shape, strict=strict)

            def anew(shape: Shape = shape, strict: bool = strict) -> object:
                return uncached(registry, shape, strict)

            repeated[name].append(_time(cached, 10) * 1e3)
            before[name].append(_time(anew, 1) * 1e3)
    return {
        name: (first[name], statistics.median(repeated[name]), statistics.median(before[name]))
        for name, _, _ in CASES
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000, help="tools (default 10,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs (default 3)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per run (default 5)")
    options = parser.parse_args(argv)
    logging.getLogger("nous_tools").propagate = False

    load = os.getloadavg()
    print(
        f"{options.tools:,} tools; load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    figures: dict[str, list[tuple[float, float, float]]] = {}
    for run in range(1, options.runs + 1):
        results = one_run(options.tools, options.rounds)
        print(f"run {run} (load {os.getloadavg()[0]:.2f}):")
        for name, (first, repeated, before) in results.items():
            print(
                f"  {name:<17} first {first:8.1f} ms   repeated {repeated:6.2f} ms   "
                f"uncached {before:8.1f} ms   ({before / repeated:5.0f}x)"
            )
            figures.setdefault(name, []).append((first, repeated, before))
    load = os.getloadavg()
    print(f"load average after:  {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(
        f"a repeated call, ms, over {options.runs} runs (min - median - max; target ≤ {TARGET_MS} ms):"
    )
    for name, values in figures.items():
        repeated = [r for _, r, _ in values]
        before = [b for _, _, b in values]
        first = [f for f, _, _ in values]
        print(
            f"  {name:<17} {min(repeated):6.2f} - {statistics.median(repeated):6.2f} - "
            f"{max(repeated):6.2f}   (uncached {statistics.median(before):7.1f}, "
            f"first call {statistics.median(first):7.1f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
