"""The ``nous-tools`` command line, run as a subprocess (``python -m nous_tools``).

The example tools live in ``tests/support/cli_tools.py``, imported by the CLI as
``cli_tools``. Approval prompts and the live line are driven through a
pseudo-terminal; waits read until the expected text appears, never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import cli_tools
import pytest

from nous_tools.cli import main

pty = pytest.importorskip("pty")  # POSIX only

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"  # cli_tools, progress_tools
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(
        [str(SUPPORT), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    ),
    "PYTHONIOENCODING": "utf-8",
    "COLUMNS": "120",
}
ENV.pop("NOUS_TOOLS_SANDBOX_MODE", None)

#: A generous bound for one command; the slowest one (demo) takes about a second.
PROCESS_TIMEOUT = 30.0


def cli(
    *args: str, stdin: str | None = None, cwd: Path = SUPPORT
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m nous_tools ARGS`` without a terminal (stdin is a pipe or /dev/null)."""
    return subprocess.run(
        [sys.executable, "-m", "nous_tools", *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=PROCESS_TIMEOUT,
    )


def stderr_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return result.stderr.splitlines()


class Terminal:
    """``python -m nous_tools ARGS`` on a pseudo-terminal (stdin, stdout and stderr)."""

    def __init__(self, *args: str) -> None:
        master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nous_tools", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=ENV,
            cwd=SUPPORT,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.output = b""
        self.deadline = time.monotonic() + PROCESS_TIMEOUT

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace").replace("\r\n", "\n")

    def _read(self) -> bool:
        """Read what is there (waiting until the deadline); False at end of output."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out; output so far: {self.text!r}")
        ready, _, _ = select.select([self.master], [], [], remaining)
        if not ready:
            raise AssertionError(f"timed out; output so far: {self.text!r}")
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # EIO: the child closed its side
            return False
        if not chunk:
            return False
        self.output += chunk
        return True

    def expect(self, text: str) -> None:
        """Read until ``text`` appears in the output."""
        while text not in self.text:
            if not self._read():
                raise AssertionError(f"{text!r} never appeared; output: {self.text!r}")

    def send(self, line: str) -> None:
        os.write(self.master, line.encode("utf-8") + b"\n")

    def finish(self) -> int:
        """Read to the end and return the exit status."""
        while self._read():
            pass
        os.close(self.master)
        return self.process.wait(timeout=max(0.1, self.deadline - time.monotonic()))

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def terminal() -> object:
    started: list[Terminal] = []

    def start(*args: str) -> Terminal:
        term = Terminal(*args)
        started.append(term)
        return term

    yield start
    for term in started:
        term.kill()


# -- run: values and exit status ----------------------------------------------------


def test_a_successful_run_prints_a_string_value_as_is_and_exits_0() -> None:
    result = cli("run", "cli_tools:greet", "--args", '{"name": "Ada"}')
    assert (result.returncode, result.stdout, result.stderr) == (0, "hello Ada!\n", "")


def test_a_plain_function_is_made_a_tool_and_its_value_printed_as_json() -> None:
    result = cli("run", "cli_tools:add", "--args", '{"a": 1, "b": 2}')
    assert (result.returncode, result.stdout) == (0, "3\n")


def test_a_value_json_cannot_hold_is_printed_with_repr() -> None:
    assert cli("run", "cli_tools:where").stdout == "Point(x=1, y=2)\n"
    mixed = cli("run", "cli_tools:mixed")
    assert mixed.returncode == 0
    assert json.loads(mixed.stdout) == {"n": 1, "point": "Point(x=3, y=4)", "text": "caf\u00e9"}


def test_a_ctx_tool_gets_a_run_context_with_a_deadline() -> None:
    result = cli("run", "cli_tools:whoami")
    assert result.returncode == 0
    assert json.loads(result.stdout) == {
        "retry": 0,
        "deps": None,
        "has_deadline": True,
        "gated": False,
    }


def test_a_failing_tool_exits_1_with_one_line_naming_the_tool_and_the_cause() -> None:
    result = cli("run", "cli_tools:fail", "--args", '{"reason": "disk full"}')
    assert result.returncode == 1
    assert result.stdout == ""
    assert stderr_lines(result) == [
        "nous-tools: tool 'fail' failed: Tool execution failed: ValueError: disk full"
    ]


def test_invalid_arguments_are_a_tool_failure_not_a_usage_error() -> None:
    result = cli("run", "cli_tools:greet", "--args", '{"name": 3}')
    assert result.returncode == 1
    assert stderr_lines(result) == [
        "nous-tools: tool 'greet' failed: Invalid arguments for 'greet': "
        "Type mismatch: name: expected string, got integer"
    ]


def test_a_timeout_exits_1_promptly_with_one_line() -> None:
    began = time.monotonic()
    result = cli("run", "cli_tools:hang")
    took = time.monotonic() - began
    assert result.returncode == 1
    assert took < 10, "a worker stuck in time.sleep(60) must not keep the process alive"
    assert result.stdout == ""
    assert stderr_lines(result) == [
        "nous-tools: tool 'hang' failed: Tool 'hang' timed out after 0.2 s"
    ]


def test_timeout_and_retries_override_the_tools_own() -> None:
    result = cli("run", "cli_tools:hang", "--timeout", "0.05")
    assert stderr_lines(result) == [
        "nous-tools: tool 'hang' failed: Tool 'hang' timed out after 0.05 s"
    ]
    traced = cli("run", "cli_tools:fail", "--retries", "2", "--trace")
    starts = [line for line in stderr_lines(traced) if line.startswith("[trace] start")]
    assert starts == [f"[trace] start fail attempt {k}/3 (timeout 5 s)" for k in (1, 2, 3)]
    no_deadline = cli("run", "cli_tools:whoami", "--timeout", "0")
    assert json.loads(no_deadline.stdout)["has_deadline"] is False


def test_a_negative_timeout_is_a_usage_error() -> None:
    result = cli("run", "cli_tools:greet", "--args", '{"name": "x"}', "--timeout", "-1")
    assert result.returncode == 2
    assert "argument --timeout: must be >= 0 seconds" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    "option",
    [("--retries", "-1"), ("--timeout", "soon"), ("--retries", "1.5"), ("--timeout", "nan")],
)
def test_a_negative_or_malformed_timeout_or_retries_is_a_usage_error_in_process(
    option: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "cli_tools:greet", "--args", '{"name": "x"}', *option])
    assert exit_info.value.code == 2
    assert f"argument {option[0]}: " in capsys.readouterr().err


# -- run: usage errors --------------------------------------------------------------


def test_bad_json_is_a_usage_error_with_its_line_and_column() -> None:
    result = cli("run", "cli_tools:greet", "--args", '{"name": "Ada",\n  "punctuation": }')
    assert result.returncode == 2
    assert stderr_lines(result) == [
        "nous-tools: error: --args is not valid JSON: Expecting value at line 2, column 18"
    ]


def test_arguments_that_are_not_a_json_object_are_a_usage_error() -> None:
    result = cli("run", "cli_tools:greet", "--args", "[1, 2]")
    assert result.returncode == 2
    assert stderr_lines(result) == ["nous-tools: error: --args must be a JSON object, got an array"]


@pytest.mark.parametrize(
    ("text", "shown"), [('"Ada"', "a string"), ("null", "null"), ("1", "a number")]
)
def test_arguments_that_are_not_a_json_object_are_a_usage_error_in_process(
    text: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "cli_tools:greet", "--args", text]) == 2
    assert (
        capsys.readouterr().err == f"nous-tools: error: --args must be a JSON object, got {shown}\n"
    )


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module:tool", "cannot import module 'no_such_module': no module named"),
        ("cli_tools:no_such_tool", "'cli_tools' has no attribute 'no_such_tool'"),
        ("cli_tools:no_such_tool", "'nous-tools list cli_tools' shows what can be run"),
    ],
)
def test_a_bad_module_path_is_a_usage_error(target: str, message: str) -> None:
    result = cli("run", target)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = stderr_lines(result)
    assert len(lines) == 1
    assert lines[0].startswith("nous-tools: error: ")
    assert message in lines[0]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("cli_tools:not_a_tool", "'cli_tools:not_a_tool' is a value of type int, not a Tool"),
        ("cli_tools:Point.nope", "'cli_tools:Point' has no attribute 'nope'"),
        ("cli_tools", "expected MODULE:ATTR"),
        ("cli_tools:", "expected MODULE:ATTR"),
        (":greet", "expected MODULE:ATTR"),
        ("tools.py:greet", "not a file path"),
        ("cli_tools.no_such_submodule:x", "cannot import module 'cli_tools.no_such_submodule'"),
    ],
)
def test_a_bad_module_path_is_a_usage_error_in_process(
    target: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", target]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("nous-tools: error: ")
    assert message in line


def test_a_name_that_is_not_there_lists_what_is_and_points_to_list(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "cli_tools:gret"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "nous-tools: error: 'cli_tools' has no attribute 'gret'; did you mean 'greet'? "
        "(what it can run: add, delete_file, "
    )
    assert "registry.shout" in line and "takes_opaque" not in line
    assert line.endswith("; 'nous-tools list cli_tools' shows what can be run")
    assert main(["run", "cli_tools:registry.shot"]) == 2
    assert capsys.readouterr().err == (
        "nous-tools: error: 'cli_tools:registry' has no attribute 'shot'; did you mean "
        "'shout'? (its tools: shout); 'nous-tools list cli_tools' shows what can be run\n"
    )


def test_an_unknown_option_is_a_usage_error() -> None:
    result = cli("run", "cli_tools:greet", "--no-such-option")
    assert result.returncode == 2
    assert "unrecognized arguments: --no-such-option" in result.stderr


def test_no_command_prints_the_help_and_exits_2() -> None:
    result = cli()
    assert result.returncode == 2
    assert "run" in result.stderr and "list" in result.stderr and "demo" in result.stderr


def test_a_missing_args_file_is_a_usage_error(tmp_path: Path) -> None:
    result = cli("run", "cli_tools:greet", "--args", f"@{tmp_path / 'missing.json'}")
    assert result.returncode == 2
    assert "cannot read --args file" in result.stderr
    assert "No such file or directory" in result.stderr


# -- run: where the arguments come from ---------------------------------------------


def test_arguments_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "args.json"
    path.write_text('{\n  "name": "Grace",\n  "punctuation": "?"\n}\n', encoding="utf-8")
    result = cli("run", "cli_tools:greet", "--args", f"@{path}")
    assert (result.returncode, result.stdout) == (0, "hello Grace?\n")
    path.write_text('{"name": }', encoding="utf-8")
    bad = cli("run", "cli_tools:greet", "--args", f"@{path}")
    assert bad.returncode == 2
    assert f"--args (file '{path}') is not valid JSON" in bad.stderr
    assert "line 1, column 10" in bad.stderr


def test_arguments_from_stdin() -> None:
    result = cli("run", "cli_tools:greet", "--args", "-", stdin='{"name": "Linus"}')
    assert (result.returncode, result.stdout) == (0, "hello Linus!\n")
    bad = cli("run", "cli_tools:greet", "--args", "-", stdin="")
    assert bad.returncode == 2
    assert "--args (from stdin) is not valid JSON: Expecting value at line 1, column 1" in (
        bad.stderr
    )


# -- run --deps, a registry's tool, -v ----------------------------------------------


def test_deps_reach_a_tool_that_takes_a_context(tmp_path: Path) -> None:
    inline = cli("run", "cli_tools:whoami", "--deps", '{"user": "ada", "n": [1, 2]}')
    assert inline.returncode == 0, inline.stderr
    assert json.loads(inline.stdout)["deps"] == {"user": "ada", "n": [1, 2]}
    path = tmp_path / "deps.json"
    path.write_text('{"user": "grace"}', encoding="utf-8")
    from_file = cli("run", "cli_tools:whoami", "--deps", f"@{path}")
    assert json.loads(from_file.stdout)["deps"] == {"user": "grace"}


@pytest.mark.parametrize(
    ("deps", "message"),
    [
        ('{"user": ', "--deps is not valid JSON: Expecting value at line 1, column 10"),
        ("[1, 2]", "--deps must be a JSON object, got an array"),
        ("[" * 100_000 + "]" * 100_000, "--deps cannot be read: it is nested too deeply"),
        ('{"n": ' + "9" * 5000 + "}", "--deps cannot be read: "),
        ("-", "--deps -: stdin is for --args; give --deps JSON or @FILE"),
        ("@", "--deps @FILE: the file name is missing"),
        ("@/no/such/deps.json", "cannot read --deps file '/no/such/deps.json': No such file"),
    ],
)
def test_hostile_or_malformed_deps_are_a_one_line_usage_error(
    deps: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "cli_tools:whoami", "--deps", deps]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("nous-tools: error: " + message)


def test_deps_for_a_tool_without_a_context_are_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "cli_tools:greet", "--args", '{"name": "x"}', "--deps", "{}"]) == 2
    assert capsys.readouterr().err == (
        "nous-tools: error: --deps: tool 'greet' does not take a context (its first "
        "parameter is not a RunContext or named ctx), so it would never see them\n"
    )


def test_a_tool_that_reads_missing_deps_says_pass_deps_and_is_not_retried() -> None:
    result = cli("run", "cli_tools:note_down", "--args", '{"note": "milk"}', "--trace")
    assert result.returncode == 1
    lines = stderr_lines(result)
    assert lines[-1] == (
        "nous-tools: tool 'note_down' failed: this tool takes deps (ctx.deps is None): pass "
        "--deps JSON or --deps @FILE (Tool execution failed: AttributeError: 'NoneType' "
        "object has no attribute 'setdefault')"
    )
    assert "[trace] exception note_down attempt 1: AttributeError, not retried" in lines
    assert not any("attempt 2" in line for line in lines)
    given = cli("run", "cli_tools:note_down", "--args", '{"note": "milk"}', "--deps", "{}")
    assert (given.returncode, given.stdout) == (0, '[\n  "milk"\n]\n')


def test_other_failures_of_a_tool_run_without_deps_are_retried_as_usual() -> None:
    result = cli("run", "cli_tools:flaky", "--trace")  # takes no context: untouched
    assert result.returncode == 0
    assert "[trace] exception flaky attempt 1: ConnectionError, will retry" in result.stderr


def test_a_registry_tool_runs_through_the_registry_and_its_advice() -> None:
    result = cli("run", "cli_tools:registry.shout", "--args", '{"text": "hi"}')
    assert (result.returncode, result.stdout, result.stderr) == (0, "HI!\n", "")
    overridden = cli("run", "cli_tools:registry.shout", "--args", '{"text": "a"}', "--trace",
                     "--retries", "3")  # fmt: skip
    assert overridden.stdout == "A!\n"
    assert "[trace] start shout attempt 1/4 (timeout 5 s)" in overridden.stderr


def test_a_registry_itself_is_not_a_tool_and_the_error_names_its_tools(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "cli_tools:registry"]) == 2
    assert capsys.readouterr().err == (
        "nous-tools: error: 'cli_tools:registry' is a Registry: name one of its tools, as "
        "'cli_tools:registry.NAME' (its tools: shout)\n"
    )
    assert main(["run", "cli_tools:registry.nope"]) == 2
    assert "'cli_tools:registry' has no attribute 'nope'" in capsys.readouterr().err


def test_verbose_shows_the_traceback_of_an_import_error(tmp_path: Path) -> None:
    (tmp_path / "broken_tools.py").write_text(
        "import json\n\n\ndef setup():\n    raise RuntimeError('no API key configured')\n\n\n"
        "setup()\n",
        encoding="utf-8",
    )
    quiet = cli("run", "broken_tools:anything", cwd=tmp_path)
    assert quiet.returncode == 2
    assert stderr_lines(quiet) == [
        "nous-tools: error: cannot import module 'broken_tools': "
        "RuntimeError: no API key configured"
    ]
    for args in (("run", "broken_tools:anything", "-v"), ("list", "broken_tools", "-v")):
        verbose = cli(*args, cwd=tmp_path)
        assert verbose.returncode == 2
        lines = stderr_lines(verbose)
        assert lines[0] == "Traceback (most recent call last):"
        # From the user's own module: not the command's frames, nor importlib's.
        assert 'broken_tools.py", line 8, in <module>' in lines[1]
        assert not any("nous_tools" in line or "importlib" in line for line in lines[:-1])
        assert any('broken_tools.py", line 8, in <module>' in line for line in lines)
        assert any('broken_tools.py", line 5, in setup' in line for line in lines)
        assert lines[-2] == "RuntimeError: no API key configured"
        assert lines[-1] == quiet.stderr.strip()


# -- run --json ---------------------------------------------------------------------


def test_json_output_of_an_ok_is_one_object_with_the_value() -> None:
    result = cli("run", "cli_tools:add", "--args", '{"a": 2, "b": 3}', "--json")
    assert result.returncode == 0
    assert result.stdout.count("\n") == 1
    assert json.loads(result.stdout) == {"ok": True, "value": 5}
    text = cli("run", "cli_tools:greet", "--args", '{"name": "Ada"}', "--json")
    assert json.loads(text.stdout) == {"ok": True, "value": "hello Ada!"}
    odd = cli("run", "cli_tools:where", "--json")
    assert json.loads(odd.stdout) == {"ok": True, "value": "Point(x=1, y=2)"}


def test_json_output_of_an_err_has_type_message_tool_and_attempt() -> None:
    failed = cli("run", "cli_tools:fail", "--json")
    assert failed.returncode == 1
    assert json.loads(failed.stdout) == {
        "ok": False,
        "error": {
            "type": "ToolError",
            "message": "Tool execution failed: ValueError: boom",
            "tool": "fail",
            "attempt": 2,
        },
    }
    assert failed.stderr == ""
    timed_out = cli("run", "cli_tools:hang", "--json")
    assert json.loads(timed_out.stdout) == {
        "ok": False,
        "error": {
            "type": "ToolTimeout",
            "message": "Tool 'hang' timed out after 0.2 s",
            "tool": "hang",
            "attempt": 1,
        },
    }


# -- approval -----------------------------------------------------------------------


def test_without_a_terminal_an_ask_tool_is_rejected_with_how_to_approve_it() -> None:
    result = cli("run", "cli_tools:delete_file", "--args", '{"path": "/tmp/x"}')
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = stderr_lines(result)
    assert line.startswith("nous-tools: tool 'delete_file' failed: ")
    assert "--approve yes" in line and "--approve prompt" in line


def test_approve_yes_runs_an_ask_tool_and_approve_no_rejects_it() -> None:
    args = ("run", "cli_tools:delete_file", "--args", '{"path": "/tmp/x"}')
    approved = cli(*args, "--approve", "yes")
    assert (approved.returncode, approved.stdout) == (0, "deleted /tmp/x\n")
    rejected = cli(*args, "--approve", "no")
    assert rejected.returncode == 1
    assert stderr_lines(rejected) == [
        "nous-tools: tool 'delete_file' failed: Tool 'delete_file' was rejected (--approve no)"
    ]


def test_a_deny_tool_never_runs_even_with_approve_yes() -> None:
    result = cli("run", "cli_tools:format_disk", "--approve", "yes")
    assert result.returncode == 1
    assert stderr_lines(result) == [
        "nous-tools: tool 'format_disk' failed: Tool 'format_disk' is denied and never runs"
    ]


def test_the_prompt_on_a_terminal_approves(terminal: object) -> None:
    term = terminal("run", "cli_tools:delete_file", "--args", '{"path": "/tmp/x"}')  # type: ignore[operator]
    term.expect("approve / reject / edit [a/r/e]? ")
    assert "tool 'delete_file' needs approval" in term.text
    assert "  Delete a file (pretend); every call needs approval." in term.text  # what it does
    assert 'arguments: {"path": "/tmp/x"}' in term.text
    term.send("a")
    assert term.finish() == 0
    assert "deleted /tmp/x\n" in term.text


def test_the_prompt_on_a_terminal_rejects(terminal: object) -> None:
    term = terminal("run", "cli_tools:delete_file", "--args", '{"path": "/tmp/x"}')  # type: ignore[operator]
    term.expect("[a/r/e]? ")
    term.send("maybe")
    term.expect("please answer a (approve), r (reject) or e (edit)")
    term.send("r")
    assert term.finish() == 1
    assert (
        "nous-tools: tool 'delete_file' failed: Tool 'delete_file' was rejected at the prompt"
        in term.text
    )
    assert "deleted" not in term.text


def test_the_prompt_on_a_terminal_edits_the_arguments(terminal: object) -> None:
    term = terminal("run", "cli_tools:delete_file", "--args", '{"path": "/etc/passwd"}')  # type: ignore[operator]
    term.expect("[a/r/e]? ")
    term.send("e")
    term.expect("new arguments (a JSON object on one line; empty to go back): ")
    term.send('{"path": ')
    term.expect("the new arguments is not valid JSON: Expecting value at line 1, column 10")
    term.send('{"path": "/tmp/scratch.txt"}')
    assert term.finish() == 0
    assert "deleted /tmp/scratch.txt\n" in term.text
    assert "deleted /etc/passwd" not in term.text


def test_edited_arguments_are_validated_again(terminal: object) -> None:
    term = terminal("run", "cli_tools:delete_file", "--args", '{"path": "/tmp/x"}')  # type: ignore[operator]
    term.expect("[a/r/e]? ")
    term.send("e")
    term.expect("empty to go back): ")
    term.send('{"path": 42}')
    assert term.finish() == 1
    assert "Invalid arguments for 'delete_file': Type mismatch: path: expected string" in term.text


#: Runs ``sh -c COMMAND`` in a new session whose controlling terminal is the pty
#: ``argv[1]`` (opening a tty as a session leader makes it the controlling one).
_WITH_CONTROLLING_TTY = (
    "import os, sys; os.setsid(); os.close(os.open(sys.argv[1], os.O_RDWR)); "
    "os.execvp('sh', ['sh', '-c', sys.argv[2]])"
)


def test_the_prompt_uses_the_controlling_terminal_when_stdin_is_a_pipe() -> None:
    master, slave = pty.openpty()
    command = (
        f'echo \'{{"path": "piped.txt"}}\' | {sys.executable} -m nous_tools '
        "run cli_tools:delete_file --args - --approve prompt"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", _WITH_CONTROLLING_TTY, os.ttyname(slave), command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
        cwd=SUPPORT,
    )
    # The slave stays open here until the end: with no process holding it, reading the
    # master fails (EIO) before the command opens /dev/tty.
    term = Terminal.__new__(Terminal)
    term.process, term.master, term.output = process, master, b""
    term.deadline = time.monotonic() + PROCESS_TIMEOUT
    try:
        term.expect("approve / reject / edit [a/r/e]? ")
        assert 'arguments: {"path": "piped.txt"}' in term.text
        term.send("a")
        stdout, stderr = process.communicate(timeout=PROCESS_TIMEOUT)
    finally:
        os.close(master)
        os.close(slave)
        term.kill()
    assert (process.returncode, stdout, stderr) == (0, b"deleted piped.txt\n", b"")


# -- --trace and the live line ------------------------------------------------------


def test_trace_lines_appear_in_order() -> None:
    result = cli("run", "cli_tools:flaky", "--trace")
    assert result.returncode == 0
    assert result.stdout == "ok on attempt 2\n"
    lines = stderr_lines(result)
    assert lines[:3] == [
        "[trace] start flaky attempt 1/2 (timeout 5 s)",
        "[trace] exception flaky attempt 1: ConnectionError, will retry",
        "[trace] start flaky attempt 2/2 (timeout 5 s)",
    ]
    assert lines[3].startswith("[trace] stop flaky attempt 2 in ")
    assert lines[3].endswith(" ms")
    assert len(lines) == 4
    assert "secret-token-123" not in result.stderr  # type names only, never raw messages


def test_trace_of_a_timeout() -> None:
    lines = stderr_lines(cli("run", "cli_tools:hang", "--trace"))
    assert lines == [
        "[trace] start hang attempt 1/3 (timeout 0.2 s)",
        "[trace] exception hang attempt 1: timeout, not retried",
        "[trace] timeout hang after 0.2 s",
        "nous-tools: tool 'hang' failed: Tool 'hang' timed out after 0.2 s",
    ]


def test_a_live_line_shows_elapsed_time_against_the_deadline_on_a_terminal(
    terminal: object,
) -> None:
    term = terminal("run", "cli_tools:slow", "--args", '{"seconds": 0.9}')  # type: ignore[operator]
    term.expect("slow \u2026 0.")
    term.expect(" s / 5 s")
    assert term.finish() == 0
    assert term.text.endswith("slept 0.9 s\n")
    assert "\r" in term.output.decode()


def test_no_live_line_without_a_terminal_or_with_json(terminal: object) -> None:
    plain = cli("run", "cli_tools:slow", "--args", '{"seconds": 0.7}')
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, "slept 0.7 s\n", "")
    term = terminal("run", "cli_tools:slow", "--args", '{"seconds": 0.7}', "--json")  # type: ignore[operator]
    assert term.finish() == 0
    assert term.text == '{"ok": true, "value": "slept 0.7 s"}\n'


# -- list ---------------------------------------------------------------------------


def table(text: str) -> dict[str, dict[str, str]]:
    """``list``'s table as {tool name: {column: cell}}, cut at the header's columns."""
    header, *lines = text.splitlines()
    heads = header.split()
    starts = [header.index(head) for head in heads]
    ends = [*starts[1:], None]
    return {
        line.split()[0]: {
            head: line[start:end].strip()
            for head, start, end in zip(heads, starts, ends, strict=True)
        }
        for line in lines
    }


def test_list_prints_an_aligned_table_sorted_by_name() -> None:
    result = cli("list", "cli_tools")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "APPROVAL", "TIMEOUT", "RETRIES", "RUN", "DESCRIPTION"]
    names = [line.split()[0] for line in lines[1:]]
    assert names == sorted(names)
    assert "not_a_tool" not in names and "Point" not in names
    assert set(names) >= {"greet", "fail", "hang", "delete_file", "format_disk", "whoami"}
    columns = [
        lines[0].index(head) for head in ("APPROVAL", "TIMEOUT", "RETRIES", "RUN", "DESCRIPTION")
    ]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["hang"].split()[1:5] == ["auto", "0.2", "s", "2"]
    assert rows["format_disk"].split()[1:4] == ["deny", "none", "1"]
    delete = rows["delete_file"]
    assert [delete[i:].split()[0] for i in columns] == [
        "ask",
        "5",
        "0",  # an ask tool is not retried by default (issue 21)
        "cli_tools:delete_file",
        "Delete",
    ]
    assert delete.endswith("Delete a file (pretend); every call needs approval.")
    for line in lines[1:]:
        assert all(line[i - 1] == " " and line[i] != " " for i in columns)


def test_list_openai_prints_the_schemas_as_a_json_array() -> None:
    result = cli("list", "cli_tools", "--openai")
    assert result.returncode == 0
    schemas = json.loads(result.stdout)
    by_name = {schema["function"]["name"]: schema for schema in schemas}
    assert [schema["function"]["name"] for schema in schemas] == sorted(by_name)
    assert by_name["greet"] == cli_tools.greet.to_openai_schema()
    greet = by_name["greet"]["function"]
    assert greet["description"] == "Greet someone by name."
    assert greet["parameters"]["required"] == ["name"]
    assert greet["parameters"]["properties"]["name"] == {
        "type": "string",
        "description": "Who to greet.",
    }
    assert by_name["add"]["function"]["parameters"]["required"] == ["a", "b"]
    assert by_name["shout"] == cli_tools.registry.lookup("shout").to_openai_schema()


def test_list_lists_tools_registry_tools_and_public_functions_defined_in_the_module(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list", "cli_tools"]) == 0
    captured = capsys.readouterr()
    rows = table(captured.out)
    assert rows["greet"]["RUN"] == "cli_tools:greet"  # a Tool attribute
    assert rows["add"]["RUN"] == "cli_tools:add"  # a plain function, made a tool
    assert rows["add"]["TIMEOUT"] == "30 s" and rows["add"]["RETRIES"] == "1"  # the defaults
    assert rows["shout"]["RUN"] == "cli_tools:registry.shout"  # a registry's tool
    # Not listed: imported functions, private ones, classes, plain values.
    assert not {"dedent", "_private_helper", "_shout", "Opaque", "Point", "not_a_tool"} & set(rows)
    # A public function that cannot be made a tool is skipped with a note on stderr.
    assert "takes_opaque" not in rows
    (note,) = captured.err.splitlines()
    assert note.startswith("nous-tools: skipped function 'takes_opaque': ")
    assert "cannot be described as JSON Schema" in note


def test_every_listed_target_names_the_listed_tool_for_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from nous_tools.cli._targets import _resolve

    assert main(["list", "cli_tools"]) == 0
    rows = table(capsys.readouterr().out)
    assert len(rows) >= 12
    for name, row in rows.items():
        assert _resolve(row["RUN"])[0].name == name


def test_list_of_a_module_of_plain_functions_lists_them(tmp_path: Path) -> None:
    (tmp_path / "plain_tools.py").write_text(
        'def double(n: int) -> int:\n    """Double a number."""\n    return 2 * n\n',
        encoding="utf-8",
    )
    listed = cli("list", "plain_tools", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split() == [
        "double", "auto", "30", "s", "1", "plain_tools:double", "Double", "a", "number.",
    ]  # fmt: skip
    ran = cli("run", "plain_tools:double", "--args", '{"n": 21}', cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (0, "42\n")


def test_list_of_a_module_with_nothing_to_run_says_so(tmp_path: Path) -> None:
    (tmp_path / "nothing_here.py").write_text("from os.path import join\nX = 1\n")
    result = cli("list", "nothing_here", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "")
    assert stderr_lines(result) == [
        "nous-tools: module 'nothing_here' has no tools, registries or public functions"
    ]


@pytest.mark.parametrize(
    ("option", "method"),
    [
        ("--openai", "to_openai_schema"),
        ("--responses", "to_responses_schema"),
        ("--anthropic", "to_anthropic_schema"),
    ],
)
def test_list_prints_definitions_in_each_providers_shape(
    option: str, method: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["list", "cli_tools", option]) == 0
    definitions = json.loads(capsys.readouterr().out)
    expected = [
        getattr(cli_tools.greet, method)(),
        getattr(cli_tools.registry.lookup("shout"), method)(),
    ]
    assert [d for d in definitions if d in expected] == expected  # sorted by name
    assert len(definitions) >= 12


def test_list_takes_one_definition_shape_at_a_time(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["list", "cli_tools", "--openai", "--anthropic"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_list_of_a_module_that_cannot_be_imported_is_a_usage_error() -> None:
    result = cli("list", "no_such_module")
    assert result.returncode == 2
    assert stderr_lines(result) == [
        "nous-tools: error: cannot import module 'no_such_module': no module named 'no_such_module'"
    ]


# -- demo and the package -----------------------------------------------------------


def test_demo_exits_0_and_reports_every_case() -> None:
    began = time.monotonic()
    result = cli("demo")
    took = time.monotonic() - began
    assert result.returncode == 0, result.stdout + result.stderr
    assert took < 10
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith("nous-tools demo")
    assert lines[-1].startswith("all 7 cases behaved as expected")
    cases = {line.split()[0]: line for line in lines[1:-1] if line.strip()}
    assert list(cases) == ["flaky", "hung", "approved", "rejected", "advice", "batch", "context"]
    assert "on attempt 2 of 3" in cases["flaky"]
    assert "ToolTimeout" in cases["hung"] and "never re-run" in cases["hung"]
    assert "Ok 'deleted" in cases["approved"]
    assert "Err ToolError" in cases["rejected"] and "never ran" in cases["rejected"]
    assert "NOTES/TODO.TXT: BUY MILK" in cases["advice"]
    assert "batch of 4 took 0." in cases["batch"] and "sequential sum 1." in cases["batch"]
    assert "'last': 'eggs'" in cases["context"]


def test_the_library_never_imports_the_cli() -> None:
    code = "import sys, nous_tools; print('nous_tools.cli' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=30
    )
    assert result.stdout == "False\n"
