"""The paused batch's wire format, version 2 (issue 26, approval read-back speed):
one signature, each thing said once — and every field still bound by it. Version 1
(each pending call's own signed token nested in the signed batch) is still read, so
that batches in flight across an upgrade are not lost.

The attacks on batches in general (a result rewritten, calls removed or reordered,
replays, expiry, another registry...) are in ``tests/providers/test_approve_later.py``; the
attacks on tokens in ``tests/approval/test_approval_attacks.py``."""

from __future__ import annotations

import collections.abc as c
import copy
import datetime
import hashlib
import hmac
import json
import threading
import typing as t

import attrs
import freezegun
import pytest

from nous_tools import (
    Err,
    NeedsApproval,
    Ok,
    Registry,
    RunContext,
    Tool,
    ToolCall,
    ToolCallResults,
    ToolExecutor,
    execute_tool_calls,
)
from nous_tools._util import _canonical
from nous_tools.providers import _wire as _batch_wire
from nous_tools.providers._paused import _seal_batch

SECRET = "server-side secret"


class Deleter:
    """The ``ask`` tool: records the arguments it got (and changes them: a tool may).
    A callable object, so its digest does not depend on what it recorded."""

    def __init__(self) -> None:
        self.got: list[dict[str, t.Any]] = []
        self.lock = threading.Lock()

    def __call__(self, path: str, force: bool = False, **extra: t.Any) -> str:
        with self.lock:
            self.got.append({"path": path, "force": force, **extra})
        if isinstance(extra.get("tags"), list):
            extra["tags"].append("seen")
        return f"deleted {path}"


def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@pytest.fixture
def deleter() -> Deleter:
    return Deleter()


@pytest.fixture
def deleted(deleter: Deleter) -> list[dict[str, t.Any]]:
    return deleter.got


@pytest.fixture
def registry(executor: ToolExecutor, deleter: Deleter) -> Registry:
    return Registry(
        [
            Tool.from_function(weather, timeout=None),
            Tool.from_function(
                deleter,
                name="delete_file",
                description="Delete a file (asks a person first).",
                timeout=None,
                approval="ask",
            ),
        ],
        executor=executor,
        name="agent",
    )


def calls(*pairs: tuple[str, str, dict[str, t.Any]]) -> list[ToolCall]:
    return [ToolCall(call_id, name, arguments) for call_id, name, arguments in pairs]


WEATHER = ("c_weather", "weather", {"city": "Paris"})
DELETE = ("c_delete", "delete_file", {"path": "/tmp/x"})


def paused(registry: Registry, *pairs: tuple[str, str, dict[str, t.Any]]) -> ToolCallResults:
    result = execute_tool_calls(registry, calls(*(pairs or (WEATHER, DELETE))))
    assert result.pending
    return result


def wire_of(result: ToolCallResults) -> dict[str, t.Any]:
    """What a browser holds: the batch through JSON."""
    return t.cast("dict[str, t.Any]", json.loads(json.dumps(result.to_dict(SECRET))))


def resealed(data: dict[str, t.Any]) -> dict[str, t.Any]:
    """``data`` signed again with the server's secret (what only the server can do):
    to reach the checks behind the signature."""
    payload = {key: value for key, value in data.items() if key != "signature"}
    return {**payload, "signature": _batch_wire.seal(payload, SECRET)}


def version_1(result: ToolCallResults, secret: str = SECRET) -> dict[str, t.Any]:
    """The batch as the version before this one wrote it (format 1): each call with
    its arguments, each pending call's own signed token nested in it, all under the
    batch's signature."""
    entries = []
    for index, (call, outcome) in enumerate(zip(result.calls, result.results, strict=True)):
        entry: dict[str, t.Any] = {
            "id": call.id,
            "name": call.name,
            "kind": result._kind(index),
            "arguments": _canonical.encode(call.arguments),
        }
        if isinstance(outcome, NeedsApproval):
            entry["approval"] = outcome.to_dict(secret)
        else:
            entry["output"] = {
                "content": result._content(index, call, outcome),
                "is_error": isinstance(outcome, Err),
            }
        entries.append(entry)
    assert result.registry is not None
    payload: dict[str, t.Any] = {
        "v": 1,
        "type": "tool_call_batch",
        "id": result.id,
        "issued_at": result.issued_at,
        "audience": result.registry.name,
        "provider": result.provider,
        "calls": entries,
    }
    payload["signature"] = _seal_batch(payload, secret)
    return t.cast("dict[str, t.Any]", json.loads(json.dumps(payload)))


# -- the format ------------------------------------------------------------------------


def test_a_batch_is_written_in_version_2_with_each_thing_said_once(registry: Registry) -> None:
    data = wire_of(paused(registry))
    assert data["v"] == 2
    finished, pending = data["calls"]
    assert finished["arguments"] == {"city": "Paris"} and "output" in finished
    assert sorted(pending) == ["approval", "id", "kind", "name"]  # its arguments: the approval's
    approval = pending["approval"]
    assert approval["arguments"] == {"path": "/tmp/x"}
    assert "signature" not in approval and "call_id" not in approval and "tool" not in approval
    assert approval["description"] == "Delete a file (asks a person first)."
    assert len(json.dumps(data)) < len(json.dumps(version_1(paused(registry))))


def test_arguments_the_advice_changed_are_carried_both_ways_and_read_back(
    registry: Registry, deleted: list[dict[str, t.Any]]
) -> None:
    registry.advice.register("before", "delete_file", lambda args: {**args, "force": True})
    data = wire_of(paused(registry))
    pending = data["calls"][1]
    assert pending["arguments"] == {"path": "/tmp/x"}  # what the model sent
    assert pending["approval"]["arguments"] == {"path": "/tmp/x", "force": True}  # approved
    batch = ToolCallResults.from_dict(data, registry, SECRET)
    assert batch.calls[1].arguments == {"path": "/tmp/x"}
    (na,) = batch.pending
    assert na.arguments == {"path": "/tmp/x", "force": True}
    assert batch.resolve({"c_delete": "approve"}).results[1] == Ok("deleted /tmp/x")
    assert deleted == [{"path": "/tmp/x", "force": True}]


def test_a_read_back_pending_calls_arguments_are_read_only_and_the_tool_gets_its_own(
    registry: Registry, deleted: list[dict[str, t.Any]]
) -> None:
    result = paused(registry, ("c_delete", "delete_file", {"path": "/tmp/x", "tags": ["a"]}))
    batch = ToolCallResults.from_dict(wire_of(result), registry, SECRET)
    arguments = batch.calls[0].arguments
    assert arguments == {"path": "/tmp/x", "tags": ["a"]}
    with pytest.raises(TypeError, match="read-only"):
        arguments["path"] = "/etc/passwd"
    with pytest.raises(TypeError, match="read-only"):
        arguments["tags"].append("b")
    resolved = batch.resolve({"c_delete": "approve"})
    assert resolved.results[0] == Ok("deleted /tmp/x")
    assert deleted == [{"path": "/tmp/x", "force": False, "tags": ["a", "seen"]}]
    assert batch.calls[0].arguments == {"path": "/tmp/x", "tags": ["a"]}  # unchanged
    assert resolved.to_dict(SECRET)["calls"][0]["arguments"] == {"path": "/tmp/x", "tags": ["a"]}


def test_a_read_back_approval_has_the_fingerprint_of_its_arguments(registry: Registry) -> None:
    original = paused(registry).pending[0]
    (na,) = ToolCallResults.from_dict(wire_of(paused(registry)), registry, SECRET).pending
    expected = NeedsApproval.compute_fingerprint("delete_file", {"path": "/tmp/x"})
    assert na.fingerprint == expected == original.fingerprint
    assert na.verify()
    (fresh,) = ToolCallResults.from_dict(wire_of(paused(registry)), registry, SECRET).pending
    changed = attrs.evolve(fresh, arguments={"path": "/etc/passwd"})  # before it was read
    assert changed.fingerprint == expected and not changed.verify()
    assert registry.execute_approved(changed).reason.message.endswith(
        "(they no longer match the fingerprint)"
    )
    (other,) = ToolCallResults.from_dict(wire_of(paused(registry)), registry, SECRET).pending
    assert attrs.evolve(other, id=na.id) == na  # equality reads it too
    assert repr(na).count(expected) == 1


# -- every field bound by the signature ------------------------------------------------


def _set(path: tuple[t.Any, ...], value: t.Any) -> t.Callable[[dict[str, t.Any]], None]:
    def change(data: dict[str, t.Any]) -> None:
        target: t.Any = data
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


def _drop(path: tuple[t.Any, ...]) -> t.Callable[[dict[str, t.Any]], None]:
    def change(data: dict[str, t.Any]) -> None:
        target: t.Any = data
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return change


APPROVAL = ("calls", 1, "approval")
CHANGES = {
    "the approval id": _set((*APPROVAL, "id"), "0" * 32),
    "the tool digest": _set((*APPROVAL, "tool_digest"), "0" * 64),
    "the approved arguments": _set((*APPROVAL, "arguments", "path"), "/etc/passwd"),
    "an approved argument added": _set((*APPROVAL, "arguments", "force"), True),
    "the description": _set((*APPROVAL, "description"), "Harmless."),
    "the description removed": _drop((*APPROVAL, "description")),
    "an issued_at of its own": _set((*APPROVAL, "issued_at"), 2_000_000_000),
    "an audience of its own": _set((*APPROVAL, "audience"), "other"),
    "the model's arguments added": _set(("calls", 1, "arguments"), {"path": "/etc/passwd"}),
    "the pending call's name": _set(("calls", 1, "name"), "weather"),
    "the pending call's id": _set(("calls", 1, "id"), "c_other"),
    "the pending call's kind": _set(("calls", 1, "kind"), "custom"),
    "the finished call's arguments": _set(("calls", 0, "arguments", "city"), "Rome"),
    "an unknown key": _set(("calls", 1, "note"), "approved by the CEO"),
    "the version": _set(("v",), 1),
}


@pytest.mark.parametrize("change", list(CHANGES.values()), ids=list(CHANGES))
def test_every_field_of_a_version_2_batch_is_bound_by_its_signature(
    registry: Registry, deleted: list[dict[str, t.Any]], change: t.Callable[..., None]
) -> None:
    data = wire_of(paused(registry))
    tampered = copy.deepcopy(data)
    change(tampered)
    with pytest.raises(ValueError, match=r"^tool call batch refused: "):
        ToolCallResults.from_dict(tampered, registry, SECRET)
    assert deleted == []
    resolved = ToolCallResults.from_dict(data, registry, SECRET).resolve({"c_delete": "approve"})
    assert resolved.results[1] == Ok("deleted /tmp/x")


def test_a_version_2_batch_signed_as_version_1_is_refused(registry: Registry) -> None:
    data = wire_of(paused(registry))
    payload = {key: value for key, value in data.items() if key != "signature"}
    for domain in (b"nous-tools tool call batch v1\n", b"nous-tools approval token v1\n", b""):
        forged = hmac.new(SECRET.encode(), domain + _canonical.dumps(payload), hashlib.sha256)
        with pytest.raises(ValueError, match="signature does not match"):
            ToolCallResults.from_dict(
                {**payload, "signature": "hmac-sha256:" + forged.hexdigest()}, registry, SECRET
            )


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (_set(APPROVAL, ["a list"]), "'approval' of call #2 must be dict, got list"),
        (_set((*APPROVAL, "id"), ""), "the approval has no id"),
        (_drop((*APPROVAL, "tool_digest")), "the approval has no 'tool_digest'"),
        (_drop((*APPROVAL, "arguments")), "the approval has no 'arguments'"),
        (_set((*APPROVAL, "arguments"), ["path"]), "'arguments' must be an object"),
        (_set((*APPROVAL, "description"), 7), "'description' must be str"),
        (_set((*APPROVAL, "issued_at"), "now"), "'issued_at' must be int, got str"),
        (_set(("calls", 1, "output"), {"content": "x", "is_error": False}), "one of 'output'"),
        (_set(("calls", 1, "kind"), "shell"), "'kind' of call #2 must be 'function' or 'custom'"),
        (_set(("calls", 1, "name"), 7), "'name' of call #2 must be str, got int"),
        (_set(("calls", 0), "a call"), "call #1 must be an object, got str"),
        (_drop(("calls", 0, "arguments")), "call #1 has no 'arguments'"),
        (_set(("calls", 0, "arguments"), {"$tuple": 1}), r"call #1: arguments is not"),
        (_set((*APPROVAL, "arguments"), {"$dict": [[1, "x"]]}), "argument names .* must be str"),
        (_set((*APPROVAL, "arguments"), {"n": 2.0}), "integral float must be written"),
        (_set(("type",), "approval"), "'type' must be 'tool_call_batch'"),
        (_drop(("provider",)), "the batch has no 'provider'"),
        (_set(("audience",), 7), "'audience' must be str or None, got int"),
    ],
)
def test_a_malformed_version_2_batch_is_refused_naming_why(
    registry: Registry, change: t.Callable[..., None], why: str
) -> None:
    data = wire_of(paused(registry))
    change(data)
    with pytest.raises(ValueError, match=f"^tool call batch refused: .*{why}"):
        ToolCallResults.from_dict(resealed(data), registry, SECRET)


def test_an_approval_older_than_its_batch_is_checked_on_its_own(registry: Registry) -> None:
    with freezegun.freeze_time("2030-01-01 12:00:00"):
        early = paused(registry)
    later = attrs.evolve(
        early, issued_at=int(datetime.datetime(2030, 1, 2, 11, 0, tzinfo=datetime.UTC).timestamp())
    )
    data = json.loads(json.dumps(later.to_dict(SECRET)))
    assert data["calls"][1]["approval"]["issued_at"] == early.issued_at
    expired = "call 'c_delete': approval for tool 'delete_file' refused: the token has expired"
    # the batch is an hour old, its approval a day and a second
    with freezegun.freeze_time("2030-01-02 12:00:01"):
        with pytest.raises(ValueError, match=expired):
            ToolCallResults.from_dict(data, registry, SECRET)
        assert ToolCallResults.from_dict(data, registry, SECRET, max_age=3 * 86400).pending


def test_a_batch_made_in_a_run_carries_its_run_id_under_the_signature(
    registry: Registry,
) -> None:
    ctx = RunContext.new(run_id="conversation-42")
    result = execute_tool_calls(registry, calls(WEATHER, DELETE), ctx)
    data = wire_of(result)
    assert data["run_id"] == "conversation-42"
    assert ToolCallResults.from_dict(data, registry, SECRET).context.run_id == "conversation-42"
    assert "run_id" not in wire_of(paused(registry))  # none: not written
    for change in (_set(("run_id",), "conversation-43"), _drop(("run_id",))):
        changed = copy.deepcopy(data)
        change(changed)
        with pytest.raises(ValueError, match="signature does not match"):
            ToolCallResults.from_dict(changed, registry, SECRET)
    for value, why in (("", "the batch has an empty run_id"), (7, "'run_id' must be str")):
        changed = copy.deepcopy(data)
        changed["run_id"] = value
        with pytest.raises(ValueError, match=why):
            ToolCallResults.from_dict(resealed(changed), registry, SECRET)


def test_an_approval_for_another_call_is_not_written(registry: Registry) -> None:
    result = paused(registry)
    na = result.pending[0]
    for other in (attrs.evolve(na, call_id="c_other"),):
        swapped = attrs.evolve(result, results=[result.results[0], other])
        with pytest.raises(ValueError, match="the approval of call 'c_delete' is for another"):
            swapped.to_dict(SECRET)


def test_a_tool_registered_anew_between_reading_and_resolving_does_not_run(
    registry: Registry, deleted: list[dict[str, t.Any]]
) -> None:
    batch = ToolCallResults.from_dict(wire_of(paused(registry)), registry, SECRET)
    old = registry.lookup("delete_file")
    assert old is not None
    registry.register(attrs.evolve(old))  # the same code, but not the tool approved
    outcome = batch.resolve({"c_delete": "approve"}).results[1]
    assert isinstance(outcome, Err)
    assert "is not the one that was approved" in outcome.reason.message
    assert deleted == []


def test_the_calls_of_one_tool_in_a_batch_are_each_checked_and_run_once(
    registry: Registry, deleted: list[dict[str, t.Any]]
) -> None:
    result = paused(
        registry,
        ("c1", "delete_file", {"path": "/a"}),
        ("c2", "delete_file", {"path": "/b"}),
        ("c3", "delete_file", {"path": "/c"}),
    )
    batch = ToolCallResults.from_dict(wire_of(result), registry, SECRET)
    assert [na.arguments["path"] for na in batch.pending] == ["/a", "/b", "/c"]
    assert len({na.id for na in batch.pending}) == 3
    done = batch.resolve({"c1": "approve", "c3": "reject"})
    assert sorted(d["path"] for d in deleted) == ["/a"]
    assert [type(r).__name__ for r in done.results] == ["Ok", "NeedsApproval", "Err"]
    again = ToolCallResults.from_dict(wire_of(done), registry, SECRET)
    assert again.resolve({"c2": "approve"}).results[1] == Ok("deleted /b")
    assert sorted(d["path"] for d in deleted) == ["/a", "/b"]


# -- version 1, still read ---------------------------------------------------------------


def test_a_version_1_batch_issued_before_the_upgrade_is_still_read_and_resolved(
    registry: Registry, deleted: list[dict[str, t.Any]]
) -> None:
    data = version_1(paused(registry))
    assert data["v"] == 1 and data["calls"][1]["approval"]["signature"].startswith("hmac")
    batch = ToolCallResults.from_dict(data, registry, SECRET)
    assert batch.calls[1].arguments == {"path": "/tmp/x"}
    resolved = batch.resolve({"c_delete": "approve"})
    assert resolved.results == [Ok("sunny in Paris"), Ok("deleted /tmp/x")]
    assert resolved.to_dict(SECRET)["v"] == 2  # written anew in version 2
    with pytest.raises(ValueError, match="already resolved"):
        ToolCallResults.from_dict(data, registry, SECRET).resolve({"c_delete": "approve"})


VERSION_1_CHANGES: dict[str, c.Callable[[dict[str, t.Any]], None]] = {
    "the token's arguments": _set((*APPROVAL, "arguments", "path"), "/etc/passwd"),
    "the call's arguments": _set(("calls", 1, "arguments", "path"), "/etc/passwd"),
    "the token's call id": _set((*APPROVAL, "call_id"), "c_other"),
    "the token's signature": _set((*APPROVAL, "signature"), "hmac-sha256:" + "0" * 64),
    "the version": _set(("v",), 2),
}


@pytest.mark.parametrize("change", list(VERSION_1_CHANGES.values()), ids=list(VERSION_1_CHANGES))
def test_a_changed_version_1_batch_is_refused(
    registry: Registry, deleted: list[dict[str, t.Any]], change: t.Callable[..., None]
) -> None:
    data = version_1(paused(registry))
    change(data)
    with pytest.raises(ValueError, match=r"^tool call batch refused: "):
        ToolCallResults.from_dict(data, registry, SECRET)
    assert deleted == []


def test_a_version_1_token_swapped_for_another_genuine_one_is_refused(registry: Registry) -> None:
    data = version_1(paused(registry))
    other = version_1(paused(registry, ("c_delete", "delete_file", {"path": "/srv"})))
    data["calls"][1]["approval"] = other["calls"][0]["approval"]
    with pytest.raises(ValueError, match="signature does not match"):
        ToolCallResults.from_dict(data, registry, SECRET)
