"""A whole model turn, side by side (issue 39): 100 tool calls in one response, 10 of
them a sync tool that hangs (polls for ever) and must be stopped at its 0.1 s
timeout, 10 with invalid arguments, 80 that answer at once.

Run it with ``.venv/bin/python benchmarks/turn.py [--runs N] [--rounds N]``.

Each side runs the turn on its own tool path, no model, default settings (its own
pool, its own timeout mechanism if it has one):

- **nous-tools**: ``execute_tool_calls(registry, response)``, the default executor;
- **pydantic-ai**: an ``Agent`` whose ``FunctionModel`` answers the 100 calls, then
  a final text (the tools' own ``timeout=0.1``);
- **langchain-core**: ``StructuredTool.abatch`` of the 100 calls under
  ``asyncio.wait_for(..., 0.1)`` each (it has no tool timeout of its own);
- **openai-agents**: ``FunctionTool.on_invoke_tool`` of each call, gathered, under
  ``asyncio.wait_for(..., 0.1)`` each (the SDK's own tool-call path without a model).

For each side: the turn's wall time and CPU time (min-median-max over interleaved
rounds), and whether a hung tool **really stopped**: a hung call counts its polls,
and half a second after the turn the count must not move. The floor is the longest
deadline, 100 ms. The same turn without the hung tool (``--no-hang``) is the other
figure the issue names. This is a benchmark, not a test: it prints and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import collections.abc as c
import json
import os
import pathlib
import statistics
import sys
import threading
import time
import typing as t

try:
    import nous_tools
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    import nous_tools

from nous_tools import Registry, Tool, execute_tool_calls

HERE = pathlib.Path(__file__).resolve().parent

CALLS = 100
HUNG = 10
INVALID = 10
TIMEOUT = 0.1


class Polls:
    """How many times the hung calls of one turn have polled (a hung call that
    stopped stops polling), and the switch that ends the ones nobody stopped once
    they have been counted (so they do not load the rounds after)."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()
        self.released = threading.Event()

    def poll(self) -> None:
        with self.lock:
            self.count += 1


#: The turn being run: its hung calls poll here.
CURRENT = [Polls()]


def next_turn() -> Polls:
    """End the hung calls of the turn that ran (after it was measured); a new count."""
    CURRENT[0].released.set()
    CURRENT[0] = Polls()
    return CURRENT[0]


def lookup(city: str) -> str:
    """The fast tool."""
    return f"sunny in {city}"


def hang(city: str) -> str:
    """The hung tool: a sync function that polls something that never answers."""
    polls = CURRENT[0]
    while not polls.released.is_set():
        polls.poll()
        time.sleep(0.005)
    return "released"


def plan(hung: bool = True) -> list[tuple[str, str, dict[str, t.Any]]]:
    """The turn: ``(call id, tool, arguments)``, the hung and invalid calls spread out."""
    calls = []
    for i in range(CALLS):
        if hung and i % (CALLS // HUNG) == 3:
            calls.append((f"call_{i}", "hang", {"city": "Paris"}))
        elif i % (CALLS // INVALID) == 7:
            calls.append((f"call_{i}", "lookup", {"city": 42}))  # not a string
        else:
            calls.append((f"call_{i}", "lookup", {"city": f"c{i}"}))
    return calls


def openai_response(calls: list[tuple[str, str, dict[str, t.Any]]]) -> dict[str, t.Any]:
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ],
    }


# -- the sides ------------------------------------------------------------------------


class Side:
    def __init__(self, name: str) -> None:
        self.name = name
        self.turn: c.Callable[[bool], object] | None = None
        self.reason = ""


def ours() -> Side:
    side = Side(f"nous-tools {nous_tools.__version__}")
    registry = Registry(
        [Tool.from_function(lookup, timeout=TIMEOUT), Tool.from_function(hang, timeout=TIMEOUT)]
    )
    responses = {hung: openai_response(plan(hung)) for hung in (True, False)}

    def turn(hung: bool) -> object:
        result = execute_tool_calls(registry, responses[hung])
        assert len(result.results) == CALLS
        return result

    side.turn = turn
    return side


def pydantic_ai() -> Side:
    side = Side("pydantic-ai")
    try:
        from pydantic_ai import Agent
        from pydantic_ai import Tool as PaTool
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel
    except ImportError:
        side.reason = "not installed"
        return side
    side.name = f"pydantic-ai {_version('pydantic-ai-slim')}"
    answers = {hung: plan(hung) for hung in (True, False)}
    current: list[bool] = [True]

    def model(messages: list[t.Any], info: t.Any) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart(tool_name=n, args=a, tool_call_id=i)
                    for i, n, a in answers[current[0]]
                ]
            )
        return ModelResponse(parts=[TextPart("done")])

    try:
        agent = Agent(
            FunctionModel(model),
            tools=[PaTool(lookup, timeout=TIMEOUT), PaTool(hang, timeout=TIMEOUT)],
        )  # (an invalid call or a timeout goes back to the model as a retry prompt)
    except TypeError as exc:  # no tool timeout in this version
        side.reason = f"cannot set a tool timeout: {exc}"
        return side

    def turn(hung: bool) -> object:
        current[0] = hung
        return agent.run_sync("go")

    side.turn = turn
    return side


def langchain() -> Side:
    side = Side("langchain-core")
    try:
        from langchain_core.tools import StructuredTool
    except ImportError:
        side.reason = "not installed"
        return side
    side.name = f"langchain-core {_version('langchain-core')}"
    tools = {
        "lookup": StructuredTool.from_function(lookup),
        "hang": StructuredTool.from_function(hang),
    }
    loop = asyncio.new_event_loop()

    async def one(name: str, arguments: dict[str, t.Any]) -> object:
        try:
            return await asyncio.wait_for(tools[name].ainvoke(arguments), TIMEOUT)
        except Exception as exc:
            return exc

    async def all_calls(hung: bool) -> list[object]:
        return await asyncio.gather(*(one(n, a) for _, n, a in plan(hung)))

    def turn(hung: bool) -> object:
        return loop.run_until_complete(all_calls(hung))

    side.turn = turn
    return side


def openai_agents() -> Side:
    side = Side("openai-agents")
    saved = sys.path[:]  # this folder's mcp.py would stand in for the mcp package it imports
    sys.path[:] = [entry for entry in sys.path if pathlib.Path(entry or ".").resolve() != HERE]
    try:
        from agents import function_tool
        from agents.tool_context import ToolContext
    except ImportError:
        side.reason = "not installed"
        return side
    finally:
        sys.path[:] = saved
    side.name = f"openai-agents {_version('openai-agents')}"
    import logging

    from agents import set_tracing_disabled

    set_tracing_disabled(True)  # no model, no trace: its log lines would fill the output
    logging.getLogger("openai.agents").setLevel(logging.CRITICAL)
    tools = {"lookup": function_tool(lookup), "hang": function_tool(hang)}
    loop = asyncio.new_event_loop()

    async def one(call_id: str, name: str, arguments: dict[str, t.Any]) -> object:
        text = json.dumps(arguments)
        context = ToolContext(
            context=None, tool_name=name, tool_call_id=call_id, tool_arguments=text
        )
        try:
            return await asyncio.wait_for(tools[name].on_invoke_tool(context, text), TIMEOUT)
        except Exception as exc:
            return exc

    async def all_calls(hung: bool) -> list[object]:
        return await asyncio.gather(*(one(i, n, a) for i, n, a in plan(hung)))

    def turn(hung: bool) -> object:
        return loop.run_until_complete(all_calls(hung))

    side.turn = turn
    return side


def _version(distribution: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "?"


# -- measuring --------------------------------------------------------------------------


def timed(turn: c.Callable[[bool], object], hung: bool) -> tuple[float, float]:
    """One turn: (wall ms, CPU ms of the whole process)."""
    cpu = time.process_time()
    began = time.perf_counter()
    turn(hung)
    wall, used = (time.perf_counter() - began) * 1000, (time.process_time() - cpu) * 1000
    next_turn()
    return wall, used


def stopped(turn: c.Callable[[bool], object]) -> bool:
    """Whether the hung calls of a turn stop polling once the turn has answered."""
    polls = next_turn()
    turn(True)
    time.sleep(0.1)
    before = polls.count
    time.sleep(0.5)
    still = polls.count != before
    next_turn()
    return not still


def spread(values: list[float], unit: str = " ms") -> str:
    return (
        f"{min(values):7.1f}{unit} - {statistics.median(values):7.1f}{unit} - "
        f"{max(values):7.1f}{unit}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="whole runs (default 3)")
    parser.add_argument("--rounds", type=int, default=15, help="turns per side per run")
    parser.add_argument("--no-hang", action="store_true", help="the turn without the hung tool")
    parser.add_argument(
        "--only", action="append", choices=["ours", "pydantic-ai", "langchain", "openai-agents"]
    )
    parser.add_argument("--json", metavar="PATH", help="also write each run's figures there")
    options = parser.parse_args(argv)
    makers = {
        "ours": ours,
        "pydantic-ai": pydantic_ai,
        "langchain": langchain,
        "openai-agents": openai_agents,
    }
    sides = [makers[name]() for name in options.only or makers]
    hung = not options.no_hang
    print(
        f"one turn: {CALLS} calls, {HUNG if hung else 0} hung at {TIMEOUT} s, {INVALID} "
        f"invalid; floor {TIMEOUT * 1000 if hung else 0:.0f} ms"
    )
    for side in sides:
        if side.turn is None:
            print(f"  {side.name}: skipped ({side.reason})")
            continue
        side.turn(hung)  # warm: imports, first pool threads
        next_turn()
    live = [side for side in sides if side.turn is not None]
    prefix = "" if hung else "nohang."
    runs: list[dict[str, float]] = []
    for run in range(options.runs):
        walls: dict[str, list[float]] = {side.name: [] for side in live}
        cpus: dict[str, list[float]] = {side.name: [] for side in live}
        for _ in range(options.rounds):
            for side in live:  # interleaved: one turn of each side in turn
                wall, cpu = timed(t.cast(c.Callable[[bool], object], side.turn), hung)
                walls[side.name].append(wall)
                cpus[side.name].append(cpu)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"== run {run + 1} of {options.runs} (load {load})")
        base = statistics.median(walls[live[0].name])
        figures: dict[str, float] = {}
        runs.append(figures)
        for side in live:
            key = prefix + side.name.split()[0].replace("-", "_")
            figures[f"{key}.wall_ms"] = statistics.median(walls[side.name])
            figures[f"{key}.cpu_ms"] = statistics.median(cpus[side.name])
            ratio = statistics.median(walls[side.name]) / base
            print(
                f"  {side.name:28} wall {spread(walls[side.name])}   "
                f"cpu {spread(cpus[side.name])}   ({ratio:.2f}x ours)"
            )
    if hung:
        for side in live:
            verdict = stopped(t.cast(c.Callable[[bool], object], side.turn))
            print(f"  {side.name:28} a hung sync tool stopped: {'yes' if verdict else 'NO'}")
            for figures in runs:  # one verdict, beside every run's figures
                figures[f"{side.name.split()[0].replace('-', '_')}.stopped"] = float(verdict)
    if options.json:
        sys.path.append(str(HERE))
        import _results  # beside this file: --json's format

        _results.dump(options.json, "turn", [_results.run(figures) for figures in runs])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
