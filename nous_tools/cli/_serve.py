"""``nous-tools serve``: tools as an MCP server, over stdio or Streamable HTTP (private)."""

from __future__ import annotations

import argparse
import os
import sys
import typing as t

from nous_tools._util._text import safe_str as _safe_str
from nous_tools.cli._arguments import _port_option
from nous_tools.cli._console import (
    _PROG,
    EXIT_OK,
    UsageError,
    _one_line,
)
from nous_tools.cli._targets import _import_module, _load_tool, _module_tools
from nous_tools.registry import Registry
from nous_tools.tool import Tool

__all__: list[str] = []


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


def _add_serve_parser(commands: t.Any, common: argparse.ArgumentParser) -> None:
    """``nous-tools serve``: a module's tools as an MCP server."""
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
