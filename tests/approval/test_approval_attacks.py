"""Approvals tried as an attacker would (issue 12): every way the round trip through
``NeedsApproval.to_dict``/``from_dict`` and ``execute_approved`` was broken, as a
test that fails on the code before the fix, plus a property test of the token.

Sections: 1. the token (forged id, replay, expiry, redeployed tool, another
registry, unsigned and deny tokens); 2. what runs is what was approved (advice,
mutation, canonical-form collisions); 3. exact types (str subclasses, a
``ContextUpdate`` subclass); 4. the stores; 5. properties (hypothesis).
"""

from __future__ import annotations

import collections
import collections.abc as c
import functools
import hashlib
import json
import logging
import threading
import typing as t

import attrs
import freezegun
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nous_tools import (
    ApprovalAlreadyUsed,
    ApprovalRequest,
    ContextUpdate,
    Edit,
    Err,
    InMemoryApprovalStore,
    NeedsApproval,
    Ok,
    Registry,
    RunContext,
    Tool,
    ToolDenied,
    ToolExecutor,
    execute_tool_calls,
)
from nous_tools._util import _canonical as canonical
from nous_tools.context_update import Operation
from nous_tools.contrib.django import CacheApprovalStore

SECRET = "server-side secret"
WAIT = 10.0


class Refunds:
    """A tool body that records what it refunded."""

    def __init__(self) -> None:
        self.calls: list[dict[str, t.Any]] = []

    def __call__(self, **arguments: t.Any) -> str:
        self.calls.append(arguments)
        return "refunded"


def refund(order: int, note: str = "") -> str:
    """Refund an order."""
    return f"refunded {order}"


def refund_v2(order: int, note: str = "") -> str:
    """Refund an order (another implementation)."""
    return f"refunded {order} twice"


def delete(path: str) -> str:
    """Delete a path."""
    return f"deleted {path}"


class AlwaysEqual(str):
    """A str that claims to equal anything."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


def ask(function: c.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("approval", "ask")
    options.setdefault("timeout", None)
    return Tool.from_function(function, **options)


@pytest.fixture
def refunds() -> Refunds:
    return Refunds()


@pytest.fixture
def registry(executor: ToolExecutor, refunds: Refunds) -> Registry:
    tool = Tool(name="refund", function=refunds, approval="ask", timeout=None)
    return Registry([tool], executor=executor, name="shop")


def pending(registry: Registry, arguments: dict[str, t.Any], **kw: t.Any) -> NeedsApproval:
    result = registry.execute("refund", arguments, **kw)
    assert isinstance(result, NeedsApproval), result
    return result


def token(registry: Registry, arguments: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
    """A signed token as a browser holds it (it went through JSON)."""
    na = pending(registry, {"order": 42} if arguments is None else arguments)
    return t.cast(dict[str, t.Any], json.loads(json.dumps(na.to_dict(SECRET))))


def redeem(registry: Registry, data: dict[str, t.Any], **kw: t.Any) -> t.Any:
    return registry.execute_approved(NeedsApproval.from_dict(data, registry, SECRET, **kw))


# -- 1. the token --------------------------------------------------------------


def test_a_forged_id_is_refused(registry: Registry, refunds: Refunds) -> None:
    data = token(registry)
    for forged_id in ("0" * 32, data["id"].upper(), data["id"] + "x"):
        with pytest.raises(ValueError, match="signature does not match"):
            NeedsApproval.from_dict({**data, "id": forged_id}, registry, SECRET)
    assert refunds.calls == []


def test_a_replayed_token_runs_once(registry: Registry, refunds: Refunds) -> None:
    data = token(registry)
    outcomes = [redeem(registry, dict(data)) for _ in range(4)]
    assert outcomes[0] == Ok("refunded")
    for outcome in outcomes[1:]:
        assert isinstance(outcome, Err) and isinstance(outcome.reason, ApprovalAlreadyUsed)
        assert "already used" in outcome.reason.message
    assert refunds.calls == [{"order": 42}]


def test_a_token_redeemed_concurrently_runs_once(registry: Registry, refunds: Refunds) -> None:
    data = token(registry)
    n = 8
    barrier = threading.Barrier(n, timeout=WAIT)
    outcomes: list[t.Any] = []
    lock = threading.Lock()

    def race() -> None:
        approval = NeedsApproval.from_dict(data, registry, SECRET)
        barrier.wait()
        outcome = registry.execute_approved(approval)
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=race) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert sum(outcome == Ok("refunded") for outcome in outcomes) == 1
    assert sum(
        isinstance(o, Err) and isinstance(o.reason, ApprovalAlreadyUsed) for o in outcomes
    ) == (n - 1)
    assert refunds.calls == [{"order": 42}]


def test_an_expired_token_is_refused(executor: ToolExecutor, refunds: Refunds) -> None:
    tool = Tool(name="refund", function=refunds, approval="ask", timeout=None)
    registry = Registry([tool], executor=executor, approval_max_age=600)
    with freezegun.freeze_time("2030-01-01 12:00:00"):
        data = token(registry)
        fresh = token(registry)
    with freezegun.freeze_time("2030-01-01 12:10:00"):  # exactly max_age: still valid
        assert redeem(registry, fresh) == Ok("refunded")
    with freezegun.freeze_time("2030-01-01 12:10:01"):
        with pytest.raises(ValueError, match=r"expired \(issued 601 s ago; max_age 600"):
            NeedsApproval.from_dict(data, registry, SECRET)
        # from_dict's own max_age overrides the registry's, both ways
        with pytest.raises(ValueError, match="expired"):
            NeedsApproval.from_dict(data, registry, SECRET, max_age=60)
        assert redeem(registry, data, max_age=3600) == Ok("refunded")
    assert refunds.calls == [{"order": 42}, {"order": 42}]


def test_tokens_expire_after_a_day_by_default(registry: Registry) -> None:
    with freezegun.freeze_time("2030-01-01 12:00:00"):
        data = token(registry)
    with (
        freezegun.freeze_time("2030-01-02 12:00:01"),
        pytest.raises(ValueError, match="expired"),
    ):
        NeedsApproval.from_dict(data, registry, SECRET)


def test_a_token_for_a_redeployed_tool_is_refused(executor: ToolExecutor) -> None:
    before = Registry([ask(refund)], executor=executor)
    data = token_for(before, "refund", {"order": 7})
    # After a deploy: the same name is different code, or the same code with another schema.
    for redeployed in (
        ask(refund_v2, name="refund"),
        ask(refund, parameters={"type": "object", "properties": {"order": {"type": "string"}}}),
        ask(functools.partial(refund_v2), name="refund"),
    ):
        after = Registry([redeployed], executor=executor)
        with pytest.raises(ValueError, match="not the tool that was approved"):
            NeedsApproval.from_dict(data, after, SECRET)
    # the same code registered again (a restart) still redeems it
    restarted = Registry([ask(refund)], executor=executor)
    assert redeem(restarted, data) == Ok("refunded 7")


def token_for(registry: Registry, name: str, arguments: dict[str, t.Any]) -> dict[str, t.Any]:
    na = registry.execute(name, arguments)
    assert isinstance(na, NeedsApproval)
    return t.cast(dict[str, t.Any], json.loads(json.dumps(na.to_dict(SECRET))))


def test_a_token_of_another_registry_is_refused(executor: ToolExecutor) -> None:
    a = Registry([ask(refund)], executor=executor, name="a")
    b = Registry([ask(refund)], executor=executor, name="b")
    unnamed = Registry([ask(refund)], executor=executor)
    data = token_for(a, "refund", {"order": 1})
    with pytest.raises(ValueError, match="issued for registry 'a', not 'b'"):
        NeedsApproval.from_dict(data, b, SECRET)
    with pytest.raises(ValueError, match="issued for registry 'a', not None"):
        NeedsApproval.from_dict(data, unnamed, SECRET)
    with pytest.raises(ValueError, match="signature does not match"):  # audience is signed
        NeedsApproval.from_dict({**data, "audience": "b"}, b, SECRET)
    assert redeem(a, data) == Ok("refunded 1")


def test_an_unsigned_token_is_refused_unless_allowed(registry: Registry, refunds: Refunds) -> None:
    na = pending(registry, {"order": 42})
    unsigned = json.loads(json.dumps(na.to_dict()))
    with pytest.raises(ValueError, match="unsigned tokens are refused"):
        NeedsApproval.from_dict(unsigned, registry)
    with pytest.raises(ValueError, match="not signed"):
        NeedsApproval.from_dict(unsigned, registry, SECRET)
    # a browser-made token: the algorithm is public, so it can compute a checksum
    browser = {**unsigned, "arguments": {"order": 43}}
    payload = {k: v for k, v in browser.items() if k != "signature"}
    browser["signature"] = (
        "sha256:"
        + hashlib.sha256(b"nous-tools approval token v1\n" + canonical.dumps(payload)).hexdigest()
    )
    with pytest.raises(ValueError, match="unsigned tokens are refused"):
        NeedsApproval.from_dict(browser, registry)
    with pytest.raises(ValueError, match="not signed"):
        NeedsApproval.from_dict(browser, registry, SECRET)
    assert refunds.calls == []
    # trusted storage (your own database) may opt in
    assert NeedsApproval.from_dict(unsigned, registry, allow_unsigned=True) == na


def test_a_deny_tool_cannot_be_run_through_a_token(executor: ToolExecutor) -> None:
    ran: list[str] = []

    def nuke(target: str) -> str:
        ran.append(target)
        return "nuked"

    registry = Registry([ask(nuke)], executor=executor)
    data = token_for(registry, "nuke", {"target": "prod"})
    registry.register(ask(nuke, approval="deny"))  # same code, now denied
    with pytest.raises(ValueError, match="tool 'nuke' is denied"):
        NeedsApproval.from_dict(data, registry, SECRET)
    with pytest.raises(ValueError, match="denied"):  # nor as trusted storage
        NeedsApproval.from_dict(
            json.loads(json.dumps(NeedsApproval(ask(nuke), {"target": "x"}).to_dict())),
            registry,
            allow_unsigned=True,
        )
    # a NeedsApproval made in memory for the deny tool is refused too
    denied = registry.lookup("nuke")
    assert denied is not None
    result = registry.execute_approved(NeedsApproval(denied, {"target": "prod"}))
    assert isinstance(result, Err) and isinstance(result.reason, ToolDenied)
    assert ran == []
    # the program's own direct call keeps Minga's semantics
    assert registry.execute_approved("nuke", {"target": "staging"}) == Ok("nuked")
    assert ran == ["staging"]


@pytest.mark.parametrize("field", ["tool", "id", "arguments", "issued_at", "call_id"])
def test_each_signed_field_is_bound(registry: Registry, field: str) -> None:
    registry.register(ask(refund, name="refund_all"))
    na = pending(registry, {"order": 42}, call_id="call_1")
    data = json.loads(json.dumps(na.to_dict(SECRET)))
    changed = {
        "tool": "refund_all",
        "id": "other",
        "arguments": {"order": 43},
        "issued_at": data["issued_at"] + 1,
        "call_id": "call_2",
    }[field]
    with pytest.raises(ValueError, match="signature does not match"):
        NeedsApproval.from_dict({**data, field: changed}, registry, SECRET)


# -- 2. what runs is what was approved -----------------------------------------


def test_before_advice_runs_before_approval_in_both_paths(executor: ToolExecutor) -> None:
    ran: list[str] = []
    seen_by_handler: list[dict[str, t.Any]] = []
    registry = Registry(
        [ask(lambda path: ran.append(path) or "done", name="clean")], executor=executor
    )
    registry.advice.register("before", "clean", lambda args: {"path": "/"})  # hostile

    na = registry.execute("clean", {"path": "/srv/build"})
    assert isinstance(na, NeedsApproval)
    assert na.arguments == {"path": "/"}  # the person sees what would run

    def handler(request: ApprovalRequest) -> str:
        seen_by_handler.append(dict(request.arguments))
        return "reject"

    registry.execute("clean", {"path": "/srv/build"}, RunContext.new(approval_handler=handler))
    assert seen_by_handler == [{"path": "/"}]  # the two paths agree
    assert ran == []


def test_no_advice_rewrites_the_arguments_after_approval(executor: ToolExecutor) -> None:
    ran: list[str] = []
    registry = Registry(
        [ask(lambda path: ran.append(path) or "done", name="clean")], executor=executor
    )
    approved = registry.execute("clean", {"path": "/srv/build"})
    assert isinstance(approved, NeedsApproval)
    # advice added after the person said yes
    registry.advice.register("before", "clean", lambda args: {"path": "/"})
    assert registry.execute_approved(approved) == Ok("done")
    assert ran == ["/srv/build"]

    second = registry.execute("clean", {"path": "/srv/build"})  # now "/" by the before
    third = NeedsApproval(registry.lookup("clean"), {"path": "/srv/cache"})  # type: ignore[arg-type]
    registry.advice.reset()
    registry.advice.register("around", "clean", lambda proceed, args: proceed({"path": "/"}))
    rewritten = registry.execute_approved(third)
    assert isinstance(rewritten, Err)
    assert "advice changed the approved arguments" in rewritten.reason.message
    assert ran == ["/srv/build"]
    assert isinstance(second, NeedsApproval) and second.arguments == {"path": "/"}

    # an around that proceeds with the approved arguments, and an after, still run
    registry.advice.reset()
    registry.advice.register("around", "clean", lambda proceed, args: proceed(args))
    registry.advice.register("after", "clean", lambda result: Ok(result.value + "!"))
    fourth = registry.execute("clean", {"path": "/srv/tmp"})
    assert registry.execute_approved(fourth) == Ok("done!")  # type: ignore[arg-type]
    assert ran == ["/srv/build", "/srv/tmp"]


def test_an_around_mutating_the_arguments_in_place_cannot_change_what_runs(
    executor: ToolExecutor,
) -> None:
    ran: list[t.Any] = []
    registry = Registry(
        [ask(lambda paths: ran.append(list(paths)) or "done", name="clean")], executor=executor
    )

    def sneaky(proceed: c.Callable[[t.Any], t.Any], args: t.Any) -> t.Any:
        args["paths"].append("/")  # the same object, changed in place
        return proceed(args)

    registry.advice.register("around", "clean", sneaky)
    na = registry.execute("clean", {"paths": ["/srv/build"]})
    result = registry.execute_approved(na)  # type: ignore[arg-type]
    assert isinstance(result, Err) and "advice changed the approved arguments" in str(result.reason)
    assert ran == []
    assert na.arguments == {"paths": ["/srv/build"]}  # type: ignore[union-attr]


def test_changing_the_callers_arguments_after_to_dict_changes_nothing(
    registry: Registry, refunds: Refunds
) -> None:
    arguments: dict[str, t.Any] = {"order": 42, "items": [{"sku": "a"}], "note": "once"}
    na = pending(registry, arguments)
    data = na.to_dict(SECRET)
    arguments["order"] = 43
    arguments["items"][0]["sku"] = "everything"
    arguments["items"].append({"sku": "b"})
    data["arguments"]["items"].append({"sku": "c"})  # the token's own dict, too
    assert na.verify()
    assert registry.execute_approved(na) == Ok("refunded")
    assert refunds.calls == [{"order": 42, "items": [{"sku": "a"}], "note": "once"}]


def test_approved_arguments_are_read_only_and_the_tool_gets_its_own_copy(
    executor: ToolExecutor,
) -> None:
    kept: list[t.Any] = []

    def greedy(items: list[str]) -> str:
        items.append("extra")  # a tool may change its own copy
        kept.append(items)
        return "ok"

    registry = Registry([ask(greedy)], executor=executor)
    na = registry.execute("greedy", {"items": ["a"]})
    assert isinstance(na, NeedsApproval)
    for mutate in (
        lambda: na.arguments["items"].append("b"),  # type: ignore[attr-defined]
        lambda: na.arguments.update(items=[]),  # type: ignore[attr-defined]
        lambda: na.arguments.__setitem__("items", []),  # type: ignore[attr-defined]
    ):
        with pytest.raises(TypeError, match="read-only"):
            mutate()
    assert registry.execute_approved(na) == Ok("ok")
    assert kept == [["a", "extra"]] and type(kept[0]) is list
    assert na.arguments == {"items": ["a"]}


COLLISIONS = [
    pytest.param({"k": {1: "x"}}, {"k": {"1": "x"}}, id="int-vs-str-key"),
    pytest.param({"k": [1, 2]}, {"k": (1, 2)}, id="list-vs-tuple"),
    pytest.param({"k": {3}}, {"k": "{3}"}, id="set-vs-its-repr"),
    pytest.param({"k": b"ab"}, {"k": "b'ab'"}, id="bytes-vs-its-repr"),
    pytest.param({"k": b"ab"}, {"k": "YWI="}, id="bytes-vs-its-base64"),
    pytest.param({"k": {3}}, {"k": frozenset({3})}, id="set-vs-frozenset"),
    pytest.param({"k": 1}, {"k": 1.0}, id="int-vs-float"),
    pytest.param({"k": 1}, {"k": True}, id="int-vs-bool"),
    pytest.param({"k": (1,)}, {"k": {"$tuple": [1]}}, id="tuple-vs-its-encoding"),
    pytest.param({"k": 2**60}, {"k": {"$int": str(2**60)}}, id="big-int-vs-its-encoding"),
    pytest.param({"k": {(1, 2): "x"}}, {"k": {"(1, 2)": "x"}}, id="tuple-key-vs-its-repr"),
]


@pytest.mark.parametrize(("one", "other"), COLLISIONS)
def test_the_canonical_form_tells_types_apart(
    registry: Registry, one: dict[str, t.Any], other: dict[str, t.Any]
) -> None:
    assert NeedsApproval.compute_fingerprint("refund", one) != (
        NeedsApproval.compute_fingerprint("refund", other)
    )
    first, second = pending(registry, one), pending(registry, other)
    data = json.loads(json.dumps(first.to_dict(SECRET)))
    other_data = json.loads(json.dumps(second.to_dict(SECRET)))
    assert canonical.dumps(data["arguments"]) != canonical.dumps(other_data["arguments"])
    # one call's signature never covers the other call's arguments
    with pytest.raises(ValueError, match="signature does not match"):
        NeedsApproval.from_dict({**data, "arguments": other_data["arguments"]}, registry, SECRET)
    back = NeedsApproval.from_dict(data, registry, SECRET)
    assert canonical.dumps(canonical.encode(back.arguments)) == canonical.dumps(
        canonical.encode(one)
    )


@pytest.mark.parametrize(
    "value",
    # an OrderedDict and a str subclass: a subclass is not its base type
    [object(), 1 + 2j, bytearray(b"x"), range(3), collections.OrderedDict(a=1), AlwaysEqual("x")],
)
def test_values_that_cannot_be_represented_faithfully_raise_instead_of_colliding(
    registry: Registry, value: t.Any
) -> None:
    with pytest.raises(ValueError, match="cannot represent faithfully"):
        NeedsApproval(t.cast(Tool, registry.lookup("refund")), {"order": 1, "extra": value})
    with pytest.raises(ValueError, match="cannot represent faithfully"):
        NeedsApproval.compute_fingerprint("refund", {"extra": value})


# -- 3. exact types ------------------------------------------------------------


def test_a_handler_answer_that_is_a_str_subclass_is_a_rejection(
    executor: ToolExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []
    gated = ask(lambda path: ran.append(path), name="rm")
    for answer in (AlwaysEqual("reject"), AlwaysEqual("approve")):
        ctx = RunContext.new(approval_handler=lambda request, _a=answer: _a)
        with caplog.at_level(logging.WARNING, logger="nous_tools"):
            result = executor.execute(gated, {"path": "/"}, ctx)
        assert isinstance(result, Err) and "rejected" in result.reason.message
    assert "AlwaysEqual" in caplog.text
    assert ran == []


def test_an_edit_subclass_is_a_rejection(executor: ToolExecutor) -> None:
    ran: list[str] = []
    gated = ask(lambda path: ran.append(path), name="rm")

    @attrs.frozen
    class SneakyEdit(Edit):
        pass

    ctx = RunContext.new(approval_handler=lambda request: SneakyEdit({"path": "/"}))
    result = executor.execute(gated, {"path": "/tmp"}, ctx)
    assert isinstance(result, Err) and "rejected" in result.reason.message
    assert ran == []


class ShapeShifter(str):
    """Unequal to everything when checked against the protected keys, equal later."""

    checked = False

    def __eq__(self, other: object) -> bool:
        if not ShapeShifter.checked:
            return False
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_a_str_subclass_key_cannot_reach_a_protected_key() -> None:
    key = ShapeShifter("workspace_root")
    with pytest.raises(TypeError, match="keys must be str"):
        ContextUpdate().set(key, "/")
    with pytest.raises(TypeError, match="keys must be str"):
        Operation("set", key, "/")
    with pytest.raises((TypeError, ValueError)):
        Operation(AlwaysEqual("set"), "notes", "x")  # type: ignore[arg-type]
    # smuggled past the constructor: apply checks every operation again
    smuggled = Operation("set", "notes", "/")
    object.__setattr__(smuggled, "key", key)
    update = ContextUpdate((Operation("set", "ok", 1),))
    object.__setattr__(update, "operations", (smuggled,))
    with pytest.raises(TypeError, match="str"):
        update.apply({"workspace_root": "/srv"})


def test_a_str_subclass_in_a_token_is_refused(registry: Registry) -> None:
    data = token(registry)
    for key in ("tool", "id", "call_id", "audience"):
        value = data[key] if data[key] is not None else "x"
        with pytest.raises(ValueError, match="refused"):
            NeedsApproval.from_dict({**data, key: AlwaysEqual(value)}, registry, SECRET)
    with pytest.raises(ValueError, match="refused"):
        NeedsApproval.from_dict({**data, "signature": AlwaysEqual("x")}, registry, SECRET)
    with pytest.raises(ValueError, match="refused"):
        NeedsApproval.from_dict(
            {**data, "arguments": {"order": AlwaysEqual("42")}}, registry, SECRET
        )


def test_a_context_update_subclass_cannot_gate_the_next_round(executor: ToolExecutor) -> None:
    class Escalate(ContextUpdate):
        def apply_to_run_context(self, ctx: RunContext[t.Any]) -> RunContext[t.Any]:
            return attrs.evolve(ctx, approval_gated=True, deps={"workspace_root": "/"})

        def apply(self, deps: t.Any) -> dict[str, t.Any]:
            return {"workspace_root": "/"}

        def is_empty(self) -> bool:
            return False

    ran: list[str] = []
    registry = Registry(
        [
            Tool.from_function(
                lambda: Ok("ok", Escalate().set("notes", "hi")), name="sly", timeout=None
            ),
            ask(lambda path: ran.append(path), name="rm"),
        ],
        executor=executor,
    )
    first = execute_tool_calls(
        registry, [{"id": "c1", "type": "function", "function": {"name": "sly", "arguments": ""}}]
    )
    assert first.results == [Ok("ok", first.results[0].update)]  # type: ignore[union-attr]
    assert first.context.approval_gated is False
    assert first.context.deps == {"notes": "hi"}  # the library's own apply ran
    second = execute_tool_calls(
        registry,
        [
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "rm", "arguments": '{"path": "/"}'},
            }
        ],
        first.context,
    )
    assert isinstance(second.results[0], NeedsApproval)
    assert ran == []


# -- 4. the stores -------------------------------------------------------------


def test_the_in_memory_store_claims_each_id_once_across_threads() -> None:
    store = InMemoryApprovalStore()
    n = 8
    barrier = threading.Barrier(n, timeout=WAIT)
    wins: list[bool] = []
    lock = threading.Lock()

    def claim() -> None:
        barrier.wait()
        won = store.claim("the-id")
        with lock:
            wins.append(won)

    threads = [threading.Thread(target=claim) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(wins) == [False] * (n - 1) + [True]


def test_the_in_memory_store_is_bounded_and_forgets_expired_claims(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1000.0]
    # the wall clock: the one tokens are checked against (issue 21)
    monkeypatch.setattr("nous_tools.approval._store.time.time", lambda: now[0])
    store = InMemoryApprovalStore(max_entries=3, ttl=60)
    assert [store.claim(i) for i in "abc"] == [True, True, True]
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        assert store.claim("d") is True  # full: "a" is forgotten, with a warning
    assert "forgot the claim that expires soonest before it expired" in caplog.text
    assert len(store) == 3 and "a" not in store and "d" in store
    now[0] += 61
    assert len(store) == 3 and "b" not in store  # expired claims are forgotten
    assert store.claim("b") is True and len(store) == 1
    with pytest.raises(ValueError):
        InMemoryApprovalStore(max_entries=0)
    with pytest.raises(ValueError):
        InMemoryApprovalStore(ttl=0)
    with pytest.raises(TypeError):
        store.claim(t.cast(str, 3))


class BrokenStore:
    def __init__(self, answer: t.Any = None, raises: bool = False) -> None:
        self.answer, self.raises, self.ids = answer, raises, []

    def claim(self, approval_id: str) -> t.Any:
        self.ids.append(approval_id)
        if self.raises:
            raise ConnectionError("redis is down")
        return self.answer


@pytest.mark.parametrize("store", [BrokenStore(raises=True), BrokenStore(None), BrokenStore(1)])
def test_a_store_that_fails_or_does_not_say_true_refuses_the_call(
    executor: ToolExecutor, refunds: Refunds, store: BrokenStore
) -> None:
    tool = Tool(name="refund", function=refunds, approval="ask", timeout=None)
    registry = Registry([tool], executor=executor, approval_store=store)
    na = pending(registry, {"order": 1})
    result = registry.execute_approved(na)
    assert isinstance(result, Err)
    assert store.ids == [na.id]
    assert refunds.calls == []


def test_a_refused_approval_does_not_use_up_its_id(registry: Registry, refunds: Refunds) -> None:
    na = pending(registry, {"order": 1})
    for refused in (
        registry.execute_approved(na, {"order": 2}),  # separate arguments
        registry.execute_approved(attrs.evolve(na, arguments={"order": 2})),  # changed
        registry.execute_approved(na, t.cast(t.Any, "not a context")),
    ):
        assert isinstance(refused, Err)
    assert registry.execute_approved(na) == Ok("refunded")
    assert refunds.calls == [{"order": 1}]


class FakeCache:
    """Django's cache API, as far as ``add`` goes."""

    def __init__(self) -> None:
        self.data: dict[str, t.Any] = {}
        self.timeouts: list[t.Any] = []
        self.lock = threading.Lock()

    def add(self, key: str, value: t.Any, timeout: t.Any = None, version: t.Any = None) -> bool:
        with self.lock:
            self.timeouts.append(timeout)
            if key in self.data:
                return False
            self.data[key] = value
            return True


def test_the_django_cache_store_claims_with_cache_add() -> None:
    cache = FakeCache()
    store = CacheApprovalStore(cache, timeout=600)
    assert store.claim("id with spaces and ünïcode " * 20) is True
    assert store.claim("id with spaces and ünïcode " * 20) is False
    assert store.claim("other") is True
    assert cache.timeouts == [600, 600, 600]
    (key, _) = cache.data
    assert key.startswith("nous-tools:approval:") and len(key) == 20 + 64 and " " not in key
    with pytest.raises(ValueError):
        CacheApprovalStore(cache, timeout=0)


# -- 5. properties -------------------------------------------------------------

PROPERTY = settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])

hashables = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=6)
    | st.binary(max_size=6),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
values = st.recursive(
    hashables,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
        | st.dictionaries(hashables, inner, max_size=3)
        | st.sets(hashables, max_size=3)
    ),
    max_leaves=20,
)
argument_trees = st.dictionaries(st.text(max_size=8), values, max_size=5)


def js_round_trip(text: str) -> t.Any:
    """What ``JSON.stringify(JSON.parse(text))`` in a browser gives back, as Python
    reads it: integral numbers become ints and integers lose precision past 2**53."""

    def number(literal: str) -> int | float:
        value = float(literal)
        return int(value) if value.is_integer() else value

    return json.loads(text, parse_float=number, parse_int=number)


@PROPERTY
@given(arguments=argument_trees)
def test_every_argument_tree_round_trips_through_a_token(
    shared_registry: Registry, arguments: dict[str, t.Any]
) -> None:
    tool = t.cast(Tool, shared_registry.lookup("anything"))
    na = NeedsApproval(tool, arguments, audience="props")
    wire = json.dumps(na.to_dict(SECRET))
    for data in (json.loads(wire), js_round_trip(wire)):
        back = NeedsApproval.from_dict(data, shared_registry, SECRET)
        assert back.fingerprint == na.fingerprint and back.id == na.id
        assert canonical.dumps(canonical.encode(back.arguments)) == canonical.dumps(
            canonical.encode(arguments)
        )
        assert canonical.dumps(canonical.encode(canonical.thaw(back.arguments))) == (
            canonical.dumps(canonical.encode(arguments))
        )


def _changed(value: t.Any, other_arguments: t.Any) -> list[t.Any]:
    """Values different from ``value`` for a field of a token."""
    if value is None:
        return ["x", 0]
    if type(value) is int:
        return [value + 1, value - 1, str(value), None]
    if type(value) is str:
        flipped = value[:-1] + ("0" if value[-1:] != "0" else "1") if value else "x"
        return [value + "x", flipped, value.upper() if value.upper() != value else "X", None]
    return [other_arguments, [value], {"wrapped": value}, None]


@PROPERTY
@given(arguments=argument_trees, others=argument_trees, data=st.data())
def test_any_single_field_change_of_a_token_is_refused(
    shared_registry: Registry,
    arguments: dict[str, t.Any],
    others: dict[str, t.Any],
    data: st.DataObject,
) -> None:
    na = NeedsApproval(
        t.cast(Tool, shared_registry.lookup("anything")),
        arguments,
        call_id=data.draw(st.none() | st.text(min_size=1, max_size=6)),
        audience="props",
    )
    wire = json.loads(json.dumps(na.to_dict(SECRET)))
    encoded_others = json.loads(json.dumps(canonical.encode(others)))
    assume(canonical.dumps(encoded_others) != canonical.dumps(wire["arguments"]))
    field = data.draw(st.sampled_from(sorted(wire)))
    change = data.draw(st.sampled_from(["delete", *range(4)]))
    tampered = dict(wire)
    if change == "delete":
        del tampered[field]
    else:
        options = _changed(wire[field], encoded_others)
        tampered[field] = options[t.cast(int, change) % len(options)]
    assume(tampered != wire)
    with pytest.raises(ValueError, match="refused"):
        NeedsApproval.from_dict(tampered, shared_registry, SECRET)


@pytest.fixture(scope="module")
def shared_registry() -> t.Iterator[Registry]:
    def anything(**arguments: t.Any) -> str:
        """Takes anything."""
        return "ok"

    with ToolExecutor(max_workers=2) as executor:
        yield Registry(
            [Tool.from_function(anything, approval="ask", timeout=None)],
            executor=executor,
            name="props",
        )


def _exact(value: t.Any) -> t.Any:
    """``value`` with every container's exact type written out, for comparing values
    that ``==`` would call equal across types (a list and a FrozenList, 1 and True)."""
    kind = type(value)
    if kind in (dict, canonical.FrozenDict):
        return (kind.__name__, sorted(((_exact(k), _exact(v)) for k, v in value.items()), key=repr))
    if kind in (list, canonical.FrozenList, tuple):
        return (kind.__name__, [_exact(item) for item in value])
    if kind in (set, canonical.FrozenSet, frozenset):
        return (kind.__name__, sorted((_exact(item) for item in value), key=repr))
    return (kind.__name__, value)


@PROPERTY
@given(arguments=argument_trees)
def test_decoding_straight_to_plain_values_is_thawing_the_frozen_ones(
    arguments: dict[str, t.Any],
) -> None:
    """Issue 26: a batch's call arguments are decoded in one walk (frozen=False); they
    must be exactly what thawing the frozen decoding gives."""
    assume(all(not (type(v) is float and v != v) for v in arguments.values()))
    tree = json.loads(json.dumps(canonical.encode(arguments)))
    frozen = canonical.decode(tree)
    plain = canonical.decode(tree, frozen=False)
    assert _exact(plain) == _exact(canonical.thaw(frozen))
    assert canonical.encode(plain) == tree


def _containers(value: t.Any) -> list[t.Any]:
    """Every list, dict and set in ``value`` (keys included), depth first."""
    found: list[t.Any] = []
    if isinstance(value, dict):
        found.append(value)
        for key, item in value.items():
            found += _containers(key) + _containers(item)
    elif isinstance(value, (list, set, tuple, frozenset)):
        if not isinstance(value, (tuple, frozenset)):
            found.append(value)
        for item in value:
            found += _containers(item)
    return found


@PROPERTY
@given(arguments=argument_trees)
def test_thawing_makes_every_mutable_container_anew(arguments: dict[str, t.Any]) -> None:
    """What the tool gets is its own: no list, dict or set of it is one of the
    approval's, so the tool changing its arguments never changes what was approved."""
    assume(all(not (type(v) is float and v != v) for v in arguments.values()))
    frozen = canonical.decode(json.loads(json.dumps(canonical.encode(arguments))))
    thawed = canonical.thaw(frozen)
    approved = {id(container) for container in _containers(frozen)}
    assert all(id(container) not in approved for container in _containers(thawed))
    assert all(type(container) in (dict, list, set) for container in _containers(thawed)), (
        "thaw leaves no read-only container"
    )
    assert _exact(canonical.thaw(frozen)) == _exact(thawed)
