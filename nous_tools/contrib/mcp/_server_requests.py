"""What a server asks of the client during a call, and what it tells: elicitation
(a form for the user, answered by the call's ``elicitor`` or its approval handler
as an :class:`MCPElicitation`), sampling (a model's answer, from the call's
``sampler``), and its progress and log notifications, reported as the calling
tool's. Each goes to the call it belongs to (:class:`InFlight`).
"""

from __future__ import annotations

import collections.abc as c
import contextvars
import functools
import logging
import queue
import typing as t

import anyio
import anyio.to_thread
import attrs
import mcp_types as types

from nous_tools.approval import ApprovalRequest, Edit
from nous_tools.asking import (
    check_elicitation_schema,
    checked_answer,
    elicitation_content_errors,
    sample,
    with_defaults,
)
from nous_tools.contrib.mcp import _reports
from nous_tools.run_context import RunContext
from nous_tools.tool import Tool

if t.TYPE_CHECKING:
    from nous_tools.contrib.mcp._client import MCPServer

_log = logging.getLogger("nous_tools")


@attrs.frozen(slots=True)
class MCPElicitation(ApprovalRequest):
    """What an approval handler receives when a remote MCP server asks the user for
    input during a call (an ``elicitation/create`` request).

    ``name``/``tool`` are the remote tool being called, ``message`` and
    ``requested_schema`` are the server's question, and ``arguments`` are the
    proposed answer (the schema's defaults). The handler answers as usual:
    ``"approve"`` accepts with ``arguments``, ``Edit(content)`` accepts with
    ``content`` (omitted fields take the schema's defaults), ``"reject"`` declines.
    Answers are checked by exact type, as the approval gate checks them: anything
    else (a ``str`` subclass, an ``Edit`` subclass, an object equal to everything),
    a handler that raises, or content that does not fit ``requested_schema``
    declines.
    """

    message: str = ""
    requested_schema: c.Mapping[str, t.Any] = attrs.field(factory=dict)


@attrs.frozen(slots=True, eq=False)
class InFlight:
    """One call waiting on the server: whom to ask when the server elicits or samples
    (the call's context: its ``elicitor``/``sampler``, else its approval handler), and
    (when someone listens to the calling tool's reports) where the server's progress
    and log notifications for it go: the waiting thread's ``inbox``."""

    tool: Tool
    handler: t.Callable[[ApprovalRequest], object] | None
    inbox: queue.SimpleQueue[t.Any] | None = None
    ctx: RunContext[t.Any] | None = None

    def askers(self) -> tuple[object, object, object]:
        ctx = self.ctx
        if ctx is None:
            return (self.handler, None, None)
        return (self.handler, ctx.elicitor, ctx.sampler)


current_call: contextvars.ContextVar[InFlight | None] = contextvars.ContextVar(
    "nous_tools_mcp_call", default=None
)


PROGRESS = "progress"
LOG = "log"


async def on_elicit(
    server: MCPServer, context: t.Any, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """A server's ``elicitation/create``: ask the call it belongs to. Its context's
    ``elicitor`` answers when it has one (a served tool passing the question on
    to its own client); else its approval handler gets an :class:`MCPElicitation`.

    Fails closed (declines) when nobody can be asked, the answer is not exactly
    ``"approve"``, ``"reject"`` or an :class:`Edit`, the content does not fit the
    requested schema, the request is URL mode, or (on protocol versions before
    2026-07-28, where the request does not say which call it belongs to) several
    calls that would ask different people are waiting."""
    declined = types.ElicitResult(action="decline")
    if not isinstance(params, types.ElicitRequestFormParams):
        _log.warning("MCP server '%s' asked to open a URL; declined", server.name)
        return declined
    try:
        form = check_elicitation_schema(dict(params.requested_schema or {}))
    except (TypeError, ValueError) as exc:
        _log.warning(
            "MCP server '%s' asked for a form MCP does not allow (%s); declined", server.name, exc
        )
        return declined
    waiting = current_call.get() or _only_waiting(server)
    ctx = waiting.ctx if waiting is not None else None
    if ctx is not None and ctx.elicitor is not None:
        return await _pass_elicitation_on(server, ctx, params.message, form)
    if waiting is None or waiting.handler is None:
        _log.warning(
            "MCP server '%s' asked for input, but the call has no approval_handler; declined",
            server.name,
        )
        return declined
    return await _ask_handler(server, waiting.tool, waiting.handler, params.message, form)


async def _ask_handler(
    server: MCPServer,
    tool: Tool,
    handler: t.Callable[[ApprovalRequest], object],
    message: str,
    form: dict[str, t.Any],
) -> types.ElicitResult:
    """Ask the call's approval handler, with an :class:`MCPElicitation` proposing the
    form's defaults; a handler that raises declines."""
    proposed = with_defaults(form, {})
    request = MCPElicitation(
        name=tool.name,
        id=None,
        arguments=proposed,
        tool=tool,
        message=message,
        requested_schema=form,
    )
    try:
        decision = await anyio.to_thread.run_sync(handler, request, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        _log.warning(
            "Approval handler raised %s on an elicitation from MCP server '%s'; declined",
            type(exc).__name__,
            server.name,
        )
        return types.ElicitResult(action="decline")
    return _handler_answer(server, form, proposed, decision)


def _handler_answer(
    server: MCPServer, form: dict[str, t.Any], proposed: dict[str, t.Any], decision: object
) -> types.ElicitResult:
    """The approval handler's ``decision`` as the answer to the server: accepted with
    content that fits ``form``, else declined."""
    # Exact types, as the approval gate checks them: a str subclass equal to
    # everything, or an Edit subclass, is not an answer.
    if type(decision) is Edit:
        edited = decision.arguments
        if not isinstance(edited, c.Mapping):
            return _unfit(server, ["the Edit's content is not an object of fields"])
        content = with_defaults(form, dict(edited))
    elif type(decision) is str and decision == "approve":
        content = proposed
    else:
        if not (type(decision) is str and decision == "reject"):
            _log.warning(
                "Approval handler answered an elicitation from MCP server '%s' with %s; "
                "expected 'approve', 'reject' or an Edit. Declined",
                server.name,
                type(decision).__name__,
            )
        return types.ElicitResult(action="decline")
    errors = elicitation_content_errors(form, content)
    if errors:
        return _unfit(server, errors)
    return types.ElicitResult(action="accept", content=content)


def _unfit(server: MCPServer, errors: list[str]) -> types.ElicitResult:
    _log.warning(
        "The answer to an elicitation from MCP server '%s' does not fit its schema (%s); declined",
        server.name,
        "; ".join(errors),
    )
    return types.ElicitResult(action="decline")


async def on_log(server: MCPServer, params: types.LoggingMessageNotificationParams) -> None:
    """A server's ``notifications/message``: the ``ctx.log`` of the call it belongs
    to — the one call waiting on this server with someone listening (a log line
    does not say which call it is about); else the ``nous_tools`` logger at debug."""
    listening = [w for w in list(server._inflight.values()) if w.inbox is not None]
    if len(listening) == 1:
        t.cast("queue.SimpleQueue[t.Any]", listening[0].inbox).put(
            (LOG, params.level, params.data, params.logger)
        )
        return
    _log.debug(
        "MCP server '%s' log (%s) %s: %r", server.name, params.level, params.logger, params.data
    )


async def _pass_elicitation_on(
    server: MCPServer, ctx: RunContext[t.Any], message: str, form: dict[str, t.Any]
) -> types.ElicitResult:
    """Ask the calling context's ``elicitor`` (checked as ``ctx.elicit`` checks it)."""

    def ask() -> types.ElicitResult:
        assert ctx.elicitor is not None
        answer = checked_answer(form, ctx.elicitor(message, form), "the elicitor")
        return types.ElicitResult(action=answer.action, content=answer.content)

    try:
        return await anyio.to_thread.run_sync(ask, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        _log.warning(
            "Passing an elicitation from MCP server '%s' on failed (%s); declined",
            server.name,
            type(exc).__name__,
        )
        return types.ElicitResult(action="decline")


# -- internals: sampling --------------------------------------------------------------


async def on_sample(
    server: MCPServer, context: t.Any, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult | types.ErrorData:
    """A server's ``sampling/createMessage``: the waiting call's ``ctx.sampler``
    answers (as ``ctx.sample`` would); without one the server gets an error."""
    waiting = current_call.get() or _only_waiting(server)
    ctx = waiting.ctx if waiting is not None else None
    if ctx is None or ctx.sampler is None:
        _log.warning(
            "MCP server '%s' asked to sample a model, but the call's context has no "
            "sampler; refused",
            server.name,
        )
        return types.ErrorData(
            code=types.INVALID_REQUEST,
            message="this client has no model to sample for the call (no sampler)",
        )
    try:
        messages = [_sampled_message(message) for message in params.messages]
    except ValueError as exc:
        return types.ErrorData(code=types.INVALID_PARAMS, message=str(exc))
    ask = functools.partial(
        sample,
        ctx,
        messages,
        max_tokens=params.max_tokens,
        system=params.system_prompt,
        temperature=params.temperature,
    )
    try:
        text = await anyio.to_thread.run_sync(ask, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        _log.warning(
            "The sampler failed on a request from MCP server '%s' (%s)",
            server.name,
            type(exc).__name__,
        )
        return types.ErrorData(
            code=types.INTERNAL_ERROR, message=f"sampling failed: {type(exc).__name__}"
        )
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(text=text),
        model="nous-tools-sampler",
        stop_reason="endTurn",
    )


def _only_waiting(server: MCPServer) -> InFlight | None:
    waiting = list(server._inflight.values())
    if not waiting:
        return None
    first = waiting[0]
    askers = first.askers()
    if all(all(a is b for a, b in zip(w.askers(), askers, strict=True)) for w in waiting):
        return first
    return None


def _sampled_message(message: types.SamplingMessage) -> dict[str, str]:
    """A server's sampling message as ``ctx.sample`` takes it: text only."""
    blocks = message.content if isinstance(message.content, list) else [message.content]
    texts = []
    for block in blocks:
        if not isinstance(block, types.TextContent):
            raise ValueError(f"only text can be sampled here, got {type(block).__name__}")
        texts.append(block.text)
    return {"role": message.role, "content": "\n".join(texts)}


def relay(inbox: queue.SimpleQueue[t.Any], ctx: RunContext[t.Any], wait: float | None) -> None:
    """Wait up to ``wait`` seconds for what the server sent about a call, and report
    it as the calling tool's: progress with ``ctx.report_progress``, log lines with
    ``ctx.log`` (from this thread, the tool's). Returns at the first item; a value
    the server sent that ``ctx`` refuses (a total below the progress) is dropped."""
    try:
        item = inbox.get(True, wait) if wait is None or wait > 0 else inbox.get_nowait()
    except queue.Empty:
        return
    while True:
        if type(item) is tuple:
            try:
                if item[0] == PROGRESS:
                    ctx.report_progress(item[1], item[2], item[3])
                else:
                    level, data, logger = item[1], item[2], item[3]
                    extra: dict[str, t.Any] = {}
                    if isinstance(data, dict) and isinstance(data.get("message"), str):
                        # as nous-tools serve sends them: {"message": ..., **data}
                        extra = {str(k): v for k, v in data.items() if k != "message"}
                        message = data["message"]
                    else:
                        message = data if isinstance(data, str) else _json_text(data)
                    if logger:
                        extra.setdefault("logger", logger)
                    ctx.log(_reports.level_of(level), message, **extra)
            except ValueError:
                _log.debug("Dropped a report from an MCP server that ctx refused", exc_info=True)
        try:
            item = inbox.get_nowait()
        except queue.Empty:
            return


def _json_text(data: object) -> str:
    import json

    try:
        return json.dumps(data, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(data)
