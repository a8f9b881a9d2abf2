"""Two requests racing one paused call, as two Django worker processes on PostgreSQL:
a ``DjangoJournal`` and the Django cache's approval store (a database cache) or the
journal's own (``journal.approvals``), for
``tests/approval/test_approval_journal_race.py``. Each function here runs in a child process
of its own (``multiprocessing``'s spawn context): Django is configured per process.
"""

from __future__ import annotations

import typing as t

SECRET = "journal-race-secret"
REGISTRY_NAME = "journal-race"


def make_registry(journal: t.Any = None, store: t.Any = None) -> t.Any:
    from approval_race import refund  # one line in the runs file a run

    from nous_tools import Registry, Tool

    tool = Tool.from_function(refund, approval="ask", timeout=10)
    return Registry([tool], name=REGISTRY_NAME, approval_store=store, journal=journal)


def settings_for(database: dict[str, str]) -> tuple[dict[str, t.Any], dict[str, t.Any]]:
    """The DATABASES and CACHES of the site: PostgreSQL, and a database cache on it."""
    databases = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": database["name"],
            "USER": database["user"],
            "HOST": database["host"],
        }
    }
    caches = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "nous_tools_cache",
        }
    }
    return databases, caches


def _configure(database: dict[str, str]) -> None:
    import django
    from django.conf import settings

    databases, caches = settings_for(database)
    settings.configure(INSTALLED_APPS=[], DATABASES=databases, CACHES=caches, USE_TZ=True)
    django.setup()


def create_cache_table(database: dict[str, str]) -> None:
    """``manage.py createcachetable`` for the database cache."""
    _configure(database)
    from django.core.management import call_command

    call_command("createcachetable", verbosity=0)


def submit(
    database: dict[str, str],
    wires: list[dict[str, t.Any]],
    decisions: list[str],
    runs_path: str,
    barrier: t.Any,
    results: t.Any,
    store: str = "cache",
) -> None:
    """For each round: wait for the other request, then resolve that round's batch
    with this request's decision; put ``(round, the text the model gets)``. The
    approval store: the database cache's (``"cache"``), or the journal's own
    (``"journal"``: redeemed with the start record, one transaction)."""
    import approval_race

    approval_race._runs_path = runs_path
    _configure(database)
    from nous_tools import ToolCallResults, format_tool_result
    from nous_tools.contrib.django import CacheApprovalStore, DjangoJournal

    journal = DjangoJournal()
    if store == "journal":
        registry = make_registry(journal, journal.approvals)
    else:
        cache = CacheApprovalStore()
        registry = make_registry(journal, cache)
        cache.cache.get("warm-up")  # connect before the race, not in it
    journal.get("warm-up", "warm-up")
    for round_, (wire, decision) in enumerate(zip(wires, decisions, strict=True)):
        batch = ToolCallResults.from_dict(wire, registry, SECRET)
        barrier.wait(120)
        outcome = batch.resolve({"call_r": decision}).results[0]
        results.put((round_, format_tool_result(outcome, "refund")))
