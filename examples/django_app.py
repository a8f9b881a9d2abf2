"""Execute a model's tool calls in a Django view, with approval of ``ask`` tools.

A single-file Django project (no database, no apps): the settings are configured
here when nothing configured them before, and this module is its own URLconf.
Run it (``pip install django``)::

    python examples/django_app.py runserver

The flow is the one of ``examples/flask_app.py``:

- ``POST /tool-calls`` with ``{"tool_calls": [...]}`` → 200 ``{"messages": [...]}``,
  or 202 with the messages of the calls that are done and ``"pending"`` (a signed
  ``NeedsApproval.to_dict(secret)`` plus ``tool_call_id`` per call waiting for a
  person); the pending calls are kept server-side, by id.
- ``POST /approvals/<id>`` with ``{"decision": "approve" | "reject", "approval":
  {...}}`` → 200 with the tool message; tampered arguments → 400; unknown id → 404.

A request id (header ``X-Request-Id``, or a new one) is put in a ``ContextVar`` in
the view, and the tools see it even in a worker thread.

To use your own tools, call :func:`configure` once (``configure(registry=...)``).
In a real project, keep ``execute_tool_calls`` in the view and the pending calls in
your cache or database rather than in this process's memory.
"""

from __future__ import annotations

import contextvars
import json
import secrets
import sys
import threading
import typing as t
import uuid

from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY=secrets.token_hex(32),
        ROOT_URLCONF=__name__,
        ALLOWED_HOSTS=["localhost", "127.0.0.1", "testserver"],
        INSTALLED_APPS=[],
        MIDDLEWARE=[],
        DATABASES={},
        USE_TZ=True,
    )

from django.http import HttpRequest, JsonResponse  # after the settings
from django.urls import path
from django.views.decorators.http import require_POST

from nous_tools import (
    Err,
    NeedsApproval,
    Registry,
    Tool,
    ToolError,
    execute_tool_calls,
    format_tool_result,
)

#: The id of the request being served; tools may read it.
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


class _State:
    """What the views share: the registry, the signing secret and the pending calls."""

    def __init__(self, registry: Registry | None, secret: str | bytes | None) -> None:
        self.registry = registry if registry is not None else example_registry()
        self.secret = secret if secret is not None else secrets.token_hex(32)
        self.pending: dict[str, _Pending] = {}
        self.lock = threading.Lock()

    def take(self, approval_id: str) -> bool:
        """Remove a pending call; False when another request decided it first."""
        with self.lock:
            return self.pending.pop(approval_id, None) is not None


_state = _State(None, None)


def configure(registry: Registry | None = None, secret: str | bytes | None = None) -> None:
    """Use ``registry`` and ``secret`` from now on (and forget any pending calls)."""
    global _state
    _state = _State(registry, secret)


def _json_body(request: HttpRequest) -> dict[str, t.Any]:
    try:
        data = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _tool_message(tool_call_id: str | None, content: str) -> dict[str, t.Any]:
    return {"role": "tool", "tool_call_id": tool_call_id, "content": content}


def _error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@require_POST
def tool_calls(request: HttpRequest) -> JsonResponse:
    state = _state
    body = _json_body(request)
    if not isinstance(body.get("tool_calls"), list):
        return _error('expected a JSON object with a list "tool_calls"', 400)
    token = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
    try:
        result = execute_tool_calls(state.registry, body["tool_calls"])
    finally:
        request_id.reset(token)
    messages = result.to_openai_messages(include_pending=False)
    if not result.pending:
        return JsonResponse({"messages": messages})
    waiting = []
    with state.lock:
        for call, outcome in zip(result.calls, result.results, strict=True):
            if isinstance(outcome, NeedsApproval):
                state.pending[outcome.id] = _Pending(outcome, call.id)
                waiting.append({**outcome.to_dict(state.secret), "tool_call_id": call.id})
    return JsonResponse({"messages": messages, "pending": waiting}, status=202)


@require_POST
def approvals(request: HttpRequest, approval_id: str) -> JsonResponse:
    state = _state
    with state.lock:
        entry = state.pending.get(approval_id)
    if entry is None:
        return _error(f"no pending approval {approval_id!r}", 404)
    body = _json_body(request)
    decision = body.get("decision")
    name = entry.approval.tool.name
    if decision == "reject":
        if not state.take(approval_id):
            return _error(f"no pending approval {approval_id!r}", 404)
        rejected = Err(ToolError(f"Tool '{name}' was rejected by a person and did not run"))
        content = format_tool_result(rejected, name)
        return JsonResponse({"messages": [_tool_message(entry.tool_call_id, content)]})
    if decision != "approve":
        return _error('"decision" must be "approve" or "reject"', 400)
    approval = body.get("approval")
    if not isinstance(approval, dict):
        return _error('"approval" must be the pending approval, as it was sent', 400)
    try:
        approved = NeedsApproval.from_dict(approval, state.registry, state.secret)
    except ValueError as exc:  # tampered arguments, a forged signature, bad data
        return _error(f"approval refused: {exc}", 400)
    if approved.id != approval_id or approved.fingerprint != entry.approval.fingerprint:
        return _error("approval refused: it is not the call pending under this id", 400)
    if not state.take(approval_id):
        return _error(f"no pending approval {approval_id!r}", 404)
    token = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
    try:
        outcome = state.registry.execute_approved(entry.approval)
    finally:
        request_id.reset(token)
    content = format_tool_result(outcome, name)
    return JsonResponse({"messages": [_tool_message(entry.tool_call_id, content)]})


urlpatterns = [
    path("tool-calls", tool_calls),
    path("approvals/<str:approval_id>", approvals),
]


if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
