"""Importing tools: what ``MODULE:ATTR`` and ``MODULE`` name (private).

``run`` resolves ``MODULE:ATTR`` (a Tool, a function made a tool, a registry's
``REGISTRY.NAME``); ``list`` and ``serve`` find what a module holds.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import types
import typing as t

import attrs

from nous_tools._util._text import safe_str as _safe_str
from nous_tools.cli._console import (
    UsageError,
    _one_line,
)
from nous_tools.registry import Registry
from nous_tools.tool import Tool

__all__: list[str] = []

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
