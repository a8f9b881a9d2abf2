"""The service grants of :class:`~nous_tools.contrib.mcp.OAuth` the SDK's authorization
server does not speak: workload identity (the RFC 7523 jwt-bearer grant) and
enterprise-managed authorization (an RFC 8693 token exchange at the identity provider,
then the jwt-bearer grant with the ID-JAG). Against a real HTTP server on 127.0.0.1
(``tests/support/oauth_grants_server.py``), through the provider
:meth:`OAuth.provider` gives the MCP client. The official conformance suite's
``auth/wif-jwt-bearer`` and ``auth/enterprise-managed-authorization`` run in
``make slow`` too.
"""

from __future__ import annotations

import base64

import anyio
import httpx2
import jwt
import pytest
from oauth_grants_server import ACCESS_TOKEN, ID_JAG, GrantsServer, grants_server

from nous_tools.contrib.mcp import InMemoryTokenStorage, OAuth
from nous_tools.contrib.mcp._dpop import access_token_hash

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def call(running: GrantsServer, auth: OAuth) -> httpx2.Response:
    """One request to the server's ``/mcp`` signed in by ``auth`` (the provider the MCP
    client would use, in an async client as the MCP client's is)."""
    url = f"{running.url}/mcp"

    async def send() -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=30.0) as http:
            return await http.post(url, json={}, auth=auth.provider(url))

    return anyio.run(send)


@pytest.mark.slow
def test_a_workload_jwt_is_exchanged_by_the_jwt_bearer_grant_as_a_public_client():
    with grants_server() as running:
        auth = OAuth.workload_identity(
            "workload-1", assertion="the-workload-jwt", storage=InMemoryTokenStorage()
        )
        assert call(running, auth).status_code == 200
        [token_request] = running.posts_to("/token")
        assert token_request.form == {
            "grant_type": JWT_BEARER,
            "assertion": "the-workload-jwt",
            "client_id": "workload-1",
            "resource": f"{running.url}/mcp",
        }
        assert "authorization" not in token_request.headers  # no secret: a public client
        assert running.posts_to("/mcp")[-1].headers["authorization"] == f"Bearer {ACCESS_TOKEN}"


@pytest.mark.slow
def test_the_workload_jwt_callable_is_asked_for_the_authorization_servers_audience():
    audiences: list[str] = []

    def platform_token(audience: str) -> str:
        audiences.append(audience)
        return f"jwt-for-{audience}"

    with grants_server() as running:
        auth = OAuth.workload_identity(
            "workload-1",
            assertion=platform_token,
            scopes=["tools:call"],
            storage=InMemoryTokenStorage(),
        )
        assert call(running, auth).status_code == 200
        [token_request] = running.posts_to("/token")
    assert audiences == [running.url]
    assert token_request.form["assertion"] == f"jwt-for-{running.url}"
    assert token_request.form["scope"] == "tools:call"


@pytest.mark.slow
def test_a_refused_workload_grant_fails_and_is_not_retried():
    with grants_server() as running:
        running.refuse["/token"] = "invalid_grant"
        auth = OAuth.workload_identity(
            "workload-1", assertion="expired-jwt", storage=InMemoryTokenStorage()
        )
        with pytest.raises(Exception, match="invalid_grant") as raised:
            call(running, auth)
        assert "expired-jwt" not in str(raised.value)
        assert len(running.posts_to("/token")) == 1


@pytest.mark.slow
def test_a_workload_jwt_is_never_sent_to_another_authorization_server():
    with grants_server() as running:
        auth = OAuth.workload_identity(
            "workload-1",
            assertion="the-workload-jwt",
            issuer="https://as.example",
            storage=InMemoryTokenStorage(),
        )
        with pytest.raises(Exception, match="not the configured issuer"):
            call(running, auth)
        assert running.posts_to("/token") == []


@pytest.mark.slow
def test_enterprise_managed_exchanges_the_id_token_for_an_id_jag_then_for_a_token():
    with grants_server() as running:
        auth = OAuth.enterprise_managed(
            "mcp-client",
            client_secret="mcp-secret",
            issuer=running.url,
            idp_token_endpoint=f"{running.url}/idp/token",
            id_token="the-person-id-token",
            idp_client_id="idp-client",
            storage=InMemoryTokenStorage(),
        )
        assert call(running, auth).status_code == 200
        [exchange] = running.posts_to("/idp/token")
        [grant] = running.posts_to("/token")
    assert exchange.form == {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
        "subject_token": "the-person-id-token",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "audience": running.url,
        "resource": f"{running.url}/mcp",
        "client_id": "idp-client",
    }
    assert grant.form["grant_type"] == JWT_BEARER and grant.form["assertion"] == ID_JAG
    basic = base64.b64encode(b"mcp-client:mcp-secret").decode()
    assert grant.headers["authorization"] == f"Basic {basic}"


@pytest.mark.slow
def test_a_refused_token_exchange_names_the_error_and_never_the_id_token():
    with grants_server() as running:
        running.refuse["/idp/token"] = "invalid_grant"
        auth = OAuth.enterprise_managed(
            "mcp-client",
            client_secret="mcp-secret",
            issuer=running.url,
            idp_token_endpoint=f"{running.url}/idp/token",
            id_token=lambda: "the-person-id-token",
            idp_client_id="idp-client",
            idp_client_secret="idp-secret",
            storage=InMemoryTokenStorage(),
        )
        with pytest.raises(Exception, match=r"refused the token exchange .*invalid_grant") as e:
            call(running, auth)
        [exchange] = running.posts_to("/idp/token")
        assert running.posts_to("/token") == []
    assert "the-person-id-token" not in str(e.value)
    assert exchange.headers["authorization"].startswith("Basic ")  # a confidential IdP client
    assert "client_id" not in exchange.form


@pytest.mark.slow
def test_a_dpop_bound_token_is_presented_with_its_proof_on_the_next_connection_too():
    with grants_server() as running:
        running.token_type = "DPoP"
        storage = InMemoryTokenStorage()
        auth = OAuth.workload_identity(
            "workload-1", assertion="the-workload-jwt", storage=storage, dpop=True
        )
        assert call(running, auth).status_code == 200
        assert call(running, auth).status_code == 200  # a new provider: the stored token
        assert len(running.posts_to("/token")) == 1
        [token_request] = running.posts_to("/token")
        last = running.posts_to("/mcp")[-1]
    assert last.headers["authorization"] == f"DPoP {ACCESS_TOKEN}"
    assert jwt.decode(last.headers["dpop"], options={"verify_signature": False})["ath"] == (
        access_token_hash(ACCESS_TOKEN)
    )
    assert "dpop" in token_request.headers
    # what is stored beside the tokens is the token's hash, never the token again
    assert auth.dpop_key is not None
    entry = storage.load(f"{running.url}/mcp")
    assert entry is not None
    assert entry["dpop"] == {
        "jkt": auth.dpop_key.thumbprint(),
        "ath": [access_token_hash(ACCESS_TOKEN)],
    }


def test_grant_options_are_checked_when_made():
    with pytest.raises(TypeError, match="assertion must be a JWT or a callable"):
        OAuth.workload_identity("w", assertion=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="id_token must be a JWT or a callable"):
        OAuth.enterprise_managed(
            "c",
            client_secret="s",
            issuer="https://as.example",
            idp_token_endpoint="https://idp.example/token",
            id_token=None,  # type: ignore[arg-type]
            idp_client_id="i",
        )
    assert "workload_identity" in repr(OAuth.workload_identity("w", assertion="j"))
