"""Execute a model's tool calls in a Django view, with approval of ``ask`` tools.

A single-file Django project (no database, no apps): the settings are configured
here when nothing configured them before, and this module is its own URLconf.
Run it (``pip install django``)::

    NOUS_TOOLS_APPROVAL_SECRET=$(python -c 'import secrets; print(secrets.token_hex(32))') \
        python examples/django_app.py runserver

The flow is the one of ``examples/flask_app.py``:

- ``POST /tool-calls`` with ``{"tool_calls": [...]}`` → 200 ``{"messages": [...]}``,
  or 202 with the messages of the calls that are done and ``"pending"``: one signed
  token (``NeedsApproval.to_dict(secret)``) per call waiting for a person, whose
  ``call_id`` is the model's tool-call id. The server keeps no pending calls.
- ``POST /approvals/<id>`` with ``{"decision": "approve" | "reject", "approval":
  <the token>}`` → 200 with the tool message; a changed, forged, expired or
  foreign token → 400 with the reason; a token already decided → 409.

The signing secret is the ``NOUS_TOOLS_APPROVAL_SECRET`` setting. Single use comes
from ``nous_tools.contrib.django.CacheApprovalStore`` on Django's cache: with a
cache that all the site's processes share (Redis, Memcached, the database cache),
a token decided in one process is refused in every other. This single-file demo
uses ``LocMemCache``, which is per process.

What the token cannot do for you: know *who* approves. In a real project the
approvals view must require a logged-in person allowed to approve
(``@login_required`` plus a permission check) — see ``docs/concepts/approval.md``.

A request id (header ``X-Request-Id``, or a new one) is put in a ``ContextVar`` in
the view, and the tools see it even in a worker thread.

To use your own tools, call :func:`configure` once (``configure(registry=...)``).
"""

from __future__ import annotations

import contextvars
import json
import os
import secrets
import sys
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
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
        NOUS_TOOLS_APPROVAL_SECRET=os.environ.get("NOUS_TOOLS_APPROVAL_SECRET"),
    )

from django.http import HttpRequest, JsonResponse  # after the settings
from django.urls import path
from django.views.decorators.http import require_POST

from nous_tools import (
    ApprovalAlreadyUsed,
    Err,
    NeedsApproval,
    Registry,
    Tool,
    ToolError,
    ToolExecutor,
    execute_tool_calls,
    format_tool_result,
)
from nous_tools.contrib.django import CacheApprovalStore, close_connections

#: The id of the request being served; tools may read it.
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


#: How long a person has to decide (seconds); the cache keeps claims as long.
APPROVAL_MAX_AGE = 3600.0

#: Runs the tools. Tools with a timeout run in worker threads, where no request
#: starts or ends: this closes each worker's database connections after every task,
#: as Django does at the end of a request (see docs/how-to/scale-out.md).
EXECUTOR = ToolExecutor(after_task=close_connections)


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
        name="django-example",
        executor=EXECUTOR,
        approval_max_age=APPROVAL_MAX_AGE,
        approval_store=CacheApprovalStore(timeout=APPROVAL_MAX_AGE),
    )


_registry: Registry | None = None


def configure(registry: Registry | None = None) -> None:
    """Use ``registry`` from now on (None: the example's own)."""
    global _registry
    _registry = registry


def _current_registry() -> Registry:
    global _registry
    if _registry is None:
        _registry = example_registry()
    return _registry


def _secret() -> str:
    secret = getattr(settings, "NOUS_TOOLS_APPROVAL_SECRET", None)
    if not secret:
        raise RuntimeError("set the NOUS_TOOLS_APPROVAL_SECRET setting")
    return t.cast(str, secret)


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
    registry, secret = _current_registry(), _secret()
    body = _json_body(request)
    if not isinstance(body.get("tool_calls"), list):
        return _error('expected a JSON object with a list "tool_calls"', 400)
    token = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
    try:
        result = execute_tool_calls(registry, body["tool_calls"])
    finally:
        request_id.reset(token)
    messages = result.to_openai_messages(include_pending=False)
    if not result.pending:
        return JsonResponse({"messages": messages})
    pending = [approval.to_dict(secret) for approval in result.pending]
    return JsonResponse({"messages": messages, "pending": pending}, status=202)


@require_POST
def approvals(request: HttpRequest, approval_id: str) -> JsonResponse:
    # A real project checks here that a logged-in person may approve this call.
    registry, secret = _current_registry(), _secret()
    body = _json_body(request)
    decision = body.get("decision")
    if decision not in ("approve", "reject"):
        return _error('"decision" must be "approve" or "reject"', 400)
    token = body.get("approval")
    if not isinstance(token, dict):
        return _error('"approval" must be the pending approval, as it was sent', 400)
    try:
        approval = NeedsApproval.from_dict(token, registry, secret)
    except ValueError as exc:  # changed, forged, expired, another registry, another tool
        return _error(str(exc), 400)
    if approval.id != approval_id:
        return _error("approval refused: it is not the call under this id", 400)
    name = approval.tool.name
    if decision == "reject":
        if not registry.approval_store.claim(approval.id):
            return _error("this approval was already decided", 409)
        rejected = Err(ToolError(f"Tool '{name}' was rejected by a person and did not run"))
        content = format_tool_result(rejected, name)
        return JsonResponse({"messages": [_tool_message(approval.call_id, content)]})
    rid = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
    try:
        outcome = registry.execute_approved(approval)
    finally:
        request_id.reset(rid)
    if isinstance(outcome, Err) and isinstance(outcome.reason, ApprovalAlreadyUsed):
        return _error("this approval was already decided", 409)
    content = format_tool_result(outcome, name)
    return JsonResponse({"messages": [_tool_message(approval.call_id, content)]})


urlpatterns = [
    path("tool-calls", tool_calls),
    path("approvals/<str:approval_id>", approvals),
]


if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
