"""``nous_tools.contrib.celery.CeleryBackend`` (issue 16).

Wiring tests (the fast suite) use Celery's in-memory broker and an in-process
solo worker: they check what is sent and what comes back, never deadlines (a solo
pool cannot kill anything). The slow suite starts a real ``redis-server`` and a
real ``celery worker -P prefork -c 2`` subprocess (``tests/support/celery_app.py``).
"""

from __future__ import annotations

import collections.abc as c
import logging
import os
import pathlib
import threading
import time
import typing as t

import pytest

from nous_tools import ChildProcessDied, Err, Ok, RunContext, Tool, ToolExecutor, ToolTimeout

celery = pytest.importorskip("celery")

from celery.contrib.testing.worker import start_worker  # noqa: E402

from nous_tools.contrib.celery import TASK_NAME, CeleryBackend, install, visibility_timeout  # noqa: E402


def add(a: int, b: int) -> int:
    return a + b


def retry_index(ctx: RunContext) -> int:
    return ctx.retry


def fail() -> None:
    raise ValueError("boom in the solo worker")


CALLS: list[int] = []


def recorded(a: int, b: int) -> int:
    CALLS.append(a)
    return a + b


# -- refusals: no server needed ---------------------------------------------------


def _app(**conf: t.Any) -> t.Any:
    broker = conf.pop("broker", "memory://")
    backend = conf.pop("backend", "cache+memory://")
    app = celery.Celery("nous_tools_wiring", broker=broker, backend=backend, set_as_current=False)
    if broker == "memory://":  # the in-memory transport polls, once a second by default
        app.conf.broker_transport_options = {"polling_interval": 0.01}
    # An embedded worker must leave this process's logging alone (other tests read it).
    app.conf.worker_hijack_root_logger = False
    app.conf.worker_redirect_stdouts = False
    app.conf.nous_tools_signing_key = KEY  # shared by the callers and the workers
    app.conf.update(conf)
    return app


KEY = "wiring-signing-key-0123456789"


def test_celery_backend_refuses_to_start_when_visibility_timeout_is_shorter_than_max_timeout() -> (
    None
):
    app = _app(
        broker="redis://127.0.0.1:1/0",
        backend="redis://127.0.0.1:1/1",
        broker_transport_options={"visibility_timeout": 60},
    )
    with pytest.raises(ValueError, match=r"visibility_timeout \(60 s\) is shorter") as info:
        CeleryBackend(app, max_timeout=120)
    assert "max_timeout=120 s" in str(info.value) and "runs twice" in str(info.value)
    with pytest.raises(ValueError, match="shorter"):
        CeleryBackend(app, max_timeout=59.5)  # 59.5 + the 1 s kill grace > 60
    assert CeleryBackend(app, max_timeout=59).max_timeout == 59.0


def test_the_default_max_timeout_follows_the_brokers_visibility_timeout() -> None:
    redis_default = _app(broker="redis://127.0.0.1:1/0", backend="redis://127.0.0.1:1/1")
    assert visibility_timeout(redis_default) == ("redis", 3600.0)
    assert CeleryBackend(redis_default).max_timeout == 3599.0
    sqs = _app(broker="sqs://", broker_transport_options={"visibility_timeout": 30})
    assert visibility_timeout(sqs) == ("sqs", 30.0)
    assert visibility_timeout(_app()) is None
    assert CeleryBackend(_app()).max_timeout is None


def test_celery_backend_refuses_apps_that_cannot_honour_a_deadline() -> None:
    with pytest.raises(ValueError, match="task_always_eager"):
        CeleryBackend(_app(task_always_eager=True))
    with pytest.raises(ValueError, match="needs a result backend"):
        CeleryBackend(_app(backend=None))
    with pytest.raises(ValueError, match="kill_grace"):
        CeleryBackend(_app(), kill_grace=0)


def test_a_tool_longer_than_max_timeout_is_refused_and_never_sent() -> None:
    app = _app(broker="redis://127.0.0.1:1/0", backend="redis://127.0.0.1:1/1")
    backend = CeleryBackend(app, max_timeout=10)
    with ToolExecutor(backends={"celery": backend}) as executor:
        long = Tool.from_function(add, timeout=30, backend="celery", retries=2)
        result = executor.execute(long, {"a": 1, "b": 2})
        figures = executor.stats()
    assert isinstance(result, Err)
    assert "timeout (30 s) is longer" in result.reason.message
    assert "max_timeout=10 s" in result.reason.message
    assert figures["celery_not_sent"] == 1 and figures["celery_submitted"] == 0


def test_the_task_acknowledges_early_and_is_never_retried_by_celery() -> None:
    app = _app(task_acks_late=True)  # the project's default: our task does not follow it
    task = install(app)
    assert task.name == TASK_NAME
    assert task.acks_late is False and task.max_retries == 0
    assert not task.autoretry_for
    assert install(app) is task  # idempotent


# -- wiring: the in-memory broker and a solo worker in this process ----------------


@pytest.fixture(scope="module")
def solo_app() -> c.Iterator[t.Any]:
    app = _app()
    install(app, require_prefork=False)
    app.loader.import_module("celery.contrib.testing.tasks")
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            # The embedded worker sets up logging (the root level to ERROR): put the
            # process's logging back as it was, other tests read it.
            root.setLevel(level)
            root.handlers[:] = handlers
            yield app
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers


def test_wiring_an_attempt_goes_through_the_broker_and_comes_back(solo_app: t.Any) -> None:
    backend = CeleryBackend(solo_app, poll_interval=0.01)
    with ToolExecutor(backends={"celery": backend}) as executor:
        assert executor.execute(
            Tool.from_function(add, timeout=30, backend="celery"), {"a": 2, "b": 3}
        ) == Ok(5)
        failing = Tool.from_function(fail, timeout=30, backend="celery", retries=1)
        result = executor.execute(failing)
        assert isinstance(result, Err) and isinstance(result.reason.original_error, ValueError)
        flaky = Tool.from_function(retry_index, timeout=30, backend="celery")
        assert executor.execute(flaky, {}, RunContext.new(retry=0)) == Ok(0)
        locked = executor.execute(
            Tool.from_function(add, timeout=30, backend="celery", validate_args=False),
            {"a": threading.Lock(), "b": 1},
        )
        figures = executor.stats()
    assert isinstance(locked, Err) and "the argument 'a'" in locked.reason.message
    assert figures["celery_submitted"] == 4  # add, fail twice (the executor's retry), retry_index
    assert figures["celery_completed"] == 4 and figures["celery_not_sent"] == 1


def test_outside_a_prefork_pool_process_the_task_refuses_to_run_an_attempt() -> None:
    """The task body, as a solo or thread pool would run it (in the worker's own
    process): it answers with a refusal and never calls the tool."""
    import base64

    from nous_tools._engine._remote import decode, encode
    from nous_tools._util._clock import monotonic
    from nous_tools.contrib.celery import _run_attempt, _sign, _verified

    CALLS.clear()
    tool = Tool.from_function(recorded, timeout=30)
    request = encode(tool, {"a": 1, "b": 1}, None, monotonic() + 30, engine="Celery")
    key = KEY.encode()
    reply = _verified(key, _run_attempt(_sign(key, request), require_prefork=True, key=key))
    assert reply is not None
    kind, message = decode(reply)
    assert kind == "unpicklable" and "prefork" in message
    assert CALLS == []
    # A worker without a key runs nothing it cannot check (its answer unsigned).
    kind, message = decode(base64.b64decode(_run_attempt(_sign(key, request), key=None)))
    assert kind == "unpicklable" and "has no signing key" in message
    assert CALLS == []
    ran = _verified(key, _run_attempt(_sign(key, request), require_prefork=False, key=key))
    assert ran is not None and decode(ran) == ("returned", 2)
    assert CALLS == [1]


# -- the real thing: Redis and a prefork worker ------------------------------------


@pytest.fixture(scope="module")
def redis_worker() -> c.Iterator[t.Any]:
    from servers import celery_worker, redis_server

    with redis_server() as url:
        saved = os.environ.get("NOUS_TOOLS_TEST_BROKER")
        os.environ["NOUS_TOOLS_TEST_BROKER"] = url
        try:
            import sys

            sys.modules.pop("celery_app", None)
            with celery_worker("celery_app", url, concurrency=2):
                import celery_app

                yield celery_app
        finally:
            if saved is None:
                os.environ.pop("NOUS_TOOLS_TEST_BROKER", None)
            else:
                os.environ["NOUS_TOOLS_TEST_BROKER"] = saved


@pytest.fixture
def prefork(redis_worker: t.Any) -> c.Iterator[tuple[t.Any, ToolExecutor]]:
    backend = CeleryBackend(redis_worker.app, max_timeout=5)
    with ToolExecutor(max_workers=4, backends={"celery": backend}) as executor:
        yield redis_worker, executor


def _lines(path: pathlib.Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.slow
def test_an_attempt_runs_on_a_prefork_worker_with_retry_and_deadline(prefork: t.Any) -> None:
    module, executor = prefork
    tool = Tool.from_function(module.describe, timeout=5, backend="celery")
    result = executor.execute(tool, {}, RunContext.new({"user": "ada"}, retry=0))
    assert isinstance(result, Ok), result
    seen = result.value
    assert seen["pid"] != os.getpid() and seen["retry"] == 0
    assert seen["deps"] == {"user": "ada"} and not seen["cancelled"]
    assert 0 < seen["time_left"] <= 5
    assert executor.stats()["celery_completed"] == 1


@pytest.mark.slow
def test_a_timeout_returns_at_the_deadline_kills_the_pool_process_and_never_reruns(
    prefork: t.Any, tmp_path: pathlib.Path
) -> None:
    module, executor = prefork
    marker = tmp_path / "runs"
    slow = Tool.from_function(module.hang, timeout=2.0, retries=2, backend="celery")
    began = time.monotonic()
    result = executor.execute(slow, {"marker": str(marker)})
    elapsed = time.monotonic() - began
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout), result
    assert 2.0 <= elapsed < 2.0 + 2.0  # at the deadline, not when the tool would end
    from servers import wait_dead

    pids = [int(p) for p in _lines(marker)]
    assert len(pids) == 1
    assert wait_dead(pids[0], 30), "revoke(terminate=True, signal='SIGKILL') did not kill it"
    # Past the broker's visibility timeout: nothing delivers the message again.
    time.sleep(module.VISIBILITY_TIMEOUT + 2)
    assert len(_lines(marker)) == 1
    # and the worker's pool replaced the killed process: the next call runs
    quick = Tool.from_function(module.add, timeout=5, backend="celery")
    assert executor.execute(quick, {"a": 1, "b": 2}) == Ok(3)
    assert executor.stats()["celery_timed_out"] == 1


@pytest.mark.slow
def test_a_pool_process_that_dies_gives_an_err_naming_it_never_retried(
    prefork: t.Any, tmp_path: pathlib.Path
) -> None:
    module, executor = prefork
    marker = tmp_path / "runs"
    fragile = Tool.from_function(module.crash, timeout=5, retries=2, backend="celery")
    result = executor.execute(fragile, {"marker": str(marker)})
    assert isinstance(result, Err), result
    assert isinstance(result.reason.original_error, ChildProcessDied)
    assert "Celery pool process running tool 'crash' died" in result.reason.message
    assert "WorkerLostError" in result.reason.message
    assert len(_lines(marker)) == 1


@pytest.mark.slow
def test_an_exception_on_the_worker_is_retried_by_the_executor_not_by_celery(
    prefork: t.Any, tmp_path: pathlib.Path
) -> None:
    module, executor = prefork
    marker = tmp_path / "runs"
    failing = Tool.from_function(module.fail, timeout=5, retries=1, backend="celery")
    result = executor.execute(failing, {"marker": str(marker)})
    assert isinstance(result, Err) and isinstance(result.reason.original_error, ValueError)
    assert "boom on the worker" in result.reason.message
    assert len(_lines(marker)) == 2


@pytest.mark.slow
def test_two_prefork_processes_run_two_attempts_at_once(prefork: t.Any) -> None:
    module, executor = prefork
    tool = Tool.from_function(module.describe, timeout=5, backend="celery")
    results = executor.execute_many([(tool, {}) for _ in range(6)], RunContext.new())
    assert all(isinstance(r, Ok) for r in results), results
    assert len({r.value["pid"] for r in results}) >= 1
    assert executor.stats()["celery_completed"] == 6


# -- progress and log lines from the worker (issue 24) -----------------------------------


def reporting(ctx: RunContext) -> str:
    ctx.report_progress(1, 2, "half")
    ctx.log("info", "from the worker", n=1, unsendable=object())
    ctx.report_progress(2, 2, "all")
    return "reported"


def test_a_worker_sends_what_the_tool_reports_through_its_sink_before_the_reply() -> None:
    from nous_tools._engine import _reporting
    from nous_tools._engine._remote import decode, encode, run
    from nous_tools._util._clock import monotonic
    from nous_tools.run_context import with_channel

    tool = Tool.from_function(reporting, timeout=30)
    ctx = RunContext.new()
    listened = with_channel(ctx, _reporting.Channel(lambda event: None))
    sent: list[t.Any] = []
    reply = run(encode(tool, {}, listened, monotonic() + 30, engine="Celery"), sink=sent.append)
    assert decode(reply) == ("returned", "reported")
    assert [event[0] for event in sent] == ["progress", "log", "progress"]
    assert sent[1][2:] == ["info", "from the worker", {"n": 1}]  # JSON-only data crosses
    assert sent[2][2:] == [2, 2, "all"]  # held past the interval: sent before the reply
    # Nobody listening: no "report" flag, nothing sent.
    sent.clear()
    run(encode(tool, {}, ctx, monotonic() + 30, engine="Celery"), sink=sent.append)
    assert sent == []


@pytest.mark.slow
def test_progress_and_log_lines_come_back_from_a_prefork_worker(prefork: t.Any) -> None:
    from nous_tools import signals

    module, executor = prefork
    seen: list[tuple[t.Any, ...]] = []
    me = threading.get_ident()

    def on_progress(sender: t.Any, *, measurements: t.Any, metadata: t.Any) -> None:
        seen.append(("p", metadata["progress"], threading.get_ident() == me))

    def on_log(sender: t.Any, *, measurements: t.Any, metadata: t.Any) -> None:
        seen.append(("l", metadata["message"], metadata["data"]["n"]))

    def on_stop(sender: t.Any, **kwargs: t.Any) -> None:
        seen.append(("stop",))

    signals.tool_progress.connect(on_progress)
    signals.tool_log.connect(on_log)
    signals.tool_execute_stop.connect(on_stop)
    try:
        tool = Tool.from_function(module.count, timeout=5, backend="celery")
        assert executor.execute(tool, {"n": 3}) == Ok("counted to 3")
    finally:
        signals.tool_progress.disconnect(on_progress)
        signals.tool_log.disconnect(on_log)
        signals.tool_execute_stop.disconnect(on_stop)
    assert seen[-1] == ("stop",)
    assert seen[-2] == ("l", "counted on the worker", 3)
    progress = [entry for entry in seen if entry[0] == "p"]
    assert progress[-1] == ("p", 3, True)  # the last, from the caller's thread
    assert all(from_caller for _, _, from_caller in progress)


# -- signed payloads ----------------------------------------------------------------


def test_a_backend_without_a_signing_key_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOUS_TOOLS_CELERY_KEY", raising=False)
    with pytest.raises(ValueError, match="needs a signing key shared with the workers"):
        CeleryBackend(_app(nous_tools_signing_key=None))
    with pytest.raises(ValueError, match="at least 16 characters"):
        CeleryBackend(_app(nous_tools_signing_key="short"))


@pytest.mark.parametrize("how", ["forged", "unsigned", "another key"])
def test_a_worker_refuses_a_payload_it_cannot_verify_and_runs_nothing(
    solo_app: t.Any, how: str
) -> None:
    import base64

    from nous_tools._engine import _remote
    from nous_tools._util._clock import monotonic
    from nous_tools.contrib import celery as module

    CALLS.clear()
    tool = Tool.from_function(recorded, timeout=30)
    request = _remote.encode(tool, {"a": 7, "b": 1}, None, monotonic() + 30, engine="Celery")
    if how == "forged":  # a genuine signature over other bytes
        genuine = module._sign(KEY.encode(), b"something else")
        message = genuine.split(":")[0] + ":" + base64.b64encode(request).decode("ascii")
    elif how == "unsigned":
        message = base64.b64encode(request).decode("ascii")
    else:
        message = module._sign(b"another-key-of-the-attacker", request)
    reply = solo_app.send_task(TASK_NAME, args=(message,)).get(timeout=30)
    payload = module._verified(KEY.encode(), reply)
    assert payload is not None  # the refusal itself is the worker's, signed
    _, value = _remote.decode(payload)
    assert "refused the task: its payload is unsigned or not signed with the worker's key" in str(
        value
    )
    assert CALLS == []
