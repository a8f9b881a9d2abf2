"""Code mode (issue 41): what a nested call costs, what a program's start costs, and
one program of 100 calls against 100 model turns of one call each.

Run it with ``.venv/bin/python benchmarks/program.py [--runs N] [--rounds N]``.

The tool is ``work(x)``, a 1 ms sync tool (``time.sleep(0.001)``), through a
``Registry`` with the default executor. Interleaved in each round:

- **direct**: ``CALLS`` calls of ``registry.execute("work", ...)``, one after another;
- **program**: ``registry.run_program`` of a loop making the same ``CALLS`` calls as
  nested calls (each through the same ``registry.execute``), minus
- **empty**: ``registry.run_program("result = 0")``, a program's start and end on a
  warm confined pool (``read_only``, no network, 512 MB): the start's figure;
- **turns**: 100 ``execute_tool_calls`` of one call each (the tool path of 100 model
  turns, no model), against **one turn**: one ``execute_tool_calls`` of the code tool
  whose program makes the 100 calls.

Per round, a nested call's cost is (program - empty) / ``CALLS`` and its ratio is
over direct / ``CALLS``. Figures: min - median - max over the rounds; targets beside
them (a nested call <= 1.5x the direct one; a warm start <= 30 ms). A model turn
costs a model's latency too (seconds), which no figure here includes. This is a
benchmark, not a test: it prints and exits 0.
"""

from __future__ import annotations

import argparse
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

from nous_tools import Ok, Registry, Tool, execute_tool_calls

HERE = pathlib.Path(__file__).resolve().parent
CALLS = 100


def work(x: int) -> int:
    """A 1 ms tool."""
    time.sleep(0.001)
    return x


LOOP = f"total = 0\nfor i in range({CALLS}):\n    total += work(x=i)\nresult = total\n"


def turn_of_one(i: int) -> list[dict[str, object]]:
    return [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "work", "arguments": json.dumps({"x": i})},
        }
    ]


def code_turn(n: int) -> list[dict[str, object]]:
    return [
        {
            "id": f"call_code_{n}",
            "type": "function",
            "function": {"name": "run_python", "arguments": json.dumps({"code": LOOP})},
        }
    ]


def ms(began: float) -> float:
    return (time.perf_counter() - began) * 1000


def spread(values: list[float], unit: str = " ms") -> str:
    return (
        f"{min(values):8.2f}{unit} - {statistics.median(values):8.2f}{unit} - "
        f"{max(values):8.2f}{unit}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="whole runs (default 1)")
    parser.add_argument("--rounds", type=int, default=15, help="rounds per run (default 15)")
    parser.add_argument("--json", metavar="PATH", help="also write each run's figures there")
    options = parser.parse_args(argv)

    registry = Registry([Tool.from_function(work, timeout=30)])
    registry.register(registry.code_tool())
    expected = sum(range(CALLS))
    # warm: imports, the pool's threads, the program pool's children
    for i in range(CALLS):
        registry.execute("work", {"x": i})
    for _ in range(3):
        assert isinstance(registry.run_program("result = 0"), Ok)
    print(
        f"nous-tools {nous_tools.__version__}: a 1 ms tool, {CALLS} calls; "
        f"{options.rounds} interleaved rounds a run"
    )
    runs: list[dict[str, float]] = []
    turn_number = 0
    for run in range(options.runs):
        direct: list[float] = []
        program: list[float] = []
        empty: list[float] = []
        turns: list[float] = []
        one_turn: list[float] = []
        for _ in range(options.rounds):
            began = time.perf_counter()
            for i in range(CALLS):
                registry.execute("work", {"x": i})
            direct.append(ms(began))

            time.sleep(0.2)  # the pool's next child is started in the background
            began = time.perf_counter()
            result = registry.run_program("result = 0")
            empty.append(ms(began))
            assert isinstance(result, Ok)

            time.sleep(0.2)
            began = time.perf_counter()
            result = registry.run_program(LOOP, max_calls=CALLS)
            program.append(ms(began))
            assert isinstance(result, Ok) and result.value.result == expected, result

            began = time.perf_counter()
            for i in range(CALLS):
                execute_tool_calls(registry, turn_of_one(i))
            turns.append(ms(began))

            time.sleep(0.2)
            began = time.perf_counter()
            turn_number += 1  # a model's call ids are its own each turn
            batch = execute_tool_calls(registry, code_turn(turn_number))
            one_turn.append(ms(began))
            assert batch.all_ok, batch.results
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"== run {run + 1} of {options.runs} (load {load})")
        per_direct = [d / CALLS for d in direct]
        per_nested = [max(0.0, p - e) / CALLS for p, e in zip(program, empty, strict=True)]
        ratios = [n / d for n, d in zip(per_nested, per_direct, strict=True)]
        turn_ratios = [t_ / o for t_, o in zip(turns, one_turn, strict=True)]
        print(f"  direct call (registry.execute)   {spread(per_direct)}")
        print(f"  nested call (in a program)       {spread(per_nested)}")
        print(f"  nested / direct                  {spread(ratios, 'x')}   target <= 1.5x")
        print(f"  program start, warm pool         {spread(empty)}   target <= 30 ms")
        print(f"  {CALLS} turns of one call          {spread(turns)}")
        print(f"  one turn, a program of {CALLS} calls {spread(one_turn)}")
        print(f"  {CALLS} turns / one program turn     {spread(turn_ratios, 'x')}   (reported)")
        runs.append(
            {
                "direct_ms": statistics.median(per_direct),
                "nested_ms": statistics.median(per_nested),
                "nested_over_direct": statistics.median(ratios),
                "start_ms": statistics.median(empty),
                "turns_ms": statistics.median(turns),
                "program_turn_ms": statistics.median(one_turn),
                "turns_over_program": statistics.median(turn_ratios),
            }
        )
    if options.json:
        sys.path.append(str(HERE))
        import _results  # beside this file: --json's format

        _results.dump(options.json, "program", [_results.run(figures) for figures in runs])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
