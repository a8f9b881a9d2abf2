"""Reading a command's arguments (private).

``--args``, ``--deps`` and ``--batch`` (JSON inline, from a file or stdin), what
to say when a tool failed on the deps it was not given, and the types of the
numeric options.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import typing as t

from nous_tools._util._text import safe_str as _safe_str
from nous_tools.cli._console import (
    UsageError,
    _json_type,
)
from nous_tools.errors import ToolError
from nous_tools.results import Err, Result
from nous_tools.tool import Tool

__all__: list[str] = []

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


def _port_option(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535, got {text}")
    return value


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
