"""OAuth for :meth:`MCPServer.http <nous_tools.contrib.mcp.MCPServer.http>`: the
authorization the MCP specification gives remote servers, on the official SDK's OAuth
client provider (``mcp.client.auth``).

* :meth:`OAuth.authorization_code` — for a person: authorization code with PKCE, a
  browser (or a printed URL) and a local callback on 127.0.0.1. Dynamic client
  registration, a pre-registered client (``client_id``/``client_secret``), or a
  Client ID Metadata Document (``client_metadata_url``) when the server supports it.
* :meth:`OAuth.client_credentials` — for a service: a client secret, or a private
  key signing a JWT assertion (``private_key_jwt``).
* :meth:`OAuth.workload_identity` — for a workload: the JWT its platform gives it,
  exchanged by the RFC 7523 jwt-bearer grant (SEP-1933).
* :meth:`OAuth.enterprise_managed` and :meth:`OAuth.identity_assertion` — for a
  person of an enterprise: an ID-JAG from the enterprise identity provider
  exchanged for a token (SEP-990).

Any of them with ``dpop=`` binds the tokens to a key (DPoP, RFC 9449: ``_dpop``).

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

    from nous_tools.contrib.mcp._dpop import DPoPKey

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


class _StoredBindings:
    """Which stored tokens are bound to the DPoP key of thumbprint ``jkt``: their
    ``ath`` (a hash, not the token) kept beside them in the storage entry, so a token
    loaded again is sent as it was issued. Tokens bound to another key are not."""

    def __init__(self, store: _SDKStorage, jkt: str) -> None:
        self.store = store
        self.jkt = jkt

    def _hashes(self, entry: c.Mapping[str, t.Any]) -> list[str]:
        found = entry.get("dpop")
        if not isinstance(found, dict) or found.get("jkt") != self.jkt:
            return []
        hashes = found.get("ath")
        return [h for h in hashes if isinstance(h, str)] if isinstance(hashes, list) else []

    def is_bound(self, access_token: str) -> bool:
        from nous_tools.contrib.mcp._dpop import access_token_hash

        return access_token_hash(access_token) in self._hashes(self.store._entry())

    def bind(self, access_token: str) -> None:
        from nous_tools.contrib.mcp._dpop import BOUND_KEPT, access_token_hash

        entry = self.store._entry()
        hashes = [*self._hashes(entry), access_token_hash(access_token)][-BOUND_KEPT:]
        entry["dpop"] = {"jkt": self.jkt, "ath": hashes}
        self.store.storage.save(self.store.key, entry)


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
    re.compile(r"((?:Bearer|Basic|DPoP)\s+)[A-Za-z0-9._~+/=-]{8,}()", re.IGNORECASE),
]


def redact(text: str) -> str:
    """``text`` with token material replaced by ``[redacted]``: bearer, DPoP and basic
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
    :meth:`authorization_code` (a person) or :meth:`client_credentials` (a service).

    Each takes ``dpop``: ``True`` (a key made for this object) or a
    :class:`~nous_tools.contrib.mcp.DPoPKey` of yours binds the tokens to that key
    (DPoP, RFC 9449): every token request and every request to the server carries a
    fresh proof signed by it, a token issued as ``DPoP`` is sent as
    ``Authorization: DPoP <token>``, and a server asking for a nonce gets it. A token
    stolen without the key is of no use. An authorization server that issues bearer
    tokens anyway is answered with bearer use."""

    def __init__(
        self,
        kind: str,
        make: c.Callable[[str, _SDKStorage], httpx2.Auth],
        storage: TokenStorage,
        *,
        interactive: float | None = None,
        shown: str = "",
        dpop: bool | DPoPKey = False,
    ) -> None:
        self.kind = kind
        self._make = make
        self.storage = storage
        #: Seconds a person has to sign in (None: no person involved).
        self.interactive = interactive
        self._shown = shown
        #: The DPoP key tokens are bound to (RFC 9449), or None: bearer tokens.
        self.dpop_key: DPoPKey | None = _dpop_key(dpop)

    def provider(self, server_url: str) -> httpx2.Auth:
        """The SDK's OAuth client provider (an ``httpx2.Auth``) for ``server_url``
        (with DPoP proofs added when :attr:`dpop_key` is set)."""
        install_redaction()
        store = _SDKStorage(self.storage, server_url)
        made = self._make(server_url, store)
        if self.dpop_key is not None:
            from nous_tools.contrib.mcp._dpop import DPoPAuth

            return DPoPAuth(made, self.dpop_key, _StoredBindings(store, self.dpop_key.thumbprint()))
        return made

    def __repr__(self) -> str:
        dpop = " dpop" if self.dpop_key is not None else ""
        return f"<OAuth {self.kind}{self._shown}{dpop}>"

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
        dpop: bool | DPoPKey = False,
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
        tokens and the registration (default: :class:`FileTokenStorage`). ``dpop``
        binds the tokens to a key (DPoP, RFC 9449; see :class:`OAuth`).
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
            dpop=dpop,
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
        dpop: bool | DPoPKey = False,
    ) -> OAuth:
        """A service signs in with its own credentials (the client credentials grant):
        ``client_secret`` (sent as ``token_endpoint_auth_method``), or ``private_key_jwt``
        with ``private_key`` (PEM; the JWT is signed here with ``signing_algorithm``)
        or ``assertion`` (a ready JWT, or a callable ``audience -> JWT`` such as a
        workload identity provider). Exactly one of the three. ``issuer`` is the
        authorization server the credentials belong to: give it, and they are never
        sent to another one. ``storage`` defaults to :class:`FileTokenStorage`. ``dpop``
        binds the tokens to a key (DPoP, RFC 9449; see :class:`OAuth`)."""
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
            dpop=dpop,
        )

    @classmethod
    def workload_identity(
        cls,
        client_id: str,
        *,
        assertion: str | c.Callable[[str], str],
        scopes: c.Sequence[str] | None = None,
        issuer: str | None = None,
        storage: TokenStorage | None = None,
        dpop: bool | DPoPKey = False,
    ) -> OAuth:
        """A workload signs in with the identity its platform gave it (workload identity
        federation, SEP-1933): a JWT from the platform's identity provider (a
        Kubernetes service account token, a cloud's instance identity, a CI job's OIDC
        token) is exchanged for an access token with the RFC 7523 jwt-bearer grant
        (``assertion=`` the JWT), by the public client ``client_id``: no secret to keep.

        ``assertion`` is the JWT, or a callable ``audience -> JWT`` called for each
        token request with the authorization server's issuer (the ``aud`` the JWT must
        carry), so a fresh one is asked for when the last has expired. A refused grant
        (``invalid_grant``, ``invalid_scope``, ``unauthorized_client``) fails the
        connection, never retried nor turned into another grant. ``issuer`` is the
        authorization server the workload is known to: give it, and the JWT is never
        sent to another one. ``storage`` defaults to :class:`FileTokenStorage`."""
        if not (isinstance(assertion, str) or callable(assertion)):
            raise TypeError("OAuth.workload_identity: assertion must be a JWT or a callable")
        scope = " ".join(scopes) if scopes else None

        def make(server_url: str, store: _SDKStorage) -> httpx2.Auth:
            return _refreshing(_jwt_bearer_provider())(  # type: ignore[no-any-return]
                server_url=server_url,
                storage=store,
                client_id=client_id,
                assertion_provider=_assertion_provider(assertion),
                scope=scope,
                issuer=issuer,
            )

        return cls(
            "workload_identity",
            make,
            storage if storage is not None else FileTokenStorage(),
            shown=f" client_id={client_id!r}",
            dpop=dpop,
        )

    @classmethod
    def enterprise_managed(
        cls,
        client_id: str,
        *,
        client_secret: str,
        issuer: str,
        idp_token_endpoint: str,
        id_token: str | c.Callable[[], str],
        idp_client_id: str,
        idp_client_secret: str | None = None,
        scopes: c.Sequence[str] | None = None,
        token_endpoint_auth_method: t.Literal[
            "client_secret_basic", "client_secret_post"
        ] = "client_secret_basic",
        storage: TokenStorage | None = None,
        dpop: bool | DPoPKey = False,
    ) -> OAuth:
        """Enterprise-managed authorization (SEP-990), both legs: the person's ID token
        from the enterprise identity provider (``id_token``: the JWT, or a callable
        returning a current one) is exchanged at the provider's ``idp_token_endpoint``
        for an ID-JAG (RFC 8693 token exchange, as the provider's client
        ``idp_client_id``, with ``idp_client_secret`` by HTTP Basic when it is a
        confidential one), and the ID-JAG for an access token at the MCP server's
        authorization server ``issuer`` (as :meth:`identity_assertion`). The person
        signs in to the enterprise once; the MCP server asks nothing more.

        A refused exchange fails the connection with the provider's error code (never
        the tokens)."""
        if not (isinstance(id_token, str) or callable(id_token)):
            raise TypeError("OAuth.enterprise_managed: id_token must be a JWT or a callable")
        made = cls.identity_assertion(
            client_id,
            client_secret=client_secret,
            issuer=issuer,
            assertion=_IdJagExchange(
                idp_token_endpoint,
                id_token,
                idp_client_id,
                idp_client_secret,
                " ".join(scopes) if scopes else None,
            ),
            scopes=scopes,
            token_endpoint_auth_method=token_endpoint_auth_method,
            storage=storage,
            dpop=dpop,
        )
        made.kind = "enterprise_managed"
        return made

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
        dpop: bool | DPoPKey = False,
    ) -> OAuth:
        """Enterprise-managed authorization (SEP-990, cross-app access): the enterprise
        identity provider's signed grant (an ID-JAG) is exchanged for an access token
        at the MCP server's authorization server ``issuer`` (the RFC 7523 jwt-bearer
        grant), by the confidential client ``client_id``/``client_secret``.

        ``assertion(audience, resource)`` returns the ID-JAG for that authorization
        server (``audience``) and MCP server (``resource``): obtaining it from the
        identity provider (an RFC 8693 token exchange) is the deployment's part. The
        authorization server is configuration here: the MCP server is never asked
        which one to use. ``dpop`` binds the tokens to a key (see :class:`OAuth`)."""

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
            dpop=dpop,
        )


_JWT_BEARER: list[type[t.Any]] = []


def _jwt_bearer_provider() -> type[t.Any]:
    """The SDK's OAuth client provider doing the RFC 7523 jwt-bearer grant with a
    workload's JWT, as a public client (made once, on first use: the SDK is imported
    only then)."""
    if _JWT_BEARER:
        return _JWT_BEARER[0]
    from mcp.client.auth import OAuthClientProvider, OAuthFlowError
    from mcp.client.auth.utils import issuers_match
    from mcp.shared.auth import (
        JWT_BEARER_GRANT_TYPE,
        OAuthClientInformationFull,
        OAuthClientMetadata,
    )

    class JWTBearerOAuthProvider(OAuthClientProvider):
        def __init__(
            self,
            server_url: str,
            storage: t.Any,
            client_id: str,
            assertion_provider: c.Callable[[str], c.Awaitable[str]],
            scope: str | None,
            issuer: str | None,
        ) -> None:
            metadata = OAuthClientMetadata(
                redirect_uris=None,
                grant_types=[JWT_BEARER_GRANT_TYPE],
                token_endpoint_auth_method="none",
                scope=scope,
            )
            super().__init__(server_url, metadata, storage, None, None)
            self._issuer = issuer
            self._scope = scope
            self._assertion_provider = assertion_provider
            self._fixed_client_info = OAuthClientInformationFull(
                redirect_uris=None,
                client_id=client_id,
                grant_types=[JWT_BEARER_GRANT_TYPE],
                token_endpoint_auth_method="none",
                scope=scope,
            )

        async def _initialize(self) -> None:
            self.context.current_tokens = await self.context.storage.get_tokens()
            self.context.client_info = self._fixed_client_info
            self._initialized = True

        def _select_authorization_server(self, advertised: list[str]) -> str:
            chosen = [a for a in advertised if self._issuer and issuers_match(a, self._issuer)]
            return chosen[0] if chosen else advertised[0]

        async def _perform_authorization(self) -> httpx2.Request:
            import httpx2

            metadata = self.context.oauth_metadata
            if metadata is None:
                raise OAuthFlowError("no authorization server metadata for the jwt-bearer grant")
            if self._issuer is not None and not issuers_match(str(metadata.issuer), self._issuer):
                self.context.oauth_metadata = None
                self.context.clear_tokens()
                raise OAuthFlowError(
                    f"the authorization server {metadata.issuer} is not the configured "
                    f"issuer {self._issuer}: the workload's JWT is not sent to it"
                )
            assertion = await self._assertion_provider(str(metadata.issuer))
            data: dict[str, str] = {
                "grant_type": JWT_BEARER_GRANT_TYPE,
                "assertion": assertion,
                "client_id": self._fixed_client_info.client_id or "",
            }
            if self.context.should_include_resource_param(self.context.protocol_version):
                data["resource"] = self.context.get_resource_url()
            # The server's choice (its challenge, its metadata), else the configured one.
            scope = self.context.client_metadata.scope or self._scope
            if scope:
                data["scope"] = scope
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
            return httpx2.Request("POST", self._get_token_endpoint(), data=data, headers=headers)

    _JWT_BEARER.append(JWTBearerOAuthProvider)
    return JWTBearerOAuthProvider


def _dpop_key(dpop: bool | DPoPKey) -> DPoPKey | None:
    """The key ``dpop=`` names: a fresh one for True, none for False."""
    from nous_tools.contrib.mcp._dpop import DPoPKey

    if isinstance(dpop, DPoPKey):
        return dpop
    if dpop is True:
        return DPoPKey.generate()
    if dpop is False:
        return None
    raise TypeError(f"OAuth: dpop must be a bool or a DPoPKey, got {type(dpop).__name__}")


TOKEN_EXCHANGE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"


class _IdJagExchange:
    """Leg 1 of enterprise-managed authorization: the person's ID token exchanged at
    the enterprise identity provider's token endpoint for an ID-JAG naming the MCP
    server's authorization server (``audience``) and the MCP server (``resource``),
    by an RFC 8693 token exchange. Called in a worker thread, once per token request."""

    def __init__(
        self,
        token_endpoint: str,
        id_token: str | c.Callable[[], str],
        client_id: str,
        client_secret: str | None,
        scopes: str | None,
        timeout: float = 30.0,
    ) -> None:
        self.token_endpoint = token_endpoint
        self.id_token = id_token
        self.client_id = client_id
        self.client_secret = client_secret
        self.scopes = scopes
        self.timeout = timeout

    def __call__(self, audience: str, resource: str) -> str:
        import httpx2
        from mcp.client.auth import OAuthFlowError

        subject = self.id_token if isinstance(self.id_token, str) else self.id_token()
        if not isinstance(subject, str):
            raise TypeError(f"the id_token callable returned {type(subject).__name__}, not a JWT")
        form = {
            "grant_type": TOKEN_EXCHANGE_GRANT_TYPE,
            "requested_token_type": ID_JAG_TOKEN_TYPE,
            "subject_token": subject,
            "subject_token_type": ID_TOKEN_TYPE,
            "audience": audience,
            "resource": resource,
        }
        if self.scopes:
            form["scope"] = self.scopes
        basic = None
        if self.client_secret is None:
            form["client_id"] = self.client_id
        else:
            basic = httpx2.BasicAuth(
                urllib.parse.quote(self.client_id, safe=""),
                urllib.parse.quote(self.client_secret, safe=""),
            )
        with httpx2.Client(timeout=self.timeout) as http:
            answer = http.post(self.token_endpoint, data=form, auth=basic)
        try:
            body = answer.json()
        except ValueError:
            body = {}
        if answer.status_code != 200 or not isinstance(body, dict):
            error = body.get("error", "no error code") if isinstance(body, dict) else "?"
            raise OAuthFlowError(
                f"the identity provider refused the token exchange for an ID-JAG "
                f"(HTTP {answer.status_code}, {error})"
            )
        issued = body.get("issued_token_type")
        grant = body.get("access_token")
        if issued != ID_JAG_TOKEN_TYPE or not isinstance(grant, str):
            raise OAuthFlowError(
                f"the identity provider's token exchange gave no ID-JAG "
                f"(issued_token_type {issued!r})"
            )
        return grant


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
