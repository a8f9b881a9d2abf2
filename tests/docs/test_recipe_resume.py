"""``docs/how-to/resume-a-script.md``, run as printed: every ``console`` block of the
page is run in order in a fresh directory (``python examples/resume_script.py``,
``nous-tools``, ``cat``), and what each command prints is what the page shows. A run
whose shown output ends in ``Killed`` is killed with SIGKILL while ``charge_card`` is
inside its body (after the bank recorded the charge, while it waits for the answer).

The other tests pin what the transcript shows: a re-run replays the completed calls
and runs the never-started one, the killed call answers ``OutcomeUnknown`` and is
listed by ``nous-tools journal list --unknown``, settling it makes the re-run answer
the settled outcome, and an ``idempotent=True`` tool is run again exactly once.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

from nous_tools import SQLiteJournal

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "resume-a-script.md"
SCRIPT = "examples/resume_script.py"
WAIT = 60.0  # seconds: generous, the machine is shared and noisy

#: What the model gets for the call that was running when the script was killed
#: (the page quotes it word for word; a test checks that it does).
OUTCOME_UNKNOWN_TEXT = (
    "Error: tool 'charge_card' was not run: the outcome of an earlier attempt is unknown; "
    "it was not run again (call 'call_charge' of run '2026-12-03' started and never "
    "completed: a person finds out and settles it)"
)

#: The job of the page that is settled by hand, and the one whose charge is idempotent.
SETTLED, IDEMPOTENT = "jobs/2026-12-03", "jobs/2026-12-04"

_CONSOLE = re.compile(r"^```console\n(.*?)^```", re.M | re.S)
#: What differs from run to run: the times, and the process that started a call.
_VARYING = [
    (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b"), "<time>"),
    (re.compile(r"^(owner +)\S+$", re.M), r"\1<owner>"),
]


@attrs.frozen
class Step:
    """One command of the page, what the page shows it prints, and what it printed."""

    command: str
    shown: str
    printed: str
    returncode: int
    killed: bool
    job: Path | None  # the job directory of a script run
    ledger: list[str]  # the job's ledger after the command


def _commands(page: str) -> list[tuple[str, str]]:
    """``(command, shown output)`` for each ``$`` line of the page's console blocks."""
    steps: list[tuple[str, list[str]]] = []
    for block in _CONSOLE.findall(page):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                assert steps, f"output before any command: {line!r}"
                steps[-1][1].append(line)
    return [(command, "".join(f"{line}\n" for line in shown)) for command, shown in steps]


def _normal(text: str) -> str:
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    return text


def _ledger(job: Path) -> list[str]:
    path = job / "ledger.txt"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _run_killed(argv: list[str], cwd: Path, job: Path) -> tuple[str, int]:
    """Run ``argv`` and SIGKILL it once the bank has recorded the charge: charge_card
    is then inside its body, waiting for the bank's answer (20 s)."""
    process = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + WAIT
        while not any(line.startswith("charged ") for line in _ledger(job)):
            assert process.poll() is None, f"exited before the charge: {process.communicate()}"
            assert time.monotonic() < deadline, "the charge never started"
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        out, err = process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == -signal.SIGKILL, f"not killed inside the tool: {err}"
    return out, process.returncode


def _run(command: str, shown: str, cwd: Path) -> Step:
    words = shlex.split(command)
    killed = shown.endswith("Killed\n")
    job = None
    if words[:2] == ["python", SCRIPT]:
        job = cwd / words[2]
        argv = [sys.executable, str(ROOT / SCRIPT), *words[2:]]
    elif words[0] == "nous-tools":
        argv = [sys.executable, "-m", "nous_tools", *words[1:]]
    elif words[0] == "cat" and len(words) == 2:
        text = (cwd / words[1]).read_text(encoding="utf-8")
        return Step(command, shown, text, 0, False, None, [])
    else:
        raise AssertionError(f"the page runs a command this test does not know: {command}")
    assert not killed or job is not None, command
    if killed:
        assert job is not None
        printed, returncode = _run_killed(argv, cwd, job)
        printed += "Killed\n"  # what the shell adds
    else:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=WAIT, check=False
        )
        assert done.returncode == 0, (command, done.stderr)
        printed, returncode = done.stdout, done.returncode
    return Step(command, shown, printed, returncode, killed, job, _ledger(job) if job else [])


@pytest.fixture(scope="module")
def transcript(tmp_path_factory: pytest.TempPathFactory) -> list[Step]:
    """The page's commands, run in order in a fresh directory."""
    cwd = tmp_path_factory.mktemp("resume")
    return [_run(command, shown, cwd) for command, shown in _commands(PAGE.read_text("utf-8"))]


def _script_runs(transcript: list[Step], job: str) -> list[Step]:
    return [step for step in transcript if step.job is not None and step.job.name == Path(job).name]


def _ran(step: Step) -> list[str]:
    """The tools that ran in a script run (each says so as it starts)."""
    starts = ("reserving ", "charging ", "sending ")
    return [line for line in step.printed.splitlines() if line.startswith(starts)]


def _model_gets(step: Step) -> dict[str, str]:
    """The message each call id gets, as the script prints them."""
    lines = step.printed.split("the model gets:\n", 1)[1].splitlines()
    return dict(line.strip().partition(": ")[::2] for line in lines)


# -- the page ------------------------------------------------------------------------


def test_every_command_of_the_page_prints_what_the_page_shows(transcript: list[Step]) -> None:
    assert len(transcript) >= 10
    for step in transcript:
        assert _normal(step.printed) == _normal(step.shown), step.command


def test_the_page_quotes_the_outcome_unknown_text_word_for_word() -> None:
    assert f"  call_charge: {OUTCOME_UNKNOWN_TEXT}\n" in PAGE.read_text(encoding="utf-8")


def test_the_page_includes_the_tested_script_and_says_how_a_dead_owner_is_told() -> None:
    page = PAGE.read_text(encoding="utf-8")
    for section in ("response", "main", "tools"):
        assert f'--8<-- "{SCRIPT}:{section}"' in page
    assert "(a zombie) also counts as gone" in page  # tests/journal/test_journal.py pins it
    assert "uuid.uuid4()" in page and "new keys" in page


# -- what the transcript shows -------------------------------------------------------


def test_a_kill_inside_the_tool_leaves_its_effect_done_and_the_next_call_not_started(
    transcript: list[Step],
) -> None:
    killed = _script_runs(transcript, SETTLED)[0]
    assert killed.killed and killed.returncode == -signal.SIGKILL
    assert _ran(killed) == ["reserving stock for order 42", "charging order 42"]
    assert [line.split(":")[0] for line in killed.ledger] == [
        "reserved order 42",
        "charged order 42",
    ]


def test_a_rerun_replays_completed_calls_and_runs_only_the_never_started_one(
    transcript: list[Step],
) -> None:
    rerun = _script_runs(transcript, SETTLED)[1]
    assert _ran(rerun) == ["sending the receipt of order 42"]
    assert [line.split(":")[0] for line in rerun.ledger] == [
        "reserved order 42",
        "charged order 42",
        "sent the receipt of order 42",
    ]  # each effect once
    assert _model_gets(rerun)["call_stock"] == "reserved order 42"  # replayed


def test_the_call_killed_inside_the_tool_answers_outcome_unknown_and_is_not_run_again(
    transcript: list[Step],
) -> None:
    rerun = _script_runs(transcript, SETTLED)[1]
    assert _model_gets(rerun)["call_charge"] == OUTCOME_UNKNOWN_TEXT
    assert "charging order 42" not in _ran(rerun)


def test_journal_list_unknown_lists_the_killed_call_and_only_it(transcript: list[Step]) -> None:
    [listed] = [step for step in transcript if step.command.endswith("--unknown")]
    header, *rows = listed.printed.splitlines()
    assert header.split()[:4] == ["RUN", "CALL", "TOOL", "STATE"]
    assert [row.split()[:4] for row in rows] == [
        ["2026-12-03", "call_charge", "charge_card", "unknown"]
    ]


def test_a_settled_call_makes_the_rerun_answer_the_settled_outcome_and_run_nothing(
    transcript: list[Step],
) -> None:
    [settle] = [step for step in transcript if " journal settle " in f" {step.command} "]
    assert "--ok" in settle.command
    after = _script_runs(transcript, SETTLED)[2]
    assert _ran(after) == []
    assert _model_gets(after)["call_charge"] == "charged order 42"
    assert len([line for line in after.ledger if line.startswith("charged ")]) == 1
    assert after.job is not None
    journal = SQLiteJournal(after.job / "journal.db")
    try:
        assert journal.unknown() == []
    finally:
        journal.close()


def test_an_idempotent_tool_is_run_again_exactly_once_and_charges_once(
    transcript: list[Step],
) -> None:
    killed, rerun = _script_runs(transcript, IDEMPOTENT)[:2]
    assert killed.killed and "--idempotent" in killed.command and "--idempotent" in rerun.command
    assert _ran(rerun) == ["charging order 42", "sending the receipt of order 42"]
    assert _model_gets(rerun)["call_charge"] == "charged order 42"
    assert len([line for line in rerun.ledger if line.startswith("charged ")]) == 1
    assert rerun.job is not None
    journal = SQLiteJournal(rerun.job / "journal.db")
    try:
        record = journal.get(rerun.job.name, "call_charge")
        assert record is not None and (record.state, record.runs) == ("completed", 2)
    finally:
        journal.close()
