"""The approval flow as Django views: :func:`urls` (the public path is
``nous_tools.contrib.django.urls``), and the system checks of a site that serves it.

The answers are :class:`nous_tools.web.ToolCallEndpoints`'; here the request is read, who
may decide is asked, and the answer is written as a ``JsonResponse``.
"""

from __future__ import annotations

import collections.abc as c
import typing as t

from nous_tools.providers._endpoints import (
    ToolCallEndpoints,
    check_wait,
    configured_secret,
    conversation_header,
    read_json,
    usable_secret,
)
from nous_tools.run_context import RunContext

if t.TYPE_CHECKING:
    from nous_tools.providers._tool_calls import ToolCallResults
    from nous_tools.registry import Registry

__all__ = ["check_views", "urls"]

#: The setting that holds the key that signs paused batches.
SECRET_SETTING = "NOUS_TOOLS_APPROVAL_SECRET"

#: The attribute of a view :func:`urls` made: ``(registry, secret given or None)``,
#: what the system checks look for in the site's URLconf.
_SERVED = "nous_tools_served"


def _secret(given: str | bytes | None) -> str | bytes:
    if given is not None:
        return given
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        return configured_secret(
            getattr(settings, SECRET_SETTING, None),
            f"{SECRET_SETTING} in the settings",
            "urls(registry, secret=...)",
        )
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def urls(
    registry: Registry,
    *,
    secret: str | bytes | None = None,
    wait: float | None = 30.0,
    run_id: c.Callable[[t.Any], str | None] = conversation_header,
    may_decide: c.Callable[[t.Any], bool] | None = None,
    show: c.Callable[[ToolCallResults], object] | None = None,
    csrf_exempt: bool = False,
) -> list[t.Any]:
    """The URL patterns of the approval flow for ``registry``, to ``include()``:

    - ``tool-calls/`` (POST the model's response, or ``{"tool_calls": [...]}``) →
      200 ``{"messages": [...]}`` in the shape the calls came in, or 202
      ``{"pending": [...], "batch": {...}}``;
    - ``tool-calls/resolve/`` (POST ``{"batch": ..., "decisions": {...}}``) → 200 /
      202 as above, 400 ``{"error": reason}`` for anything malformed, changed,
      forged or expired, 409 for a batch already decided, 403 when ``may_decide``
      says no.

    ``secret`` signs the paused batches (default: ``settings.NOUS_TOOLS_APPROVAL_SECRET``,
    read at each request); ``wait`` is how long a call already running elsewhere is
    waited for; ``run_id(request)`` names the run the calls belong to, the journal's
    key (default: the ``X-Conversation-Id`` header); ``may_decide(request)`` says
    whether this request may decide (default: anyone who reaches the view — put the
    views behind your authentication); ``show(result)`` is what a person is shown of
    the pending calls (default: ``result.pending_summary()``). The views are POST
    only and keep Django's CSRF protection unless ``csrf_exempt=True`` (an API
    authenticated by tokens, not cookies).
    """
    from django.core import checks
    from django.http import HttpRequest, HttpResponse, JsonResponse
    from django.urls import path
    from django.views.decorators.csrf import csrf_exempt as exempt
    from django.views.decorators.http import require_POST

    check_wait(wait)  # a bad option fails here, not at each request
    fixed = (
        ToolCallEndpoints(registry, secret, wait=wait, show=show) if secret is not None else None
    )
    checks.register(check_views)  # (NousToolsConfig registers it at Django's start)

    def endpoints() -> ToolCallEndpoints:
        if fixed is not None:
            return fixed
        return ToolCallEndpoints(registry, _secret(None), wait=wait, show=show)  # the setting, now

    def answer(request: HttpRequest, which: str) -> HttpResponse:
        try:
            body = read_json(request.body)
        except ValueError as exc:
            return JsonResponse({"error": str(exc)}, status=400)
        name = run_id(request)
        ctx = RunContext.new(run_id=name) if name else None
        served = endpoints()
        status, reply = (
            served.tool_calls(body, ctx) if which == "calls" else served.resolve(body, ctx)
        )
        return JsonResponse(reply, status=status)

    def tool_calls(request: HttpRequest) -> HttpResponse:
        return answer(request, "calls")

    def resolve(request: HttpRequest) -> HttpResponse:
        if may_decide is not None and not may_decide(request):
            return JsonResponse({"error": "you may not decide these calls"}, status=403)
        return answer(request, "resolve")

    views = [require_POST(tool_calls), require_POST(resolve)]
    if csrf_exempt:
        views = [exempt(view) for view in views]
    for view in views:
        setattr(view, _SERVED, (registry, secret))
    return [
        path("tool-calls/", views[0], name="nous_tools_tool_calls"),
        path("tool-calls/resolve/", views[1], name="nous_tools_resolve"),
    ]


def check_views(app_configs: object = None, **kwargs: object) -> list[t.Any]:
    """Django's system checks for the views :func:`urls` serves: a secret to sign
    batches with, and the table of a database cache the approval store uses."""
    from django.conf import settings
    from django.core import checks
    from django.urls import get_resolver

    try:
        served = list(_served(get_resolver().url_patterns))
    except Exception:  # a broken URLconf is Django's own check to report
        return []
    errors: list[t.Any] = []
    unsigned = any(given is None for _, given in served)
    if unsigned and not usable_secret(getattr(settings, SECRET_SETTING, None)):
        errors.append(
            checks.Error(
                f"{SECRET_SETTING} is not set: the approval views cannot sign paused batches.",
                hint=f"Set {SECRET_SETTING} to a long random string, the same in every "
                "process of the site, and keep it secret.",
                id="nous_tools.E001",
            )
        )
    for registry in {id(registry): registry for registry, _ in served}.values():
        missing = _missing_cache_table(registry.approval_store)
        if missing is not None:
            errors.append(
                checks.Error(
                    f"The approval store's database cache table {missing!r} does not exist.",
                    hint="Run: python manage.py createcachetable",
                    id="nous_tools.E002",
                )
            )
    return errors


def _served(patterns: c.Iterable[t.Any]) -> c.Iterator[tuple[Registry, str | bytes | None]]:
    """What each view of :func:`urls` in ``patterns`` (a URLconf's, walked through
    its includes) serves."""
    for pattern in patterns:
        inner = getattr(pattern, "url_patterns", None)
        if inner is not None:
            yield from _served(inner)
            continue
        served = getattr(getattr(pattern, "callback", None), _SERVED, None)
        if served is not None:
            yield served


def _missing_cache_table(store: object) -> str | None:
    """The table of a database cache ``store`` uses, when it does not exist."""
    from nous_tools.contrib.django import CacheApprovalStore

    if not isinstance(store, CacheApprovalStore):
        return None
    from django.core.cache.backends.db import DatabaseCache
    from django.db import connections, router

    try:
        cache = store.cache
    except Exception:  # refused: the store says why at its first claim
        return None
    if not isinstance(cache, DatabaseCache):
        return None
    table = cache._table
    database = router.db_for_read(cache.cache_model_class)
    with connections[database].cursor() as cursor:
        tables = connections[database].introspection.table_names(cursor)
    return None if table in tables else str(table)
