"""What a web view needs around :class:`~nous_tools.ToolCallResults`: the answer for
the model in the shape its calls came in, the pending calls as a page shows them to
a person, and that person's decisions read from a request body.

A Flask view with all three (``examples/flask_app.py`` is the complete app):

>>> from nous_tools import Registry, Tool, ToolCallResults, execute_tool_calls
>>> registry = Registry([Tool.from_function(lambda path: f"deleted {path}",
...                                         name="delete_file", approval="ask")])
>>> calls = [{"type": "tool_use", "id": "toolu_1", "name": "delete_file",
...           "input": {"path": "/tmp/x"}}]
>>> result = execute_tool_calls(registry, {"role": "assistant", "content": calls})
>>> result.pending_summary()
[{'id': 'toolu_1', 'call_id': 'toolu_1', 'tool': 'delete_file', 'description': '', 'arguments': {'path': '/tmp/x'}}]
>>> batch = result.to_dict("server-secret")  # 202: the summary and the batch go to the page
>>> body = {"batch": batch, "decisions": {"toolu_1": "approve"}}  # what the page posts back
>>> decisions = parse_decisions(body)  # ValueError (a 400) for anything else
>>> resolved = ToolCallResults.from_dict(body["batch"], registry, "server-secret")
>>> resolved.resolve(decisions).response_messages()  # 200: for the model, as it asked
[{'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': 'toolu_1', 'content': 'deleted /tmp/x', 'is_error': False}]}]
>>> parse_decisions({"batch": batch})
Traceback (most recent call last):
    ...
ValueError: cannot read the decisions: the body has no "decisions"; send {"decisions": {call_id: "approve" | "reject" | {"edit": {...}}}}
"""

from __future__ import annotations

import collections.abc as c
import typing as t

from nous_tools.approval import Edit, NeedsApproval

if t.TYPE_CHECKING:
    from nous_tools.providers._tool_calls import ToolCallResults

__all__ = ["parse_decisions", "pending_summary", "response_messages"]

_SHAPE = '{"decisions": {call_id: "approve" | "reject" | {"edit": {...}}}}'


def response_messages(
    results: ToolCallResults, *, include_pending: bool = False
) -> list[dict[str, t.Any]]:
    """The messages for the model in the shape its calls came in
    (:attr:`ToolCallResults.provider`): Chat Completions ``tool`` messages,
    Responses ``function_call_output`` items, or one Anthropic ``user`` message with
    the ``tool_result`` blocks (none when there is no block); Chat Completions when
    the shape is unknown (no calls, neutral :class:`~nous_tools.ToolCall` values, a
    mix). Append them to the conversation as they are."""
    if results.provider == "responses":
        return results.to_responses_items(include_pending=include_pending)
    if results.provider == "anthropic":
        message = results.to_anthropic_message(include_pending=include_pending)
        return [message] if message["content"] else []
    return results.to_openai_messages(include_pending=include_pending)


def _shown(value: object) -> object:
    """A value as a page shows it: JSON's own types (tuples and sets as lists, bytes
    decoded or as their repr, anything else as its repr)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, c.Mapping):
        return {str(key): _shown(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shown(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_shown(item) for item in value), key=repr)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return repr(value)
    return repr(value)


def pending_summary(results: ToolCallResults) -> list[dict[str, t.Any]]:
    """What a page shows a person about each call that waits for them, in call
    order: ``{"id", "call_id", "tool", "description", "arguments"}`` — the id to
    decide it by (the key of its decision, as in the batch's ``calls``; ``call_id``
    is the same id, kept for pages written before), the tool's name and
    description, and the arguments it would run with (as JSON values). Send it
    beside the signed batch; it carries nothing the batch needs back."""
    shown: list[dict[str, t.Any]] = []
    for pending in results.results:
        if not isinstance(pending, NeedsApproval):
            continue
        program = getattr(pending, "program", None)  # a code tool's paused program
        waiting = program.waiting if program is not None else (pending,)
        for each in waiting:
            entry = {
                "id": each.call_id,
                "call_id": each.call_id,
                "tool": each.tool.name,
                "description": each.tool.description,
                "arguments": _shown(each.arguments),
            }
            if program is not None:
                entry["program_call_id"] = pending.call_id
            shown.append(entry)
    return shown


def _refused(why: str) -> ValueError:
    return ValueError(f"cannot read the decisions: {why}")


def _decision(call_id: str, value: object) -> str | Edit:
    if isinstance(value, str):
        if value in ("approve", "reject"):
            return value
        shown = value if len(value) <= 40 else value[:37] + "..."
        raise _refused(
            f'the decision for call {call_id!r} is {shown!r}; expected "approve", '
            '"reject" or {"edit": {...}}'
        )
    if isinstance(value, Edit):
        return value
    if isinstance(value, c.Mapping) and list(value) == ["edit"]:
        arguments = value["edit"]
        if isinstance(arguments, c.Mapping):
            return Edit(dict(arguments))
        raise _refused(
            f"the edit of call {call_id!r} must hold the new arguments as an object, "
            f"got {type(arguments).__name__}"
        )
    raise _refused(
        f'the decision for call {call_id!r} must be "approve", "reject" or '
        f'{{"edit": {{...}}}}, got {type(value).__name__}'
    )


def parse_decisions(body: object) -> dict[str, str | Edit]:
    """A person's decisions from a request body (its parsed JSON):
    ``{"decisions": {call_id: "approve" | "reject" | {"edit": {<arguments>}}}}``
    (other keys, such as the batch, are left alone) becomes ``{call_id: "approve" |
    "reject" | Edit(arguments)}`` for :meth:`ToolCallResults.resolve`.

    Anything else raises one ``ValueError`` saying what is wrong — a body that is
    not an object, no ``"decisions"`` or an empty one, a call id that is not a
    string, a decision of another kind — so a view answers it with 400. Whether the
    call ids and edits fit the batch is :meth:`ToolCallResults.resolve`'s to check
    (also a ``ValueError``)."""
    if not isinstance(body, c.Mapping):
        raise _refused(f"the body must be a JSON object, got {type(body).__name__}; send {_SHAPE}")
    if "decisions" not in body:
        raise _refused(f'the body has no "decisions"; send {_SHAPE}')
    raw = body["decisions"]
    if not isinstance(raw, c.Mapping):
        raise _refused(
            f'"decisions" must map call ids to decisions, got {type(raw).__name__}; send {_SHAPE}'
        )
    if not raw:
        raise _refused('"decisions" is empty: decide at least one call')
    decisions: dict[str, str | Edit] = {}
    for call_id, value in raw.items():
        if not isinstance(call_id, str) or not call_id:
            raise _refused(f"a call id must be a non-empty string, got {call_id!r}")
        decisions[call_id] = _decision(call_id, value)
    return decisions
