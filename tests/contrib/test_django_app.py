"""examples/django_app.py, driven through Django's test client under plain pytest
(the example module is the settings module; SQLite in a temporary directory): the
same flow as the Flask example — answers in the shape the calls came in, a paused
batch resolved later, tampering and replays refused (single use kept in Django's
database cache) — CSRF, per-request context in concurrent requests, the
connection-closing default executor that ``NousToolsConfig`` installs, and the
transaction rule of ``docs/how-to/django.md``."""

from __future__ import annotations

import collections.abc as c
import importlib
import json
import os
import pathlib
import shutil
import sys
import tempfile
import threading
import types
import typing as t

import pytest

pytest.importorskip("django")

import django
from django.core.cache import caches
from django.test import Client, override_settings
from django.urls import include
from django.urls import path as url_path

import nous_tools
from nous_tools import Ok, Registry, Tool, ToolExecutor, default_executor, execute
from nous_tools.contrib import django as contrib_django
from nous_tools.contrib.django import CacheApprovalStore, django_executor, urls

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
DATA = pathlib.Path(tempfile.mkdtemp(prefix="nous-tools-django-"))
os.environ["DJANGO_DB"] = str(DATA / "db.sqlite3")  # read by the settings below
sys.path.insert(0, str(EXAMPLES))
django_app = importlib.import_module("django_app")  # the settings, URLconf and views
sys.path.remove(str(EXAMPLES))
del os.environ["DJANGO_DB"]  # other tests' processes must not inherit it

SECRET = "test-secret"
WAIT = 5.0


@pytest.fixture(scope="module", autouse=True)
def django_site() -> c.Iterator[None]:
    """Django started on the example's settings (its ``NousToolsConfig`` installs the
    default executor), the cache table created; the previous default put back after."""
    from django.core.management import call_command

    before = nous_tools.executor._default
    os.environ["DJANGO_SETTINGS_MODULE"] = "django_app"
    try:
        django.setup()  # reads the settings: the module imported above
    finally:
        del os.environ["DJANGO_SETTINGS_MODULE"]
    call_command("createcachetable", verbosity=0)
    yield
    installed = nous_tools.set_default_executor(before)
    if installed is not None and installed is not before:
        installed.shutdown()
    from django.db import connections

    connections.close_all()
    shutil.rmtree(DATA, ignore_errors=True)


@pytest.fixture
def executor() -> c.Iterator[ToolExecutor]:
    with django_executor(max_workers=4) as ex:
        yield ex


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
def registry(executor: ToolExecutor, deleted: Deleted) -> c.Iterator[Registry]:
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
        approval_store=CacheApprovalStore(timeout=django_app.APPROVAL_MAX_AGE),
    )
    caches["default"].clear()
    # The example's URLconf, serving this registry (urls() takes it when called).
    site = _urlconf(registry)
    with override_settings(NOUS_TOOLS_APPROVAL_SECRET=SECRET, ROOT_URLCONF=site):
        yield registry
    caches["default"].clear()


def _urlconf(registry: Registry) -> types.ModuleType:
    """The example's URLconf, serving ``registry``."""
    site = types.ModuleType("site_urls")
    site.urlpatterns = [url_path("", django_app.index), url_path("", include(urls(registry)))]  # type: ignore[attr-defined]
    return site


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
    return post(client, "/tool-calls/", {"tool_calls": list(calls)}, request_id)


def paused(client: Client, *calls: dict[str, t.Any]) -> dict[str, t.Any]:
    response = post_calls(client, *(calls or (WEATHER, DELETE)))
    assert response.status_code == 202
    return t.cast(dict[str, t.Any], response.json()["batch"])


def decide(client: Client, batch: t.Any, decisions: t.Any, request_id: str = "r-2") -> t.Any:
    return post(
        client, "/tool-calls/resolve/", {"batch": batch, "decisions": decisions}, request_id
    )


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
    response = post(client, "/tool-calls/", {"output": [responses_item]})
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
    response = post(client, "/tool-calls/", {"role": "assistant", "content": [tool_use]})
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
        approval_store=CacheApprovalStore(),  # the database cache: shared
    )
    with override_settings(ROOT_URLCONF=_urlconf(twin)):
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
    assert client.get("/tool-calls/").status_code == 405
    assert client.get("/tool-calls/resolve/").status_code == 405


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
    assert post(client, "/tool-calls/resolve/", body).status_code == 400
    assert deleted.paths == []


@pytest.mark.parametrize("body", ["not json", {"tool_calls": {"id": "x"}}, [1], {"id": "x"}])
def test_a_malformed_tool_call_request_is_400(client: Client, body: t.Any) -> None:
    data = body if isinstance(body, str) else json.dumps(body)
    response = client.post("/tool-calls/", data=data, content_type="application/json")
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


# -- the executor hooks, the transaction rule, CSRF ------------------------------------


def test_the_app_config_installs_a_default_executor_that_closes_connections() -> None:
    installed = default_executor()
    assert installed in contrib_django._MADE  # NousToolsConfig.ready() made it
    assert contrib_django.install_default_executor() is installed  # once is enough
    assert execute(Tool.from_function(lambda: "ran", name="f", timeout=WAIT), {}) == Ok("ran")


def _query() -> dict[str, t.Any]:
    """Opens this thread's connection (one query) and says whether it was open before."""
    from django.db import connection

    was_open = connection.connection is not None
    with connection.cursor() as cursor:
        cursor.execute("select 1")
    return {"was_open": was_open, "thread": threading.get_ident()}


def test_a_worker_of_a_django_executor_closes_its_connection_after_each_task() -> None:
    query = Tool.from_function(_query, name="query", timeout=WAIT, retries=0)
    with django_executor(max_workers=1) as one_worker:
        first = one_worker.execute(query, {}).unwrap()
        second = one_worker.execute(query, {}).unwrap()
    assert first["thread"] == second["thread"]  # the same worker thread ...
    assert second["was_open"] is False  # ... found its connection closed after the first
    with ToolExecutor(max_workers=1) as plain:  # without the hooks it stays open
        plain.execute(query, {}).unwrap()
        assert plain.execute(query, {}).unwrap()["was_open"] is True


def test_django_executor_runs_a_given_hook_then_closes_connections() -> None:
    order: list[str] = []
    ran = threading.Event()
    closed = contrib_django._then(lambda: order.append("mine"), lambda: order.append("close"))
    closed()
    assert order == ["mine", "close"]

    def failing() -> None:
        raise RuntimeError("hook failed")

    order.clear()
    with pytest.raises(RuntimeError):
        contrib_django._then(failing, lambda: order.append("close"))()
    assert order == ["close"]  # closing still happens
    with django_executor(max_workers=1, after_task=ran.set) as executor:
        executor.execute(Tool.from_function(lambda: 1, name="one", timeout=WAIT), {})
        assert ran.wait(WAIT)


def test_a_timed_tool_does_not_see_the_callers_transaction_an_inline_one_does() -> None:
    """docs/how-to/django.md's first sentence: a timed tool runs in a worker thread,
    on that thread's connection, outside the request's transaction."""
    from django.db import connection, transaction

    with connection.cursor() as cursor:
        cursor.execute("create table if not exists person (name text)")
        cursor.execute("delete from person")
        cursor.execute("insert into person values ('grace')")

    def count_people() -> int:
        with connection.cursor() as cursor:  # the connection of the thread it runs in
            cursor.execute("select count(*) from person")
            row = cursor.fetchone()
        return int(row[0])

    timed = Tool.from_function(count_people, name="timed", timeout=WAIT, retries=0)
    inline = Tool.from_function(count_people, name="inline", timeout=None, retries=0)
    with django_executor(max_workers=2) as executor, transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("insert into person values ('ada')")  # not committed yet
        assert count_people() == 2  # the request sees its own insert
        assert executor.execute(inline, {}) == Ok(2)  # inline: the request's thread
        assert executor.execute(timed, {}) == Ok(1)  # a worker: the committed state only
    with django_executor(max_workers=1) as executor:
        assert executor.execute(timed, {}) == Ok(2)  # after the commit, workers see it


def test_posts_need_the_csrf_token_that_the_index_page_sets(registry: Registry) -> None:
    browser = Client(enforce_csrf_checks=True)
    body = json.dumps({"tool_calls": [WEATHER]})
    refused = browser.post("/tool-calls/", data=body, content_type="application/json")
    assert refused.status_code == 403
    page = browser.get("/")
    assert page.status_code == 200
    token = page.cookies["csrftoken"].value
    response = browser.post(
        "/tool-calls/", data=body, content_type="application/json", headers={"X-CSRFToken": token}
    )
    assert response.status_code == 200
    assert response.json()["messages"][0]["tool_call_id"] == "call_w"


def test_a_missing_approval_secret_is_a_configuration_error(client: Client) -> None:
    from django.core.exceptions import ImproperlyConfigured

    with override_settings(NOUS_TOOLS_APPROVAL_SECRET=""), pytest.raises(ImproperlyConfigured):
        post_calls(client, WEATHER, DELETE)  # never an unsigned batch


# -- the shipped views' options (nous_tools.contrib.django.urls) ------------------------


def test_may_decide_refuses_a_request_that_may_not_decide_with_403(
    registry: Registry, deleted: Deleted
) -> None:
    site = types.ModuleType("guarded_urls")
    site.urlpatterns = urls(registry, may_decide=lambda request: "X-Approver" in request.headers)  # type: ignore[attr-defined]
    client = Client()
    with override_settings(ROOT_URLCONF=site):
        batch = paused(client)
        refused = decide(client, batch, {"call_d": "approve"})
        assert refused.status_code == 403
        assert refused.json() == {"error": "you may not decide these calls"}
        assert deleted.paths == []  # and the approval is not used up:
        allowed = post(
            client, "/tool-calls/resolve/", {"batch": batch, "decisions": {"call_d": "approve"}}
        )
        assert allowed.status_code == 403  # still no header
        response = client.post(
            "/tool-calls/resolve/",
            data=json.dumps({"batch": batch, "decisions": {"call_d": "approve"}}),
            content_type="application/json",
            headers={"X-Approver": "ann"},
        )
        assert response.status_code == 200
    assert deleted.paths == ["/tmp/x"]


def test_the_conversation_header_journals_the_calls_so_a_retry_runs_nothing_twice(
    executor: ToolExecutor, tmp_path: pathlib.Path
) -> None:
    from nous_tools import SQLiteJournal

    runs: list[str] = []

    def charge(order: str) -> str:
        runs.append(order)
        return f"charged {order}"

    registry = Registry(
        [Tool.from_function(charge, timeout=WAIT)],
        executor=executor,
        journal=SQLiteJournal(tmp_path / "journal.db"),
    )
    site = types.ModuleType("journaled_urls")
    site.urlpatterns = urls(registry, secret=SECRET)  # type: ignore[attr-defined]
    client = Client()
    body = {"tool_calls": [call("call_c", "charge", {"order": "A-1"})]}
    with override_settings(ROOT_URLCONF=site):
        answers = [
            client.post(
                "/tool-calls/",
                data=json.dumps(body),
                content_type="application/json",
                headers={"X-Conversation-Id": "conversation-9"},
            ).json()
            for _ in range(2)
        ]
    assert answers[0] == answers[1]
    assert answers[0]["messages"][0]["content"] == "charged A-1"
    assert runs == ["A-1"]  # the retry replayed the journaled outcome


def test_a_body_that_is_not_json_is_400_and_says_so(client: Client) -> None:
    response = client.post("/tool-calls/", data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("the body is not JSON")


def test_csrf_exempt_views_take_a_post_without_the_token(registry: Registry) -> None:
    site = types.ModuleType("api_urls")
    site.urlpatterns = urls(registry, csrf_exempt=True)  # type: ignore[attr-defined]
    api = Client(enforce_csrf_checks=True)
    with override_settings(ROOT_URLCONF=site):
        response = api.post(
            "/tool-calls/",
            data=json.dumps({"tool_calls": [WEATHER]}),
            content_type="application/json",
        )
    assert response.status_code == 200


def test_urls_refuses_bad_options_at_once(registry: Registry) -> None:
    with pytest.raises(ValueError, match="wait must be"):
        urls(registry, wait=-1)
    with pytest.raises(TypeError, match="secret must be"):
        urls(registry, secret=42)  # type: ignore[arg-type]


def test_the_system_checks_name_a_missing_secret_and_a_missing_cache_table(
    registry: Registry,
) -> None:
    from django.core import checks
    from django.db import connection

    from nous_tools.contrib.django import check_views

    site = _urlconf(registry)
    with override_settings(ROOT_URLCONF=site, NOUS_TOOLS_APPROVAL_SECRET=SECRET):
        assert check_views() == []
    with override_settings(ROOT_URLCONF=site, NOUS_TOOLS_APPROVAL_SECRET=""):
        assert [error.id for error in check_views()] == ["nous_tools.E001"]
        assert check_views in checks.registry.registry.get_checks()
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE nous_tools_cache RENAME TO nous_tools_cache_away")
    try:
        with override_settings(ROOT_URLCONF=site, NOUS_TOOLS_APPROVAL_SECRET=SECRET):
            errors = check_views()
        assert [error.id for error in errors] == ["nous_tools.E002"]
        assert "createcachetable" in errors[0].hint
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE nous_tools_cache_away RENAME TO nous_tools_cache")
