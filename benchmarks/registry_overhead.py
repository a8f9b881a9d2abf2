"""What execution by name costs: ``registry.execute(name, args)`` versus
``executor.execute(tool, args)`` for a trivial tool with no deadline, no schema
and no advice (the target is under 1 µs per call).

Run it with ``.venv/bin/python benchmarks/registry_overhead.py [--rounds N] [--number N]``.
Each round times ``number`` calls of each path with :mod:`timeit` (interleaved,
so a slow moment of the machine hits both); the figures are the medians.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import timeit

try:
    import nous_tools  # noqa: F401
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from nous_tools import Ok, Registry, Tool, ToolExecutor


def trivial(x: int) -> int:
    return x


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="timing rounds (default 15)")
    parser.add_argument("--number", type=int, default=100_000, help="calls per round")
    options = parser.parse_args(argv)

    tool = Tool(name="trivial", function=trivial, timeout=None, validate_args=False, retries=0)
    arguments = {"x": 1}
    with ToolExecutor(max_workers=1) as executor:
        registry = Registry([tool], executor=executor)
        assert executor.execute(tool, arguments) == Ok(1)
        assert registry.execute("trivial", arguments) == Ok(1)

        direct = timeit.Timer(
            "execute(tool, arguments)",
            globals={"execute": executor.execute, "tool": tool, "arguments": arguments},
        )
        by_name = timeit.Timer(
            "execute(name, arguments)",
            globals={"execute": registry.execute, "name": "trivial", "arguments": arguments},
        )
        direct_us: list[float] = []
        by_name_us: list[float] = []
        for _ in range(options.rounds):
            direct_us.append(direct.timeit(options.number) / options.number * 1e6)
            by_name_us.append(by_name.timeit(options.number) / options.number * 1e6)

    d = statistics.median(direct_us)
    r = statistics.median(by_name_us)
    diffs = statistics.median(b - a for a, b in zip(direct_us, by_name_us, strict=True))
    print(f"executor.execute(tool, args):  {d:.3f} µs/call (median of {options.rounds} rounds)")
    print(f"registry.execute(name, args):  {r:.3f} µs/call (median of {options.rounds} rounds)")
    print(f"registry overhead:             {r - d:+.3f} µs/call (per-round median {diffs:+.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
