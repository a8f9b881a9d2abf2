"""A small OAuth world on 127.0.0.1 for the grants the SDK's own authorization server
does not speak (and DPoP-bound tokens): the RFC 7523 jwt-bearer grant (workload identity) and the RFC 8693
token exchange of an enterprise identity provider (enterprise-managed authorization).

One HTTP server plays three parts, on one origin:

* the protected resource ``/mcp``: 401 (with ``resource_metadata``) without the token
  it issued, 200 with it; its metadata at ``/.well-known/oauth-protected-resource/mcp``;
* the authorization server (issuer: the origin): metadata at
  ``/.well-known/oauth-authorization-server``, token endpoint ``/token``;
* the identity provider's token endpoint ``/idp/token`` (token exchange for an ID-JAG).

Every request is recorded (``seen``: path, headers, form) so tests judge what the
client sent. ``refuse`` makes ``/token`` or ``/idp/token`` answer 400 with that error.
"""

from __future__ import annotations

import contextlib
import json
import threading
import typing as t
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ACCESS_TOKEN = "issued-access-token"
ID_JAG = "the-id-jag"


class Seen(t.NamedTuple):
    method: str
    path: str
    headers: dict[str, str]
    form: dict[str, str]


class GrantsServer:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.refuse: dict[str, str] = {}  # path -> OAuth error code
        #: The type of the tokens ``/token`` issues; "DPoP": ``/mcp`` wants that scheme
        #: and a proof header (the proof itself is judged by the tests).
        self.token_type = "Bearer"
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: object, headers: dict[str, str] | None = None):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _record(self) -> Seen:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode() if length else ""
                form = dict(urllib.parse.parse_qsl(raw)) if "=" in raw else {}
                seen = Seen(
                    self.command,
                    urllib.parse.urlsplit(self.path).path,
                    {k.lower(): v for k, v in self.headers.items()},
                    form,
                )
                with outer._lock:
                    outer.seen.append(seen)
                return seen

            def do_GET(self) -> None:
                seen = self._record()
                if seen.path == "/.well-known/oauth-protected-resource/mcp":
                    self._answer(
                        200,
                        {"resource": f"{outer.url}/mcp", "authorization_servers": [outer.url]},
                    )
                elif seen.path == "/.well-known/oauth-authorization-server":
                    self._answer(
                        200,
                        {
                            "issuer": outer.url,
                            "authorization_endpoint": f"{outer.url}/authorize",
                            "token_endpoint": f"{outer.url}/token",
                            "response_types_supported": ["code"],
                            "grant_types_supported": [
                                "urn:ietf:params:oauth:grant-type:jwt-bearer"
                            ],
                            "token_endpoint_auth_methods_supported": [
                                "none",
                                "client_secret_basic",
                            ],
                        },
                    )
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:
                seen = self._record()
                refused = outer.refuse.get(seen.path)
                if refused:
                    self._answer(400, {"error": refused})
                elif seen.path == "/mcp":
                    presented = seen.headers.get("authorization")
                    proved = outer.token_type != "DPoP" or "dpop" in seen.headers
                    if presented == f"{outer.token_type} {ACCESS_TOKEN}" and proved:
                        self._answer(200, {"ok": True})
                    else:
                        challenge = (
                            f'Bearer resource_metadata="{outer.url}'
                            '/.well-known/oauth-protected-resource/mcp"'
                        )
                        self._answer(
                            401, {"error": "unauthorized"}, {"WWW-Authenticate": challenge}
                        )
                elif seen.path == "/token":
                    self._answer(
                        200,
                        {
                            "access_token": ACCESS_TOKEN,
                            "token_type": outer.token_type,
                            "expires_in": 3600,
                        },
                    )
                elif seen.path == "/idp/token":
                    self._answer(
                        200,
                        {
                            "access_token": ID_JAG,
                            "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                            "token_type": "N_A",
                        },
                    )
                else:
                    self._answer(404, {"error": "not_found"})

            def log_message(self, format: str, *args: t.Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def posts_to(self, path: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.method == "POST" and s.path == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def grants_server() -> t.Iterator[GrantsServer]:
    running = GrantsServer()
    try:
        yield running
    finally:
        running.close()
