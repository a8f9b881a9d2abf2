"""What ``Registry.tool_definitions`` costs per model turn (issue 26): a registry
of 10,000 tools, each shape, strict and not, called again and again on an unchanged
registry — against what it cost before the definitions were cached (each tool's
``to_*_schema`` made anew on every call, as the registry did) — and the three
figures of the incremental definitions (a change remakes only what it changed):

- **after one change** (``--register-tools``, default 10,000): the next call after
  one ``register()`` of a new tool (its name in the middle of the order), after a
  replacement (``register()`` of a name already there) and after an
  ``unregister()``; target ≤ 2 ms;
- **the first call** (``--first-tools``, default 100,000) on a registry whose tools
  were never asked for their definitions, Chat Completions plain and strict: with
  one schema object shared by every tool (as ``registry_of`` makes them), and with
  every schema its own (one description differs: nothing to share); target ≤ 0.5 s;
- **repeated calls with the garbage collector on** (``--gc-tools``, default 5,000):
  each call timed alone, the previous answer kept until the next call returns (as
  an agent loop does), the cases interleaved; p50 and p99, target p99 ≤ 2x p50.

Run it with ``.venv/bin/python benchmarks/definitions.py [--tools N] [--runs N]
[--rounds N] [--only repeated,change,first,gc]``. Each run builds fresh
registries. The repeated calls: the first call of each case (which makes and caches
the definitions), then the repeated calls, interleaved round by round (a slow
moment of the machine hits all of them), the garbage collector off; a run's figure
is the median over its rounds. The summary gives min-median-max over the runs, with
the load average. Target: a repeated call at most 5 ms at 10,000 tools, any shape.
"""

from __future__ import annotations

import argparse
import copy
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
#: The next call after one change at 10,000 tools (the incremental definitions).
CHANGE_TARGET_MS = 2.0
#: The first call at 100,000 tools (the incremental definitions).
FIRST_TARGET_S = 0.5
#: p99 over p50 of repeated calls at 5,000 tools, the garbage collector on (the incremental definitions).
GC_TARGET_RATIO = 2.0

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


def new_tool(name: str, i: int, parameters: dict[str, t.Any] = SCHEMA) -> Tool:
    return Tool(
        name=name,
        function=search,
        description=f"Search collection number {i}.",
        parameters=parameters,
        timeout=None,
    )


def own_schema(i: int) -> dict[str, t.Any]:
    """``SCHEMA`` with one description of its own: a schema no other tool shares."""
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["where"]["description"] = f"Where to look ({i})."
    return schema


def registry_of(n: int, distinct: bool = False) -> Registry:
    """``n`` tools sharing one schema object (``distinct``: each its own schema)."""
    return Registry(
        new_tool(f"search_{i:06d}", i, own_schema(i) if distinct else SCHEMA) for i in range(n)
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


CHANGES = ("register", "replace", "unregister")


def after_a_change(tools: int, rounds: int) -> dict[str, dict[str, float]]:
    """case -> change -> ms of the next call after that one change (the median over
    ``rounds``), the garbage collector on. Each round makes one change, then asks
    every case once: each case sees exactly that change since its last call."""
    registry = registry_of(tools)
    for _, shape, strict in CASES:
        registry.tool_definitions(shape, strict=strict)
    times: dict[str, dict[str, list[float]]] = {
        name: {change: [] for change in CHANGES} for name, _, _ in CASES
    }
    middle = tools // 2
    gc.collect()
    for round_ in range(rounds):
        for change in CHANGES:
            name = f"search_{middle:06d}_{round_:03d}"  # between two names already there
            if change == "register":
                registry.register(new_tool(name, middle))
            elif change == "replace":
                registry.register(new_tool(name, middle + 1))
            else:
                registry.unregister(name)
            for case, shape, strict in CASES:
                began = time.perf_counter()
                registry.tool_definitions(shape, strict=strict)
                times[case][change].append((time.perf_counter() - began) * 1e3)
    return {
        case: {change: statistics.median(values) for change, values in by_change.items()}
        for case, by_change in times.items()
    }


FIRST_CASES = [("openai", "openai", False), ("openai strict", "openai", True)]


def first_call(tools: int) -> dict[str, float]:
    """The seconds of the first call ("case, schemas" ->) on a registry of ``tools`` tools
    never asked before (a fresh registry each: the tools keep what they made), the
    garbage collector on."""
    seconds: dict[str, float] = {}
    for distinct in (False, True):
        for case, shape, strict in FIRST_CASES:
            registry = registry_of(tools, distinct)
            gc.collect()
            began = time.perf_counter()
            registry.tool_definitions(shape, strict=strict)
            seconds[f"{case}, {'own' if distinct else 'one shared'} schema"] = (
                time.perf_counter() - began
            )
            del registry
            gc.collect()
    return seconds


class Percentiles(t.NamedTuple):
    """Milliseconds of one call: the median, the 99th percentile and the slowest;
    and the share of the calls slower than twice the median."""

    p50: float
    p99: float
    max: float
    slow: float


def with_gc(tools: int, calls: int) -> dict[str, Percentiles]:
    """case -> the percentiles of ``calls`` calls each timed alone, the cases
    interleaved, the garbage collector on; each answer is kept until the next call
    returns, as an agent loop keeps the tools it sent until the next turn."""
    registry = registry_of(tools)
    for _, shape, strict in CASES:
        registry.tool_definitions(shape, strict=strict)
    samples: dict[str, list[float]] = {name: [] for name, _, _ in CASES}
    kept: object = None
    gc.collect()
    assert gc.isenabled()
    for _ in range(calls):
        for name, shape, strict in CASES:
            began = time.perf_counter()
            answer = registry.tool_definitions(shape, strict=strict)
            samples[name].append((time.perf_counter() - began) * 1e3)
            kept = answer
    del kept
    result = {}
    for name, values in samples.items():
        values.sort()
        p50 = statistics.median(values)
        result[name] = Percentiles(
            p50,
            values[min(len(values) - 1, int(len(values) * 0.99))],
            values[-1],
            sum(value > 2 * p50 for value in values) / len(values),
        )
    return result


def _spread(values: list[float], digits: int = 2) -> str:
    low, middle, high = min(values), statistics.median(values), max(values)
    return f"{low:6.{digits}f} - {middle:6.{digits}f} - {high:6.{digits}f}"


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def repeated_section(options: argparse.Namespace, figures: dict[str, float]) -> list[str]:
    """One run of the repeated calls; its lines, its figures into ``figures``."""
    lines = []
    for name, (first, repeated, before) in one_run(options.tools, options.rounds).items():
        lines.append(
            f"  {name:<17} first {first:7.1f} ms   repeated {repeated.wall:5.2f} ms "
            f"(CPU {repeated.cpu:5.2f})   uncached {before.wall:7.1f} ms "
            f"(CPU {before.cpu:7.1f})"
        )
        key = name.replace(" ", "_")
        figures |= {
            f"{key}.first_ms": first,
            f"{key}.repeated_ms": repeated.wall,
            f"{key}.repeated_cpu_ms": repeated.cpu,
            f"{key}.uncached_ms": before.wall,
        }
    return lines


def change_section(options: argparse.Namespace, figures: dict[str, float]) -> list[str]:
    lines = [f"  the next call after one change, {options.register_tools:,} tools, ms:"]
    for name, by_change in after_a_change(options.register_tools, options.rounds).items():
        lines.append(
            f"    {name:<17} "
            + "   ".join(f"{change} {ms:6.2f}" for change, ms in by_change.items())
        )
        figures |= {
            f"change.{name.replace(' ', '_')}.{change}_ms": ms for change, ms in by_change.items()
        }
    return lines


def first_section(options: argparse.Namespace, figures: dict[str, float]) -> list[str]:
    lines = [f"  the first call, {options.first_tools:,} tools, s:"]
    for name, seconds in first_call(options.first_tools).items():
        lines.append(f"    {name:<32} {seconds:6.3f}")
        key = name.replace(", ", ".").replace(" ", "_")
        figures[f"first.{key}_s"] = seconds
    return lines


def gc_section(options: argparse.Namespace, figures: dict[str, float]) -> list[str]:
    lines = [
        f"  repeated calls, {options.gc_tools:,} tools, gc on, {options.gc_calls} calls each, ms:"
    ]
    for name, got in with_gc(options.gc_tools, options.gc_calls).items():
        lines.append(
            f"    {name:<17} p50 {got.p50:6.3f}   p99 {got.p99:6.3f}   max {got.max:7.2f}   "
            f"p99/p50 {got.p99 / got.p50:5.2f}   slower than 2x p50: {got.slow:5.1%}"
        )
        key = f"gc.{name.replace(' ', '_')}"
        figures |= {
            f"{key}.p50_ms": got.p50,
            f"{key}.p99_ms": got.p99,
            f"{key}.max_ms": got.max,
            f"{key}.p99_over_p50": got.p99 / got.p50,
            f"{key}.slow_share": got.slow,
        }
    return lines


SECTIONS: dict[str, t.Callable[[argparse.Namespace, dict[str, float]], list[str]]] = {
    "repeated": repeated_section,
    "change": change_section,
    "first": first_section,
    "gc": gc_section,
}


def _summary(runs: list[dict[str, float]], options: argparse.Namespace) -> list[str]:
    def spread(key: str, digits: int = 2) -> str:
        return _spread([run[key] for run in runs if key in run], digits)

    lines = []
    names = [name for name, _, _ in CASES]
    if "repeated" in options.only:
        lines.append(f"a repeated call, ms, min - median - max (target ≤ {TARGET_MS} ms):")
        for name in names:
            key = name.replace(" ", "_")
            lines.append(
                f"  {name:<17} wall {spread(f'{key}.repeated_ms')}   "
                f"CPU {spread(f'{key}.repeated_cpu_ms')}   "
                f"(uncached: wall {statistics.median(r[f'{key}.uncached_ms'] for r in runs):7.1f}; "
                f"first call {statistics.median(r[f'{key}.first_ms'] for r in runs):7.1f})"
            )
    if "change" in options.only:
        lines.append(
            f"the next call after one change at {options.register_tools:,} tools, ms, "
            f"min - median - max (target after a register ≤ {CHANGE_TARGET_MS} ms):"
        )
        for name in names:
            key = f"change.{name.replace(' ', '_')}"
            lines.append(
                f"  {name:<17} "
                + "   ".join(f"{change} {spread(f'{key}.{change}_ms')}" for change in CHANGES)
            )
    if "first" in options.only:
        lines.append(
            f"the first call at {options.first_tools:,} tools, s, min - median - max "
            f"(target ≤ {FIRST_TARGET_S} s):"
        )
        for key in sorted({k for run in runs for k in run if k.startswith("first.")}):
            lines.append(f"  {key[6:-2]:<32} {spread(key, 3)}")
    if "gc" in options.only:
        lines.append(
            f"repeated calls at {options.gc_tools:,} tools, gc on, ms, min - median - max "
            f"(target p99 ≤ {GC_TARGET_RATIO}x p50):"
        )
        for name in names:
            key = f"gc.{name.replace(' ', '_')}"
            lines.append(
                f"  {name:<17} p50 {spread(f'{key}.p50_ms', 3)}   p99 {spread(f'{key}.p99_ms', 3)}   "
                f"p99/p50 {spread(f'{key}.p99_over_p50')}   "
                f"slower than 2x p50 {spread(f'{key}.slow_share', 3)}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000, help="tools (default 10,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs (default 3)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per run (default 5)")
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"the sections to run, comma-separated (default all: {','.join(SECTIONS)})",
    )
    parser.add_argument("--register-tools", type=int, default=10_000, help="default 10,000")
    parser.add_argument("--first-tools", type=int, default=100_000, help="default 100,000")
    parser.add_argument("--gc-tools", type=int, default=5_000, help="default 5,000")
    parser.add_argument("--gc-calls", type=int, default=500, help="calls a case (default 500)")
    parser.add_argument("--json", metavar="PATH", help="also write each run's figures there")
    options = parser.parse_args(argv)
    options.only = [name.strip() for name in options.only.split(",") if name.strip()]
    unknown = set(options.only) - set(SECTIONS)
    if unknown:
        parser.error(f"--only: no section {sorted(unknown)}; there are {list(SECTIONS)}")
    import _results  # beside this file: --json's format

    kept = []
    runs: list[dict[str, float]] = []
    logging.getLogger("nous_tools").propagate = False
    print(f"sections {','.join(options.only)}; load average before: {_load()}")
    for run in range(1, options.runs + 1):
        figures: dict[str, float] = {}
        lines = []
        for name in options.only:
            lines += SECTIONS[name](options, figures)
        print(f"run {run} (load {_load()}):")
        print("\n".join(lines))
        runs.append(figures)
        kept.append(_results.run(figures | {"tools": options.tools}))
    if options.json:
        _results.dump(options.json, "definitions", kept)
    print(f"load average after:  {_load()}")
    print(f"over {options.runs} runs:")
    print("\n".join(_summary(runs, options)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
