"""``nous-tools list``: what ``run`` can run in a module, or its tool definitions (private)."""

from __future__ import annotations

import argparse
import collections.abc as c
import typing as t

from nous_tools.cli._console import (
    _PROG,
    EXIT_OK,
    UsageError,
    _Console,
    _dumps,
    _seconds,
    _write_stdout,
)
from nous_tools.cli._targets import _import_module, _runnable
from nous_tools.tool import Tool

__all__: list[str] = []


def _timeout_label(tool: Tool) -> str:
    return f"{_seconds(tool.timeout)} s" if tool.timeout else "none"


#: ``list``'s definition formats: option name → how a tool is written in it.
_DEFINITIONS: dict[str, c.Callable[[Tool], dict[str, t.Any]]] = {
    "openai": Tool.to_openai_schema,
    "responses": Tool.to_responses_schema,
    "anthropic": Tool.to_anthropic_schema,
}


def _command_list(options: argparse.Namespace, console: _Console) -> int:
    name: str = options.module
    if ":" in name:
        raise UsageError(f"list takes a MODULE, not MODULE:ATTR: {name!r}")
    runnables, notes = _runnable(_import_module(name))
    for note in notes:
        console.line(f"{_PROG}: {note}")
    if options.format is not None:
        write = _DEFINITIONS[options.format]
        _write_stdout(_dumps([write(runnable.tool) for runnable in runnables], indent=2))
        return EXIT_OK
    if not runnables:
        console.line(f"{_PROG}: module '{name}' has no tools, registries or public functions")
        return EXIT_OK
    rows = [("NAME", "APPROVAL", "TIMEOUT", "RETRIES", "RUN", "DESCRIPTION")]
    for runnable in runnables:
        tool = runnable.tool
        lines = tool.description.strip().splitlines()
        rows.append(
            (
                tool.name,
                tool.approval,
                _timeout_label(tool),
                str(tool.retries),
                runnable.target,
                lines[0] if lines else "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        _write_stdout("  ".join([*cells, row[-1]]).rstrip())
    return EXIT_OK


def _add_list_parser(commands: t.Any, common: argparse.ArgumentParser) -> None:
    """``nous-tools list``: what ``run`` can run in a module, or its definitions."""
    listing = commands.add_parser(
        "list",
        parents=[common],
        help="list what run can run in a module",
        description="List what 'run' can run in MODULE, sorted by name: its Tool objects, "
        "the tools of its Registry objects (run them as MODULE:REGISTRY.NAME), and the "
        "public functions defined in it. With --openai, --responses or --anthropic, print "
        "their tool definitions in that provider's shape, as a JSON array.",
    )
    listing.add_argument("module", metavar="MODULE")
    shapes = listing.add_mutually_exclusive_group()
    shapes.add_argument(
        "--openai",
        dest="format",
        action="store_const",
        const="openai",
        help="print OpenAI Chat Completions tool definitions",
    )
    shapes.add_argument(
        "--responses",
        dest="format",
        action="store_const",
        const="responses",
        help="print OpenAI Responses API tool definitions",
    )
    shapes.add_argument(
        "--anthropic",
        dest="format",
        action="store_const",
        const="anthropic",
        help="print Anthropic Messages API tool definitions",
    )
