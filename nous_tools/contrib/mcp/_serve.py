"""Serve a :class:`~nous_tools.Registry` as an MCP server (stdio or Streamable HTTP).

Every ``tools/call`` goes through ``registry.execute`` (advice, approval,
validation, deadlines, retries, signals) in a worker thread, so a slow tool never
blocks the server's event loop. See the package docstring for the rules.
"""

from __future__ import annotations

import collections.abc as c
import contextlib
import functools
import json
import logging
import secrets
import socket
import threading
import time
import typing as t
import warnings

import anyio
import anyio.to_thread
import attrs
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import is_version_at_least

from nous_tools import content as _content
from nous_tools._engine._admission import DEFAULT_MAX_RESULT_CHARS, result_limit
from nous_tools.approval import NeedsApproval
from nous_tools.asking import Question
from nous_tools.contrib.mcp import _reports, _tasks
from nous_tools.contrib.mcp._peer import (
    InputRequired,
    Peer,
    RoundState,
    StateRejected,
    answer_of,
    can_elicit,
    check_capabilities,
    request_of,
)
from nous_tools.errors import (
    CallInProgress,
    JournalConflict,
    JournalUnavailable,
    OutcomeUnknown,
    ToolCancelled,
    ToolError,
)
from nous_tools.providers._tool_calls import clip_parts, format_tool_result
from nous_tools.registry import Registry
from nous_tools.results import Err, Ok
from nous_tools.run_context import RunContext
from nous_tools.schema import _output as _structured
from nous_tools.tool import Tool

__all__ = [
    "RunningServer",
    "build_server",
    "close_sse_stream",
    "serve",
    "serve_http_in_thread",
    "tool_title",
]

_log = logging.getLogger("nous_tools")

#: Key of the approval question in ``InputRequiredResult.input_requests`` (2026-07-28+).
APPROVAL_KEY = "nous_tools.approval"

# First protocol revision whose tools/call asks through InputRequiredResult
# instead of a server-to-client elicitation/create request.
_INPUT_REQUIRED_VERSION = "2026-07-28"

_EMPTY_SCHEMA: dict[str, t.Any] = {"type": "object", "properties": {}}

CtxFactory = c.Callable[[], "RunContext[t.Any] | None"]


# -- cancellation -------------------------------------------------------------------


class _CancelLink:
    """The client's cancellation of one served call, linked to every attempt's
    ``ctx.cancelled``.

    The executor gives each timed attempt a fresh ``cancelled`` event (set at the
    attempt's deadline) on a context it derives from ours with ``attrs.evolve``.
    A :class:`_ServedContext` registers each such event here as it is made, so
    :meth:`cancel` sets the events of the running attempt (and of any nested call
    made with that context), exactly as the deadline would. An attempt that starts
    after the cancellation sees its event set at once.
    """

    __slots__ = ("_events", "_lock", "cancelled")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[threading.Event] = []
        #: The call's own event: set when the client cancels.
        self.cancelled = threading.Event()

    def attach(self, event: threading.Event) -> None:
        with self._lock:
            if self.cancelled.is_set():
                event.set()
                return
            self._events.append(event)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled.set()
            events, self._events = self._events, []
        for event in events:
            event.set()

    def __reduce__(self) -> tuple[t.Any, ...]:
        # A process-isolated attempt pickles its context: in the child there is
        # nothing to cancel (the child is killed at its deadline).
        return (_CancelLink, ())


@attrs.frozen(slots=True, eq=False)
class _ServedContext(RunContext[t.Any]):
    """A :class:`RunContext` whose attempts learn of the client's cancellation, and
    whose questions go to the client: to its ``peer``, or in a task to the task
    (``task_asker``)."""

    cancel_link: _CancelLink | None = attrs.field(default=None, repr=False)
    peer: Peer | None = attrs.field(default=None, repr=False)
    task_asker: _TaskAsker | None = attrs.field(default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.cancel_link is not None:
            self.cancel_link.attach(self.cancelled)

    def _pose(self, questions: list[tuple[str | None, Question]]) -> list[t.Any]:
        if self.task_asker is not None:
            return self.task_asker.pose(questions)
        if self.peer is not None:
            return self.peer.pose(questions)
        return super()._pose(questions)


def _served_context(
    base: RunContext[t.Any] | None, link: _CancelLink, peer: Peer
) -> _ServedContext:
    base = base if base is not None else RunContext()
    fields = {a.alias or a.name: getattr(base, a.name) for a in attrs.fields(RunContext) if a.init}
    fields["cancelled"] = link.cancelled
    fields["sampler"] = peer.sample
    fields["elicitor"] = peer.elicit
    return _ServedContext(**fields, cancel_link=link, peer=peer)


def close_sse_stream(ctx: RunContext[t.Any]) -> bool:
    """From inside a tool served over Streamable HTTP: close this call's SSE stream so
    the client reconnects (after the stream's ``retry`` interval, with
    ``Last-Event-ID``) and receives the rest, the result included (SEP-1699 polling).
    A long call can free the connection this way. Returns False where there is no
    such stream (stdio, an older protocol, a call not served over MCP)."""
    peer = getattr(ctx, "peer", None)
    return peer.close_sse_stream() if isinstance(peer, Peer) else False


# -- describing tools -----------------------------------------------------------------


def tool_title(name: str) -> str:
    """A human-readable title made from a tool name: ``"get_weather"`` -> ``"Get weather"``.

    >>> tool_title("get_weather"), tool_title("deleteFile"), tool_title("x")
    ('Get weather', 'Delete file', 'X')
    """
    words: list[str] = []
    for chunk in name.replace("-", " ").replace("_", " ").replace(".", " ").split():
        start = 0
        for i in range(1, len(chunk)):
            if chunk[i].isupper() and chunk[i - 1].islower():
                words.append(chunk[start:i])
                start = i
        words.append(chunk[start:])
    text = " ".join(word.lower() for word in words) or name
    return text[:1].upper() + text[1:]


def describe_tool(tool: Tool, *, tasks: bool = True) -> types.Tool:
    """The MCP ``Tool`` entry of ``tool``: schema, description, title and annotations,
    and (``tasks``: for 2026-07-28+ clients), unless it is ``task="never"``, its task
    support under ``_meta["io.modelcontextprotocol/tasks"]["taskSupport"]``. Task
    creation is the server's call in the Tasks extension (SEP-2663), which defines no
    field of its own on a tool (the 2026-07-28 ``Tool`` has no ``execution``): the
    entry says what a client may expect."""
    schema = dict(tool.parameters) if tool.parameters else dict(_EMPTY_SCHEMA)
    schema.setdefault("type", "object")
    title = tool_title(tool.name)
    support = tool.task_support
    return types.Tool(
        name=tool.name,
        _meta=None
        if support == "never" or not tasks
        else {_tasks.TASKS_EXTENSION: {"taskSupport": support}},
        title=title,
        description=tool.description or None,
        input_schema=schema,
        output_schema=_structured.output_schema(tool),
        annotations=types.ToolAnnotations(
            title=title,
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
        ),
    )


# -- results --------------------------------------------------------------------------


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def _to_call_result(
    result: object,
    name: str,
    modern: bool,
    max_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
    tool: Tool | None = None,
) -> types.CallToolResult:
    """``Ok`` -> its content blocks (images, audio, resources: see
    :mod:`nous_tools.content`), or its text and its value as structured content:
    checked against the tool's output schema when it has one, else the JSON the text
    holds (values JSON cannot hold directly, such as datetimes, Decimals, sets and
    bytes, as the text writes them). Protocols before 2026-07-28 allow only an object
    there, so a number or a list goes as text alone. ``Err`` -> ``isError`` with the
    model-facing text. Texts at most ``max_chars`` long (the tool's
    ``max_result_chars``): a longer text keeps its head and tail, and a longer value
    is not sent as structured content."""
    if isinstance(result, Ok):
        value = result.value
        if tool is not None:
            checked = _structured.structured_value(tool, value)
            if isinstance(checked, Err):
                return _error_result(format_tool_result(checked, name, max_chars=max_chars))
            if checked is not None:
                return types.CallToolResult(
                    content=[
                        types.TextContent(
                            text=format_tool_result(result, name, max_chars=max_chars)
                        )
                    ],
                    structured_content=checked.value,
                )
        parts = _content.as_content(value)
        if parts is not None:
            return types.CallToolResult(content=_reports.blocks_of(clip_parts(parts, max_chars)))
        text = format_tool_result(result, name, max_chars=max_chars)
        structured: t.Any = None
        if not isinstance(value, str):
            with contextlib.suppress(ValueError, RecursionError):
                structured = json.loads(text)  # a clipped text is not JSON: none
            if not modern and not isinstance(structured, dict):
                structured = None
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=structured
        )
    if isinstance(result, (Err, NeedsApproval)):
        return _error_result(format_tool_result(result, name, max_chars=max_chars))
    return _error_result(f"Error: tool '{name}' returned an unexpected result")


def _missing_capability(
    name: str, missing: c.Mapping[str, dict[str, t.Any]], why: str = "asks the client"
) -> MCPError:
    """The ``-32021`` error of a call that needed client capabilities the client did
    not declare (sent with HTTP 400); the tool did not run to its end."""
    required = types.ClientCapabilities.model_validate(dict(missing))
    data = types.MissingRequiredClientCapabilityErrorData(required_capabilities=required)
    return MCPError(
        code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=(
            f"Tool '{name}' {why}, which needs the client capabilities "
            f"{', '.join(sorted(missing))}; the client did not declare them, and the "
            "call did not complete"
        ),
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )


# -- approval -------------------------------------------------------------------------


def _approval_message(name: str, arguments: c.Mapping[str, t.Any]) -> str:
    shown = json.dumps(arguments, sort_keys=True, default=repr, ensure_ascii=False)
    if len(shown) > 2000:
        shown = shown[:2000] + " ..."
    return f"Allow the tool '{name}' to run with these arguments?\n{shown}"


def _needs_approval_error(name: str) -> types.CallToolResult:
    return _error_result(
        f"Error: tool '{name}' requires approval, and this MCP client cannot be asked "
        "(it did not declare the elicitation capability); the tool did not run"
    )


def _answered(name: str, action: str) -> types.CallToolResult:
    if action == "decline":
        return _error_result(f"Error: tool '{name}' was rejected by the client; it did not run")
    return _error_result(f"Error: the approval of tool '{name}' was cancelled; it did not run")


class _TaskParams(types.RequestParams):
    """``tasks/get`` and ``tasks/cancel``: ``{"taskId": ...}``."""

    task_id: str


class _TaskUpdateParams(types.RequestParams):
    """``tasks/update``: ``{"taskId": ..., "inputResponses": {...}}``."""

    task_id: str
    input_responses: dict[str, t.Any] | None = None


#: Errors that mean the call's outcome is not the tool's (a task that ends with one
#: is ``failed``, not ``completed``).
_PROTOCOL_ERRORS = (OutcomeUnknown, JournalUnavailable, JournalConflict, CallInProgress)


def _declares_tasks(ctx: t.Any) -> bool:
    """Whether this request's client declared the Tasks extension (at the session,
    or on this request's ``_meta`` client capabilities)."""
    capabilities = getattr(ctx.session, "client_capabilities", None)
    extensions = getattr(capabilities, "extensions", None) or {}
    return _tasks.TASKS_EXTENSION in extensions


#: SEP-2243 HeaderMismatch.
_HEADER_MISMATCH = -32020


def _check_task_header(ctx: t.Any, task_id: str) -> None:
    """SEP-2663 routing headers: over HTTP a ``tasks/*`` request's ``Mcp-Name``, when
    given, names its ``params.taskId`` (else ``-32020``, HeaderMismatch)."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    named = headers.get("mcp-name") if headers is not None else None
    if named is not None and named.strip() != task_id:
        raise MCPError(
            code=_HEADER_MISMATCH,
            message="Mcp-Name header does not match the request body's 'taskId' parameter",
        )


def _task_capability_error(method: str) -> MCPError:
    required = types.ClientCapabilities.model_validate({"extensions": {_tasks.TASKS_EXTENSION: {}}})
    data = types.MissingRequiredClientCapabilityErrorData(required_capabilities=required)
    return MCPError(
        code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"{method} needs the client extension {_tasks.TASKS_EXTENSION}, "
        "which the client did not declare",
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )


class _TaskAsker:
    """The questions of a call run as a task: they wait in the task
    (``input_required``, under ``inputRequests``, by the keys the tool gave) for the
    client's ``tasks/update``."""

    def __init__(
        self,
        task: _tasks.Task,
        capabilities: t.Any,
        link: _CancelLink,
        first: Peer | None = None,
    ) -> None:
        self._task = task
        self._capabilities = capabilities
        self._link = link
        #: ``Tool.ask_before_task``: the call's peer, which asks the first questions in
        #: multi-round-trip rounds; set once they are answered (or fail), when the
        #: request hands the call over to the task.
        self._first = first
        self.handed_off = threading.Event()

    def pose(self, questions: list[tuple[str | None, Question]]) -> list[t.Any]:
        first, self._first = self._first, None
        if first is not None:
            try:
                return first.pose(questions)
            except InputRequired:  # the round ends asking them: no task yet
                raise
            except BaseException:
                self.handed_off.set()
                raise
            finally:
                if not first.pending:
                    self.handed_off.set()
        check_capabilities((q for _, q in questions), self._capabilities)
        wires = [
            (key, request_of(q).model_dump(by_alias=True, mode="json", exclude_none=True))
            for key, q in questions
        ]
        answers = self._task.ask_all(wires, self._link.cancelled)
        return [answer_of(q, a) for (_, q), a in zip(questions, answers, strict=True)]

    def sample(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        system: str | None = None,
        temperature: float | None = None,
    ) -> str:
        question = Question.sample(
            messages, max_tokens=max_tokens, system=system, temperature=temperature
        )
        text: str = self.pose([(None, question)])[0]
        return text

    def elicit(self, message: str, schema: c.Mapping[str, t.Any]) -> t.Any:
        return self.pose([(None, Question.elicit(message, schema))])[0]


class _Serving:
    """The handlers of one served registry."""

    def __init__(
        self,
        registry: Registry,
        ctx_factory: CtxFactory | None,
        secret: bytes,
    ) -> None:
        self.registry = registry
        self.ctx_factory = ctx_factory
        self.secret = secret
        self.tasks = _tasks.Tasks(registry.effective_journal())

    async def list_tools(
        self, ctx: t.Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        version = getattr(ctx, "protocol_version", None)
        modern = isinstance(version, str) and is_version_at_least(version, _INPUT_REQUIRED_VERSION)
        tools = [
            describe_tool(tool, tasks=modern)
            for tool in self.registry.all()
            if tool.approval != "deny"
        ]
        return types.ListToolsResult(tools=tools)

    def input_schema(self, name: str) -> dict[str, t.Any] | None:
        """The listed input schema of the tool ``name`` (None for an unknown or
        unlisted one): on 2026-07-28 over HTTP the SDK checks a call's ``Mcp-Param-*``
        headers against its ``x-mcp-header`` parameters before the call runs."""
        tool = self.registry.lookup(name)
        if tool is None or tool.approval == "deny":
            return None
        return describe_tool(tool).input_schema

    async def call_tool(
        self, ctx: t.Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, t.Any]:
        name = params.name
        arguments: dict[str, t.Any] = dict(params.arguments or {})
        tool = self.registry.lookup(name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")
        version = getattr(ctx, "protocol_version", None)
        modern = isinstance(version, str) and is_version_at_least(version, _INPUT_REQUIRED_VERSION)
        support = tool.task_support
        as_task = modern and support != "never" and _declares_tasks(ctx)
        if modern and support == "required" and not as_task:
            raise _task_capability_error(f"tools/call of tool '{name}' (task='required')")
        try:
            base = self.ctx_factory() if self.ctx_factory is not None else None
            if base is not None and not isinstance(base, RunContext):
                raise TypeError(f"ctx_factory returned {type(base).__name__}, not a RunContext")
        except Exception as exc:
            _log.error("ctx_factory failed for tool '%s'", name, exc_info=True)
            return _to_call_result(
                Err(ToolError(f"the server could not make a context: {exc}", tool_name=name)),
                name,
                modern,
            )
        state = None
        if modern and params.request_state is not None:
            try:
                state = RoundState.read(params.request_state, self.secret, name, arguments)
            except StateRejected as exc:  # SEP-2322: a server MUST reject it
                raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        link = _CancelLink()
        peer = Peer(
            ctx,
            link,
            modern=modern,
            state=state,
            responses=params.input_responses,
            stated=params.request_state is not None,
        )
        run_ctx = _served_context(base, link, peer)
        # What the tool reports goes to this client (see _reports), from the thread
        # that runs the call, which sees this context.
        served = _reports.served(
            _reports.ServedCall(ctx.session, ctx.request_id, _reports.levels_for(ctx.session))
        )
        if as_task:  # a task reports nothing to the request that created it
            _reports.reset(served)
            return await self._call_as_task(ctx, params, tool, arguments, run_ctx, link, peer)
        try:
            if peer.state.approved and tool.approval == "ask":
                # An earlier round's approval of this very call (the state is signed
                # and bound to the tool name and arguments).
                result = await self._run(
                    link, self.registry.execute_approved, tool, arguments, run_ctx
                )
            else:
                result = await self._run(link, self.registry.execute, name, arguments, run_ctx)
                if isinstance(result, NeedsApproval):
                    asked = await self._approve(ctx, params, result, peer, arguments)
                    if asked is not None:
                        return asked
                    peer.state.approved = True
                    result = await self._run(link, self.registry.execute_approved, result, run_ctx)
        finally:
            _reports.reset(served)
        if peer.pending:  # 2026-07-28: the tool asked a question this round cannot answer
            return types.InputRequiredResult(
                input_requests=peer.pending,
                request_state=peer.state.seal(self.secret, name, arguments),
            )
        if modern and peer.missing and isinstance(result, Err):
            # 2026-07-28: the call failed asking what the client did not declare it can
            # answer: the client learns which capability the call needs (SEP-2575).
            raise _missing_capability(name, peer.missing)
        limit = result_limit(tool, self.registry.executor.max_result_chars)
        return _to_call_result(result, name, modern, limit, tool)

    # -- tasks ------------------------------------------------------------------------

    async def _call_as_task(
        self,
        ctx: t.Any,
        params: types.CallToolRequestParams,
        tool: Tool,
        arguments: dict[str, t.Any],
        run_ctx: _ServedContext,
        link: _CancelLink,
        peer: Peer,
    ) -> dict[str, t.Any] | types.CallToolResult | types.InputRequiredResult:
        """Start ``tool`` as a task; its ``CreateTaskResult``. An ``ask`` tool's approval
        waits in the task (``input_required``, answered by ``tasks/update``). A
        ``Tool.ask_before_task`` tool is approved first, in rounds of its own
        (``InputRequiredResult``), and its first questions come in rounds too: it runs
        in the task's thread from the start of each round, and the round whose answers
        get it past them creates the task."""
        name = tool.name
        approved = tool.approval == "ask" and peer.state.approved
        # An ask tool's approval is its first question: in the task, answered by
        # tasks/update; with ask_before_task, in rounds before the task is created.
        approve_in_task = tool.approval == "ask" and not approved and not tool.ask_before_task
        if approve_in_task and not can_elicit(getattr(ctx.session, "client_capabilities", None)):
            raise _missing_capability(
                name, {"elicitation": {"form": {}}}, "requires approval, asked by form"
            )
        if tool.approval == "ask" and not approved and not approve_in_task:
            pending = await self._run(link, self.registry.execute, name, arguments, run_ctx)
            if not isinstance(pending, NeedsApproval):  # refused before it could run
                limit = result_limit(tool, self.registry.executor.max_result_chars)
                return _to_call_result(pending, name, True, limit, tool)
            asked = await self._approve(ctx, params, pending, peer, arguments)
            if asked is not None:
                return asked
            approved = True
            # carried by the rounds of the first questions (Tool.ask_before_task)
            peer.state.approved, peer.state.asking = True, None
        identity = _tasks.identity_of(ctx)
        task_id = self.tasks.new_id()
        first = tool.ask_before_task
        # A task whose first questions come in rounds is not journaled: a round that
        # ends asking is no outcome of the task's call.
        call_id = None if first else task_id
        if self.tasks.journal is not None and not first:
            run_ctx = attrs.evolve(run_ctx, run_id=_tasks.run_id_of(identity))
        now = time.time()
        task = _tasks.Task(task_id, identity, name, now, link.cancel, updated=now)
        asker = _TaskAsker(
            task,
            getattr(ctx.session, "client_capabilities", None),
            link,
            first=peer if first else None,
        )
        run_ctx = attrs.evolve(
            run_ctx, sampler=asker.sample, elicitor=asker.elicit, task_asker=asker
        )
        if not first:
            self.tasks.add(task)

        def work() -> None:
            result: object
            try:
                if approved:
                    result = self.registry.execute_approved(
                        tool, arguments, run_ctx, call_id=call_id
                    )
                else:
                    result = self.registry.execute(name, arguments, run_ctx, call_id=call_id)
                if isinstance(result, NeedsApproval):
                    result = self._approve_in_task(task, link, result, run_ctx, call_id)
                    if result is None:  # declined, or the task was cancelled meanwhile
                        return
                if not peer.pending:  # else the round ended asking: there is no task
                    self._settle(task, tool, result)
            except BaseException as exc:  # never raised by execute: a bug, said as failed
                _log.error("MCP task %s of tool '%s' failed", task_id, name, exc_info=True)
                self.tasks.settle(task, "failed", error=_tasks.failed_error(repr(exc)))
            finally:
                asker.handed_off.set()

        threading.Thread(target=work, name=f"nous-tools-mcp-task-{name}", daemon=True).start()
        if first:
            # The call's first questions: the request waits until they are answered
            # (the task goes on from there) or the round ends asking them.
            await self._run(link, asker.handed_off.wait)
            if peer.pending:
                return types.InputRequiredResult(
                    input_requests=peer.pending,
                    request_state=peer.state.seal(self.secret, name, arguments),
                )
            self.tasks.add(task)
        else:
            await anyio.to_thread.run_sync(self.tasks.wait_recorded, task)  # for the replicas
            # A short task is answered as ended: one tasks/get reads it, no poll interval.
            try:
                await anyio.to_thread.run_sync(
                    task.wait_working, _tasks.SETTLE_MS / 1000, abandon_on_cancel=True
                )
            except anyio.get_cancelled_exc_class():
                self.tasks.cancel(task_id, identity)  # its id never reaches the client
                raise
        return {"resultType": "task", **task.envelope()}

    def _approve_in_task(
        self,
        task: _tasks.Task,
        link: _CancelLink,
        pending: NeedsApproval,
        run_ctx: RunContext[t.Any],
        call_id: str | None,
    ) -> object | None:
        """From the task's thread: ask the client to approve ``pending`` (the task is
        ``input_required`` with it under ``nous_tools.approval``, answered by
        ``tasks/update``); the approved call's result, or None when the task was
        settled here (declined) or cancelled meanwhile."""
        name = pending.tool.name
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=_approval_message(name, pending.arguments),
                requested_schema=dict(_EMPTY_SCHEMA),
            )
        )
        wire = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            [raw] = task.ask_all([(APPROVAL_KEY, wire)], link.cancelled)
        except ToolCancelled:
            return None
        try:
            action = types.ElicitResult.model_validate(raw).action
        except ValueError:  # not an answer: fail closed
            action = "decline"
        if action == "accept":
            return self.registry.execute_approved(pending, run_ctx, call_id=call_id)
        body = _answered(name, action).model_dump(by_alias=True, mode="json", exclude_none=True)
        self.tasks.settle(task, "completed", body)
        return None

    def _settle(self, task: _tasks.Task, tool: Tool, result: object) -> None:
        status, body, error = self._outcome(tool, result)
        self.tasks.settle(task, status, body, error)

    def _outcome(
        self, tool: Tool, result: object
    ) -> tuple[_tasks.Status, dict[str, t.Any] | None, dict[str, t.Any] | None]:
        """A task's terminal state from its call's result: ``failed`` (with a
        JSON-RPC error) for an outcome that is not the tool's (unknown, the journal
        unavailable, a protocol error the tool raised), else ``completed``."""
        if isinstance(result, Err):
            error = result.unwrap_err()
            cause = getattr(error, "original_error", None)
            if isinstance(cause, MCPError):
                return "failed", None, _tasks.failed_error(cause.error.message, cause.error.code)
            if isinstance(error, _PROTOCOL_ERRORS):
                return "failed", None, _tasks.failed_error(str(error))
        limit = result_limit(tool, self.registry.executor.max_result_chars)
        call_result = _to_call_result(result, tool.name, True, limit, tool)
        body = call_result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return "completed", body, None

    def _journaled(self, task_id: str, identity: str) -> dict[str, t.Any] | None:
        """``tasks/get`` of a task this process does not hold, from the journal:
        cancelled (asked to stop through any replica), completed (its stored
        outcome), failed (outcome unknown: the process that ran it died; it is never
        run again), input_required (another live process runs it, and it waits on
        the questions that process recorded: an ``ask`` tool's approval comes before
        its call is journaled) or working."""
        record = self.tasks.from_journal(task_id, identity)
        asked = None
        if record is None or (record.state == "started" and not record.unknown()):
            asked = self.tasks.questions_in_journal(task_id, identity)
        cancelled = self.tasks.cancelled_in_journal(task_id, identity)
        if record is None and asked is None and not cancelled:
            return None
        now = time.time()  # a task cancelled before its call started has no record
        created = record.started_at if record is not None else asked[1] if asked else now
        updated = record.completed_at or record.started_at if record is not None else created
        if asked is not None:
            updated = max(updated, asked[1])
        answer: dict[str, t.Any] = {
            "taskId": task_id,
            "createdAt": _tasks.iso(created),
            "lastUpdatedAt": _tasks.iso(updated),
            "ttlMs": _tasks.TTL_MS,
            "pollIntervalMs": _tasks.POLL_MS,
            "resultType": "complete",
        }
        if asked is not None and not cancelled:
            answer["status"] = "input_required"
            answer["inputRequests"] = asked[0]
            return answer
        if cancelled or record is None:
            answer["status"] = "cancelled"
            return answer
        tool = self.registry.lookup(record.tool)
        if record.state == "completed" and tool is None:
            answer["status"] = "failed"
            answer["error"] = _tasks.failed_error(
                f"the task's tool '{record.tool}' is no longer served: its result cannot be read"
            )
        elif record.state == "completed" and tool is not None:
            try:
                result = record.result()
            except ValueError as exc:
                answer.update(status="failed", error=_tasks.failed_error(f"unreadable: {exc}"))
                return answer
            status, body, error = self._outcome(tool, result)
            answer["status"] = status
            if body is not None:
                answer["result"] = body
            if error is not None:
                answer["error"] = error
        elif record.unknown():
            answer["status"] = "failed"
            answer["error"] = _tasks.failed_error(
                f"outcome unknown: the task of tool '{record.tool}' started and the process "
                "running it stopped before recording its outcome; it was not run again"
            )
        else:
            answer["status"] = "working"
        return answer

    async def get_task(self, ctx: t.Any, params: _TaskParams) -> dict[str, t.Any]:
        if not _declares_tasks(ctx):
            raise _task_capability_error("tasks/get")
        _check_task_header(ctx, params.task_id)
        identity = _tasks.identity_of(ctx)
        task = self.tasks.mine(params.task_id, identity)
        if task is not None:
            return task.detailed()
        try:
            answer = self._journaled(params.task_id, identity)
        except _tasks.JournalUnreadable as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=str(exc)) from None
        if answer is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown task: {params.task_id}")
        return answer

    async def cancel_task(self, ctx: t.Any, params: _TaskParams) -> dict[str, t.Any]:
        if not _declares_tasks(ctx):
            raise _task_capability_error("tasks/cancel")
        _check_task_header(ctx, params.task_id)
        try:
            known = self.tasks.cancel(params.task_id, _tasks.identity_of(ctx))
        except _tasks.JournalUnreadable as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=str(exc)) from None
        if not known:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown task: {params.task_id}")
        return {"resultType": "complete"}

    async def update_task(self, ctx: t.Any, params: _TaskUpdateParams) -> dict[str, t.Any]:
        if not _declares_tasks(ctx):
            raise _task_capability_error("tasks/update")
        _check_task_header(ctx, params.task_id)
        identity = _tasks.identity_of(ctx)
        task = self.tasks.mine(params.task_id, identity)
        responses = params.input_responses or {}
        if task is not None:  # responses to questions it does not wait on are ignored
            task.answer(responses)
            return {"resultType": "complete"}
        try:
            self._update_elsewhere(params.task_id, identity, responses)
        except _tasks.JournalUnreadable as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=str(exc)) from None
        return {"resultType": "complete"}

    def _update_elsewhere(
        self, task_id: str, identity: str, responses: c.Mapping[str, t.Any]
    ) -> None:
        """``tasks/update`` of a task this process does not hold: the responses are
        recorded in the journal for the replica running it (those to questions it
        does not wait on are ignored). ``-32602`` for a task the journal does not
        know; one another live replica runs, on a journal that cannot carry answers,
        is refused (never acknowledged and dropped)."""
        record = self.tasks.from_journal(task_id, identity)
        running = record is not None and record.state == "started" and not record.unknown()
        if self.tasks.asks_across:
            if (
                record is None
                and self.tasks.questions_in_journal(task_id, identity) is None
                and not self.tasks.cancelled_in_journal(task_id, identity)  # before it started
            ):
                raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown task: {task_id}")
            self.tasks.answer_in_journal(task_id, identity, responses)
            return
        if record is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown task: {task_id}")
        if running:
            raise MCPError(
                code=types.INVALID_REQUEST,
                message=(
                    f"task {task_id} runs in another process, and this server's journal "
                    f"({type(self.tasks.journal).__name__}) cannot carry answers to it: "
                    "send tasks/update to the process running the task"
                ),
            )

    async def list_prompts(
        self, ctx: t.Any, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        """A tool runner has no prompts: an empty list (with its caching hints)."""
        return types.ListPromptsResult(prompts=[])

    async def get_prompt(
        self, ctx: t.Any, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        """There is no prompt to get: "unknown prompt"."""
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")

    async def list_resources(
        self, ctx: t.Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """A tool runner has no resources: an empty list (with its caching hints)."""
        return types.ListResourcesResult(resources=[])

    async def list_resource_templates(
        self, ctx: t.Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        """A tool runner has no resource templates: an empty list."""
        return types.ListResourceTemplatesResult(resource_templates=[])

    async def read_resource(
        self, ctx: t.Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """There is no resource to read: "not found" (SEP-2164)."""
        raise MCPError(
            code=types.INVALID_PARAMS,
            message=f"Resource not found: {params.uri}",
            data={"uri": str(params.uri)},
        )

    async def set_logging_level(
        self, ctx: t.Any, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        """``logging/setLevel``: the served calls of this connection send their log
        lines at or above ``params.level`` from now on."""
        _reports.set_level(ctx.session, params.level)
        return types.EmptyResult()

    @staticmethod
    async def _run(link: _CancelLink, fn: c.Callable[..., t.Any], *args: t.Any) -> t.Any:
        """Run ``fn(*args)`` in a worker thread; a cancellation of this request (the
        client's ``notifications/cancelled``, or the connection closing) cancels
        the call's attempts and returns at once."""
        try:
            return await anyio.to_thread.run_sync(
                functools.partial(fn, *args), abandon_on_cancel=True
            )
        except anyio.get_cancelled_exc_class():
            link.cancel()
            raise

    async def _approve(
        self,
        ctx: t.Any,
        params: types.CallToolRequestParams,
        pending: NeedsApproval,
        peer: Peer,
        arguments: dict[str, t.Any],
    ) -> types.CallToolResult | types.InputRequiredResult | None:
        """None when the client accepted; else the result to send (an error, or on
        2026-07-28+ the ``InputRequiredResult`` that asks)."""
        name = pending.tool.name
        session = ctx.session
        message = _approval_message(name, pending.arguments)
        if peer.modern:
            answer = (params.input_responses or {}).get(APPROVAL_KEY)
            # An answer counts only for the exact call it was asked about: the round's
            # state is signed and bound to the tool name and arguments.
            if peer.state.asking == "approval" and isinstance(answer, types.ElicitResult):
                return None if answer.action == "accept" else _answered(name, answer.action)
            if not can_elicit(session.client_capabilities):
                raise _missing_capability(
                    name, {"elicitation": {"form": {}}}, "requires approval, asked by form"
                )
            request = types.ElicitRequest(
                params=types.ElicitRequestFormParams(
                    message=message, requested_schema=dict(_EMPTY_SCHEMA)
                )
            )
            asking = RoundState(asking="approval")
            return types.InputRequiredResult(
                input_requests={APPROVAL_KEY: request},
                request_state=asking.seal(self.secret, name, arguments),
            )
        if not can_elicit(session.client_capabilities):
            return _needs_approval_error(name)
        try:
            reply = await session.elicit_form(
                message, dict(_EMPTY_SCHEMA), related_request_id=ctx.request_id
            )
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # fail closed: no answer is a rejection
            _log.warning("Could not ask the MCP client to approve tool '%s': %s", name, exc)
            return _error_result(
                f"Error: tool '{name}' requires approval, and asking the client failed; "
                "it did not run"
            )
        return None if reply.action == "accept" else _answered(name, reply.action)


def build_server(
    registry: Registry,
    *,
    ctx_factory: CtxFactory | None = None,
    name: str = "nous-tools",
    version: str | None = None,
    instructions: str | None = None,
    secret: bytes | None = None,
) -> Server[t.Any]:
    """The low-level SDK ``Server`` that publishes ``registry``'s tools.

    ``ctx_factory()`` makes the :class:`RunContext` of each call (default: a bare
    one); ``secret`` keys the approval state that round-trips through clients on
    2026-07-28+ (default: random per server, so a restart forgets pending approvals).
    ``version`` is the one the server gives in its ``serverInfo`` (default: this
    library's).
    """
    serving = _Serving(registry, ctx_factory, secret or secrets.token_bytes(32))
    if version is None:
        import nous_tools

        version = nous_tools.__version__
    with warnings.catch_warnings():  # logging/setLevel is deprecated as of 2026-07-28
        warnings.simplefilter("ignore")
        server = Server(
            name,
            version=version,
            instructions=instructions,
            on_list_tools=serving.list_tools,
            # A CreateTaskResult is the Tasks extension's shape (resultType "task"),
            # which the SDK's runner passes through unvalidated.
            on_call_tool=t.cast(t.Any, serving.call_tool),
            on_set_logging_level=serving.set_logging_level,
            on_list_prompts=serving.list_prompts,
            on_get_prompt=serving.get_prompt,
            on_list_resources=serving.list_resources,
            on_list_resource_templates=serving.list_resource_templates,
            on_read_resource=serving.read_resource,
            get_tool_input_schema=serving.input_schema,
        )
    server.add_request_handler("tasks/get", _TaskParams, serving.get_task)
    server.add_request_handler("tasks/cancel", _TaskParams, serving.cancel_task)
    server.add_request_handler("tasks/update", _TaskUpdateParams, serving.update_task)
    server.extensions[_tasks.TASKS_EXTENSION] = {}
    return server


# -- running --------------------------------------------------------------------------


def serve(
    registry: Registry | c.Iterable[Tool],
    transport: t.Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    ctx_factory: CtxFactory | None = None,
    *,
    name: str = "nous-tools",
    auth_token: str | None = None,
    allowed_hosts: c.Sequence[str] | None = None,
    allowed_origins: c.Sequence[str] | None = None,
    insecure: bool = False,
) -> None:
    """Serve ``registry`` (or an iterable of tools) over ``transport`` until the
    client disconnects (stdio) or the process is interrupted (http, at
    ``http://HOST:PORT/mcp``). Blocks.

    Over http, a loopback ``host`` checks Host/Origin against the loopback names. Any
    other ``host`` needs ``auth_token`` (clients send ``Authorization: Bearer
    TOKEN``; at least 16 characters) and ``allowed_hosts`` (the Host names clients
    use: ``"mcp.example.com"`` on any port, or ``"name:port"``), and raises
    ``ValueError`` without them unless ``insecure=True`` (logged as a warning).
    ``allowed_origins`` defaults to http(s) origins of ``allowed_hosts``."""
    registry = _as_registry(registry)
    if transport == "stdio":
        server = build_server(registry, ctx_factory=ctx_factory, name=name)
        from mcp.server.stdio import stdio_server

        async def main() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(main)
    elif transport == "http":
        import uvicorn

        app = _protected_app(
            registry, ctx_factory, name, host, auth_token, allowed_hosts, allowed_origins, insecure
        )
        uvicorn.run(app, host=host, port=port, log_level="warning")
    else:
        raise ValueError(f"transport must be 'stdio' or 'http', got {transport!r}")


def _protected_app(
    registry: Registry,
    ctx_factory: CtxFactory | None,
    name: str,
    host: str,
    auth_token: str | None,
    allowed_hosts: c.Sequence[str] | None,
    allowed_origins: c.Sequence[str] | None,
    insecure: bool,
) -> t.Any:
    from nous_tools.contrib.mcp._http import http_app, security_for

    security = security_for(
        host,
        auth_token=auth_token,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        insecure=insecure,
    )
    if insecure and (auth_token is None or not allowed_hosts):
        _log.warning(
            "Serving MCP on %s with insecure=True: %s",
            host,
            "no bearer token, so anyone who can reach the port can call the tools"
            if auth_token is None
            else "no Host check (DNS rebinding)",
        )
    server = build_server(registry, ctx_factory=ctx_factory, name=name)
    return http_app(server, security=security, auth_token=auth_token)


def _as_registry(tools: Registry | c.Iterable[Tool]) -> Registry:
    if isinstance(tools, Registry):
        return tools
    return Registry(tools)


class RunningServer:
    """An MCP server answering Streamable HTTP in a background thread; see
    :func:`serve_http_in_thread`. ``url`` is its endpoint; :meth:`close` stops it."""

    def __init__(self, server: t.Any, thread: threading.Thread, url: str) -> None:
        self._server = server
        self._thread = thread
        #: The MCP endpoint, e.g. ``http://127.0.0.1:54321/mcp``.
        self.url = url

    def close(self, timeout: float = 10.0) -> None:
        """Stop serving and wait (up to ``timeout`` seconds) for the thread to end."""
        self._server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def serve_http_in_thread(
    registry: Registry | c.Iterable[Tool],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    ctx_factory: CtxFactory | None = None,
    name: str = "nous-tools",
    startup_timeout: float = 30.0,
    auth_token: str | None = None,
    allowed_hosts: c.Sequence[str] | None = None,
    allowed_origins: c.Sequence[str] | None = None,
    insecure: bool = False,
) -> RunningServer:
    """Start serving ``registry`` over Streamable HTTP in a daemon thread and return
    once it accepts connections. ``port=0`` picks a free port (see ``.url``). The
    protection options are :func:`serve`'s."""
    import uvicorn

    app = _protected_app(
        _as_registry(registry),
        ctx_factory,
        name,
        host,
        auth_token,
        allowed_hosts,
        allowed_origins,
        insecure,
    )
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    thread = threading.Thread(
        target=http.run, kwargs={"sockets": [sock]}, name="nous-tools-mcp-http", daemon=True
    )
    thread.start()
    waited = 0.0
    while not http.started:
        if not thread.is_alive():
            sock.close()
            raise RuntimeError("the MCP HTTP server stopped while starting")
        if waited >= startup_timeout:
            http.should_exit = True
            raise RuntimeError(f"the MCP HTTP server did not start within {startup_timeout} s")
        thread.join(0.01)
        waited += 0.01
    shown = f"[{host}]" if ":" in host else host
    return RunningServer(http, thread, f"http://{shown}:{bound_port}/mcp")
