"""``nous-tools run``: one tool, or a ``--batch`` of calls, and the approval prompt (private)."""

from __future__ import annotations

import argparse
import collections.abc as c
import contextlib
import sys
import typing as t

import attrs

from nous_tools import content as _content
from nous_tools._util._text import safe_str as _safe_str
from nous_tools.approval import ApprovalRequest, Edit
from nous_tools.cli._arguments import (
    _deps_hint,
    _NotRetriedWithoutDeps,
    _parse_json_object,
    _read_arguments,
    _read_batch,
    _read_deps,
    _retries_option,
    _seconds_option,
)
from nous_tools.cli._console import (
    _PROG,
    EXIT_ERR,
    EXIT_OK,
    UsageError,
    _Console,
    _dumps,
    _isatty,
    _json_payload,
    _one_line,
    _render_value,
    _write_stdout,
)
from nous_tools.cli._progress import ProgressView
from nous_tools.cli._targets import _resolve, _with_overrides
from nous_tools.cli._trace import Receiver, _LiveLine, _trace_receivers
from nous_tools.errors import ToolError
from nous_tools.executor import ToolCall, ToolExecutor
from nous_tools.registry import Registry
from nous_tools.results import Err, Ok, Result
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool

__all__: list[str] = []

# -- approval on a terminal -------------------------------------------------------


class _Approver:
    """The approval handler of ``run``: ``--approve yes``, ``no`` or ``prompt``.

    ``mode`` None means "not asked, and no terminal to ask on": the call is
    rejected with a message that says how to approve it. ``refusal`` is the cause
    the command reports when this handler rejected the call.
    """

    def __init__(self, mode: str | None) -> None:
        self.mode = mode
        self.refusal: str | None = None

    def __call__(self, request: ApprovalRequest) -> str | Edit:
        name = request.name
        if self.mode == "yes":
            return "approve"
        if self.mode == "no":
            self.refusal = f"Tool '{name}' was rejected (--approve no)"
            return "reject"
        if self.mode is None:
            self.refusal = (
                f"Tool '{name}' requires approval and stdin is not a terminal; "
                "pass --approve yes to approve it, or run it on a terminal (--approve prompt)"
            )
            return "reject"
        return self._prompt(request)

    def _prompt(self, request: ApprovalRequest) -> str | Edit:
        with _terminal() as io:
            if io is None:
                self.refusal = (
                    f"Tool '{request.name}' requires approval, but there is no terminal "
                    "to ask on; pass --approve yes to approve it"
                )
                return "reject"
            reader, writer = io
            return self._ask(request, reader, writer)

    def _ask(self, request: ApprovalRequest, reader: t.TextIO, writer: t.TextIO) -> str | Edit:
        def say(text: str) -> None:
            writer.write(text)
            writer.flush()

        description = request.tool.description.strip()
        shown = "\n".join("  " + line if line.strip() else "" for line in description.splitlines())
        say(
            f"{_PROG}: tool '{request.name}' needs approval\n"
            + (f"{shown}\n" if shown else "")
            + f"  arguments: {_dumps(dict(request.arguments), ascii_only=False)}\n"
        )
        while True:
            say("approve / reject / edit [a/r/e]? ")
            answer = reader.readline()
            if not answer:
                say("\n")
                self.refusal = f"Tool '{request.name}' was not approved (no answer)"
                return "reject"
            choice = answer.strip().lower()
            if choice in ("a", "approve", "y", "yes"):
                return "approve"
            if choice in ("r", "reject", "n", "no"):
                self.refusal = f"Tool '{request.name}' was rejected at the prompt"
                return "reject"
            if choice in ("e", "edit"):
                edited = self._edit(reader, say)
                if edited is not None:
                    return edited
                continue
            say("  please answer a (approve), r (reject) or e (edit)\n")

    @staticmethod
    def _edit(reader: t.TextIO, say: c.Callable[[str], None]) -> Edit | None:
        """Read new arguments (one line of JSON); None (back to the question) on an empty line."""
        while True:
            say("new arguments (a JSON object on one line; empty to go back): ")
            line = reader.readline()
            if not line.strip():
                if not line:
                    say("\n")
                return None
            try:
                return Edit(_parse_json_object(line.rstrip("\r\n"), "the new arguments"))
            except UsageError as exc:
                say(f"  {exc}\n")


@contextlib.contextmanager
def _terminal() -> c.Iterator[tuple[t.TextIO, t.TextIO] | None]:
    """A terminal to prompt on: stdin/stderr when they are terminals, else ``/dev/tty``."""
    reader: t.TextIO | None = sys.stdin if _isatty(sys.stdin) else None
    writer: t.TextIO | None = sys.stderr if _isatty(sys.stderr) else None
    opened: list[t.TextIO] = []
    try:
        if reader is None or writer is None:
            try:
                if reader is None:
                    reader = open("/dev/tty", encoding="utf-8")  # noqa: SIM115
                    opened.append(reader)
                if writer is None:
                    writer = open("/dev/tty", "w", encoding="utf-8")  # noqa: SIM115
                    opened.append(writer)
            except OSError:
                yield None
                return
        yield reader, writer
    finally:
        for stream in opened:
            stream.close()


# -- commands ---------------------------------------------------------------------


def _error_fields(reason: object, tool: Tool, refusal: str | None) -> dict[str, t.Any]:
    """``type``, ``message``, ``tool`` and ``attempt`` of an ``Err``'s reason."""
    if refusal is not None:
        message = refusal
    elif isinstance(reason, ToolError):
        message = reason.message
    else:
        message = _safe_str(reason)
    attempt = getattr(reason, "attempt", None)
    return {
        "type": type(reason).__name__,
        "message": _one_line(message) or type(reason).__name__,
        "tool": tool.name,
        "attempt": attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
    }


def _report(
    result: Result,
    tool: Tool,
    approver: _Approver,
    as_json: bool,
    hint: str | None = None,
    index: int | None = None,
) -> int:
    """Print one outcome (``index``: its place in a ``--batch``); its exit status."""
    head: dict[str, t.Any] = {} if index is None else {"index": index}
    if isinstance(result, Ok):
        value = result.value
        parts = _content.as_content(value)
        if as_json:
            if parts is not None:  # images, audio, resources: bytes in base64
                shown = [_content.to_json(part) for part in parts]
                value = shown[0] if type(result.value) in _CONTENT_TYPES else shown
            _write_stdout(_json_payload({**head, "ok": True, "value": value}))
        else:
            _write_stdout(_content.to_text(parts) if parts is not None else _render_value(value))
        return EXIT_OK
    error = _error_fields(result.reason, tool, approver.refusal or hint)
    if as_json:
        _write_stdout(_json_payload({**head, "ok": False, "error": error}))
    else:
        which = "" if index is None else f"call {index}: "
        print(f"{_PROG}: {which}tool '{tool.name}' failed: {error['message']}", file=sys.stderr)
    return EXIT_ERR


_CONTENT_TYPES = t.get_args(_content.Content)


def _command_run(options: argparse.Namespace, console: _Console) -> int:
    found, registry = _resolve(options.target)
    tool = _with_overrides(found, options.timeout, options.retries)
    if options.batch is not None and options.args is not None:
        raise UsageError("give the arguments with --args or --batch, not both")
    batch = _read_batch(options.batch) if options.batch is not None else None
    arguments = _read_arguments(options.args)
    deps = _read_deps(options.deps, tool)
    without_deps = deps is None and tool.takes_ctx
    if without_deps and tool.retries:
        tool = attrs.evolve(tool, retry_on=_NotRetriedWithoutDeps(tool.retry_on))
    mode = options.approve
    if mode is None and _isatty(sys.stdin) and batch is None:
        mode = "prompt"
    approver = _Approver(mode)
    ctx = RunContext.new(deps, approval_handler=approver)

    terminal = _isatty(sys.stderr) and not options.json
    live = _LiveLine(console) if terminal and batch is None else None
    view = ProgressView(
        console,
        terminal=terminal,
        verbose=options.verbose,
        calls=None if batch is None else len(batch),
        on_bar=live.suspend if live is not None else None,
    )
    connected: list[tuple[t.Any, Receiver]] = []
    if options.trace:
        connected += _trace_receivers(console)
    if live is not None:
        connected += live.receivers()
    connected += view.receivers()
    for signal, receiver in connected:
        signal.connect(receiver, weak=False)
    try:
        outcomes = _run_calls(tool, found, registry, batch, arguments, ctx, view)
    finally:
        for signal, receiver in connected:
            signal.disconnect(receiver)
        if live is not None:
            live.close()
        view.close()
    # With an approval handler in ctx, the registry never answers NeedsApproval.
    results = [
        outcome
        if isinstance(outcome, (Ok, Err))
        else Err(ToolError("the registry answered NeedsApproval", tool_name=tool.name))
        for outcome in outcomes
    ]
    status = EXIT_OK
    for index, result in enumerate(results):
        hint = _deps_hint(result) if without_deps else None
        shown = None if batch is None else index
        status = max(status, _report(result, tool, approver, options.json, hint, shown))
    return status


def _run_calls(
    tool: Tool,
    found: Tool,
    registry: Registry | None,
    batch: list[t.Any] | None,
    arguments: t.Any,
    ctx: RunContext[t.Any],
    view: ProgressView,
) -> list[t.Any]:
    """The command's call (or its batch's), on an executor of its own: through the
    registry (its advice, its approval levels) when the tool came from one."""
    with ToolExecutor() as executor:
        if registry is not None:
            # This process is the command's own: its registry may be changed.
            registry.executor = executor
            if tool is not found:
                registry.register(tool)
        if batch is not None:
            # Each call's id is its place in the file: its progress lines say which.
            calls = [ToolCall(f"#{i}", tool.name, call) for i, call in enumerate(batch)]
            if registry is None:
                return executor.execute_many(
                    calls, ctx, resolve=lambda name: tool, on_progress=view.on_batch
                )
            return registry.execute_many(calls, ctx, on_progress=view.on_batch)
        if registry is None:
            return [executor.execute(tool, arguments, ctx)]
        return [registry.execute(tool.name, arguments, ctx)]


def _add_run_parser(commands: t.Any, common: argparse.ArgumentParser) -> None:
    """``nous-tools run``: one tool, or a batch of calls of it."""
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
