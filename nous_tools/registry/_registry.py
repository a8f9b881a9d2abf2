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
>>> registry.execute_approved(pending).reason.message   # once only
"Tool 'delete' was not run: its approval was already used"

``execute`` never raises: every failure is an ``Err``.
"""

from __future__ import annotations

import collections.abc as c
import functools
import threading
import typing as t
import weakref

from nous_tools import executor as _executor_module
from nous_tools._engine._journal import check_journal
from nous_tools._engine._journal import peek as _journal_peek
from nous_tools._util._log import log as _safe_log
from nous_tools._util._scope import here, interrupts
from nous_tools._util._text import safe_str as _safe_str
from nous_tools._util._tokens import DEFAULT_MAX_CLOCK_SKEW, check_clock_skew, check_max_age
from nous_tools.advice import Advice
from nous_tools.approval import NeedsApproval
from nous_tools.approval._store import ApprovalStore, InMemoryApprovalStore, claimer
from nous_tools.errors import ToolDenied, ToolError, ToolNotFound
from nous_tools.executor import (
    ToolCall,
    ToolExecutor,
    _arguments_error,
    _check_batch_cap,
    _read_jobs,
    default_executor,
)
from nous_tools.registry._definitions import Definitions
from nous_tools.results import Err, Ok, Result
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool, register_redecorate

if t.TYPE_CHECKING:
    from nous_tools._engine._journal import JournalClaim
    from nous_tools.journal._record import Journal
    from nous_tools.program import ProgramPaused

__all__ = ["Registry"]

_log = _safe_log

# The value and reason types of the results (execute's overloads).
_T = t.TypeVar("_T")
_E = t.TypeVar("_E")
_R = t.TypeVar("_R")

#: What the registry path returns: an ``Ok``, an ``Err`` or a ``NeedsApproval``.
RegistryResult = t.Union[Result, NeedsApproval]  # noqa: UP007  (a runtime alias)

#: How old (seconds) an approval token may be by default: one day.
DEFAULT_APPROVAL_MAX_AGE = 24 * 60 * 60.0

# The tools ``register`` made of a plain function, and the registry that holds each:
# ``@tool(...)`` written above ``@registry.register`` finds its tool here (see
# ``redecorate``).
_made_by_register: weakref.WeakKeyDictionary[Tool, weakref.ReferenceType[Registry]] = (
    weakref.WeakKeyDictionary()
)
_made_lock = threading.Lock()


@functools.cache
def _approvals() -> t.Any:
    """The ``_approvals`` module, imported at the first approved call (approvals
    only), then found without an import statement on each call."""
    from nous_tools.registry import _approvals as module

    return module


def redecorate(made: Tool, options: c.Mapping[str, t.Any]) -> Tool:
    """``Tool.from_function(made, **options)`` for a tool that is already a Tool.

    When ``made`` is the tool ``registry.register`` made of a plain function —
    ``@tool(...)`` written above ``@registry.register`` — the options apply to that
    function and the registry gets the new tool in place of the default one: both
    orders register what the user wrote. Any other Tool is a ``TypeError`` that says
    which order to use (options would otherwise be merged by guesswork).
    ``Tool.from_function`` calls it through ``register_redecorate`` below (a value,
    ``nous_tools.tool`` imports no layer above it).
    """
    with _made_lock:
        owner = _made_by_register.get(made)
    registry = owner() if owner is not None else None
    if owner is None:
        raise TypeError(
            f"@tool(...) / Tool.from_function got a Tool ({made.name!r}), not a function: "
            "give all the options in one @tool(...), directly above the function, and put "
            "@registry.register above it:\n\n    @registry.register\n    @tool(...)\n"
            f"    def {made.name}(...): ..."
        )
    new = Tool.from_function(made.function, **options)
    if registry is not None:
        registry._replace(made, new)
    return new


register_redecorate(redecorate)


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


def _collision(server: str, tool: Tool, existing: Tool) -> str:
    """What ``register_mcp`` says when a remote tool would take a registered name."""
    if existing.module == tool.module:
        other = f"another tool of that name from MCP server '{server}'"
    else:
        function = getattr(existing.function, "__qualname__", type(existing.function).__name__)
        other = (
            f"the tool '{existing.name}' already registered (function {function} "
            f"in {existing.module or 'an unknown module'}, approval {existing.approval!r})"
        )
    return (
        f"register_mcp: MCP server '{server}' has a tool '{tool.name}', and the registry "
        f"holds {other}; nothing was registered. Pass prefix='...' to keep both, or "
        "replace=True to let the remote tool take the name"
    )


def _not_found(name: object) -> Err:
    return Err(ToolNotFound(name if isinstance(name, str) else _shown(name)))


def _shown(name: object) -> str:
    """A name that is not a str, shown in a message whatever its ``__repr__`` does."""
    try:
        return repr(name)
    except Exception:
        return f"<a {type(name).__name__}>"


class Registry:
    """Tools by name. Thread-safe; reads take no lock.

    ``tools`` are registered at once. ``executor`` is the :class:`ToolExecutor`
    that runs calls (default: the process-wide :func:`default_executor`, looked up
    at call time). ``advice`` is the :class:`Advice` table (default: a new one,
    so each registry has its own); it is ``registry.advice``.

    Approvals (see ``docs/concepts/approval.md``): ``name`` is the audience of the
    tokens this registry issues — a registry with another name refuses them.
    ``approval_max_age`` (seconds; default one day; None for no limit) is how old a
    token :meth:`NeedsApproval.from_dict` accepts unless told otherwise.
    ``approval_max_clock_skew`` (seconds; default 60) is how far in the future, by
    this server's clock, a token may say it was issued (another server's clock may
    be a little ahead; a token from further ahead is refused).
    ``approval_store`` (an :class:`ApprovalStore`; default a new
    :class:`InMemoryApprovalStore`) makes each approval single-use: it is asked to
    remember each claim until the approval's token expires.

    ``journal`` (a :class:`~nous_tools.Journal`) journals the calls run through this
    registry that have a key (``ctx.run_id`` and a call id), whichever executor runs
    them; without one, the executor's own journal (if any) applies. See
    ``docs/concepts/journal.md``.

    Writes take a lock and change the table in place: one dict store or removal,
    which a reader sees whole or not at all, so lookups take no lock and
    registering stays linear (100,000 tools in well under a second). Listing works
    on a copy taken in one step.

    What the layers built on a registry use of it is public. Besides
    :meth:`execute` and the table's methods, :meth:`dispatch` and
    :meth:`straight_through` run a batch's calls (``execute_tool_calls``),
    :meth:`run_approval` and :meth:`claim_approval` a person's decisions (a paused
    batch's ``resolve``), and :meth:`effective_journal` names the journal they are
    recorded in.
    """

    def __init__(
        self,
        tools: c.Iterable[Tool | c.Callable[..., t.Any]] = (),
        *,
        executor: ToolExecutor | None = None,
        advice: Advice | None = None,
        name: str | None = None,
        approval_max_age: float | None = DEFAULT_APPROVAL_MAX_AGE,
        approval_store: ApprovalStore | None = None,
        approval_max_clock_skew: float = DEFAULT_MAX_CLOCK_SKEW,
        journal: Journal | None = None,
    ) -> None:
        if name is not None and (type(name) is not str or not name):
            raise TypeError(f"Registry name must be a non-empty str or None, got {name!r}")
        if approval_store is not None and not callable(getattr(approval_store, "claim", None)):
            raise TypeError(
                "approval_store must have a claim(approval_id, expires_at=None) -> bool "
                "method, got "
                f"{type(approval_store).__name__}"
            )
        check_journal("Registry", journal)
        self._journal = journal
        self._lock = threading.Lock()
        self._tools: dict[str, Tool] = {}
        # tool_definitions' answers, told of every change of the table.
        self._definitions = Definitions(self._tools, self._lock)
        self._executor = executor
        self._name = name
        self._approval_max_age = check_max_age(approval_max_age)
        self._approval_max_clock_skew = check_clock_skew(approval_max_clock_skew)
        # Both at once, as _tokens.limits reads them for every token and batch (None:
        # a subclass says otherwise, through its own properties).
        self._approval_limits: tuple[float | None, float] | None = (
            (self._approval_max_age, self._approval_max_clock_skew)
            if type(self).approval_max_age is Registry.approval_max_age
            and type(self).approval_max_clock_skew is Registry.approval_max_clock_skew
            else None
        )
        self._approval_store: ApprovalStore = (
            approval_store if approval_store is not None else InMemoryApprovalStore()
        )
        self._claim = claimer(self._approval_store)
        #: The advice table of this registry.
        self.advice: Advice = advice if advice is not None else Advice()
        for tool in tools:
            self.register(tool)

    @property
    def name(self) -> str | None:
        """The audience of this registry's approval tokens (None: unnamed)."""
        return self._name

    @property
    def approval_max_age(self) -> float | None:
        """How old (seconds) an approval token may be, unless ``from_dict`` says otherwise."""
        return self._approval_max_age

    @property
    def journal(self) -> Journal | None:
        """The call journal of this registry's calls, or None (then the executor's
        journal applies, if it has one)."""
        return self._journal

    def effective_journal(self, executor: ToolExecutor | None = None) -> Journal | None:
        """The journal a call through this registry is recorded in: the registry's own
        :attr:`journal`, else the journal of ``executor`` (default: :attr:`executor`);
        None when neither keeps one."""
        if self._journal is not None:
            return self._journal
        return (executor if executor is not None else self.executor).journal

    @property
    def approval_max_clock_skew(self) -> float:
        """How far in the future (seconds) a token's ``issued_at`` may be."""
        return self._approval_max_clock_skew

    @property
    def approval_store(self) -> ApprovalStore:
        """The store that lets each approval id run once."""
        return self._approval_store

    def claim_approval(self, approval_id: str, expires_at: float | None = None) -> bool:
        """Use up ``approval_id`` in :attr:`approval_store`, remembered until
        ``expires_at`` (Unix seconds; None: for good): True for its first claim only.

        What :meth:`execute_approved` does before it runs an approval, for an
        integration that uses one up without running it (a rejected call, a resolved
        batch). A store whose ``claim`` takes no ``expires_at`` is called without it
        (a warning says so, once); a store that fails raises.
        """
        return self._claim(approval_id, expires_at) is True

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
        it — so ``@registry.register`` works as a decorator, in either order with
        ``@tool(...)``: above it, the options apply to the tool registered here."""
        if not isinstance(tool, Tool):
            tool = Tool.from_function(tool)
            with _made_lock:
                _made_by_register[tool] = weakref.ref(self)
        with self._lock:
            self._tools[tool.name] = tool
            self._definitions.changed(tool.name)
        return tool

    def _register_all(
        self,
        tools: c.Sequence[Tool],
        refuse: c.Callable[[Tool, Tool], None] | None = None,
    ) -> None:
        """Register ``tools`` in one step. With ``refuse``, a name already here (or
        twice in ``tools``) calls ``refuse(tool, the_other)``, which raises: then
        nothing is registered (``register_mcp``)."""
        with self._lock:
            if refuse is not None:
                seen: dict[str, Tool] = {}
                for tool in tools:
                    other = seen.get(tool.name)
                    if other is None:
                        other = self._tools.get(tool.name)
                    if other is not None:
                        refuse(tool, other)
                    seen[tool.name] = tool
            for tool in tools:
                self._tools[tool.name] = tool
            self._definitions.changed(*(tool.name for tool in tools))

    def _replace(self, old: Tool, new: Tool) -> None:
        """``new`` in place of ``old``, if ``old`` is still registered here."""
        with self._lock:
            if self._tools.get(old.name) is not old:
                return
            del self._tools[old.name]
            self._tools[new.name] = new
            self._definitions.changed(old.name, new.name)

    def unregister(self, name: str) -> Tool | None:
        """Remove the tool called ``name``; return it, or None when there was none."""
        with self._lock:
            removed = self._tools.pop(name, None)
            if removed is not None:
                self._definitions.changed(name)
            return removed

    def lookup(self, name: str) -> Tool | None:
        """The tool called ``name``, or None (also for a name that cannot be looked
        up: unhashable, or whose ``__hash__`` or ``__eq__`` raises)."""
        try:
            return self._tools.get(name)
        except Exception:  # an unhashable "name", or one whose __hash__ raises
            return None

    def all(self) -> list[Tool]:
        """Every registered tool, sorted by name."""
        tools = self._tools.copy()  # one C call: a consistent snapshot
        return [tools[name] for name in sorted(tools)]

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._tools.copy())

    def __contains__(self, item: object) -> bool:
        """``name in registry``; ``tool in registry`` is True when that very tool is
        the one registered under its name."""
        if isinstance(item, Tool):
            return self._tools.get(item.name) is item
        try:
            return item in self._tools
        except Exception:  # unhashable, or a __hash__/__eq__ that raises
            return False

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> c.Iterator[Tool]:
        """The tools, sorted by name."""
        return iter(self.all())

    def __repr__(self) -> str:
        named = f" name={self._name!r}" if self._name is not None else ""
        return f"<Registry{named} tools={self.names()!r}>"

    def tool_definitions(
        self, provider: t.Literal["openai", "responses", "anthropic"], *, strict: bool = False
    ) -> list[dict[str, t.Any]]:
        """The tool definitions to send to a model: every registered tool except
        ``deny`` ones, sorted by name, as ``provider`` wants them — ``"openai"``
        (Chat Completions, :meth:`Tool.to_openai_schema`), ``"responses"``
        (:meth:`Tool.to_responses_schema`) or ``"anthropic"``
        (:meth:`Tool.to_anthropic_schema`).

        ``strict=True`` (the two OpenAI APIs) sends each tool in OpenAI's strict mode;
        a tool whose schema cannot be strict (a ``dict[str, X]`` parameter, say, or an
        MCP server's schema) is sent non-strict — ``"strict": false`` and its own
        schema — and a warning names it and the keyword, once: one tool never stops
        the others.

        The definitions are made once per tool (tools with schemas that read the same
        share theirs) and kept: a repeated call costs a copy of the list, and a change
        (``register``, ``unregister``, a replacement) remakes only the definitions of
        the names it changed. Each call returns a new list, yours to change, of the
        kept definitions, which every call shares and which are read-only all the
        way down (``TypeError``): to add Anthropic's ``cache_control``, say, put a
        new dict in the list (``tools[-1] = {**tools[-1], "cache_control": ...}``);
        ``copy.deepcopy`` of a definition gives a copy you can change.
        """
        return self._definitions.get(provider, strict)

    # -- execution --------------------------------------------------------------

    # For type checkers: a Tool[P, R] gives Ok[R] | Err[ToolError] | NeedsApproval.
    @t.overload
    def execute(
        self,
        name: Tool[..., Ok[_T]],
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Ok[_T] | Err[ToolError] | NeedsApproval: ...
    @t.overload
    def execute(  # type: ignore[overload-overlap]
        self,
        name: Tool[..., Ok[_T] | Err[_E]],
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Ok[_T] | Err[ToolError | _E] | NeedsApproval: ...
    @t.overload
    def execute(  # type: ignore[overload-overlap]
        self,
        name: Tool[..., Err[_E]],
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Err[ToolError | _E] | NeedsApproval: ...
    @t.overload
    def execute(
        self,
        name: Tool[..., _R],
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Ok[_R] | Err[ToolError] | NeedsApproval: ...
    @t.overload
    def execute(
        self,
        name: str,
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> RegistryResult: ...
    def execute(
        self,
        name: str | Tool,
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> RegistryResult:
        """Run the tool called ``name``; never raises.

        ``name`` may be a :class:`Tool` instead (registered or not): it runs as given,
        through this registry's path (its approval level, the advice of its name), and
        a type checker knows its result — ``Ok[R] | Err[ToolError] | NeedsApproval``
        for a ``Tool[P, R]`` (advice that changes the value is not seen by the type).

        Unknown name → ``Err(ToolNotFound)``; approval ``"deny"`` →
        ``Err(ToolDenied)``; ``"ask"`` → a :class:`NeedsApproval` of the arguments
        *after* the ``before`` advice (so a person approves what would run), without
        running it — unless ``ctx`` is ``approval_gated`` or has an
        ``approval_handler``, in which case the executor's approval step decides;
        ``"auto"`` → the executor runs it. The advice of ``name`` wraps the executor
        call. ``call_id`` reaches an approval handler as ``ApprovalRequest.id`` and a
        ``NeedsApproval`` as its ``call_id``. With a journal (the registry's or the
        executor's), ``call_id`` and ``ctx.run_id`` are the call's key, and ``wait``
        is how long to wait for the outcome of the same call running elsewhere
        (see :meth:`ToolExecutor.execute`).
        """
        try:
            tool = self._tools.get(name)  # type: ignore[arg-type]  # a Tool finds none
        except Exception:  # an unhashable "name", or one whose __hash__ raises
            return _not_found(name)
        try:
            if tool is None:
                if isinstance(name, Tool):  # a Tool in place of its name: run as given
                    return self.dispatch(name, arguments, ctx, call_id)
                return _not_found(name)
            if tool.approval != "auto" or self._journal is not None or wait is not None:
                return self.dispatch(tool, arguments, ctx, call_id, wait=wait)
            executor = self._executor
            if executor is None:
                executor = _executor_module._default or default_executor()
            if name in self.advice._chains:  # the one dict lookup of an unadvised call
                return self._advised(executor.execute, tool, arguments, ctx, call_id)
            # executor.execute, a frame shorter (this try does what its try does)
            if here.nested:
                return executor._shielded(tool, arguments, ctx, call_id, False)
            return executor._execute(tool, arguments, ctx, call_id)
        except BaseException as exc:
            if interrupts(exc):
                raise
            return _internal_error(name, exc)

    def execute_approved(
        self,
        tool: Tool | str | NeedsApproval,
        arguments: c.Mapping[str, t.Any] | RunContext[t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        *,
        call_id: str | None = None,
        wait: float | None = None,
    ) -> Result:
        """Run a call that a person (or the caller) has approved; never raises.

        ``tool`` is a :class:`Tool`, a registered name, or a :class:`NeedsApproval`
        (then the arguments are its own: ``execute_approved(na)`` or
        ``execute_approved(na, ctx)``). The tool sees ``ctx.approval_gated == True``.

        With a ``Tool`` or a name — **the program's own decision** — there is no
        approval check at all: **even a ``"deny"`` tool runs** (as in Minga; a
        warning is logged each time), and all the advice applies. Never pass it a
        name or arguments that came from a model or a browser: that is what
        ``execute`` and a :class:`NeedsApproval` are for.

        With a ``NeedsApproval`` — a person's decision — it runs only if it is still
        the call that was approved, and only once. It is refused (``Err``, the tool
        does not run) when its arguments no longer match its fingerprint, when the
        tool registered under its name is no longer the tool it names or is
        ``"deny"``, when arguments are passed separately, and when the registry's
        approval store has already claimed its id (``Err(ApprovalAlreadyUsed)``; a
        store that fails also refuses). The ``before`` advice does not run again
        (it ran before the approval); an ``around`` that proceeds with other
        arguments than the approved ones gets an ``Err`` instead of the call.

        With a journal, a call with a key is journaled as :meth:`execute` journals it
        (``wait`` as there).
        """
        try:
            if isinstance(tool, NeedsApproval):
                if isinstance(arguments, RunContext) and ctx is None:
                    ctx, arguments = arguments, None
                result: Result = _approvals().execute_approval(
                    self, tool, arguments, ctx, call_id, wait=wait
                )
                return result
            from nous_tools.registry._approvals import run_decided  # approvals only

            return run_decided(self, tool, arguments, ctx, call_id, wait)
        except BaseException as exc:
            if interrupts(exc):
                raise
            return _internal_error(getattr(tool, "name", tool), exc)

    def execute_many(
        self,
        calls: c.Iterable[tuple[str | Tool, c.Mapping[str, t.Any] | None] | ToolCall],
        ctx: RunContext[t.Any] | None = None,
        *,
        max_concurrency: int | None = None,
        on_progress: c.Callable[[int, int, RegistryResult | None], object] | None = None,
    ) -> list[RegistryResult]:
        """Run several calls concurrently through the registry path (at most
        ``max_concurrency`` at once, when given); results come back in input order
        (``Ok``, ``Err`` or ``NeedsApproval`` each), and one call's failure never
        affects another's.

        A call is a ``(name, arguments)`` pair (a :class:`Tool` in place of the name
        is run as given) or a :class:`ToolCall`, whose ``id`` reaches an approval
        handler as ``ApprovalRequest.id``. ``on_progress(done, total, result)`` is
        told of every call that ends, as in :meth:`ToolExecutor.execute_many`.
        """
        if max_concurrency is not None:
            _check_batch_cap(max_concurrency)  # the program's error: a ValueError
        jobs = _read_jobs(calls, self._job)
        executor = self.executor
        try:
            return executor.run_jobs(
                jobs,
                ctx,
                run=self.dispatch,
                max_concurrency=max_concurrency,
                on_progress=on_progress,
                straight=self.straight_through(),
            )
        except BaseException as exc:
            if interrupts(exc):
                raise
            error = _internal_error("execute_many", exc)
            return [job if isinstance(job, Err) else error for job in jobs]

    def run_program(
        self,
        source: str,
        ctx: RunContext[t.Any] | None = None,
        *,
        timeout: float | None = 60.0,
        sandbox: t.Any = None,
        max_calls: int = 100,
        tools: c.Iterable[str] | None = None,
        program_id: str | None = None,
    ) -> RegistryResult | ProgramPaused:
        """Run ``source``, a short Python program, in a confined child where each tool
        of this registry (or of ``tools``, names) is a function taking keyword
        arguments (also ``tools.<name>``); never raises for what the program does.

        Returns ``Ok(ProgramOutput)`` (the value of ``result = ...`` or of the final
        expression, and what it printed), an ``Err`` (a syntax error with its line, an
        exception it raised, its deadline, more than ``max_calls`` nested calls), or a
        :class:`~nous_tools.ProgramPaused` when a nested ``"ask"`` call waits for a
        person (no approval handler in ``ctx``): its ``resolve`` runs the program
        again, the nested calls that completed answered by the journal (or, without
        one, by this process's record), not run again.

        Every nested call is ``execute(name, arguments, ctx, call_id=...)`` with the id
        ``"<program_id>/<position>"`` in ``ctx.run_id``: approval, validation, admission,
        its deadline (bounded by what is left of ``timeout``), retries, the journal,
        the signals. ``sandbox`` is the child's policy (default ``read_only``, no
        network, 512 MB). ``program_id`` defaults, in a run (``ctx.run_id``), to a
        digest of ``source`` — the same program in the same run is the same program,
        resumed (pass another id to run it afresh) — and outside one to a new id (the
        run is then the program's own). See ``docs/how-to/code-mode.md``.
        """
        from nous_tools.program._run import run_program  # code mode only

        return run_program(
            self,
            source,
            ctx,
            timeout=timeout,
            sandbox=sandbox,
            max_calls=max_calls,
            tools=tools,
            program_id=program_id,
        )

    def code_tool(
        self,
        name: str = "run_python",
        tools: c.Iterable[str] | None = None,
        *,
        timeout: float | None = 60.0,
        sandbox: t.Any = None,
        max_calls: int = 100,
    ) -> Tool:
        """A :class:`Tool` a model calls with a program: its one argument is the code,
        its description lists the functions the program may call (``tools``, names;
        default every tool registered now but itself) with their signatures and
        one-line docs, and it returns what :meth:`run_program` returned —
        ``{"result", "stdout"}``, the ``Err``, or (a nested call waiting for a
        person) the :class:`~nous_tools.ProgramPaused`, which
        :func:`~nous_tools.execute_tool_calls` shows as its waiting nested calls.
        Register it (``registry.register(registry.code_tool())``) to offer it. The
        program's id is the model's tool-call id in a batch. See
        ``docs/how-to/code-mode.md``.
        """
        from nous_tools.program._tool import code_tool  # code mode only

        return code_tool(self, name, tools, timeout=timeout, sandbox=sandbox, max_calls=max_calls)

    def register_mcp(
        self,
        server: t.Any,
        *,
        trusted: bool = False,
        prefix: str | None = None,
        replace: bool = False,
        on_definition_change: t.Literal["refuse", "ask", "accept"] = "refuse",
    ) -> list[Tool]:
        """Register the tools of an external MCP server (a
        :class:`nous_tools.contrib.mcp.MCPServer`) and return them; needs
        ``pip install 'nous-tools[mcp]'``. Untrusted servers' tools are all ``"ask"``;
        see :meth:`MCPServer.tools <nous_tools.contrib.mcp.MCPServer.tools>`. Unlike
        :meth:`register`, a name already registered is a ``ValueError`` naming both
        tools (nothing is registered) unless ``replace=True``. (A hostile server could
        otherwise take over a local tool's name, and its approval level.)

        Each tool is pinned to its definition as listed now; ``on_definition_change``
        (``"refuse"``, ``"ask"`` or ``"accept"``) says what a call does when the
        server has changed it since: see :func:`nous_tools.contrib.mcp.register_mcp`,
        which is this method as a function.

        ``server`` is read through what it shows: its ``name``, its
        ``tools(trusted=..., prefix=..., on_definition_change=...)`` and
        ``registered_in(registry)`` (told once the tools are registered), so the
        registry needs nothing of ``contrib.mcp``."""
        tools: list[Tool] = server.tools(
            trusted=trusted, prefix=prefix, on_definition_change=on_definition_change
        )

        def refuse(tool: Tool, existing: Tool) -> None:
            raise ValueError(_collision(server.name, tool, existing))

        self._register_all(tools, None if replace else refuse)
        server.registered_in(self)
        return tools

    # -- for integrations -------------------------------------------------------
    # What the providers (execute_tool_calls, a paused batch's resolve), the MCP
    # server and other integrations use of a registry besides execute.

    def dispatch(
        self,
        tool: Tool,
        arguments: c.Mapping[str, t.Any] | None = None,
        ctx: RunContext[t.Any] | None = None,
        call_id: str | None = None,
        *,
        executor: ToolExecutor | None = None,
        wait: float | None = None,
    ) -> RegistryResult:
        """Run ``tool``, already looked up, through this registry's path on
        ``executor`` (default: :attr:`executor`); never raises.

        What :meth:`execute` does once it has the tool, for an integration that
        looks tools up itself or runs them on an executor of its own: the tool's
        approval level (``"deny"`` is ``Err(ToolDenied)``; ``"ask"`` a
        :class:`NeedsApproval`, unless ``ctx`` is approval-gated or has an
        approval handler), then the advice of its name around the executor's call,
        journaled as :meth:`execute` journals it (``wait`` as there). Its first four
        parameters are the ``run`` that :meth:`ToolExecutor.run_jobs` calls.
        """
        try:
            level = tool.approval
            if level == "deny":
                return Err(ToolDenied(tool.name))
            if executor is None:
                executor = self.executor
            if level == "ask" and not (
                isinstance(ctx, RunContext)
                and (ctx.approval_gated or ctx.approval_handler is not None)
            ):
                if arguments is None:
                    arguments = {}
                elif not isinstance(arguments, c.Mapping):
                    return _arguments_error(tool, arguments)
                if tool.name in self.advice._chains:  # the person approves what would run
                    arguments = self.advice._run_befores(tool.name, arguments)
                # A call the journal already holds (resolved before, say) is answered by it.
                answered = _journal_peek(
                    self.effective_journal(executor), tool, arguments, ctx, call_id, wait
                )
                if answered is not None:
                    return answered
                try:
                    return NeedsApproval(tool, arguments, call_id=call_id, audience=self._name)
                except (TypeError, ValueError) as exc:
                    return Err(ToolError(str(exc), tool_name=tool.name, original_error=exc))
            run = self._runner(executor, False, None, wait)
            return self._advised(run, tool, arguments, ctx, call_id)
        except BaseException as exc:
            if interrupts(exc):
                raise
            return _internal_error(getattr(tool, "name", None), exc)

    def straight_through(self) -> c.Callable[[Tool], bool] | None:
        """Which tools a batch may hand straight to the executor's pipeline, for an
        integration that runs batches (the ``straight`` of
        :meth:`ToolExecutor.run_jobs`): a predicate, True for a tool whose call this
        registry would pass on unchanged — approval ``"auto"``, no advice of its
        name in the advice table as it stands now — or None when every call must go
        through :meth:`dispatch` (this registry keeps a journal of its own)."""
        if self._journal is not None:
            return None
        chains = self.advice._chains

        def straight(tool: Tool) -> bool:
            return tool.approval == "auto" and tool.name not in chains

        return straight

    def run_approval(
        self,
        na: NeedsApproval,
        ctx: RunContext[t.Any] | None = None,
        call_id: str | None = None,
        *,
        claim: JournalClaim | None = None,
        wait: float | None = None,
    ) -> Result:
        """``execute_approved(na, ctx)``, for an integration that has read a
        person's decision itself (a paused batch's resolve); never raises.

        ``call_id`` is the call's id in the journal when it is not ``na.call_id``.
        ``claim`` is the journal's claim of the call when the integration has taken
        the journal's first step itself (a journaled resolve records each decision):
        the call then runs and is recorded with it, and the approval is redeemed in
        the transaction that records its start when :attr:`approval_store` is that
        journal's ``approvals``.
        """
        try:
            result: Result = _approvals().execute_approval(
                self, na, None, ctx, call_id, claim=claim, wait=wait
            )
            return result
        except BaseException as exc:
            if interrupts(exc):
                raise
            return _internal_error(na.tool.name, exc)

    # -- internals --------------------------------------------------------------

    def _job(self, call: object) -> tuple[Tool, t.Any, str | None] | Err:
        try:
            if isinstance(call, ToolCall):
                found = self.lookup(call.name)
                if found is None:
                    return _not_found(call.name)
                return (found, call.arguments, call.id)
            target, arguments = t.cast(tuple[t.Any, t.Any], call)
            if isinstance(target, Tool):
                return (target, arguments, None)
            found = self.lookup(target)
            return _not_found(target) if found is None else (found, arguments, None)
        except (TypeError, ValueError):
            return Err(
                ToolError(
                    "execute_many expects (name, arguments) pairs or ToolCalls, "
                    f"got {type(call).__name__}"
                )
            )
        except BaseException as exc:  # an item whose reading raises: an Err of its own
            if interrupts(exc):
                raise
            return Err(
                ToolError(
                    f"execute_many could not read a call ({type(call).__name__}): "
                    f"{type(exc).__name__}: {_safe_str(exc)}",
                    original_error=exc,
                )
            )

    def _runner(
        self, executor: ToolExecutor, approved: bool, claim: t.Any, wait: float | None
    ) -> c.Callable[..., Result]:
        """``executor.execute`` (or ``execute_approved``), with this registry's
        journal (or ``claim``, a call step 0 let go on) and ``wait``."""
        journal = claim if claim is not None else self._journal
        if journal is None and wait is None:
            return executor.execute_approved if approved else executor.execute

        def run(
            tool: Tool,
            arguments: c.Mapping[str, t.Any] | None,
            ctx: RunContext[t.Any] | None,
            *,
            call_id: str | None = None,
        ) -> Result:
            return executor._run_with(tool, arguments, ctx, call_id, approved, journal, wait)

        return run

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

        return t.cast(RegistryResult, self.advice._wrap_results(tool.name, core)(arguments))
