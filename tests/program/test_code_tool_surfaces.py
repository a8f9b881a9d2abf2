"""The code tool through the command line and ``nous-tools serve`` (MCP over stdio,
the official SDK's client on the other side): a nested "ask" call asks the person
there, and the program goes on."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import typing as t

import pytest

from tests.program.conftest import confined

pytestmark = confined

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
CODE = 'result = [lookup(item="a"), publish(text="b")]'
WAIT = 30.0


def run_cli(approve: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "nous_tools",
            "run",
            "program_tools:registry.run_python",
            "--args",
            json.dumps({"code": CODE}),
            "--approve",
            approve,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(SUPPORT),
        check=False,
    )


def test_the_command_line_runs_a_program_and_approves_its_nested_call() -> None:
    done = run_cli("yes")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "ok": True,
        "value": {"result": ["found a", "published b"], "stdout": ""},
    }


def test_the_command_line_rejecting_a_nested_call_fails_the_program() -> None:
    done = run_cli("no")
    assert done.returncode == 1
    assert "rejected" in json.loads(done.stdout)["error"]["message"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_served_code_tool_asks_the_mcp_client_for_a_nested_call(mode: str) -> None:
    anyio = pytest.importorskip("anyio")
    mcp = pytest.importorskip("mcp")
    types = pytest.importorskip("mcp_types")
    asked: list[str] = []

    async def elicit(ctx: t.Any, params: t.Any) -> t.Any:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={})

    async def main() -> t.Any:
        params = mcp.StdioServerParameters(
            command=sys.executable,
            args=["-m", "nous_tools", "serve", "program_tools:registry"],
            cwd=str(SUPPORT),
        )
        async with mcp.Client(
            params, mode=mode, elicitation_callback=elicit, read_timeout_seconds=WAIT
        ) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert "lookup(item: str): Find an item." in (listed["run_python"].description or "")
            return await client.call_tool("run_python", {"code": CODE})

    result = anyio.run(main)
    text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
    assert result.is_error is False, text
    assert json.loads(text)["result"] == ["found a", "published b"]
    assert len(asked) == 1 and "publish" in asked[0]
