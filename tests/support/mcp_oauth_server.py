"""An OAuth-protected MCP server in this process, for the tests and the benchmark: a
registry served over Streamable HTTP behind the official SDK's authorization server
and bearer-token check (``mcp.server.auth``), on 127.0.0.1 and a free port.

The authorization server consents at once (no person): ``/authorize`` redirects back
with a code, so a client's browser step is one HTTP redirect. Dynamic client
registration is on. ``token_lifetime`` sets how long access tokens live (a short one
exercises refresh). ``provider`` records what it issued, so tests can look for leaks.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
import time
import typing as t

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    ProviderTokenVerifier,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from nous_tools import Registry
from nous_tools.contrib.mcp import build_server


class AutoConsent(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """An in-memory authorization server that approves every request."""

    def __init__(self, issuer: str, token_lifetime: int) -> None:
        self.issuer = issuer
        self.token_lifetime = token_lifetime
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        #: Every secret issued (tokens, codes, client secrets): none may leak.
        self.issued: list[str] = []
        self.exchanges: list[str] = []  # grant types, in order

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        if client_info.client_secret:
            self.issued.append(client_info.client_secret)

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(24)
        self.issued.append(code)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(
            str(params.redirect_uri), code=code, state=params.state, iss=self.issuer
        )

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _tokens(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.issued.extend([access, refresh])
        expires = int(time.time()) + self.token_lifetime
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires, resource=resource
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            refresh_token=refresh,
            expires_in=self.token_lifetime,
            scope=" ".join(scopes) or None,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.exchanges.append("authorization_code")
        return self._tokens(
            authorization_code.client_id, authorization_code.scopes, authorization_code.resource
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self,
        client: OAuthClientInformationFull,
        refresh_token: RefreshToken,
        scopes: list[str],
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.exchanges.append("refresh_token")
        return self._tokens(
            refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)


class OAuthServer:
    """The running server: ``url`` (the MCP endpoint), ``provider``; ``close()``."""

    def __init__(
        self, url: str, provider: AutoConsent, http: uvicorn.Server, thread: threading.Thread
    ):
        self.url = url
        self.provider = provider
        self._http = http
        self._thread = thread

    def close(self) -> None:
        self._http.should_exit = True
        self._thread.join(10.0)


@contextlib.contextmanager
def oauth_server(
    registry: Registry, *, token_lifetime: int = 3600, protected: bool = True
) -> t.Iterator[OAuthServer]:
    """Serve ``registry`` behind OAuth on 127.0.0.1 (a free port) until the block ends
    (``protected=False``: the same server without the authorization)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    provider = AutoConsent(base, token_lifetime)
    server = build_server(registry, name="oauth-protected")
    if not protected:
        app = server.streamable_http_app(host="127.0.0.1")
    else:
        app = server.streamable_http_app(
            host="127.0.0.1",
            auth=AuthSettings(
                issuer_url=base,  # type: ignore[arg-type]
                resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
                client_registration_options=ClientRegistrationOptions(enabled=True),
                required_scopes=[],
                validate_token_resource=False,
            ),
            token_verifier=ProviderTokenVerifier(provider),
            auth_server_provider=provider,
        )
    http = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=http.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not http.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the OAuth server did not start"
        thread.join(0.01)
    running = OAuthServer(f"{base}/mcp", provider, http, thread)
    try:
        yield running
    finally:
        running.close()


if __name__ == "__main__":
    # ``python tests/support/mcp_oauth_server.py [--no-auth]``: serve mcp_served_tools.py's
    # registry (the benchmark's server); prints the URL, serves until killed.
    import sys

    import mcp_served_tools

    with oauth_server(mcp_served_tools.registry, protected="--no-auth" not in sys.argv) as running:
        print(running.url, flush=True)
        threading.Event().wait()
