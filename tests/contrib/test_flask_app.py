"""examples/flask_app.py, driven through Flask's test client like a real app: tool
calls in, answered in the shape they came in (OpenAI Chat, Responses, Anthropic);
an ``ask`` tool pauses the batch, which comes back signed and is resolved later
(tampering, forged ids, replays, unknown call ids and expired batches refused);
per-request context in concurrent requests."""

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

from anthropic.types import Message
from flask import Flask
from flask.testing import FlaskClient
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from nous_tools import InMemoryApprovalStore, Registry, SQLiteJournal, Tool, ToolExecutor

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
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


def weather_text(request_id: str = "r-1") -> str:
    return json.dumps({"city": "Paris", "temp_c": 21, "request_id": request_id})


def post_calls(client: FlaskClient, *calls: dict[str, t.Any], request_id: str = "r-1") -> t.Any:
    return client.post(
        "/tool-calls", json={"tool_calls": list(calls)}, headers={"X-Request-Id": request_id}
    )


def paused(client: FlaskClient, *calls: dict[str, t.Any]) -> dict[str, t.Any]:
    response = post_calls(client, *(calls or (WEATHER, DELETE)))
    assert response.status_code == 202
    return t.cast(dict[str, t.Any], response.get_json()["batch"])


def decide(client: FlaskClient, batch: t.Any, decisions: t.Any, request_id: str = "r-2") -> t.Any:
    return client.post(
        "/tool-calls/resolve",
        json={"batch": batch, "decisions": decisions},
        headers={"X-Request-Id": request_id},
    )


def test_tool_calls_are_executed_and_answered_with_tool_messages(client: FlaskClient) -> None:
    response = post_calls(client, WEATHER, call("call_x", "nope", {}))
    assert response.status_code == 200
    assert response.get_json() == {
        "messages": [
            {"role": "tool", "tool_call_id": "call_w", "content": weather_text()},
            {"role": "tool", "tool_call_id": "call_x", "content": "Error: tool 'nope' not found"},
        ]
    }


# -- answered in the shape the calls came in ------------------------------------------


def chat_completion() -> dict[str, t.Any]:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1741569952,
            "model": "gpt-4.1",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "logprobs": None,
                    "message": {"role": "assistant", "content": None, "tool_calls": [WEATHER]},
                }
            ],
        }
    ).model_dump(mode="json")


def responses_response() -> dict[str, t.Any]:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1741476542,
            "model": "gpt-5",
            "status": "completed",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_w",
                    "name": "get_weather",
                    "arguments": '{"city": "Paris"}',
                    "status": "completed",
                },
            ],
        }
    ).model_dump(mode="json")


def anthropic_message(*blocks: dict[str, t.Any]) -> dict[str, t.Any]:
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
            "content": list(blocks)
            or [
                {
                    "type": "tool_use",
                    "id": "call_w",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                }
            ],
        }
    ).model_dump(mode="json")


CHAT_ANSWER = [{"role": "tool", "tool_call_id": "call_w", "content": weather_text()}]
RESPONSES_ANSWER = [{"type": "function_call_output", "call_id": "call_w", "output": weather_text()}]
ANTHROPIC_ANSWER = [
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_w",
                "content": weather_text(),
                "is_error": False,
            }
        ],
    }
]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (lambda: {"tool_calls": [WEATHER]}, CHAT_ANSWER),
        (chat_completion, CHAT_ANSWER),
        (lambda: chat_completion()["choices"][0]["message"], CHAT_ANSWER),
        (responses_response, RESPONSES_ANSWER),
        (lambda: {"tool_calls": responses_response()["output"]}, RESPONSES_ANSWER),
        (anthropic_message, ANTHROPIC_ANSWER),
        (lambda: {"tool_calls": anthropic_message()["content"]}, ANTHROPIC_ANSWER),
    ],
    ids=[
        "chat calls",
        "ChatCompletion",
        "chat message",
        "Response",
        "responses items",
        "Message",
        "anthropic blocks",
    ],
)
def test_each_provider_is_answered_in_the_shape_it_was_sent(
    client: FlaskClient, body: t.Callable[[], t.Any], expected: list[dict[str, t.Any]]
) -> None:
    response = client.post("/tool-calls", json=body(), headers={"X-Request-Id": "r-1"})
    assert response.status_code == 200
    assert response.get_json() == {"messages": expected}


def test_a_text_only_answer_gets_no_messages(client: FlaskClient) -> None:
    text = {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}
    response = client.post("/tool-calls", json=text)
    assert (response.status_code, response.get_json()) == (200, {"messages": []})


# -- approve later ---------------------------------------------------------------------


def test_an_ask_tool_pauses_with_202_the_pending_calls_and_a_signed_batch(
    client: FlaskClient, deleted: Deleted
) -> None:
    response = post_calls(client, WEATHER, DELETE)
    assert response.status_code == 202
    body = response.get_json()
    assert body["pending"] == [
        {
            "id": "call_d",
            "call_id": "call_d",
            "tool": "delete_file",
            "description": "The ``ask`` tool: records what it deleted.",
            "arguments": {"path": "/tmp/x"},
        }
    ]
    batch = body["batch"]
    assert batch["audience"] == "flask-example"
    assert batch["signature"].startswith("hmac-sha256:")
    assert [c["id"] for c in batch["calls"]] == ["call_w", "call_d"]
    assert "messages" not in body  # nothing is sent to the model before every call has a result
    assert deleted.paths == []


def test_approving_runs_the_call_once_and_answers_every_call_in_order(
    client: FlaskClient, deleted: Deleted
) -> None:
    batch = paused(client)
    response = decide(client, batch, {"call_d": "approve"})
    assert response.status_code == 200
    assert response.get_json() == {
        "messages": [
            {"role": "tool", "tool_call_id": "call_w", "content": weather_text("r-1")},
            {"role": "tool", "tool_call_id": "call_d", "content": "deleted /tmp/x"},
        ]
    }
    assert deleted.paths == ["/tmp/x"]
    again = decide(client, batch, {"call_d": "approve"})  # a replayed batch
    assert again.status_code == 409
    assert again.get_json() == {"error": "this batch was already decided"}
    assert deleted.paths == ["/tmp/x"]


def test_an_anthropic_batch_is_resolved_into_one_user_message(
    client: FlaskClient, deleted: Deleted
) -> None:
    message = anthropic_message(
        {"type": "tool_use", "id": "toolu_d", "name": "delete_file", "input": {"path": "/a"}},
        {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {"city": "Paris"}},
    )
    response = client.post("/tool-calls", json=message, headers={"X-Request-Id": "r-1"})
    assert response.status_code == 202
    resolved = decide(client, response.get_json()["batch"], {"toolu_d": "approve"})
    assert resolved.get_json() == {
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_d",
                        "content": "deleted /a",
                        "is_error": False,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_w",
                        "content": weather_text(),
                        "is_error": False,
                    },
                ],
            }
        ]
    }


def test_a_replay_to_another_app_sharing_the_registry_is_refused(
    registry: Registry, client: FlaskClient, deleted: Deleted
) -> None:
    batch = paused(client)
    other = flask_app.create_app(registry, CONFIG).test_client()  # a second worker
    assert decide(client, batch, {"call_d": "approve"}).status_code == 200
    assert decide(other, batch, {"call_d": "approve"}).status_code == 409
    assert deleted.paths == ["/tmp/x"]


def test_rejecting_answers_that_the_user_rejected_it_and_uses_the_batch(
    client: FlaskClient, deleted: Deleted
) -> None:
    batch = paused(client)
    response = decide(client, batch, {"call_d": "reject"})
    assert response.status_code == 200
    assert response.get_json()["messages"][1] == {
        "role": "tool",
        "tool_call_id": "call_d",
        "content": "Error: tool 'delete_file' was rejected by the user and did not run",
    }
    assert decide(client, batch, {"call_d": "approve"}).status_code == 409
    assert deleted.paths == []


def test_an_edit_runs_with_the_persons_arguments_and_a_bad_edit_is_400(
    client: FlaskClient, deleted: Deleted
) -> None:
    batch = paused(client)
    bad = decide(client, batch, {"call_d": {"edit": {"path": 7}}})
    assert bad.status_code == 400
    assert "Type mismatch: path: expected string, got integer" in bad.get_json()["error"]
    assert deleted.paths == []
    response = decide(client, batch, {"call_d": {"edit": {"path": "/tmp/y"}}})
    assert response.status_code == 200
    assert response.get_json()["messages"][1]["content"] == "deleted /tmp/y"
    assert deleted.paths == ["/tmp/y"]


def test_undecided_calls_stay_pending_in_a_new_batch(client: FlaskClient, deleted: Deleted) -> None:
    batch = paused(client, DELETE, WEATHER, call("call_e", "delete_file", {"path": "/tmp/e"}))
    first = decide(client, batch, {"call_e": "approve"})
    assert first.status_code == 202
    assert [p["call_id"] for p in first.get_json()["pending"]] == ["call_d"]
    assert deleted.paths == ["/tmp/e"]
    second = decide(client, first.get_json()["batch"], {"call_d": "reject"})
    assert second.status_code == 200
    assert [m["tool_call_id"] for m in second.get_json()["messages"]] == [
        "call_d",
        "call_w",
        "call_e",
    ]
    assert decide(client, batch, {"call_d": "approve"}).status_code == 409  # the old copy
    assert deleted.paths == ["/tmp/e"]


def test_a_tampered_result_is_refused(client: FlaskClient, deleted: Deleted) -> None:
    batch = paused(client)
    tampered = json.loads(json.dumps(batch))
    tampered["calls"][0]["output"]["content"] = '{"city": "Paris", "temp_c": 45}'
    response = decide(client, tampered, {"call_d": "approve"})
    assert response.status_code == 400
    assert "signature does not match" in response.get_json()["error"]
    assert deleted.paths == []


def test_tampered_arguments_are_refused(client: FlaskClient, deleted: Deleted) -> None:
    batch = paused(client)
    tampered = json.loads(json.dumps(batch))
    tampered["calls"][1]["approval"]["arguments"] = {"path": "/etc/passwd"}
    response = decide(client, tampered, {"call_d": "approve"})
    assert response.status_code == 400
    assert "signature does not match" in response.get_json()["error"]
    # a browser cannot re-seal: the unkeyed checksum of the changed batch fails too
    payload = {k: v for k, v in tampered.items() if k != "signature"}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    checksum = hashlib.sha256(b"nous-tools tool call batch v1\n" + canonical).hexdigest()
    for forged_signature in (f"sha256:{checksum}", f"hmac-sha256:{checksum}"):
        response = decide(
            client, {**tampered, "signature": forged_signature}, {"call_d": "approve"}
        )
        assert response.status_code == 400
    assert deleted.paths == []
    # the genuine batch still works afterwards: refusals do not use it up
    assert decide(client, batch, {"call_d": "approve"}).status_code == 200
    assert deleted.paths == ["/tmp/x"]


def test_a_forged_batch_id_is_refused(client: FlaskClient, deleted: Deleted) -> None:
    batch = paused(client)
    response = decide(client, {**batch, "id": "0" * 32}, {"call_d": "approve"})
    assert response.status_code == 400
    assert "signature does not match" in response.get_json()["error"]
    assert deleted.paths == []


def test_a_decision_for_an_unknown_call_id_is_400(client: FlaskClient, deleted: Deleted) -> None:
    batch = paused(client)
    response = decide(client, batch, {"call_d": "approve", "call_zzz": "approve"})
    assert response.status_code == 400
    assert "unknown call id 'call_zzz'" in response.get_json()["error"]
    assert deleted.paths == []
    assert decide(client, batch, {"call_d": "approve"}).status_code == 200


def test_an_expired_batch_is_refused(client: FlaskClient, deleted: Deleted) -> None:
    with freezegun.freeze_time("2030-01-01 12:00:00"):
        batch = paused(client)
    with freezegun.freeze_time("2030-01-01 13:00:01"):  # an hour and a second later
        response = decide(client, batch, {"call_d": "approve"})
    assert response.status_code == 400
    assert "expired" in response.get_json()["error"]
    assert deleted.paths == []


def test_the_secret_comes_from_the_config(registry: Registry) -> None:
    with pytest.raises(RuntimeError, match="NOUS_TOOLS_APPROVAL_SECRET"):
        flask_app.create_app(registry, {})
    client = flask_app.create_app(registry, CONFIG).test_client()
    batch = paused(client)
    other = flask_app.create_app(registry, {"NOUS_TOOLS_APPROVAL_SECRET": "another"})
    assert decide(other.test_client(), batch, {"call_d": "approve"}).status_code == 400


@pytest.mark.parametrize(
    "body",
    [
        None,
        {"decisions": {"call_d": "approve"}},
        {"batch": 3, "decisions": {"call_d": "approve"}},
        {"batch": "BATCH"},
        {"batch": "BATCH", "decisions": ["call_d"]},
        {"batch": "BATCH", "decisions": {"call_d": "maybe"}},
        {"batch": "BATCH", "decisions": {"call_d": {"edit": "/tmp/y"}}},
    ],
)
def test_a_malformed_decision_is_400(client: FlaskClient, deleted: Deleted, body: t.Any) -> None:
    batch = paused(client)
    if isinstance(body, dict) and body.get("batch") == "BATCH":
        body = {**body, "batch": batch}
    response = client.post("/tool-calls/resolve", json=body)
    assert response.status_code == 400
    assert deleted.paths == []


@pytest.mark.parametrize("body", [None, {"tool_calls": "x"}, [1, 2], {"id": "x"}])
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


def test_the_resolving_request_id_reaches_the_approved_tool(
    client: FlaskClient, registry: Registry
) -> None:
    def whoami() -> str:
        return flask_app.request_id.get()

    registry.register(Tool.from_function(whoami, timeout=WAIT, approval="ask"))
    response = post_calls(client, call("call_who", "whoami", {}), request_id="r-first")
    resolved = decide(client, response.get_json()["batch"], {"call_who": "approve"}, "r-later")
    assert resolved.get_json()["messages"][0]["content"] == "r-later"


def test_the_default_app_runs_its_example_tools() -> None:
    client = flask_app.create_app(config=CONFIG).test_client()
    response = post_calls(client, WEATHER, request_id="r-9")
    assert response.status_code == 200
    assert json.loads(response.get_json()["messages"][0]["content"])["request_id"] == "r-9"
    paused_call = post_calls(client, call("call_d", "delete_file", {"path": "/tmp/q"}))
    resolved = decide(client, paused_call.get_json()["batch"], {"call_d": "approve"})
    assert resolved.get_json()["messages"][0]["content"] == "deleted /tmp/q"


# -- each call once: a journal and a conversation id -----------------------------------


class Charges:
    """A tool with a side effect that must happen once per call: records each charge;
    ``gate`` (when set) holds it inside the tool until released."""

    def __init__(self) -> None:
        self.amounts: list[int] = []
        self.entered = threading.Event()
        self.gate: threading.Event | None = None

    def __call__(self, amount: int) -> str:
        self.amounts.append(amount)
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(WAIT)
        return f"charged {amount}"


@pytest.fixture
def charges() -> Charges:
    return Charges()


class WatchedJournal(SQLiteJournal):
    """The SQLite journal, telling when a reader finds a call still running."""

    def __init__(self, path: pathlib.Path) -> None:
        super().__init__(path)
        self.saw_running = threading.Event()

    def get(self, run_id: str, call_id: str) -> t.Any:
        record = super().get(run_id, call_id)
        if record is not None and record.state == "started":
            self.saw_running.set()
        return record


@pytest.fixture
def journal(tmp_path: pathlib.Path) -> WatchedJournal:
    return WatchedJournal(tmp_path / "journal.db")


@pytest.fixture
def journaled_app(
    executor: ToolExecutor, deleted: Deleted, charges: Charges, journal: WatchedJournal
) -> Flask:
    registry = Registry(
        [
            Tool.from_function(charges, name="charge", timeout=WAIT),
            Tool.from_function(deleted, name="delete_file", timeout=WAIT, approval="ask"),
        ],
        executor=executor,
        name="flask-example",
        approval_max_age=flask_app.APPROVAL_MAX_AGE,
        journal=journal,
    )
    return t.cast(
        Flask, flask_app.create_app(registry, {**CONFIG, "NOUS_TOOLS_JOURNAL_WAIT": WAIT})
    )


CHARGES = [call("call_1", "charge", {"amount": 5}), call("call_2", "charge", {"amount": 7})]
CONVERSATION = {"X-Conversation-Id": "conversation-42"}


def post_conversation(client: FlaskClient, *calls: dict[str, t.Any]) -> t.Any:
    return client.post("/tool-calls", json={"tool_calls": list(calls)}, headers=CONVERSATION)


def test_a_response_posted_again_after_a_proxy_retry_runs_each_tool_once(
    journaled_app: Flask, charges: Charges
) -> None:
    first = post_conversation(journaled_app.test_client(), *CHARGES)
    # The proxy lost the answer and sends the same request again, to another worker.
    again = post_conversation(journaled_app.test_client(), *CHARGES)
    assert first.status_code == again.status_code == 200
    assert (
        first.get_json()
        == again.get_json()
        == {
            "messages": [
                {"role": "tool", "tool_call_id": "call_1", "content": "charged 5"},
                {"role": "tool", "tool_call_id": "call_2", "content": "charged 7"},
            ]
        }
    )
    assert sorted(charges.amounts) == [5, 7]


def test_a_retry_that_arrives_while_the_first_request_runs_waits_for_its_outcome(
    journaled_app: Flask, charges: Charges, journal: WatchedJournal
) -> None:
    charges.gate = threading.Event()
    bodies: list[t.Any] = []
    first = threading.Thread(
        target=lambda: bodies.append(
            post_conversation(journaled_app.test_client(), CHARGES[0]).get_json()
        )
    )
    first.start()
    try:
        assert charges.entered.wait(WAIT)
        retry = threading.Thread(  # the proxy gave up on the slow request and retries
            target=lambda: bodies.append(
                post_conversation(journaled_app.test_client(), CHARGES[0]).get_json()
            )
        )
        retry.start()
        assert journal.saw_running.wait(WAIT)  # the retry found the call running: it waits
        charges.gate.set()
        retry.join(WAIT * 2)
    finally:
        charges.gate.set()
        first.join(WAIT * 2)
    expected = {"messages": [{"role": "tool", "tool_call_id": "call_1", "content": "charged 5"}]}
    assert bodies == [expected, expected]
    assert charges.amounts == [5]


def test_without_a_conversation_id_nothing_is_journaled(
    journaled_app: Flask, charges: Charges
) -> None:
    client = journaled_app.test_client()
    post_calls(client, CHARGES[0])
    post_calls(client, CHARGES[0])
    assert charges.amounts == [5, 5]


def test_a_journaled_batch_resolved_twice_gives_the_first_outcome(
    journaled_app: Flask, deleted: Deleted, charges: Charges
) -> None:
    client = journaled_app.test_client()
    paused_batch = post_conversation(client, CHARGES[0], DELETE).get_json()["batch"]
    assert paused_batch["run_id"] == "conversation-42"  # the batch carries its conversation
    first = decide(client, paused_batch, {"call_d": "approve"})
    again = decide(client, paused_batch, {"call_d": "approve"})  # a double submit
    assert first.status_code == again.status_code == 200
    assert first.get_json() == again.get_json()
    assert again.get_json()["messages"][1]["content"] == "deleted /tmp/x"
    otherwise = decide(client, paused_batch, {"call_d": "reject"})  # changed its mind: too late
    assert otherwise.status_code == 200 and otherwise.get_json() == first.get_json()
    assert deleted.paths == ["/tmp/x"] and charges.amounts == [5]
    # The whole response posted again: every call answered from the journal.
    reposted = post_conversation(client, CHARGES[0], DELETE)
    assert reposted.status_code == 200
    assert reposted.get_json() == first.get_json()
    assert deleted.paths == ["/tmp/x"] and charges.amounts == [5]


# -- the shipped blueprint's options (nous_tools.contrib.flask.blueprint) ---------------


def test_may_decide_refuses_a_request_that_may_not_decide_with_403(
    registry: Registry, deleted: Deleted
) -> None:
    from nous_tools.contrib.flask import blueprint

    app = Flask("guarded")
    app.register_blueprint(
        blueprint(registry, secret="s", may_decide=lambda request: "X-Approver" in request.headers),
        url_prefix="/agent",
    )
    client = app.test_client()
    response = client.post("/agent/tool-calls", json={"tool_calls": [DELETE]})
    assert response.status_code == 202
    body = {"batch": response.get_json()["batch"], "decisions": {"call_d": "approve"}}
    refused = client.post("/agent/tool-calls/resolve", json=body)
    assert (refused.status_code, refused.get_json()) == (
        403,
        {"error": "you may not decide these calls"},
    )
    assert deleted.paths == []  # nothing used up: the allowed person can still decide
    allowed = client.post("/agent/tool-calls/resolve", json=body, headers={"X-Approver": "ann"})
    assert allowed.status_code == 200
    assert deleted.paths == ["/tmp/x"]


def test_a_body_that_is_not_json_is_400_and_says_so(client: FlaskClient) -> None:
    response = client.post("/tool-calls", data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["error"].startswith("the body is not JSON")


def test_two_blueprints_on_one_app_need_two_names_and_keep_their_own_secrets(
    registry: Registry,
) -> None:
    from nous_tools.contrib.flask import blueprint

    app = Flask("two")
    app.register_blueprint(blueprint(registry, secret="one"), url_prefix="/a")
    app.register_blueprint(blueprint(registry, secret="two", name="second"), url_prefix="/b")
    client = app.test_client()
    batch = client.post("/a/tool-calls", json={"tool_calls": [DELETE]}).get_json()["batch"]
    body = {"batch": batch, "decisions": {"call_d": "reject"}}
    wrong = client.post("/b/tool-calls/resolve", json=body)
    assert wrong.status_code == 400 and "signature" in wrong.get_json()["error"]
    assert client.post("/a/tool-calls/resolve", json=body).status_code == 200
