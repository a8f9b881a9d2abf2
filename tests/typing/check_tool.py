"""Static checks of ``@tool`` and ``Tool``'s types, run by ``mypy --strict`` in ``make lint``.

Nothing here is run by pytest. Each ``# type: ignore[code]`` is an expected error:
``warn_unused_ignores`` (part of ``--strict``) fails the check when one is not raised.
"""

from __future__ import annotations

import datetime as dt
import typing as t

from typing_extensions import assert_type

from nous_tools import Ok, RunContext, Tool, ToolOptions, tool


@tool
def add(a: int, b: int = 0) -> int:
    return a + b


@tool(timeout=5, retries=2, approval="ask", tags=("math",))
def later(when: dt.datetime, *, note: str = "") -> dt.datetime:
    return when


@tool()
def lookup(ctx: RunContext[dict[str, str]], key: str) -> Ok[str]:
    return Ok(ctx.deps[key])


def checks() -> None:
    """Never called: mypy reads it, pytest's doctest collection imports the module."""
    # The decorated function keeps its signature and its return type.
    assert_type(add(1, 2), int)
    assert_type(add(1), int)
    assert_type(later(dt.datetime.now(), note="x"), dt.datetime)
    assert_type(lookup(RunContext.new({"k": "v"}), "k"), Ok[str])
    add("1")  # type: ignore[arg-type]
    add(1, 2, 3)  # type: ignore[call-arg]
    later(dt.datetime.now(), "positional")  # type: ignore[call-arg]

    # The function is there with its type, too.
    assert_type(add.function(1, 2), int)

    # An unknown or mistyped option is a type error.
    tool(timout=5)  # type: ignore[call-overload]
    tool(approval="maybe")  # type: ignore[call-overload]
    Tool.from_function(add.function, retries="3")  # type: ignore[arg-type]
    Tool.from_function(add.function, retrys=3)  # type: ignore[call-arg]

    # Tool.from_function and Tool(...) infer the same types as the decorator.
    assert_type(Tool.from_function(add.function)(1, 2), int)
    assert_type(Tool(name="n", function=add.function)(1), int)

    # A bare Tool is Tool[..., Any]: every tool fits where one is expected.
    tools: list[Tool] = [add, later, lookup]
    assert_type(tools[0](1, "anything", key=object()), t.Any)

    options: ToolOptions = {"timeout": 1.0, "convert_args": False}
    assert_type(tool(**options)(add.function)(1), int)
