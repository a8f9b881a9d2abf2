"""The event-loop thread an :class:`~nous_tools.contrib.mcp.MCPServer` talks
through, the transports it connects with (a subprocess on stdio, a Streamable
HTTP endpoint), and which errors mean the connection is gone.
"""

from __future__ import annotations

import asyncio
import collections.abc as c
import contextlib
import os
import sys
import threading
import typing as t
import urllib.parse

import anyio
import mcp_types as types
from anyio.from_thread import BlockingPortal
from mcp.shared.exceptions import MCPError

if t.TYPE_CHECKING:
    from mcp import Client

    from nous_tools.contrib.mcp._auth import OAuth
    from nous_tools.contrib.mcp._client import MCPServer

#: How an :class:`MCPServer` connects: into ``stack``, with its callbacks.
Connect = c.Callable[[contextlib.AsyncExitStack, "MCPServer"], c.Awaitable["Client"]]

if sys.version_info >= (3, 11):
    _Group: type[BaseException] = BaseExceptionGroup  # noqa: F821  (3.11+)
else:  # pragma: no cover - anyio brings the backport on Python 3.10
    from exceptiongroup import BaseExceptionGroup as _Group  # type: ignore[import-not-found]


_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
    OSError,
)


def start_portal(
    name: str,
) -> tuple[BlockingPortal, threading.Thread, asyncio.AbstractEventLoop]:
    """An anyio ``BlockingPortal`` running in a new daemon thread (unlike
    ``start_blocking_portal``'s, which would block interpreter exit), and its loop."""
    ready = threading.Event()
    box: dict[str, t.Any] = {}

    async def main() -> None:
        async with BlockingPortal() as portal:
            box["portal"] = portal
            box["loop"] = asyncio.get_running_loop()
            ready.set()
            await portal.sleep_until_stopped()

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:  # pragma: no cover - the loop itself failed
            box["error"] = exc
            ready.set()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    ready.wait()
    if "error" in box:  # pragma: no cover
        raise RuntimeError(f"could not start the MCP event loop: {box['error']}")
    return t.cast(BlockingPortal, box["portal"]), thread, box["loop"]


def _flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, _Group):
        found: list[BaseException] = []
        for inner in t.cast(t.Any, exc).exceptions:
            found.extend(_flatten(inner))
        return found
    return [exc]


def is_disconnect(exc: BaseException) -> bool:
    for inner in _flatten(exc):
        if isinstance(inner, MCPError) and inner.code == types.CONNECTION_CLOSED:
            return True
        if isinstance(inner, _TRANSPORT_ERRORS):
            return True
        if type(inner).__module__.startswith("httpx"):
            return True
    return False


def describe_error(exc: BaseException) -> str:
    parts = [f"{type(e).__name__}: {e}" if str(e) else type(e).__name__ for e in _flatten(exc)]
    return "; ".join(parts) or type(exc).__name__


def stdio_connect(
    command: str,
    args: c.Sequence[str],
    env: c.Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    mode: str,
) -> Connect:
    """How to connect to a server run as ``command args...``, over its stdin/stdout
    (see :meth:`MCPServer.stdio`)."""
    from mcp import StdioServerParameters

    params = StdioServerParameters(
        command=command,
        args=list(args),
        env=dict(env) if env is not None else None,
        cwd=os.fspath(cwd) if cwd is not None else None,
    )

    async def connect(stack: contextlib.AsyncExitStack, server: MCPServer) -> Client:
        from mcp.client.stdio import stdio_client

        return await stack.enter_async_context(_client(stdio_client(params), server, mode))

    return connect


def http_connect(
    url: str,
    headers: c.Mapping[str, str] | None,
    auth: OAuth | None,
    mode: str,
    allow_private_networks: bool = False,
) -> Connect:
    """How to connect to a server at a Streamable HTTP endpoint, signing in with
    ``auth`` (see :meth:`MCPServer.http`)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    provider = auth.provider(url) if auth is not None else None
    guard = request_guard(url, allow_private_networks)

    async def connect(stack: contextlib.AsyncExitStack, server: MCPServer) -> Client:
        async def note_refusal(response: t.Any) -> None:  # the SDK keeps no status
            status = response.status_code
            server.refused = status if status in (401, 403) else None  # the last word

        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=dict(headers or {}),
                timeout=httpx2.Timeout(30.0, read=300.0),
                auth=provider,
                event_hooks={"request": [guard], "response": [note_refusal]},
            )
        )
        client = _client(streamable_http_client(url, http_client=http), server, mode)
        return await stack.enter_async_context(client)

    return connect


def _private(address: str) -> bool:
    import ipaddress

    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return bool(
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


async def _addresses(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (itself when it is one; none if unknown)."""
    import socket

    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return []
    return [str(info[4][0]) for info in infos]


def request_guard(
    server_url: str, allow_private_networks: bool = False
) -> c.Callable[[t.Any], c.Awaitable[None]]:
    """An httpx request hook: a request to another origin than ``server_url``'s (OAuth
    discovery, sign-in, tokens) to a loopback, private, link-local or reserved address
    is refused (``ConnectionRefusedError``), unless the server is on such an address
    itself or ``allow_private_networks`` (a server must not be able to send its
    client into the client's own network: server-side request forgery)."""
    parts = urllib.parse.urlsplit(server_url)
    scheme = parts.scheme
    origin = (scheme, parts.hostname, parts.port or (443 if scheme == "https" else 80))
    checked: dict[tuple[str, int], str | None] = {}
    inside: list[bool] = []  # whether the server itself is in such a network, once known

    async def guard(request: t.Any) -> None:
        if allow_private_networks:
            return
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        if (url.scheme, url.host, port) == origin:
            return
        if not inside:
            own = await _addresses(str(origin[1]), int(origin[2]))
            inside.append(any(_private(a) for a in own))
        if inside[0]:
            return
        key = (url.host, port)
        if key not in checked:
            found = [a for a in await _addresses(url.host, port) if _private(a)]
            checked[key] = found[0] if found else None
        bad = checked[key]
        if bad is not None:
            raise ConnectionRefusedError(
                f"refused to send a request to {url.host} ({bad}): a loopback, private or "
                f"link-local address, named by MCP server {parts.hostname}, which is not in "
                "such a network itself (MCPServer.http(..., allow_private_networks=True) "
                "allows it)"
            )

    return guard


#: The notification that says a server's tool list changed.
_TOOLS_CHANGED = "notifications/tools/list_changed"


class _Watched:
    """A transport's read stream that tells ``server`` of each
    ``notifications/tools/list_changed`` as it is read, before the messages after
    it (the SDK handles a notification in a task of its own, so a call answered
    after the notification could otherwise be over before the server heard of it)."""

    def __init__(self, stream: t.Any, server: MCPServer) -> None:
        self._stream = stream
        self._server = server

    def __getattr__(self, name: str) -> t.Any:  # last_context, ...: the stream's own
        return getattr(self._stream, name)

    async def __aenter__(self) -> _Watched:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info: t.Any) -> t.Any:
        return await self._stream.__aexit__(*exc_info)

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> t.Any:
        return self._seen(await self._stream.__anext__())

    async def receive(self) -> t.Any:
        return self._seen(await self._stream.receive())

    def _seen(self, item: t.Any) -> t.Any:
        message = getattr(item, "message", None)  # a SessionMessage, or an Exception
        if isinstance(message, types.JSONRPCNotification) and message.method == _TOOLS_CHANGED:
            self._server._tools_changed()
        return item


@contextlib.asynccontextmanager
async def _watched(transport: t.Any, server: MCPServer) -> c.AsyncIterator[tuple[t.Any, t.Any]]:
    """``transport``'s streams, its read stream :class:`_Watched`."""
    async with transport as (read_stream, write_stream):
        yield _Watched(read_stream, server), write_stream


def _client(transport: t.Any, server: MCPServer, mode: str) -> Client:
    """The SDK client over ``transport`` (its read stream watched for
    ``notifications/tools/list_changed``), with ``server``'s callbacks."""
    from mcp import Client

    return Client(
        _watched(transport, server),
        mode=mode,
        elicitation_callback=server._on_elicit,
        sampling_callback=server._on_sample,
        logging_callback=server._on_log,
    )
