"""OAuth for :meth:`MCPServer.http <nous_tools.contrib.mcp.MCPServer.http>`: the
authorization the MCP specification gives remote servers, on the official SDK's OAuth
client provider (``mcp.client.auth``).

* :meth:`OAuth.authorization_code` — for a person: authorization code with PKCE, a
  browser (or a printed URL) and a local callback on 127.0.0.1. Dynamic client
  registration, a pre-registered client (``client_id``/``client_secret``), or a
  Client ID Metadata Document (``client_metadata_url``) when the server supports it.
* :meth:`OAuth.client_credentials` — for a service: a client secret, or a private
  key signing a JWT assertion (``private_key_jwt``).

The SDK does the protocol: discovery (protected resource and authorization server
metadata, with the fallbacks of older servers), scope selection from the server's
challenge and step-up on ``insufficient_scope``, ``iss`` validation (RFC 9207 and the
metadata's issuer), the resource indicator (RFC 8707), and token refresh. Tokens and
client registrations are kept in a :class:`TokenStorage` (default: a file readable by
its owner only), so a person signs in once.

Token material (access and refresh tokens, client secrets, authorization codes,
PKCE verifiers, assertions) never appears in this library's logs or error messages,
and is redacted from the SDK's and the HTTP client's log records too.
"""

from __future__ import annotations

import collections.abc as c
import contextlib
import hmac
import html
import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
import typing as t
import urllib.parse
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import anyio.to_thread

if t.TYPE_CHECKING:
    import httpx2
    from mcp.shared.auth import (
        AuthorizationCodeResult,
        OAuthClientInformationFull,
        OAuthClientMetadata,
    )

__all__ = ["FileTokenStorage", "InMemoryTokenStorage", "OAuth", "TokenStorage"]

_log = logging.getLogger("nous_tools")


# -- storage ------------------------------------------------------------------------------


@t.runtime_checkable
class TokenStorage(t.Protocol):
    """Where :class:`OAuth` keeps what it obtained for each server: a JSON-ready mapping
    (tokens, their expiry, the client registration) under a key (the server's URL).

    Two methods, called from the MCP client's event-loop thread; keep them quick.
    """

    def load(self, key: str) -> c.Mapping[str, t.Any] | None:
        """What was saved under ``key``, or None."""
        ...

    def save(self, key: str, value: c.Mapping[str, t.Any]) -> None:
        """Replace what is saved under ``key``."""
        ...


class InMemoryTokenStorage:
    """A :class:`TokenStorage` in this process's memory: gone when it exits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, dict[str, t.Any]] = {}

    def load(self, key: str) -> c.Mapping[str, t.Any] | None:
        with self._lock:
            found = self._data.get(key)
            return json.loads(json.dumps(found)) if found is not None else None

    def save(self, key: str, value: c.Mapping[str, t.Any]) -> None:
        with self._lock:
            self._data[key] = json.loads(json.dumps(dict(value)))

    def __repr__(self) -> str:
        return f"<InMemoryTokenStorage of {len(self._data)} server(s)>"


def default_token_file() -> Path:
    """``$XDG_STATE_HOME/nous-tools/mcp-oauth.json`` (``~/.local/state/...``)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state) / "nous-tools" / "mcp-oauth.json"


class FileTokenStorage:
    """A :class:`TokenStorage` in a JSON file that only its owner can read (mode
    0600, in a directory of mode 0700), written atomically (a temporary file renamed
    over it) under an advisory lock, so several processes can share it.

    ``path`` defaults to :func:`default_token_file`. A file others can read is made
    private again on the next write, with a warning.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_token_file()
        self._lock = threading.Lock()

    def load(self, key: str) -> c.Mapping[str, t.Any] | None:
        with self._lock, self._locked():
            found = self._read().get(key)
            return found if isinstance(found, dict) else None

    def save(self, key: str, value: c.Mapping[str, t.Any]) -> None:
        with self._lock, self._locked():
            data = self._read()
            data[key] = json.loads(json.dumps(dict(value)))
            self._write(data)

    def __repr__(self) -> str:
        return f"<FileTokenStorage {str(self.path)!r}>"

    # -- internals --------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> c.Iterator[None]:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: the thread lock only
            yield
            return
        fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _read(self) -> dict[str, t.Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
        except ValueError:
            _log.warning("The OAuth token file %s is not JSON; starting afresh", self.path)
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, t.Any]) -> None:
        with contextlib.suppress(FileNotFoundError):
            mode = self.path.stat().st_mode & 0o777
            if mode & 0o077:
                _log.warning(
                    "The OAuth token file %s could be read by others (mode %o); it is 0600 now",
                    self.path,
                    mode,
                )
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".mcp-oauth-", text=True)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(data, file)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


class _SDKStorage:
    """The SDK's (async) ``TokenStorage`` over one key of a :class:`TokenStorage`; the
    tokens' absolute expiry is kept beside them, so a token saved by an earlier run
    is refreshed when it has expired rather than sent."""

    def __init__(self, storage: TokenStorage, key: str) -> None:
        self.storage = storage
        self.key = key

    def _entry(self) -> dict[str, t.Any]:
        found = self.storage.load(self.key)
        return dict(found) if found is not None else {}

    def expires_at(self) -> float | None:
        value = self._entry().get("expires_at")
        return float(value) if isinstance(value, (int, float)) else None

    async def get_tokens(self) -> t.Any:
        from mcp.shared.auth import OAuthToken

        tokens = self._entry().get("tokens")
        return OAuthToken.model_validate(tokens) if isinstance(tokens, dict) else None

    async def set_tokens(self, tokens: t.Any) -> None:
        entry = self._entry()
        entry["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        entry["expires_at"] = time.time() + tokens.expires_in if tokens.expires_in else None
        self.storage.save(self.key, entry)

    async def get_client_info(self) -> t.Any:
        from mcp.shared.auth import OAuthClientInformationFull

        info = self._entry().get("client_info")
        return OAuthClientInformationFull.model_validate(info) if isinstance(info, dict) else None

    async def set_client_info(self, client_info: t.Any) -> None:
        entry = self._entry()
        entry["client_info"] = client_info.model_dump(mode="json", exclude_none=True)
        self.storage.save(self.key, entry)


# -- redaction ----------------------------------------------------------------------------

_SECRET_PARAMETERS = (
    "access_token",
    "refresh_token",
    "id_token",
    "client_secret",
    "code",
    "code_verifier",
    "client_assertion",
    "assertion",
    "subject_token",
)
_REDACTIONS = [
    # "access_token": "…" in JSON, and access_token=… in a query or form body
    re.compile(r'("(?:' + "|".join(_SECRET_PARAMETERS) + r')"\s*:\s*")[^"]*(")'),
    re.compile(r"((?:^|[?&\s'\"])(?:" + "|".join(_SECRET_PARAMETERS) + r")=)[^&\s'\"]+()"),
    re.compile(r"((?:Bearer|Basic)\s+)[A-Za-z0-9._~+/=-]{8,}()", re.IGNORECASE),
]


def redact(text: str) -> str:
    """``text`` with token material replaced by ``[redacted]``: bearer and basic
    credentials, and the values of ``access_token``, ``refresh_token``, ``code``,
    ``client_secret``, ``code_verifier`` and the assertions, in JSON or URL form."""
    for pattern in _REDACTIONS:
        text = pattern.sub(r"\1[redacted]\2", text)
    return text


class _RedactFilter(logging.Filter):
    """Redacts token material from a log record's message (and its exception text)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        cleaned = redact(message)
        if record.exc_info and record.exc_info[1] is not None:
            cleaned += "\n" + redact(f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}")
            record.exc_info = None
            record.exc_text = None
        record.msg, record.args = cleaned, None
        return True


_FILTER = _RedactFilter()


#: The loggers an OAuth flow writes through. A logger's filter applies to the records
#: made on that very logger (not to its children's), so each is named.
_LOGGERS = (
    "mcp.client.auth",
    "mcp.client.auth.oauth2",
    "mcp.client.auth.utils",
    "mcp.client.auth.extensions.client_credentials",
    "mcp.client.auth.extensions.identity_assertion",
    "mcp.client.streamable_http",
    "mcp.shared._httpx_utils",
    "httpx2",
    "httpcore2.connection",
    "httpcore2.http11",
    "httpcore2.http2",
)


def install_redaction() -> None:
    """Redact token material from the loggers the OAuth flow writes to (idempotent)."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


# -- the local callback -------------------------------------------------------------------


class _Callback:
    """A one-shot HTTP server on 127.0.0.1 receiving the authorization server's redirect
    (``/callback?code=...&state=...&iss=...``). A request whose ``state`` is not the
    one sent (``state``) is answered 400 and ignored: the wait goes on."""

    PAGE = "<!doctype html><title>nous-tools</title><p>{}</p><p>You can close this window.</p>"

    def __init__(self, port: int, state: str | None = None) -> None:
        self.result: dict[str, str] | None = None
        self.done = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parsed = urllib.parse.urlsplit(self.path)
                if parsed.path != "/callback":
                    self.send_error(404)
                    return
                query = dict(urllib.parse.parse_qsl(parsed.query))
                if state is not None and not hmac.compare_digest(
                    query.get("state", ""), state
                ):  # not the answer to our request (a forged or stale one): keep waiting
                    self.send_error(400, "state does not match this sign-in; ignored")
                    return
                ok = "code" in query
                text = "Signed in." if ok else f"Sign-in failed: {query.get('error', 'no code')}"
                body = outer.PAGE.format(html.escape(text)).encode()
                self.send_response(200 if ok else 400)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if outer.result is None:
                    outer.result = query
                    outer.done.set()

            def log_message(self, format: str, *args: t.Any) -> None:
                return None  # the query holds the code: never logged

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="nous-tools-oauth-callback", daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _BrowserSignIn:
    """A person's part of one authorization code flow, as the SDK's two handlers:
    :meth:`redirect` starts the local callback on ``port`` and shows the person the
    authorization URL (``open_browser``: a browser, stderr, or a callable of the
    caller's); :meth:`callback` waits ``timeout`` seconds for the callback's answer."""

    def __init__(
        self, port: int, open_browser: bool | c.Callable[[str], object], timeout: float
    ) -> None:
        self.port = port
        self.open_browser = open_browser
        self.timeout = timeout
        self.redirect_uri = f"http://127.0.0.1:{port}/callback"
        self._waiting: dict[str, _Callback] = {}

    async def redirect(self, url: str) -> None:
        # Only the redirect that carries this request's state is taken.
        sent = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("state")
        self._waiting["callback"] = _Callback(self.port, sent[0] if sent else None)
        await self._open(url)

    async def _open(self, url: str) -> None:
        """Show ``url`` to the person as ``open_browser`` says (printed when a browser
        cannot be opened)."""
        open_browser = self.open_browser
        if callable(open_browser):
            await anyio.to_thread.run_sync(open_browser, url)
        elif open_browser:
            import webbrowser

            opened = await anyio.to_thread.run_sync(webbrowser.open, url)
            if not opened:
                _show(url)
        else:
            _show(url)

    async def callback(self) -> AuthorizationCodeResult:
        from mcp.client.auth import OAuthFlowError
        from mcp.shared.auth import AuthorizationCodeResult

        callback = self._waiting.pop("callback")
        try:
            arrived = await anyio.to_thread.run_sync(
                callback.done.wait, self.timeout, abandon_on_cancel=True
            )
        finally:
            callback.close()
        query = callback.result or {}
        if not arrived:
            raise OAuthFlowError(f"nobody signed in within {self.timeout} s")
        if "code" not in query:
            raise OAuthFlowError(
                f"the authorization server refused: {query.get('error', 'no code')}"
            )
        return AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )


# -- the OAuth choices --------------------------------------------------------------------


class OAuth:
    """How :meth:`MCPServer.http <nous_tools.contrib.mcp.MCPServer.http>` signs in to a
    server that requires OAuth (``MCPServer.http(url, auth=OAuth...)``). Make one with
    :meth:`authorization_code` (a person) or :meth:`client_credentials` (a service)."""

    def __init__(
        self,
        kind: str,
        make: c.Callable[[str, _SDKStorage], httpx2.Auth],
        storage: TokenStorage,
        *,
        interactive: float | None = None,
        shown: str = "",
    ) -> None:
        self.kind = kind
        self._make = make
        self.storage = storage
        #: Seconds a person has to sign in (None: no person involved).
        self.interactive = interactive
        self._shown = shown

    def provider(self, server_url: str) -> httpx2.Auth:
        """The SDK's OAuth client provider (an ``httpx2.Auth``) for ``server_url``."""
        install_redaction()
        return self._make(server_url, _SDKStorage(self.storage, server_url))

    def __repr__(self) -> str:
        return f"<OAuth {self.kind}{self._shown}>"

    @classmethod
    def authorization_code(
        cls,
        *,
        client_name: str = "nous-tools",
        client_id: str | None = None,
        client_secret: str | None = None,
        client_metadata_url: str | None = None,
        scopes: c.Sequence[str] | None = None,
        open_browser: bool | c.Callable[[str], object] = True,
        callback_port: int = 0,
        timeout: float = 300.0,
        storage: TokenStorage | None = None,
    ) -> OAuth:
        """A person signs in: authorization code with PKCE.

        The authorization URL is opened in a browser (``open_browser=True``), printed
        on stderr for the person to open (``False``), or handed to a callable of
        yours; the authorization server redirects to a local callback on
        ``http://127.0.0.1:PORT/callback`` (``callback_port``; 0 picks a free one), and
        the person has ``timeout`` seconds. The client is registered dynamically, or
        is the pre-registered ``client_id`` (with ``client_secret`` for a
        confidential client), or is identified by ``client_metadata_url`` (a Client ID
        Metadata Document, used when the server supports them). ``scopes`` are asked
        for when the server's challenge and metadata name none. ``storage`` keeps the
        tokens and the registration (default: :class:`FileTokenStorage`).
        """
        if client_secret is not None and client_id is None:
            raise ValueError("OAuth.authorization_code: client_secret needs a client_id")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"OAuth.authorization_code: timeout must be > 0, got {timeout!r}")
        scope = " ".join(scopes) if scopes else None

        def make(server_url: str, store: _SDKStorage) -> httpx2.Auth:
            from mcp.client.auth import OAuthClientProvider

            sign_in = _BrowserSignIn(callback_port or _free_port(), open_browser, timeout)
            provider = _refreshing(OAuthClientProvider)(
                server_url=server_url,
                client_metadata=_client_metadata(
                    client_name, sign_in.redirect_uri, scope, client_secret
                ),
                storage=store,
                redirect_handler=sign_in.redirect,
                callback_handler=sign_in.callback,
                client_metadata_url=client_metadata_url,
            )
            if client_id is not None:
                # A pre-registered client: no dynamic registration.
                provider.preset_client = _preset_client(
                    client_id, client_secret, sign_in.redirect_uri
                )
            return t.cast("httpx2.Auth", provider)

        shown = f" client_id={client_id!r}" if client_id else ""
        return cls(
            "authorization_code",
            make,
            storage if storage is not None else FileTokenStorage(),
            interactive=float(timeout),
            shown=shown,
        )

    @classmethod
    def client_credentials(
        cls,
        client_id: str,
        *,
        client_secret: str | None = None,
        private_key: str | None = None,
        signing_algorithm: str = "RS256",
        assertion: str | c.Callable[[str], str] | None = None,
        scopes: c.Sequence[str] | None = None,
        issuer: str | None = None,
        token_endpoint_auth_method: t.Literal[
            "client_secret_basic", "client_secret_post"
        ] = "client_secret_basic",
        storage: TokenStorage | None = None,
    ) -> OAuth:
        """A service signs in with its own credentials (the client credentials grant):
        ``client_secret`` (sent as ``token_endpoint_auth_method``), or ``private_key_jwt``
        with ``private_key`` (PEM; the JWT is signed here with ``signing_algorithm``)
        or ``assertion`` (a ready JWT, or a callable ``audience -> JWT`` such as a
        workload identity provider). Exactly one of the three. ``issuer`` is the
        authorization server the credentials belong to: give it, and they are never
        sent to another one. ``storage`` defaults to :class:`FileTokenStorage`."""
        given = [x is not None for x in (client_secret, private_key, assertion)]
        if sum(given) != 1:
            raise ValueError(
                "OAuth.client_credentials needs exactly one of client_secret, private_key "
                "and assertion"
            )
        scope = " ".join(scopes) if scopes else None

        def make(server_url: str, store: _SDKStorage) -> httpx2.Auth:
            from mcp.client.auth.extensions.client_credentials import (
                ClientCredentialsOAuthProvider,
                PrivateKeyJWTOAuthProvider,
            )

            with warnings.catch_warnings():
                # Without an issuer the SDK warns that 3.0 will require one; ours is optional.
                warnings.simplefilter("ignore", DeprecationWarning)
                if client_secret is not None:
                    return _refreshing(ClientCredentialsOAuthProvider)(  # type: ignore[no-any-return]
                        server_url=server_url,
                        storage=store,
                        client_id=client_id,
                        client_secret=client_secret,
                        token_endpoint_auth_method=token_endpoint_auth_method,
                        scope=scope,
                        issuer=issuer,
                    )
                return _refreshing(PrivateKeyJWTOAuthProvider)(  # type: ignore[no-any-return]
                    server_url=server_url,
                    storage=store,
                    client_id=client_id,
                    assertion_provider=_jwt_signer(
                        client_id, private_key, signing_algorithm, assertion
                    ),
                    scope=scope,
                    issuer=issuer,
                )

        kind = "client_secret" if client_secret is not None else "private_key_jwt"
        return cls(
            "client_credentials",
            make,
            storage if storage is not None else FileTokenStorage(),
            shown=f" ({kind}) client_id={client_id!r}",
        )

    @classmethod
    def identity_assertion(
        cls,
        client_id: str,
        *,
        client_secret: str,
        issuer: str,
        assertion: c.Callable[[str, str], str],
        scopes: c.Sequence[str] | None = None,
        token_endpoint_auth_method: t.Literal[
            "client_secret_basic", "client_secret_post"
        ] = "client_secret_basic",
        storage: TokenStorage | None = None,
    ) -> OAuth:
        """Enterprise-managed authorization (SEP-990, cross-app access): the enterprise
        identity provider's signed grant (an ID-JAG) is exchanged for an access token
        at the MCP server's authorization server ``issuer`` (the RFC 7523 jwt-bearer
        grant), by the confidential client ``client_id``/``client_secret``.

        ``assertion(audience, resource)`` returns the ID-JAG for that authorization
        server (``audience``) and MCP server (``resource``): obtaining it from the
        identity provider (an RFC 8693 token exchange) is the deployment's part. The
        authorization server is configuration here: the MCP server is never asked
        which one to use."""

        def make(server_url: str, store: _SDKStorage) -> httpx2.Auth:
            from mcp.client.auth.extensions.identity_assertion import (
                IdentityAssertionOAuthProvider,
            )

            async def provide(audience: str, resource: str) -> str:
                made = await anyio.to_thread.run_sync(assertion, audience, resource)
                if not isinstance(made, str):
                    raise TypeError(
                        f"the assertion callable returned {type(made).__name__}, not a JWT"
                    )
                return made

            return IdentityAssertionOAuthProvider(
                server_url=server_url,
                storage=store,
                client_id=client_id,
                client_secret=client_secret,
                issuer=issuer,
                assertion_provider=provide,
                scope=" ".join(scopes) if scopes else None,
                token_endpoint_auth_method=token_endpoint_auth_method,
            )

        return cls(
            "identity_assertion",
            make,
            storage if storage is not None else FileTokenStorage(),
            shown=f" client_id={client_id!r} issuer={issuer!r}",
        )


def _client_metadata(
    client_name: str, redirect_uri: str, scope: str | None, client_secret: str | None
) -> OAuthClientMetadata:
    """What an authorization code client says of itself when it registers."""
    from mcp.shared.auth import OAuthClientMetadata

    return OAuthClientMetadata(
        client_name=client_name,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=scope,
        token_endpoint_auth_method="client_secret_basic" if client_secret else "none",
    )


def _preset_client(
    client_id: str, client_secret: str | None, redirect_uri: str
) -> OAuthClientInformationFull:
    """The registration of a pre-registered client, as if dynamic registration had
    returned it."""
    from mcp.shared.auth import OAuthClientInformationFull

    return OAuthClientInformationFull(
        client_id=client_id,
        client_secret=client_secret,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        token_endpoint_auth_method="client_secret_basic" if client_secret else "none",
    )


def _jwt_signer(
    client_id: str,
    private_key: str | None,
    signing_algorithm: str,
    assertion: str | c.Callable[[str], str] | None,
) -> c.Callable[[str], c.Awaitable[str]]:
    """The ``private_key_jwt`` assertion provider: a JWT signed here with
    ``private_key``, or else the ``assertion`` given."""
    from mcp.client.auth.extensions.client_credentials import SignedJWTParameters

    if private_key is not None:
        return SignedJWTParameters(
            issuer=client_id,
            subject=client_id,
            signing_key=private_key,
            signing_algorithm=signing_algorithm,
        ).create_assertion_provider()
    return _assertion_provider(assertion)


def _assertion_provider(
    assertion: str | c.Callable[[str], str] | None,
) -> c.Callable[[str], c.Awaitable[str]]:
    async def provide(audience: str) -> str:
        if isinstance(assertion, str):
            return assertion
        assert assertion is not None
        made = await anyio.to_thread.run_sync(assertion, audience)
        if not isinstance(made, str):
            raise TypeError(f"the assertion callable returned {type(made).__name__}, not a JWT")
        return made

    return provide


def _show(url: str) -> None:
    print(
        f"To sign in to the MCP server, open this URL in a browser on this machine:\n{url}",
        file=sys.stderr,
        flush=True,
    )


_REFRESHING: dict[type[t.Any], type[t.Any]] = {}


def _refreshing(base: type[t.Any]) -> type[t.Any]:
    """``base`` (an SDK provider) that restores the saved tokens' expiry when it loads
    them (so an expired one is refreshed, not sent) and starts from a pre-registered
    client when it has one."""
    made = _REFRESHING.get(base)
    if made is not None:
        return made

    class Provider(base):  # type: ignore[misc]
        preset_client: t.Any = None

        async def _initialize(self) -> None:
            await super()._initialize()
            storage = self.context.storage
            if isinstance(storage, _SDKStorage):
                self.context.token_expiry_time = storage.expires_at()
            if self.preset_client is not None:
                self.context.client_info = self.preset_client

    Provider.__name__ = Provider.__qualname__ = f"Stored{base.__name__}"
    _REFRESHING[base] = Provider
    return Provider
