"""A served call's way back to its MCP client: ``ctx.sample``, ``ctx.elicit``, and the
SSE stream of the call.

Each ``tools/call`` gets a :class:`Peer`; the served :class:`~nous_tools.RunContext`
carries its ``sample`` and ``elicit`` as ``sampler`` and ``elicitor``, so a tool's
``ctx.sample``/``ctx.elicit`` (from its worker thread) become:

* **protocol 2025-11-25 and before:** a server-to-client request
  (``sampling/createMessage``, ``elicitation/create``) on the call's stream, sent
  from the server's event loop; the tool's thread waits for the answer (the client
  cancelling the call, or the connection closing, ends the wait);
* **2026-07-28:** the multi-round-trip form. The question ends this round: the call
  answers with an ``InputRequiredResult`` naming it, and the client retries the call
  with the answer. The tool then runs again from the start; each question it asked
  before is answered from the round's ``requestState`` (which carries the answers so
  far, and which the server signs and binds to the tool name and arguments), so the
  tool gets past it and reaches the next question or its result. A question that
  changed between rounds is asked again.
"""

from __future__ import annotations

import asyncio
import base64
import collections.abc as c
import concurrent.futures
import hashlib
import hmac
import json
import time
import typing as t

import attrs
import mcp_types as types
from mcp.shared.message import ServerMessageMetadata

from nous_tools.approval import NeedsApproval
from nous_tools.asking import Elicitation
from nous_tools.errors import ElicitationUnavailable, SamplingUnavailable, ToolCancelled

if t.TYPE_CHECKING:
    from nous_tools.contrib.mcp._serve import _CancelLink

#: Key prefix of the questions a tool asks, in ``InputRequiredResult.input_requests``.
ASK_KEY = "nous_tools.ask."
#: How long (seconds) a round's ``requestState`` stays valid: the person may take a while.
STATE_TTL = 3600.0
#: How often a waiting tool thread looks at the call's cancellation.
_POLL = 0.05
_STATE_LABEL = b"nous-tools/mcp/request-state/v1\x00"


class InputRequired(BaseException):
    """Raised in a served tool (2026-07-28) when it asks a question the round has no
    answer for: the round ends and the client is asked. A ``BaseException``, so a
    tool's ``except Exception`` cannot swallow the question."""

    def __str__(self) -> str:
        return (
            "the tool asked its MCP client a question (2026-07-28 multi-round-trip); "
            "it runs again with the answer"
        )


class StateRejected(ValueError):
    """A round's ``requestState`` that fails its integrity check (2026-07-28): the
    call is refused with ``-32602``, never run on what the client sent."""

    def __str__(self) -> str:
        return (
            "requestState failed its integrity check: it was changed, is not this "
            "server's, or belongs to another call (other tool or arguments)"
        )


@attrs.define
class RoundState:
    """What a 2026-07-28 round carries to the next one (in ``requestState``)."""

    approved: bool = False
    #: The question awaiting an answer: "approval", or "N:digest" for ask number N.
    asking: str | None = None
    #: The answers so far, in the order the tool asked: [digest, answer].
    answers: list[list[t.Any]] = attrs.field(factory=list)

    def seal(self, secret: bytes, name: str, arguments: c.Mapping[str, t.Any]) -> str:
        payload = json.dumps(
            {
                "v": 1,
                "iat": time.time(),
                "approved": self.approved,
                "asking": self.asking,
                "answers": self.answers,
            },
            separators=(",", ":"),
            sort_keys=True,
        ).encode()
        mac = _mac(secret, name, arguments, payload)
        return base64.urlsafe_b64encode(payload).decode().rstrip("=") + "." + mac

    @classmethod
    def read(
        cls, token: object, secret: bytes, name: str, arguments: c.Mapping[str, t.Any]
    ) -> RoundState | None:
        """The state a client echoed, or None when it has expired (nothing in it counts:
        the tool asks again). Raises :class:`StateRejected` when it fails its integrity
        check: not ours, edited, or for another call (other tool or arguments)."""
        if not isinstance(token, str) or "." not in token:
            raise StateRejected()
        encoded, _, mac = token.rpartition(".")
        try:
            payload = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            expected = _mac(secret, name, arguments, payload)
        except (ValueError, TypeError):
            raise StateRejected() from None
        if not hmac.compare_digest(mac.encode(), expected.encode()):
            raise StateRejected()
        try:
            data = json.loads(payload)
            issued = float(data["iat"])
            state = cls(
                approved=data["approved"] is True,
                asking=data["asking"] if isinstance(data["asking"], str) else None,
                answers=[list(a) for a in data["answers"]],
            )
        except (ValueError, KeyError, TypeError):
            raise StateRejected() from None
        if not (time.time() - STATE_TTL <= issued <= time.time() + 60):
            return None
        return state


def _mac(secret: bytes, name: str, arguments: c.Mapping[str, t.Any], payload: bytes) -> str:
    bound = NeedsApproval.compute_fingerprint(name, dict(arguments), secret).encode()
    return hmac.new(secret, _STATE_LABEL + bound + b"\x00" + payload, hashlib.sha256).hexdigest()


def _digest(request: types.CreateMessageRequest | types.ElicitRequest) -> str:
    shown = request.model_dump(mode="json", by_alias=True, exclude_none=True)
    text = json.dumps(shown, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _can_sample(capabilities: types.ClientCapabilities | None) -> bool:
    return capabilities is not None and capabilities.sampling is not None


def sampling_request(
    messages: list[dict[str, str]],
    max_tokens: int,
    system: str | None,
    temperature: float | None,
) -> types.CreateMessageRequest:
    """``ctx.sample``'s question as the client's ``sampling/createMessage``."""
    params = types.CreateMessageRequestParams(
        messages=[
            types.SamplingMessage(role=m["role"], content=types.TextContent(text=m["content"]))  # type: ignore[arg-type]
            for m in messages
        ],
        max_tokens=max_tokens,
        system_prompt=system,
        temperature=temperature,
    )
    return types.CreateMessageRequest(params=params)


def can_elicit(capabilities: types.ClientCapabilities | None) -> bool:
    """True when the client declared form elicitation (a bare ``elicitation: {}``
    counts as form support, as the spec says; URL-only does not)."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


class Peer:
    """One served call's client: where the call's ``ctx.sample``/``ctx.elicit`` go."""

    def __init__(
        self,
        request: t.Any,
        link: _CancelLink,
        *,
        modern: bool,
        state: RoundState | None,
        responses: c.Mapping[str, t.Any] | None,
    ) -> None:
        self._request = request  # the SDK's ServerRequestContext
        self._loop = asyncio.get_running_loop()
        self._link = link
        self.modern = modern
        self.state = state if state is not None else RoundState()
        self._responses = dict(responses or {})
        self._asked = 0
        #: 2026-07-28: the question that ends this round, keyed for input_requests.
        self.pending: dict[str, types.InputRequest] = {}
        #: The client capabilities a question needed and the client did not declare.
        self.missing: dict[str, dict[str, t.Any]] = {}

    # -- the two questions -------------------------------------------------------------

    def sample(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        system: str | None = None,
        temperature: float | None = None,
    ) -> str:
        """``ctx.sample`` of a served call: the client's ``sampling/createMessage``."""
        session = self._request.session
        if not _can_sample(session.client_capabilities):
            self.missing["sampling"] = {}
            raise SamplingUnavailable(
                "ctx.sample cannot ask the MCP client: it did not declare the sampling capability"
            )
        request = sampling_request(messages, max_tokens, system, temperature)
        if self.modern:
            answer = self._ask_round(request)
            result = types.CreateMessageResult.model_validate(answer)
        else:
            result = self._wait(
                session.send_request(
                    request,
                    types.CreateMessageResult,
                    metadata=ServerMessageMetadata(related_request_id=self._request.request_id),
                )
            )
        content = result.content
        if isinstance(content, types.TextContent):
            return content.text
        raise SamplingUnavailable(
            f"ctx.sample: the MCP client answered with {type(content).__name__}, not text"
        )

    def elicit(self, message: str, schema: c.Mapping[str, t.Any]) -> Elicitation:
        """``ctx.elicit`` of a served call: the client's ``elicitation/create``."""
        session = self._request.session
        if not can_elicit(session.client_capabilities):
            self.missing["elicitation"] = {"form": {}}
            raise ElicitationUnavailable(
                "ctx.elicit cannot ask the MCP client: it did not declare form elicitation"
            )
        form = dict(schema)
        if self.modern:
            request = types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=message, requested_schema=form)
            )
            result = types.ElicitResult.model_validate(self._ask_round(request))
        else:
            result = self._wait(
                session.elicit_form(message, form, related_request_id=self._request.request_id)
            )
        content = dict(result.content) if result.action == "accept" and result.content else None
        if result.action == "accept" and content is None:
            content = {}
        return Elicitation(result.action, content)

    # -- the SSE stream ----------------------------------------------------------------

    def close_sse_stream(self) -> bool:
        """Close this call's SSE stream (Streamable HTTP with resumability): the client
        reconnects after the stream's ``retry`` interval and gets the rest, the result
        included. False when the transport offers no such stream."""
        close = self._request.close_sse_stream
        if close is None:
            return False
        self._wait(close())
        return True

    # -- internals ---------------------------------------------------------------------

    def _wait(self, coroutine: c.Coroutine[t.Any, t.Any, t.Any]) -> t.Any:
        """Run ``coroutine`` on the server's loop; wait for it in this (tool) thread,
        ending the wait when the client cancels the call."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            while True:
                try:
                    return future.result(_POLL)
                except concurrent.futures.TimeoutError:
                    if self._link.cancelled.is_set():
                        raise ToolCancelled("the MCP client cancelled the call") from None
        except BaseException:
            future.cancel()  # our deadline, the client's cancellation, or an error
            raise

    def _ask_round(self, request: types.CreateMessageRequest | types.ElicitRequest) -> t.Any:
        """2026-07-28: the answer to the tool's next question, from this round's state
        or the client's responses; else end the round with the question."""
        index = self._asked
        self._asked += 1
        digest = _digest(request)
        answers = self.state.answers
        if index < len(answers):
            if answers[index][0] == digest:
                return answers[index][1]
            del answers[index:]  # the tool asked something else this time
        key = f"{ASK_KEY}{index}"
        response = self._responses.get(key)
        if self.state.asking == f"{index}:{digest}" and response is not None:
            answer = response.model_dump(mode="json", by_alias=True, exclude_none=True)
            answers.append([digest, answer])
            return answer
        self.pending = {key: request}
        self.state.asking = f"{index}:{digest}"
        raise InputRequired()
