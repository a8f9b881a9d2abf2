"""``nous_tools.contrib.ray.RayBackend`` (issue 16) against a real local Ray.

Ray is started once per session (``ray.init(num_cpus=2, include_dashboard=False)``)
by the ``ray_started`` fixture; the tests that need it are in the slow suite
(``make slow``). The tools are module-level functions of this module: Ray's
workers import it by name (Ray gives them the driver's ``sys.path``).
"""

from __future__ import annotations

import collections.abc as c
import os
import pathlib
import threading
import time
import typing as t

import pytest
from servers import wait_dead

from nous_tools import (
    ChildProcessDied,
    Err,
    Ok,
    RunContext,
    Tool,
    ToolError,
    ToolExecutor,
    ToolTimeout,
)

ray = pytest.importorskip("ray")

ROOT = pathlib.Path(__file__).resolve().parents[2]

from nous_tools.contrib.ray import RayBackend  # noqa: E402


def _mark(marker: str) -> None:
    with open(marker, "a") as f:
        f.write(f"{os.getpid()}\n")


def describe(ctx: RunContext, n: int) -> dict[str, t.Any]:
    return {
        "pid": os.getpid(),
        "retry": ctx.retry,
        "time_left": ctx.time_left(),
        "cancelled": ctx.cancelled.is_set(),
        "deps": ctx.deps,
        "n": n,
    }


def hang(marker: str) -> str:
    _mark(marker)
    time.sleep(120)
    return "woke up"


def crash(marker: str) -> str:
    _mark(marker)
    os._exit(3)


def fail(marker: str) -> str:
    _mark(marker)
    raise ValueError("boom on a Ray worker")


def peek_cancel(ctx: RunContext) -> tuple[bool, bool, float | None]:
    before = ctx.cancelled.is_set()
    waited = ctx.cancelled.wait(0.2)  # well before the deadline: times out, not set
    return before, waited, ctx.time_left()


@pytest.fixture(scope="session")
def ray_started() -> c.Iterator[None]:
    started = False
    if not ray.is_initialized():
        # The workers import this module (its functions travel by reference), as
        # tests.contrib.test_ray_backend, and with it servers.py (tests/support).
        path = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "support")])
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": path}},
        )
        started = True
    yield
    if started:
        ray.shutdown()


@pytest.fixture
def executor(ray_started: None) -> c.Iterator[ToolExecutor]:
    with ToolExecutor(max_workers=4, backends={"ray": RayBackend()}) as ex:
        yield ex


def _lines(path: pathlib.Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_ray_backend_refuses_options_that_would_let_ray_rerun_an_attempt() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        RayBackend(max_retries=3)
    with pytest.raises(ValueError, match="retry_exceptions"):
        RayBackend(retry_exceptions=True)


@pytest.mark.slow
def test_an_attempt_runs_on_a_ray_worker_with_retry_and_deadline(executor: ToolExecutor) -> None:
    remote = Tool.from_function(describe, timeout=30, backend="ray")
    local = Tool.from_function(describe, timeout=30)
    ctx = RunContext.new({"user": "ada"})
    result = executor.execute(remote, {"n": 3}, ctx)
    assert isinstance(result, Ok), result
    seen = result.value
    assert seen["pid"] != os.getpid() and seen["n"] == 3
    assert seen["retry"] == 0 and seen["deps"] == {"user": "ada"}
    assert 0 < seen["time_left"] <= 30 and not seen["cancelled"]
    here = executor.execute(local, {"n": 3}, ctx)
    assert isinstance(here, Ok) and here.value["pid"] == os.getpid()
    figures = executor.stats()
    assert figures["ray_completed"] == 1 and figures["ray_submitted"] == 1
    assert figures["completed"] == 1  # the local one, on the worker threads


@pytest.mark.slow
def test_a_timeout_returns_at_the_deadline_kills_the_worker_and_is_never_rerun(
    executor: ToolExecutor, tmp_path: pathlib.Path
) -> None:
    marker = tmp_path / "runs"
    slow = Tool.from_function(hang, timeout=3.0, retries=2, backend="ray")
    began = time.monotonic()
    result = executor.execute(slow, {"marker": str(marker)})
    elapsed = time.monotonic() - began
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout), result
    assert 3.0 <= elapsed < 3.0 + 2.0  # at the deadline, not when the tool would end
    pids = [int(p) for p in _lines(marker)]
    assert len(pids) == 1  # it started once, and was not retried
    assert wait_dead(pids[0], 30), "ray.cancel(force=True) did not kill the worker"
    time.sleep(2.0)
    assert len(_lines(marker)) == 1  # and Ray did not run it again
    assert executor.stats()["ray_timed_out"] == 1


@pytest.mark.slow
def test_a_worker_that_dies_gives_an_err_naming_it_never_retried(
    executor: ToolExecutor, tmp_path: pathlib.Path
) -> None:
    marker = tmp_path / "runs"
    fragile = Tool.from_function(crash, timeout=60, retries=2, backend="ray")
    result = executor.execute(fragile, {"marker": str(marker)})
    assert isinstance(result, Err), result
    assert isinstance(result.reason.original_error, ChildProcessDied)
    assert "Ray worker running tool 'crash' died" in result.reason.message
    assert len(_lines(marker)) == 1
    assert executor.stats()["ray_died"] == 1


@pytest.mark.slow
def test_an_exception_on_the_worker_is_retried_by_the_executor(
    executor: ToolExecutor, tmp_path: pathlib.Path
) -> None:
    marker = tmp_path / "runs"
    failing = Tool.from_function(fail, timeout=60, retries=1, backend="ray")
    result = executor.execute(failing, {"marker": str(marker)})
    assert isinstance(result, Err), result
    assert isinstance(result.reason.original_error, ValueError)
    assert "boom on a Ray worker" in result.reason.message
    assert len(_lines(marker)) == 2  # the executor's retry: two tasks, one attempt each


@pytest.mark.slow
def test_arguments_that_cannot_be_pickled_give_a_clear_err_and_nothing_is_sent(
    executor: ToolExecutor,
) -> None:
    remote = Tool.from_function(describe, timeout=30, backend="ray", validate_args=False)
    result = executor.execute(remote, {"n": threading.Lock()}, RunContext.new())
    assert isinstance(result, Err) and isinstance(result.reason, ToolError)
    assert "the argument 'n'" in result.reason.message and "pickle" in result.reason.message
    assert executor.stats()["ray_submitted"] == 0


@pytest.mark.slow
def test_a_closure_travels_by_value(executor: ToolExecutor) -> None:
    factor = 7

    def times(n: int) -> tuple[int, int]:
        return n * factor, os.getpid()

    result = executor.execute(Tool.from_function(times, timeout=30, backend="ray"), {"n": 6})
    assert isinstance(result, Ok), result
    assert result.value[0] == 42 and result.value[1] != os.getpid()


@pytest.mark.slow
def test_ctx_cancelled_on_the_worker_follows_the_callers_deadline(executor: ToolExecutor) -> None:
    """On the worker ``ctx.cancelled`` is not set before the deadline, and its
    ``wait`` ends early only at the deadline: the same clock as the caller's."""
    waits = Tool.from_function(peek_cancel, timeout=20.0, backend="ray")
    result = executor.execute(waits, {}, RunContext.new())
    assert isinstance(result, Ok), result
    before, waited, left = result.value
    assert before is False and waited is False
    assert 15.0 < left < 20.0


@pytest.mark.slow
def test_two_workers_run_two_attempts_at_once(executor: ToolExecutor) -> None:
    remote = Tool.from_function(describe, timeout=60, backend="ray")
    results = executor.execute_many([(remote, {"n": i}) for i in range(8)], RunContext.new())
    assert [r.value["n"] for r in results if isinstance(r, Ok)] == list(range(8))
    assert executor.stats()["ray_completed"] == 8
