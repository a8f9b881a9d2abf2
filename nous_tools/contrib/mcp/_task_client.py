"""The client side of MCP Tasks: a tool run as a task (created by ``tools/call``,
watched with ``tasks/get``, its result fetched, cancelled with ``tasks/cancel``).

The wire, as servers speak it:

* protocol 2025-11-25 (the ``tasks`` capability, SEP-1686, what the official
  ``server-everything`` speaks): ``tools/call`` with ``params.task = {ttl}`` answers
  ``{task: {taskId, status, pollInterval, ...}}``; ``tasks/get`` answers the task;
  ``tasks/result`` answers the tool's ``CallToolResult`` once the task ended, and
  while it waits (status ``input_required``) the server's ``elicitation/create``
  requests come to the client like any other;
* the ``io.modelcontextprotocol/tasks`` extension (SEP-2663, 2026-07-28): the
  answer is flat (``resultType: "task"``, ``taskId``, ``pollIntervalMs``) and
  ``tasks/get`` carries the ``result`` (or ``error``) inline, and the server's
  questions as ``inputRequests``, answered with ``tasks/update``. Both shapes are
  read here; each request declares the extension (per request, SEP-2575).

The SDK (``mcp`` 2.x) validates a ``tools/call`` answer as a ``CallToolResult``, so
these requests go to the session's dispatcher as raw JSON-RPC: only this module
does that.
"""

from __future__ import annotations

import asyncio
import collections.abc as c
import functools
import logging
import threading
import typing as t

import attrs
import mcp_types as types

if t.TYPE_CHECKING:
    from mcp import Client

    from nous_tools.contrib.mcp._client import MCPServer
    from nous_tools.results import Err, Ok
    from nous_tools.run_context import RunContext

#: The extension's name (SEP-2663).
EXTENSION = "io.modelcontextprotocol/tasks"
#: The statuses after which a task changes no more.
TERMINAL = frozenset({"completed", "failed", "cancelled"})
#: Every status a task may have.
STATUSES = TERMINAL | {"working", "input_required"}
#: Seconds between two ``tasks/get`` when the server suggests no interval, and the
#: least put on the interval a server suggests (a longer one is honoured whole).
DEFAULT_POLL = 0.5
MIN_POLL = 0.05
#: Seconds a ``tasks/cancel`` sent in the background may take.
CANCEL_WAIT = 5.0
#: How long a task is asked to be kept after it ends (the ``ttl`` of ``tools/call``).
DEFAULT_TTL = 3600.0


@attrs.frozen(slots=True)
class TaskStatus:
    """What ``tasks/get`` says of a task: ``status`` (``"working"``,
    ``"input_required"``, ``"completed"``, ``"failed"`` or ``"cancelled"``), the
    server's ``message`` (``statusMessage``), and ``poll_interval``, the seconds it
    suggests between two looks (``None`` when it suggests none)."""

    task_id: str
    status: str
    message: str | None = None
    poll_interval: float | None = None
    #: The tool's result when the server sends it with the status (SEP-2663).
    result: types.CallToolResult | None = attrs.field(default=None, repr=False)
    #: The JSON-RPC error of a failed task, sent with the status (SEP-2663).
    error: types.ErrorData | None = attrs.field(default=None, repr=False)
    #: The server's questions of an ``input_required`` task, by key (SEP-2663).
    input_requests: c.Mapping[str, t.Any] | None = attrs.field(default=None, repr=False)

    @property
    def done(self) -> bool:
        """True once the task ended (completed, failed or cancelled)."""
        return self.status in TERMINAL


@attrs.frozen(slots=True)
class TaskHandle:
    """A tool started as a task by ``server.call_tool(name, arguments, as_task=True)``.

    Only its ``id`` (a string) needs keeping to come back later, e.g. from another
    Django request: ``server.task(task_id)`` (or ``TaskHandle(server=server,
    id=task_id)``) rebuilds the handle on an :class:`MCPServer` for the same
    server. The server keeps a task for the ``ttl`` asked when it was created.
    """

    server: MCPServer = attrs.field(repr=False, eq=False)
    id: str
    tool_name: str = ""

    def status(self) -> TaskStatus:
        """The task's :class:`TaskStatus` now (``tasks/get``)."""
        return self.server._task_status(self.id)

    def result(
        self, timeout: float | None = None, ctx: RunContext[t.Any] | None = None
    ) -> Ok[t.Any] | Err:
        """Wait at most ``timeout`` seconds for the task to end and return its result
        as :meth:`MCPServer.call` would (``Ok`` or ``Err``). ``TimeoutError`` when it
        has not ended by then: the task goes on running (call :meth:`cancel` to stop
        it). Questions the server asks meanwhile go to ``ctx``'s elicitor or
        approval handler (declined without ``ctx``)."""
        if timeout is not None and not (
            isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout >= 0
        ):
            raise ValueError(f"timeout must be a number of seconds >= 0 or None, not {timeout!r}")
        return self.server._task_result(self.id, self.tool_name, timeout, ctx)

    def cancel(self) -> None:
        """Ask the server to cancel the task (``tasks/cancel``); an error from the
        server (e.g. the task already ended) is raised as ``MCPError``."""
        self.server._task_cancel(self.id)


def task_support(entry: types.Tool) -> str:
    """``"required"``, ``"optional"`` or ``"forbidden"``: whether the tool's
    definition says it runs as a task — ``execution.taskSupport`` (2025-11-25), or,
    on 2026-07-28, whose ``Tool`` has no ``execution``, the extension's entry in its
    ``_meta`` (``{"io.modelcontextprotocol/tasks": {"taskSupport": ...}}``, as
    ``nous-tools serve`` writes it)."""
    execution = entry.execution
    support = execution.task_support if execution is not None else None
    if support is None:
        meta = entry.meta
        declared = meta.get(EXTENSION) if isinstance(meta, dict) else None
        if isinstance(declared, dict):
            support = declared.get("taskSupport")
    return support if support in ("required", "optional") else "forbidden"


def server_runs_tool_tasks(client: Client) -> bool:
    """True when the server says it creates tasks for ``tools/call``."""
    capabilities = client.server_capabilities
    tasks = getattr(capabilities, "tasks", None)
    requests = getattr(tasks, "requests", None) if tasks is not None else None
    tools = getattr(requests, "tools", None) if requests is not None else None
    if tools is not None and getattr(tools, "call", None) is not None:
        return True
    extensions = getattr(capabilities, "extensions", None) or {}
    return "io.modelcontextprotocol/tasks" in extensions


def poll_interval(status: TaskStatus, left: float | None) -> float | None:
    """Seconds to wait before the next ``tasks/get``: the server's interval (at least
    :data:`MIN_POLL`, never shortened: a task is never polled faster than its server
    asks), else :data:`DEFAULT_POLL`; ``None`` when the call's ``left`` seconds end
    before then (no look is due: the call ends at its deadline, without one more)."""
    wait = status.poll_interval if status.poll_interval is not None else DEFAULT_POLL
    wait = max(wait, MIN_POLL)
    if left is not None and left < wait:
        return None
    return wait


@attrs.define(slots=True)
class Creation:
    """The task a call is creating, shared by the caller's thread and the event
    loop: whichever of the two learns that the call gave up with a task created
    (the caller at its deadline, the loop when the id comes late) cancels it, and
    only that one."""

    task_id: str | None = None
    abandoned: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def created(self, task_id: str) -> bool:
        """The server created ``task_id``; True when the call already gave up (the
        caller of this cancels the task)."""
        with self._lock:
            self.task_id = task_id
            return self.abandoned

    def abandon(self) -> str | None:
        """The call gives up; the id of the task to cancel now (None: not created
        yet, so whoever learns its id later cancels it)."""
        with self._lock:
            self.abandoned = True
            return self.task_id


def parse_task(raw: t.Any, *, expected_id: str | None = None) -> TaskStatus:
    """A task from a ``tools/call`` or ``tasks/get`` answer, in either wire shape;
    ``ValueError`` (saying what is wrong) for anything else."""
    if not isinstance(raw, dict):
        raise ValueError(f"a task answer must be an object, not {type(raw).__name__}")
    nested = raw.get("task")
    body: dict[str, t.Any] = nested if isinstance(nested, dict) else raw
    task_id = body.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise ValueError("the answer names no task (no taskId)")
    if expected_id is not None and task_id != expected_id:
        raise ValueError(f"asked about task {expected_id!r}, the server answered {task_id!r}")
    status = body.get("status")
    if status not in STATUSES:
        raise ValueError(f"task {task_id!r} has an unknown status {status!r}")
    message = body.get("statusMessage")
    interval: float | None = None
    millis = body.get("pollIntervalMs", body.get("pollInterval"))
    if isinstance(millis, (int, float)) and not isinstance(millis, bool) and millis > 0:
        interval = float(millis) / 1000.0
    result = error = None
    inline = body.get("result")
    if status in TERMINAL and isinstance(inline, dict):
        result = types.CallToolResult.model_validate(inline, by_name=False)
    failure = body.get("error")
    if status in TERMINAL and isinstance(failure, dict):
        error = types.ErrorData.model_validate(failure, by_name=False)
    asked = body.get("inputRequests")
    if asked is not None and not isinstance(asked, dict):
        raise ValueError(f"task {task_id!r}: inputRequests must be an object")
    return TaskStatus(
        task_id=task_id,
        status=t.cast(str, status),
        message=message if isinstance(message, str) else None,
        poll_interval=interval,
        result=result,
        error=error,
        input_requests=asked or None,
    )


async def _request(
    client: Client, method: str, params: dict[str, t.Any], timeout: float | None
) -> t.Any:
    opts: dict[str, t.Any] = {}
    session = client.session
    data: dict[str, t.Any] = {"method": method, "params": dict(params)}
    # What the SDK adds to each request of the negotiated revision (2026-07-28: the
    # protocol version, client info and capabilities in _meta, the Mcp-* headers).
    session._stamp(data, t.cast(t.Any, opts))
    meta = data["params"].get("_meta")
    key = types.CLIENT_CAPABILITIES_META_KEY
    if isinstance(meta, dict) and isinstance(meta.get(key), dict):
        declared = dict(meta[key])
        declared["extensions"] = {**(declared.get("extensions") or {}), EXTENSION: {}}
        meta[key] = declared
    if timeout is not None:
        opts["timeout"] = max(timeout, 0.001)
    return await session._dispatcher.send_raw_request(method, data["params"], t.cast(t.Any, opts))


async def create(
    client: Client,
    name: str,
    arguments: dict[str, t.Any],
    *,
    ttl: float,
    timeout: float | None,
) -> TaskStatus | types.CallToolResult:
    """``tools/call`` asking for a task: the task created, or the tool's result when
    the server answered at once (a tool that may run as a task need not)."""
    params = {"name": name, "arguments": arguments, "task": {"ttl": int(ttl * 1000)}}
    raw = await _request(client, "tools/call", params, timeout)
    if isinstance(raw, dict) and ("task" in raw or raw.get("resultType") == "task"):
        return parse_task(raw)
    return types.CallToolResult.model_validate(raw, by_name=False)


async def create_for(
    client: Client,
    creation: Creation,
    name: str,
    arguments: dict[str, t.Any],
    *,
    ttl: float,
    timeout: float | None,
) -> TaskStatus | types.CallToolResult:
    """:func:`create`, shielded: cancelling this leaves the request going (bounded by
    ``timeout``), and a task whose id comes after the caller gave up
    (``creation.abandon()``) is cancelled then (:func:`cancel_late`)."""
    creating = asyncio.ensure_future(create(client, name, arguments, ttl=ttl, timeout=timeout))
    creating.add_done_callback(functools.partial(cancel_late, client, creation))
    return await asyncio.shield(creating)


async def get(client: Client, task_id: str, *, timeout: float | None) -> TaskStatus:
    """``tasks/get``: the task's status now."""
    raw = await _request(client, "tasks/get", {"taskId": task_id}, timeout)
    return parse_task(raw, expected_id=task_id)


async def result(client: Client, task_id: str, *, timeout: float | None) -> types.CallToolResult:
    """``tasks/result``: the tool's result (the server holds the answer until the
    task ended, asking the client for input meanwhile)."""
    raw = await _request(client, "tasks/result", {"taskId": task_id}, timeout)
    return types.CallToolResult.model_validate(raw, by_name=False)


async def cancel(client: Client, task_id: str, *, timeout: float | None) -> None:
    """``tasks/cancel``."""
    await _request(client, "tasks/cancel", {"taskId": task_id}, timeout)


#: The ``tasks/cancel`` requests sent in the background (kept from the collector).
_cancelling: set[asyncio.Future[None]] = set()
_log = logging.getLogger("nous_tools")


def cancel_late(
    client: Client, creation: Creation, creating: asyncio.Future[TaskStatus | types.CallToolResult]
) -> None:
    """``creating``'s done callback, on the event loop: a task created for a call
    that already gave up is cancelled (``tasks/cancel`` in the background, best
    effort, bounded by :data:`CANCEL_WAIT`)."""
    if creating.cancelled() or creating.exception() is not None:
        return
    first = creating.result()
    if not isinstance(first, TaskStatus) or not creation.created(first.task_id) or first.done:
        return

    async def cancelling() -> None:
        try:
            await cancel(client, first.task_id, timeout=CANCEL_WAIT)
        except Exception as exc:
            _log.warning(
                "MCP task %s, created too late, could not be cancelled (%s)", first.task_id, exc
            )

    sent = asyncio.ensure_future(cancelling())
    _cancelling.add(sent)
    sent.add_done_callback(_cancelling.discard)


async def answer_inputs(client: Client, asked: c.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The answers to a task's ``inputRequests`` (SEP-2663), each asked through the
    client's elicitation / sampling / roots callbacks, as the SDK's own input rounds
    ask them; ``MCPError`` when a callback refuses."""
    from mcp.client.session import ClientRequestContext
    from mcp.shared.exceptions import MCPError

    parsed = types.InputRequiredResult.model_validate(
        {"resultType": "input_required", "inputRequests": dict(asked)}, by_name=False
    )
    session = client.session
    answers: dict[str, t.Any] = {}
    for key, request in (parsed.input_requests or {}).items():
        params = request.params
        context = ClientRequestContext(
            session=session, request_id=key, meta=params.meta if params is not None else None
        )
        answer = await session.dispatch_input_request(context, request)
        if isinstance(answer, types.ErrorData):
            raise MCPError.from_error_data(answer)
        answers[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    return answers


async def update(
    client: Client, task_id: str, responses: dict[str, t.Any], *, timeout: float | None
) -> None:
    """``tasks/update``: the answers to the task's questions (SEP-2663)."""
    await _request(
        client, "tasks/update", {"taskId": task_id, "inputResponses": responses}, timeout
    )
