"""What the synchronous MCP client costs per call (issue 17).

A local stdio round trip to ``tests/mcp_server.py`` (the official SDK's server,
tool ``echo``), timed three ways in the same run:

* **SDK async**: ``await client.call_tool("echo", ...)`` on the SDK's own
  ``mcp.Client`` inside ``anyio.run`` (the baseline);
* **MCPServer.call**: our synchronous ``server.call("echo", ...)`` from a plain
  thread (the background event-loop hand-off alone);
* **registry**: ``registry.execute_approved("echo", ...)`` on a tool from
  ``register_mcp``: approval skipped, schema validated, a pool worker under a
  30 s deadline, signals: the whole pipeline a synchronous caller uses.

Run it with ``.venv/bin/python benchmarks/mcp.py [--rounds N] [--number N]``.
Each round times ``number`` calls of each path, one path after another (the
async baseline in its own event loop); the figures are the medians of the rounds,
and the ratios are against the SDK's async call.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
# This file is called mcp.py: keep its folder off the path so "import mcp" finds the SDK.
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != HERE]
try:
    import nous_tools  # noqa: F401
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402  (after the sys.path fix above)
from mcp import Client, StdioServerParameters  # noqa: E402

from nous_tools import Ok, Registry  # noqa: E402
from nous_tools.contrib.mcp import MCPServer  # noqa: E402

SERVER = [str(ROOT / "tests" / "mcp_server.py")]
ARGUMENTS = {"text": "x"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="timing rounds (default 7)")
    parser.add_argument("--number", type=int, default=200, help="calls per path per round")
    options = parser.parse_args(argv)
    number = options.number

    async def sdk_round(client: Client) -> float:
        began = time.perf_counter()
        for _ in range(number):
            await client.call_tool("echo", ARGUMENTS)
        return (time.perf_counter() - began) / number

    async def sdk_all() -> list[float]:
        params = StdioServerParameters(command=sys.executable, args=SERVER)
        async with Client(params) as client:
            assert (await client.call_tool("echo", ARGUMENTS)).content[0].text == "x"  # type: ignore[union-attr]
            for _ in range(20):  # warm up
                await client.call_tool("echo", ARGUMENTS)
            return [await sdk_round(client) for _ in range(options.rounds)]

    sdk = anyio.run(sdk_all)

    direct: list[float] = []
    pipeline: list[float] = []
    with MCPServer.stdio(sys.executable, SERVER) as server:
        registry = Registry()
        registry.register_mcp(server)
        assert server.call("echo", ARGUMENTS) == Ok("x")
        assert registry.execute_approved("echo", ARGUMENTS) == Ok("x")
        for _ in range(20):
            server.call("echo", ARGUMENTS)
            registry.execute_approved("echo", ARGUMENTS)
        for _ in range(options.rounds):
            began = time.perf_counter()
            for _ in range(number):
                server.call("echo", ARGUMENTS)
            direct.append((time.perf_counter() - began) / number)
            began = time.perf_counter()
            for _ in range(number):
                registry.execute_approved("echo", ARGUMENTS)
            pipeline.append((time.perf_counter() - began) / number)

    base = statistics.median(sdk)
    print(
        f"MCP stdio round trip to tests/mcp_server.py 'echo', {options.rounds} rounds x {number} calls"
    )
    print(f"{'path':<48}{'median µs/call':>16}{'ratio':>8}")
    rows = [
        ("SDK async client.call_tool (baseline)", sdk),
        ("MCPServer.call (sync, background loop)", direct),
        ("registry.execute_approved (sync, full pipeline)", pipeline),
    ]
    for label, figures in rows:
        median = statistics.median(figures)
        print(f"{label:<48}{median * 1e6:>16.0f}{median / base:>7.2f}x")
    overhead = statistics.median(pipeline) - base
    print(f"per-call overhead of the synchronous pipeline over the SDK: {overhead * 1e6:.0f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
