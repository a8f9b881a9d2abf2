"""``isolation="process"``: one attempt in a child process, killed at its deadline (private).

A thread cannot be killed in CPython; a process can. Each attempt of a
process-isolated tool runs in a fresh child started by the standard library's
``multiprocessing`` with the ``forkserver`` method (``spawn`` where there is no
forkserver). The child is killed (``SIGKILL``) when the deadline passes, so a
side effect the tool would have done later never happens. Start-up counts
inside the deadline.

Why the standard library and not pebble: the one thing needed is "start a
child, wait with a timeout, kill it", which ``multiprocessing`` does in a few
lines without another dependency, and a killed child must be replaced anyway.
``forkserver`` (not ``fork``) because the parent is multi-threaded: forking it
could copy a lock another thread holds. Like ``spawn``, it re-imports the main
module in the child, so a script must guard its work with
``if __name__ == "__main__":``.

What crosses to the child must pickle: the tool's function (a module-level
function, or a module-level ``@tool``), the arguments, and the context's
``deps``, ``usage`` and ``sandbox``. The approval handler does not cross (the
approval step already ran in the parent). What comes back must pickle too.
"""

from __future__ import annotations

import collections.abc as c
import importlib
import multiprocessing
import multiprocessing.connection
import pickle
import threading
import typing as t

from ._clock import monotonic
from ._pool import RAISED, RETURNED, TIMED_OUT

if t.TYPE_CHECKING:
    from .run_context import RunContext
    from .tool import Tool

__all__ = ["UNPICKLABLE", "run_in_process"]

#: Outcome kind: something that had to cross the process boundary did not pickle.
UNPICKLABLE = "unpicklable"

_context_lock = threading.Lock()
_mp_context: t.Any = None


def _get_context() -> t.Any:
    global _mp_context
    with _context_lock:
        if _mp_context is None:
            methods = multiprocessing.get_all_start_methods()
            method = "forkserver" if "forkserver" in methods else "spawn"
            _mp_context = multiprocessing.get_context(method)
        return _mp_context


class _ToolRef:
    """A module-level ``@tool``, pickled by its import path."""

    def __init__(self, module: str, qualname: str) -> None:
        self.module = module
        self.qualname = qualname

    def resolve(self) -> c.Callable[..., t.Any]:
        target: t.Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            target = getattr(target, part)
        return t.cast(c.Callable[..., t.Any], getattr(target, "function", target))


def _function_payload(tool: Tool) -> object:
    function = tool.function
    try:
        pickle.dumps(function)
        return function
    except Exception:
        pass
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<locals>" not in qualname:
        ref = _ToolRef(module, qualname)
        try:
            target: t.Any = importlib.import_module(module)
            for part in qualname.split("."):
                target = getattr(target, part)
        except Exception:
            target = None
        if target is tool or target is function:
            return ref
    raise pickle.PicklingError(
        f"the function {getattr(function, '__qualname__', function)!r} cannot be pickled "
        "(a process-isolated tool must be a module-level function)"
    )


def _child(
    conn: multiprocessing.connection.Connection,
    function: object,
    arguments: dict[str, t.Any],
    ctx_fields: dict[str, t.Any] | None,
) -> None:
    try:
        fn = function.resolve() if isinstance(function, _ToolRef) else function
        if ctx_fields is not None:
            from .run_context import RunContext

            value = t.cast(c.Callable[..., t.Any], fn)(RunContext(**ctx_fields), **arguments)
        else:
            value = t.cast(c.Callable[..., t.Any], fn)(**arguments)
        message: tuple[str, t.Any] = (RETURNED, value)
    except BaseException as exc:
        message = (RAISED, exc)
    try:
        conn.send(message)
    except Exception as exc:
        what = "result" if message[0] == RETURNED else "exception"
        conn.send((UNPICKLABLE, f"the tool's {what} cannot be pickled: {exc}"))
    finally:
        conn.close()


def run_in_process(
    tool: Tool,
    arguments: c.Mapping[str, t.Any],
    ctx: RunContext[t.Any] | None,
    deadline: float,
) -> tuple[str, t.Any]:
    """Run one attempt of ``tool`` in a child process; kill it at ``deadline``.

    Returns ``(kind, value)`` like the thread pool, with the extra kind
    :data:`UNPICKLABLE` (value: a message naming what did not pickle).
    """
    try:
        function = _function_payload(tool)
        args = dict(arguments)
        pickle.dumps(args)
        ctx_fields = None
        if ctx is not None:
            ctx_fields = {
                "deps": ctx.deps,
                "retry": ctx.retry,
                "usage": ctx.usage,
                "approval_gated": ctx.approval_gated,
                "sandbox": ctx.sandbox,
                "deadline": ctx.deadline,
            }
            try:
                pickle.dumps(ctx_fields)
            except Exception as exc:
                raise pickle.PicklingError(f"the context's deps cannot be pickled: {exc}") from exc
    except Exception as exc:
        detail = str(exc)
        if "cannot be pickled" not in detail:
            detail = f"the arguments cannot be pickled: {exc}"
        return UNPICKLABLE, detail
    mp = _get_context()
    receiver, sender = mp.Pipe(duplex=False)
    process = mp.Process(
        target=_child,
        args=(sender, function, args, ctx_fields),
        name=f"nous-tools-{tool.name}",
        daemon=True,
    )
    try:
        process.start()
        sender.close()
        remaining = deadline - monotonic()
        if remaining > 0 and receiver.poll(remaining):
            try:
                kind, value = receiver.recv()
            except EOFError:
                process.join(1.0)
                return RAISED, RuntimeError(
                    f"the child process exited with code {process.exitcode} without a result"
                )
            process.join(1.0)
            return kind, value
        process.kill()
        process.join(1.0)
        return TIMED_OUT, None
    except BaseException:
        if process.is_alive():
            process.kill()
        raise
    finally:
        receiver.close()
