"""Validation, tool-making, start-up and structured-argument figures (issue 26), as ratios.

Run it with ``.venv/bin/python benchmarks/schema.py [--runs N] [--rounds N] [--only CASE]``.

Each figure is a ratio against an anchor measured in the same process, round by
round, the rounds interleaved (a slow moment of the machine hits both sides of a
ratio). A run prints, for each case, the ratio's minimum, median and maximum over
its rounds, beside the load average; ``--runs`` repeats the whole (three by
default), since one run on a shared machine proves little.

- ``invalid``: ``ArgumentValidator.validate`` of arguments with a few violations
  (every violation listed, in Nous's words) against ``list(iter_errors(...))`` of
  jsonschema-rs's own validator for the same schema and instance, at 15
  properties, 200 properties and 10 levels of nesting. Target: at most 3x.
- ``invalid_call``: the same at 15 properties and 10 levels, the way users meet it:
  ``executor.execute`` of the call (a default ``ToolExecutor``, default logging)
  returning the ``Err`` the model gets, against the same ``iter_errors``. Target: at
  most 3x.
- ``tool``: ``Tool(name=..., function=..., parameters=schema)`` for a schema no
  tool had before (a 15-property schema with one property of its own) against
  ``jsonschema_rs.validator_for`` of such a schema. Target: at most 5x.
- ``registry``: seconds to make and register 10,000 tools with distinct schemas
  (5 properties each). Target: at most 1 s.
- ``import``: ``python -c "import nous_tools"`` followed by the first
  ``Tool.from_function``, against ``python -c pass``: whole processes, started in
  turn, the difference in milliseconds pair by pair. Target: at most 80 ms.
  ``--importtime`` prints where ``python -X importtime`` says the time goes.
- ``structured``: ``execute_tool_calls`` + ``to_openai_messages`` of one call whose
  arguments are 1 KB (target: at most 1.5x) and 1 MB of structured rows (validated against a schema describing the
  rows; the tool returns them) against the JSON round trip of the same payload
  (``json.loads`` + the call + ``json.dumps``). Target: at most 1.2x.

This is a benchmark, not a test: it prints figures and always exits 0.
"""

from __future__ import annotations

import argparse
import collections.abc as c
import gc
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time
import typing as t

try:
    import nous_tools
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    import nous_tools

import jsonschema_rs

from nous_tools import Registry, Tool, execute_tool_calls
from nous_tools.schema._validation import ArgumentValidator

Loop = c.Callable[[int], None]


def load() -> str:
    """The load average (1, 5, 15 minutes), for beside each figure."""
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "n/a"


def timed(loop: Loop, n: int) -> float:
    """Seconds for ``loop(n)`` with the garbage collector off (as timeit does)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        began = time.perf_counter()
        loop(n)
        return time.perf_counter() - began
    finally:
        if enabled:
            gc.enable()


def calibrate(loop: Loop, seconds: float) -> int:
    """The N for which ``loop(N)`` takes about ``seconds``; also warms the loop up."""
    n = 1
    while True:
        elapsed = timed(loop, n)
        if elapsed >= seconds / 4 or n >= 1_000_000:
            break
        n *= 4 if elapsed < seconds / 40 else 2
    return max(1, int(n * seconds / max(elapsed, 1e-9)))


def ratios(ours: Loop, anchor: Loop, rounds: int, seconds: float) -> list[float]:
    """Per round, ours' time per call over the anchor's, the two interleaved."""
    n_ours, n_anchor = calibrate(ours, seconds), calibrate(anchor, seconds)
    found = []
    for _ in range(rounds):
        a = timed(ours, n_ours) / n_ours
        b = timed(anchor, n_anchor) / n_anchor
        found.append(a / b)
    return found


def spread(values: list[float], unit: str = "x", digits: int = 2) -> str:
    return (
        f"{min(values):.{digits}f}{unit} - {statistics.median(values):.{digits}f}{unit} - "
        f"{max(values):.{digits}f}{unit}"
    )


#: This run's figures for ``--json``: each case's median over its rounds, by key.
FIGURES: dict[str, float] = {}


def report(
    name: str, values: list[float], target: str, unit: str = "x", digits: int = 2, key: str = ""
) -> None:
    print(f"  {name:<44} {spread(values, unit, digits):>34}   (target {target}; load {load()})")
    if key:
        FIGURES[key] = statistics.median(values)


# -- invalid arguments -----------------------------------------------------------------


def wide_schema(count: int) -> tuple[dict[str, t.Any], dict[str, t.Any]]:
    """An object of ``count`` properties of a few kinds, and arguments with three
    violations: a missing required field, a type mismatch, a value under its minimum."""
    kinds = [
        {"type": "string", "minLength": 1},
        {"type": "integer", "minimum": 0},
        {"type": "boolean"},
        {"type": "array", "items": {"type": "string"}},
        {"type": "string", "enum": ["a", "b", "c"]},
    ]
    properties = {f"p{i}": kinds[i % len(kinds)] for i in range(count)}
    values = ["x", 1, True, ["a"], "b"]
    arguments: dict[str, t.Any] = {f"p{i}": values[i % len(values)] for i in range(count)}
    del arguments["p0"]  # missing
    arguments["p2"] = "yes"  # a string for a boolean
    arguments["p1"] = -1  # under the minimum
    schema = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    return schema, arguments


def deep_schema(levels: int) -> tuple[dict[str, t.Any], dict[str, t.Any]]:
    """Objects nested ``levels`` deep, with a violation at the top and at the bottom."""
    schema: dict[str, t.Any] = {
        "type": "object",
        "properties": {"leaf": {"type": "integer", "minimum": 0}, "tag": {"type": "string"}},
        "required": ["leaf", "tag"],
    }
    arguments: dict[str, t.Any] = {"leaf": -1}  # under the minimum; "tag" missing
    for level in range(levels - 1):
        schema = {
            "type": "object",
            "properties": {"child": schema, "name": {"type": "string"}},
            "required": ["child", "name"],
        }
        arguments = {"child": arguments, "name": 7 if level == levels - 2 else "n"}  # top: 7
    return schema, arguments


def case_invalid(options: argparse.Namespace) -> None:
    print("invalid arguments: validate (every violation, Nous words) / jsonschema-rs iter_errors")
    for label, key, (schema, arguments) in (
        ("15 properties", "invalid.15", wide_schema(15)),
        ("200 properties", "invalid.200", wide_schema(200)),
        ("10 levels", "invalid.levels10", deep_schema(10)),
    ):
        validator = ArgumentValidator(schema)
        native = jsonschema_rs.validator_for(schema)
        failure = validator.validate(arguments)
        assert failure is not None and failure.message
        assert len(list(native.iter_errors(arguments))) >= 2

        def ours(n: int, validate: t.Any = validator.validate, a: t.Any = arguments) -> None:
            for _ in range(n):
                validate(a)

        def anchor(n: int, errors: t.Any = native.iter_errors, a: t.Any = arguments) -> None:
            for _ in range(n):
                list(errors(a))

        found = ratios(ours, anchor, options.rounds, options.round_ms / 1000)
        report(label, found, "≤ 3x", key=key)


def case_invalid_call(options: argparse.Namespace) -> None:
    """The error path users take: ``executor.execute`` of a call with invalid arguments
    (default executor, default logging: the ``Err`` the model gets) against
    jsonschema-rs ``iter_errors`` of the same schema and instance."""
    print("invalid call: executor.execute -> Err (defaults) / jsonschema-rs iter_errors")
    executor = nous_tools.ToolExecutor()
    try:
        for label, key, (schema, arguments) in (
            ("15 properties", "invalid_call.15", wide_schema(15)),
            ("10 levels", "invalid_call.levels10", deep_schema(10)),
        ):
            tool = Tool(name="t", function=lambda **kw: None, parameters=schema)
            native = jsonschema_rs.validator_for(schema)
            assert not executor.execute(tool, arguments).is_ok()

            def ours(
                n: int, run: t.Any = executor.execute, tl: t.Any = tool, a: t.Any = arguments
            ) -> None:
                for _ in range(n):
                    run(tl, a)

            def anchor(n: int, errors: t.Any = native.iter_errors, a: t.Any = arguments) -> None:
                for _ in range(n):
                    list(errors(a))

            found = ratios(ours, anchor, options.rounds, options.round_ms / 1000)
            report(label, found, "≤ 3x", key=key)
    finally:
        executor.shutdown()


# -- making tools ------------------------------------------------------------------------

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
            "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
            "required": ["min"],
            "additionalProperties": False,
        },
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
        "user": {"type": "string"},
        "session": {"type": "string"},
        "debug": {"type": "boolean"},
    },
    "required": ["query", "limit"],
    "additionalProperties": False,
}


def distinct(base: dict[str, t.Any], index: int) -> dict[str, t.Any]:
    """``base`` with one property of its own: a schema no other tool has."""
    return {**base, "properties": {**base["properties"], f"own_{index}": {"type": "string"}}}


def forward(**arguments: t.Any) -> t.Any:
    """A tool's function (as an MCP gateway's forwarding function would be)."""
    return arguments


class Fresh:
    """Schemas no tool had before: each loop takes the next ones."""

    def __init__(self, base: dict[str, t.Any]) -> None:
        self.base, self.next = base, 0

    def take(self, n: int) -> list[dict[str, t.Any]]:
        taken = [distinct(self.base, self.next + i) for i in range(n)]
        self.next += n
        return taken


def case_tool(options: argparse.Namespace) -> None:
    print("making a tool with a distinct schema: Tool(...) / jsonschema_rs.validator_for")
    ours, anchor = Fresh(SCHEMA_15), Fresh(SCHEMA_15)
    for make in (
        lambda s: Tool(name="t", function=forward, parameters=s),
        jsonschema_rs.validator_for,
    ):
        _batch_time(Fresh(SCHEMA_15), make)  # warm up (the pools above stay fresh)
    found = []
    for _ in range(options.rounds):  # 200 tools against 200 validators, in turn
        a = _batch_time(ours, lambda s: Tool(name="t", function=forward, parameters=s))
        b = _batch_time(anchor, jsonschema_rs.validator_for)
        found.append(a / b)
    report("15 properties (+1 of its own)", found, "≤ 5x", key="tool")


def _batch_time(pool: Fresh, make: c.Callable[[dict[str, t.Any]], object]) -> float:
    schemas = pool.take(200)
    enabled = gc.isenabled()
    gc.disable()
    try:
        began = time.perf_counter()
        for schema in schemas:
            make(schema)
        return time.perf_counter() - began
    finally:
        if enabled:
            gc.enable()


def case_registry(options: argparse.Namespace) -> None:
    print("10,000 tools with distinct schemas, made and registered (seconds)")
    small = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string"}},
            "safe": {"type": "boolean"},
        },
        "required": ["query"],
    }
    seconds, anchors = [], []
    for run in range(options.rounds_slow):
        schemas = [distinct(small, run * 10_000 + i) for i in range(10_000)]
        others = [distinct(small, 100_000 + run * 10_000 + i) for i in range(10_000)]
        gc.collect()
        began = time.perf_counter()
        registry = Registry()
        for i, schema in enumerate(schemas):
            registry.register(Tool(name=f"tool_{i}", function=forward, parameters=schema))
        seconds.append(time.perf_counter() - began)
        assert len(registry) == 10_000
        began = time.perf_counter()  # the anchor: jsonschema-rs compiling as many schemas
        for schema in others:
            jsonschema_rs.validator_for(schema)
        anchors.append(time.perf_counter() - began)
    report("10,000 tools", seconds, "≤ 1 s", unit=" s", key="registry.seconds")
    report(
        "... over validator_for of 10,000 schemas",
        [a / b for a, b in zip(seconds, anchors, strict=True)],
        "(for scale)",
        key="registry.over_validator_for",
    )


# -- start-up --------------------------------------------------------------------------

FIRST_TOOL = (
    "import nous_tools\n"
    "def add(a: int, b: int = 0) -> int:\n"
    "    '''Add two numbers.'''\n"
    "    return a + b\n"
    "tool = nous_tools.Tool.from_function(add)\n"
)
#: ... and its first call, as a user's first call goes: through a registry, the default
#: executor (the Tool is finished lazily, at its first use).
FIRST_CALL = FIRST_TOOL + (
    "assert nous_tools.Registry([tool]).execute('add', {'a': 1, 'b': 2}).value == 3\n"
)


def case_import(options: argparse.Namespace) -> None:
    print("`import nous_tools` + the first Tool.from_function, over `python -c pass` (ms)")
    argv = {
        "pass": [sys.executable, "-c", "pass"],
        "first": [sys.executable, "-c", FIRST_TOOL],
        "call": [sys.executable, "-c", FIRST_CALL],
    }
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # start-up as users have it: bytecode cached
    for command in argv.values():  # warm the file cache and write the bytecode
        subprocess.run(command, check=True, env=env)
    over_wall, over_cpu, call_wall = [], [], []
    for _ in range(options.pairs):
        walls, cpus = {}, {}
        for key, command in argv.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            began = time.perf_counter()
            subprocess.run(command, check=True, env=env)
            walls[key] = (time.perf_counter() - began) * 1000
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[key] = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
        over_wall.append(walls["first"] - walls["pass"])
        over_cpu.append(cpus["first"] - cpus["pass"])
        call_wall.append(walls["call"] - walls["pass"])
    report(
        f"wall, {options.pairs} pairs of processes",
        over_wall,
        "≤ 80 ms",
        " ms",
        1,
        "import.wall_ms",
    )
    report(
        f"CPU (user + system), {options.pairs} pairs",
        over_cpu,
        "≤ 80 ms",
        " ms",
        1,
        "import.cpu_ms",
    )
    report(
        f"... and its first call (registry.execute), wall, {options.pairs} triples",
        call_wall,
        "none set",
        " ms",
        1,
        "import.first_call_wall_ms",
    )
    if options.importtime:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", FIRST_TOOL],
            capture_output=True,
            text=True,
            check=True,
        )
        rows = []
        for line in done.stderr.splitlines()[1:]:
            _, self_us, total_us, name = (
                part.strip() for part in line.replace("|", ":").split(":")
            )
            rows.append((int(total_us), int(self_us), name))
        print("  where the time goes (python -X importtime; cumulative µs, self µs):")
        for total, own, name in sorted(rows, reverse=True)[:15]:
            print(f"    {total:>8} {own:>8}  {name}")


# -- structured arguments ----------------------------------------------------------------

ROW_SCHEMA: dict[str, t.Any] = {
    "type": "object",
    "properties": {
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "name": {"type": "string"},
                    "price": {"type": "number", "minimum": 0},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "note": {"type": ["string", "null"]},
                },
                "required": ["id", "name", "price", "tags", "note"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["rows"],
}


def rows_payload(size: int = 1_000_000) -> str:
    """Arguments of about ``size`` bytes of JSON: an object with one array of rows."""
    rows = []
    text_size = 0
    while text_size < size:
        i = len(rows)
        row = {
            "id": i,
            "name": f"item {i}",
            "price": i * 0.25,
            "tags": ["a", "b"],
            "note": None if i % 3 else "x",
        }
        rows.append(row)
        text_size += len(json.dumps(row)) + 2
    return json.dumps({"rows": rows})


def echo_rows(rows: list[dict[str, t.Any]]) -> list[dict[str, t.Any]]:
    return rows


def case_structured(options: argparse.Namespace) -> None:
    print("structured rows: execute_tool_calls + to_openai_messages / JSON round trip")
    # The whole result goes back (no max_result_chars cap), as the round trip's does.
    tool = Tool(name="ingest", function=echo_rows, parameters=ROW_SCHEMA, max_result_chars=None)
    registry = Registry([tool])
    for size, key, target in (
        (1_000, "structured.1kb", "≤ 1.5x"),
        (1_000_000, "structured", "≤ 1.2x"),
    ):
        payload = rows_payload(size)
        calls = [  # as an SDK's tool calls, read as dicts
            {"id": "c1", "type": "function", "function": {"name": "ingest", "arguments": payload}}
        ]
        messages = execute_tool_calls(registry, calls).to_openai_messages()
        assert json.loads(messages[0]["content"]) == json.loads(payload)["rows"]

        def ours(n: int, calls: t.Any = calls) -> None:
            for _ in range(n):
                execute_tool_calls(registry, calls).to_openai_messages()

        def anchor(n: int, payload: str = payload) -> None:
            for _ in range(n):
                json.dumps(echo_rows(**json.loads(payload)))

        found = ratios(ours, anchor, options.rounds, max(options.round_ms, 200) / 1000)
        shown = f"{len(payload) / 1e3:.1f} KB" if size < 1e6 else f"{len(payload) / 1e6:.2f} MB"
        report(shown, found, target, key=key)


CASES = {
    "invalid": case_invalid,
    "invalid_call": case_invalid_call,
    "tool": case_tool,
    "registry": case_registry,
    "import": case_import,
    "structured": case_structured,
}


def main(argv: list[str] | None = None) -> int:
    import _results  # beside this file: --json's format

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="whole runs (default 3)")
    parser.add_argument("--rounds", type=int, default=15, help="rounds per ratio (default 15)")
    parser.add_argument("--round-ms", type=float, default=50.0, help="ms per timed round")
    parser.add_argument("--pairs", type=int, default=40, help="process pairs (default 40)")
    parser.add_argument("--only", choices=sorted(CASES), action="append", help="these cases")
    parser.add_argument("--importtime", action="store_true", help="where start-up time goes")
    parser.add_argument("--json", metavar="PATH", help="also write each run's figures there")
    options = parser.parse_args(argv)
    options.rounds_slow = max(1, min(options.rounds, 3))
    chosen = options.only or list(CASES)
    print(
        f"nous_tools {nous_tools.__version__}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs; figures are min - median - max over the rounds"
    )
    runs = []
    for run in range(options.runs):
        print(f"\n== run {run + 1} of {options.runs}")
        FIGURES.clear()
        for name in chosen:
            CASES[name](options)
        runs.append(_results.run(FIGURES))
    if options.json:
        _results.dump(options.json, "schema", runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
