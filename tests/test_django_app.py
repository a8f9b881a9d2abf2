"""examples/django_app.py, driven through Django's test client under plain pytest
(settings configured by the example module, no database): the same flow as the
Flask example — answers in the shape the calls came in, a paused batch resolved
later, tampering and replays refused (single use kept in Django's cache) — and
per-request context in concurrent requests."""

from __future__ import annotations

import importlib
import json
import pathlib
import sys
import threading
import typing as t

import pytest

pytest.importorskip("django")

import django
from django.core.cache import caches
from django.test import Client, override_settings

from nous_tools import Registry, Tool, ToolExecutor
from nous_tools.contrib.django import CacheApprovalStore

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
django_app = importlib.import_module("django_app")  # configures the settings
sys.path.remove(str(EXAMPLES))
django.setup()

SECRET = "test-secret"
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
def registry(executor: ToolExecutor, deleted: Deleted) -> t.Iterator[Registry]:
    def get_weather(city: str) -> dict[str, t.Any]:
        return {"city": city, "temp_c": 21, "request_id": django_app.request_id.get()}

    registry = Registry(
        [
            Tool.from_function(get_weather, timeout=WAIT),
            Tool.from_function(deleted, name="delete_file", timeout=WAIT, approval="ask"),
        ],
        executor=executor,
        name="django-example",
        approval_max_age=django_app.APPROVAL_MAX_AGE,
        approval_store=CacheApprovalStore(timeout=django_app.APPROVAL_MAX_AGE, single_process=True),
    )
    caches["default"].clear()
    django_app.configure(registry)
    with override_settings(NOUS_TOOLS_APPROVAL_SECRET=SECRET):
        yield registry
    django_app.configure()
    caches["default"].clear()


@pytest.fixture
def client(registry: Registry) -> Client:
    return Client()


def call(call_id: str, name: str, arguments: dict[str, t.Any]) -> dict[str, t.Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


WEATHER = call("call_w", "get_weather", {"city": "Paris"})
DELETE = call("call_d", "delete_file", {"path": "/tmp/x"})


def post(client: Client, url: str, body: t.Any, request_id: str = "r-1") -> t.Any:
    return client.post(
        url,
        data=json.dumps(body),
        content_type="application/json",
        headers={"X-Request-Id": request_id},
    )


def post_calls(client: Client, *calls: dict[str, t.Any], request_id: str = "r-1") -> t.Any:
    return post(client, "/tool-calls", {"tool_calls": list(calls)}, request_id)


def paused(client: Client, *calls: dict[str, t.Any]) -> dict[str, t.Any]:
    response = post_calls(client, *(calls or (WEATHER, DELETE)))
    assert response.status_code == 202
    return t.cast(dict[str, t.Any], response.json()["batch"])


def decide(client: Client, batch: t.Any, decisions: t.Any, request_id: str = "r-2") -> t.Any:
    return post(client, "/tool-calls/resolve", {"batch": batch, "decisions": decisions}, request_id)


def weather_text(request_id: str = "r-1") -> str:
    return json.dumps({"city": "Paris", "temp_c": 21, "request_id": request_id})


def test_tool_calls_are_executed_and_answered_with_tool_messages(client: Client) -> None:
    response = post_calls(client, WEATHER)
    assert response.status_code == 200
    assert response.json() == {
        "messages": [{"role": "tool", "tool_call_id": "call_w", "content": weather_text()}]
    }


def test_responses_and_anthropic_calls_are_answered_in_their_own_shape(client: Client) -> None:
    responses_item = {
        "type": "function_call",
        "call_id": "call_w",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    response = post(client, "/tool-calls", {"output": [responses_item]})
    assert response.json() == {
        "messages": [
            {"type": "function_call_output", "call_id": "call_w", "output": weather_text()}
        ]
    }
    tool_use = {
        "type": "tool_use",
        "id": "toolu_w",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    response = post(client, "/tool-calls", {"role": "assistant", "content": [tool_use]})
    assert response.json() == {
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_w",
                        "content": weather_text(),
                        "is_error": False,
                    }
                ],
            }
        ]
    }


def test_an_ask_tool_pauses_with_202_and_a_signed_batch(client: Client, deleted: Deleted) -> None:
    response = post_calls(client, WEATHER, DELETE)
    assert response.status_code == 202
    body = response.json()
    (pending,) = body["pending"]
    assert (pending["call_id"], pending["tool"], pending["arguments"]) == (
        "call_d",
        "delete_file",
        {"path": "/tmp/x"},
    )
    assert body["batch"]["audience"] == "django-example"
    assert body["batch"]["signature"].startswith("hmac-sha256:")
    assert deleted.paths == []


def test_approving_runs_the_call_once_and_answers_every_call_in_order(
    client: Client, deleted: Deleted
) -> None:
    batch = paused(client)
    response = decide(client, batch, {"call_d": "approve"})
    assert response.status_code == 200
    assert response.json() == {
        "messages": [
            {"role": "tool", "tool_call_id": "call_w", "content": weather_text()},
            {"role": "tool", "tool_call_id": "call_d", "content": "deleted /tmp/x"},
        ]
    }
    again = decide(client, batch, {"call_d": "approve"})
    assert again.status_code == 409
    assert again.json() == {"error": "this batch was already decided"}
    assert deleted.paths == ["/tmp/x"]


def test_single_use_is_kept_in_the_django_cache(
    registry: Registry, client: Client, deleted: Deleted
) -> None:
    batch = paused(client)
    store = registry.approval_store
    assert isinstance(store, CacheApprovalStore)
    approval_id = batch["calls"][1]["approval"]["id"]
    assert caches["default"].get(store.key(approval_id)) is None
    assert decide(client, batch, {"call_d": "approve"}).status_code == 200
    assert caches["default"].get(store.key(approval_id)) == 1
    assert caches["default"].get(store.key(f"batch:{batch['id']}")) == 1
    # another process with its own registry object but the same cache refuses it
    twin = Registry(
        [registry.lookup("get_weather"), registry.lookup("delete_file")],  # type: ignore[list-item]
        name="django-example",
        approval_store=CacheApprovalStore(single_process=True),  # LocMemCache here
    )
    django_app.configure(twin)
    assert decide(client, batch, {"call_d": "approve"}).status_code == 409
    assert deleted.paths == ["/tmp/x"]


def test_rejecting_answers_that_the_user_rejected_it(client: Client, deleted: Deleted) -> None:
    batch = paused(client)
    response = decide(client, batch, {"call_d": "reject"})
    assert response.status_code == 200
    assert response.json()["messages"][1]["content"] == (
        "Error: tool 'delete_file' was rejected by the user and did not run"
    )
    assert decide(client, batch, {"call_d": "approve"}).status_code == 409
    assert deleted.paths == []


def test_an_edit_runs_with_the_persons_arguments(client: Client, deleted: Deleted) -> None:
    batch = paused(client)
    assert decide(client, batch, {"call_d": {"edit": {}}}).status_code == 400
    response = decide(client, batch, {"call_d": {"edit": {"path": "/tmp/y"}}})
    assert response.json()["messages"][1]["content"] == "deleted /tmp/y"
    assert deleted.paths == ["/tmp/y"]


def test_tampered_arguments_or_results_are_refused(client: Client, deleted: Deleted) -> None:
    batch = paused(client)
    for path, value in (
        (("calls", 1, "approval", "arguments"), {"path": "/etc/passwd"}),
        (("calls", 0, "output", "content"), "sunny"),
        (("calls", 0, "output", "is_error"), True),
    ):
        tampered = json.loads(json.dumps(batch))
        target = tampered
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        response = decide(client, tampered, {"call_d": "approve"})
        assert response.status_code == 400
        assert "signature does not match" in response.json()["error"]
    assert deleted.paths == []
    assert decide(client, batch, {"call_d": "approve"}).status_code == 200
    assert deleted.paths == ["/tmp/x"]


def test_a_forged_batch_id_is_refused(client: Client, deleted: Deleted) -> None:
    batch = paused(client)
    response = decide(client, {**batch, "id": "f" * 32}, {"call_d": "approve"})
    assert response.status_code == 400
    assert deleted.paths == []


def test_an_unknown_call_id_is_400(client: Client, deleted: Deleted) -> None:
    batch = paused(client)
    response = decide(client, batch, {"call_nope": "approve"})
    assert response.status_code == 400
    assert "unknown call id 'call_nope'" in response.json()["error"]
    assert deleted.paths == []


def test_the_secret_comes_from_the_settings(client: Client, deleted: Deleted) -> None:
    batch = paused(client)
    with override_settings(NOUS_TOOLS_APPROVAL_SECRET="another-secret"):
        response = decide(client, batch, {"call_d": "approve"})
    assert response.status_code == 400
    assert "signature does not match" in response.json()["error"]
    assert deleted.paths == []


def test_only_post_is_allowed(client: Client) -> None:
    assert client.get("/tool-calls").status_code == 405
    assert client.get("/tool-calls/resolve").status_code == 405


@pytest.mark.parametrize(
    "body",
    [
        None,
        {"decisions": {"call_d": "approve"}},
        {"batch": "BATCH", "decisions": "approve"},
        {"batch": "BATCH", "decisions": {"call_d": ["approve"]}},
    ],
)
def test_a_malformed_decision_is_400(client: Client, deleted: Deleted, body: t.Any) -> None:
    batch = paused(client)
    if isinstance(body, dict) and body.get("batch") == "BATCH":
        body = {**body, "batch": batch}
    assert post(client, "/tool-calls/resolve", body).status_code == 400
    assert deleted.paths == []


@pytest.mark.parametrize("body", ["not json", {"tool_calls": {"id": "x"}}, [1], {"id": "x"}])
def test_a_malformed_tool_call_request_is_400(client: Client, body: t.Any) -> None:
    data = body if isinstance(body, str) else json.dumps(body)
    response = client.post("/tool-calls", data=data, content_type="application/json")
    assert response.status_code == 400


def test_concurrent_requests_keep_their_own_request_ids(registry: Registry) -> None:
    barrier = threading.Barrier(2, timeout=WAIT)

    def whoami() -> str:
        barrier.wait()  # both requests are inside the tool at once
        return django_app.request_id.get()

    registry.register(Tool.from_function(whoami, timeout=WAIT * 2))
    bodies: dict[str, t.Any] = {}

    def run(request_id: str) -> None:
        response = post_calls(
            Client(), call(f"c_{request_id}", "whoami", {}), request_id=request_id
        )
        bodies[request_id] = response.json()

    threads = [threading.Thread(target=run, args=(rid,)) for rid in ("req-a", "req-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    assert bodies == {
        rid: {"messages": [{"role": "tool", "tool_call_id": f"c_{rid}", "content": rid}]}
        for rid in ("req-a", "req-b")
    }
