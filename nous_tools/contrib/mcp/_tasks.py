"""MCP Tasks (the ``io.modelcontextprotocol/tasks`` extension, SEP-2663), server side.

A ``tools/call`` of a task-supporting tool (``Tool.task_support``) from a client
that declared the extension returns a ``CreateTaskResult`` at once; the call runs
on the registry's executor in a background thread (advice, approval, validation,
limits, deadline, journal: the whole pipeline). ``tasks/get`` answers from memory
while this process runs the task, and from the executor's journal otherwise: the
task id is the call's ``call_id``, under the ``run_id`` ``mcp-tasks/<identity>``.
So a restarted server answers for a task that completed before the restart, and
reports one that was running when the server died as ``failed`` ("outcome
unknown", :meth:`JournalRecord.unknown`); it never runs it again. Without a
journal, tasks live in this process's memory only.

A task is visible only to the identity that created it: the digest of the
request's ``Authorization`` header, else its MCP session id, else ``anonymous``.
"""

from __future__ import annotations

import collections.abc as c
import datetime
import hashlib
import secrets
import threading
import time
import typing as t

import attrs

__all__ = [
    "TASKS_EXTENSION",
    "JournalUnreadable",
    "Task",
    "Tasks",
    "failed_error",
    "identity_of",
    "iso",
    "run_id_of",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: How long a task's outcome is kept in memory (ms); the journal keeps it longer.
TTL_MS = 3_600_000
POLL_MS = 500
#: The keys of a task's questions in ``inputRequests``: this, then a number.
ASK_KEY = "nous_tools.task_ask."
#: JSON-RPC internal error: what a failed task reports.
_INTERNAL = -32603

Status = t.Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL = ("completed", "failed", "cancelled")


def iso(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def identity_of(ctx: t.Any) -> str:
    """Who may see the tasks a request creates: a digest of its ``Authorization``
    header, else its MCP session id, else ``"anonymous"``."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None:
        auth = headers.get("authorization")
        if auth:
            return "auth-" + hashlib.sha256(auth.encode()).hexdigest()[:32]
        session = headers.get("mcp-session-id")
        if session:
            return "session-" + hashlib.sha256(session.encode()).hexdigest()[:32]
    return "anonymous"


def run_id_of(identity: str) -> str:
    return f"mcp-tasks/{identity}"


@attrs.define(eq=False)
class Task:
    """One task of this process."""

    task_id: str
    identity: str
    tool: str
    created: float
    cancel: c.Callable[[], None]
    updated: float = 0.0
    status: Status = "working"
    result: dict[str, t.Any] | None = None
    error: dict[str, t.Any] | None = None
    #: The questions the tool waits on (key -> ``{"method", "params"}``), and the
    #: answers delivered by ``tasks/update`` not yet taken.
    pending: dict[str, dict[str, t.Any]] = attrs.field(factory=dict)
    answers: dict[str, t.Any] = attrs.field(factory=dict)
    asked: int = 0
    changed: threading.Condition = attrs.field(factory=threading.Condition)

    def ask(self, request: dict[str, t.Any], cancelled: threading.Event) -> t.Any:
        """From the tool's thread: put ``request`` to the client and wait for its
        answer (see :meth:`ask_all`)."""
        return self.ask_all([(None, request)], cancelled)[0]

    def ask_all(
        self, requests: c.Sequence[tuple[str | None, dict[str, t.Any]]], cancelled: threading.Event
    ) -> list[t.Any]:
        """From the tool's thread: put ``requests`` to the client together, each under
        its key (the tool's name for it, else ``nous_tools.task_ask.N``), the task
        ``input_required`` until every question is answered, and wait for all their
        answers (``tasks/update``); ``ToolCancelled`` when the task is cancelled
        meanwhile, ``ValueError`` for a key another question waits under."""
        from nous_tools.errors import ToolCancelled

        with self.changed:
            keys: list[str] = []
            for key, _ in requests:
                if key is None:
                    key = f"{ASK_KEY}{self.asked}"
                    self.asked += 1
                if key in self.pending or key in keys:
                    raise ValueError(f"a question with the key {key!r} is already waiting")
                keys.append(key)
            for key, (_, request) in zip(keys, requests, strict=True):
                self.pending[key] = request
            if self.status == "working":
                self.status, self.updated = "input_required", time.time()
            try:
                while not all(key in self.answers for key in keys):
                    if cancelled.is_set() or self.status in TERMINAL:
                        raise ToolCancelled("the MCP client cancelled the task")
                    self.changed.wait(0.2)
                return [self.answers.pop(key) for key in keys]
            finally:
                for key in keys:
                    self.pending.pop(key, None)
                    self.answers.pop(key, None)
                if not self.pending and self.status == "input_required":
                    self.status, self.updated = "working", time.time()

    def answer(self, responses: c.Mapping[str, t.Any]) -> None:
        """``tasks/update``: deliver the responses to questions the tool waits on (a
        response to no such question is ignored)."""
        with self.changed:
            for key, value in responses.items():
                if key in self.pending and key not in self.answers:
                    self.answers[key] = value
            self.changed.notify_all()

    def envelope(self) -> dict[str, t.Any]:
        """The ``Task`` fields (what ``CreateTaskResult`` carries)."""
        return {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": iso(self.created),
            "lastUpdatedAt": iso(self.updated or self.created),
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_MS,
        }

    def detailed(self) -> dict[str, t.Any]:
        """The ``tasks/get`` answer (``DetailedTask``), read whole under the task's
        lock: a task settling meanwhile is never seen completed without its result."""
        with self.changed:
            answer = self.envelope()
            if self.status == "input_required":
                answer["inputRequests"] = {
                    k: v for k, v in self.pending.items() if k not in self.answers
                }
            if self.status == "completed" and self.result is not None:
                answer["result"] = self.result
            elif self.status == "failed" and self.error is not None:
                answer["error"] = self.error
        answer["resultType"] = "complete"
        return answer


class JournalUnreadable(Exception):
    """The journal could not be read: a task's state is not known now."""


def failed_error(message: str, code: int = _INTERNAL) -> dict[str, t.Any]:
    return {"code": code, "message": message}


class Tasks:
    """The tasks of one served registry: those of this process in memory, and the
    journal (when the executor has one) for the rest."""

    def __init__(self, journal: t.Any | None) -> None:
        self.journal = journal
        self._lock = threading.Lock()
        self._tasks: dict[str, Task] = {}

    @staticmethod
    def new_id() -> str:
        return secrets.token_urlsafe(18)

    def add(self, task: Task) -> None:
        with self._lock:
            self._forget_old()
            self._tasks[task.task_id] = task

    def _forget_old(self) -> None:
        cutoff = time.time() - TTL_MS / 1000
        for key in [k for k, v in self._tasks.items() if v.status in TERMINAL]:
            if self._tasks[key].updated < cutoff:
                del self._tasks[key]

    def settle(
        self,
        task: Task,
        status: Status,
        result: dict[str, t.Any] | None = None,
        error: dict[str, t.Any] | None = None,
    ) -> None:
        """Set ``task``'s terminal state, unless it already has one (a cancelled task
        stays cancelled)."""
        with self._lock, task.changed:
            if task.status in TERMINAL:
                return
            task.status, task.result, task.error = status, result, error
            task.updated = time.time()
            task.changed.notify_all()

    def mine(self, task_id: str, identity: str) -> Task | None:
        with self._lock:
            task = self._tasks.get(task_id)
        return task if task is not None and task.identity == identity else None

    def cancel(self, task_id: str, identity: str) -> bool:
        """Cancel a task of ``identity``; False when it has no such task. A terminal
        task is left as it is (the ack is the same)."""
        task = self.mine(task_id, identity)
        if task is None:
            return self.from_journal(task_id, identity) is not None
        with self._lock, task.changed:
            running = task.status not in TERMINAL
            if running:
                task.status, task.updated = "cancelled", time.time()
                task.changed.notify_all()
        if running:
            task.cancel()
        return True

    def from_journal(self, task_id: str, identity: str) -> t.Any | None:
        """The journal's record of a task of ``identity`` (None: none, or no journal);
        :class:`JournalUnreadable` when the journal cannot be read."""
        if self.journal is None:
            return None
        try:
            return self.journal.get(run_id_of(identity), task_id)
        except Exception as exc:
            raise JournalUnreadable(f"the journal of tasks cannot be read: {exc}") from exc
