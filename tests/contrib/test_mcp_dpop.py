"""DPoP (RFC 9449) in the MCP client's OAuth: the proofs (checked with PyJWT and the
key in the proof's own header, and against the RFC's published values) and the flow
around the SDK's provider (through ``httpx2.MockTransport``, the HTTP client's public
test transport). The official conformance suite's ``auth/dpop`` and
``auth/dpop-nonce`` scenarios judge it against its own servers in ``make slow``.
"""

from __future__ import annotations

import base64
import collections.abc as c
import hashlib
import time

import anyio
import httpx2
import jwt
import mcp_served_tools
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from mcp_oauth_server import oauth_server

from nous_tools import Ok, Registry
from nous_tools.contrib.mcp import DPoPKey, InMemoryTokenStorage, MCPServer, OAuth
from nous_tools.contrib.mcp._dpop import DPoPAuth, access_token_hash

TOKEN_URL = "https://as.example/token"
RESOURCE_URL = "https://mcp.example/mcp"
METADATA_URL = "https://as.example/.well-known/oauth-authorization-server"


def verified(proof: str) -> tuple[dict[str, object], dict[str, object]]:
    """The proof's header and claims, its signature checked with the public key in
    its own ``jwk`` header (as a server does)."""
    header = jwt.get_unverified_header(proof)
    key = jwt.PyJWK(header["jwk"], algorithm=header["alg"])
    claims = jwt.decode(proof, key.key, algorithms=[header["alg"]])
    return header, claims


# -- the proof ------------------------------------------------------------------------


def test_a_proof_is_a_dpop_jwt_signed_by_the_public_key_in_its_header():
    key = DPoPKey.generate()
    before = int(time.time())
    header, claims = verified(key.proof("post", TOKEN_URL + "?a=1#f"))
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert header["jwk"] == key.jwk and "d" not in header["jwk"]  # the public half only
    assert claims["htm"] == "POST"
    assert claims["htu"] == TOKEN_URL  # no query, no fragment (RFC 9449 §4.2)
    assert before <= claims["iat"] <= int(time.time())
    assert isinstance(claims["jti"], str) and len(claims["jti"]) >= 16
    assert "ath" not in claims and "nonce" not in claims


def test_each_proof_has_its_own_jti():
    key = DPoPKey.generate()
    jtis = {verified(key.proof("POST", RESOURCE_URL))[1]["jti"] for _ in range(20)}
    assert len(jtis) == 20


def test_a_proof_for_the_server_binds_the_token_by_its_sha256_and_carries_the_nonce():
    key = DPoPKey.generate()
    _, claims = verified(key.proof("POST", RESOURCE_URL, access_token="tok-1", nonce="n-1"))
    expected = base64.urlsafe_b64encode(hashlib.sha256(b"tok-1").digest()).rstrip(b"=")
    assert claims["ath"] == expected.decode()
    assert claims["nonce"] == "n-1"


def test_ath_matches_the_rfc_9449_example():
    # RFC 9449 §7.1, Figure 12: the access token and its proof's ath.
    token = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
    assert access_token_hash(token) == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"


def test_the_thumbprint_matches_the_rfc_7638_example():
    key = DPoPKey.generate()
    key.jwk = {  # RFC 7638 §3.1's RSA key
        "kty": "RSA",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6"
        "tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5"
        "v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08"
        "qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8"
        "awapJzKnqDKgw",
        "e": "AQAB",
    }
    assert key.thumbprint() == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_a_key_of_yours_in_pem_signs_with_its_algorithm():
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    key = DPoPKey.from_pem(pem)
    header, claims = verified(key.proof("GET", RESOURCE_URL))
    assert header["alg"] == "RS256" and header["jwk"]["kty"] == "RSA" and "d" not in header["jwk"]
    assert claims["htm"] == "GET"
    other = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(ValueError, match="cannot sign DPoP proofs"):
        DPoPKey.from_pem(other)


def test_the_dpop_option_is_checked_when_made():
    with pytest.raises(TypeError, match="dpop must be a bool or a DPoPKey"):
        OAuth.client_credentials("svc", client_secret="s", dpop="yes")  # type: ignore[arg-type]
    key = DPoPKey.generate()
    assert OAuth.authorization_code(dpop=key).dpop_key is key
    assert OAuth.authorization_code(dpop=True).dpop_key is not None
    assert OAuth.authorization_code().dpop_key is None
    assert "dpop" in repr(OAuth.client_credentials("svc", client_secret="s", dpop=True))


# -- the flow -------------------------------------------------------------------------


class TokenThenResource(httpx2.Auth):
    """Stands in for the SDK's provider (an ``httpx2.Auth``, as it is): the authorization
    server's metadata when ``metadata`` is given, a token request, then the request
    with the token it got as a bearer one."""

    def __init__(self, metadata: str | None = None) -> None:
        self.metadata = metadata
        self.token_types: list[str] = []

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> c.AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self.metadata is not None:
            yield httpx2.Request("GET", self.metadata)
        answer = yield httpx2.Request(
            "POST",
            TOKEN_URL,
            data={"grant_type": "client_credentials"},
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        await answer.aread()
        if answer.status_code != 200:
            raise RuntimeError(f"the token request was refused: {answer.status_code}")
        body = answer.json()
        self.token_types.append(body["token_type"])
        request.headers["Authorization"] = f"Bearer {body['access_token']}"
        yield request


class Servers:
    """An authorization server and an MCP server in one transport function. Each
    refuses the first ``nonce_asks`` requests for want of a nonce (``use_dpop_nonce``
    and a ``DPoP-Nonce`` header), and after that any proof without its nonce."""

    def __init__(self, nonce_asks: int, token_type: str = "DPoP") -> None:
        self.nonce_asks = nonce_asks
        self.token_type = token_type
        #: Each request as it arrived: its URL, Authorization and DPoP headers.
        self.seen: list[tuple[str, str | None, str | None]] = []
        self.asked = {TOKEN_URL: 0, RESOURCE_URL: 0}

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        proof = request.headers.get("dpop")
        self.seen.append((url, request.headers.get("authorization"), proof))
        nonce = verified(proof)[1].get("nonce") if proof else None
        wanted = self.nonce_asks > 0 and nonce != f"nonce-{url}"
        if self.asked[url] < self.nonce_asks or wanted:
            self.asked[url] += 1
            if url == TOKEN_URL:
                return httpx2.Response(
                    400, headers={"DPoP-Nonce": f"nonce-{url}"}, json={"error": "use_dpop_nonce"}
                )
            return httpx2.Response(
                401,
                headers={
                    "DPoP-Nonce": f"nonce-{url}",
                    "WWW-Authenticate": 'DPoP error="use_dpop_nonce"',
                },
            )
        if url == TOKEN_URL:
            return httpx2.Response(
                200, json={"access_token": "tok-9", "token_type": self.token_type}
            )
        return httpx2.Response(200, json={"ok": True})


def run(servers: Servers, key: DPoPKey) -> tuple[httpx2.Response, TokenThenResource]:
    """One request through the flow (an async client: the MCP client's is)."""
    inner = TokenThenResource()

    async def send() -> httpx2.Response:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(servers)) as http:
            return await http.post(RESOURCE_URL, json={}, auth=DPoPAuth(inner, key))

    return anyio.run(send), inner


def test_a_bound_token_is_sent_with_the_dpop_scheme_and_a_proof_of_it():
    key = DPoPKey.generate()
    servers = Servers(nonce_asks=0)
    response, inner = run(servers, key)
    assert response.status_code == 200
    assert inner.token_types == ["Bearer"]  # the SDK reads it as it knows it
    (_, _, token_proof), (_, authorization, resource_proof) = servers.seen
    assert token_proof is not None and resource_proof is not None
    header, claims = verified(token_proof)
    assert header["jwk"] == key.jwk and claims["htu"] == TOKEN_URL and "ath" not in claims
    assert authorization == "DPoP tok-9"
    _, claims = verified(resource_proof)
    assert claims["ath"] == access_token_hash("tok-9") and claims["htu"] == RESOURCE_URL


def test_a_nonce_asked_for_is_sent_in_a_fresh_proof_once():
    servers = Servers(nonce_asks=1)
    response, _ = run(servers, DPoPKey.generate())
    assert response.status_code == 200
    assert [url for url, _, _ in servers.seen] == [
        TOKEN_URL,
        TOKEN_URL,
        RESOURCE_URL,
        RESOURCE_URL,
    ]
    claims = [verified(proof)[1] for _, _, proof in servers.seen if proof is not None]
    assert [c.get("nonce") for c in claims] == [
        None,
        f"nonce-{TOKEN_URL}",
        None,  # another origin: its nonce is not known yet
        f"nonce-{RESOURCE_URL}",
    ]
    assert len({c["jti"] for c in claims}) == 4  # never a proof sent twice


def test_a_server_asking_again_and_again_gets_one_more_try_only():
    servers = Servers(nonce_asks=5)
    with pytest.raises(RuntimeError, match="refused: 400"):
        run(servers, DPoPKey.generate())
    # the token endpoint was tried twice and its refusal handed to the provider
    assert [url for url, _, _ in servers.seen] == [TOKEN_URL, TOKEN_URL]
    assert servers.asked[TOKEN_URL] == 2


def test_a_bearer_token_is_sent_as_a_bearer_token():
    servers = Servers(nonce_asks=0, token_type="Bearer")
    response, _ = run(servers, DPoPKey.generate())
    assert response.status_code == 200
    _, authorization, proof = servers.seen[-1]
    assert authorization == "Bearer tok-9" and proof is None


@pytest.mark.slow
def test_an_authorization_server_issuing_bearer_tokens_still_signs_a_dpop_client_in():
    """The SDK's authorization server knows no DPoP: the proof is ignored, the token
    is a bearer one, and the client uses it as such."""

    class Browser:
        def __call__(self, url: str) -> None:
            with httpx2.Client(timeout=30.0) as http:
                answer = http.get(url, follow_redirects=False)
                http.get(answer.headers["location"])

    with oauth_server(mcp_served_tools.registry) as running:
        auth = OAuth.authorization_code(
            open_browser=Browser(), storage=InMemoryTokenStorage(), dpop=True
        )
        with MCPServer.http(running.url, auth=auth) as server:
            registry = Registry()
            registry.register_mcp(server, trusted=True)
            assert registry.execute("add", {"a": 2, "b": 3}) == Ok(5)


def metadata_of(algorithms: list[str]) -> c.Callable[[httpx2.Request], httpx2.Response]:
    servers = Servers(nonce_asks=0)

    def handle(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.startswith("/.well-known/"):
            return httpx2.Response(200, json={"dpop_signing_alg_values_supported": algorithms})
        return servers(request)

    return handle


def send_with_metadata(algorithms: list[str], key: DPoPKey) -> httpx2.Response:
    async def send() -> httpx2.Response:
        transport = httpx2.MockTransport(metadata_of(algorithms))
        async with httpx2.AsyncClient(transport=transport) as http:
            return await http.post(
                RESOURCE_URL, json={}, auth=DPoPAuth(TokenThenResource(METADATA_URL), key)
            )

    return anyio.run(send)


def test_an_authorization_server_not_taking_the_keys_algorithm_stops_the_flow_clearly():
    with pytest.raises(Exception, match=r"takes DPoP proofs signed with RS256, PS256, not ES256"):
        send_with_metadata(["RS256", "PS256"], DPoPKey.generate())
    assert send_with_metadata(["RS256", "ES256"], DPoPKey.generate()).status_code == 200
