"""Processes racing to redeem one approval token against a real shared Django cache,
for ``tests/approval/test_approval_stores.py``. Each function here runs in a child process of
its own (``multiprocessing``'s spawn context): Django's settings are configured per
process, as in a site with several workers.
"""

from __future__ import annotations

import os
import typing as t

SECRET = "race-secret"
REGISTRY_NAME = "race"

#: The file each run of the tool appends a line to (set in the child).
_runs_path: str | None = None


def refund(order: int) -> str:
    """Refund an order: one line in the runs file per run, written with O_APPEND."""
    assert _runs_path is not None
    descriptor = os.open(_runs_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, f"{os.getpid()} {order}\n".encode())
    finally:
        os.close(descriptor)
    return f"refunded {order}"


def make_registry(store: t.Any = None) -> t.Any:
    from nous_tools import Registry, Tool

    tool = Tool.from_function(refund, approval="ask", timeout=None)
    return Registry([tool], name=REGISTRY_NAME, approval_store=store)


def configure(caches: dict[str, t.Any], databases: dict[str, t.Any] | None = None) -> None:
    import django
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=[],
        DATABASES=databases or {},
        CACHES=caches,
        USE_TZ=True,
    )
    django.setup()


def create_cache_table(caches: dict[str, t.Any], databases: dict[str, t.Any]) -> None:
    """``manage.py createcachetable`` for the database cache."""
    configure(caches, databases)
    from django.core.management import call_command

    call_command("createcachetable", verbosity=0)


def redeem(
    caches: dict[str, t.Any],
    databases: dict[str, t.Any] | None,
    token: dict[str, t.Any],
    runs_path: str,
    barrier: t.Any,
    results: t.Any,
) -> None:
    """Read the token, wait for every racer, redeem it once; put the outcome's kind."""
    global _runs_path
    _runs_path = runs_path
    configure(caches, databases)
    from nous_tools import NeedsApproval, Ok
    from nous_tools.contrib.django import CacheApprovalStore

    store = CacheApprovalStore()
    registry = make_registry(store)
    approval = NeedsApproval.from_dict(token, registry, SECRET)
    store.cache.get("warm-up")  # connect before the race, not in it
    barrier.wait(120)
    outcome = registry.execute_approved(approval)
    if type(outcome) is Ok:
        results.put("ran")
    else:
        results.put(f"{type(outcome.reason).__name__}: {outcome.reason}")


def refused_aliases(caches: dict[str, t.Any], runs_path: str, results: t.Any) -> None:
    """For each configured alias: what a registry whose store uses it answers."""
    global _runs_path
    _runs_path = runs_path
    configure(caches)
    from nous_tools.contrib.django import CacheApprovalStore

    for alias in caches:
        registry = make_registry(CacheApprovalStore(alias=alias))
        pending = registry.execute("refund", {"order": 1})
        outcome = registry.execute_approved(pending)
        reason = getattr(outcome, "reason", None)
        why = str(getattr(reason, "original_error", ""))
        results.put((alias, outcome.is_ok(), str(reason), why))


def classify(kind: str) -> bool:
    """A function with a frozenset constant, whose iteration order depends on the
    process's string hash seed: its digest must not."""
    return kind in {"refund", "chargeback", "void", "credit", "debit"}


def digest_of_classify() -> str:
    from nous_tools import Tool
    from nous_tools.approval import tool_digest

    return tool_digest(Tool.from_function(classify))
