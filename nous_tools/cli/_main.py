"""The ``nous-tools`` command line (also ``python -m nous_tools``).

Four commands:

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

Exit status: 0 when the tool returned ``Ok``, 1 on ``Err`` (one line on stderr
naming the tool and the cause), 2 on usage errors (a module that cannot be
imported, a missing attribute, bad JSON, an unknown option), 130 on Ctrl-C.

The library never imports this module.
"""

from __future__ import annotations

import argparse
import collections.abc as c
import contextlib
import datetime
import importlib
import inspect
import json
import logging
import math
import os
import re
import shutil
import sys
import threading
import time
import traceback
import types
import typing as t

import attrs

from nous_tools import content as _content
from nous_tools import signals
from nous_tools._util._text import safe_str as _safe_str
from nous_tools.cli._progress import ProgressView
from nous_tools.errors import ToolError
from nous_tools.executor import ToolCall, ToolExecutor
from nous_tools.registry._registry import Registry
from nous_tools.results import ApprovalRequest, Edit, Err, Ok, Result
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool

__all__ = ["main"]

EXIT_OK = 0
EXIT_ERR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: How long an attempt runs before the live line appears, and how often it refreshes.
LIVE_DELAY = 0.5
LIVE_INTERVAL = 0.25

_PROG = "nous-tools"


class UsageError(Exception):
    """A mistake in the command line itself: reported on one line, exit status 2.

    ``detail`` is the exception behind it when that is the user's own code failing
    (an import error): ``-v`` prints its traceback.
    """

    def __init__(self, message: str, *, detail: BaseException | None = None) -> None:
        super().__init__(message)
        self.detail = detail


# -- stderr -----------------------------------------------------------------------


def _isatty(stream: t.IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _one_line(text: str) -> str:
    """``text`` with its line breaks folded into spaces."""
    return " ".join(part.strip() for part in text.strip().splitlines() if part.strip())


def _safe_repr(value: object) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__} whose repr() raised>"


class _Console:
    """stderr, shared by trace lines, log records and the live line.

    Whole lines first erase the live line (if one is shown); the live line is
    redrawn in place with ``\\r`` on its next refresh.
    """

    def __init__(self, stream: t.TextIO) -> None:
        self.stream = stream
        self._lock = threading.Lock()
        self._shown = 0  # width of the live line currently on screen

    def line(self, text: str) -> None:
        with self._lock:
            self._erase()
            self._write(text + "\n")

    def show(self, text: str) -> None:
        with self._lock:
            width = max(20, shutil.get_terminal_size().columns - 1)
            text = text[:width]
            self._write("\r" + text + " " * max(0, self._shown - len(text)))
            self._shown = max(len(text), self._shown)

    def clear(self) -> None:
        with self._lock:
            self._erase()

    def _erase(self) -> None:
        if self._shown:
            self._write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except UnicodeEncodeError:
            encoding = getattr(self.stream, "encoding", None) or "ascii"
            self.stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
            self.stream.flush()
        except (OSError, ValueError):  # stderr closed: nothing more to say
            pass


class _ConsoleHandler(logging.Handler):
    """Log records of the library, as lines on the console (``--verbose``)."""

    def __init__(self, console: _Console) -> None:
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.line(self.format(record))
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def _library_logging(verbosity: int, console: _Console) -> c.Iterator[None]:
    """Route the ``nous_tools`` logger for the length of a command.

    Without ``-v`` its records are dropped: the command reports failures itself,
    in one line, and Python's last-resort handler would otherwise print the
    library's warnings and errors too. ``-v`` shows INFO and up, ``-vv`` DEBUG.
    """
    logger = logging.getLogger("nous_tools")
    handler: logging.Handler
    if verbosity:
        handler = _ConsoleHandler(console)
        handler.setFormatter(logging.Formatter("[log] %(levelname)s %(message)s"))
    else:
        handler = logging.NullHandler()
    saved = (logger.propagate, logger.level)
    logger.addHandler(handler)
    logger.propagate = False
    if verbosity:
        logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate, level = saved
        logger.setLevel(level)


# -- formatting -------------------------------------------------------------------


def _seconds(value: float) -> str:
    """``0.2`` → ``"0.2"``, ``30.0`` → ``"30"``."""
    return f"{value:g}"


def _duration(nanoseconds: object) -> str:
    if not isinstance(nanoseconds, (int, float)):
        return "?"
    ms = nanoseconds / 1e6
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


def _dumps(value: object, *, indent: int | None = None, ascii_only: bool = True) -> str:
    """Strict JSON (no NaN); values JSON cannot hold inside it are written as their repr."""
    return json.dumps(
        value, default=_safe_repr, allow_nan=False, indent=indent, ensure_ascii=ascii_only
    )


_JSON_NATIVE = (dict, list, tuple, int, float, bool, type(None))


def _render_value(value: object) -> str:
    """What ``run`` prints for an ``Ok``: a string as is, other values as JSON, and
    a value JSON cannot hold (at the top, or one that fails as a whole) as its repr."""
    if isinstance(value, str):
        return value
    if isinstance(value, _JSON_NATIVE):
        try:
            return _dumps(value, indent=2, ascii_only=False)
        except (TypeError, ValueError, RecursionError):
            pass
    return _safe_repr(value)


def _json_payload(payload: dict[str, t.Any]) -> str:
    """The one JSON object of ``--json``; a value that fails as a whole becomes its repr."""
    try:
        return _dumps(payload)
    except (TypeError, ValueError, RecursionError):
        if "value" in payload:
            return _dumps({**payload, "value": _safe_repr(payload["value"])})
        raise


def _write_stdout(text: str) -> None:
    stream = sys.stdout
    try:
        stream.write(text + "\n")
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write((text + "\n").encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()


# -- importing tools --------------------------------------------------------------


def _ensure_cwd_on_path() -> None:
    """Make modules in the current directory importable, as ``python -m`` does
    (the ``nous-tools`` console script starts with its own directory on the path)."""
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)


def _import_module(name: str) -> types.ModuleType:
    if not name:
        raise UsageError("expected a module name, got an empty string")
    if name.endswith(".py") or os.sep in name:
        raise UsageError(
            f"expected a module name such as 'package.module', not a file path: {name!r}"
        )
    _ensure_cwd_on_path()
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or name
        if name == missing or name.startswith(missing + "."):
            raise UsageError(
                f"cannot import module '{name}': no module named '{missing}'", detail=exc
            ) from exc
        raise UsageError(
            f"cannot import module '{name}': ModuleNotFoundError: {_one_line(_safe_str(exc))}",
            detail=exc,
        ) from exc
    except (Exception, SystemExit) as exc:
        raise UsageError(
            f"cannot import module '{name}': {type(exc).__name__}: {_one_line(_safe_str(exc))}",
            detail=exc,
        ) from exc


def _resolve(target: str) -> tuple[Tool, Registry | None]:
    """The tool that ``MODULE:ATTR`` names (``ATTR`` may be dotted), and the
    :class:`Registry` it was found in when ``ATTR`` is ``REGISTRY.NAME``."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"expected MODULE:ATTR (such as 'mytools:search'), got {target!r}")
    value: object = _import_module(module_name)
    where = module_name
    registry: Registry | None = None
    for part in attribute.split("."):
        registry = None
        if isinstance(value, Registry):
            found = value.lookup(part)
            if found is not None:
                registry, value = value, found
                where = f"{where}.{part}"
                continue
        try:
            value = getattr(value, part)
        except AttributeError:
            raise UsageError(_no_attribute(value, where, part, module_name)) from None
        except Exception as exc:
            raise UsageError(
                f"cannot read '{where}.{part}': {type(exc).__name__}: {_one_line(_safe_str(exc))}",
                detail=exc,
            ) from exc
        where = f"{where}.{part}" if where != module_name else f"{module_name}:{part}"
    if isinstance(value, Tool):
        return value, registry
    if isinstance(value, Registry):
        names = ", ".join(value.names()) or "none"
        raise UsageError(
            f"'{target}' is a Registry: name one of its tools, as '{target}.NAME' "
            f"(its tools: {names})"
        )
    return _make_tool(value, target), None


def _no_attribute(value: object, where: str, part: str, module_name: str) -> str:
    """``'where' has no attribute 'part'``, with what can be run there (the closest
    name first) and a pointer to ``list``."""
    message = f"'{where}' has no attribute '{part}'"
    names: list[str] = []
    if isinstance(value, Registry):
        names = value.names()
        shown = "its tools"
    elif isinstance(value, types.ModuleType):
        try:
            names = [runnable.target.partition(":")[2] for runnable in _runnable(value)[0]]
        except Exception:  # a module that cannot be listed: just point to list
            names = []
        shown = "what it can run"
    if names:
        import difflib

        close = difflib.get_close_matches(part, names, n=1)
        if close:
            message += f"; did you mean '{close[0]}'?"
        listed = ", ".join(names[:20]) + (
            f", ... ({len(names) - 20} more)" if len(names) > 20 else ""
        )
        message += f" ({shown}: {listed})"
    return f"{message}; 'nous-tools list {module_name}' shows what can be run"


def _load_tool(target: str) -> Tool:
    """The tool that ``MODULE:ATTR`` names (``ATTR`` may be dotted)."""
    return _resolve(target)[0]


def _make_tool(value: object, target: str) -> Tool:
    if not callable(value):
        raise UsageError(
            f"'{target}' is a value of type {type(value).__name__}, not a Tool or a function"
        )
    try:
        return Tool.from_function(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"cannot make a tool of '{target}': {_one_line(_safe_str(exc))}") from exc


def _with_overrides(tool: Tool, timeout: float | None, retries: int | None) -> Tool:
    changes: dict[str, t.Any] = {}
    if timeout is not None:
        changes["timeout"] = timeout
    if retries is not None:
        changes["retries"] = retries
    if not changes:
        return tool
    try:
        return attrs.evolve(tool, **changes)
    except (TypeError, ValueError) as exc:
        raise UsageError(_one_line(_safe_str(exc))) from exc


def _module_tools(module: types.ModuleType) -> list[Tool]:
    """The :class:`Tool` instances among a module's attributes, each once, sorted by name."""
    seen: set[int] = set()
    found: list[Tool] = []
    for value in vars(module).values():
        if isinstance(value, Tool) and id(value) not in seen:
            seen.add(id(value))
            found.append(value)
    return sorted(found, key=lambda tool: tool.name)


@attrs.frozen
class _Runnable:
    """A tool ``list`` shows, with the ``MODULE:ATTR`` that ``run`` takes for it."""

    tool: Tool
    target: str


def _runnable(module: types.ModuleType) -> tuple[list[_Runnable], list[str]]:
    """What ``run`` can run in ``module``, sorted by tool name, and notes on the
    public functions that cannot be made tools.

    Each tool once, found in this order: the tools of the module's public
    ``Registry`` attributes (as ``REGISTRY.NAME``, so that ``run`` goes through the
    registry and its advice), its ``Tool`` attributes, and the public functions
    defined in the module itself (not imported into it; not ``_private``) that no
    listed tool already wraps.
    """
    name = module.__name__
    items = sorted(vars(module).items(), key=lambda item: item[0])
    found: list[_Runnable] = []
    seen: set[int] = set()

    def add(tool: Tool, target: str) -> None:
        if id(tool) not in seen:
            seen.add(id(tool))
            found.append(_Runnable(tool, target))

    for attribute, value in items:  # first: a registry's tool runs with its advice
        if isinstance(value, Registry) and not attribute.startswith("_"):
            for tool in value.all():
                add(tool, f"{name}:{attribute}.{tool.name}")
    for attribute, value in items:
        if isinstance(value, Tool):
            add(value, f"{name}:{attribute}")
    wrapped = {id(runnable.tool.function) for runnable in found}
    notes: list[str] = []
    for attribute, value in items:
        if (
            attribute.startswith("_")
            or not inspect.isfunction(value)
            or getattr(value, "__module__", None) != name
            or id(value) in wrapped
        ):
            continue
        try:
            add(Tool.from_function(value), f"{name}:{attribute}")
        except (TypeError, ValueError) as exc:
            notes.append(f"skipped function '{attribute}': {_one_line(_safe_str(exc))}")
    found.sort(key=lambda runnable: (runnable.tool.name, runnable.target))
    return found, notes


# -- arguments --------------------------------------------------------------------


def _parse_json_object(text: str, what: str) -> dict[str, t.Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    except ValueError as exc:  # an integer of more digits than int() takes, say
        raise UsageError(f"{what} cannot be read: {exc}") from None
    except RecursionError:
        raise UsageError(f"{what} cannot be read: it is nested too deeply") from None
    if not isinstance(value, dict):
        raise UsageError(f"{what} must be a JSON object, got {_json_type(value)}")
    return value


def _read_json_option(spec: str, option: str) -> dict[str, t.Any]:
    """A JSON object given inline, as ``@file.json``, or (``--args`` only) ``-`` for stdin."""
    if spec == "-":
        if option != "--args":
            raise UsageError(f"{option} -: stdin is for --args; give {option} JSON or @FILE")
        if sys.stdin is None:
            raise UsageError(f"{option} -: there is no stdin to read from")
        return _parse_json_object(sys.stdin.read(), f"{option} (from stdin)")
    if spec.startswith("@"):
        path = spec[1:]
        if not path:
            raise UsageError(f"{option} @FILE: the file name is missing")
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise UsageError(f"cannot read {option} file '{path}': {reason}") from None
        return _parse_json_object(text, f"{option} (file '{path}')")
    return _parse_json_object(spec, option)


def _read_arguments(spec: str | None) -> dict[str, t.Any]:
    """``--args``: inline JSON, ``@file.json``, or ``-`` for stdin; none means ``{}``."""
    return {} if spec is None else _read_json_option(spec, "--args")


def _reads_none(error: object) -> bool:
    """An error a tool raised by using ``None`` as a mapping or an object: what
    reading ``ctx.deps`` without ``--deps`` raises (``'NoneType' object has no
    attribute 'setdefault'``, ``... is not subscriptable``)."""
    return isinstance(error, (AttributeError, TypeError)) and "'NoneType'" in _safe_str(error)


class _NotRetriedWithoutDeps:
    """A tool's ``retry_on`` for a run without ``--deps``: an error from reading the
    missing deps is not retried (it would fail again); anything else is retried as
    the tool's own ``retry_on`` says."""

    def __init__(self, retry_on: t.Any) -> None:
        self.retry_on = retry_on

    def __call__(self, state: t.Any) -> bool:
        error = state.outcome.exception() if state.outcome is not None else None
        if _reads_none(error):
            return False
        if self.retry_on is None:
            return True
        if isinstance(self.retry_on, tuple):
            return isinstance(error, self.retry_on)
        return bool(self.retry_on(state))


def _deps_hint(result: Result) -> str | None:
    """What to say when a tool that takes a context failed on the deps it was not given."""
    reason = result.reason if isinstance(result, Err) else None
    if isinstance(reason, ToolError) and _reads_none(reason.original_error):
        return (
            "this tool takes deps (ctx.deps is None): pass --deps JSON or --deps @FILE "
            f"({reason.message})"
        )
    return None


def _read_batch(spec: str) -> list[dict[str, t.Any]]:
    """``--batch``: the arguments of each call, from a file (or ``-``: stdin) of JSON
    Lines or a JSON array, each an object."""
    if spec == "-":
        if sys.stdin is None:
            raise UsageError("--batch -: there is no stdin to read from")
        text, where = sys.stdin.read(), "--batch (from stdin)"
    else:
        path = spec[1:] if spec.startswith("@") else spec
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise UsageError(f"cannot read --batch file '{path}': {reason}") from None
        where = f"--batch (file '{path}')"
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where} is not valid JSON: {exc}") from None
        except RecursionError:
            raise UsageError(f"{where} cannot be read: it is nested too deeply") from None
        calls = []
        for number, item in enumerate(items, 1):
            if not isinstance(item, dict):
                raise UsageError(
                    f"{where}: call {number} must be a JSON object, got {_json_type(item)}"
                )
            calls.append(item)
        return calls
    return [
        _parse_json_object(line, f"{where} line {number}")
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip()
    ]


def _read_deps(spec: str | None, tool: Tool) -> dict[str, t.Any] | None:
    """``--deps``: the ``RunContext.deps`` of a tool that takes a context (a JSON
    object, inline or ``@file.json``); none means no deps (None)."""
    if spec is None:
        return None
    deps = _read_json_option(spec, "--deps")
    if not tool.takes_ctx:
        raise UsageError(
            f"--deps: tool '{tool.name}' does not take a context (its first parameter is "
            "not a RunContext or named ctx), so it would never see them"
        )
    return deps


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


# -- signals: --trace and the live line -------------------------------------------

Receiver = c.Callable[..., None]


def _trace_receivers(console: _Console) -> list[tuple[t.Any, Receiver]]:
    """One readable stderr line per signal, from scrubbed metadata only (type names,
    never raw exception messages or stack traces)."""

    def on_start(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        meta = signals.scrub(metadata)
        timeout = getattr(sender, "timeout", None)
        deadline = f"timeout {_seconds(timeout)} s" if timeout else "no timeout"
        console.line(
            f"[trace] start {meta.get('tool_name')} attempt "
            f"{meta.get('attempt')}/{meta.get('max_retries')} ({deadline})"
        )

    def on_stop(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        meta = signals.scrub(metadata)
        console.line(
            f"[trace] stop {meta.get('tool_name')} attempt {meta.get('attempt')} "
            f"in {_duration(measurements.get('duration'))}"
        )

    def on_exception(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        meta = signals.scrub(metadata)
        retry = "will retry" if meta.get("will_retry") else "not retried"
        console.line(
            f"[trace] exception {meta.get('tool_name')} attempt {meta.get('attempt')}: "
            f"{meta.get('kind')}, {retry}"
        )

    def on_timeout(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
        meta = signals.scrub(metadata)
        timeout = measurements.get("timeout")
        shown = _seconds(timeout) if isinstance(timeout, (int, float)) else "?"
        console.line(f"[trace] timeout {meta.get('tool_name')} after {shown} s")

    return [
        (signals.tool_execute_start, on_start),
        (signals.tool_execute_stop, on_stop),
        (signals.tool_execute_exception, on_exception),
        (signals.tool_execute_timeout, on_timeout),
    ]


def _ellipsis(stream: t.TextIO) -> str:
    """``…`` when ``stream`` can encode it, else ``...``."""
    try:
        "\u2026".encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "..."
    return "\u2026"


class _LiveLine:
    """``search_web … 3.2 s / 30 s`` on stderr while an attempt runs past ``delay``.

    A daemon thread redraws it every ``interval`` seconds; the ``start`` signal
    begins an attempt, ``stop`` and ``exception`` end it (and erase the line).
    """

    def __init__(
        self, console: _Console, delay: float = LIVE_DELAY, interval: float = LIVE_INTERVAL
    ) -> None:
        self._console = console
        self._delay = delay
        self._interval = interval
        self._cond = threading.Condition()
        self._attempt: tuple[str, float | None, int, int, float] | None = None
        self._closed = False
        self._ellipsis = _ellipsis(console.stream)
        self._thread = threading.Thread(target=self._run, name="nous-tools-live", daemon=True)
        self._thread.start()

    def receivers(self) -> list[tuple[t.Any, Receiver]]:
        def on_start(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
            timeout = getattr(sender, "timeout", None)
            with self._cond:
                self._attempt = (
                    str(metadata.get("tool_name")),
                    timeout if isinstance(timeout, (int, float)) else None,
                    int(metadata.get("attempt") or 1),
                    int(metadata.get("max_retries") or 1),
                    time.monotonic(),
                )
                self._cond.notify_all()

        def on_end(sender: object, *, measurements: t.Any, metadata: t.Any) -> None:
            with self._cond:
                self._attempt = None
                self._console.clear()
                self._cond.notify_all()

        return [
            (signals.tool_execute_start, on_start),
            (signals.tool_execute_stop, on_end),
            (signals.tool_execute_exception, on_end),
        ]

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._attempt = None
            self._console.clear()
            self._cond.notify_all()
        self._thread.join(1.0)

    def suspend(self) -> None:
        """Stop drawing (a progress bar takes the line over)."""
        with self._cond:
            self._closed = True
            self._attempt = None
            self._console.clear()
            self._cond.notify_all()

    def _text(
        self, name: str, timeout: float | None, attempt: int, total: int, elapsed: float
    ) -> str:
        label = name if total == 1 or attempt == 1 else f"{name} (attempt {attempt}/{total})"
        limit = f" / {_seconds(timeout)} s" if timeout else ""
        return f"{label} {self._ellipsis} {elapsed:.1f} s{limit}"

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                current = self._attempt
                if current is None:
                    self._cond.wait()
                    continue
                name, timeout, attempt, total, began = current
                elapsed = time.monotonic() - began
                if elapsed < self._delay:
                    self._cond.wait(self._delay - elapsed)
                    continue
                self._console.show(self._text(name, timeout, attempt, total, elapsed))
                self._cond.wait(self._interval)


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


_CONTENT_TYPES = (_content.Text, _content.Image, _content.Audio, _content.Resource)


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
        with ToolExecutor() as executor:
            if registry is not None:
                # The registry path (its advice, its approval levels), on this executor.
                # This process is the command's own: its registry may be changed.
                registry.executor = executor
                if tool is not found:
                    registry.register(tool)
            if batch is not None:
                # Each call's id is its place in the file: its progress lines say which.
                calls = [ToolCall(f"#{i}", tool.name, call) for i, call in enumerate(batch)]
                if registry is None:
                    outcomes: list[t.Any] = executor.execute_many(
                        calls, ctx, resolve=lambda name: tool, on_progress=view.on_batch
                    )
                else:
                    outcomes = registry.execute_many(calls, ctx, on_progress=view.on_batch)
            elif registry is None:
                outcomes = [executor.execute(tool, arguments, ctx)]
            else:
                outcomes = [registry.execute(tool.name, arguments, ctx)]
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


def _command_demo(options: argparse.Namespace) -> int:
    from nous_tools.demo import run_demo

    return run_demo(_write_stdout)


def _serve_registry(target: str) -> t.Any:
    """The :class:`~nous_tools.Registry` that ``MODULE`` (its tools) or ``MODULE:ATTR``
    (a Registry, a Tool, a function or a list of them) names."""
    if ":" not in target:
        return Registry(_module_tools(_import_module(target)))
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"expected MODULE or MODULE:ATTR, got {target!r}")
    value: object = _import_module(module_name)
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise UsageError(f"'{module_name}' has no attribute '{attribute}'") from None
    if isinstance(value, Registry):
        return value
    if isinstance(value, Tool) or callable(value):
        return Registry([_load_tool(target)])
    if isinstance(value, (list, tuple)):
        try:
            return Registry(value)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"cannot serve '{target}': {_one_line(_safe_str(exc))}") from exc
    raise UsageError(
        f"'{target}' is a value of type {type(value).__name__}, "
        "not a Registry, a Tool, a function or a list of them"
    )


def _command_serve(options: argparse.Namespace) -> int:
    try:
        from nous_tools.contrib import mcp as mcp_contrib
    except ImportError as exc:
        raise UsageError(
            f"serving over MCP needs the 'mcp' extra: pip install 'nous-tools[mcp]' ({exc})"
        ) from exc
    registry = _serve_registry(options.target)
    if not len(registry):
        raise UsageError(f"'{options.target}' has no tools to serve")
    if options.http is None:
        mcp_contrib.serve(registry, "stdio")
        return EXIT_OK
    token = options.auth_token or os.environ.get("NOUS_TOOLS_SERVE_TOKEN") or None
    hosts = [h for h in (options.allowed_hosts or "").split(",") if h.strip()]
    origins = [o for o in (options.allowed_origins or "").split(",") if o.strip()]
    from nous_tools.contrib.mcp._http import security_for

    try:
        security_for(
            options.host,
            auth_token=token,
            allowed_hosts=hosts,
            allowed_origins=origins,
            insecure=options.insecure,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    # What clients see: deny tools are never listed.
    listed = sum(1 for tool in registry.all() if tool.approval != "deny")
    hidden = len(registry) - listed
    shown = f"[{options.host}]" if ":" in options.host else options.host
    protection = "bearer token required" if token is not None else "no token"
    if hosts:
        protection += f"; hosts {', '.join(hosts)}"
    note = f" ({hidden} 'deny' tool(s) not listed)" if hidden else ""
    print(
        f"{_PROG}: serving {listed} tool(s){note} at http://{shown}:{options.http}/mcp "
        f"({protection})",
        file=sys.stderr,
    )
    if options.insecure and (token is None or not hosts):
        print(
            f"{_PROG}: warning: --insecure: "
            + (
                "no bearer token: anyone who can reach this port can call these tools"
                if token is None
                else "no Host check: browsers on other sites can reach this server"
            ),
            file=sys.stderr,
        )
    mcp_contrib.serve(
        registry,
        "http",
        host=options.host,
        port=options.http,
        auth_token=token,
        allowed_hosts=hosts,
        allowed_origins=origins,
        insecure=options.insecure,
    )
    return EXIT_OK


# -- the call journal ---------------------------------------------------------------

_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _duration_option(text: str) -> float:
    """``3600``, ``90s``, ``15m``, ``12h``, ``30d`` → seconds."""
    unit = text[-1:].lower()
    number = text[:-1] if unit in _DURATION_UNITS else text
    try:
        value = float(number) * _DURATION_UNITS.get(unit, 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a duration (3600, 90s, 15m, 12h, 30d), got {text!r}"
        ) from None
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a duration >= 0, got {text}")
    return value


def _open_journal(target: str) -> t.Any:
    """The journal ``target`` names: a PostgreSQL DSN (``postgresql://...``,
    ``host=... dbname=...``) or the path of an SQLite journal, which must exist."""
    from nous_tools.journal import PostgresJournal, SQLiteJournal

    if target.startswith(("postgresql://", "postgres://")) or re.search(
        r"(^|\s)(host|dbname|service)=", target
    ):
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise UsageError(
                f"a PostgreSQL journal needs the 'postgres' extra: pip install "
                f"'nous-tools[postgres]' ({exc})"
            ) from exc
        return PostgresJournal(target)
    if not os.path.isfile(target):
        raise UsageError(f"no journal at {target!r} (an SQLite file, or a PostgreSQL DSN)")
    return SQLiteJournal(target)


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _state(record: t.Any) -> str:
    if record.state == "completed":
        return "settled" if record.settled else "completed"
    return "unknown" if record.expired() else "running"


def _outcome(record: t.Any) -> str:
    outcome = record.outcome
    if outcome is None:
        return "-"
    if outcome.get("ok") is True:
        return "ok"
    error = outcome.get("error")
    return f"error ({error.get('type')})" if isinstance(error, dict) else "error"


def _show_record(record: t.Any) -> None:
    rows = [
        ("run", record.run_id),
        ("call", record.call_id),
        ("tool", record.tool),
        ("state", _state(record)),
        ("decision", record.decision or "-"),
        ("started", _when(record.started_at)),
        ("lease until", _when(record.lease_expires) if record.state == "started" else "-"),
        ("completed", _when(record.completed_at)),
        ("runs", str(record.runs)),
        ("owner", record.owner),
        ("arguments digest", record.digest),
        ("outcome", _outcome(record)),
    ]
    if record.state == "completed":
        from nous_tools.providers._tool_calls import format_tool_result

        try:
            rows.append(("model sees", format_tool_result(record.result(), record.tool)))
        except ValueError as exc:
            rows.append(("model sees", f"<corrupt: {exc}>"))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        _write_stdout(f"{name.ljust(width)}  {value}")


def _command_journal(options: argparse.Namespace) -> int:
    journal = _open_journal(options.target)
    action = options.action
    try:
        if action == "list":
            state = "started" if options.unknown else options.state
            records = journal.records(run_id=options.run, state=state, limit=options.limit)
            if options.unknown:
                records = [record for record in records if record.expired()]
            if options.json:
                _write_stdout(_dumps([record.to_dict() for record in records], ascii_only=False))
                return EXIT_OK
            if not records:
                _write_stdout("no calls")
                return EXIT_OK
            rows = [("RUN", "CALL", "TOOL", "STATE", "STARTED", "OUTCOME")]
            rows += [
                (r.run_id, r.call_id, r.tool, _state(r), _when(r.started_at), _outcome(r))
                for r in records
            ]
            widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
            for row in rows:
                cells = [cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)]
                _write_stdout("  ".join([*cells, row[-1]]).rstrip())
            return EXIT_OK
        if action == "show":
            record = journal.get(options.run_id, options.call_id)
            if record is None:
                print(
                    f"{_PROG}: journal: call {options.call_id!r} of run {options.run_id!r} "
                    "is not in the journal",
                    file=sys.stderr,
                )
                return EXIT_ERR
            if options.json:
                _write_stdout(_dumps(record.to_dict(), ascii_only=False))
            else:
                _show_record(record)
            return EXIT_OK
        if action == "settle":
            if options.ok is not None:
                try:
                    result: Result = Ok(json.loads(options.ok))
                except ValueError as exc:
                    raise UsageError(f"--ok needs a JSON value ({exc})") from None
            else:
                result = Err(options.error)
            try:
                record = journal.settle((options.run_id, options.call_id), result)
            except ValueError as exc:  # not in the journal, or completed already
                print(f"{_PROG}: journal: {exc}", file=sys.stderr)
                return EXIT_ERR
            if options.json:
                _write_stdout(_dumps(record.to_dict(), ascii_only=False))
            else:
                _show_record(record)
            return EXIT_OK
        removed = journal.prune(older_than=options.older_than)
        if options.json:
            _write_stdout(_dumps({"removed": removed}))
        else:
            _write_stdout(f"removed {removed} completed record(s)")
        return EXIT_OK
    except UsageError:
        raise
    except Exception as exc:  # the journal could not be read or written
        print(
            f"{_PROG}: journal: {type(exc).__name__}: {_one_line(_safe_str(exc))}",
            file=sys.stderr,
        )
        return EXIT_ERR
    finally:
        journal.close()


def _add_journal_parser(commands: t.Any, common: argparse.ArgumentParser) -> None:
    journal = commands.add_parser(
        "journal",
        parents=[common],
        help="inspect a call journal: unknown calls, one call, settle, prune",
        description="Inspect the call journal at DSN_OR_PATH (an SQLite file, or a "
        "PostgreSQL DSN: postgresql://... or host=... dbname=...). See "
        "docs/concepts/journal.md.",
    )
    actions = journal.add_subparsers(dest="action", metavar="ACTION", required=True)
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON")
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("target", metavar="DSN_OR_PATH")
    key = argparse.ArgumentParser(add_help=False)
    key.add_argument("run_id", metavar="RUN_ID")
    key.add_argument("call_id", metavar="CALL_ID")

    listing = actions.add_parser(
        "list",
        parents=[target, output],
        help="list the journaled calls, newest first",
        description="List the journaled calls, newest first. STATE is running, unknown "
        "(started, never completed, its lease expired: a person must settle it), completed "
        "or settled.",
    )
    listing.add_argument(
        "--unknown", action="store_true", help="only the calls whose outcome is unknown"
    )
    listing.add_argument("--run", metavar="RUN_ID", help="only the calls of this run")
    listing.add_argument("--state", choices=("started", "completed"), help="only this state")
    listing.add_argument(
        "--limit", type=_retries_option, default=100, metavar="N", help="at most N (100)"
    )
    actions.add_parser(
        "show",
        parents=[target, key, output],
        help="show one call's record and outcome",
        description="Show the record of one call: its state, lease, runs and outcome.",
    )
    settle = actions.add_parser(
        "settle",
        parents=[target, key, output],
        help="record the outcome a person found out for an unknown call",
        description="Record the outcome of a started call (its outcome was unknown): a "
        "repeat of the call then gets it. Exactly one of --ok and --error.",
    )
    given = settle.add_mutually_exclusive_group(required=True)
    given.add_argument("--ok", metavar="JSON", help="it succeeded, with this value (JSON)")
    given.add_argument("--error", metavar="MESSAGE", help="it failed, with this message")
    prune = actions.add_parser(
        "prune",
        parents=[target, output],
        help="remove old completed records",
        description="Remove the completed records older than DURATION; started ones "
        "(running, or unknown) are kept.",
    )
    prune.add_argument(
        "--older-than",
        type=_duration_option,
        required=True,
        metavar="DURATION",
        help="3600, 90s, 15m, 12h, 30d",
    )


def _port_option(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535, got {text}")
    return value


# -- the parser -------------------------------------------------------------------


def _seconds_option(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds (0: no deadline), got {text}")
    return value


def _retries_option(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


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

    commands.add_parser(
        "demo",
        parents=[common],
        help="run the built-in demo toolbox and print a report",
        description="Run a small built-in toolbox end to end and report each case.",
    )
    return parser


def _user_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` from the first frame outside this module and importlib,
    as Python shows an import error of a script: the user's own code."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename != __file__ and "importlib" not in filename:
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
