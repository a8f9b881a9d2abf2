"""What ``nous-tools run`` shows of progress and log lines (issue 24), and ``--batch``.

On a pseudo-terminal it draws a bar (tqdm, installed with the test extras); piped,
or with ``--json``, it prints plain lines. The tools are in ``tests/support/progress_tools.py``.
"""

from __future__ import annotations

import base64
import json
import sys
import typing as t
from pathlib import Path

import pytest

from nous_tools.cli._progress import ProgressView
from tests.cli.test_cli import Terminal, cli

pytest.importorskip("pty")  # POSIX only


def test_run_on_a_terminal_draws_a_progress_bar() -> None:
    term = Terminal("run", "progress_tools:count", "--args", '{"n": 3}')
    try:
        assert term.finish() == 0
    finally:
        term.kill()
    text = term.text
    assert "count:  33%|" in text and "count: 100%|" in text and "3/3" in text
    assert "at 3" in text  # the message, after the bar
    assert "[log] count info: counted n=3 where=<object object at" in text
    assert "a debug line" not in text  # debug lines only with -v
    assert text.rstrip().endswith("counted to 3")


def test_run_piped_prints_plain_progress_and_log_lines() -> None:
    result = cli("run", "progress_tools:count", "--args", '{"n": 3}')
    assert result.returncode == 0
    assert result.stdout == "counted to 3\n"
    lines = result.stderr.splitlines()
    assert lines[0] == "[progress] count 33% (1/3) at 1"
    assert "[progress] count 100% (3/3) at 3" in lines
    assert lines[-1].startswith("[log] count info: counted n=3 where=<object object at")
    assert "\r" not in result.stderr and "|" not in result.stderr


def test_run_with_json_prints_plain_lines_and_content_as_base64() -> None:
    counted = cli("run", "progress_tools:count", "--args", '{"n": 2}', "--json", "-v")
    assert json.loads(counted.stdout) == {"ok": True, "value": "counted to 2"}
    assert "[progress] count 100% (2/2) at 2" in counted.stderr.splitlines()
    assert "[log] count debug: a debug line" in counted.stderr.splitlines()
    picture = cli("run", "progress_tools:picture", "--json")
    assert json.loads(picture.stdout)["value"] == {
        "type": "image",
        "mime_type": "image/png",
        "data": base64.b64encode(b"\x89PNG\r\n\x1a\n").decode(),
    }
    shown = cli("run", "progress_tools:picture")
    assert shown.stdout == "[image/png image, 8 bytes: not shown, this message carries text only]\n"


def test_batch_runs_every_call_prints_results_in_order_and_counts_calls_done(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "calls.jsonl"
    calls.write_text('{"n": 2, "pause": 0}\n\n{"n": 1, "pause": 0}\n{"n": "x"}\n')
    result = cli("run", "progress_tools:count", "--batch", str(calls))
    assert result.returncode == 1  # one call failed
    assert result.stdout.splitlines() == ["counted to 2", "counted to 1"]
    lines = result.stderr.splitlines()
    assert [line for line in lines if line.startswith("[batch]")] == [
        "[batch] 1/3 done",
        "[batch] 2/3 done",
        "[batch] 3/3 done",
    ]
    assert "[progress] count#0 100% (2/2) at 2" in lines
    assert "[progress] count#1 100% (1/1) at 1" in lines
    assert lines[-1].startswith("nous-tools: call 2: tool 'count' failed: Invalid arguments")
    as_json = cli("run", "progress_tools:count", "--batch", "-", "--json", stdin='[{"n": 1}]')
    assert json.loads(as_json.stdout) == {"index": 0, "ok": True, "value": "counted to 1"}


def test_batch_on_a_terminal_draws_a_bar_of_calls_done(tmp_path: Path) -> None:
    calls = tmp_path / "calls.json"
    calls.write_text(json.dumps([{"n": 1, "pause": 0}] * 3))
    term = Terminal("run", "progress_tools:count", "--batch", str(calls))
    try:
        assert term.finish() == 0
    finally:
        term.kill()
    assert "calls: 100%|" in term.text and "3/3" in term.text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--batch", "-", "--args", "{}"), "--args or --batch, not both"),
        (("--batch", "missing.jsonl"), "cannot read --batch file 'missing.jsonl'"),
    ],
)
def test_batch_usage_errors_exit_2(args: tuple[str, ...], message: str) -> None:
    result = cli("run", "progress_tools:count", *args, stdin="")
    assert result.returncode == 2
    assert message in result.stderr


def test_batch_lines_that_are_not_objects_are_a_usage_error() -> None:
    result = cli("run", "progress_tools:count", "--batch", "-", stdin='{"n": 1}\n[1]\n')
    assert result.returncode == 2
    assert "line 2" in result.stderr and "JSON object" in result.stderr


class FakeConsole:
    def __init__(self) -> None:
        self.stream = sys.stderr
        self.shown: list[str] = []
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)

    def show(self, text: str) -> None:
        self.shown.append(text)

    def clear(self) -> None:
        self.shown.append("")


def test_without_tqdm_the_bar_is_drawn_on_the_live_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm fails
    console = FakeConsole()
    view = ProgressView(t.cast(t.Any, console), terminal=True)
    meta = {"tool_name": "count", "call_id": None, "message": "half"}
    view.on_progress(None, measurements={}, metadata={**meta, "progress": 1, "total": 2})
    view.on_log(
        None,
        measurements={},
        metadata={
            "tool_name": "count",
            "call_id": None,
            "level": "info",
            "message": "hi",
            "data": {},
        },
    )
    view.close()
    assert console.shown == ["count [##########..........] 50% (1/2) half", ""]
    assert console.lines == ["[log] count info: hi"]
