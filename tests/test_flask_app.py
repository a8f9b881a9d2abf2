"""examples/flask_app.py, driven through Flask's test client like a real app: tool
calls in, tool messages out, approval of an ``ask`` tool through a signed token
(tampering, forged ids, replays and expired tokens refused), and per-request
context in concurrent requests."""

from __future__ import annotations

import hashlib
import importlib
import json
import pathlib
import sys
import threading
import typing as t

import freezegun
import pytest

pytest.importorskip("flask")

from flask import Flask
from flask.testing import FlaskClient

from nous_tools import InMemoryApprovalStore, Registry, Tool, ToolExecutor

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
flask_app = importlib.import_module("flask_app")
sys.path.remove(str(EXAMPLES))

SECRET = "test-secret"
CONFIG = {"NOUS_TOOLS_APPROVAL_SECRET": SECRET}
WAIT = 5.0


class Deleted:
    """The ``ask`` tool: records what it deleted."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, path: str) -> str:
        self.paths.append(path)
        return f"deleted {path}"


@pytest.fixture
def deleted() -> Deleted:
    return Deleted()


@pytest.fixture
def registry(executor: ToolExecutor, deleted: Deleted) -> Registry:
    def get_weather(city: str) -> dict[str, t.Any]:
        return {"city": city, "temp_c": 21, "request_id": flask_app.request_id.get()}

    return Registry(
        [
            Tool.from_function(get_weather, timeout=WAIT),
            Tool.from_function(deleted, name="delete_file", timeout=WAIT, approval="ask"),
        ],
        executor=executor,
        name="flask-example",
        approval_max_age=flask_app.APPROVAL_MAX_AGE,
        approval_store=InMemoryApprovalStore(ttl=flask_app.APPROVAL_MAX_AGE),
    )


@pytest.fixture
def app(registry: Registry) -> Flask:
    return t.cast(Flask, flask_app.create_app(registry, CONFIG))


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def call(call_id: str, name: str, arguments: dict[str, t.Any]) -> dict[str, t.Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


WEATHER = call("call_w", "get_weather", {"city": "Paris"})
DELETE = call("call_d", "delete_file", {"path": "/tmp/x"})


def post_calls(client: FlaskClient, *calls: dict[str, t.Any], request_id: str = "r-1") -> t.Any:
    return client.post(
        "/tool-calls", json={"tool_calls": list(calls)}, headers={"X-Request-Id": request_id}
    )


def pending_of(client: FlaskClient) -> dict[str, t.Any]:
    response = post_calls(client, WEATHER, DELETE)
    assert response.status_code == 202
    (pending,) = response.get_json()["pending"]
    return t.cast(dict[str, t.Any], pending)


def test_tool_calls_are_executed_and_answered_with_tool_messages(client: FlaskClient) -> None:
    response = post_calls(client, WEATHER, call("call_x", "nope", {}))
    assert response.status_code == 200
    weather = json.dumps({"city": "Paris", "temp_c": 21, "request_id": "r-1"})
    assert response.get_json() == {
        "messages": [
            {"role": "tool", "tool_call_id": "call_w", "content": weather},
            {"role": "tool", "tool_call_id": "call_x", "content": "Error: tool 'nope' not found"},
        ]
    }


def test_an_ask_tool_pauses_with_202_and_the_signed_pending_call(
    client: FlaskClient, deleted: Deleted
) -> None:
    response = post_calls(client, WEATHER, DELETE)
    assert response.status_code == 202
    body = response.get_json()
    assert [m["tool_call_id"] for m in body["messages"]] == ["call_w"]
    (pending,) = body["pending"]
    assert pending["tool"] == "delete_file"
    assert pending["arguments"] == {"path": "/tmp/x"}
    assert pending["call_id"] == "call_d"
    assert pending["audience"] == "flask-example"
    assert pending["signature"].startswith("hmac-sha256:")
    assert deleted.paths == []


def approve(client: FlaskClient, pending: dict[str, t.Any], decision: str = "approve") -> t.Any:
    return client.post(
        f"/approvals/{pending['id']}", json={"decision": decision, "approval": pending}
    )


def test_approving_runs_the_call_once(client: FlaskClient, deleted: Deleted) -> None:
    pending = pending_of(client)
    response = approve(client, pending)
    assert response.status_code == 200
    assert response.get_json() == {
        "messages": [{"role": "tool", "tool_call_id": "call_d", "content": "deleted /tmp/x"}]
    }
    assert deleted.paths == ["/tmp/x"]
    again = approve(client, pending)  # a replayed token
    assert again.status_code == 409
    assert again.get_json() == {"error": "this approval was already decided"}
    assert deleted.paths == ["/tmp/x"]


def test_a_replay_to_another_app_sharing_the_registry_is_refused(
    registry: Registry, client: FlaskClient, deleted: Deleted
) -> None:
    pending = pending_of(client)
    other = flask_app.create_app(registry, CONFIG).test_client()  # a second worker
    assert approve(client, pending).status_code == 200
    assert approve(other, pending).status_code == 409
    assert deleted.paths == ["/tmp/x"]


def test_rejecting_answers_with_a_rejection_message_and_uses_the_token(
    client: FlaskClient, deleted: Deleted
) -> None:
    pending = pending_of(client)
    response = approve(client, pending, "reject")
    assert response.status_code == 200
    (message,) = response.get_json()["messages"]
    assert message == {
        "role": "tool",
        "tool_call_id": "call_d",
        "content": "Error: tool 'delete_file' was rejected by a person and did not run",
    }
    assert approve(client, pending).status_code == 409
    assert approve(client, pending, "reject").status_code == 409
    assert deleted.paths == []


def test_tampered_arguments_are_refused(client: FlaskClient, deleted: Deleted) -> None:
    pending = pending_of(client)
    tampered = {**pending, "arguments": {"path": "/etc/passwd"}}
    response = approve(client, tampered)
    assert response.status_code == 400
    assert "signature does not match" in response.get_json()["error"]
    # a browser cannot re-seal: the unkeyed checksum of the changed token fails too
    payload = {k: v for k, v in tampered.items() if k != "signature"}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    checksum = hashlib.sha256(b"nous-tools approval token v1\n" + canonical).hexdigest()
    for forged_signature in (f"sha256:{checksum}", f"hmac-sha256:{checksum}"):
        response = approve(client, {**tampered, "signature": forged_signature})
        assert response.status_code == 400
    assert deleted.paths == []
    # the genuine approval still works afterwards: refusals do not use it up
    assert approve(client, pending).status_code == 200
    assert deleted.paths == ["/tmp/x"]


def test_a_forged_id_is_refused(client: FlaskClient, deleted: Deleted) -> None:
    pending = pending_of(client)
    forged = {**pending, "id": "0" * 32}
    response = approve(client, forged)
    assert response.status_code == 400
    assert "signature does not match" in response.get_json()["error"]
    assert deleted.paths == []


def test_an_approval_posted_under_another_id_is_refused(
    client: FlaskClient, deleted: Deleted
) -> None:
    first = pending_of(client)
    response = client.post(
        f"/approvals/{'1' * 32}", json={"decision": "approve", "approval": first}
    )
    assert response.status_code == 400
    assert deleted.paths == []


def test_an_expired_token_is_refused(client: FlaskClient, deleted: Deleted) -> None:
    with freezegun.freeze_time("2030-01-01 12:00:00"):
        pending = pending_of(client)
    with freezegun.freeze_time("2030-01-01 13:00:01"):  # an hour and a second later
        response = approve(client, pending)
    assert response.status_code == 400
    assert "expired" in response.get_json()["error"]
    assert deleted.paths == []


def test_the_secret_comes_from_the_config(registry: Registry) -> None:
    with pytest.raises(RuntimeError, match="NOUS_TOOLS_APPROVAL_SECRET"):
        flask_app.create_app(registry, {})
    client = flask_app.create_app(registry, CONFIG).test_client()
    pending = pending_of(client)
    other = flask_app.create_app(registry, {"NOUS_TOOLS_APPROVAL_SECRET": "another"})
    assert approve(other.test_client(), pending).status_code == 400


@pytest.mark.parametrize(
    "body",
    [None, {"decision": "maybe"}, {"decision": "approve"}, {"decision": "approve", "approval": 3}],
)
def test_a_malformed_decision_is_400(client: FlaskClient, body: t.Any) -> None:
    pending = pending_of(client)
    response = client.post(f"/approvals/{pending['id']}", json=body)
    assert response.status_code == 400


@pytest.mark.parametrize("body", [None, {"tool_calls": "x"}, [1, 2]])
def test_a_malformed_tool_call_request_is_400(client: FlaskClient, body: t.Any) -> None:
    assert client.post("/tool-calls", json=body).status_code == 400


def test_concurrent_requests_keep_their_own_request_ids(app: Flask, registry: Registry) -> None:
    barrier = threading.Barrier(2, timeout=WAIT)

    def whoami() -> str:
        barrier.wait()  # both requests are inside the tool at once
        return flask_app.request_id.get()

    registry.register(Tool.from_function(whoami, timeout=WAIT * 2))
    bodies: dict[str, t.Any] = {}

    def run(request_id: str) -> None:
        response = post_calls(
            app.test_client(), call(f"call_{request_id}", "whoami", {}), request_id=request_id
        )
        bodies[request_id] = response.get_json()

    threads = [threading.Thread(target=run, args=(rid,)) for rid in ("req-a", "req-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert bodies == {
        rid: {"messages": [{"role": "tool", "tool_call_id": f"call_{rid}", "content": rid}]}
        for rid in ("req-a", "req-b")
    }
    assert flask_app.request_id.get() == "-"


def test_the_default_app_runs_its_example_tools() -> None:
    client = flask_app.create_app(config=CONFIG).test_client()
    response = post_calls(client, WEATHER, request_id="r-9")
    assert response.status_code == 200
    assert json.loads(response.get_json()["messages"][0]["content"])["request_id"] == "r-9"
