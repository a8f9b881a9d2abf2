"""The client side of the official MCP conformance suite: ``python
mcp_conformance_client.py SERVER_URL``, run by the suite with the scenario's name in
``MCP_CONFORMANCE_SCENARIO`` (and, for some, ``MCP_CONFORMANCE_CONTEXT``).

Everything goes through the synchronous :class:`~nous_tools.contrib.mcp.MCPServer`
and a :class:`~nous_tools.Registry`, as a user would write it; only the
authorization code flow's "browser" is played by code (it follows the
authorization server's redirect and hands the code to the local callback).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import typing as t
import urllib.parse

import httpx2

from nous_tools import Elicitation, Registry, RunContext
from nous_tools.contrib.mcp import InMemoryTokenStorage, MCPServer, OAuth

log = logging.getLogger("conformance-client")

#: The Client ID Metadata Document URL the suite's authorization servers accept.
CIMD_URL = "https://conformance-test.local/client-metadata.json"


def browser(url: str) -> None:
    """Play the person at the browser: open the authorization URL (which the suite's
    authorization server answers with a redirect to our callback) and follow the
    redirect to the local callback server, as a browser would."""
    with httpx2.Client(timeout=30.0) as http:
        response = http.get(url, follow_redirects=False)
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            raise RuntimeError(f"the authorization server answered {response.status_code}")
        http.get(location)


def auth_for(scenario: str, context: dict[str, t.Any]) -> OAuth | None:
    if not scenario.startswith("auth/"):
        return None
    if scenario == "auth/client-credentials-basic":
        return OAuth.client_credentials(
            context["client_id"],
            client_secret=context["client_secret"],
            storage=InMemoryTokenStorage(),
        )
    if scenario == "auth/client-credentials-jwt":
        return OAuth.client_credentials(
            context["client_id"],
            private_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm", "ES256"),
            storage=InMemoryTokenStorage(),
        )
    if scenario == "auth/wif-jwt-bearer":
        return OAuth.workload_identity(
            context["client_id"], assertion=context["valid_jwt"], storage=InMemoryTokenStorage()
        )
    if scenario in ("auth/cross-app-access-complete-flow", "auth/enterprise-managed-authorization"):
        return cross_app_access(context)
    return OAuth.authorization_code(
        client_name="nous-tools conformance client",
        client_id=context.get("client_id"),
        client_secret=context.get("client_secret"),
        client_metadata_url=CIMD_URL,
        open_browser=browser,
        storage=InMemoryTokenStorage(),
        # SEP-1932: sender-constrained tokens (the nonce variant asks for nonces).
        dpop=scenario in ("auth/dpop", "auth/dpop-nonce"),
    )


def cross_app_access(context: dict[str, t.Any]) -> OAuth:
    """SEP-990: the MCP server's authorization server comes from configuration; the
    suite puts it in the server's protected resource metadata, so it is read from
    there (a deployment would know it). The client exchanges the person's ID token
    for an ID-JAG at the identity provider (RFC 8693), then the ID-JAG for a token."""
    url = sys.argv[1]
    parts = urllib.parse.urlsplit(url)
    metadata = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
    with httpx2.Client(timeout=30.0) as http:
        issuer = http.get(metadata).raise_for_status().json()["authorization_servers"][0]
    return OAuth.enterprise_managed(
        context["client_id"],
        client_secret=context["client_secret"],
        issuer=issuer,
        idp_token_endpoint=context["idp_token_endpoint"],
        id_token=context["idp_id_token"],
        idp_client_id=context["idp_client_id"],
        storage=InMemoryTokenStorage(),
    )


def main() -> int:
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    url = sys.argv[1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    registry = Registry()
    with MCPServer.http(url, auth=auth_for(scenario, context), name="conformance") as server:
        tools = registry.register_mcp(server, trusted=True)
        names = [tool.name for tool in tools]
        log.info("tools: %s", names)
        # A person who accepts what the server proposes (its defaults, SEP-1034).
        ctx = RunContext.new(approval_handler=lambda request: "approve")
        if scenario == "tools_call":
            result = registry.execute("add_numbers", {"a": 5, "b": 3}, ctx)
        elif scenario == "sep-2322-client-request-state":
            # A person who confirms what the server asks (2026-07-28 multi-round trip).
            confirming = RunContext.new(
                approval_handler=lambda request: "approve",
                elicitor=lambda message, schema: Elicitation("accept", {"confirmed": True}),
            )
            results = registry.execute_many(
                [(name, {}) for name in names if name.startswith("test_mrtr_")], confirming
            )
            result = next((r for r in results if not r.is_ok()), results[0])
        elif scenario == "http-custom-headers":
            # Called directly (no schema check): one call passes null for a boolean, to
            # see that a null argument is not mirrored into a header.
            for call in context["toolCalls"]:
                result = server.call(call["name"], call["arguments"], ctx)
                if not result.is_ok():
                    break
        elif scenario == "http-invalid-tool-headers":
            log.info("tools kept: %s", names)  # the malformed ones are left out
            result = registry.execute("valid_tool", {"region": "us-west1"}, ctx)
        elif scenario == "json-schema-2020-12-preservation":
            [focal] = [tool for tool in tools if tool.name == "json_schema_2020_12_tool"]
            result = registry.execute("json_schema_echo", {"schema": focal.parameters}, ctx)
        elif scenario == "sse-retry":
            result = registry.execute("test_reconnection", {}, ctx)
        elif scenario == "elicitation-sep1034-client-defaults":
            result = registry.execute("test_client_elicitation_defaults", {}, ctx)
        elif scenario.startswith("auth/") and names:
            result = registry.execute(names[0], {}, ctx)
        else:
            return 0
        log.info("result: %r", result)
        return 0 if result.is_ok() else 1


if __name__ == "__main__":
    sys.exit(main())
