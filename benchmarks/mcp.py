"""What the synchronous MCP client costs per call (issue 17).

A local stdio round trip to ``tests/support/mcp_server.py`` (the official SDK's server,
tool ``echo``), timed three ways in the same run:

* **SDK async**: ``await client.call_tool("echo", ...)`` on the SDK's own
  ``mcp.Client`` inside ``anyio.run`` (the baseline);
* **MCPServer.call**: our synchronous ``server.call("echo", ...)`` from a plain
  thread (the background event-loop hand-off alone);
* **registry**: ``registry.execute_approved("echo", ...)`` on a tool from
  ``register_mcp``: approval skipped, schema validated, a pool worker under a
  30 s deadline, signals: the whole pipeline a synchronous caller uses.

Then the cost of OAuth (issue 25): ``tests/support/mcp_oauth_server.py`` serves
``tests/support/mcp_served_tools.py``'s registry over Streamable HTTP twice, as two
subprocesses: behind the SDK's authorization server and bearer-token check, and
the same server without them. ``MCPServer.call("add", ...)`` is timed against
each, the protected one with ``OAuth.authorization_code`` signed in once before
the timing (tokens cached, the case of every call after the first).

Then MCP Tasks (issue 38): ``nous-tools serve`` serves
``tests/support/mcp_bench_tools.py`` over Streamable HTTP on 127.0.0.1 (a
subprocess, protocol 2026-07-28), a tool that works 10 ms as a plain ``tools/call``
(``task="never"``) and as a task (``task="required"``: created, polled with
``tasks/get``, its result read from it). ``MCPServer.call`` of each, rounds
interleaved: the task's end-to-end time against the plain call's (target at most
1.5x), and the poll latency: from the tool's end on the server (the ``time.time()``
it returns) to the call returning it, against the ``pollIntervalMs`` the server
advertised (target at most the interval + 10 %), for the 10 ms tool and for
``--task-number`` tasks of 0.15 to 0.65 s, which outlive the server's short wait
before it answers the creation (``_tasks.SETTLE_MS``) and so are polled.

Run it with ``.venv/bin/python benchmarks/mcp.py [--rounds N] [--number N]``.
Each round times ``number`` calls of each path, one path after another, round
after round (interleaved: the async baseline runs in its own event loop, on a
thread of its own, between ours); the figures are the medians of the rounds,
and the ratios are against the SDK's async call (for OAuth: against the server
without it). ``--no-oauth`` skips the OAuth part, ``--no-tasks`` the Tasks part
(``--task-number`` calls of each tool a round, default 10), ``--tasks-only`` runs the
Tasks part alone.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import _results  # noqa: E402  (beside this file: --json's format; before the fix below)

# This file is called mcp.py: keep its folder off the path so "import mcp" finds the SDK.
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != HERE]
try:
    import nous_tools  # noqa: F401
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402  (after the sys.path fix above)
import anyio.from_thread  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from nous_tools import Ok, Registry  # noqa: E402
from nous_tools.contrib.mcp import MCPServer  # noqa: E402

SERVER = [str(ROOT / "tests" / "support" / "mcp_server.py")]
OAUTH_SERVER = str(ROOT / "tests" / "support" / "mcp_oauth_server.py")
SUPPORT = ROOT / "tests" / "support"
ARGUMENTS = {"text": "x"}


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    """``tests/support/mcp_oauth_server.py ARGS`` as a subprocess, and the URL it serves."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "support")}
    process = subprocess.Popen(
        [sys.executable, OAUTH_SERVER, *args], stdout=subprocess.PIPE, text=True, env=env
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def _browser(url: str) -> None:
    """The person signing in: the test authorization server consents at once."""
    import httpx2

    with httpx2.Client(timeout=30.0) as http:
        response = http.get(url, follow_redirects=False)
        http.get(response.headers["location"])


def oauth(rounds: int, number: int) -> dict[str, float]:
    """The OAuth figures (printed); by key, for ``--json``."""
    from nous_tools.contrib.mcp import InMemoryTokenStorage, OAuth

    found: dict[str, float] = {}
    plain_process, plain_url = _start("--no-auth")
    guarded_process, guarded_url = _start()
    try:
        for mode in ("legacy", "auto"):
            auth = OAuth.authorization_code(open_browser=_browser, storage=InMemoryTokenStorage())
            with (
                MCPServer.http(plain_url, mode=mode) as plain,
                MCPServer.http(guarded_url, auth=auth, mode=mode) as guarded,
            ):
                arguments = {"a": 1, "b": 2}
                assert plain.call("add", arguments) == guarded.call("add", arguments)
                assert plain.call("add", arguments).is_ok()
                for _ in range(20):
                    plain.call("add", arguments)
                    guarded.call("add", arguments)
                open_figures: list[float] = []
                auth_figures: list[float] = []
                for _ in range(rounds):
                    for server, figures in ((plain, open_figures), (guarded, auth_figures)):
                        began = time.perf_counter()
                        for _ in range(number):
                            server.call("add", arguments)
                        figures.append((time.perf_counter() - began) / number)
            base = statistics.median(open_figures)
            print()
            print(
                f"Streamable HTTP 'add' (mode={mode!r}) from tests/support/mcp_served_tools.py, "
                f"{rounds} rounds x {number} calls"
            )
            print(f"{'path':<48}{'median µs/call':>16}{'ratio':>8}")
            for label, figures in (
                ("MCPServer.call, server without OAuth (baseline)", open_figures),
                ("MCPServer.call, OAuth-protected, tokens cached", auth_figures),
            ):
                median = statistics.median(figures)
                print(f"{label:<48}{median * 1e6:>16.0f}{median / base:>7.2f}x")
            overhead = statistics.median(auth_figures) - base
            print(f"per-call overhead of the token handling: {overhead * 1e6:.0f} µs")
            found[f"http.{mode}.plain_us"] = base * 1e6
            found[f"http.{mode}.oauth_ratio"] = statistics.median(auth_figures) / base
    finally:
        for process in (plain_process, guarded_process):
            process.terminate()
            process.wait(10)
    found["token_us"] = token_handling(rounds, number * 10)
    return found


def token_handling(rounds: int, number: int) -> float:
    """The token handling alone: requests through the SDK's OAuth provider holding a
    valid token, against the same requests without it, on an in-memory transport
    (no network, no server: only what the provider adds to each request)."""
    import anyio
    import httpx2
    from mcp.shared.auth import OAuthToken

    from nous_tools.contrib.mcp import InMemoryTokenStorage, OAuth

    url = "http://127.0.0.1:1/mcp"
    storage = InMemoryTokenStorage()
    storage.save(url, {"tokens": {"access_token": "t" * 40, "expires_in": 3600}})
    provider = OAuth.authorization_code(storage=storage).provider(url)

    def answer(request: httpx2.Request) -> httpx2.Response:
        assert request.headers.get("authorization", "Bearer ").startswith("Bearer ")
        return httpx2.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {}})

    async def time_them() -> tuple[list[float], list[float]]:
        transport = httpx2.MockTransport(answer)
        plain, guarded = [], []
        async with (
            httpx2.AsyncClient(transport=transport) as bare,
            httpx2.AsyncClient(transport=transport, auth=provider) as authed,
        ):
            await authed.post(url, json={})  # loads the stored token
            assert isinstance(provider.context.current_tokens, OAuthToken)
            for _ in range(rounds):
                for client, figures in ((bare, plain), (authed, guarded)):
                    began = time.perf_counter()
                    for _ in range(number):
                        await client.post(url, json={})
                    figures.append((time.perf_counter() - began) / number)
        return plain, guarded

    plain, guarded = anyio.run(time_them)
    added = statistics.median(guarded) - statistics.median(plain)
    print()
    print(f"token handling alone (in-memory transport), {rounds} rounds x {number} requests")
    print(
        f"  request without auth {statistics.median(plain) * 1e6:.0f} µs, with the provider "
        f"{statistics.median(guarded) * 1e6:.0f} µs: {added * 1e6:.0f} µs added per request"
    )
    return added * 1e6


def _serve_tasks() -> tuple[subprocess.Popen[str], str, int]:
    """``nous-tools serve mcp_bench_tools:registry --http PORT`` as a subprocess."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    command = [sys.executable, "-m", "nous_tools", "serve", "mcp_bench_tools:registry"]
    process = subprocess.Popen(
        [*command, "--http", str(port)],
        cwd=SUPPORT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError("nous-tools serve mcp_bench_tools:registry exited")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("nous-tools serve did not start within 30 s") from None
            time.sleep(0.05)
    return process, f"http://127.0.0.1:{port}/mcp", port


def tasks(rounds: int, number: int) -> dict[str, float]:
    """The MCP Tasks figures (printed); by key, for ``--json``."""
    from nous_tools.contrib.mcp import _task_client

    process, url, _ = _serve_tasks()
    plain: list[float] = []
    tasked: list[float] = []
    latencies: list[float] = []
    polled: list[float] = []
    try:
        with MCPServer.http(url) as server:
            assert not server._runs_as_task("pause_plain") and server._runs_as_task("pause_task")
            handle = server.call_tool("pause_task", {}, as_task=True)
            interval = handle.status().poll_interval  # what the server advertises
            assert handle.result(timeout=30).is_ok()
            for _ in range(3):  # warm up
                assert server.call("pause_plain", {}, timeout=30).is_ok()
                assert server.call("pause_task", {}, timeout=30).is_ok()
            for _ in range(rounds):
                began = time.perf_counter()
                for _ in range(number):
                    server.call("pause_plain", {}, timeout=30)
                plain.append((time.perf_counter() - began) / number)
                began = time.perf_counter()
                for _ in range(number):
                    answer = server.call("pause_task", {}, timeout=30)
                    latencies.append(time.time() - float(answer.unwrap()))
                tasked.append((time.perf_counter() - began) / number)
            # Tasks that outlive the server's wait before it answers the creation, so
            # the client polls: ending at every phase of the poll interval.
            for step in range(number):
                seconds = 0.15 + (interval or 0.5) * step / number
                answer = server.call("pause_task", {"seconds": seconds}, timeout=30)
                polled.append(time.time() - float(answer.unwrap()))
    finally:
        process.terminate()
        process.wait(10)
    advertised = interval if interval is not None else _task_client.DEFAULT_POLL
    ratios = sorted(tk / pl for pl, tk in zip(plain, tasked, strict=True))
    lat = sorted(latencies)
    print()
    print(
        f"MCP Tasks over Streamable HTTP (2026-07-28), a 10 ms tool, {rounds} rounds x "
        f"{number} calls; load average {_results.loadavg()}"
    )
    print(f"{'path':<44}{'min':>9}{'median':>9}{'max':>9}  target")
    print(
        f"{'plain tools/call (task=never), ms':<44}{min(plain) * 1e3:>9.1f}"
        f"{statistics.median(plain) * 1e3:>9.1f}{max(plain) * 1e3:>9.1f}"
    )
    print(
        f"{'as a task (task=required), ms':<44}{min(tasked) * 1e3:>9.1f}"
        f"{statistics.median(tasked) * 1e3:>9.1f}{max(tasked) * 1e3:>9.1f}"
    )
    print(
        f"{'task / plain, per round':<44}{ratios[0]:>8.2f}x{statistics.median(ratios):>8.2f}x"
        f"{ratios[-1]:>8.2f}x  <= 1.5x"
    )
    print(
        f"{'poll latency after the tool ended, ms':<44}{lat[0] * 1e3:>9.1f}"
        f"{statistics.median(lat) * 1e3:>9.1f}{lat[-1] * 1e3:>9.1f}"
        f"  <= {advertised * 1.1 * 1e3:.0f} (interval {advertised * 1e3:.0f} ms + 10 %)"
    )
    slow = sorted(polled)
    print(
        f"{'... tasks of 0.15-0.65 s (polled), ms':<44}{slow[0] * 1e3:>9.1f}"
        f"{statistics.median(slow) * 1e3:>9.1f}{slow[-1] * 1e3:>9.1f}"
        f"  <= {advertised * 1.1 * 1e3:.0f}"
    )
    print(
        f"  (the max / the interval: the 10 ms tool {lat[-1] / advertised:.2f}, "
        f"the polled tasks {slow[-1] / advertised:.2f}; target <= 1.10)"
    )
    return {
        "tasks.plain_ms": statistics.median(plain) * 1e3,
        "tasks.task_ms": statistics.median(tasked) * 1e3,
        "tasks.ratio": statistics.median(ratios),
        "tasks.poll_interval_ms": advertised * 1e3,
        "tasks.poll_latency_ms": statistics.median(lat) * 1e3,
        "tasks.poll_latency_max_ms": lat[-1] * 1e3,
        "tasks.poll_latency_ratio": lat[-1] / advertised,
        "tasks.polled_latency_ms": statistics.median(slow) * 1e3,
        "tasks.polled_latency_max_ms": slow[-1] * 1e3,
        "tasks.polled_latency_ratio": slow[-1] / advertised,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="timing rounds (default 7)")
    parser.add_argument("--number", type=int, default=200, help="calls per path per round")
    parser.add_argument("--no-oauth", action="store_true", help="skip the OAuth comparison")
    parser.add_argument("--no-tasks", action="store_true", help="skip the MCP Tasks part")
    parser.add_argument("--tasks-only", action="store_true", help="run the MCP Tasks part alone")
    parser.add_argument(
        "--task-number", type=int, default=10, help="calls of each tool per round (Tasks)"
    )
    parser.add_argument(
        "--list-ttl",
        type=float,
        default=0.0,
        help="MCPServer.stdio(list_ttl=...) of the stdio part (default 0: list every call)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures there")
    options = parser.parse_args(argv)
    stdio_options = {"list_ttl": options.list_ttl} if options.list_ttl else {}
    number = options.number
    if options.tasks_only:
        found = tasks(options.rounds, options.task_number)
        if options.json:
            _results.dump(options.json, "mcp", [_results.run(found)])
        return 0

    async def sdk_round(client: Client) -> float:
        began = time.perf_counter()
        for _ in range(number):
            await client.call_tool("echo", ARGUMENTS)
        return (time.perf_counter() - began) / number

    sdk: list[float] = []
    direct: list[float] = []
    pipeline: list[float] = []
    params = StdioServerParameters(command=sys.executable, args=SERVER)
    # The SDK's client lives in an event loop of its own thread (a blocking portal),
    # so its rounds interleave with ours: a slow moment of the machine hits all three.
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(params)) as client,
        MCPServer.stdio(sys.executable, SERVER, **stdio_options) as server,
    ):
        answer = portal.call(client.call_tool, "echo", ARGUMENTS)
        assert answer.content[0].text == "x"  # type: ignore[union-attr]
        registry = Registry()
        registry.register_mcp(server)
        assert server.call("echo", ARGUMENTS) == Ok("x")
        assert registry.execute_approved("echo", ARGUMENTS) == Ok("x")
        for _ in range(20):  # warm up
            portal.call(client.call_tool, "echo", ARGUMENTS)
            server.call("echo", ARGUMENTS)
            registry.execute_approved("echo", ARGUMENTS)
        for _ in range(options.rounds):
            sdk.append(portal.call(sdk_round, client))
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
        f"MCP stdio round trip to tests/support/mcp_server.py 'echo', {options.rounds} rounds x {number} calls"
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
    figures = {
        "sdk_us": base * 1e6,
        "sync_ratio": statistics.median(direct) / base,
        "pipeline_ratio": statistics.median(pipeline) / base,
    }
    if not options.no_oauth:
        figures.update(oauth(options.rounds, number))
    if not options.no_tasks:
        figures.update(tasks(options.rounds, options.task_number))
    if options.json:
        _results.dump(options.json, "mcp", [_results.run(figures)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
