"""Two processes on one PostgreSQL journal whose host clocks disagree by an hour, for
``tests/journal/test_journal_postgres.py``. Prints one JSON object of what happened.

    python journal_clock.py DSN hold MARKER      # runs the call until MARKER exists
    python journal_clock.py DSN skewed MARKER    # an hour ahead: the same call again
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    dsn, role, marker = sys.argv[1:4]
    from nous_tools._util import _clock

    if role == "skewed":  # this host's clock an hour ahead (NTP forgot it)
        real = _clock._Clock.time
        _clock._Clock.time = staticmethod(lambda: real() + 3600.0)  # type: ignore[method-assign]
    from nous_tools import PostgresJournal, RunContext, Tool, ToolExecutor, format_tool_result

    def charge(amount: int) -> str:
        with open(marker + ".runs", "a") as f:
            f.write(f"{os.getpid()}\n")
        if role == "hold":
            with open(marker + ".started", "w") as f:
                f.write("started")
            while not os.path.exists(marker):
                time.sleep(0.02)
        return f"charged {amount}"

    tool = Tool.from_function(charge, timeout=None, idempotent=True)
    journal = PostgresJournal(dsn, grace=2.0)  # short leases, renewed while it runs
    with ToolExecutor(journal=journal) as executor:
        result = executor.execute(
            tool, {"amount": 5}, RunContext.new(run_id="clocks"), call_id="c1"
        )
    print(
        json.dumps(
            {
                "text": format_tool_result(result, "charge"),
                "type": type(getattr(result, "reason", None)).__name__,
            }
        )
    )


if __name__ == "__main__":
    main()
