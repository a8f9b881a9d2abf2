"""DPoP (RFC 9449): sender-constrained OAuth tokens for
:class:`~nous_tools.contrib.mcp.OAuth` (``OAuth...(dpop=True)``, the MCP extension
SEP-1932).

A :class:`DPoPKey` is the client's key pair. Every token request and every request
to the MCP server that carries a token gets a fresh proof (a ``dpop+jwt`` signed by
the key, whose public half is in its ``jwk`` header, with ``htm``, ``htu``, ``iat``,
a unique ``jti``, and for the MCP server ``ath``: the base64url SHA-256 of the token).
A token the authorization server issues as ``token_type: DPoP`` is bound to the key
and presented as ``Authorization: DPoP <token>``; a server that asks for a nonce
(``use_dpop_nonce`` with a ``DPoP-Nonce`` header) gets the request once more with it.

>>> key = DPoPKey.generate()
>>> proof = key.proof("POST", "https://as.example/token?x=1")
>>> import jwt
>>> jwt.get_unverified_header(proof)["typ"]
'dpop+jwt'
>>> claims = jwt.decode(proof, key.public_key, algorithms=["ES256"])
>>> claims["htm"], claims["htu"]
('POST', 'https://as.example/token')
"""

from __future__ import annotations

import base64
import collections.abc as c
import hashlib
import json
import secrets
import time
import typing as t
import urllib.parse

import httpx2

__all__ = ["DPoPKey"]

#: The proof's ``typ`` header (RFC 9449 §4.2).
PROOF_TYPE = "dpop+jwt"
#: How many bound access tokens a :class:`Bindings` remembers (the latest ones).
BOUND_KEPT = 8


def access_token_hash(access_token: str) -> str:
    """The ``ath`` claim: base64url (no padding) of the SHA-256 of the token's ASCII."""
    digest = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def target_uri(url: str) -> str:
    """The ``htu`` of a request to ``url``: without its query and fragment."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class DPoPKey:
    """The client's DPoP key pair: an elliptic curve key (P-256, ``ES256``) made with
    :meth:`generate`, or a private key of yours in PEM (:meth:`from_pem`: EC P-256,
    P-384, P-521 or RSA). Tokens issued against it are bound to it: keep it as long as
    the tokens (a key made per :class:`~nous_tools.contrib.mcp.OAuth` lasts the
    process; tokens saved by an earlier process are then asked for again)."""

    def __init__(self, private_key: t.Any, algorithm: str) -> None:
        import jwt

        self._private_key = private_key
        self.algorithm = algorithm
        #: The public key (a ``cryptography`` key object).
        self.public_key = private_key.public_key()
        jwk = json.loads(jwt.get_algorithm_by_name(algorithm).to_jwk(self.public_key))
        #: The public JWK put in each proof's header (no private member).
        self.jwk: dict[str, t.Any] = {
            k: v for k, v in jwk.items() if k in ("kty", "crv", "x", "y", "n", "e")
        }

    @classmethod
    def generate(cls) -> DPoPKey:
        """A fresh P-256 key (``ES256``)."""
        from cryptography.hazmat.primitives.asymmetric import ec

        return cls(ec.generate_private_key(ec.SECP256R1()), "ES256")

    @classmethod
    def from_pem(cls, pem: str | bytes, password: bytes | None = None) -> DPoPKey:
        """A key of yours, in PEM: EC P-256/P-384/P-521 (``ES256``/``ES384``/``ES512``)
        or RSA (``RS256``). Anything else raises ValueError."""
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        data = pem.encode() if isinstance(pem, str) else pem
        key = load_pem_private_key(data, password)
        if isinstance(key, ec.EllipticCurvePrivateKey):
            curves = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
            algorithm = curves.get(key.curve.name)
            if algorithm is None:
                raise ValueError(f"DPoPKey: the curve {key.curve.name} is not one DPoP uses")
            return cls(key, algorithm)
        if isinstance(key, rsa.RSAPrivateKey):
            return cls(key, "RS256")
        raise ValueError(f"DPoPKey: a {type(key).__name__} cannot sign DPoP proofs")

    def thumbprint(self) -> str:
        """The RFC 7638 SHA-256 thumbprint of the public key (a bound token's ``cnf.jkt``)."""
        members = ("crv", "kty", "x", "y") if self.jwk["kty"] == "EC" else ("e", "kty", "n")
        canonical = json.dumps({m: self.jwk[m] for m in members}, separators=(",", ":"))
        digest = hashlib.sha256(canonical.encode()).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    def proof(
        self,
        method: str,
        url: str,
        *,
        access_token: str | None = None,
        nonce: str | None = None,
    ) -> str:
        """A fresh proof for a ``method`` request to ``url`` (its query and fragment
        left out of ``htu``), with ``ath`` for ``access_token`` and the server's
        ``nonce`` when given."""
        import jwt

        claims: dict[str, t.Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method.upper(),
            "htu": target_uri(url),
            "iat": int(time.time()),
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        if nonce is not None:
            claims["nonce"] = nonce
        return jwt.encode(
            claims,
            self._private_key,
            algorithm=self.algorithm,
            headers={"typ": PROOF_TYPE, "jwk": self.jwk},
        )

    def __repr__(self) -> str:
        return f"<DPoPKey {self.algorithm} {self.thumbprint()}>"


# -- the flow -----------------------------------------------------------------------------


def _origin(url: httpx2.URL) -> str:
    return f"{url.scheme}://{url.netloc.decode('ascii')}"


def _is_token_request(request: httpx2.Request) -> bool:
    """A request to a token endpoint: a form POST with a ``grant_type``."""
    if request.method != "POST":
        return False
    if "application/x-www-form-urlencoded" not in request.headers.get("content-type", ""):
        return False
    try:
        form = urllib.parse.parse_qs(request.content.decode("ascii"))
    except (UnicodeDecodeError, httpx2.RequestNotRead):
        return False
    return "grant_type" in form


def _is_server_metadata(request: httpx2.Request) -> bool:
    """A request for an authorization server's metadata (RFC 8414, OpenID Connect)."""
    path = request.url.path
    return request.method == "GET" and (
        "/.well-known/oauth-authorization-server" in path
        or "/.well-known/openid-configuration" in path
    )


def _json(response: httpx2.Response) -> dict[str, t.Any]:
    try:
        found = json.loads(response.content)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


class Bindings(t.Protocol):
    """Which access tokens were issued bound to the key (``token_type: DPoP``), so a
    token loaded again later (another connection, another process with the same
    key) is presented as it was issued."""

    def is_bound(self, access_token: str) -> bool: ...

    def bind(self, access_token: str) -> None: ...


class MemoryBindings:
    """:class:`Bindings` in memory: the latest :data:`BOUND_KEPT` tokens' ``ath``."""

    def __init__(self) -> None:
        self._hashes: dict[str, None] = {}

    def is_bound(self, access_token: str) -> bool:
        return access_token_hash(access_token) in self._hashes

    def bind(self, access_token: str) -> None:
        self._hashes[access_token_hash(access_token)] = None
        while len(self._hashes) > BOUND_KEPT:
            del self._hashes[next(iter(self._hashes))]


class DPoPAuth(httpx2.Auth):
    """An OAuth provider of the SDK (an ``httpx2.Auth``) with DPoP added: a proof on
    each token request and each request that carries a token, the bound tokens
    presented with the ``DPoP`` scheme, and one more try with the nonce a server
    asks for. The provider itself is unchanged: it sees the tokens as bearer ones."""

    def __init__(self, inner: httpx2.Auth, key: DPoPKey, bindings: Bindings | None = None) -> None:
        self.inner = inner
        self.key = key
        #: The last nonce each origin gave (RFC 9449 §8, §9), sent with the next proof.
        self.nonces: dict[str, str] = {}
        #: The access tokens the authorization server bound to the key.
        self.bindings: Bindings = bindings if bindings is not None else MemoryBindings()

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> c.AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = self.inner.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                token_request = _is_token_request(outgoing)
                self._prove(outgoing, token_request)
                response = yield outgoing
                if _is_server_metadata(outgoing) and response.status_code == 200:
                    await response.aread()
                    self._check_algorithms(_json(response))
                if await self._asks_for_nonce(outgoing, response, token_request):
                    self._prove(outgoing, token_request)  # a fresh proof, with the nonce
                    response = yield outgoing
                    await self._asks_for_nonce(outgoing, response, token_request)
                if token_request:
                    response = await self._bearer_view(response)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    def _check_algorithms(self, metadata: c.Mapping[str, t.Any]) -> None:
        """Stop at once when the authorization server names the proof algorithms it
        takes (``dpop_signing_alg_values_supported``) and the key's is not one."""
        algorithms = metadata.get("dpop_signing_alg_values_supported")
        if isinstance(algorithms, list) and algorithms and self.key.algorithm not in algorithms:
            from mcp.client.auth import OAuthFlowError

            raise OAuthFlowError(
                f"the authorization server takes DPoP proofs signed with "
                f"{', '.join(map(str, algorithms))}, not {self.key.algorithm}: "
                f"give OAuth a DPoPKey of one of those"
            )

    def _prove(self, request: httpx2.Request, token_request: bool) -> None:
        nonce = self.nonces.get(_origin(request.url))
        if token_request:
            request.headers["DPoP"] = self.key.proof(request.method, str(request.url), nonce=nonce)
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() not in ("bearer", "dpop") or not self.bindings.is_bound(token):
            return  # no token, or one the server did not bind: sent as it is
        request.headers["Authorization"] = f"DPoP {token}"
        request.headers["DPoP"] = self.key.proof(
            request.method, str(request.url), access_token=token, nonce=nonce
        )

    async def _asks_for_nonce(
        self, request: httpx2.Request, response: httpx2.Response, token_request: bool
    ) -> bool:
        """Note the nonce the server gave (RFC 9449 §8, §9: any answer may carry a new
        one); whether it refused the request for want of it. A token endpoint's answer
        is read whole here; a resource's only when it is such a refusal (the others
        may be streams)."""
        nonce = response.headers.get("dpop-nonce")
        if not nonce:
            return False
        self.nonces[_origin(request.url)] = nonce
        if token_request:
            if response.status_code != 400:
                return False
            await response.aread()
            return _json(response).get("error") == "use_dpop_nonce"
        challenge = response.headers.get("www-authenticate", "")
        if response.status_code == 401 and "use_dpop_nonce" in challenge:
            await response.aread()  # handed on no further: it is sent again
            return True
        return False

    async def _bearer_view(self, response: httpx2.Response) -> httpx2.Response:
        """A token response as the SDK reads it: a ``DPoP`` token is noted as bound
        and handed on with ``token_type`` Bearer (the SDK knows no other type)."""
        await response.aread()
        body = _json(response)
        token = body.get("access_token")
        if response.status_code != 200 or str(body.get("token_type", "")).lower() != "dpop":
            return response
        if isinstance(token, str):
            self.bindings.bind(token)
        body["token_type"] = "Bearer"
        headers = {
            k: v
            for k, v in response.headers.items()
            if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")
        }
        return httpx2.Response(
            response.status_code,
            headers=headers,
            content=json.dumps(body).encode(),
            request=response.request,
        )
