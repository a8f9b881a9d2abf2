"""Execute a model's tool calls in a Django view, with approval of ``ask`` tools.

A whole Django project in one file: this module is its settings module, its
URLconf and its views (``docs/how-to/django.md`` walks through it). Run it
(``pip install django``)::

    export NOUS_TOOLS_APPROVAL_SECRET=$(python -c 'import secrets; print(secrets.token_hex(32))')
    python examples/django_app.py runserver

``runserver`` first creates the approval store's cache table (``createcachetable``)
in the SQLite database ``examples/django_app.sqlite3`` (``DJANGO_DB`` names
another file). Then, with the CSRF cookie that ``GET /`` sets::

    curl -s -c jar localhost:8000/ >/dev/null
    curl -s -b jar -H "X-CSRFToken: $(awk '/csrftoken/ {print $7}' jar)" \\
      -H 'Content-Type: application/json' localhost:8000/tool-calls/ -d '{"tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]}'

The views come with the library (``nous_tools.contrib.django.urls``); the flow is
the one of ``examples/flask_app.py`` (``docs/how-to/approve-later.md``):

- ``POST /tool-calls/`` with the model's response as JSON (an OpenAI ``ChatCompletion``
  or its message, a Responses ``Response``, an Anthropic ``Message``) or
  ``{"tool_calls": [...]}`` → 200 ``{"messages": [...]}`` in the shape the calls came
  in, or 202 ``{"pending": [...], "batch": {...}}`` when some wait for a person: what
  to show them, and the paused batch, signed. The server keeps no pending calls.
- ``POST /tool-calls/resolve/`` with ``{"batch": <as received>, "decisions":
  {<call_id>: "approve" | "reject" | {"edit": {<arguments>}}}}`` → 200 with one
  message per call of the model, in call order (or 202 and a new batch while some
  are undecided); a malformed, changed, forged, expired or foreign batch, an
  unknown call id or a bad decision → 400 with the reason; a batch already
  decided → 409.

Both are POSTs behind Django's CSRF protection: a page sends the ``csrftoken``
cookie's value in the ``X-CSRFToken`` header.

What the batch cannot do for you: know *who* decides. In a real project the
resolve view must require a logged-in person allowed to approve: pass
``urls(registry, may_decide=lambda request: request.user.has_perm(...))`` — see
``docs/concepts/approval.md``. A header ``X-Conversation-Id`` names the run the calls
belong to (the call journal's key, when the registry has a journal).
"""

from __future__ import annotations

import contextvars
import os
import pathlib
import secrets
import sys
import typing as t
import uuid

# --8<-- [start:imports]
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET

from nous_tools import Registry, tool
from nous_tools.contrib.django import CacheApprovalStore, urls

# --8<-- [end:imports]

# -- settings -----------------------------------------------------------------------

BASE_DIR = pathlib.Path(__file__).resolve().parent
DEBUG = False
# Django's own key (sessions, CSRF); a random one per start is enough for this demo.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or secrets.token_hex(32)
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
ROOT_URLCONF = __name__
USE_TZ = True
# --8<-- [start:settings]
INSTALLED_APPS = [
    # Makes the default executor close its worker threads' database connections.
    "nous_tools.contrib.django.NousToolsConfig",
]
MIDDLEWARE = [
    "django.middleware.csrf.CsrfViewMiddleware",  # a POST needs the CSRF token
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DJANGO_DB") or str(BASE_DIR / "django_app.sqlite3"),
    }
}
# Single use of each approval: a cache every process of the site shares, whose add()
# is atomic (the database cache here; Redis or Memcached are as good).
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "nous_tools_cache",  # manage.py createcachetable
    }
}
# The key that signs paused batches: the same in every process, never in a page.
NOUS_TOOLS_APPROVAL_SECRET = os.environ.get("NOUS_TOOLS_APPROVAL_SECRET", "")
# --8<-- [end:settings]
MIDDLEWARE.append(f"{__name__}.request_id_middleware")  # defined below

# -- the tools ----------------------------------------------------------------------

#: The id of the request being served; the tools see it, even in a worker thread.
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

#: How long a person has to decide (seconds); the cache keeps claims as long.
APPROVAL_MAX_AGE = 3600.0

# --8<-- [start:tools]
registry = Registry(
    name="django-example",  # the audience of its signed batches
    approval_max_age=APPROVAL_MAX_AGE,  # how long a person has to decide
    approval_store=CacheApprovalStore(timeout=APPROVAL_MAX_AGE),  # CACHES["default"]
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


# --8<-- [end:tools]

# -- the views ----------------------------------------------------------------------


# --8<-- [start:views]
@require_GET
@ensure_csrf_cookie
def index(request: HttpRequest) -> HttpResponse:
    """The page a browser starts from: it sets the CSRF cookie the POSTs need."""
    return HttpResponse("POST tool calls to /tool-calls/, decisions to /tool-calls/resolve/\n")


urlpatterns = [
    path("", index),
    # POST tool-calls/ and tool-calls/resolve/; who may decide: may_decide=...
    path("", include(urls(registry))),
]
# --8<-- [end:views]


def request_id_middleware(
    get_response: t.Callable[[HttpRequest], HttpResponse],
) -> t.Callable[[HttpRequest], HttpResponse]:
    """Puts the request's id (header ``X-Request-Id``, or a new one) in ``request_id``."""

    def middleware(request: HttpRequest) -> HttpResponse:
        token = request_id.set(request.headers.get("X-Request-Id") or uuid.uuid4().hex)
        try:
            return get_response(request)
        finally:
            request_id.reset(token)

    return middleware


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "django_app")
    from django.core.management import execute_from_command_line

    if sys.argv[1:2] == ["runserver"]:
        execute_from_command_line([sys.argv[0], "createcachetable"])
    execute_from_command_line(sys.argv)
