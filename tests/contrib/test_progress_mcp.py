"""Progress, log lines and rich content over MCP (issue 24), with real processes.

* Serving: ``nous-tools serve mcp_rich_tools:registry`` runs as a subprocess and the
  official SDK client talks to it over stdio, in both protocol eras.
* Calling: ``MCPServer`` (the synchronous client) calls that server, and a chain of
  two servers (``mcp_chain_tools``); under ``make slow``, the npm
  ``@modelcontextprotocol/server-everything`` too.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import typing as t
import warnings
from pathlib import Path

import anyio
import mcp_rich_tools as rich
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from nous_tools import Ok, Registry, signals
from nous_tools.content import Audio, Image, Resource, Text
from nous_tools.contrib.mcp import MCPServer

SUPPORT = Path(__file__).resolve().parents[1] / "support"
WAIT = 30.0

#: The npm server the slow test runs, pinned.
EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"


def served(mode: str, target: str = "mcp_rich_tools:registry", **options: t.Any) -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "nous_tools", "serve", target], cwd=str(SUPPORT)
    )
    return Client(params, mode=mode, read_timeout_seconds=WAIT, **options)


def modes() -> t.Any:
    return pytest.mark.parametrize("mode", ["legacy", "auto"])


# -- serving ---------------------------------------------------------------------------


@modes()
def test_served_progress_reaches_the_client_with_its_own_token(mode: str) -> None:
    notifications: list[types.ProgressNotificationParams] = []

    async def handler(message: object) -> None:
        if isinstance(message, types.ProgressNotification):
            notifications.append(message.params)

    async def main() -> None:
        async with served(mode, message_handler=handler) as client:
            result = await client.call_tool(
                "steps", {"n": 2}, meta=t.cast(t.Any, {"progressToken": "token-42"})
            )
            assert result.content[0].text == "done"  # type: ignore[union-attr]
            quiet = await client.call_tool("steps", {"n": 1})  # no token: no progress
            assert not quiet.is_error

    anyio.run(main)
    assert [(p.progress_token, p.progress, p.total, p.message) for p in notifications] == [
        ("token-42", 0.0, 100.0, "step 0 of 2"),
        ("token-42", 50.0, 100.0, "step 1 of 2"),
        ("token-42", 100.0, 100.0, "step 2 of 2"),
    ]


def test_served_log_lines_honour_logging_set_level_and_the_capability_is_declared() -> None:
    lines: list[tuple[str, t.Any, str | None]] = []
    unfiltered: list[tuple[str, t.Any, str | None]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        lines.append((params.level, params.data, params.logger))

    async def main() -> None:
        async with served("legacy", logging_callback=on_log) as client:
            assert client.server_capabilities.logging is not None
            await client.call_tool("chatty", {})  # no level set yet: every line
            unfiltered.extend(lines)
            lines.clear()
            with warnings.catch_warnings():  # logging is deprecated as of 2026-07-28
                warnings.simplefilter("ignore")
                await client.set_logging_level("warning")
            await client.call_tool("chatty", {})

    anyio.run(main)
    assert [level for level, _, _ in unfiltered] == ["debug", "info", "notice", "warning", "error"]
    assert [level for level, _, _ in lines] == ["warning", "error"]
    # data JSON cannot hold (an object()) is dropped on the wire; the rest goes with it
    assert lines[0] == ("warning", {"message": "a warning line", "n": 1}, "chatty")


def test_served_log_lines_follow_the_requests_log_level_on_the_2026_protocol() -> None:
    lines: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        lines.append(params.level)

    async def main() -> None:
        async with served("auto", logging_callback=on_log) as client:
            assert client.protocol_version == "2026-07-28"
            await client.call_tool("chatty", {})  # no opt-in: no log line
            assert lines == []
            await client.call_tool(
                "chatty", {}, meta=t.cast(t.Any, {types.LOG_LEVEL_META_KEY: "notice"})
            )

    anyio.run(main)
    assert lines == ["notice", "warning", "error"]


@modes()
def test_served_image_audio_resources_and_mixed_content_round_trip_byte_for_byte(
    mode: str,
) -> None:
    async def main() -> dict[str, types.CallToolResult]:
        async with served(mode) as client:
            return {
                name: await client.call_tool(name, {})
                for name in ("image", "audio", "resource", "mixed")
            }

    results = anyio.run(main)
    (image,) = results["image"].content
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    assert base64.b64decode(image.data) == rich.PNG
    (audio,) = results["audio"].content
    assert isinstance(audio, types.AudioContent) and audio.mime_type == "audio/wav"
    assert base64.b64decode(audio.data) == rich.WAV
    text_resource, blob_resource = results["resource"].content
    assert isinstance(text_resource, types.EmbeddedResource)
    assert isinstance(text_resource.resource, types.TextResourceContents)
    assert text_resource.resource.text == '{"test":"data","value":123}'
    assert text_resource.resource.mime_type == "application/json"
    assert isinstance(blob_resource, types.EmbeddedResource)
    assert isinstance(blob_resource.resource, types.BlobResourceContents)
    assert base64.b64decode(blob_resource.resource.blob) == rich.BLOB
    assert [block.type for block in results["mixed"].content] == [
        "text",
        "image",
        "text",
        "resource",
    ]


@modes()
def test_a_structured_result_has_an_output_schema_and_a_mismatch_is_an_error(mode: str) -> None:
    async def main() -> tuple[types.Tool, types.CallToolResult, types.CallToolResult]:
        async with served(mode) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            good = await client.call_tool("weather", {"city": "Oslo"})
            bad = await client.call_tool("wrong_weather", {"city": "Oslo"})
            return listed["weather"], good, bad

    entry, good, bad = anyio.run(main)
    assert entry.output_schema is not None
    assert entry.output_schema["required"] == ["city", "celsius"]
    assert good.structured_content == {"city": "Oslo", "celsius": 21.5}
    assert bad.is_error
    assert bad.content[0].text == (  # type: ignore[union-attr]
        "Error: tool 'wrong_weather' returned a value that does not match its return "
        "annotation Weather: Missing required fields: celsius"
    )


# -- calling ---------------------------------------------------------------------------


class Reports:
    def __init__(self) -> None:
        self.seen: list[tuple[t.Any, ...]] = []

    def on_progress(self, sender: t.Any, *, measurements: t.Any, metadata: t.Any) -> None:
        self.seen.append(("p", sender.name, metadata["progress"], metadata["total"]))

    def on_log(self, sender: t.Any, *, measurements: t.Any, metadata: t.Any) -> None:
        self.seen.append(("l", sender.name, metadata["level"], metadata["message"]))

    def __enter__(self) -> Reports:
        signals.tool_progress.connect(self.on_progress)
        signals.tool_log.connect(self.on_log)
        return self

    def __exit__(self, *exc: object) -> None:
        signals.tool_progress.disconnect(self.on_progress)
        signals.tool_log.disconnect(self.on_log)


def remote_registry(server: MCPServer) -> Registry:
    registry = Registry()
    registry.register_mcp(server, trusted=True)
    return registry


@modes()
def test_the_mcp_client_turns_remote_progress_and_logs_into_signals_and_content_into_values(
    mode: str,
) -> None:
    server = MCPServer.stdio(
        sys.executable,
        ["-m", "nous_tools", "serve", "mcp_rich_tools:registry"],
        cwd=SUPPORT,
        mode=mode,
    )
    with server, Reports() as reports:
        registry = remote_registry(server)
        assert registry.execute("steps", {"n": 2}) == Ok("done")
        assert reports.seen == [
            ("p", "steps", 0.0, 100.0),
            ("p", "steps", 50.0, 100.0),
            ("p", "steps", 100.0, 100.0),
        ]
        reports.seen.clear()
        assert registry.execute("chatty", {}) == Ok("logged")
        assert reports.seen[-1] == ("l", "chatty", "error", "a error line")
        assert registry.execute("image", {}) == Ok(Image(rich.PNG, "image/png"))
        assert registry.execute("audio", {}) == Ok(Audio(rich.WAV, "audio/wav"))
        assert registry.execute("resource", {}) == Ok(
            [
                Resource(
                    "test://notes.json", "application/json", text='{"test":"data","value":123}'
                ),
                Resource("test://bytes.bin", "application/octet-stream", blob=rich.BLOB),
            ]
        )
        mixed = registry.execute("mixed", {})
        assert isinstance(mixed, Ok) and mixed.value[:3] == [
            Text("Multiple content types test:"),
            Image(rich.PNG, "image/png"),
            Text("and a resource:"),
        ]


def test_progress_passes_through_a_chain_of_servers() -> None:
    server = MCPServer.stdio(
        sys.executable, ["-m", "nous_tools", "serve", "mcp_chain_tools:registry"], cwd=SUPPORT
    )
    with server, Reports() as reports:
        registry = remote_registry(server)
        assert registry.execute("steps", {"n": 2}) == Ok("done")
        assert registry.execute("image", {}) == Ok(Image(rich.PNG, "image/png"))
    assert reports.seen == [
        ("p", "steps", 0.0, 100.0),
        ("p", "steps", 50.0, 100.0),
        ("p", "steps", 100.0, 100.0),
    ]


def test_nobody_listening_asks_the_server_for_no_progress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[object] = []
    acall = MCPServer._acall

    async def spy(
        client: t.Any, name: str, arguments: t.Any, timeout: t.Any, waiting: t.Any
    ) -> t.Any:
        asked.append(waiting.inbox)  # None: no progress token, no log opt-in sent
        return await acall(client, name, arguments, timeout, waiting)

    monkeypatch.setattr(MCPServer, "_acall", staticmethod(spy))
    assert not (signals.tool_progress.receivers or signals.tool_log.receivers)
    server = MCPServer.stdio(
        sys.executable, ["-m", "nous_tools", "serve", "mcp_rich_tools:registry"], cwd=SUPPORT
    )
    with server:
        assert remote_registry(server).execute("steps", {"n": 1}) == Ok("done")
        with Reports():
            assert remote_registry(server).execute("steps", {"n": 1}) == Ok("done")
    assert asked[0] is None and asked[1] is not None


# -- a third-party server (npm), under make slow ---------------------------------------


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``@modelcontextprotocol/server-everything`` (pinned), installed with npm in a
    temp dir; the path of its entry point."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("npm and node are needed to install the MCP everything server")
    where = tmp_path_factory.mktemp("everything")
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(where), EVERYTHING],
        check=True,
        capture_output=True,
        timeout=600,
        env={**os.environ, "npm_config_update_notifier": "false"},
    )
    entry = where / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
    return entry / "index.js"


@pytest.mark.slow
def test_the_mcp_client_reports_the_progress_of_the_everything_server(everything: Path) -> None:
    server = MCPServer.stdio("node", [str(everything), "stdio"], name="everything")
    with server, Reports() as reports:
        registry = remote_registry(server)
        result = registry.execute("trigger-long-running-operation", {"duration": 1, "steps": 4})
        assert isinstance(result, Ok) and "completed" in result.value
        image = registry.execute("get-tiny-image", {})
    name = "trigger-long-running-operation"
    assert reports.seen == [("p", name, float(step), 4.0) for step in range(1, 5)]
    assert isinstance(image, Ok)
    (png,) = [part for part in image.value if isinstance(part, Image)]
    assert png.mime_type == "image/png" and png.data.startswith(b"\x89PNG")
