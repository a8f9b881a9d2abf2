"""A served call's way back to its MCP client: ``ctx.sample``, ``ctx.elicit``,
``ctx.roots`` and ``ctx.ask_all``, and the SSE stream of the call.

Each ``tools/call`` gets a :class:`Peer`; the served :class:`~nous_tools.RunContext`
puts its questions (:class:`~nous_tools.Question`) to it, so a tool's questions (from
its worker thread) become:

* **protocol 2025-11-25 and before:** server-to-client requests
  (``sampling/createMessage``, ``elicitation/create``, ``roots/list``) on the call's
  stream, one after another, sent from the server's event loop; the tool's thread
  waits for each answer (the client cancelling the call, or the connection closing,
  ends the wait);
* **2026-07-28:** the multi-round-trip form. The questions end this round: the call
  answers with an ``InputRequiredResult`` naming them (by the keys the tool gave,
  else ``nous_tools.ask.N``), and the client retries the call with the answers. The
  tool then runs again from the start; each question it asked before is answered
  from the round's ``requestState`` (which carries the answers so far, and which the
  server signs and binds to the tool name and arguments), so the tool gets past it
  and reaches the next question or its result. A question that changed between
  rounds is asked again. A first call (no ``requestState``) may carry the answer to a
  question the tool names, under its key: it is taken as if asked.
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
from nous_tools.asking import Elicitation, Question, Root
from nous_tools.errors import (
    ElicitationUnavailable,
    RootsUnavailable,
    SamplingUnavailable,
    ToolCancelled,
)

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
    #: "approval" while the round asks to approve the call.
    asking: str | None = None
    #: The questions awaiting an answer: key -> digest.
    waiting: dict[str, str] = attrs.field(factory=dict)
    #: The answers so far, in the order the tool asked: [key, digest, answer].
    answers: list[list[t.Any]] = attrs.field(factory=list)
    #: Answers to questions asked together with some still waiting: key -> [digest, answer].
    given: dict[str, list[t.Any]] = attrs.field(factory=dict)

    def seal(self, secret: bytes, name: str, arguments: c.Mapping[str, t.Any]) -> str:
        payload = json.dumps(
            {
                "v": 2,
                "iat": time.time(),
                "approved": self.approved,
                "asking": self.asking,
                "waiting": self.waiting,
                "answers": self.answers,
                "given": self.given,
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
            if data.get("v") != 2:  # ours, from an older server: nothing in it counts
                return None
            issued = float(data["iat"])
            state = cls(
                approved=data["approved"] is True,
                asking=data["asking"] if isinstance(data["asking"], str) else None,
                waiting={str(k): str(v) for k, v in data["waiting"].items()},
                answers=[list(a) for a in data["answers"]],
                given={str(k): list(v) for k, v in data["given"].items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            raise StateRejected() from None
        if not (time.time() - STATE_TTL <= issued <= time.time() + 60):
            return None
        return state


def _mac(secret: bytes, name: str, arguments: c.Mapping[str, t.Any], payload: bytes) -> str:
    bound = NeedsApproval.compute_fingerprint(name, dict(arguments), secret).encode()
    return hmac.new(secret, _STATE_LABEL + bound + b"\x00" + payload, hashlib.sha256).hexdigest()


#: What a question is to the client: its request.
ClientRequest = types.CreateMessageRequest | types.ElicitRequest | types.ListRootsRequest


def _digest(request: ClientRequest) -> str:
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


def _can_list_roots(capabilities: types.ClientCapabilities | None) -> bool:
    return capabilities is not None and capabilities.roots is not None


def check_capabilities(
    questions: c.Iterable[Question],
    capabilities: types.ClientCapabilities | None,
    missing: dict[str, dict[str, t.Any]] | None = None,
) -> None:
    """Raise the ``...Unavailable`` error of the first question the client did not
    declare it can answer (noting the capability in ``missing``), before any is asked."""
    for question in questions:
        if question.kind == "sample" and not _can_sample(capabilities):
            if missing is not None:
                missing["sampling"] = {}
            raise SamplingUnavailable(
                "ctx.sample cannot ask the MCP client: it did not declare the sampling capability"
            )
        if question.kind == "elicit" and not can_elicit(capabilities):
            if missing is not None:
                missing["elicitation"] = {"form": {}}
            raise ElicitationUnavailable(
                "ctx.elicit cannot ask the MCP client: it did not declare form elicitation"
            )
        if question.kind == "roots" and not _can_list_roots(capabilities):
            if missing is not None:
                missing["roots"] = {}
            raise RootsUnavailable(
                "ctx.roots cannot ask the MCP client: it did not declare the roots capability"
            )


def request_of(question: Question) -> ClientRequest:
    """``question`` as the client's request."""
    if question.kind == "sample":
        return sampling_request(
            list(question.messages), question.max_tokens, question.system, question.temperature
        )
    if question.kind == "elicit":
        return types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=question.message, requested_schema=dict(question.schema)
            )
        )
    return types.ListRootsRequest()


#: The answer each kind of question takes.
_RESULTS: dict[str, type[types.Result]] = {
    "sample": types.CreateMessageResult,
    "elicit": types.ElicitResult,
    "roots": types.ListRootsResult,
}


def answer_of(question: Question, result: object) -> t.Any:
    """The client's answer (a result, or its JSON) as the tool gets it: a ``str``, an
    :class:`Elicitation` or a tuple of :class:`Root`."""
    if not isinstance(result, types.Result):
        result = _RESULTS[question.kind].model_validate(result)
    if isinstance(result, types.CreateMessageResult):
        content = result.content
        if isinstance(content, types.TextContent):
            return content.text
        raise SamplingUnavailable(
            f"ctx.sample: the MCP client answered with {type(content).__name__}, not text"
        )
    if isinstance(result, types.ElicitResult):
        accepted = result.action == "accept"
        return Elicitation(result.action, dict(result.content or {}) if accepted else None)
    if isinstance(result, types.ListRootsResult):
        return tuple(Root(str(root.uri), root.name) for root in result.roots)
    raise TypeError(f"an MCP client's answer of type {type(result).__name__}")


def _fits(question_kind: str, answer: dict[str, t.Any]) -> bool:
    try:
        _RESULTS[question_kind].model_validate(answer)
    except ValueError:  # pydantic's ValidationError is a ValueError
        return False
    return True


_KINDS = {"sampling/createMessage": "sample", "elicitation/create": "elicit", "roots/list": "roots"}


class Peer:
    """One served call's client: where the call's questions go."""

    def __init__(
        self,
        request: t.Any,
        link: _CancelLink,
        *,
        modern: bool,
        state: RoundState | None,
        responses: c.Mapping[str, t.Any] | None,
        stated: bool = False,
    ) -> None:
        self._request = request  # the SDK's ServerRequestContext
        self._loop = asyncio.get_running_loop()
        self._link = link
        self.modern = modern
        self.state = state if state is not None else RoundState()
        self._responses = dict(responses or {})
        #: Whether the call carried a requestState (then only it says what was asked).
        self._stated = stated
        self._asked = 0
        #: 2026-07-28: the questions that end this round, keyed for input_requests.
        self.pending: dict[str, ClientRequest] = {}
        #: The client capabilities a question needed and the client did not declare.
        self.missing: dict[str, dict[str, t.Any]] = {}

    # -- the questions -----------------------------------------------------------------

    def pose(self, questions: list[tuple[str | None, Question]]) -> list[t.Any]:
        """Ask ``questions`` (``(key or None, question)``) of the client; the answers."""
        session = self._request.session
        check_capabilities((q for _, q in questions), session.client_capabilities, self.missing)
        if self.modern:
            base = self._asked
            keyed = [
                (key if key is not None else f"{ASK_KEY}{base + i}", request_of(q))
                for i, (key, q) in enumerate(questions)
            ]
            answers = self._round(keyed)
        else:
            answers = [self._wait(self._send(request_of(q))) for _, q in questions]
        return [answer_of(q, a) for (_, q), a in zip(questions, answers, strict=True)]

    def sample(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        system: str | None = None,
        temperature: float | None = None,
    ) -> str:
        """``ctx.sample`` of a served call (its ``sampler``)."""
        question = Question.sample(
            messages, max_tokens=max_tokens, system=system, temperature=temperature
        )
        text: str = self.pose([(None, question)])[0]
        return text

    def elicit(self, message: str, schema: c.Mapping[str, t.Any]) -> Elicitation:
        """``ctx.elicit`` of a served call (its ``elicitor``)."""
        answer: Elicitation = self.pose([(None, Question.elicit(message, schema))])[0]
        return answer

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

    def _send(self, request: ClientRequest) -> c.Coroutine[t.Any, t.Any, t.Any]:
        """2025-11-25: the server-to-client request of a question, on the call's stream."""
        session = self._request.session
        if isinstance(request, types.ElicitRequest):
            params = t.cast(types.ElicitRequestFormParams, request.params)
            return t.cast(
                c.Coroutine[t.Any, t.Any, t.Any],
                session.elicit_form(
                    params.message,
                    dict(params.requested_schema),
                    related_request_id=self._request.request_id,
                ),
            )
        result = (
            types.CreateMessageResult
            if isinstance(request, types.CreateMessageRequest)
            else types.ListRootsResult
        )
        return t.cast(
            c.Coroutine[t.Any, t.Any, t.Any],
            session.send_request(
                request,
                result,
                metadata=ServerMessageMetadata(related_request_id=self._request.request_id),
            ),
        )

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

    def _round(self, questions: list[tuple[str, ClientRequest]]) -> list[t.Any]:
        """2026-07-28: the answers to the tool's next questions (asked together), from
        this round's state or the client's responses; else end the round asking those
        still unanswered."""
        base = self._asked
        self._asked += len(questions)
        digests = [_digest(request) for _, request in questions]
        answers = self.state.answers
        got: list[t.Any] = []
        for i, (key, _) in enumerate(questions):
            position = base + i
            if position < len(answers) and answers[position][:2] == [key, digests[i]]:
                got.append(answers[position][2])
                continue
            del answers[position:]  # the tool asked something else this time
            break
        fresh: dict[int, t.Any] = {}
        for i in range(len(got), len(questions)):
            key, request = questions[i]
            answer = self._response(key, digests[i], _KINDS[request.method])
            given = self.state.given.get(key)
            if answer is None and given is not None and given[0] == digests[i]:
                answer = given[1]
            if answer is not None:
                fresh[i] = answer
        unanswered = [i for i in range(len(got), len(questions)) if i not in fresh]
        if not unanswered:
            for i in range(len(got), len(questions)):
                answers.append([questions[i][0], digests[i], fresh[i]])
                got.append(fresh[i])
            for key, _ in questions:
                self.state.waiting.pop(key, None)
                self.state.given.pop(key, None)
            return got
        self.pending = {questions[i][0]: questions[i][1] for i in unanswered}
        self.state.waiting = {questions[i][0]: digests[i] for i in unanswered}
        self.state.given = {questions[i][0]: [digests[i], a] for i, a in fresh.items()}
        raise InputRequired()

    def _response(self, key: str, digest: str, kind: str) -> dict[str, t.Any] | None:
        """The client's answer to the question ``key`` (as JSON), when it counts: the
        round asked exactly this question under that key, or (on a first call) the
        tool named it; and it is an answer of the right kind. Else None."""
        response = self._responses.get(key)
        if response is None:
            return None
        asked = self.state.waiting.get(key)
        if asked is None:
            if self._stated or key.startswith(ASK_KEY):
                return None
        elif asked != digest:
            return None
        answer: dict[str, t.Any] = response.model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        return answer if _fits(kind, answer) else None
