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

Replicas: several ``serve`` processes on one shared journal (PostgreSQL) answer
for each other's tasks. ``tasks/get`` of a task another process runs reads the
journal; ``tasks/cancel`` records a cancel request there
(:meth:`~nous_tools.journal._sql.SQLJournal.request_cancel`), and the process that
runs the task, which reads the requests of its running tasks every
:data:`WATCH_S` seconds while it has any, cancels it as its own ``tasks/cancel``
would. A task asked to stop reads as ``cancelled`` from every replica. The same
way, a task of this process that waits on questions records them in the journal
(:meth:`~nous_tools.journal._sql.SQLJournal.record_questions`), so ``tasks/get``
through any replica reads it ``input_required`` with them; ``tasks/update`` through
another replica records the answers
(:meth:`~nous_tools.journal._sql.SQLJournal.record_answers`), and the same watcher
takes them (:meth:`~nous_tools.journal._sql.SQLJournal.take_answers`) and delivers
them as this process's own ``tasks/update`` would, once.
"""

from __future__ import annotations

import collections.abc as c
import datetime
import functools
import hashlib
import secrets
import threading
import time
import typing as t

import attrs

from nous_tools._util._log import log as _log

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
#: How often a process running tasks reads the journal's cancel requests (seconds).
WATCH_S = 0.5
#: How long a task's creation waits for its call's record in the journal (seconds):
#: a poll through another replica right after the creation then finds it.
RECORDED_S = 5.0
#: How long (ms) a ``tools/call`` that creates a task waits for the task to leave
#: ``working`` before it answers: a task that ends (or asks) by then is answered as
#: such, and the client reads its result with one ``tasks/get`` instead of waiting a
#: whole poll interval (benchmarks/mcp.py, issue 38: a 10 ms tool took 26-30x a
#: plain call, 1.3x with this).
SETTLE_MS = 100
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
    #: Called with the questions the tool waits on whenever they change (an empty
    #: dict: none now), under the task's lock: the journal's record of them.
    on_questions: c.Callable[[dict[str, dict[str, t.Any]]], None] | None = None

    def _questions_changed(self) -> None:
        if self.on_questions is not None:
            self.on_questions(dict(self.pending))

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
            self._questions_changed()  # before the status: every replica reads them then
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
                self._questions_changed()
                if not self.pending and self.status == "input_required":
                    self.status, self.updated = "working", time.time()

    def wait_working(self, timeout: float) -> None:
        """Wait at most ``timeout`` seconds while the task is ``working``."""
        with self.changed:
            self.changed.wait_for(lambda: self.status != "working", timeout)

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
        self._watching = False  # a thread reads the cancel requests of running tasks
        #: Whether the journal carries questions and answers between replicas.
        self.asks_across = all(
            callable(getattr(journal, name, None))
            for name in ("record_questions", "questions", "record_answers", "take_answers")
        )

    @staticmethod
    def new_id() -> str:
        return secrets.token_urlsafe(18)

    def add(self, task: Task) -> None:
        if self.asks_across:
            task.on_questions = functools.partial(self._record_questions, task)
        with self._lock:
            self._forget_old()
            self._tasks[task.task_id] = task
            watch = not self._watching and callable(getattr(self.journal, "cancel_requests", None))
            self._watching = self._watching or watch
        if watch:
            threading.Thread(
                target=self._watch, name="nous-tools-mcp-task-cancels", daemon=True
            ).start()

    def _record_questions(self, task: Task, questions: dict[str, dict[str, t.Any]]) -> None:
        """Record in the journal the questions ``task`` waits on (none: cleared); a
        journal that cannot be written leaves them answerable here only."""
        try:
            self.journal.record_questions(  # type: ignore[union-attr]
                run_id_of(task.identity), task.task_id, questions or None
            )
        except Exception as exc:
            _log.warning(
                "MCP tasks: the questions of task %s are not in the journal (%s)", task.task_id, exc
            )

    def questions_in_journal(
        self, task_id: str, identity: str
    ) -> tuple[dict[str, t.Any], float] | None:
        """The questions a task of ``identity`` waits on, as recorded by the replica
        running it, and when (None: none, or a journal that does not carry them);
        :class:`JournalUnreadable` when the journal cannot be read."""
        if not self.asks_across:
            return None
        try:
            found: tuple[dict[str, t.Any], float] | None = self.journal.questions(  # type: ignore[union-attr]
                run_id_of(identity), task_id
            )
        except Exception as exc:
            raise JournalUnreadable(f"the journal of tasks cannot be read: {exc}") from exc
        return found

    def answer_in_journal(
        self, task_id: str, identity: str, responses: c.Mapping[str, t.Any]
    ) -> None:
        """``tasks/update`` of a task another replica runs: record the responses to
        the questions it waits on, for that replica to deliver (others are ignored,
        as this process's own ``tasks/update`` ignores them);
        :class:`JournalUnreadable` when the journal cannot be written."""
        try:
            self.journal.record_answers(run_id_of(identity), task_id, responses)  # type: ignore[union-attr]
        except Exception as exc:
            raise JournalUnreadable(f"the journal of tasks cannot be written: {exc}") from exc

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
        stays cancelled, and so does one another replica asked to stop)."""
        if status != "cancelled" and task.status not in TERMINAL and self._asked_to_stop(task):
            status, result, error = "cancelled", None, None
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
            record = self.from_journal(task_id, identity)
            if record is None:  # another replica runs it, waiting on its approval?
                if self.questions_in_journal(task_id, identity) is None:
                    return False
                self._request_cancel(task_id, identity)
            elif record.state == "started" and not record.unknown():  # another replica runs it
                self._request_cancel(task_id, identity)
            return True
        if task.status not in TERMINAL:  # recorded first, while it may still wait on
            try:  # its questions: so that every replica reads it cancelled
                self._request_cancel(task_id, identity)
            except JournalUnreadable as exc:  # stopped all the same
                _log.warning("MCP tasks: task %s was cancelled here only (%s)", task_id, exc)
        self._stop(task)
        return True

    def wait_recorded(self, task: Task, timeout: float = RECORDED_S) -> None:
        """Block until the journal holds ``task``'s call (its first attempt is about
        to run), the task has left ``working`` here (ended, or waiting on a question:
        an ``ask`` tool's approval comes before its call is journaled), or ``timeout``
        seconds: what a new task's creation waits for, so that every replica finds it
        at once. Without a journal, at once; a journal that cannot be read stops the
        wait."""
        if self.journal is None:
            return
        key = (run_id_of(task.identity), task.task_id)
        deadline = time.monotonic() + timeout
        pause = 0.002
        while task.status == "working" and time.monotonic() < deadline:
            try:
                if self.journal.get(*key) is not None:
                    return
            except Exception:  # the call itself says so (JournalUnavailable)
                return
            with task.changed:
                task.changed.wait(pause)
            pause = min(pause * 2, 0.05)

    def _stop(self, task: Task) -> bool:
        """Cancel ``task`` of this process; False when it was already terminal."""
        with self._lock, task.changed:
            running = task.status not in TERMINAL
            if running:
                task.status, task.updated = "cancelled", time.time()
                task.changed.notify_all()
        if running:
            task.cancel()
        return running

    def _request_cancel(self, task_id: str, identity: str) -> None:
        request = getattr(self.journal, "request_cancel", None)
        if not callable(request):
            return
        try:
            request(run_id_of(identity), task_id)
        except Exception as exc:
            raise JournalUnreadable(f"the journal of tasks cannot be written: {exc}") from exc

    def cancelled_in_journal(self, task_id: str, identity: str) -> bool:
        """Whether the task was asked to stop (through any replica);
        :class:`JournalUnreadable` when the journal cannot be read."""
        requests = getattr(self.journal, "cancel_requests", None)
        if not callable(requests):
            return False
        key = (run_id_of(identity), task_id)
        try:
            return key in requests([key])
        except Exception as exc:
            raise JournalUnreadable(f"the journal of tasks cannot be read: {exc}") from exc

    def _asked_to_stop(self, task: Task) -> bool:
        """When ``task`` ends: whether another replica asked it to stop meanwhile
        (a journal that cannot be read says no: its outcome stands)."""
        try:
            return self.cancelled_in_journal(task.task_id, task.identity)
        except JournalUnreadable:
            return False

    def _watch(self) -> None:
        """While this process runs tasks: every :data:`WATCH_S` seconds, read the
        journal's cancel requests of those tasks and cancel the ones asked to stop."""
        while True:
            with self._lock:
                running = [task for task in self._tasks.values() if task.status not in TERMINAL]
                if not running:
                    self._watching = False
                    return
            keys = {(run_id_of(task.identity), task.task_id): task for task in running}
            try:
                asked = self.journal.cancel_requests(list(keys))  # type: ignore[union-attr]
            except Exception as exc:  # read again at the next turn
                _log.warning("MCP tasks: could not read the cancel requests (%s)", exc)
                asked = set()
            for key in asked:
                self._stop(keys[key])
            self._deliver_answers([task for task in running if task.status == "input_required"])
            time.sleep(WATCH_S)

    def _deliver_answers(self, waiting: list[Task]) -> None:
        """Take the answers other replicas recorded for the tasks ``waiting`` on
        questions here, and deliver them as this process's ``tasks/update`` would."""
        if not waiting or not self.asks_across:
            return
        keys = {(run_id_of(task.identity), task.task_id): task for task in waiting}
        try:
            answers = self.journal.take_answers(list(keys))  # type: ignore[union-attr]
        except Exception as exc:  # read again at the next turn
            _log.warning("MCP tasks: could not read the answers (%s)", exc)
            return
        for key, responses in answers.items():
            keys[key].answer(responses)

    def from_journal(self, task_id: str, identity: str) -> t.Any | None:
        """The journal's record of a task of ``identity`` (None: none, or no journal);
        :class:`JournalUnreadable` when the journal cannot be read."""
        if self.journal is None:
            return None
        try:
            return self.journal.get(run_id_of(identity), task_id)
        except Exception as exc:
            raise JournalUnreadable(f"the journal of tasks cannot be read: {exc}") from exc
