"""Execute a model's tool calls inside a Flask request, with approval of ``ask`` tools.

Run it (``pip install flask``)::

    NOUS_TOOLS_APPROVAL_SECRET=$(python -c 'import secrets; print(secrets.token_hex(32))') \\
        python examples/flask_app.py
    curl -s localhost:5000/tool-calls -H 'Content-Type: application/json' -d '{"tool_calls": [
      {"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]}'

The views come with the library (``nous_tools.contrib.flask.blueprint``); the flow
(``docs/how-to/approve-later.md``):

- ``POST /tool-calls`` with the model's response as JSON — an OpenAI
  ``ChatCompletion`` or its message, a Responses ``Response``, an Anthropic
  ``Message`` — or ``{"tool_calls": [...]}`` with the calls themselves, in any of
  those shapes. It runs them all, concurrently. When all are done: 200 and
  ``{"messages": [...]}``, **in the shape the calls came in**
  (``ToolCallResults.response_messages``). When some wait for a person (an
  ``approval="ask"`` tool): 202 and ``{"pending": [...], "batch": {...}}`` — what
  to show the person (``ToolCallResults.pending_summary``) and the paused batch,
  signed (``ToolCallResults.to_dict``).
- ``POST /tool-calls/resolve`` with ``{"batch": <as it was received>, "decisions":
  {<call_id>: "approve" | "reject" | {"edit": {<arguments>}}}}``: the decisions are
  read, the batch is checked (its signature, age, registry and tools), then the
  decisions are applied once. The answer is as above: 200 with one message per call of the
  model, in call order, or 202 with a new batch while some calls are undecided.
  Anything malformed, changed, forged or expired is 400 with the reason; a batch
  already decided is 409 (the registry's approval store — here the in-memory one,
  for one process — remembers it).

The server keeps no pending calls: the signed batch is the pending work. The
secret comes from the app's config (``NOUS_TOOLS_APPROVAL_SECRET``); share it
between the processes of one site, and keep it out of the browser.

What the batch cannot do for you: know *who* decides. In a real app the resolve
view must require a logged-in person allowed to approve: pass
``blueprint(registry, may_decide=lambda request: ...)`` (with Flask-Login,
``current_user.is_authenticated`` and a permission check) — see
``docs/concepts/approval.md``.

A request id (header ``X-Request-Id``, or a new one) is put in a ``ContextVar``
before each request; the tools see it, also when they run in a worker thread,
because the executor runs every call in a copy of the caller's context.

**Each call once** (``docs/concepts/journal.md``): with a call journal
(``NOUS_TOOLS_JOURNAL``: an SQLite path, shared by the processes of the host) and a
conversation id (header ``X-Conversation-Id``: the run the calls belong to), each
tool call is journaled under the model's tool-call id. A proxy that retries a slow
request, a double click, a worker restarted mid-batch: the same response posted again
gets the same messages, and no tool runs twice — a retry that arrives while the first
request still runs waits for it (``NOUS_TOOLS_JOURNAL_WAIT`` seconds). A paused batch
carries its conversation id; resolving it twice returns the first outcome, and
deciding a call otherwise the second time is 409.
"""

from __future__ import annotations

import collections.abc as c
import contextvars
import os
import typing as t
import uuid

# --8<-- [start:imports]
from flask import Flask, g, request

from nous_tools import InMemoryApprovalStore, Journal, Registry, SQLiteJournal, tool
from nous_tools.contrib.flask import blueprint

# --8<-- [end:imports]

#: The id of the request being served; tools may read it (for logs, say).
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

#: How long a person has to decide (seconds); the store remembers claims as long.
APPROVAL_MAX_AGE = 3600.0


# --8<-- [start:tools]
def example_registry(journal: Journal | None = None) -> Registry:
    """Two tools: one that runs at once and one that needs a person's approval."""
    registry = Registry(
        name="flask-example",  # the audience of its signed batches
        approval_max_age=APPROVAL_MAX_AGE,  # how long a person has to decide
        # Each claim is kept until its token expires (the registry says when).
        approval_store=InMemoryApprovalStore(max_entries=10_000),
        journal=journal,  # each call once, across retries and restarts (or None)
    )

    @registry.register
    @tool(timeout=5.0)
    def get_weather(city: str) -> dict[str, t.Any]:
        """Current weather for a city."""
        return {"city": city, "temp_c": 21, "request_id": request_id.get()}

    @registry.register
    @tool(timeout=5.0, approval="ask")
    def delete_file(path: str) -> str:
        """Delete a file (asks a person first)."""
        return f"deleted {path}"

    return registry


# --8<-- [end:tools]


def create_app(
    registry: Registry | None = None, config: c.Mapping[str, t.Any] | None = None
) -> Flask:
    """The app. ``config`` is merged into ``app.config``, which must hold
    ``NOUS_TOOLS_APPROVAL_SECRET`` (the key that signs paused batches); with
    ``NOUS_TOOLS_JOURNAL`` (a path) the example registry journals its calls."""
    app = Flask(__name__)
    app.config.from_mapping(config or {})
    if registry is None:
        path = app.config.get("NOUS_TOOLS_JOURNAL")
        registry = example_registry(SQLiteJournal(path) if path else None)
    wait = float(app.config.get("NOUS_TOOLS_JOURNAL_WAIT", 30.0))
    # --8<-- [start:views]
    # POST /tool-calls and /tool-calls/resolve; the secret: NOUS_TOOLS_APPROVAL_SECRET.
    # A real app says who may decide: blueprint(registry, may_decide=...).
    app.register_blueprint(blueprint(registry, wait=wait))
    # --8<-- [end:views]

    @app.before_request
    def set_request_id() -> None:
        token = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
        g.request_id_token = token

    @app.teardown_request
    def reset_request_id(exc: BaseException | None) -> None:
        token = g.pop("request_id_token", None)
        if token is not None:
            request_id.reset(token)

    return app


if __name__ == "__main__":
    create_app(
        config={
            "NOUS_TOOLS_APPROVAL_SECRET": os.environ.get("NOUS_TOOLS_APPROVAL_SECRET"),
            "NOUS_TOOLS_JOURNAL": os.environ.get("NOUS_TOOLS_JOURNAL"),
        }
    ).run(debug=False)
