"""The code tool: a :class:`~nous_tools.Tool` a model calls with a program (private;
made by :meth:`Registry.code_tool <nous_tools.Registry.code_tool>`).

Its description lists the functions a program may call, with their signatures and
one-line docs, generated from the registry; its one argument is the code; its
result is what :meth:`Registry.run_program <nous_tools.Registry.run_program>`
returned: ``{"result", "stdout"}`` for a program that ran to its end, the
``Err`` of one that failed, or (a nested call waiting for a person) the
:class:`~nous_tools.ProgramPaused`, which a batch of model tool calls shows as
its waiting nested calls.
"""

from __future__ import annotations

import collections.abc as c
import typing as t

import attrs

from nous_tools.approval import ApprovalRequest
from nous_tools.program._calling import call_id
from nous_tools.program._run import DEFAULT_MAX_CALLS, DEFAULT_TIMEOUT, functions_of, run_program
from nous_tools.program._values import ProgramOutput, ProgramPaused
from nous_tools.results import Err, Ok, Result
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool

if t.TYPE_CHECKING:
    from nous_tools.program._registry import RegistryLike

__all__ = ["as_tool_result", "code_tool", "describe", "is_code_tool", "signature"]

_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}


def _type_of(schema: object) -> str:
    if not isinstance(schema, c.Mapping):
        return "Any"
    kind = schema.get("type")
    if isinstance(kind, str):
        return _TYPES.get(kind, kind)
    if isinstance(kind, list):
        return " | ".join(_TYPES.get(k, str(k)) for k in kind)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            return " | ".join(_type_of(o) for o in options)
    if "enum" in schema:
        return "Literal[" + ", ".join(repr(v) for v in schema["enum"]) + "]"
    return "Any"


def signature(tool: Tool) -> str:
    """``name(a: int, b: str = 'x')`` of ``tool``, from its parameters' schema."""
    parameters = tool.parameters or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    parts = []
    for name, schema in properties.items():
        text = f"{name}: {_type_of(schema)}"
        if name not in required:
            default = schema.get("default") if isinstance(schema, c.Mapping) else None
            text += f" = {default!r}"
        parts.append(text)
    return f"{tool.name}({', '.join(parts)})"


def describe(registry: RegistryLike, functions: c.Sequence[str]) -> str:
    """The code tool's description: what a program is, and each function it may
    call with its signature and the first line of its description."""
    lines = [
        "Run a short Python program and get back its result. Prefer it to many "
        "separate tool calls: loop, call the functions below, keep what matters.",
        "Each function takes keyword arguments only (also reachable as "
        "tools.<name>); a call that fails raises ToolError (its message says why), "
        "which the program may catch. The program's result is the value it assigns "
        "to `result`, else the value of its final expression; what it prints is "
        "returned as stdout. It has no network and cannot write files.",
        "",
        "Functions:",
    ]
    for name in functions:
        tool = registry.lookup(name)
        if tool is None:
            continue
        doc = (tool.description or "").strip().splitlines()
        line = f"- {signature(tool)}"
        if doc and doc[0].strip():
            line += f": {doc[0].strip()}"
        lines.append(line)
    return "\n".join(lines)


def code_tool(
    registry: RegistryLike,
    name: str = "run_python",
    tools: c.Iterable[str] | None = None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    sandbox: t.Any = None,
    max_calls: int = DEFAULT_MAX_CALLS,
) -> Tool:
    """:meth:`Registry.code_tool <nous_tools.Registry.code_tool>`."""
    names = [n for n in (registry.names() if tools is None else list(tools)) if n != name]
    functions = functions_of(registry, names)

    run = _Runner(registry, functions, timeout, sandbox, max_calls)
    return Tool.from_function(
        run,
        name=name,
        description=describe(registry, functions),
        timeout=None,
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The Python program to run."}},
            "required": ["code"],
            "additionalProperties": False,
        },
    )


class _Runner:
    """A code tool's function: a callable object, so that the approval tokens of its
    calls identify it by its class and code (a closure over a registry could not
    be represented in a token). Its calls are never journaled under their own id
    (``_nous_unjournaled``, which the journal's step honours): a paused program is
    no outcome, and the same call again runs the program again, each of its nested
    calls answered by the journal under ``"<program id>/<position>"``."""

    _nous_unjournaled = True

    def __init__(
        self,
        registry: RegistryLike,
        functions: tuple[str, ...],
        timeout: float | None,
        sandbox: t.Any,
        max_calls: int,
    ) -> None:
        self.registry = registry
        self.functions = functions
        self.timeout = timeout
        self.sandbox = sandbox
        self.max_calls = max_calls

    def __call__(self, ctx: RunContext[t.Any], code: str) -> t.Any:
        """Run ``code`` as a program (its id: the model's call id in a batch)."""
        program_id = call_id() or ctx.idempotency_key
        if ctx.approval_handler is None and ctx.elicitor is not None:
            # Served over MCP (or given an elicitor): a nested "ask" call asks the
            # person there, as a served "ask" tool does, and the program goes on.
            ctx = attrs.evolve(ctx, approval_handler=_Asker(ctx))
        outcome = run_program(
            self.registry,
            code,
            ctx,
            timeout=self.timeout,
            sandbox=self.sandbox,
            max_calls=self.max_calls,
            tools=self.functions,
            program_id=program_id,
        )
        return as_tool_result(outcome)


def is_code_tool(tool: Tool) -> bool:
    """Whether ``tool`` is a code tool (made by :func:`code_tool`)."""
    return isinstance(tool.function, _Runner)


class _Asker:
    """An approval handler that asks through ``ctx.elicit``: accept is approve."""

    def __init__(self, ctx: RunContext[t.Any]) -> None:
        self.ctx = ctx

    def __call__(self, request: ApprovalRequest) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in request.arguments.items())
        if len(shown) > 500:
            shown = shown[:497] + "..."
        answer = self.ctx.elicit(
            f"A program wants to run tool '{request.name}'({shown}). Approve?",
            {"type": "object", "properties": {}},
        )
        return "approve" if answer.action == "accept" else "reject"


def as_tool_result(outcome: Result | ProgramPaused) -> t.Any:
    """What a code tool returns of a program's outcome: ``{"result", "stdout"}`` of
    an ``Ok``, an ``Err`` as it is, a :class:`ProgramPaused` as its value."""
    if isinstance(outcome, Ok) and isinstance(outcome.value, ProgramOutput):
        return Ok(outcome.value.to_dict())
    if isinstance(outcome, Err | Ok):
        return outcome
    return Ok(outcome)
