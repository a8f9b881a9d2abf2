"""Journaled calls on a ``DjangoJournal`` over SQLite, in a process of its own
(Django's settings are configured once per process), for
``tests/journal/test_journal.py``. Prints one JSON object of what happened.

    python django_journal_calls.py DATABASE_PATH
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    import django
    from django.conf import settings

    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[1]}},
        INSTALLED_APPS=[],
        USE_TZ=True,
    )
    django.setup()
    from django.db import connection, transaction

    from nous_tools import RunContext, Tool, ToolExecutor, format_tool_result
    from nous_tools.contrib.django import DjangoJournal

    runs = []

    def charge(amount: int) -> str:
        runs.append(amount)
        return f"charged {amount}"

    tool = Tool.from_function(charge, timeout=None)
    ctx = RunContext.new(run_id="django-run")
    journal = DjangoJournal()
    with ToolExecutor(journal=journal) as executor:
        first = executor.execute(tool, {"amount": 5}, ctx, call_id="c1")
        again = executor.execute(tool, {"amount": 5}, ctx, call_id="c1")
        with transaction.atomic():
            inside = executor.execute(tool, {"amount": 6}, ctx, call_id="c2")
    record = journal.get("django-run", "c1")
    # The journal's own approval store: redeemed with the start record, in one
    # transaction (Django's atomic), and a second redeem answers the first outcome.
    from nous_tools import NeedsApproval, Registry

    refund = Tool.from_function(charge, name="refund", approval="ask", timeout=10)
    registry = Registry([refund], journal=journal, approval_store=journal.approvals)
    na = registry.execute("refund", {"amount": 7}, ctx, call_id="c3")
    assert isinstance(na, NeedsApproval)
    approved = [registry.execute_approved(na, ctx) for _ in range(2)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT run_id, call_id FROM nous_tools_journal_approvals")
        claims = [list(row) for row in cursor.fetchall()]
    print(
        json.dumps(
            {
                "first": format_tool_result(first, "charge"),
                "again": format_tool_result(again, "charge"),
                "inside": format_tool_result(inside, "charge"),
                "inside_type": type(getattr(inside, "reason", None)).__name__,
                "runs": runs,
                "state": record.state if record else None,
                "approved": [format_tool_result(each, "refund") for each in approved],
                "claims": claims,
            }
        )
    )


if __name__ == "__main__":
    main()
