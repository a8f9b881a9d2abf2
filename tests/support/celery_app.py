"""The Celery app of the slow tests and the backend benchmark: a worker started with
``celery -A celery_app worker -P prefork`` loads it, and so does the test process.

The broker and result backend are the Redis server the test started
(``NOUS_TOOLS_TEST_BROKER``). The app sets ``task_acks_late=True`` for its own
tasks, as many projects do: the attempts' task must still acknowledge early.
"""

from __future__ import annotations

import os
import time

from celery import Celery

from nous_tools import RunContext
from nous_tools.contrib.celery import install

BROKER = os.environ.get("NOUS_TOOLS_TEST_BROKER", "memory://")
#: Seconds: short, so that a test can wait past it and see nothing run twice.
VISIBILITY_TIMEOUT = 8.0

app = Celery(
    "nous_tools_test",
    broker=f"{BROKER}/0" if BROKER.startswith("redis") else BROKER,
    backend=f"{BROKER}/1" if BROKER.startswith("redis") else "cache+memory://",
)
app.conf.update(
    broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT},
    worker_prefetch_multiplier=1,
    task_acks_late=True,
    result_expires=600,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    nous_tools_signing_key="slow-suite-signing-key-0123456789",  # callers and workers
)
install(app)


def _mark(marker: str) -> None:
    with open(marker, "a") as f:
        f.write(f"{os.getpid()}\n")


def add(a: int, b: int) -> int:
    return a + b


def describe(ctx: RunContext, marker: str = "") -> dict[str, object]:
    """What the worker sees of the attempt."""
    return {
        "pid": os.getpid(),
        "retry": ctx.retry,
        "time_left": ctx.time_left(),
        "cancelled": ctx.cancelled.is_set(),
        "deps": ctx.deps,
    }


def hang(marker: str) -> str:
    """Record the pool process, then sleep far past any deadline."""
    _mark(marker)
    time.sleep(60)
    return "woke up"


def crash(marker: str) -> str:
    _mark(marker)
    os._exit(3)


def fail(marker: str) -> str:
    _mark(marker)
    raise ValueError("boom on the worker")


def wait_for_cancel(ctx: RunContext) -> bool:
    """Sleep until ``ctx.cancelled`` reads as set (at the deadline)."""
    return ctx.cancelled.wait(30)


@app.task(name="nous_tools_test.bare_add", acks_late=False)
def bare_add(a: int, b: int) -> int:
    """The benchmark's bare Celery round trip: ``bare_add.delay(1, 2).get()``."""
    return a + b


def burn(ms: float) -> float:
    """Spin the CPU for ``ms`` milliseconds (the throughput benchmark's work)."""
    end = time.perf_counter() + ms / 1000
    x = 0.0
    while time.perf_counter() < end:
        x += 1.0
    return x


@app.task(name="nous_tools_test.bare_burn", acks_late=False)
def bare_burn(ms: float) -> float:
    return burn(ms)


def count(ctx: RunContext, n: int = 3) -> str:
    """Report n steps of progress (each past the coalescing interval) and a log line."""
    for step in range(1, n + 1):
        ctx.report_progress(step, n, f"step {step}")
        time.sleep(0.06)
    ctx.log("info", "counted on the worker", n=n, pid=os.getpid())
    return f"counted to {n}"
