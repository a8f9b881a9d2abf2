"""A task's questions across replicas (issue 38), in one process on one SQLite
journal: the questions a task waits on here are recorded for the other replicas
(another ``Tasks``, another served registry, on the same file), which read the task
``input_required`` with them and record the answers ``tasks/update`` brings them;
the watcher here delivers each answer once. A journal that cannot carry answers
refuses a ``tasks/update`` for a task another replica runs."""

from __future__ import annotations

import json
import threading
import time
import typing as t
from pathlib import Path

import httpx2
import pytest

from nous_tools import Registry, RunContext, SQLiteJournal, tool
from nous_tools.contrib.mcp import serve_http_in_thread
from nous_tools.contrib.mcp._tasks import Task, Tasks

WAIT = 30.0
IDENTITY = "auth-alice"
VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
ELICITING = {"elicitation": {}, "extensions": {TASKS: {}}}
COLOUR = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
QUESTION = {"method": "elicitation/create", "params": {"message": "Colour?"}}


# -- the tasks of two replicas --------------------------------------------------------


def _asking(tasks: Tasks, task_id: str) -> tuple[Task, list[t.Any], threading.Thread]:
    """A task of ``tasks`` whose tool thread asks one question; its answers land in
    the returned list."""
    now = time.time()
    task = Task(task_id, IDENTITY, "ask", now, lambda: None, updated=now)
    tasks.add(task)
    answers: list[t.Any] = []
    thread = threading.Thread(
        target=lambda: answers.append(task.ask_all([("colour", QUESTION)], threading.Event())),
        daemon=True,
    )
    thread.start()
    return task, answers, thread


def _until(check: t.Callable[[], t.Any], what: str) -> t.Any:
    deadline = time.monotonic() + WAIT
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.02)
    return found


def test_a_question_asked_here_is_read_and_answered_through_another_replica(
    tmp_path: Path,
) -> None:
    path = tmp_path / "calls.db"
    here = Tasks(SQLiteJournal(path))
    other = Tasks(SQLiteJournal(path))
    task, answers, thread = _asking(here, "task-1")
    asked = _until(lambda: other.questions_in_journal("task-1", IDENTITY), "never recorded")
    assert asked[0] == {"colour": QUESTION}
    assert other.questions_in_journal("task-1", "auth-bob") is None  # another identity
    other.answer_in_journal("task-1", IDENTITY, {"colour": {"action": "accept"}, "x": 1})
    thread.join(WAIT)
    assert answers == [[{"action": "accept"}]]  # delivered, once
    assert task.status == "working" and not task.pending
    assert other.questions_in_journal("task-1", IDENTITY) is None  # cleared
    here.settle(task, "completed", {"content": []})


def test_an_answer_for_another_identity_is_not_recorded(tmp_path: Path) -> None:
    path = tmp_path / "calls.db"
    here = Tasks(SQLiteJournal(path))
    other = Tasks(SQLiteJournal(path))
    task, answers, thread = _asking(here, "task-2")
    _until(lambda: other.questions_in_journal("task-2", IDENTITY), "never recorded")
    other.answer_in_journal("task-2", "auth-bob", {"colour": "bob's"})
    time.sleep(3 * 0.5)  # three turns of the watcher: nothing to deliver
    assert answers == [] and task.status == "input_required"
    task.answer({"colour": "alice's"})  # a local tasks/update still answers it
    thread.join(WAIT)
    assert answers == [["alice's"]]
    here.settle(task, "completed", {"content": []})


# -- two served registries ----------------------------------------------------------


@tool(timeout=120, retries=0, task="optional")
def favourite(ctx: RunContext) -> str:
    answer = ctx.elicit("Your favourite colour?", COLOUR, key="colour")
    return f"you like {(answer.content or {}).get('colour')}"


@tool(timeout=120, retries=0, task="optional", approval="ask")
def wipe() -> str:
    return "wiped"


class _Unasking(SQLiteJournal):
    """A journal that cannot carry questions and answers (as one that predates them)."""

    record_questions = None
    record_answers = None


def _rpc(url: str, method: str, params: dict[str, t.Any], token: str = "alice") -> dict[str, t.Any]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
        "Mcp-Name": params.get("name") or params["taskId"],
        "Authorization": f"Bearer {token}",
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": ELICITING,
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    response = httpx2.post(url, json=body, headers=headers, timeout=WAIT)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        lines = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return t.cast("dict[str, t.Any]", json.loads([x for x in lines if x.strip()][-1]))
    return t.cast("dict[str, t.Any]", response.json())


def _status(url: str, task_id: str, status: str) -> dict[str, t.Any]:
    def read() -> dict[str, t.Any] | None:
        got = _rpc(url, "tasks/get", {"taskId": task_id})["result"]
        return t.cast("dict[str, t.Any]", got) if got["status"] == status else None

    return t.cast("dict[str, t.Any]", _until(read, f"never {status}"))


@pytest.fixture
def replicas(tmp_path: Path) -> t.Iterator[tuple[str, str]]:
    path = tmp_path / "calls.db"
    a = serve_http_in_thread(Registry([favourite, wipe], journal=SQLiteJournal(path)))
    b = serve_http_in_thread(Registry([favourite, wipe], journal=SQLiteJournal(path)))
    with a, b:
        yield a.url, b.url


def test_a_task_asking_through_a_reads_input_required_and_is_answered_through_b(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    created = _rpc(a, "tools/call", {"name": "favourite", "arguments": {}})["result"]
    task_id = created["taskId"]
    here = _status(a, task_id, "input_required")
    there = _status(b, task_id, "input_required")
    assert there["inputRequests"] == here["inputRequests"]
    assert there["inputRequests"]["colour"]["method"] == "elicitation/create"
    bob = _rpc(b, "tasks/update", {"taskId": task_id, "inputResponses": {}}, token="bob")
    assert bob["error"]["code"] == -32602  # not bob's task
    ignored = {"taskId": task_id, "inputResponses": {"other": {"action": "accept"}}}
    assert _rpc(b, "tasks/update", ignored)["result"]["resultType"] == "complete"
    answer = {"colour": {"action": "accept", "content": {"colour": "teal"}}}
    updated = _rpc(b, "tasks/update", {"taskId": task_id, "inputResponses": answer})
    assert updated["result"]["resultType"] == "complete"
    for url in (b, a):
        done = _status(url, task_id, "completed")
        assert done["result"]["content"][0]["text"] == "you like teal"


def test_an_ask_tools_approval_in_a_task_is_given_through_another_replica(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    task_id = _rpc(a, "tools/call", {"name": "wipe", "arguments": {}})["result"]["taskId"]
    waiting = _status(b, task_id, "input_required")  # before its call is journaled
    assert list(waiting["inputRequests"]) == ["nous_tools.approval"]
    answer = {"nous_tools.approval": {"action": "accept", "content": {}}}
    _rpc(b, "tasks/update", {"taskId": task_id, "inputResponses": answer})
    assert _status(b, task_id, "completed")["result"]["content"][0]["text"] == "wiped"


def test_an_ask_tool_waiting_for_its_approval_is_cancelled_through_another_replica(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    task_id = _rpc(a, "tools/call", {"name": "wipe", "arguments": {}})["result"]["taskId"]
    _status(b, task_id, "input_required")
    assert _rpc(b, "tasks/cancel", {"taskId": task_id})["result"]["resultType"] == "complete"
    assert _status(a, task_id, "cancelled")["status"] == "cancelled"  # stopped where it runs
    assert _status(b, task_id, "cancelled")["status"] == "cancelled"
    answer = {"nous_tools.approval": {"action": "accept", "content": {}}}
    late = _rpc(b, "tasks/update", {"taskId": task_id, "inputResponses": answer})
    assert late["result"]["resultType"] == "complete"  # acknowledged, and nothing runs
    time.sleep(1.0)  # two turns of A's watcher, were it still running the task
    assert _rpc(a, "tasks/get", {"taskId": task_id})["result"]["status"] == "cancelled"
    assert "result" not in _rpc(b, "tasks/get", {"taskId": task_id})["result"]


def test_a_journal_without_answers_refuses_an_update_for_another_replicas_task(
    tmp_path: Path,
) -> None:
    path = tmp_path / "calls.db"
    with (
        serve_http_in_thread(Registry([favourite], journal=SQLiteJournal(path))) as a,
        serve_http_in_thread(Registry([favourite], journal=_Unasking(path))) as b,
    ):
        task_id = _rpc(a.url, "tools/call", {"name": "favourite", "arguments": {}})["result"][
            "taskId"
        ]
        _status(a.url, task_id, "input_required")
        answer = {"colour": {"action": "accept", "content": {"colour": "red"}}}
        refused = _rpc(b.url, "tasks/update", {"taskId": task_id, "inputResponses": answer})
        assert refused["error"]["code"] == -32600
        assert "cannot carry answers" in refused["error"]["message"]
        assert _rpc(a.url, "tasks/get", {"taskId": task_id})["result"]["status"] == (
            "input_required"  # nothing was delivered
        )
        _rpc(a.url, "tasks/update", {"taskId": task_id, "inputResponses": answer})
        done = _status(a.url, task_id, "completed")
        assert done["result"]["content"][0]["text"] == "you like red"
