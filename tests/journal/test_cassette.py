"""``nous_tools.testing.Cassette``: record tool outcomes once, replay them without
running the tools, usable as ``journal=``."""

from __future__ import annotations

import itertools
import json
import pathlib
import typing as t

import pytest

from nous_tools import (
    Err,
    Ok,
    Registry,
    RunContext,
    Tool,
    ToolExecutor,
    execute_tool_calls,
    format_tool_result,
    signals,
)
from nous_tools.testing import Cassette, CassetteMiss
from tests.conftest import Recorder


class Clock:
    """A tool whose every call answers something new (and counts its runs)."""

    def __init__(self) -> None:
        self.ticks = itertools.count(1)
        self.runs = 0

    def __call__(self, zone: str) -> str:
        self.runs += 1
        if zone == "Mars":
            raise ValueError("no such zone")
        return f"{zone} {next(self.ticks)}"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tool(clock: Clock) -> Tool:
    return Tool.from_function(clock, name="now", timeout=None, retries=0)


def record(path: pathlib.Path, tool: Tool, *zones: str) -> list[t.Any]:
    with ToolExecutor(journal=Cassette.record(path)) as executor:
        return [executor.execute(tool, {"zone": zone}) for zone in zones]


def test_a_replay_serves_each_call_in_the_order_recorded_without_running(
    tmp_path: pathlib.Path, tool: Tool, clock: Clock
) -> None:
    path = tmp_path / "cassettes" / "clock.json"
    recorded = record(path, tool, "UTC", "CET", "UTC", "Mars")
    assert clock.runs == 4
    with ToolExecutor(journal=Cassette.replay(path)) as executor:
        replayed = [executor.execute(tool, {"zone": z}) for z in ("UTC", "Mars", "UTC", "CET")]
    assert clock.runs == 4  # nothing ran
    assert [format_tool_result(r, "now") for r in replayed] == [
        "UTC 1",
        "Error: tool 'now' failed: Tool execution failed: ValueError: no such zone",
        "UTC 3",
        "CET 2",
    ]
    assert [format_tool_result(r, "now") for r in recorded] == [
        format_tool_result(r, "now") for r in (replayed[0], replayed[3], replayed[2], replayed[1])
    ]
    data = json.loads(path.read_text())
    assert [(call["tool"], call["arguments"]) for call in data["calls"]] == [
        ("now", {"zone": "UTC"}),
        ("now", {"zone": "CET"}),
        ("now", {"zone": "UTC"}),
        ("now", {"zone": "Mars"}),
    ]


def test_a_strict_replay_fails_loudly_with_what_was_asked(
    tmp_path: pathlib.Path, tool: Tool, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "clock.json"
    record(path, tool, "UTC")
    with ToolExecutor(journal=Cassette.replay(path)) as executor:
        assert executor.execute(tool, {"zone": "UTC"}) == Ok("UTC 1")
        again = executor.execute(tool, {"zone": "UTC"})  # recorded once only
        other = executor.execute(tool, {"zone": "PST"})
    for miss in (again, other):
        assert isinstance(miss, Err) and isinstance(miss.reason, CassetteMiss)
    assert 'tool \'now\' with arguments {"zone": "PST"}' in other.reason.message
    assert "1 call(s) of 'now' recorded" in other.reason.message
    assert "has no recorded outcome for tool 'now'" in caplog.text
    assert clock.runs == 1


def test_a_lenient_replay_runs_what_it_does_not_hold(
    tmp_path: pathlib.Path, tool: Tool, clock: Clock
) -> None:
    path = tmp_path / "clock.json"
    record(path, tool, "UTC")
    with ToolExecutor(journal=Cassette.replay(path, strict=False)) as executor:
        assert executor.execute(tool, {"zone": "UTC"}) == Ok("UTC 1")
        assert executor.execute(tool, {"zone": "PST"}) == Ok("PST 2")
    assert clock.runs == 2
    assert len(Cassette.replay(path).calls) == 1  # a replay records nothing


def test_a_replay_is_not_an_execution(
    tmp_path: pathlib.Path, tool: Tool, recorder: Recorder
) -> None:
    path = tmp_path / "clock.json"
    record(path, tool, "UTC")
    recorder.events.clear()
    replays: list[dict[str, t.Any]] = []

    def on_replay(sender: t.Any, *, measurements: t.Any, metadata: t.Any) -> None:
        replays.append(metadata)

    signals.tool_execute_replayed.connect(on_replay)
    try:
        with ToolExecutor(journal=Cassette.replay(path)) as executor:
            executor.execute(tool, {"zone": "UTC"}, call_id="call_1")
    finally:
        signals.tool_execute_replayed.disconnect(on_replay)
    assert recorder.names == []
    assert replays == [{"tool_name": "now", "success": True, "call_id": "call_1"}]


def test_a_cassette_on_a_registry_replays_a_model_response(
    tmp_path: pathlib.Path, tool: Tool, clock: Clock
) -> None:
    path = tmp_path / "loop.json"
    calls = [
        {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {"zone": "UTC"}},
        {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {"zone": "Mars"}},
    ]
    recording = Registry([tool], journal=Cassette.record(path))
    first = execute_tool_calls(recording, calls, RunContext.new())
    replaying = Registry([tool], journal=Cassette.replay(path))
    again = execute_tool_calls(replaying, calls, RunContext.new())
    assert again.to_anthropic_blocks() == first.to_anthropic_blocks()
    assert clock.runs == 2


def test_validation_still_happens_on_replay(tmp_path: pathlib.Path, tool: Tool) -> None:
    path = tmp_path / "clock.json"
    record(path, tool, "UTC")
    with ToolExecutor(journal=Cassette.replay(path)) as executor:
        refused = executor.execute(tool, {"zone": 3})
    assert "Type mismatch: zone: expected string, got integer" in refused.reason.message


def test_a_cassette_that_is_not_one_is_refused(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError):
        Cassette.replay(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"calls": []}')
    with pytest.raises(ValueError, match="not a nous-tools cassette"):
        Cassette.replay(bad)
    bad.write_text('{"nous_tools_cassette": 1, "calls": [{"tool": 1}]}')
    with pytest.raises(ValueError, match="call #1 is malformed"):
        Cassette.replay(bad)


def test_an_entry_whose_shown_arguments_do_not_match_its_digest_is_refused_on_load(
    tmp_path: pathlib.Path, tool: Tool
) -> None:
    path = tmp_path / "clock.json"
    record(path, tool, "Oslo", "Lima")
    data = json.loads(path.read_text())
    data["calls"][1]["arguments"]["zone"] = "Tokyo"  # shown as Tokyo, matched as Lima
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"call #2 \('now', arguments .*Tokyo.*does not match"):
        Cassette.replay(path)


def test_an_entry_whose_digest_was_swapped_is_refused_on_load(
    tmp_path: pathlib.Path, tool: Tool
) -> None:
    path = tmp_path / "clock.json"
    record(path, tool, "Oslo", "Lima")
    data = json.loads(path.read_text())
    data["calls"][0]["digest"] = data["calls"][1]["digest"]  # shows Oslo, answers Lima
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="call #1"):
        Cassette.replay(path)
    record(path, tool, "Oslo")  # recorded anew: loads
    assert len(Cassette.replay(path).calls) == 1
