"""Static checks of what running a tool returns, run by ``mypy --strict`` in ``make lint``.

Nothing here is run by pytest. Each ``# type: ignore[code]`` is an expected error:
``warn_unused_ignores`` (part of ``--strict``) fails the check when one is not raised.
"""

from __future__ import annotations

import typing as t

from typing_extensions import assert_type

from nous_tools import (
    ApprovalRequest,
    Edit,
    Err,
    NeedsApproval,
    Ok,
    Registry,
    RunContext,
    Tool,
    ToolError,
    ToolExecutor,
    execute,
    tool,
)


@tool
def add(a: int, b: int = 0) -> int:
    return a + b


@tool
def lookup(ctx: RunContext[dict[str, str]], key: str) -> Ok[str]:
    return Ok(ctx.deps[key])


@tool
def parse(text: str) -> Ok[int] | Err[str]:
    return Ok(int(text)) if text.isdigit() else Err("not a number")


@tool
def refuse(text: str) -> Err[str]:
    return Err(text)


def checks(executor: ToolExecutor, registry: Registry) -> None:
    """Never called: mypy reads it, pytest's doctest collection imports the module."""
    # The tool's return type reaches the result, and an Err's reason is a ToolError.
    assert_type(execute(add, {"a": 1}), Ok[int] | Err[ToolError])
    assert_type(executor.execute(add, {"a": 1}), Ok[int] | Err[ToolError])
    assert_type(registry.execute(add, {"a": 1}), Ok[int] | Err[ToolError] | NeedsApproval)

    # A tool that returns Ok/Err itself: its own types come through.
    assert_type(execute(lookup, {"key": "k"}), Ok[str] | Err[ToolError])
    assert_type(execute(parse, {"text": "1"}), Ok[int] | Err[ToolError | str])
    assert_type(execute(refuse, {"text": "no"}), Err[ToolError | str])

    # Narrowing, matching, unwrapping.
    result = execute(add, {"a": 1})
    if isinstance(result, Err):
        assert_type(result.reason, ToolError)
        assert_type(result.reason.message, str)
    else:
        assert_type(result.value, int)
    match result:
        case Ok(value):
            assert_type(value, int)
        case Err(reason):
            assert_type(reason, ToolError)
    assert_type(result.unwrap(), int)
    assert_type(result.unwrap_err(), ToolError)
    print(result.reason)  # type: ignore[union-attr]  # narrow first, or unwrap_err()

    # By name, the registry cannot know the tool: Any value and reason.
    assert_type(registry.execute("add", {"a": 1}), Ok[t.Any] | Err[t.Any] | NeedsApproval)

    # A bare Err and a bare RunContext are Err[Any] and RunContext[Any].
    bare: Err = Err("x")
    assert_type(bare.reason, t.Any)
    context: RunContext = RunContext.new({"k": "v"})
    assert_type(context.deps, t.Any)

    # A tool whose return type is unknown gives an unknown result.
    unknown: Tool = add
    assert_type(execute(unknown, {}), t.Any)


def approval_checks(registry: Registry) -> None:
    """Never called. A handler annotated with ``ApprovalRequest`` is an approval
    handler; a pending call is a ``NeedsApproval``, neither ``Ok`` nor ``Err``."""

    def only_add(request: ApprovalRequest) -> str | Edit:
        return "approve" if request.name == "add" else Edit(dict(request.arguments))

    RunContext.new(approval_handler=only_add)
    result = registry.execute("add", {"a": 1})
    if isinstance(result, NeedsApproval):
        assert_type(result.to_dict("secret"), dict[str, t.Any])
    else:
        assert_type(result, Ok[t.Any] | Err[t.Any])


def option_checks() -> None:
    """Never called. ``retry_on`` is an option of ``Tool.from_function`` and ``@tool``."""
    Tool.from_function(add.function, retry_on=(ConnectionError,))
    tool(retry_on=ConnectionError)(add.function)
    Tool.from_function(add.function, retry_on="everything")  # type: ignore[arg-type]
