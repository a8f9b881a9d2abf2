"""The approval flow's two endpoints, whatever the web framework (private; the
public path is ``nous_tools.web``).

:class:`ToolCallEndpoints` answers a request body with a status and a JSON body; the
framework's adapters (``nous_tools.contrib.django.urls``,
``nous_tools.contrib.flask.blueprint``) read the request, ask who may decide, and
write the answer.

- ``tool_calls``: the model's response (an OpenAI ``ChatCompletion`` or its message,
  a Responses ``Response``, an Anthropic ``Message``) or ``{"tool_calls": [...]}``
  → 200 ``{"messages": [...]}`` in the shape the calls came in, or 202
  ``{"pending": [...], "batch": {...}}`` when some wait for a person.
- ``resolve``: ``{"batch": ..., "decisions": {...}}`` → 200 / 202 as above; 400
  ``{"error": reason}`` for anything malformed, changed, forged or expired (nothing
  ran); 409 for a batch already decided.

>>> from nous_tools import Registry, Tool
>>> registry = Registry([Tool.from_function(lambda path: f"deleted {path}",
...                                         name="delete_file", approval="ask")])
>>> endpoints = ToolCallEndpoints(registry, secret="server-secret")
>>> calls = {"tool_calls": [{"id": "call_1", "type": "function", "function": {
...     "name": "delete_file", "arguments": '{"path": "/tmp/x"}'}}]}
>>> status, body = endpoints.tool_calls(calls)
>>> status, body["pending"][0]["tool"]
(202, 'delete_file')
>>> endpoints.resolve({"batch": body["batch"], "decisions": {"call_1": "approve"}})
(200, {'messages': [{'role': 'tool', 'tool_call_id': 'call_1', 'content': 'deleted /tmp/x'}]})
>>> endpoints.resolve({"batch": body["batch"], "decisions": {"call_1": "approve"}})[0]
409
"""

from __future__ import annotations

import collections.abc as c
import json
import typing as t

import attrs

from nous_tools.errors import BatchAlreadyResolved, JournalConflict
from nous_tools.providers._tool_calls import ToolCallResults, execute_tool_calls
from nous_tools.providers._web import parse_decisions
from nous_tools.run_context import RunContext

if t.TYPE_CHECKING:
    from nous_tools.registry import Registry

__all__ = [
    "ToolCallEndpoints",
    "check_wait",
    "configured_secret",
    "conversation_header",
    "read_json",
    "usable_secret",
]

#: An answer: the HTTP status and the JSON body.
Answer = tuple[int, dict[str, t.Any]]

_EXPECTED = 'expected the model\'s response, or {"tool_calls": [...]}'


def conversation_header(request: t.Any) -> str | None:
    """The run id of a web request (Django's or Flask's): its ``X-Conversation-Id``
    header, if any — the call journal's key for the calls it carries."""
    return request.headers.get("X-Conversation-Id") or None


def read_json(raw: bytes | str) -> object:
    """A request body's JSON, or a ``ValueError`` saying it is not JSON (a 400)."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"the body is not JSON ({exc})") from None


def usable_secret(value: object) -> bool:
    """Whether ``value`` can sign paused batches: a non-empty str or bytes."""
    return isinstance(value, (str, bytes)) and bool(value)


def configured_secret(configured: object, where: str, option: str) -> str | bytes:
    """A framework's configured signing secret (``configured``: the setting's value),
    or a ``ValueError`` saying to set ``where`` or pass ``option``."""
    if not usable_secret(configured):
        raise ValueError(
            f"set {where} (a long random string, the same in every process of the site; "
            f"it signs paused batches), or pass {option}"
        )
    return t.cast("str | bytes", configured)


def _check_secret(secret: object) -> None:
    if secret is not None and not usable_secret(secret):
        raise TypeError(
            f"secret must be a non-empty str or bytes (the key that signs paused batches), "
            f"got {type(secret).__name__}"
        )


def check_wait(wait: object) -> None:
    """``ValueError`` unless ``wait`` is seconds >= 0 or None."""
    if wait is not None and (type(wait) not in (int, float) or not t.cast(float, wait) >= 0):
        raise ValueError(f"wait must be a number of seconds >= 0 or None, got {wait!r}")


@attrs.frozen
class ToolCallEndpoints:
    """The two endpoints of the approval flow for ``registry``.

    ``secret`` signs and checks the paused batches (keep it on the server, shared by
    the site's processes); ``wait`` (seconds) is how long a call that is already
    running elsewhere (a retried request, a double click) is waited for when the
    calls are journaled (``ctx.run_id``); ``show`` turns a paused result into what
    a person is shown (default :meth:`ToolCallResults.pending_summary`).
    """

    registry: Registry
    secret: str | bytes = attrs.field(validator=lambda _s, _a, v: _check_secret(v))
    wait: float | None = attrs.field(default=30.0, validator=lambda _s, _a, v: check_wait(v))
    show: c.Callable[[ToolCallResults], object] | None = None

    def reply(self, result: ToolCallResults) -> Answer:
        """200 and the messages for the model, or 202 and what a person must decide."""
        if result.pending:
            shown = result.pending_summary() if self.show is None else self.show(result)
            return 202, {"pending": shown, "batch": result.to_dict(self.secret)}
        return 200, {"messages": result.response_messages()}

    def tool_calls(self, body: object, ctx: RunContext[t.Any] | None = None) -> Answer:
        """Run the calls of ``body`` (its parsed JSON) in ``ctx``."""
        if not isinstance(body, c.Mapping):
            return 400, {"error": _EXPECTED}
        calls = body.get("tool_calls", body)
        try:
            result = execute_tool_calls(self.registry, calls, ctx, wait=self.wait)
        except (TypeError, ValueError) as exc:  # not a response or a list of calls
            return 400, {"error": str(exc)}
        return self.reply(result)

    def resolve(self, body: object, ctx: RunContext[t.Any] | None = None) -> Answer:
        """Apply a person's decisions (``body``: the batch as it was sent, and the
        decisions) once, in ``ctx``."""
        try:
            decisions = parse_decisions(body)
            batch = t.cast(c.Mapping[str, t.Any], body).get("batch")
            paused = ToolCallResults.from_dict(batch, self.registry, self.secret)
            resolved = paused.resolve(decisions, ctx, wait=self.wait)
        except (BatchAlreadyResolved, JournalConflict):  # JournalConflict: other arguments
            return 409, {"error": "this batch was already decided"}
        except ValueError as exc:  # malformed, changed, forged, expired: nothing ran
            return 400, {"error": str(exc)}
        return self.reply(resolved)
