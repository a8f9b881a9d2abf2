"""Execute a model's tool calls inside a Flask request, with approval of ``ask`` tools.

Run it (``pip install flask``)::

    NOUS_TOOLS_APPROVAL_SECRET=$(python -c 'import secrets; print(secrets.token_hex(32))') \\
        python examples/flask_app.py
    curl -s localhost:5000/tool-calls -H 'Content-Type: application/json' -d '{"tool_calls": [
      {"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]}'

The flow:

- ``POST /tool-calls`` with ``{"tool_calls": [...]}`` (as a model response carries
  them: OpenAI, Responses or Anthropic shapes) runs them all, concurrently. When all
  are done: 200 and ``{"messages": [...]}``, the tool messages to send back to the
  model. When some wait for a person (an ``approval="ask"`` tool): 202 with the
  messages of the calls that are done and ``"pending"``: one signed token
  (``NeedsApproval.to_dict(secret)``) per waiting call; its ``call_id`` is the
  model's tool-call id.
- ``POST /approvals/<id>`` with ``{"decision": "approve" | "reject", "approval":
  <the token, as the browser got it>}``: the token is checked
  (``NeedsApproval.from_dict``: signature, age, registry, tool — any change → 400
  with the reason), then approve runs the call (``registry.execute_approved``) and
  reject answers with a rejection message; either way 200 with ``{"messages":
  [<the tool message>]}``. Each token is decided once: the registry's approval
  store (here the in-memory one: one process) claims its id, so a second decision
  is 409.

The server keeps no pending calls: the signed token is the pending call. The
secret comes from the app's config (``NOUS_TOOLS_APPROVAL_SECRET``); share it
between the processes of one site, and keep it out of the browser.

What the token cannot do for you: know *who* approves. In a real app the
approvals view must require a logged-in person allowed to approve (e.g. Flask-Login's
``@login_required`` and a permission check) — see ``docs/concepts/approval.md``.

A request id (header ``X-Request-Id``, or a new one) is put in a ``ContextVar`` in
the view; the tools see it, also when they run in a worker thread, because the
executor runs every call in a copy of the caller's context.
"""

from __future__ import annotations

import collections.abc as c
import contextvars
import os
import typing as t
import uuid

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue

from nous_tools import (
    ApprovalAlreadyUsed,
    Err,
    InMemoryApprovalStore,
    NeedsApproval,
    Registry,
    Tool,
    ToolError,
    execute_tool_calls,
    format_tool_result,
)

#: The id of the request being served; tools may read it (for logs, say).
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

#: How long a person has to decide (seconds); the store remembers claims as long.
APPROVAL_MAX_AGE = 3600.0


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
        ],
        name="flask-example",
        approval_max_age=APPROVAL_MAX_AGE,
        approval_store=InMemoryApprovalStore(max_entries=10_000, ttl=APPROVAL_MAX_AGE),
    )


def create_app(
    registry: Registry | None = None, config: c.Mapping[str, t.Any] | None = None
) -> Flask:
    """The app. ``config`` is merged into ``app.config``, which must hold
    ``NOUS_TOOLS_APPROVAL_SECRET`` (the key that signs approval tokens)."""
    registry = registry if registry is not None else example_registry()
    app = Flask(__name__)
    app.config.from_mapping(config or {})
    secret = app.config.get("NOUS_TOOLS_APPROVAL_SECRET")
    if not secret:
        raise RuntimeError("set NOUS_TOOLS_APPROVAL_SECRET in the app's config")

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
        pending = [approval.to_dict(secret) for approval in result.pending]
        return jsonify(messages=messages, pending=pending), 202

    @app.post("/approvals/<approval_id>")
    def approvals(approval_id: str) -> ResponseReturnValue:
        # A real app checks here that a logged-in person may approve this call.
        data = request.get_json(silent=True)
        body: dict[str, t.Any] = data if isinstance(data, dict) else {}
        decision = body.get("decision")
        if decision not in ("approve", "reject"):
            return jsonify(error='"decision" must be "approve" or "reject"'), 400
        token = body.get("approval")
        if not isinstance(token, dict):
            return jsonify(error='"approval" must be the pending approval, as it was sent'), 400
        try:
            approval = NeedsApproval.from_dict(token, registry, secret)
        except ValueError as exc:  # changed, forged, expired, another registry, another tool
            return jsonify(error=str(exc)), 400
        if approval.id != approval_id:
            return jsonify(error="approval refused: it is not the call under this id"), 400
        name = approval.tool.name
        if decision == "reject":
            if not registry.approval_store.claim(approval.id):
                return jsonify(error="this approval was already decided"), 409
            rejected = Err(ToolError(f"Tool '{name}' was rejected by a person and did not run"))
            content = format_tool_result(rejected, name)
            return jsonify(messages=[tool_message(approval.call_id, content)]), 200
        rid = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
        try:
            outcome = registry.execute_approved(approval)
        finally:
            request_id.reset(rid)
        if isinstance(outcome, Err) and isinstance(outcome.reason, ApprovalAlreadyUsed):
            return jsonify(error="this approval was already decided"), 409
        content = format_tool_result(outcome, name)
        return jsonify(messages=[tool_message(approval.call_id, content)]), 200

    return app


if __name__ == "__main__":
    create_app(
        config={"NOUS_TOOLS_APPROVAL_SECRET": os.environ.get("NOUS_TOOLS_APPROVAL_SECRET")}
    ).run(debug=False)
