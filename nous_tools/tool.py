"""``Tool``: a function an agent may call, with its schema and execution options.

Build one from a function; its name, description and JSON Schema come from the
signature and the docstring:

>>> @tool(timeout=5, retries=2)
... def add(a: int, b: int = 0) -> int:
...     '''Add two numbers.
...
...     Args:
...         a: The first number.
...         b: The second number.
...     '''
...     return a + b
>>> add.name, add.description, add.retries, add.timeout
('add', 'Add two numbers.', 2, 5.0)
>>> add.parameters["required"], add.parameters["properties"]["a"]
(['a'], {'type': 'integer', 'description': 'The first number.'})
>>> add.to_openai_schema()["function"]["name"]
'add'

A tool stays callable as the plain function it wraps: ``add(1, 2) == 3``.
Options are checked at construction, with a message that names the option:

>>> Tool(name="x", function=len, retries=-1)
Traceback (most recent call last):
...
ValueError: Tool option 'retries' must be an int >= 0, got -1

``Tool`` is a value and imports no layer above it. What it compiles when it is
made (schemas from signatures, validators, argument conversion, strict schemas)
is the schema layer's code, and what ``@tool(...)`` does above
``@registry.register`` is the registry's: each of those layers registers its code
here as it is imported (:func:`register_schema_code`, :func:`register_redecorate`),
through an import that points down to this module.
"""

from __future__ import annotations

import collections.abc as c
import copy
import math
import threading
import typing as t

import attrs

from nous_tools._util._rates import ToolLimits, parse_rate, tool_limits

if t.TYPE_CHECKING:
    import referencing
    from typing_extensions import ParamSpec, TypeVar, Unpack

    from nous_tools._types import Converter, SchemaCode, Validator
    from nous_tools.sandbox import SandboxPolicy

__all__ = [
    "APPROVAL_LEVELS",
    "ISOLATION_MODES",
    "ON_RESULT_OVERFLOW_MODES",
    "ON_TIMEOUT_MODES",
    "TASK_MODES",
    "TASK_THRESHOLD",
    "Tool",
    "ToolOptions",
    "tool",
]

APPROVAL_LEVELS = ("auto", "ask", "deny")
ISOLATION_MODES = ("thread", "process")
ON_TIMEOUT_MODES = ("interrupt", "abandon")
ON_RESULT_OVERFLOW_MODES = ("truncate", "error")
TASK_MODES = ("optional", "required", "never")
#: Seconds: a tool whose ``timeout`` is longer (or None: no deadline) and that gives
#: no ``task`` may be called as an MCP task (``task="optional"``); else ``"never"``.
TASK_THRESHOLD = 60.0

if t.TYPE_CHECKING:
    #: What ``Tool.from_function`` does with a tool rather than a function: the
    #: registry's re-decoration of a tool that ``registry.register`` made of a plain
    #: function (``@tool(...)`` written above ``@registry.register``).
    Redecorate = c.Callable[["Tool[..., t.Any]", c.Mapping[str, t.Any]], "Tool[..., t.Any]"]

# What a Tool asks of the layers above it, registered by the layer that owns it
# (docs/concepts/architecture.md): the schema code (nous_tools.schema._tool, whose
# functions import their engines on first use) by nous_tools/schema/__init__.py,
# the re-decoration by nous_tools/registry/_registry.py. nous_tools/__init__.py
# imports both, and importing any nous_tools module runs it first: both are here
# before any tool is made.
_schema: SchemaCode | None = None
_redecorate: Redecorate | None = None


def register_schema_code(code: SchemaCode) -> None:
    """Register the schema code a tool compiles when it is made (called once, by
    ``nous_tools/schema/__init__.py`` as it is imported)."""
    global _schema
    _schema = code


def register_redecorate(redecorate: Redecorate) -> None:
    """Register what :meth:`Tool.from_function` does with a tool that
    ``registry.register`` made (called once, by ``nous_tools/registry/_registry.py``
    as it is imported)."""
    global _redecorate
    _redecorate = redecorate


def _code() -> SchemaCode:
    code = _schema
    if code is None:  # only when nous_tools/__init__.py did not run (it always does)
        raise RuntimeError(
            "nous_tools.tool has no schema code: nous_tools.schema registers it (import nous_tools)"
        )
    return code


Approval = t.Literal["auto", "ask", "deny"]
Isolation = t.Literal["thread", "process"]
OnTimeout = t.Literal["interrupt", "abandon"]
OnResultOverflow = t.Literal["truncate", "error"]

#: The wrapped function's parameters and return type, for type checkers: ``@tool``
#: on ``def f(a: int) -> str`` gives a ``Tool[[int], str]`` that is called like ``f``.
#: A bare ``Tool`` is ``Tool[..., Any]``.
if t.TYPE_CHECKING:
    P = ParamSpec("P", default=...)
    R = TypeVar("R", default=t.Any)
else:
    # typing's at run time: the defaults are for type checkers, and importing
    # typing_extensions would cost every program's start-up.
    P = t.ParamSpec("P")
    R = t.TypeVar("R")
_P = t.ParamSpec("_P")
_R = t.TypeVar("_R")


class ToolOptions(t.TypedDict, total=False):
    """The keyword options of :func:`tool` and :meth:`Tool.from_function` (the fields
    of :class:`Tool` but ``function``), so that type checkers flag a misspelt one."""

    name: str
    description: str | None
    parameters: c.Mapping[str, t.Any] | None
    takes_ctx: bool | None
    retries: int | None
    timeout: float | None
    validate_args: bool
    approval: Approval
    category: str | None
    tags: c.Iterable[str] | str | None
    module: str | None
    retry_wait: t.Any
    isolation: Isolation
    on_timeout: OnTimeout | None
    requires_approval: bool | None
    convert_args: bool
    schema_registry: referencing.Registry[t.Any] | None
    read_only: bool | None
    destructive: bool | None
    idempotent: bool | None
    backend: str | None
    max_concurrency: int | None
    rate_limit: str | None
    max_calls_per_run: int | None
    max_result_chars: int | t.Literal["executor"] | None
    on_result_overflow: OnResultOverflow
    retry_on: tuple[type[BaseException], ...] | type[BaseException] | t.Callable[..., t.Any] | None
    trusted_schema: bool
    queue_timeout: float | None
    sandbox: SandboxPolicy | str | c.Mapping[str, t.Any] | None
    task: t.Literal["optional", "required", "never"] | None
    ask_before_task: bool


def _to_sandbox(value: object) -> SandboxPolicy | None:
    if value is None:
        return None
    from nous_tools.sandbox import SandboxPolicy

    return SandboxPolicy.new(value)  # type: ignore[arg-type]


def _check_sandbox(instance: t.Any, attribute: object, value: object) -> None:
    if value is not None and instance.isolation != "process":
        raise ValueError(
            "Tool option 'sandbox' needs isolation='process': the kernel fences a child "
            "process, not a thread (a thread-isolated tool confines the programs it "
            "starts with ctx.sandbox.run(...))"
        )


def _check_name(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"Tool option 'name' must be a non-empty string, got {value!r}")


def _check_function(instance: object, attribute: attrs.Attribute[t.Any], value: object) -> None:
    if not callable(value):
        raise TypeError(f"Tool option 'function' must be callable, got {type(value).__name__}")


def _check_retries(instance: object, attribute: attrs.Attribute[t.Any], value: object) -> None:
    if value is None:
        return  # not given: the default for this tool (see Tool)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Tool option 'retries' must be an int >= 0, got {value!r}")


def _convert_timeout(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"Tool option 'timeout' must be a number of seconds or None, got {type(value).__name__}"
        )
    seconds = float(value)
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"Tool option 'timeout' must be >= 0 seconds or None, got {value!r}")
    if seconds == 0 or math.isinf(seconds):
        return None
    if seconds > threading.TIMEOUT_MAX:
        raise ValueError(
            f"Tool option 'timeout' must be at most {threading.TIMEOUT_MAX:.0f} seconds "
            f"(threading.TIMEOUT_MAX, the longest wait this platform allows), got {value!r}; "
            "use None for no deadline"
        )
    return seconds


def queue_seconds(owner: str, value: object) -> float | None:
    """``queue_timeout`` checked (``owner``: "Tool", "ToolExecutor"): None, or a
    number of seconds > 0 up to ``threading.TIMEOUT_MAX``, as a float."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{owner} option 'queue_timeout' must be a number of seconds or None, "
            f"got {type(value).__name__}"
        )
    seconds = float(value)
    if not 0 < seconds <= threading.TIMEOUT_MAX:  # (NaN fails too)
        raise ValueError(
            f"{owner} option 'queue_timeout' must be a number of seconds > 0 and at most "
            f"{threading.TIMEOUT_MAX:.0f}, or None, got {value!r}"
        )
    return seconds


def _convert_queue_timeout(value: object) -> float | None:
    return queue_seconds("Tool", value)


def _one_of(
    option: str, allowed: tuple[str | None, ...]
) -> t.Callable[[object, t.Any, object], None]:
    def check(instance: object, attribute: object, value: object) -> None:
        if value not in allowed:
            shown = ", ".join(repr(a) for a in allowed)
            raise ValueError(f"Tool option '{option}' must be one of {shown}, got {value!r}")

    return check


def _check_parameters(instance: t.Any, attribute: object, value: t.Any) -> None:
    # The schema itself is checked when its validator is compiled (post-init).
    if value is not None and not isinstance(value, c.Mapping):
        raise TypeError(
            f"Tool option 'parameters' must be a JSON Schema mapping or None, "
            f"got {type(value).__name__}"
        )


def _check_registry(instance: object, attribute: object, value: t.Any) -> None:
    if value is not None:
        _code().check_registry(value)


def _check_retry_wait(instance: object, attribute: object, value: object) -> None:
    if value is not None and not callable(value):
        raise TypeError(
            "Tool option 'retry_wait' must be a tenacity wait strategy (a callable) or None, "
            f"got {type(value).__name__}"
        )


def _optional_bool(option: str) -> t.Callable[[object, t.Any, object], None]:
    def check(instance: object, attribute: object, value: object) -> None:
        if value is not None and not isinstance(value, bool):
            raise TypeError(
                f"Tool option '{option}' must be True, False or None, got {type(value).__name__}"
            )

    return check


def _strict_bool(option: str) -> t.Callable[[object, t.Any, object], None]:
    def check(instance: object, attribute: object, value: object) -> None:
        if not isinstance(value, bool):
            raise TypeError(
                f"Tool option '{option}' must be True or False, got {type(value).__name__}"
            )

    return check


def _to_retry_on(value: object) -> t.Any:
    """A tuple of exception classes stays a tuple; one class becomes a 1-tuple; a
    tenacity retry strategy (any other callable) is kept as it is."""
    if value is None:
        return None
    if isinstance(value, type):
        value = (value,)
    if isinstance(value, (tuple, list)):
        classes = tuple(value)
        for cls in classes:
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                raise TypeError(
                    "Tool option 'retry_on' must be exception classes or a tenacity retry "
                    f"strategy, got {cls!r} in the sequence"
                )
        return classes
    if callable(value):
        return value
    raise TypeError(
        "Tool option 'retry_on' must be a tuple of exception classes or a tenacity retry "
        f"strategy, got {type(value).__name__}"
    )


def _check_backend(instance: t.Any, attribute: object, value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            f"Tool option 'backend' must be a backend's name (a non-empty str) or None, "
            f"got {value!r}"
        )
    if instance.timeout is None:
        raise ValueError(
            f"Tool option 'backend' ({value!r}) needs a timeout: a tool without one runs "
            "inline in the caller's thread, on no backend"
        )
    if instance.isolation == "process" and value != "process":
        raise ValueError(
            f"Tool options isolation='process' and backend={value!r} disagree: "
            "isolation='process' is the backend 'process'; give one of them"
        )


def _at_least_one(option: str) -> t.Callable[[object, t.Any, object], None]:
    def check(instance: object, attribute: object, value: object) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"Tool option '{option}' must be an int >= 1 or None, got {value!r}")

    return check


def _check_rate_limit(instance: object, attribute: object, value: t.Any) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(
            "Tool option 'rate_limit' must be a rate such as '10/minute' or None, "
            f"got {type(value).__name__}"
        )
    parse_rate(value)  # a ValueError naming the option


def _check_max_result_chars(instance: object, attribute: object, value: object) -> None:
    if value is None or value == "executor":
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            "Tool option 'max_result_chars' must be an int >= 1, None (no limit) or "
            f"'executor' (the executor's), got {value!r}"
        )


def _to_description(value: object) -> str:
    return "" if value is None else str(value)


def _to_tags(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(t.cast(c.Iterable[str], value))


@attrs.frozen(slots=True, eq=False, repr=False)
class Tool(t.Generic[P, R]):
    """A callable with a name, a JSON Schema and the options that govern its execution.

    ``retries`` counts *extra* attempts (total attempts = retries + 1): **a tool is
    retried once by default** — except a tool that is ``approval="ask"`` or
    ``destructive=True``, which is not retried unless ``retries`` is given: an
    approved side effect is never repeated behind the person's back. ``retry_on``
    narrows which failures are retried (a tuple of exception classes, or a tenacity
    retry strategy; default: every ``Exception``) — a tool that charges a card can say
    ``retry_on=(ConnectionRefusedError,)``. ``timeout``
    is in seconds; None or 0 means no deadline and the tool runs inline in the
    caller's thread. ``approval`` is ``"auto"`` (run), ``"ask"`` (a person or a
    handler must approve each call) or ``"deny"`` (never run);
    ``requires_approval=True`` is the same as ``approval="ask"``.
    ``queue_timeout`` (seconds) bounds how long an attempt that runs in a child
    process (``isolation="process"``) waits for a free child; its ``timeout``
    counts from when a child takes it. A call that waited that long never
    started and gets ``Err(ExecutorSaturated)``, never a timeout. Default None:
    the executor's ``queue_timeout``, else the tool's ``timeout``.
    ``trusted_schema=False`` says that ``parameters`` comes from someone you do not
    trust (an MCP server's ``inputSchema``): a ``pattern`` in it that needs
    backtracking (lookaround, a backreference) is refused at construction, since a
    crafted text could make it take exponential time.

    Limits (``docs/concepts/limits.md``): ``max_concurrency`` (attempts at once in
    the executor), ``rate_limit`` (``"10/minute"``), ``max_calls_per_run`` (per
    ``RunContext.run_id``) refuse a call with ``Err(RateLimited)`` before it runs;
    ``max_result_chars`` (default ``"executor"``: the executor's, 100,000) caps the
    text of a result a model gets, and ``on_result_overflow="error"`` makes a longer
    one ``Err(ResultTooLarge)``.

    Tools compare and hash by identity.
    """

    name: str = attrs.field(validator=_check_name)
    function: t.Callable[P, R] = attrs.field(validator=_check_function)
    description: str = attrs.field(default="", converter=_to_description)
    parameters: c.Mapping[str, t.Any] | None = attrs.field(
        default=None, validator=_check_parameters
    )
    takes_ctx: bool = attrs.field(default=None)
    # The retries option as given (None: not given); ``retries`` is what applies.
    # attrs.evolve passes this on, so an explicit value stays and a default is
    # worked out again for the evolved tool.
    _retries_option: int | None = attrs.field(
        default=None, validator=_check_retries, alias="retries", repr=False
    )
    timeout: float | None = attrs.field(default=30.0, converter=_convert_timeout)
    validate_args: bool = attrs.field(default=True, converter=bool)
    approval: Approval = attrs.field(default="auto", validator=_one_of("approval", APPROVAL_LEVELS))
    category: str | None = None
    tags: tuple[str, ...] = attrs.field(default=(), converter=_to_tags)
    module: str | None = None
    retry_wait: t.Any = attrs.field(default=None, validator=_check_retry_wait)
    isolation: Isolation = attrs.field(
        default="thread", validator=_one_of("isolation", ISOLATION_MODES)
    )
    on_timeout: OnTimeout | None = attrs.field(
        default=None, validator=_one_of("on_timeout", (None, *ON_TIMEOUT_MODES))
    )
    # Types in, types out (issue 14): arguments converted to the function's
    # annotations; the schemas ``$ref`` may name besides the tool's own.
    convert_args: bool = attrs.field(default=True, converter=bool)
    schema_registry: referencing.Registry[t.Any] | None = attrs.field(
        default=None, validator=_check_registry
    )
    # MCP tool annotations (nous_tools.contrib.mcp): hints about the tool's effects,
    # published as readOnlyHint/destructiveHint/idempotentHint. None: not stated.
    read_only: bool | None = attrs.field(default=None, validator=_optional_bool("read_only"))
    destructive: bool | None = attrs.field(default=None, validator=_optional_bool("destructive"))
    idempotent: bool | None = attrs.field(default=None, validator=_optional_bool("idempotent"))
    # Which failures are retried: None (every Exception), exception classes, or a
    # tenacity retry strategy (e.g. tenacity.retry_if_exception_type(...)).
    retry_on: tuple[type[BaseException], ...] | c.Callable[..., t.Any] | None = attrs.field(
        default=None, converter=_to_retry_on
    )
    # Scale out (issue 16): the name of the backend its timed attempts run on,
    # resolved through ToolExecutor(backends={...}); None: the executor's default
    # (``isolation="process"``: the "process" backend).
    backend: str | None = attrs.field(default=None, validator=_check_backend)
    # Limits (issue 23; nous_tools._engine._admission, docs/concepts/limits.md): attempts at
    # once, calls per time window, calls per run, the length of the result's text.
    max_concurrency: int | None = attrs.field(
        default=None, validator=_at_least_one("max_concurrency")
    )
    rate_limit: str | None = attrs.field(default=None, validator=_check_rate_limit)
    max_calls_per_run: int | None = attrs.field(
        default=None, validator=_at_least_one("max_calls_per_run")
    )
    max_result_chars: int | t.Literal["executor"] | None = attrs.field(
        default="executor", validator=_check_max_result_chars
    )
    on_result_overflow: OnResultOverflow = attrs.field(
        default="truncate", validator=_one_of("on_result_overflow", ON_RESULT_OVERFLOW_MODES)
    )
    # Whether ``parameters`` comes from someone trusted (the tool's own author: the
    # default). An untrusted schema (an MCP server's) may not use patterns that need
    # backtracking: they can take exponential time on a crafted text.
    trusted_schema: bool = attrs.field(default=True, validator=_strict_bool("trusted_schema"))
    _requires_approval: bool | None = attrs.field(
        default=None, alias="requires_approval", repr=False
    )
    # How long a process-run attempt may wait for a free child process (its timeout
    # counts from when a child takes it); None: the executor's, else the timeout.
    queue_timeout: float | None = attrs.field(default=None, converter=_convert_queue_timeout)
    #: The fence the kernel holds the child process to (``isolation="process"``
    #: only): a :class:`~nous_tools.sandbox.SandboxPolicy`, a mode or a mapping.
    #: Stacks with the context's ``sandbox``: the child must pass both.
    sandbox: SandboxPolicy | None = attrs.field(
        default=None, converter=_to_sandbox, validator=_check_sandbox
    )
    #: Whether an MCP client may call it as a task (the ``io.modelcontextprotocol/tasks``
    #: extension): ``"optional"``, ``"required"`` or ``"never"``; None: ``"optional"``
    #: when ``timeout`` is None or over :data:`TASK_THRESHOLD` seconds, else ``"never"``
    #: (see :attr:`task_support`).
    task: t.Literal["optional", "required", "never"] | None = attrs.field(
        default=None, validator=_one_of("task", (None, *TASK_MODES))
    )
    #: Called as an MCP task (2026-07-28): the tool's first questions come before the
    #: task, in multi-round-trip rounds (``InputRequiredResult``), and the round that
    #: answers them creates the task, which goes on from there (its later questions
    #: wait in the task). False: the task is created at once and every question waits
    #: in it.
    ask_before_task: bool = attrs.field(default=False, validator=_strict_bool("ask_before_task"))
    #: Extra attempts after the first: the ``retries`` given, else 1 — or 0 for a tool
    #: that is ``approval="ask"`` or ``destructive=True``.
    retries: int = attrs.field(init=False, default=1)
    _validator: Validator | None = attrs.field(init=False, default=None, repr=False)
    _converter: Converter | None = attrs.field(init=False, default=None, repr=False)
    # None when the tool has no limit to enforce: the executor's one check for it.
    _limits: ToolLimits | None = attrs.field(init=False, default=None, repr=False)
    # The approval token digest, cached by results.tool_digest: (snapshot, digest).
    _digest: tuple[tuple[t.Any, ...], str] | None = attrs.field(
        init=False, default=None, repr=False
    )
    # Its provider definitions' parts, cached by nous_tools.registry._definitions: strict -> parts.
    _definition_parts: dict[bool, t.Any] | None = attrs.field(init=False, default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        code = _code()
        if self.takes_ctx is None:
            object.__setattr__(self, "takes_ctx", code.detect_takes_ctx(self.function))
        else:
            object.__setattr__(self, "takes_ctx", bool(self.takes_ctx))
        if self._requires_approval and self.approval == "auto":
            object.__setattr__(self, "approval", "ask")
        retries = self._retries_option
        if retries is None:
            retries = 0 if self.approval == "ask" or self.destructive is True else 1
        object.__setattr__(self, "retries", retries)
        if self.module is None:
            module = getattr(self.function, "__module__", None)
            object.__setattr__(self, "module", module if isinstance(module, str) else None)
        if self.parameters is not None:
            # Compiling checks the schema (a ValueError naming 'parameters'), and
            # the validator is kept when the arguments are validated.
            validator = code.validator(self.parameters, self.schema_registry, self.trusted_schema)
            if self.parameters and self.validate_args:
                object.__setattr__(self, "_validator", validator)
        if self.convert_args:
            object.__setattr__(self, "_converter", code.converter(self.function, self.takes_ctx))
        object.__setattr__(self, "_limits", tool_limits(self))

    @property
    def task_support(self) -> t.Literal["optional", "required", "never"]:
        """Whether an MCP client may call this tool as a task: ``task`` when given,
        else ``"optional"`` for a tool whose ``timeout`` is None (no deadline) or
        longer than :data:`TASK_THRESHOLD` (60 s), ``"never"`` otherwise."""
        if self.task is not None:
            return self.task
        long = self.timeout is None or self.timeout == 0 or self.timeout > TASK_THRESHOLD
        return "optional" if long else "never"

    @property
    def requires_approval(self) -> bool:
        """True when every call must be approved (``approval == "ask"``)."""
        return self.approval == "ask"

    @property
    def validator(self) -> Validator | None:
        """The compiled argument validator, or None when arguments are not validated."""
        return self._validator

    @classmethod
    def from_function(
        cls, function: t.Callable[_P, _R], **overrides: Unpack[ToolOptions]
    ) -> Tool[_P, _R]:
        """Make a tool of ``function``: name, description, ``takes_ctx`` and
        ``parameters`` come from it unless given in ``overrides``.

        Raises ``TypeError`` when a required parameter's annotation has no JSON Schema
        (see ``docs/concepts/types.md``), naming the parameter and the type.

        ``function`` may be a tool that ``registry.register`` made of a plain
        function (``@tool(...)`` written above ``@registry.register``): the options
        apply to that function, and the registry gets the new tool in its place. Any
        other :class:`Tool` is a ``TypeError`` saying which order to write."""
        if not callable(function):
            raise TypeError(
                f"Tool option 'function' must be callable, got {type(function).__name__}"
            )
        if isinstance(function, Tool):  # @tool(...) above @registry.register, say
            redecorate = _redecorate
            if redecorate is None:  # only when nous_tools/__init__.py did not run
                raise RuntimeError(
                    "nous_tools.tool has no re-decoration: nous_tools.registry registers it "
                    "(import nous_tools)"
                )
            return t.cast("Tool[_P, _R]", redecorate(function, overrides))
        options = _code().function_options(function, dict(overrides))
        return Tool(function=function, **options)

    def to_openai_schema(self, strict: bool = False) -> dict[str, t.Any]:
        """The tool as an OpenAI Chat Completions tool: ``{"type": "function",
        "function": {"name", "description", "parameters"}}``, plus ``"strict": true``
        in the function with ``strict=True`` (see :meth:`strict_parameters`)."""
        function: dict[str, t.Any] = {
            "name": self.name,
            "description": self.description or "No description provided",
            "parameters": self._definition_parameters(strict),
        }
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the wrapped function directly: no approval, validation, conversion or
        deadline."""
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return (
            f"Tool(name={self.name!r}, approval={self.approval!r}, "
            f"timeout={self.timeout!r}, retries={self.retries!r})"
        )

    # -- tool definitions for the providers (the agent loop) -----------------------

    def to_responses_schema(self, strict: bool = False) -> dict[str, t.Any]:
        """The tool as an OpenAI Responses API function tool: ``{"type": "function",
        "name", "description", "parameters", "strict"}`` (``strict`` is always sent:
        the Responses API takes a missing one as true)."""
        return {
            "type": "function",
            "name": self.name,
            "description": self.description or "No description provided",
            "parameters": self._definition_parameters(strict),
            "strict": bool(strict),
        }

    def to_anthropic_schema(self) -> dict[str, t.Any]:
        """The tool as an Anthropic Messages API tool: ``{"name", "description",
        "input_schema"}``."""
        return {
            "name": self.name,
            "description": self.description or "No description provided",
            "input_schema": self._definition_parameters(False),
        }

    def strict_parameters(self) -> dict[str, t.Any]:
        """The parameters schema in OpenAI's strict form: every property listed in
        ``required``, ``"additionalProperties": false`` on every object, each
        optional parameter a union with ``null``, ``default`` left out.

        A ``None`` the model then sends for an optional parameter becomes the
        parameter's default: :func:`~nous_tools.execute_tool_calls` drops it before
        the call (before approval and validation), so the function's own default
        applies. Raises ``ValueError`` naming the keyword when the schema cannot be
        made strict (a ``dict[str, X]`` parameter's ``additionalProperties``, a
        set's ``uniqueItems``, a tuple's ``prefixItems``, ``minLength``, a value of
        any type, ...).
        """
        try:
            return _code().strict_schema(self._definition_parameters(False))
        except ValueError as exc:
            raise ValueError(f"Tool '{self.name}' cannot be made strict: {exc}") from None

    def _definition_parameters(self, strict: bool) -> dict[str, t.Any]:
        if strict:
            return self.strict_parameters()
        if not self.parameters:
            return {"type": "object", "properties": {}, "required": []}
        return copy.deepcopy(dict(self.parameters))


@t.overload
def tool(function: t.Callable[_P, _R], /, **options: Unpack[ToolOptions]) -> Tool[_P, _R]: ...
@t.overload
def tool(
    function: None = None, /, **options: Unpack[ToolOptions]
) -> t.Callable[[t.Callable[_P, _R]], Tool[_P, _R]]: ...
def tool(
    function: t.Callable[..., t.Any] | None = None, /, **options: Unpack[ToolOptions]
) -> Tool[..., t.Any] | t.Callable[[t.Callable[..., t.Any]], Tool[..., t.Any]]:
    """Decorator: ``@tool`` or ``@tool(timeout=5, approval="ask", ...)`` makes a :class:`Tool`.

    The tool keeps the function's signature for type checkers (a ``Tool[P, R]`` is
    called as the function is), and an unknown option (``@tool(timout=5)``) is a
    type error as well as a ``TypeError`` at run time."""
    if function is not None:
        return Tool.from_function(function, **options)

    def decorate(fn: t.Callable[..., t.Any]) -> Tool[..., t.Any]:
        return Tool.from_function(fn, **options)

    return decorate
