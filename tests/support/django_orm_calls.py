"""2,000 Django ORM tool calls through a ToolExecutor against a real PostgreSQL,
run by ``tests/contrib/test_django_connections.py`` in a process of its own (Django's
settings are configured once per process). Prints one JSON object of figures.

    python django_orm_calls.py SOCKET_DIR USER DBNAME hooks|nohooks
"""

from __future__ import annotations

import json
import sys
import threading
import time
import typing as t


def main() -> None:
    import django
    from django.conf import settings

    HOST, USER, NAME, MODE = sys.argv[1:5]
    HOOKS = MODE == "hooks"
    MAX_WORKERS = 4

    _db = {"ENGINE": "django.db.backends.postgresql", "HOST": HOST, "USER": USER, "NAME": NAME}
    settings.configure(
        DATABASES={
            "default": {**_db, "CONN_MAX_AGE": 0},  # Django's default: a connection per request
            "persistent": {**_db, "CONN_MAX_AGE": None},  # kept open for good
        },
        INSTALLED_APPS=[],
        USE_TZ=True,
    )
    django.setup()

    import psycopg
    from django.db import connection, models

    from nous_tools import Err, Ok, RunContext, ToolExecutor, ToolTimeout, tool
    from nous_tools.contrib.django import close_all_connections, close_connections

    class Item(models.Model):
        name = models.CharField(max_length=50)
        n = models.IntegerField()

        class Meta:
            app_label = "nous_tools_test"

    with connection.cursor() as cursor:  # a fresh table for each run
        cursor.execute("drop table if exists nous_tools_test_item")
    with connection.schema_editor() as editor:
        editor.create_model(Item)

    monitor = psycopg.connect(host=HOST, user=USER, dbname=NAME, autocommit=True)

    def open_connections() -> int:
        """Client connections to the server, this monitor's own left out."""
        row = monitor.execute(
            "select count(*) from pg_stat_activity "
            "where backend_type = 'client backend' and pid <> pg_backend_pid()"
        ).fetchone()
        assert row is not None
        return int(row[0])

    def hooks() -> dict[str, t.Any]:
        return (
            {"after_task": close_connections, "on_worker_exit": close_all_connections}
            if HOOKS
            else {}
        )

    executor = ToolExecutor(max_workers=MAX_WORKERS, **hooks())

    @tool(timeout=20, retries=0)
    def create(name: str, n: int) -> int:
        return int(Item.objects.create(name=name, n=n).pk)

    @tool(timeout=20, retries=0)
    def count(n: int) -> int:
        return int(Item.objects.filter(n__lte=n).count())

    @tool(timeout=None, retries=0)
    def count_inline(n: int) -> int:
        return int(Item.objects.filter(n__gte=n).count())

    @tool(timeout=20, retries=0)
    def nested(n: int) -> int:
        """A tool that calls another through the executor (a worker of its own)."""
        Item.objects.filter(n=n).exists()
        inner = executor.execute(count, {"n": n})
        return inner.value if isinstance(inner, Ok) else -1

    @tool(timeout=0.3, retries=0)
    def overruns(n: int) -> int:
        """Queries, then runs past its deadline: abandoned, interrupted, retired."""
        Item.objects.filter(n=n).count()
        while True:
            time.sleep(0.01)

    results: list[t.Any] = []
    lock = threading.Lock()
    peak = [0]
    running = threading.Event()

    def watch() -> None:
        while running.is_set():
            with lock:
                peak[0] = max(peak[0], open_connections())
            time.sleep(0.02)

    def caller(index: int) -> None:
        mine = []
        for i in range(300):  # 4 callers x 300 = 1,200 calls
            if i % 2:
                mine.append(executor.execute(create, {"name": f"c{index}-{i}", "n": i}))
            else:
                mine.append(executor.execute(count, {"n": i}))
        with lock:
            results.extend(mine)

    began = time.monotonic()
    running.set()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    callers = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for thread in callers:
        thread.start()
    batches = []
    for b in range(20):  # 20 batches x 30 = 600 calls; inline ones run in the batch's lanes too
        batch = [
            (count, {"n": b * 30 + j}) if j % 2 else (count_inline, {"n": j}) for j in range(30)
        ]
        batches.extend(executor.execute_many(batch, RunContext.new()))
    nested_results = [executor.execute(nested, {"n": k}) for k in range(90)]  # 90 x 2 = 180 calls
    timeouts = [executor.execute(overruns, {"n": k}) for k in range(20)]  # 20 calls
    for thread in callers:
        thread.join()
    elapsed = time.monotonic() - began
    running.clear()
    watcher.join()

    ok = [r for r in results + batches + nested_results if isinstance(r, Ok)]
    failed = [str(r.reason)[:200] for r in results + batches + nested_results if isinstance(r, Err)]
    timed_out = sum(1 for r in timeouts if isinstance(r, Err) and isinstance(r.reason, ToolTimeout))

    # Let abandoned workers end, and hooks that run after the outcomes finish.
    settle_until = time.monotonic() + (15 if HOOKS else 3)
    while time.monotonic() < settle_until:
        if executor.stats()["abandoned"] == 0 and open_connections() <= 1:
            break
        time.sleep(0.05)
    after = open_connections()
    main_thread_connection = 1 if connection.connection is not None else 0

    # Phase 2: persistent connections that the server breaks.
    executor2 = ToolExecutor(max_workers=2, **hooks())

    @tool(timeout=20, retries=0)
    def count_persistent(n: int) -> int:
        return int(Item.objects.using("persistent").filter(n__lte=n).count())

    warm = executor2.execute_many([(count_persistent, {"n": k}) for k in range(20)])
    held = open_connections() - after
    monitor.execute(
        "select pg_terminate_backend(pid) from pg_stat_activity where backend_type = "
        "'client backend' and pid <> pg_backend_pid() and pid <> %s",
        (connection.connection.info.backend_pid,),
    )
    after_break = [executor2.execute(count_persistent, {"n": k}) for k in range(40)]
    broken_errors = sum(1 for r in after_break if isinstance(r, Err))
    last_ten_ok = all(isinstance(r, Ok) for r in after_break[-10:])
    executor2.shutdown()
    executor.shutdown()

    print(
        json.dumps(
            {
                "mode": MODE,
                "calls": len(results) + len(batches) + 2 * len(nested_results) + len(timeouts),
                "ok": len(ok),
                "failed": failed[:5],
                "failed_count": len(failed),
                "timed_out": timed_out,
                "seconds": round(elapsed, 2),
                "max_workers": MAX_WORKERS,
                "peak_open_during": peak[0],
                "open_after": after,
                "main_thread_connection": main_thread_connection,
                "persistent_held_by_2_workers": held,
                "warm_ok": sum(1 for r in warm if isinstance(r, Ok)),
                "errors_after_server_closed_them": broken_errors,
                "last_ten_ok_after_server_closed_them": last_ten_ok,
            }
        )
    )


if __name__ == "__main__":  # not when pytest collects this file
    main()
