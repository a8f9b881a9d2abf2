"""A process that runs one program on a SQLite journal, and (``crash``) is killed
with SIGKILL inside its third nested call (for tests/program/test_program_approvals.py).

    python tests/support/program_crash.py JOURNAL MARKERS crash|resume

Each tool appends a line to ``MARKERS/<tool>-<argument>`` when it runs, so the test
counts the runs across both processes. ``resume`` runs the same program in the same
run and prints its outcome as JSON on stdout.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sys

from nous_tools import Ok, Registry, RunContext, SQLiteJournal, Tool

RUN_ID = "program-crash-run"
PROGRAM = """
a = lookup(item="a")
b = score(item="b")
try:
    c = crash(step="c")
except ToolError as exc:
    c = exc.kind
d = lookup(item="d")
result = [a, b, c, d]
"""


def main() -> None:
    journal_path, markers_path, mode = sys.argv[1:4]
    markers = pathlib.Path(markers_path)

    def mark(name: str) -> None:
        with open(markers / name, "a") as f:
            f.write("ran\n")
            f.flush()
            os.fsync(f.fileno())

    def lookup(item: str) -> str:
        """Find an item."""
        mark(f"lookup-{item}")
        return f"found {item}"

    def score(item: str) -> int:
        """Score an item."""
        mark(f"score-{item}")
        return len(item)

    def crash(step: str) -> str:
        """Die here the first time (SIGKILL of this, the parent, process)."""
        mark(f"crash-{step}")
        if mode == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        return "fine"

    registry = Registry(
        [Tool.from_function(f, timeout=30) for f in (lookup, score, crash)],
        journal=SQLiteJournal(journal_path),
    )
    result = registry.run_program(PROGRAM, RunContext.new(run_id=RUN_ID), program_id="p")
    if isinstance(result, Ok):
        print(json.dumps({"ok": result.value.result}))
    else:
        print(json.dumps({"other": repr(result)}))


if __name__ == "__main__":
    main()
