"""The Streamable HTTP side of serving: resumable SSE streams, and who may connect.

* **Resumable streams (SEP-1699).** Every POST answered with an SSE stream opens with
  a priming event (an id, empty data, and a ``retry`` field); the stream's events are
  kept in memory for its session, so a client that lost the stream reconnects with
  ``Last-Event-ID`` and gets what it missed. Each session has its own store: an
  event id of one session never replays another session's events.
* **Who may connect.** A loopback bind (127.0.0.1, ::1, localhost) checks the Host
  and Origin headers against the loopback names (DNS-rebinding protection). Any
  other bind needs a bearer token (compared in constant time) and the list of Host
  names clients use, or an explicit ``insecure=True``.
"""

from __future__ import annotations

import collections
import collections.abc as c
import contextlib
import hmac
import ipaddress
import itertools
import logging
import secrets
import typing as t

from mcp.server.streamable_http import (
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamableHTTPServerTransport,
    StreamId,
)
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import is_version_at_least
from starlette.applications import Starlette
from starlette.routing import Route

if t.TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from starlette.types import ASGIApp, Receive, Scope, Send

_log = logging.getLogger("nous_tools")

#: The SSE ``retry`` field of the priming event: how long (ms) a client waits before
#: reconnecting to a stream the server closed.
RETRY_MS = 1000
#: Events kept per session for replay; the oldest are dropped first.
EVENTS_PER_SESSION = 1000
#: The shortest bearer token ``serve`` accepts.
MIN_TOKEN_LENGTH = 16
#: The environment variable ``nous-tools serve`` reads the token from.
TOKEN_ENV = "NOUS_TOOLS_SERVE_TOKEN"

_LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
_LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


class SessionEvents(EventStore):
    """One session's SSE events, for replay after ``Last-Event-ID`` (bounded)."""

    def __init__(self, limit: int = EVENTS_PER_SESSION) -> None:
        self._prefix = secrets.token_hex(8)
        self._ids = itertools.count(1)
        self._events: collections.OrderedDict[str, tuple[StreamId, t.Any]] = (
            collections.OrderedDict()
        )
        self._limit = limit

    async def store_event(self, stream_id: StreamId, message: t.Any) -> EventId:
        event_id = f"{self._prefix}-{next(self._ids)}"
        self._events[event_id] = (stream_id, message)
        while len(self._events) > self._limit:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        found = self._events.get(last_event_id)
        if found is None:
            return None
        stream_id = found[0]
        after = False
        for event_id, (stream, message) in list(self._events.items()):
            if after and stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
            elif event_id == last_event_id:
                after = True
        return stream_id


class _Transport(StreamableHTTPServerTransport):
    """The SDK's transport, resumable by the version the *session* negotiated.

    The SDK decides per request, from its ``MCP-Protocol-Version`` header, whether a
    POST stream is primed (SEP-1699) and may be closed for polling. A client whose
    session negotiated 2025-11-25 but whose request names an older version (the
    official conformance suite does this) would get neither: here the session's
    version counts when it is the newer one. Sessions of older clients are left as
    they were (an empty priming event could confuse them)."""

    negotiated: str | None = None

    def _version(self, protocol_version: str) -> str:
        negotiated = self.negotiated
        if negotiated is not None and not is_version_at_least(protocol_version, negotiated):
            return negotiated
        return protocol_version

    async def _mint_priming_event(self, stream_id: StreamId, protocol_version: str) -> t.Any:
        return await super()._mint_priming_event(stream_id, self._version(protocol_version))

    def _create_session_message(
        self, message: t.Any, request: t.Any, request_id: t.Any, protocol_version: str
    ) -> t.Any:
        if getattr(message, "method", None) == "initialize":
            params = getattr(message, "params", None) or {}
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            if isinstance(asked, str) and is_version_at_least(asked, _RESUMABLE):
                self.negotiated = _RESUMABLE  # the newest handshake version
        return super()._create_session_message(
            message, request, request_id, self._version(protocol_version)
        )


_RESUMABLE = "2025-11-25"


class _SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, with an event store of its own for each session."""

    def _admit_session(self, requestor: t.Any) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None:
            # The same object, given the methods above (no state of its own but a
            # class-level default), rather than a copy of the SDK's constructor call.
            transport.__class__ = _Transport
            transport._event_store = SessionEvents()
        return transport


class _BearerToken:
    """An ASGI wrapper refusing HTTP requests without ``Authorization: Bearer TOKEN``
    (compared in constant time); the 401 names no token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            body = b'{"error": "unauthorized", "error_description": "a bearer token is required"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Bearer realm="nous-tools"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        given = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                given = value
                break
        scheme, _, token = given.partition(b" ")
        # compare_digest on the token alone: its running time does not depend on
        # where the first differing byte is.
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._token)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host.lower() == "localhost":
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    return False


def _host_patterns(hosts: c.Iterable[str]) -> list[str]:
    """Host header patterns: ``name`` allows it on any port; ``name:port`` (or
    ``name:*``, ``[v6]:port``) is kept as given."""
    patterns: list[str] = []
    for host in hosts:
        host = host.strip()
        if not host:
            continue
        if host.startswith("[") or host.count(":") == 1:
            patterns.append(host)  # with its port (or a bracketed IPv6 literal)
            if host.endswith("]"):
                patterns.append(f"{host}:*")
            continue
        bare = f"[{host}]" if ":" in host else host  # a bare IPv6 literal
        patterns.extend([bare, f"{bare}:*"])
    return patterns


def _origins(hosts: c.Iterable[str]) -> list[str]:
    origins: list[str] = []
    for pattern in _host_patterns(hosts):
        origins.extend([f"http://{pattern}", f"https://{pattern}"])
    return origins


def security_for(
    host: str,
    *,
    auth_token: str | None,
    allowed_hosts: c.Sequence[str] | None,
    allowed_origins: c.Sequence[str] | None,
    insecure: bool,
) -> TransportSecuritySettings | None:
    """The Host/Origin checks for a server bound to ``host``; raises ``ValueError``
    when the bind is not loopback and the token or the host list is missing (unless
    ``insecure``), or when the token is too short."""
    if auth_token is not None and len(auth_token) < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"the auth token is too short ({len(auth_token)} characters): use at least "
            f"{MIN_TOKEN_LENGTH}, e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    loopback = is_loopback(host)
    hosts = [h for h in (allowed_hosts or ()) if h.strip()]
    if not loopback and not insecure:
        missing = []
        if auth_token is None:
            missing.append(f"a bearer token (--auth-token, or {TOKEN_ENV})")
        if not hosts:
            missing.append("the Host names clients use (--allowed-hosts)")
        if missing:
            raise ValueError(
                f"refusing to serve on {host}, which is not a loopback address, without "
                + " and ".join(missing)
                + ": anyone who can reach the port could call the tools (and approve its own "
                "'ask' calls). Pass --insecure to serve unprotected anyway"
            )
    if loopback or hosts:
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=([*_LOOPBACK_HOSTS] if loopback else []) + _host_patterns(hosts),
            allowed_origins=([*_LOOPBACK_ORIGINS] if loopback else [])
            + (list(allowed_origins) if allowed_origins else _origins(hosts)),
        )
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


def http_app(
    server: Server[t.Any],
    *,
    security: TransportSecuritySettings | None,
    auth_token: str | None,
    path: str = "/mcp",
) -> ASGIApp:
    """The ASGI application serving ``server`` over Streamable HTTP at ``path``."""
    manager = _SessionManager(app=server, retry_interval=RETRY_MS, security_settings=security)
    app: ASGIApp = Starlette(
        routes=[Route(path, endpoint=StreamableHTTPASGIApp(manager))],
        lifespan=lambda _app: manager.run(),
    )
    if auth_token is not None:
        app = _BearerToken(app, auth_token)
    return app
