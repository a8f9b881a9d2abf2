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
from nous_tools.cli._list import _add_list_parser, _command_list
from nous_tools.cli._run import _add_run_parser, _command_run
from nous_tools.cli._sandbox import _add_sandbox_parser, _command_sandbox
from nous_tools.cli._serve import _add_serve_parser, _command_serve

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

    _add_run_parser(commands, common)
    _add_list_parser(commands, common)
    _add_serve_parser(commands, common)
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
