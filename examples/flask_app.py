"""Execute a model's tool calls inside a Flask request, with approval of ``ask`` tools.

Run it (``pip install flask``)::

    NOUS_TOOLS_APPROVAL_SECRET=$(python -c 'import secrets; print(secrets.token_hex(32))') \\
        python examples/flask_app.py
    curl -s localhost:5000/tool-calls -H 'Content-Type: application/json' -d '{"tool_calls": [
      {"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]}'

The flow (``docs/how-to/approve-later.md``):

- ``POST /tool-calls`` with the model's response as JSON — an OpenAI
  ``ChatCompletion`` or its message, a Responses ``Response``, an Anthropic
  ``Message`` — or ``{"tool_calls": [...]}`` with the calls themselves, in any of
  those shapes. It runs them all, concurrently. When all are done: 200 and
  ``{"messages": [...]}``, **in the shape the calls came in**: Chat Completions
  ``tool`` messages, Responses ``function_call_output`` items (for ``input``), or one
  Anthropic ``user`` message with the ``tool_result`` blocks. When some wait for a
  person (an ``approval="ask"`` tool): 202 and ``{"pending": [...], "batch": {...}}``
  — what to show the person (``call_id``, ``tool``, ``description``, ``arguments``
  per waiting call) and the paused batch, signed (``ToolCallResults.to_dict``).
- ``POST /tool-calls/resolve`` with ``{"batch": <as it was received>, "decisions":
  {<call_id>: "approve" | "reject" | {"edit": {<arguments>}}}}``: the batch is checked
  (``ToolCallResults.from_dict``: the signature covers every result, argument and
  pending call; its age, registry and tools — any change → 400 with the reason),
  then the decisions are applied (``resolve``: approved calls run once, rejected
  ones answer "rejected by the user", an edit runs with the person's arguments; a
  decision that cannot be applied → 400). The answer is as above: 200 with one
  message per call of the model, in call order, or 202 with a new batch while
  some calls are undecided. Each batch is resolved once: a replay or a double
  submit is 409 (the registry's approval store — here the in-memory one, for one
  process — remembers it).

The server keeps no pending calls: the signed batch is the pending work. The
secret comes from the app's config (``NOUS_TOOLS_APPROVAL_SECRET``); share it
between the processes of one site, and keep it out of the browser.

What the batch cannot do for you: know *who* decides. In a real app the resolve
view must require a logged-in person allowed to approve (e.g. Flask-Login's
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
    BatchAlreadyResolved,
    Edit,
    InMemoryApprovalStore,
    Registry,
    Tool,
    ToolCallResults,
    execute_tool_calls,
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
        # Each claim is kept until its token expires (the registry says when).
        approval_store=InMemoryApprovalStore(max_entries=10_000),
    )


def messages_for(result: ToolCallResults) -> list[dict[str, t.Any]]:
    """The results in the shape the calls came in (Chat Completions when unknown)."""
    if result.provider == "responses":
        return result.to_responses_items()
    if result.provider == "anthropic":
        message = result.to_anthropic_message()
        return [message] if message["content"] else []
    return result.to_openai_messages()


def reply(result: ToolCallResults, secret: str) -> tuple[dict[str, t.Any], int]:
    """200 and the messages when nothing waits; else 202, the pending calls and the batch."""
    if not result.pending:
        return {"messages": messages_for(result)}, 200
    batch = result.to_dict(secret)
    pending = [
        {
            "call_id": call["id"],
            "tool": call["name"],
            "description": call["approval"].get("description", ""),
            "arguments": call["approval"]["arguments"],
        }
        for call in batch["calls"]
        if "approval" in call
    ]
    return {"pending": pending, "batch": batch}, 202


def read_decisions(raw: object) -> dict[str, t.Any]:
    """``{call_id: "approve" | "reject" | {"edit": {...}}}`` from JSON, with edits as
    :class:`Edit`; ``resolve`` refuses anything else it holds."""
    if not isinstance(raw, dict):
        raise ValueError('"decisions" must map call ids to "approve", "reject" or {"edit": {...}}')
    return {
        call_id: Edit(decision["edit"])
        if isinstance(decision, dict) and list(decision) == ["edit"]
        else decision
        for call_id, decision in raw.items()
    }


def create_app(
    registry: Registry | None = None, config: c.Mapping[str, t.Any] | None = None
) -> Flask:
    """The app. ``config`` is merged into ``app.config``, which must hold
    ``NOUS_TOOLS_APPROVAL_SECRET`` (the key that signs paused batches)."""
    registry = registry if registry is not None else example_registry()
    app = Flask(__name__)
    app.config.from_mapping(config or {})
    secret = app.config.get("NOUS_TOOLS_APPROVAL_SECRET")
    if not secret:
        raise RuntimeError("set NOUS_TOOLS_APPROVAL_SECRET in the app's config")

    @app.post("/tool-calls")
    def tool_calls() -> ResponseReturnValue:
        data = request.get_json(silent=True)
        if not isinstance(data, dict):
            return jsonify(error='expected the model\'s response, or {"tool_calls": [...]}'), 400
        calls = data.get("tool_calls", data)  # {"tool_calls": [...]} or a whole response
        token = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
        try:
            result = execute_tool_calls(registry, calls)
        except TypeError as exc:  # not a response or list of calls we know
            return jsonify(error=str(exc)), 400
        finally:
            request_id.reset(token)
        body, status = reply(result, secret)
        return jsonify(body), status

    @app.post("/tool-calls/resolve")
    def resolve() -> ResponseReturnValue:
        # A real app checks here that a logged-in person may decide these calls.
        data = request.get_json(silent=True)
        body: dict[str, t.Any] = data if isinstance(data, dict) else {}
        if not isinstance(body.get("batch"), dict):
            return jsonify(error='"batch" must be the paused batch, as it was sent'), 400
        try:
            decisions = read_decisions(body.get("decisions"))
            # changed, forged, expired, another registry, a tool changed since
            batch = ToolCallResults.from_dict(body["batch"], registry, secret)
        except ValueError as exc:
            return jsonify(error=str(exc)), 400
        token = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
        try:
            resolved = batch.resolve(decisions)
        except BatchAlreadyResolved:
            return jsonify(error="this batch was already decided"), 409
        except ValueError as exc:  # an unknown call id, a bad decision, a bad edit
            return jsonify(error=str(exc)), 400
        finally:
            request_id.reset(token)
        answer, status = reply(resolved, secret)
        return jsonify(answer), status

    return app


if __name__ == "__main__":
    create_app(
        config={"NOUS_TOOLS_APPROVAL_SECRET": os.environ.get("NOUS_TOOLS_APPROVAL_SECRET")}
    ).run(debug=False)
