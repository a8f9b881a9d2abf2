"""A process that makes one journaled call and is killed with SIGKILL at a given
point (for tests/journal/test_journal_crash.py and the property test).

    python tests/support/journal_crash.py JOURNAL EFFECTS POINT [--idempotent] [--wait S]

The tool ``charge`` records its side effect as a line in ``EFFECTS`` (written and
fsynced before anything else happens). Like a payment API given an idempotency
key, it does nothing for a key it has already seen when the tool is idempotent —
the downstream de-duplication that makes an ``idempotent=True`` re-run
exactly-once. POINT is where the process kills itself:

- ``after-started``: the journal has written ``started``, the tool has not run;
- ``in-tool``: inside the tool, right after its side effect;
- ``after-returned``: the tool returned, ``completed`` is not written yet;
- ``after-completed``: ``execute`` returned (``completed`` written);
- ``none``: not killed; the outcome is printed as JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import typing as t

from nous_tools import RunContext, SQLiteJournal, Tool, ToolExecutor, format_tool_result, signals

RUN_ID = "run-crash"
CALL_ID = "call-1"
TIMEOUT = 5.0


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("journal")
    parser.add_argument("effects")
    parser.add_argument("point")
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--wait", type=float, default=0.0)
    parser.add_argument("--call-id", default=CALL_ID)
    options = parser.parse_args()

    def charge(ctx: RunContext, amount: int) -> dict[str, t.Any]:
        key = ctx.idempotency_key or ""
        seen = []
        if os.path.exists(options.effects):
            with open(options.effects) as f:
                seen = f.read().split()
        if not (options.idempotent and key in seen):  # the downstream's de-duplication
            with open(options.effects, "a") as f:
                f.write(key + "\n")
                f.flush()
                os.fsync(f.fileno())
        if options.point == "in-tool":
            die()
        return {"charged": amount}

    def on_start(sender: t.Any, **kw: t.Any) -> None:
        if options.point == "after-started":
            die()

    def on_stop(sender: t.Any, **kw: t.Any) -> None:
        if options.point == "after-returned":
            die()

    signals.tool_execute_start.connect(on_start)
    signals.tool_execute_stop.connect(on_stop)
    tool = Tool.from_function(
        charge, timeout=TIMEOUT, retries=0, idempotent=True if options.idempotent else None
    )
    journal = SQLiteJournal(options.journal)  # a lease of 65 s
    with ToolExecutor(max_workers=2, journal=journal) as executor:
        result = executor.execute(
            tool, {"amount": 5}, RunContext.new(run_id=RUN_ID), call_id=options.call_id,
            wait=options.wait,
        )  # fmt: skip
        if options.point == "after-completed":
            die()
    reason = getattr(result, "reason", None)
    print(
        json.dumps(
            {
                "ok": result.is_ok(),
                "error": type(reason).__name__ if reason is not None else None,
                "text": format_tool_result(result, tool.name),
            }
        )
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
