"""Run timed attempts on Celery's prefork workers, killed at their deadlines.

``pip install 'nous-tools[celery]'``. The Django shop's engine: attempts of the
tools that name this backend run on your Celery workers, the rest of the call
(approval, validation, conversion, retries, signals) stays in the web process.

In the module that makes your Celery app (the one the worker loads with ``-A``),
install the task that runs attempts::

    # proj/celery.py
    from celery import Celery
    from nous_tools.contrib.celery import install

    app = Celery("proj", broker="redis://localhost:6379/0", backend="redis://localhost:6379/1")
    app.conf.worker_prefetch_multiplier = 1
    install(app)

start the workers with the prefork pool (the only pool that can kill a task)::

    celery -A proj worker -P prefork -c 4

and in the web process::

    from nous_tools import ToolExecutor
    from nous_tools.contrib.celery import CeleryBackend
    from proj.celery import app

    executor = ToolExecutor(backends={"celery": CeleryBackend(app)})
    # @tool(timeout=120, backend="celery") on the heavy tools

How an attempt runs, and why:

* One task message per attempt, for the registered task
  ``nous_tools.run_attempt``: **early ack** (``acks_late=False``, whatever the
  app's ``task_acks_late`` says), no ``autoretry_for``, ``max_retries=0``. A task
  killed at its deadline is therefore never delivered again, and Celery never
  retries one: a timeout is terminal.
* It is sent with ``time_limit`` just above the attempt's remaining time
  (``kill_grace`` seconds, default 1, above it): the prefork pool's own hard
  kill, a safety net behind the caller's. And with ``expires`` at the deadline,
  so a message that reaches a worker too late is dropped, not run.
* The caller waits with ``AsyncResult.get(timeout=remaining)``. At the deadline
  it revokes the task with ``terminate=True, signal="SIGKILL"`` (the worker kills
  the pool process running it, or drops it if it has not started) and returns
  ``Err(ToolTimeout)`` at once.
* A pool process that dies (a segfault, ``os._exit``, the OOM killer) gives an
  ``Err`` whose ``original_error`` is a :class:`~nous_tools.ChildProcessDied`
  quoting Celery's ``WorkerLostError``; never retried.
* The worker refuses an attempt (``Err``, nothing run) when its pool is not
  prefork: the solo and thread pools cannot kill a task at its deadline.
* What the tool reports (``ctx.report_progress``, ``ctx.log``) comes back while it
  runs as task states (``REPORT_STATE``) that ``get(on_message=...)`` delivers in
  the caller — with the Redis and RPC result backends, when someone listens.

**The visibility timeout.** With a Redis or SQS broker, a message that a worker
has reserved but not acknowledged is delivered again after the broker's
``visibility_timeout`` (Redis: 3600 s, SQS: 1800 s unless
``broker_transport_options`` says otherwise). Early ack keeps running tasks out
of that window, but a message can wait in a worker's prefetch buffer behind
running tasks, so a tool's timeout must stay below it: ``CeleryBackend`` refuses
to start (``ValueError``) when ``max_timeout`` (the longest tool timeout it will
run) plus ``kill_grace`` exceeds the visibility timeout, and refuses, per call
(``Err``, never sent), a tool whose timeout exceeds ``max_timeout``. Set
``worker_prefetch_multiplier = 1`` as well.

**What travels**: the attempt is pickled (the function by reference: it must be
a module-level function of a module the workers import), sent base64-encoded in
a JSON message, and its reply comes back the same way through the result
backend. **Both are signed** (HMAC-SHA256) with a key the callers and the workers
share: ``app.conf.nous_tools_signing_key`` (or ``$NOUS_TOOLS_CELERY_KEY``, or
``key=`` here and in :func:`install`). A worker refuses a payload that is unsigned,
or signed with another key, before it unpickles anything: the tool does not run,
and the caller gets an ``Err`` saying why; a caller refuses a reply likewise (the
attempt's outcome is then unknown). Whoever can write to the broker can still
replay a payload signed earlier until its deadline; keep the broker and the result
backend private all the same (Redis ``requirepass``/ACLs, TLS, no public port).
"""

from __future__ import annotations

import base64
import collections.abc as c
import hashlib
import hmac
import importlib
import os
import threading
import typing as t
import weakref

from nous_tools._engine import _remote
from nous_tools._engine._isolation import Unpicklable
from nous_tools._util._clock import monotonic
from nous_tools.backend import Outcome, not_sent, raised, returned, shut_down, timed_out
from nous_tools.errors import ChildProcessDied, OutcomeUnknown

if t.TYPE_CHECKING:
    from nous_tools.run_context import RunContext
    from nous_tools.tool import Tool

__all__ = [
    "KEY_SETTING",
    "KEY_VARIABLE",
    "TASK_NAME",
    "CeleryBackend",
    "install",
    "visibility_timeout",
]

#: The name of the task that runs attempts on the workers.
TASK_NAME = "nous_tools.run_attempt"

#: Default visibility timeouts (seconds) of the brokers that redeliver unacknowledged messages.
_VISIBILITY_DEFAULTS = {"redis": 3600.0, "sqs": 1800.0}
_REDIS_SCHEMES = ("redis", "rediss", "sentinel", "redis+socket", "socket")

_in_pool_process = False  # set in each prefork pool process at its start
_worker_pid: int | None = None  # the worker's main process
_installed: weakref.WeakKeyDictionary[t.Any, t.Any] = weakref.WeakKeyDictionary()
_signal_lock = threading.Lock()
_signal_connected = False


def _mark_worker(**_: t.Any) -> None:
    global _worker_pid
    _worker_pid = os.getpid()


def _mark_pool_process(**_: t.Any) -> None:
    global _in_pool_process
    # Prefork sends this in each pool process, a child of the worker; the solo pool
    # sends it in the worker's own process, and the thread pools not at all.
    _in_pool_process = _worker_pid is not None and os.getpid() != _worker_pid


def _connect_pool_signal() -> None:
    """Learn, in each worker process, whether it is a prefork pool process
    (``worker_init`` is sent in the worker's main process, ``worker_process_init``
    in each process of its pool)."""
    global _signal_connected
    with _signal_lock:
        if _signal_connected:
            return
        signals = importlib.import_module("celery.signals")
        signals.worker_init.connect(_mark_worker, weak=False)
        signals.worker_process_init.connect(_mark_pool_process, weak=False)
        _signal_connected = True


#: The setting (``app.conf``) and the environment variable that hold the signing key.
KEY_SETTING = "nous_tools_signing_key"
KEY_VARIABLE = "NOUS_TOOLS_CELERY_KEY"


def _key_of(app: t.Any, given: str | bytes | None) -> bytes | None:
    """The signing key: ``given``, else the app's setting, else the environment's."""
    key: object = given
    if key is None and app is not None:
        key = app.conf.get(KEY_SETTING)
    if key is None:
        key = os.environ.get(KEY_VARIABLE) or None
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes) or len(key) < 16:
        raise ValueError(
            f"the Celery signing key ({KEY_SETTING} or {KEY_VARIABLE}) must be a str or bytes "
            "of at least 16 characters"
        )
    return key


def _sign(key: bytes, payload: bytes) -> str:
    mac = hmac.new(key, payload, hashlib.sha256).digest()
    return f"{base64.b64encode(mac).decode('ascii')}:{base64.b64encode(payload).decode('ascii')}"


def _verified(key: bytes, message: object) -> bytes | None:
    """The payload of a message signed with ``key``; None for any other message."""
    if not isinstance(message, str) or message.count(":") != 1:
        return None
    mac_text, payload_text = message.split(":")
    try:
        mac = base64.b64decode(mac_text, validate=True)
        payload = base64.b64decode(payload_text, validate=True)
    except ValueError:
        return None
    expected = hmac.new(key, payload, hashlib.sha256).digest()
    return payload if hmac.compare_digest(mac, expected) else None


def _run_attempt(request: str, require_prefork: bool = True, key: bytes | None = None) -> str:
    """The task: run one attempt on this worker, if its payload is signed with
    ``key``; the reply, signed too (a refusal unsigned when there is no key)."""
    if key is None:
        reply = _remote._unsent(
            f"the Celery worker has no signing key ({KEY_SETTING} in the app's settings, or "
            f"{KEY_VARIABLE}): it runs no attempt it cannot check"
        )
        return base64.b64encode(reply).decode("ascii")
    payload = _verified(key, request)
    if payload is None:
        reply = _remote._unsent(
            "the Celery worker refused the task: its payload is unsigned or not signed with "
            "the worker's key (a forged task, or callers and workers with other keys); "
            "nothing ran"
        )
    elif require_prefork and not _in_pool_process:
        reply = _remote._unsent(
            "the Celery worker does not run a prefork pool (start it with -P prefork): "
            "its pool cannot kill an attempt at its deadline, so it refuses to run one"
        )
    else:
        reply = _remote.run(payload, sink=_report)
    return _sign(key, reply)


#: The task state that carries one progress or log event of a running attempt.
REPORT_STATE = "NOUS_TOOLS_REPORT"


def _report(event: list[t.Any]) -> None:
    """On the worker: send one of the tool's progress or log events to the caller, as
    a task state (``REPORT_STATE``) the caller's ``result.get(on_message=...)`` sees."""
    task = importlib.import_module("celery").current_task
    if task is not None and task.request.id:
        task.update_state(state=REPORT_STATE, meta={"event": event})


def install(app: t.Any, *, require_prefork: bool = True, key: str | bytes | None = None) -> t.Any:
    """Register the task that runs attempts (:data:`TASK_NAME`) on ``app`` and
    return it; call it where the workers load the app. Idempotent.

    ``key`` is the signing key shared with the callers (default: the app's
    ``nous_tools_signing_key`` setting, else ``$NOUS_TOOLS_CELERY_KEY``, read when
    the first task runs); a worker without one refuses every attempt.

    The task acknowledges early (``acks_late=False``), is never retried
    (``max_retries=0``, no ``autoretry_for``) and, unless ``require_prefork`` is
    false (tests on the in-memory broker's solo pool), refuses to run outside a
    prefork pool process.
    """
    _connect_pool_signal()
    with _signal_lock:
        existing = _installed.get(app)
        if existing is not None:
            return existing
        task = _register(app, require_prefork, key)
        _installed[app] = task
        return task


def _register(app: t.Any, require_prefork: bool, given: str | bytes | None) -> t.Any:
    keys: list[bytes | None] = []

    def run_attempt(request: str) -> str:
        if not keys:  # read once, when the worker runs its first task (settings loaded)
            keys.append(_key_of(app, given))
        return _run_attempt(request, require_prefork, keys[0])

    run_attempt.__module__ = __name__
    run_attempt.__qualname__ = "run_attempt"
    return app.task(
        name=TASK_NAME,
        acks_late=False,
        reject_on_worker_lost=False,
        max_retries=0,
        autoretry_for=(),
        typing=False,
        ignore_result=False,
        track_started=False,
        shared=False,
    )(run_attempt)


def _scheme(url: object) -> str:
    if isinstance(url, (list, tuple)):
        url = url[0] if url else None
    if not isinstance(url, str) or "://" not in url:
        return ""
    return url.split("://", 1)[0].lower()


def visibility_timeout(app: t.Any) -> tuple[str, float] | None:
    """``(broker, seconds)`` for a broker that redelivers unacknowledged messages
    after a visibility timeout (Redis, SQS), from ``broker_transport_options``
    or the broker's default; None for other brokers."""
    conf = app.conf
    scheme = _scheme(conf.broker_url) or str(conf.broker_transport or "").lower()
    if scheme in _REDIS_SCHEMES:
        broker = "redis"
    elif scheme == "sqs":
        broker = "sqs"
    else:
        return None
    options = conf.broker_transport_options or {}
    value = options.get("visibility_timeout", _VISIBILITY_DEFAULTS[broker])
    return broker, float(value)


def _check_app(app: t.Any) -> None:
    """Refuse an app whose attempts would run with no deadline or whose replies
    would have nowhere to go (``ValueError``)."""
    conf = app.conf
    if conf.task_always_eager:
        raise ValueError(
            "CeleryBackend refuses an app with task_always_eager: eager tasks run in the "
            "caller, with no deadline and nothing to kill"
        )
    backend = conf.result_backend
    if not backend or str(backend).startswith("disabled"):
        raise ValueError(
            "CeleryBackend needs a result backend (Celery(..., backend='redis://...')): "
            "the caller waits for each attempt's reply there"
        )


def _max_timeout(app: t.Any, max_timeout: float | None, kill_grace: float) -> float | None:
    """The longest tool timeout a backend on ``app`` runs: ``max_timeout`` checked
    against the broker's visibility timeout (a message waiting longer is delivered
    again), or, when not given, that timeout less ``kill_grace`` (None: no limit)."""
    visibility = visibility_timeout(app)
    if max_timeout is not None:
        if isinstance(max_timeout, bool) or not isinstance(max_timeout, (int, float)):
            raise TypeError(
                f"CeleryBackend option 'max_timeout' must be seconds, got {max_timeout!r}"
            )
        if max_timeout <= 0:
            raise ValueError(
                f"CeleryBackend option 'max_timeout' must be > 0 s, got {max_timeout!r}"
            )
    if visibility is not None:
        broker, seconds = visibility
        if max_timeout is None:
            max_timeout = seconds - kill_grace
            if max_timeout <= 0:
                raise ValueError(
                    f"CeleryBackend refuses to start: the {broker} broker's "
                    f"visibility_timeout ({seconds:g} s) leaves no time for a tool"
                )
        elif max_timeout + kill_grace > seconds:
            raise ValueError(
                f"CeleryBackend refuses to start: the {broker} broker's visibility_timeout "
                f"({seconds:g} s) is shorter than the longest tool timeout it would run "
                f"(max_timeout={max_timeout:g} s, plus kill_grace={kill_grace:g} s): a "
                "message waiting longer than that is delivered again and runs twice. Raise "
                "broker_transport_options['visibility_timeout'] or lower max_timeout"
            )
    return max_timeout


class CeleryBackend:
    """A :class:`~nous_tools.backend.Backend` that runs each attempt as a Celery task
    on a prefork worker, revoked with ``SIGKILL`` at its deadline.

    ``app`` is your Celery app (with a broker and a result backend; not
    ``task_always_eager``). ``max_timeout`` is the longest tool timeout this
    backend runs (default: the broker's visibility timeout less ``kill_grace``,
    or no limit for brokers without one). ``kill_grace`` (default 1 s) is how far
    above the attempt's remaining time the task's ``time_limit`` is set.
    ``queue`` routes the tasks (default: the app's routing). ``poll_interval`` is
    how often a result backend that is polled (a database) is read; Redis pushes.

    Raises ``ValueError`` (refuses to start) when the app cannot honour the
    deadlines: no result backend, ``task_always_eager``, or a visibility timeout
    shorter than ``max_timeout + kill_grace``.
    """

    def __init__(
        self,
        app: t.Any,
        *,
        max_timeout: float | None = None,
        kill_grace: float = 1.0,
        queue: str | None = None,
        poll_interval: float = 0.05,
        key: str | bytes | None = None,
    ) -> None:
        for option, value in (("kill_grace", kill_grace), ("poll_interval", poll_interval)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"CeleryBackend option {option!r} must be > 0 s, got {value!r}")
        _check_app(app)
        max_timeout = _max_timeout(app, max_timeout, kill_grace)
        signing_key = _key_of(app, key)
        if signing_key is None:
            raise ValueError(
                "CeleryBackend needs a signing key shared with the workers, so that a "
                "worker runs only what a caller sent: app.conf.nous_tools_signing_key = "
                f"'<a long random string>' (or ${KEY_VARIABLE}, or key=...)"
            )
        self._key = signing_key
        self.app = app
        self.max_timeout = float(max_timeout) if max_timeout is not None else None
        self.kill_grace = float(kill_grace)
        self.queue = queue
        self.poll_interval = float(poll_interval)
        self._task = install(app)
        exceptions = importlib.import_module("celery.exceptions")
        billiard = importlib.import_module("billiard.exceptions")
        self._get_timeout = exceptions.TimeoutError
        self._revoked = exceptions.TaskRevokedError
        self._lost = billiard.WorkerLostError
        self._time_limit = billiard.TimeLimitExceeded
        self._tally = _remote.Tally()
        self._count = self._tally.count

    def run(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any] | None,
        deadline: float,
    ) -> Outcome:
        """Run one attempt as a Celery task; revoke it with ``SIGKILL`` at
        ``deadline``. See :meth:`nous_tools.backend.Backend.run`."""
        if self._tally.closed:
            return shut_down()
        limit = self.max_timeout
        if limit is not None and tool.timeout is not None and tool.timeout > limit:
            self._count("not_sent")
            return not_sent(
                f"its timeout ({tool.timeout:g} s) is longer than this CeleryBackend runs "
                f"(max_timeout={limit:g} s, below the broker's visibility_timeout)"
            )
        try:
            request = _remote.encode(tool, arguments, ctx, deadline, engine="Celery")
        except Unpicklable as exc:
            self._count("not_sent")
            return not_sent(str(exc))
        remaining = deadline - monotonic()
        if remaining <= 0:
            self._count("timed_out")
            return timed_out()
        options: dict[str, t.Any] = {
            "time_limit": remaining + self.kill_grace,
            "expires": remaining,
            "serializer": "json",
        }
        if self.queue is not None:
            options["queue"] = self.queue
        try:
            result = self._task.apply_async((_sign(self._key, request),), **options)
        except Exception as exc:
            self._count("not_sent")
            return not_sent(f"Celery could not send the task: {type(exc).__name__}: {exc}")
        self._count("submitted", running=1)
        return self._wait(tool, ctx, result, deadline)

    def _wait(
        self, tool: Tool, ctx: RunContext[t.Any] | None, result: t.Any, deadline: float
    ) -> Outcome:
        """Wait for the sent task's reply until ``deadline``, killing the task when
        the caller stops waiting (a deadline, a failed broker, Ctrl-C)."""
        try:
            reply = result.get(
                timeout=max(0.0, deadline - monotonic()),
                interval=self.poll_interval,
                on_message=self._reports(ctx, result),
            )
        except self._get_timeout:
            self._kill(result)
            self._count("timed_out", running=-1)
            return timed_out()
        except (self._time_limit, self._revoked):  # killed or dropped: the deadline passed
            self._count("timed_out", running=-1)
            return timed_out()
        except self._lost as exc:
            self._count("died", running=-1)
            return raised(
                ChildProcessDied(
                    f"the Celery pool process running tool '{tool.name}' died: "
                    f"{type(exc).__name__}: {exc}"
                )
            )
        except Exception as exc:  # the broker or the result backend failed
            self._kill(result)
            self._count("not_sent", running=-1)
            return not_sent(f"Celery could not run the attempt: {type(exc).__name__}: {exc}")
        except BaseException:  # Ctrl-C in the caller: kill it as at a deadline
            self._kill(result)
            self._count("timed_out", running=-1)
            raise
        self._count("completed", running=-1)
        return self._read_reply(tool, reply)

    def _read_reply(self, tool: Tool, reply: t.Any) -> Outcome:
        """The outcome in a worker's ``reply``, read only when it bears this
        backend's signature."""
        payload = _verified(self._key, reply)
        if payload is None:  # not the worker's: never unpickled
            return raised(
                OutcomeUnknown(
                    f"Tool '{tool.name}': the Celery reply is not signed with this backend's "
                    "key (a worker with another key, or a forged reply): it was not read, "
                    "and the attempt's outcome is unknown",
                    tool_name=tool.name,
                )
            )
        try:
            kind, value = _remote.decode(payload)
        except Exception as exc:
            return not_sent(
                f"the Celery reply could not be read ({type(exc).__name__}: {exc}): is the "
                f"worker running {TASK_NAME!r} from nous_tools.contrib.celery.install?"
            )
        if kind == "returned":
            return returned(value)
        return (kind, value, None)

    @staticmethod
    def _reports(ctx: RunContext[t.Any] | None, result: t.Any) -> t.Any:
        """The ``on_message`` that turns the attempt's report states into its
        progress and log lines (in this thread, the caller's), when someone listens
        and the result backend can say (Redis and RPC backends: see
        ``docs/how-to/progress.md``); else None."""
        channel = ctx._channel if ctx is not None else None
        if channel is None or not getattr(result.backend, "is_async", False):
            return None
        from nous_tools._engine._reporting import Channel, replay

        def on_message(message: t.Any) -> None:
            if isinstance(message, dict) and message.get("status") == REPORT_STATE:
                meta = message.get("result")
                if isinstance(meta, dict):
                    replay(t.cast("Channel", channel), meta.get("event"))

        return on_message

    def _kill(self, result: t.Any) -> None:
        """Revoke the task: the worker kills the pool process running it (SIGKILL),
        or drops the task if it has not started."""
        try:
            result.revoke(terminate=True, signal="SIGKILL")
        except Exception:
            from nous_tools._util._log import log

            log.warning("nous_tools: could not revoke Celery task %s", result.id, exc_info=True)

    def stats(self) -> dict[str, int]:
        """``submitted``, ``completed``, ``timed_out`` (revoked with SIGKILL at the
        deadline), ``died`` (pool processes lost), ``not_sent`` (refused before
        sending, or the broker/result backend failed), ``running``."""
        return self._tally.snapshot()

    def shutdown(self, wait: bool = True) -> None:
        """Send no more attempts; with ``wait``, wait for those under way (each ends
        by its deadline). The workers and the app are yours: left as they are."""
        self._tally.close(wait)

    def __repr__(self) -> str:
        return f"<CeleryBackend app={self.app.main!r} max_timeout={self.max_timeout}>"
