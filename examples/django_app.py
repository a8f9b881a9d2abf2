"""Execute a model's tool calls in a Django view, with approval of ``ask`` tools.

A single-file Django project (no database, no apps): the settings are configured
here when nothing configured them before, and this module is its own URLconf.
Run it (``pip install django``)::

    NOUS_TOOLS_APPROVAL_SECRET=$(python -c 'import secrets; print(secrets.token_hex(32))') \
        python examples/django_app.py runserver

The flow is the one of ``examples/flask_app.py`` (``docs/how-to/approve-later.md``):

- ``POST /tool-calls`` with the model's response as JSON (an OpenAI ``ChatCompletion``
  or its message, a Responses ``Response``, an Anthropic ``Message``) or
  ``{"tool_calls": [...]}`` → 200 ``{"messages": [...]}`` in the shape the calls came
  in, or 202 ``{"pending": [...], "batch": {...}}`` when some wait for a person: what
  to show them, and the paused batch, signed (``ToolCallResults.to_dict``). The
  server keeps no pending calls.
- ``POST /tool-calls/resolve`` with ``{"batch": <as received>, "decisions":
  {<call_id>: "approve" | "reject" | {"edit": {<arguments>}}}}`` → 200 with one
  message per call of the model, in call order (or 202 and a new batch while some
  are undecided); a changed, forged, expired or foreign batch, an unknown call id or
  a bad decision → 400 with the reason; a batch already decided → 409.

The signing secret is the ``NOUS_TOOLS_APPROVAL_SECRET`` setting. Single use comes
from ``nous_tools.contrib.django.CacheApprovalStore`` on Django's cache: with a
cache that all the site's processes share (Redis, Memcached, the database cache),
a batch decided in one process is refused in every other. This single-file demo
uses ``LocMemCache``, which is per process: ``runserver`` is one process, so it says
``single_process=True`` (without it the store refuses ``LocMemCache``).

What the batch cannot do for you: know *who* decides. In a real project the
resolve view must require a logged-in person allowed to approve
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
    BatchAlreadyResolved,
    Edit,
    Registry,
    Tool,
    ToolCallResults,
    ToolExecutor,
    execute_tool_calls,
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
        # One process (runserver): LocMemCache will do. A real site shares Redis,
        # Memcached or the database cache between its processes, without single_process.
        approval_store=CacheApprovalStore(timeout=APPROVAL_MAX_AGE, single_process=True),
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


def _json_body(request: HttpRequest) -> dict[str, t.Any] | None:
    """The request's JSON object, or None when it is not one."""
    try:
        data = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def messages_for(result: ToolCallResults) -> list[dict[str, t.Any]]:
    """The results in the shape the calls came in (Chat Completions when unknown)."""
    if result.provider == "responses":
        return result.to_responses_items()
    if result.provider == "anthropic":
        message = result.to_anthropic_message()
        return [message] if message["content"] else []
    return result.to_openai_messages()


def _reply(result: ToolCallResults, secret: str) -> JsonResponse:
    """200 and the messages when nothing waits; else 202, the pending calls and the batch."""
    if not result.pending:
        return JsonResponse({"messages": messages_for(result)})
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
    return JsonResponse({"pending": pending, "batch": batch}, status=202)


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


@require_POST
def tool_calls(request: HttpRequest) -> JsonResponse:
    registry, secret = _current_registry(), _secret()
    body = _json_body(request)
    if body is None:
        return _error('expected the model\'s response, or {"tool_calls": [...]}', 400)
    calls = body.get("tool_calls", body)  # {"tool_calls": [...]} or a whole response
    token = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
    try:
        result = execute_tool_calls(registry, calls)
    except TypeError as exc:  # not a response or list of calls we know
        return _error(str(exc), 400)
    finally:
        request_id.reset(token)
    return _reply(result, secret)


@require_POST
def resolve(request: HttpRequest) -> JsonResponse:
    # A real project checks here that a logged-in person may decide these calls.
    registry, secret = _current_registry(), _secret()
    body = _json_body(request) or {}
    if not isinstance(body.get("batch"), dict):
        return _error('"batch" must be the paused batch, as it was sent', 400)
    try:
        decisions = read_decisions(body.get("decisions"))
        # changed, forged, expired, another registry, a tool changed since
        batch = ToolCallResults.from_dict(body["batch"], registry, secret)
    except ValueError as exc:
        return _error(str(exc), 400)
    token = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
    try:
        resolved = batch.resolve(decisions)
    except BatchAlreadyResolved:
        return _error("this batch was already decided", 409)
    except ValueError as exc:  # an unknown call id, a bad decision, a bad edit
        return _error(str(exc), 400)
    finally:
        request_id.reset(token)
    return _reply(resolved, secret)


urlpatterns = [
    path("tool-calls", tool_calls),
    path("tool-calls/resolve", resolve),
]


if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
