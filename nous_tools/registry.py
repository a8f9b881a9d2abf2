"""``Registry``: tools by name, approval levels, "needs approval" answers and advice.

This is Minga's execution path (``MingaAgent.Tool.Executor``) on top of the
:class:`~nous_tools.ToolExecutor` pipeline: look the tool up by name, check its
approval level, wrap the call in the registry's :class:`~nous_tools.Advice`,
and run it through the executor (validation, retries, deadlines, signals — the
same pipeline, never a second copy of it).

>>> from nous_tools import NeedsApproval, Registry, Tool
>>> registry = Registry()
>>> @registry.register
... @Tool.from_function
... def echo(text: str) -> str:
...     '''Say it back.'''
...     return text
>>> registry.execute("echo", {"text": "hi"})
Ok(value='hi', update=None)
>>> registry.execute("nope", {}).reason.message
"Tool 'nope' not found"
>>> delete = registry.register(Tool.from_function(lambda path: f"deleted {path}",
...                                               name="delete", approval="ask"))
>>> pending = registry.execute("delete", {"path": "/tmp/x"})
>>> isinstance(pending, NeedsApproval), pending.arguments
(True, {'path': '/tmp/x'})
>>> registry.execute_approved(pending).value      # after a person said yes
'deleted /tmp/x'

``execute`` never raises: every failure is an ``Err``.
"""

from __future__ import annotations

import collections.abc as c
import threading
import typing as t

import attrs

from . import executor as _executor_module
from ._log import log as _safe_log
from ._text import safe_str as _safe_str
from .advice import Advice
from .errors import ToolCancelled, ToolDenied, ToolError, ToolNotFound
from .executor import ToolCall, ToolExecutor, _arguments_error, default_executor
from .results import Err, NeedsApproval, Result
from .run_context import RunContext
from .tool import Tool

__all__ = ["Registry"]

_log = _safe_log

#: What the registry path returns: an ``Ok``, an ``Err`` or a ``NeedsApproval``.
RegistryResult = t.Union[Result, NeedsApproval]  # noqa: UP007  (a runtime alias)

_GATED_CONTEXT: RunContext[t.Any] = RunContext(approval_gated=True)


def _internal_error(name: object, exc: BaseException) -> Err:
    shown = name if isinstance(name, str) else "unknown"
    _log.error("Internal error while executing tool '%s' by name", shown, exc_info=True)
    return Err(
        ToolError(
            f"Tool '{shown}' could not be executed: internal error "
            f"{type(exc).__name__}: {_safe_str(exc)}",
            tool_name=shown,
            original_error=exc,
        )
    )


def _not_found(name: object) -> Err:
    return Err(ToolNotFound(name if isinstance(name, str) else repr(name)))


def _gated(ctx: RunContext[t.Any] | None) -> RunContext[t.Any] | None:
    """``ctx`` with ``approval_gated=True`` (what ``execute_approved`` runs with)."""
    if ctx is None:
        return _GATED_CONTEXT
    if isinstance(ctx, RunContext) and not ctx.approval_gated:
        return attrs.evolve(ctx, approval_gated=True)
    return ctx  # already gated, or not a RunContext: the executor reports that


class Registry:
    """Tools by name. Thread-safe; reads take no lock.

    ``tools`` are registered at once. ``executor`` is the :class:`ToolExecutor`
    that runs calls (default: the process-wide :func:`default_executor`, looked up
    at call time). ``advice`` is the :class:`Advice` table (default: a new one,
    so each registry has its own); it is ``registry.advice``.

    Writes take a lock and publish a new dict (copy-on-write), so a reader always
    sees a complete table, without locking.
    """

    def __init__(
        self,
        tools: c.Iterable[Tool | c.Callable[..., t.Any]] = (),
        *,
        executor: ToolExecutor | None = None,
        advice: Advice | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._tools: dict[str, Tool] = {}
        self._executor = executor
        #: The advice table of this registry.
        self.advice: Advice = advice if advice is not None else Advice()
        for tool in tools:
            self.register(tool)

    # -- the table --------------------------------------------------------------

    @property
    def executor(self) -> ToolExecutor:
        """The executor calls run on (the default executor unless one was given)."""
        return self._executor if self._executor is not None else default_executor()

    @executor.setter
    def executor(self, value: ToolExecutor | None) -> None:
        self._executor = value

    def register(self, tool: Tool | c.Callable[..., t.Any]) -> Tool:
        """Add ``tool`` (a plain function is made a :class:`Tool` with
        :meth:`Tool.from_function`), replacing any tool of the same name, and return
        it — so ``@registry.register`` works as a decorator."""
        if not isinstance(tool, Tool):
            tool = Tool.from_function(tool)
        with self._lock:
            tools = dict(self._tools)
            tools[tool.name] = tool
            self._tools = tools
        return tool

    def unregister(self, name: str) -> Tool | None:
        """Remove the tool called ``name``; return it, or None when there was none."""
        with self._lock:
            if name not in self._tools:
                return None
            tools = dict(self._tools)
            removed = tools.pop(name)
            self._tools = tools
        return removed

    def lookup(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        try:
            return self._tools.get(name)
        except TypeError:  # an unhashable "name"
            return None

    def all(self) -> list[Tool]:
        """Every registered tool, sorted by name."""
        tools = self._tools
        return [tools[name] for name in sorted(tools)]

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._tools)

    def __contains__(self, item: object) -> bool:
        """``name in registry``; ``tool in registry`` is True when that very tool is
        the one registered under its name."""
        if isinstance(item, Tool):
            return self._tools.get(item.name) is item
        try:
            return item in self._tools
        except TypeError:
            return False

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> c.Iterator[Tool]:
        """The tools, sorted by name."""
        return iter(self.all())

    def __repr__(self) -> str:
        return f"<Registry tools={self.names()!r}>"

    # -- execution --------------------------------------------------------------

    def execute(
        self,
        name: str,
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
    ) -> RegistryResult:
        """Run the tool called ``name``; never raises.

        Unknown name → ``Err(ToolNotFound)``; approval ``"deny"`` →
        ``Err(ToolDenied)``; ``"ask"`` → ``NeedsApproval(tool, arguments)`` without
        running it, unless ``ctx`` is ``approval_gated`` or has an
        ``approval_handler``, in which case the executor's approval step decides;
        ``"auto"`` → the executor runs it. The advice of ``name`` wraps the executor
        call. ``call_id`` reaches an approval handler as ``ApprovalRequest.id``.
        """
        try:
            tool = self._tools.get(name)
        except TypeError:  # an unhashable "name"
            return _not_found(name)
        try:
            if tool is None:
                return _not_found(name)
            if tool.approval != "auto":
                return self._dispatch(tool, arguments, ctx, call_id)
            executor = self._executor
            if executor is None:
                executor = _executor_module._default or default_executor()
            if name in self.advice._chains:  # the one dict lookup of an unadvised call
                return self._advised(executor.execute, tool, arguments, ctx, call_id)
            return executor.execute(tool, arguments, ctx, call_id=call_id)
        except (KeyboardInterrupt, ToolCancelled):
            raise
        except BaseException as exc:
            return _internal_error(name, exc)

    def execute_approved(
        self,
        tool: Tool | str | NeedsApproval,
        arguments: c.Mapping[str, t.Any] | RunContext[t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
    ) -> Result:
        """Run a call that a person (or the caller) has approved; never raises.

        ``tool`` is a :class:`Tool`, a registered name, or a :class:`NeedsApproval`
        (then the arguments are its own: ``execute_approved(na)`` or
        ``execute_approved(na, ctx)``). There is no approval check at all — even a
        ``"deny"`` tool runs, as in Minga — and the tool sees
        ``ctx.approval_gated == True``. Advice applies. A ``NeedsApproval`` is
        refused (``Err``) when its arguments no longer match its fingerprint, or when
        the tool registered under its name is no longer the tool it names.
        """
        try:
            if isinstance(tool, NeedsApproval):
                if isinstance(arguments, RunContext) and ctx is None:
                    ctx, arguments = arguments, None
                checked = self._check_approved(tool, arguments)
                if isinstance(checked, Err):
                    return checked
                target, arguments = tool.tool, tool.arguments
            elif isinstance(tool, Tool):
                target = tool
            else:
                found = self.lookup(tool) if isinstance(tool, str) else None
                if found is None:
                    if not isinstance(tool, str):
                        return Err(
                            ToolError(
                                "execute_approved expects a Tool, a tool name or a "
                                f"NeedsApproval, got {type(tool).__name__}"
                            )
                        )
                    return _not_found(tool)
                target = found
            if isinstance(arguments, RunContext):
                return Err(
                    ToolError(
                        "execute_approved got a RunContext as arguments; pass it as ctx",
                        tool_name=target.name,
                    )
                )
            executor = self._executor
            if executor is None:
                executor = default_executor()
            gated = _gated(ctx)
            if target.name in self.advice._chains:
                return t.cast(
                    Result,
                    self._advised(executor.execute_approved, target, arguments, gated, call_id),
                )
            return executor.execute_approved(target, arguments, gated, call_id=call_id)
        except (KeyboardInterrupt, ToolCancelled):
            raise
        except BaseException as exc:
            return _internal_error(getattr(tool, "name", tool), exc)

    def execute_many(
        self,
        calls: c.Iterable[tuple[str | Tool, c.Mapping[str, t.Any] | None] | ToolCall],
        ctx: RunContext[t.Any] | None = None,
    ) -> list[RegistryResult]:
        """Run several calls concurrently through the registry path; results come
        back in input order (``Ok``, ``Err`` or ``NeedsApproval`` each), and one
        call's failure never affects another's.

        A call is a ``(name, arguments)`` pair (a :class:`Tool` in place of the name
        is run as given) or a :class:`ToolCall`, whose ``id`` reaches an approval
        handler as ``ApprovalRequest.id``.
        """
        jobs: list[tuple[Tool, t.Any, str | None] | Err] = []
        try:
            for call in calls:
                jobs.append(self._job(call))
        except (KeyboardInterrupt, ToolCancelled):
            raise
        except BaseException as exc:  # a broken iterable
            return [_internal_error("execute_many", exc)]
        executor = self.executor
        try:
            return executor.run_jobs(jobs, ctx, run=self._run_job)
        except (KeyboardInterrupt, ToolCancelled):
            raise
        except BaseException as exc:
            error = _internal_error("execute_many", exc)
            return [job if isinstance(job, Err) else error for job in jobs]

    # -- internals --------------------------------------------------------------

    def _job(self, call: object) -> tuple[Tool, t.Any, str | None] | Err:
        if isinstance(call, ToolCall):
            found = self.lookup(call.name)
            return _not_found(call.name) if found is None else (found, call.arguments, call.id)
        try:
            target, arguments = t.cast(tuple[t.Any, t.Any], call)
        except (TypeError, ValueError):
            return Err(
                ToolError(
                    "execute_many expects (name, arguments) pairs or ToolCalls, "
                    f"got {type(call).__name__}"
                )
            )
        if isinstance(target, Tool):
            return (target, arguments, None)
        found = self.lookup(target)
        return _not_found(target) if found is None else (found, arguments, None)

    def _run_job(
        self,
        tool: Tool,
        arguments: t.Any,
        ctx: RunContext[t.Any] | None,
        call_id: str | None,
    ) -> RegistryResult:
        try:
            return self._dispatch(tool, arguments, ctx, call_id)
        except (KeyboardInterrupt, ToolCancelled):
            raise
        except BaseException as exc:
            return _internal_error(tool.name, exc)

    def _dispatch(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any] | None,
        ctx: RunContext[t.Any] | None,
        call_id: str | None,
        executor: ToolExecutor | None = None,
    ) -> RegistryResult:
        """The registry path for a tool already found: approval level, then advice
        around the call on ``executor`` (default: the registry's own)."""
        level = tool.approval
        if level == "deny":
            return Err(ToolDenied(tool.name))
        if level == "ask" and not (
            isinstance(ctx, RunContext) and (ctx.approval_gated or ctx.approval_handler is not None)
        ):
            if arguments is None:
                arguments = {}
            elif not isinstance(arguments, c.Mapping):
                return _arguments_error(tool, arguments)
            try:
                return NeedsApproval(tool, arguments)
            except ValueError as exc:
                return Err(ToolError(str(exc), tool_name=tool.name, original_error=exc))
        if executor is None:
            executor = self.executor
        return self._advised(executor.execute, tool, arguments, ctx, call_id)

    def _advised(
        self,
        run: c.Callable[..., Result],
        tool: Tool,
        arguments: c.Mapping[str, t.Any] | None,
        ctx: RunContext[t.Any] | None,
        call_id: str | None,
    ) -> RegistryResult:
        def core(args: c.Mapping[str, t.Any] | None) -> Result:
            return run(tool, args, ctx, call_id=call_id)

        return t.cast(RegistryResult, self.advice.wrap(tool.name, core)(arguments))

    def _check_approved(self, na: NeedsApproval, arguments: object) -> Err | None:
        name = na.tool.name
        if arguments is not None:
            return Err(
                ToolError(
                    f"Tool '{name}' was not run: execute_approved takes the arguments of a "
                    "NeedsApproval from it, not separately",
                    tool_name=name,
                )
            )
        if not na.verify():
            return Err(
                ToolError(
                    f"Tool '{name}' was not run: its arguments changed after approval "
                    "(they no longer match the fingerprint)",
                    tool_name=name,
                )
            )
        registered = self._tools.get(name)
        if registered is None:
            return Err(ToolNotFound(name))
        if registered is not na.tool:
            return Err(
                ToolError(
                    f"Tool '{name}' was not run: the tool registered under that name is not "
                    "the one that was approved",
                    tool_name=name,
                )
            )
        return None
