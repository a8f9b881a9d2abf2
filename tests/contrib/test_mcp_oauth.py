"""OAuth in the synchronous MCP client, against a real authorization server and MCP
server in this process (the official SDK's, see ``tests/support/mcp_oauth_server.py``).

The official conformance suite's 22 authorization scenarios run in ``make slow``
(``tests/contrib/test_mcp_conformance.py``); these pin what a user sees: signing in once,
refresh instead of a second sign-in, the token file, and no token in logs or errors.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time

import httpx2
import mcp_served_tools
import pytest
from mcp_oauth_server import oauth_server

from nous_tools import Ok, Registry
from nous_tools.contrib.mcp import (
    FileTokenStorage,
    InMemoryTokenStorage,
    MCPServer,
    OAuth,
    TokenStorage,
)
from nous_tools.contrib.mcp._auth import redact


class Browser:
    """Plays the person: opens the URL, and the (auto-consenting) authorization server
    redirects to the client's local callback."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    def __call__(self, url: str) -> None:
        self.opened.append(url)
        with httpx2.Client(timeout=30.0) as http:
            response = http.get(url, follow_redirects=False)
            assert response.status_code in (302, 303, 307), response.text
            http.get(response.headers["location"])


def add_of(server: MCPServer) -> object:
    registry = Registry()
    registry.register_mcp(server, trusted=True)
    return registry.execute("add", {"a": 2, "b": 3})


def test_a_person_signs_in_once_and_the_tokens_are_reused():
    browser = Browser()
    storage = InMemoryTokenStorage()
    with oauth_server(mcp_served_tools.registry) as running:
        auth = OAuth.authorization_code(open_browser=browser, storage=storage)
        with MCPServer.http(running.url, auth=auth) as server:
            assert add_of(server) == Ok(5)
            assert add_of(server) == Ok(5)  # the same token
        assert len(browser.opened) == 1
        opened = browser.opened[0]
        assert "code_challenge_method=S256" in opened and "code_challenge=" in opened
        assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in opened
        # a new process, say: the stored tokens sign it in, no browser
        with MCPServer.http(running.url, auth=auth) as again:
            assert add_of(again) == Ok(5)
        assert len(browser.opened) == 1
        assert running.provider.exchanges == ["authorization_code"]
        assert len(running.provider.clients) == 1  # registered dynamically, once


def test_an_expired_stored_token_is_refreshed_not_signed_in_again():
    browser = Browser()
    storage = InMemoryTokenStorage()
    with oauth_server(mcp_served_tools.registry) as running:
        auth = OAuth.authorization_code(open_browser=browser, storage=storage)
        with MCPServer.http(running.url, auth=auth) as server:
            assert add_of(server) == Ok(5)
        entry = dict(storage.load(running.url))
        entry["expires_at"] = time.time() - 60  # as if saved an hour ago
        storage.save(running.url, entry)
        with MCPServer.http(running.url, auth=auth) as later:
            assert add_of(later) == Ok(5)
    assert running.provider.exchanges == ["authorization_code", "refresh_token"]
    assert len(browser.opened) == 1


def test_a_pre_registered_client_skips_dynamic_registration():
    from mcp.shared.auth import OAuthClientInformationFull

    with oauth_server(mcp_served_tools.registry) as running:
        running.provider.clients["known-client"] = OAuthClientInformationFull(
            client_id="known-client",
            redirect_uris=["http://127.0.0.1:1/callback"],
            token_endpoint_auth_method="none",
        )
        auth = OAuth.authorization_code(
            client_id="known-client", open_browser=Browser(), storage=InMemoryTokenStorage()
        )
        with pytest.raises(ConnectionError):  # its redirect URI is not ours: refused
            MCPServer.http(running.url, auth=auth).open()
        port = 42_000 + os.getpid() % 1000
        running.provider.clients["known-client"] = OAuthClientInformationFull(
            client_id="known-client",
            redirect_uris=[f"http://127.0.0.1:{port}/callback"],
            token_endpoint_auth_method="none",
        )
        auth = OAuth.authorization_code(
            client_id="known-client",
            callback_port=port,
            open_browser=Browser(),
            storage=InMemoryTokenStorage(),
        )
        with MCPServer.http(running.url, auth=auth) as server:
            assert add_of(server) == Ok(5)
        assert list(running.provider.clients) == ["known-client"]


def test_a_printed_url_is_followed_by_the_person(monkeypatch, capsys):
    from nous_tools.contrib.mcp import _auth

    shown = _auth._show
    browser = Browser()

    def show_and_follow(url: str) -> None:
        shown(url)
        browser(url)

    monkeypatch.setattr(_auth, "_show", show_and_follow)
    with oauth_server(mcp_served_tools.registry) as running:
        auth = OAuth.authorization_code(open_browser=False, storage=InMemoryTokenStorage())
        with MCPServer.http(running.url, auth=auth) as server:
            assert add_of(server) == Ok(5)
    err = capsys.readouterr().err
    assert "open this URL in a browser" in err and browser.opened[0] in err


def test_nobody_signing_in_is_a_connection_error_after_the_timeout():
    with oauth_server(mcp_served_tools.registry) as running:
        auth = OAuth.authorization_code(
            open_browser=lambda url: None, timeout=0.5, storage=InMemoryTokenStorage()
        )
        with pytest.raises(ConnectionError, match=r"nobody signed in within 0\.5 s"):
            MCPServer.http(running.url, auth=auth, connect_timeout=30).open()


def test_token_material_is_never_in_logs_or_errors(caplog):
    caplog.set_level(logging.DEBUG)
    storage = InMemoryTokenStorage()
    with oauth_server(mcp_served_tools.registry) as running:
        auth = OAuth.authorization_code(open_browser=Browser(), storage=storage)
        with MCPServer.http(running.url, auth=auth) as server:
            assert add_of(server) == Ok(5)
        # a failure: a stored refresh token the server no longer knows, an expired token
        entry = dict(storage.load(running.url))
        entry["expires_at"] = time.time() - 60
        running.provider.refresh.clear()
        storage.save(running.url, entry)
        failing = OAuth.authorization_code(
            open_browser=lambda url: None, timeout=0.5, storage=storage
        )
        with pytest.raises(ConnectionError) as failed:
            MCPServer.http(running.url, auth=failing).open()
        issued = list(running.provider.issued)
    assert len(issued) >= 3  # a code, an access token, a refresh token
    text = caplog.text + str(failed.value) + repr(auth) + repr(storage)
    assert [secret for secret in issued if secret in text] == []
    assert "Bearer" in caplog.text or "HTTP Request" in caplog.text  # logs were written


def test_redact_hides_tokens_in_json_urls_and_headers():
    assert redact('{"access_token": "abc", "token_type": "Bearer"}') == (
        '{"access_token": "[redacted]", "token_type": "Bearer"}'
    )
    assert redact("GET /callback?code=xyz&state=s") == "GET /callback?code=[redacted]&state=s"
    assert redact("refresh_token=r1&client_secret=s2") == (
        "refresh_token=[redacted]&client_secret=[redacted]"
    )
    assert redact("Authorization: Bearer eyJhbGciOi.x.y") == "Authorization: Bearer [redacted]"
    assert redact("supports the jwt-bearer grant") == "supports the jwt-bearer grant"


def test_file_token_storage_is_readable_by_its_owner_only(tmp_path, caplog):
    path = tmp_path / "state" / "tokens.json"
    storage = FileTokenStorage(path)
    assert isinstance(storage, TokenStorage) and isinstance(InMemoryTokenStorage(), TokenStorage)
    assert storage.load("https://a/mcp") is None
    storage.save("https://a/mcp", {"tokens": {"access_token": "t"}, "expires_at": 1.0})
    storage.save("https://b/mcp", {"client_info": {"client_id": "c"}})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text())["https://a/mcp"]["tokens"] == {"access_token": "t"}
    assert FileTokenStorage(path).load("https://b/mcp") == {"client_info": {"client_id": "c"}}
    path.chmod(0o644)
    storage.save("https://a/mcp", {})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "could be read by others" in caplog.text
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".mcp-oauth-")] == []


def test_the_default_token_file_follows_xdg_state_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert FileTokenStorage().path == tmp_path / "nous-tools" / "mcp-oauth.json"


def test_oauth_options_are_checked_when_made():
    with pytest.raises(ValueError, match="exactly one of"):
        OAuth.client_credentials("id")
    with pytest.raises(ValueError, match="exactly one of"):
        OAuth.client_credentials("id", client_secret="s", private_key="k")
    with pytest.raises(ValueError, match="client_secret needs a client_id"):
        OAuth.authorization_code(client_secret="s")
    with pytest.raises(ValueError, match="timeout"):
        OAuth.authorization_code(timeout=0)
    shown = repr(OAuth.client_credentials("svc", client_secret="very-secret"))
    assert "very-secret" not in shown and "svc" in shown


class ForgingBrowser(Browser):
    """First a forged redirect to the client's callback (another state), then the
    person's real one."""

    def __call__(self, url: str) -> None:
        import urllib.parse

        redirect = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["redirect_uri"][0]
        with httpx2.Client(timeout=30.0) as http:
            forged = http.get(f"{redirect}?code=stolen&state=not-the-one")
            assert forged.status_code == 400
        super().__call__(url)


def test_a_callback_with_another_state_is_ignored_and_the_real_one_signs_in():
    browser = ForgingBrowser()
    with oauth_server(mcp_served_tools.registry) as running:
        auth = OAuth.authorization_code(open_browser=browser, storage=InMemoryTokenStorage())
        with MCPServer.http(running.url, auth=auth) as server:
            assert add_of(server) == Ok(5)
        assert running.provider.exchanges == ["authorization_code"]


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.1.2.3/.well-known/oauth-authorization-server",
        "http://127.0.0.1:9/token",
        "http://[::1]/authorize",
        "http://localhost/.well-known/openid-configuration",
    ],
)
def test_oauth_requests_of_a_public_server_never_go_into_a_private_network(target):
    import anyio

    from nous_tools.contrib.mcp._transport import request_guard

    guard = request_guard("https://93.184.216.34/mcp")  # a server on a public address
    with pytest.raises(ConnectionRefusedError, match="allow_private_networks=True"):
        anyio.run(guard, httpx2.Request("GET", target))
    anyio.run(guard, httpx2.Request("GET", "https://93.184.216.34/.well-known/x"))  # its own
    anyio.run(guard, httpx2.Request("GET", "https://8.8.8.8/token"))  # elsewhere, public
    allowed = request_guard("https://93.184.216.34/mcp", allow_private_networks=True)
    anyio.run(allowed, httpx2.Request("GET", target))
    inside = request_guard("http://127.0.0.1:8000/mcp")  # a server in the network itself
    anyio.run(inside, httpx2.Request("GET", target))
