"""Run timed attempts as Ray tasks, killed at their deadlines.

``pip install 'nous-tools[ray]'``, then give the executor a Ray backend and name
it on the tools that should run there::

    from nous_tools import ToolExecutor, tool
    from nous_tools.contrib.ray import RayBackend

    @tool(timeout=60, backend="ray")
    def embed(texts: list[str]) -> list[list[float]]:
        ...  # CPU-heavy: runs on a Ray worker

    @tool(timeout=5)
    def lookup(key: str) -> str:
        ...  # cheap: stays in the caller's worker threads

    executor = ToolExecutor(backends={"ray": RayBackend(num_cpus=1)})

Each attempt is one ``ray.remote`` task (``max_retries=0``,
``retry_exceptions=False``: Ray never runs it again, not after a worker crash nor
to rebuild a lost result). The caller waits with ``ray.get(ref, timeout=...)``
until the attempt's deadline; at the deadline it calls
``ray.cancel(ref, force=True)``, which kills the worker process running it (or
drops the task if it has not started), and returns ``Err(ToolTimeout)`` at once.
A worker that dies (a segfault, ``os._exit``, the out-of-memory killer) gives an
``Err`` whose ``original_error`` is a :class:`~nous_tools.ChildProcessDied` naming
Ray's error; like a timeout it is never retried.

Approval, validation, conversion, retries and every signal stay in the caller's
process; only the attempt travels. The tool's function, its arguments and the
context's ``deps``, ``usage`` and ``sandbox`` are pickled (Ray's cloudpickle, so
closures and functions of ``__main__`` travel by value); what cannot be pickled
gives an ``Err`` naming it, and the task is never submitted. On the worker
``ctx.retry`` and ``ctx.deadline`` are the caller's (the deadline moved to the
worker's clock), and ``ctx.cancelled`` reads as set from the deadline on.

Ray must be started: by you (``ray.init(...)`` before the first call), or by the
backend at its first attempt (``ray.init(address=address)``; it then shuts Ray
down in its own ``shutdown``). ``remote_options`` are passed to the task's
``.options(...)``: ``num_cpus``, ``num_gpus``, ``memory``, ``resources``,
``runtime_env``, ``scheduling_strategy``; ``max_retries`` and
``retry_exceptions`` are refused (Ray must never re-run an attempt).

The cost per call: a trivial tool through the executor costs about as much as a
bare ``ray.get(f.remote())`` — 0.92x to 1.07x in three runs of
``benchmarks/backends.py`` on a 2-core machine (1.5 to 1.9 ms each): Ray's own round
trip dominates; the executor, the pickling and the signals add about 0.1 ms. See
``docs/how-to/scale-out.md``.
"""

from __future__ import annotations

import collections.abc as c
import contextlib
import importlib
import threading
import typing as t

from nous_tools._engine import _remote
from nous_tools._engine._isolation import Unpicklable
from nous_tools._util._clock import monotonic
from nous_tools._util._log import log as _log
from nous_tools.backend import Outcome, not_sent, raised, returned, shut_down, timed_out
from nous_tools.errors import ChildProcessDied

if t.TYPE_CHECKING:
    from nous_tools.run_context import RunContext
    from nous_tools.tool import Tool

__all__ = ["RayBackend"]

#: Options that would let Ray run an attempt twice.
_FORBIDDEN = ("max_retries", "retry_exceptions")

_function_lock = threading.Lock()
_remote_function: t.Any = None


def _ray() -> t.Any:
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ImportError("RayBackend needs Ray: pip install 'nous-tools[ray]'") from exc


def run_attempt(request: bytes) -> bytes:
    """The body of the Ray task: run one attempt on the worker (never raises for
    anything the tool does)."""
    cloudpickle = importlib.import_module("ray.cloudpickle")
    return _remote.run(request, cloudpickle.dumps)


def _task(ray: t.Any) -> t.Any:
    """The remote function, made once per process."""
    global _remote_function
    with _function_lock:
        if _remote_function is None:
            _remote_function = ray.remote(max_retries=0, retry_exceptions=False)(run_attempt)
        return _remote_function


class RayBackend:
    """A :class:`~nous_tools.backend.Backend` that runs each attempt as a Ray task.

    ``address`` is passed to ``ray.init`` when Ray is not running at the first
    attempt (None: a local Ray, or the cluster ``RAY_ADDRESS`` names);
    ``remote_options`` go to the task's ``.options(...)``.
    """

    def __init__(self, address: str | None = None, **remote_options: t.Any) -> None:
        bad = [name for name in _FORBIDDEN if name in remote_options]
        if bad:
            raise ValueError(
                f"RayBackend option(s) {', '.join(bad)} refused: an attempt runs once, and "
                "the executor decides about retries (a timed-out attempt is never re-run)"
            )
        self._ray = _ray()
        self.address = address
        self.remote_options = dict(remote_options)
        task = _task(self._ray)
        # .options() checks the options now, not at the first call
        self._function = task.options(**self.remote_options) if self.remote_options else task
        self._tally = _remote.Tally()
        self._count = self._tally.count
        self._started_ray = False
        ray = self._ray
        exceptions = ray.exceptions
        self._timeout_error = exceptions.GetTimeoutError
        self._died_errors = tuple(
            getattr(exceptions, name)
            for name in (
                "WorkerCrashedError",
                "OutOfMemoryError",
                "NodeDiedError",
                "ObjectLostError",
                "ActorDiedError",
            )
            if hasattr(exceptions, name)
        )
        self._ray_error = exceptions.RayError

    # -- running -----------------------------------------------------------------

    def _ensure_ray(self) -> str | None:
        """Start Ray if it is not running; a message when it cannot be."""
        ray = self._ray
        if ray.is_initialized():
            return None
        with self._tally.lock:
            if ray.is_initialized():
                return None
            try:
                ray.init(address=self.address)
            except Exception as exc:
                return f"Ray could not be started (ray.init(address={self.address!r})): {exc}"
            self._started_ray = True
        return None

    def run(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any],
        ctx: RunContext[t.Any] | None,
        deadline: float,
    ) -> Outcome:
        """Run one attempt as a Ray task; cancel it with ``force=True`` (killing its
        worker) at ``deadline``. See :meth:`nous_tools.backend.Backend.run`."""
        if self._tally.closed:
            return shut_down()
        try:
            request = _remote.encode(
                tool,
                arguments,
                ctx,
                deadline,
                engine="Ray",
                by_value=importlib.import_module("ray.cloudpickle").dumps,
            )
        except Unpicklable as exc:
            self._count("not_sent")
            return not_sent(str(exc))
        problem = self._ensure_ray()
        if problem is not None:
            self._count("not_sent")
            return not_sent(problem)
        remaining = deadline - monotonic()
        if remaining <= 0:
            self._count("timed_out")
            return timed_out()
        try:
            ref = self._function.remote(request)
        except Exception as exc:
            self._count("not_sent")
            return not_sent(f"Ray refused the task: {type(exc).__name__}: {exc}")
        self._count("submitted", running=1)
        return self._wait(tool, ref, deadline)

    def _wait(self, tool: Tool, ref: t.Any, deadline: float) -> Outcome:
        """Wait for the submitted task's reply until ``deadline``, cancelling it (its
        worker killed) when the caller stops waiting (the deadline, Ctrl-C)."""
        try:
            reply = self._ray.get(ref, timeout=max(0.0, deadline - monotonic()))
        except self._timeout_error:
            self._cancel(ref)
            self._count("timed_out", running=-1)
            return timed_out()
        except self._died_errors as exc:
            self._count("died", running=-1)
            return raised(
                ChildProcessDied(
                    f"the Ray worker running tool '{tool.name}' died: "
                    f"{type(exc).__name__}: {_first_line(exc)}"
                )
            )
        except self._ray_error as exc:  # cancelled by someone else, a system error, ...
            self._count("not_sent", running=-1)
            if monotonic() >= deadline:
                return timed_out()
            return not_sent(f"Ray could not run the attempt: {type(exc).__name__}: {exc}")
        except BaseException:  # Ctrl-C in the caller: kill it as at a deadline
            self._cancel(ref)
            self._count("timed_out", running=-1)
            raise
        self._count("completed", running=-1)
        kind, value = _remote.decode(reply)
        if kind == "returned":
            return returned(value)
        return (kind, value, None)

    def _cancel(self, ref: t.Any) -> None:
        """Kill the worker running ``ref`` (or drop the task if it has not started)."""
        try:
            self._ray.cancel(ref, force=True)
        except Exception:
            _log.warning("nous_tools: ray.cancel(force=True) failed", exc_info=True)

    # -- state -------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """``submitted`` (tasks sent to Ray), ``completed`` (answered), ``timed_out``
        (cancelled at the deadline, their workers killed), ``died`` (workers that
        died), ``not_sent`` (refused before submission, or that Ray could not run),
        ``running`` (waited for now)."""
        return self._tally.snapshot()

    def shutdown(self, wait: bool = True) -> None:
        """Run no more attempts. With ``wait``, wait for those under way (each ends by
        its deadline); then, if this backend started Ray, shut Ray down. Idempotent."""
        running = self._tally.close(wait)
        with self._tally.lock:
            started, self._started_ray = self._started_ray, False
        if started and not running:
            with contextlib.suppress(Exception):
                self._ray.shutdown()

    def __repr__(self) -> str:
        return f"<RayBackend address={self.address!r} options={self.remote_options!r}>"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
