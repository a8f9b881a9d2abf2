"""Execute a model's tool calls inside a Flask request, with approval of ``ask`` tools.

Run it (``pip install flask``)::

    python examples/flask_app.py
    curl -s localhost:5000/tool-calls -H 'Content-Type: application/json' -d '{"tool_calls": [
      {"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]}'

The flow:

- ``POST /tool-calls`` with ``{"tool_calls": [...]}`` (as a model response carries
  them: OpenAI, Responses or Anthropic shapes) runs them all, concurrently. When all
  are done: 200 and ``{"messages": [...]}``, the tool messages to send back to the
  model. When some wait for a person (an ``approval="ask"`` tool): 202 with the
  messages of the calls that are done and ``"pending"``: one signed
  ``NeedsApproval.to_dict(secret)`` per waiting call, plus its ``tool_call_id``.
  The server keeps the pending calls too, by id.
- ``POST /approvals/<id>`` with ``{"decision": "approve" | "reject", "approval":
  <the pending dict, as the browser got it>}``: approve checks the signature
  (``NeedsApproval.from_dict``; tampered arguments → 400) and runs the call
  (``registry.execute_approved``); reject answers with a rejection message; either
  way 200 with ``{"messages": [<the tool message>]}``. An unknown id → 404. Each
  pending call is decided once.

A request id (header ``X-Request-Id``, or a new one) is put in a ``ContextVar`` in
the view; the tools see it, also when they run in a worker thread, because the
executor runs every call in a copy of the caller's context.
"""

from __future__ import annotations

import contextvars
import secrets
import threading
import typing as t
import uuid

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue

from nous_tools import (
    Err,
    NeedsApproval,
    Registry,
    Tool,
    ToolError,
    execute_tool_calls,
    format_tool_result,
)

#: The id of the request being served; tools may read it (for logs, say).
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


def example_registry() -> Registry:
    """Two tools: one that runs at once and one that needs a person's approval."""

    def get_weather(city: str) -> dict[str, t.Any]:
        """Current weather for a city."""
        return {"city": city, "temp_c": 21, "request_id": request_id.get()}

    def delete_file(path: str) -> str:
        """Delete a file (asks a person first)."""
        return f"deleted {path}"

    return Registry(
        [
            Tool.from_function(get_weather, timeout=5.0),
            Tool.from_function(delete_file, timeout=5.0, approval="ask"),
        ]
    )


class _Pending(t.NamedTuple):
    approval: NeedsApproval
    tool_call_id: str | None


def create_app(registry: Registry | None = None, secret: str | bytes | None = None) -> Flask:
    """The app. ``secret`` signs the pending approvals sent to the browser (default: a
    random one per app, which is right for one process; share one across processes)."""
    registry = registry if registry is not None else example_registry()
    secret = secret if secret is not None else secrets.token_hex(32)
    pending: dict[str, _Pending] = {}  # in memory; use your session store or database
    lock = threading.Lock()
    app = Flask(__name__)

    def tool_message(tool_call_id: str | None, content: str) -> dict[str, t.Any]:
        return {"role": "tool", "tool_call_id": tool_call_id, "content": content}

    @app.post("/tool-calls")
    def tool_calls() -> ResponseReturnValue:
        data = request.get_json(silent=True)
        if not isinstance(data, dict) or not isinstance(data.get("tool_calls"), list):
            return jsonify(error='expected a JSON object with a list "tool_calls"'), 400
        token = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
        try:
            result = execute_tool_calls(registry, data["tool_calls"])
        finally:
            request_id.reset(token)
        messages = result.to_openai_messages(include_pending=False)
        if not result.pending:
            return jsonify(messages=messages), 200
        waiting = []
        with lock:
            for call, outcome in zip(result.calls, result.results, strict=True):
                if isinstance(outcome, NeedsApproval):
                    pending[outcome.id] = _Pending(outcome, call.id)
                    waiting.append({**outcome.to_dict(secret), "tool_call_id": call.id})
        return jsonify(messages=messages, pending=waiting), 202

    @app.post("/approvals/<approval_id>")
    def approvals(approval_id: str) -> ResponseReturnValue:
        with lock:
            entry = pending.get(approval_id)
        if entry is None:
            return jsonify(error=f"no pending approval {approval_id!r}"), 404
        data = request.get_json(silent=True)
        body: dict[str, t.Any] = data if isinstance(data, dict) else {}
        decision = body.get("decision")
        name = entry.approval.tool.name
        if decision == "reject":
            if not _take(pending, lock, approval_id):
                return jsonify(error=f"no pending approval {approval_id!r}"), 404
            rejected = Err(ToolError(f"Tool '{name}' was rejected by a person and did not run"))
            content = format_tool_result(rejected, name)
            return jsonify(messages=[tool_message(entry.tool_call_id, content)]), 200
        if decision != "approve":
            return jsonify(error='"decision" must be "approve" or "reject"'), 400
        approval = body.get("approval")
        if not isinstance(approval, dict):
            return jsonify(error='"approval" must be the pending approval, as it was sent'), 400
        try:
            approved = NeedsApproval.from_dict(approval, registry, secret)
        except ValueError as exc:  # tampered arguments, a forged signature, bad data
            return jsonify(error=f"approval refused: {exc}"), 400
        if approved.id != approval_id or approved.fingerprint != entry.approval.fingerprint:
            return jsonify(error="approval refused: it is not the call pending under this id"), 400
        if not _take(pending, lock, approval_id):  # decided meanwhile by another request
            return jsonify(error=f"no pending approval {approval_id!r}"), 404
        token = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
        try:
            outcome = registry.execute_approved(entry.approval)
        finally:
            request_id.reset(token)
        content = format_tool_result(outcome, name)
        return jsonify(messages=[tool_message(entry.tool_call_id, content)]), 200

    return app


def _take(pending: dict[str, _Pending], lock: threading.Lock, approval_id: str) -> bool:
    """Remove a pending call; False when another request decided it first."""
    with lock:
        return pending.pop(approval_id, None) is not None


if __name__ == "__main__":
    create_app().run(debug=False)
