"""A process that races others over the same journaled calls (for the multi-process
tests of the SQLite and PostgreSQL journals).

    python tests/support/journal_race.py JOURNAL EFFECTS GO N

``JOURNAL`` is an SQLite path or a PostgreSQL DSN (``postgresql://`` or
``host=...``). The process waits for the file ``GO`` to exist (so that all start
together), then calls ``charge`` with call ids ``call-0`` .. ``call-N-1`` of one run.
Each run of the tool appends ``"<call id>\\n"`` to ``EFFECTS`` (one ``write`` of an
``O_APPEND`` file: whole lines, never interleaved). It prints one JSON list: per
call, ``"ok"`` or the class name of the ``Err``'s reason.
"""

from __future__ import annotations

import json
import os
import sys
import time

from nous_tools import PostgresJournal, RunContext, SQLiteJournal, Tool, ToolExecutor


def main() -> None:
    target, effects, go, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    postgres = target.startswith(("postgresql://", "postgres://", "host="))
    journal = PostgresJournal(target) if postgres else SQLiteJournal(target)
    descriptor = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def charge(ctx: RunContext, n: int) -> str:
        os.write(descriptor, f"call-{n}\n".encode())
        time.sleep(0.002)  # long enough for the others to find it running, sometimes
        return f"charged {n}"

    tool = Tool.from_function(charge, timeout=30.0, retries=0)
    ctx = RunContext.new(run_id="run-race")
    deadline = time.monotonic() + 120
    while not os.path.exists(go):  # the parent creates it once every process is up
        if time.monotonic() > deadline:
            raise SystemExit("never told to go")
        time.sleep(0.005)
    answers = []
    with ToolExecutor(max_workers=2, journal=journal) as executor:
        for n in range(count):
            result = executor.execute(tool, {"n": n}, ctx, call_id=f"call-{n}")
            if result.is_ok():
                assert result.value == f"charged {n}", result
                answers.append("ok")
            else:
                answers.append(type(result.reason).__name__)
    os.close(descriptor)
    print(json.dumps(answers))


if __name__ == "__main__":
    main()
