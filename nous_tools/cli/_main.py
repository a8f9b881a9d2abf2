"""The ``nous-tools`` command line (also ``python -m nous_tools``).

The commands:

* ``nous-tools run MODULE:ATTR [--args JSON|@FILE|- | --batch FILE|-] [--deps JSON|@FILE]
  [--timeout S] [--retries N] [--approve prompt|yes|no] [--json] [--trace] [-v]``
  imports a :class:`~nous_tools.Tool` (or a plain function, made a tool with
  :meth:`Tool.from_function`, or ``REGISTRY.NAME``, a tool of a
  :class:`~nous_tools.Registry`), runs it through a :class:`~nous_tools.ToolExecutor`
  and prints its value (``--batch``: once per line of arguments, concurrently,
  one result a line); what the tool reports (``ctx.report_progress``,
  ``ctx.log``) is shown on stderr, as a progress bar on a terminal;
* ``nous-tools list MODULE [--openai | --responses | --anthropic]`` lists what ``run``
  can run in a module: its ``Tool`` objects, the tools of its ``Registry`` objects
  and its plain public functions, as a table or as tool definitions for a provider;
* ``nous-tools demo`` runs the built-in demo toolbox;
* ``nous-tools serve MODULE[:ATTR] [--http PORT] [--host HOST] [--auth-token TOKEN]
  [--allowed-hosts HOSTS] [--insecure]`` publishes tools as an MCP server, over
  stdio or Streamable HTTP (needs the ``mcp`` extra); a non-loopback host needs a
  bearer token and the allowed Host names.
* ``nous-tools journal list|show|settle|prune DSN_OR_PATH ...`` inspects a call
  journal (an SQLite file, or a PostgreSQL DSN): the calls whose outcome is
  unknown, one call's record, settling one, pruning old records.
* ``nous-tools sandbox probe [--json]`` proves which kernel mechanisms the
  sandbox has on this host and prints the grade.

Exit status: 0 when the tool returned ``Ok``, 1 on ``Err`` (one line on stderr
naming the tool and the cause), 2 on usage errors (a module that cannot be
imported, a missing attribute, bad JSON, an unknown option), 130 on Ctrl-C.

The library never imports this module.
"""

from __future__ import annotations

import argparse
import collections.abc as c
import contextlib
import os
import sys
import traceback

from nous_tools.cli._arguments import _port_option, _retries_option, _seconds_option
from nous_tools.cli._console import (
    _PROG,
    EXIT_ERR,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    UsageError,
    _Console,
    _library_logging,
    _write_stdout,
)
from nous_tools.cli._journal import _add_journal_parser, _command_journal
from nous_tools.cli._list import _command_list
from nous_tools.cli._run import _command_run
from nous_tools.cli._sandbox import _add_sandbox_parser, _command_sandbox
from nous_tools.cli._serve import _command_serve

__all__ = ["main"]

#: The folder of the command line's modules: their frames are not the user's code.
_HERE = os.path.dirname(__file__)


def _command_demo(options: argparse.Namespace) -> int:
    from nous_tools.demo import run_demo

    return run_demo(_write_stdout)


# -- the parser -------------------------------------------------------------------


def _build_parser() -> argparse.ArgumentParser:
    from nous_tools import __version__

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="show the library's log on stderr (-v: info, -vv: debug)",
    )
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="Run the tools an LLM agent calls: approval, validation, deadlines, retries.",
        epilog="exit status: 0 ok, 1 the tool failed, 2 usage error, 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        parents=[common],
        help="run one tool and print its value",
        description="Import MODULE:ATTR (a Tool, a function made a Tool, or REGISTRY.NAME: a "
        "tool of a Registry, run through the registry and its advice) and run it once. "
        "'nous-tools list MODULE' shows what can be run.",
    )
    run.add_argument("target", metavar="MODULE:ATTR", help="where the tool is, e.g. mytools:search")
    run.add_argument(
        "--args",
        metavar="JSON|@FILE|-",
        help="the arguments: a JSON object, @file.json, or - for stdin (default: {})",
    )
    run.add_argument(
        "--batch",
        metavar="FILE|-",
        help="run the tool once per call in FILE (- for stdin): JSON Lines, or a JSON array, "
        "of argument objects; the calls run concurrently, one result a line, in order",
    )
    run.add_argument(
        "--deps",
        metavar="JSON|@FILE",
        help="for a tool that takes a context: its RunContext.deps, a JSON object or "
        "@file.json (default: none)",
    )
    run.add_argument(
        "--timeout", type=_seconds_option, metavar="S", help="override the tool's timeout (0: none)"
    )
    run.add_argument(
        "--retries", type=_retries_option, metavar="N", help="override the tool's extra attempts"
    )
    run.add_argument(
        "--approve",
        choices=("prompt", "yes", "no"),
        help="for an 'ask' tool: ask on the terminal, approve, or reject "
        "(default: prompt when stdin is a terminal, else reject)",
    )
    run.add_argument(
        "--json",
        action="store_true",
        help='print one JSON object: {"ok": ..., "value"|"error": ...}',
    )
    run.add_argument("--trace", action="store_true", help="print each signal on stderr")

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

    serving = commands.add_parser(
        "serve",
        parents=[common],
        help="serve tools as an MCP server (stdio, or Streamable HTTP with --http)",
        description="Publish MODULE's tools (or the Registry, Tool or list MODULE:ATTR names) "
        "as an MCP server. Each call runs through the registry: approval (asked of the "
        "client), validation, deadlines, signals. Needs: pip install 'nous-tools[mcp]'.",
    )
    serving.add_argument("target", metavar="MODULE[:ATTR]")
    serving.add_argument(
        "--http", type=_port_option, metavar="PORT", help="serve Streamable HTTP on PORT"
    )
    serving.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)"
    )
    serving.add_argument(
        "--auth-token",
        metavar="TOKEN",
        help="require 'Authorization: Bearer TOKEN' (default: $NOUS_TOOLS_SERVE_TOKEN; "
        "needed on a non-loopback --host)",
    )
    serving.add_argument(
        "--allowed-hosts",
        metavar="HOST[,HOST...]",
        help="the Host names clients use, checked on every request (needed on a "
        "non-loopback --host)",
    )
    serving.add_argument(
        "--allowed-origins",
        metavar="ORIGIN[,ORIGIN...]",
        help="the browser origins allowed (default: http(s) origins of --allowed-hosts)",
    )
    serving.add_argument(
        "--insecure",
        action="store_true",
        help="serve on a non-loopback --host without a token or a Host check (warns)",
    )

    _add_journal_parser(commands, common)
    _add_sandbox_parser(commands, common)

    commands.add_parser(
        "demo",
        parents=[common],
        help="run the built-in demo toolbox and print a report",
        description="Run a small built-in toolbox end to end and report each case.",
    )
    return parser


def _user_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` from the first frame outside the command line's own
    modules and importlib, as Python shows an import error of a script: the user's
    own code."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        filename = tb.tb_frame.f_code.co_filename
        if os.path.dirname(filename) != _HERE and "importlib" not in filename:
            break
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()


def main(argv: c.Sequence[str] | None = None) -> int:
    """Entry point of ``nous-tools``; returns the exit status.

    argparse itself exits with status 2 on an unknown option or a bad value.
    """
    parser = _build_parser()
    options = parser.parse_args(argv)
    if options.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    console = _Console(sys.stderr)
    try:
        with _library_logging(options.verbose, console):
            if options.command == "run":
                return _command_run(options, console)
            if options.command == "list":
                return _command_list(options, console)
            if options.command == "serve":
                return _command_serve(options)
            if options.command == "journal":
                return _command_journal(options)
            if options.command == "sandbox":
                return _command_sandbox(options)
            return _command_demo(options)
    except UsageError as exc:
        if options.verbose and exc.detail is not None:
            console.line(_user_traceback(exc.detail))
        console.line(f"{_PROG}: error: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        console.line(f"{_PROG}: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (``| head``): stop quietly.
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_ERR
