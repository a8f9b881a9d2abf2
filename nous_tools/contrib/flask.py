"""Flask integration: the approval flow's two endpoints as a blueprint.

``pip install 'nous-tools[flask]'``, then::

    from flask import Flask
    from nous_tools.contrib.flask import blueprint

    app = Flask(__name__)
    app.config["NOUS_TOOLS_APPROVAL_SECRET"] = os.environ["NOUS_TOOLS_APPROVAL_SECRET"]
    app.register_blueprint(blueprint(registry), url_prefix="/agent")

- ``POST /tool-calls`` (the model's response, or ``{"tool_calls": [...]}``) → 200
  ``{"messages": [...]}`` in the shape the calls came in, or 202
  ``{"pending": [...], "batch": {...}}``;
- ``POST /tool-calls/resolve`` (``{"batch": ..., "decisions": {...}}``) → 200 / 202
  as above, 400 ``{"error": reason}`` for anything malformed, changed, forged or
  expired, 409 for a batch already decided, 403 when ``may_decide`` says no.

The answers are :class:`nous_tools.web.ToolCallEndpoints`'; see ``docs/how-to/web-apps.md``.
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
)
from nous_tools.run_context import RunContext

if t.TYPE_CHECKING:
    from nous_tools.providers._tool_calls import ToolCallResults
    from nous_tools.registry import Registry

__all__ = ["blueprint"]

#: The app config key that holds the key that signs paused batches.
SECRET_CONFIG = "NOUS_TOOLS_APPROVAL_SECRET"


def blueprint(
    registry: Registry,
    *,
    secret: str | bytes | None = None,
    wait: float | None = 30.0,
    run_id: c.Callable[[t.Any], str | None] = conversation_header,
    may_decide: c.Callable[[t.Any], bool] | None = None,
    show: c.Callable[[ToolCallResults], object] | None = None,
    name: str = "nous_tools",
) -> t.Any:
    """A Flask ``Blueprint`` with the approval flow's two endpoints for ``registry``.

    ``secret`` signs the paused batches (default: the app's
    ``NOUS_TOOLS_APPROVAL_SECRET`` config; registering the blueprint on an app
    without one raises ``RuntimeError``); ``wait`` is how long a call already
    running elsewhere is waited for; ``run_id(request)`` names the run the calls
    belong to, the journal's key (default: the ``X-Conversation-Id`` header);
    ``may_decide(request)`` says whether this request may decide (default: anyone
    who reaches the view — put it behind your authentication); ``show(result)`` is
    what a person is shown of the pending calls (default:
    ``result.pending_summary()``). ``name`` is the blueprint's (two blueprints on
    one app need two names).
    """
    from flask import Blueprint, current_app, request

    check_wait(wait)
    fixed = (
        ToolCallEndpoints(registry, secret, wait=wait, show=show) if secret is not None else None
    )
    served = Blueprint(name, __name__)
    key = f"{name}.endpoints"

    @served.record_once
    def configure(state: t.Any) -> None:
        if fixed is not None:
            state.app.extensions[key] = fixed
            return
        try:
            configured = configured_secret(
                state.app.config.get(SECRET_CONFIG),
                f"{SECRET_CONFIG} in the app's config",
                "blueprint(registry, secret=...)",
            )
        except ValueError as exc:
            raise RuntimeError(str(exc)) from None
        state.app.extensions[key] = ToolCallEndpoints(registry, configured, wait=wait, show=show)

    def answer(which: str) -> t.Any:
        endpoints: ToolCallEndpoints = current_app.extensions[key]
        try:
            body = read_json(request.get_data())
        except ValueError as exc:
            return {"error": str(exc)}, 400
        named = run_id(request)
        ctx = RunContext.new(run_id=named) if named else None
        if which == "calls":
            status, reply = endpoints.tool_calls(body, ctx)
        else:
            status, reply = endpoints.resolve(body, ctx)
        return reply, status

    @served.post("/tool-calls")
    def tool_calls() -> t.Any:
        return answer("calls")

    @served.post("/tool-calls/resolve")
    def resolve() -> t.Any:
        if may_decide is not None and not may_decide(request):
            return {"error": "you may not decide these calls"}, 403
        return answer("resolve")

    return served
