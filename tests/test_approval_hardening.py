"""Approval promises that broke in round 3 of the attacks (issue 21), each as a test
that failed before its fix: skewed clocks and the claim's lifetime (item 3), the
retry default of dangerous tools (item 6), what the tool digest covers (item 9),
decorator order (item 11) and a name whose ``__hash__`` raises (item 12).
"""

from __future__ import annotations

import json
import logging
import threading
import typing as t

import attrs
import freezegun
import pytest

from nous_tools import (
    ApprovalAlreadyUsed,
    Err,
    InMemoryApprovalStore,
    NeedsApproval,
    Ok,
    Registry,
    Tool,
    ToolCallResults,
    execute_tool_calls,
    tool,
)
from nous_tools.contrib.django import CacheApprovalStore

SECRET = "server-side secret"
T0 = "2030-01-01 12:00:00"
T0_UNIX = 1893499200  # T0 as Unix seconds


class Refunds:
    """A tool body that records what it refunded."""

    def __init__(self) -> None:
        self.calls: list[dict[str, t.Any]] = []
        self.lock = threading.Lock()

    def __call__(self, **arguments: t.Any) -> str:
        with self.lock:
            self.calls.append(arguments)
        return "refunded"


@pytest.fixture
def refunds() -> Refunds:
    return Refunds()


def refund_registry(refunds: Refunds, **options: t.Any) -> Registry:
    tool = Tool(name="refund", function=refunds, approval="ask", timeout=None)
    return Registry([tool], name="shop", **options)


def signed(registry: Registry, arguments: dict[str, t.Any], **fields: t.Any) -> dict[str, t.Any]:
    """A signed token as a browser holds it; ``fields`` override the NeedsApproval's."""
    tool = registry.lookup("refund")
    assert tool is not None
    na = NeedsApproval(tool, arguments, audience=registry.name, **fields)
    return t.cast(dict[str, t.Any], json.loads(json.dumps(na.to_dict(SECRET))))


def redeem(registry: Registry, data: dict[str, t.Any], **kw: t.Any) -> t.Any:
    return registry.execute_approved(NeedsApproval.from_dict(data, registry, SECRET, **kw))


def call(call_id: str, name: str, arguments: dict[str, t.Any]) -> dict[str, t.Any]:
    """An OpenAI Chat Completions tool call."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def already_used(outcome: object) -> bool:
    return isinstance(outcome, Err) and isinstance(outcome.reason, ApprovalAlreadyUsed)


# -- item 3: clocks and the claim's lifetime ---------------------------------------------


def test_a_token_issued_in_the_future_is_refused_beyond_the_clock_skew(
    refunds: Refunds,
) -> None:
    registry = refund_registry(refunds)
    with freezegun.freeze_time(T0):
        ten_years = signed(registry, {"order": 1}, issued_at=T0_UNIX + 10 * 365 * 86400)
        with pytest.raises(ValueError, match=r"was issued in the future \(315360000 s ahead"):
            NeedsApproval.from_dict(ten_years, registry, SECRET, max_age=60)
        a_little = signed(registry, {"order": 2}, issued_at=T0_UNIX + 61)
        with pytest.raises(ValueError, match=r"max_clock_skew 60\.0 s"):
            NeedsApproval.from_dict(a_little, registry, SECRET)
        within = signed(registry, {"order": 3}, issued_at=T0_UNIX + 60)
        assert redeem(registry, within) == Ok("refunded")
        # the option, per call and per registry
        with pytest.raises(ValueError, match="in the future"):
            NeedsApproval.from_dict(within, registry, SECRET, max_clock_skew=0)
        assert redeem(registry, a_little, max_clock_skew=120) == Ok("refunded")
        lenient = refund_registry(refunds, approval_max_clock_skew=3600)
        assert NeedsApproval.from_dict(signed(lenient, {"order": 4}, issued_at=T0_UNIX + 3600),
                                       lenient, SECRET).arguments == {"order": 4}  # fmt: skip
    assert refunds.calls == [{"order": 3}, {"order": 2}]
    for bad in (-1, float("nan"), float("inf"), "60", None):
        with pytest.raises(ValueError, match="max_clock_skew"):
            refund_registry(refunds, approval_max_clock_skew=bad)


@pytest.mark.parametrize("issued_at", [10**400, -(10**400)], ids=["10**400", "-10**400"])
def test_an_issued_at_beyond_a_floats_range_is_a_value_error_not_an_overflow(
    refunds: Refunds, issued_at: int
) -> None:
    registry = refund_registry(refunds)
    data = signed(registry, {"order": 1}, issued_at=issued_at)
    with pytest.raises(ValueError, match="in the future" if issued_at > 0 else "expired"):
        NeedsApproval.from_dict(data, registry, SECRET)
    # an approval made in memory with such a date does not run either
    tool = registry.lookup("refund")
    assert tool is not None
    outcome = registry.execute_approved(NeedsApproval(tool, {"order": 1}, issued_at=issued_at))
    assert isinstance(outcome, Err) and "was not run: its approval" in outcome.reason.message
    # nor a batch
    batch = execute_tool_calls(registry, [call("c1", "refund", {})])
    wire = json.loads(json.dumps(ToolCallResults.to_dict(
        ToolCallResults(results=batch.results, calls=batch.calls, context=batch.context,
                        registry=registry, issued_at=issued_at), SECRET)))  # fmt: skip
    with pytest.raises(ValueError, match="tool call batch refused"):
        ToolCallResults.from_dict(wire, registry, SECRET)
    assert refunds.calls == []


def test_with_one_servers_clock_an_hour_ahead_the_tool_runs_once(refunds: Refunds) -> None:
    """Server A's clock is an hour ahead; server B, whose clock is right, redeems A's
    tokens with its store set up as the docs used to advise (a ttl of max_age)."""
    max_age = 600
    server_a = refund_registry(refunds, approval_max_age=max_age)
    with freezegun.freeze_time("2030-01-01 13:00:00"):  # A's clock: T0 + 1 h
        data = json.loads(json.dumps(server_a.execute("refund", {"order": 7}).to_dict(SECRET)))

    # B, with the default skew, refuses a token from an hour in the future
    server_b = refund_registry(
        refunds, approval_max_age=max_age, approval_store=InMemoryApprovalStore(ttl=max_age)
    )
    with freezegun.freeze_time(T0), pytest.raises(ValueError, match="in the future"):
        NeedsApproval.from_dict(data, server_b, SECRET)

    # B, told its clocks may disagree by an hour: it runs once, and every replay until
    # the token expires on B's clock is refused (before, the claim was forgotten
    # max_age after it was made, while the token was still "young": it ran twice)
    lenient_b = refund_registry(
        refunds,
        approval_max_age=max_age,
        approval_max_clock_skew=3600,
        approval_store=InMemoryApprovalStore(ttl=max_age),
    )
    with freezegun.freeze_time(T0):
        assert redeem(lenient_b, data) == Ok("refunded")
    for later in ("12:01:00", "12:10:01", "12:30:00", "13:00:00", "13:09:59"):
        with freezegun.freeze_time(f"2030-01-01 {later}"):
            assert already_used(redeem(lenient_b, data)), later
    with (
        freezegun.freeze_time("2030-01-01 13:10:01"),
        pytest.raises(ValueError, match="has expired"),
    ):
        NeedsApproval.from_dict(data, lenient_b, SECRET)
    assert refunds.calls == [{"order": 7}]


class RecordingStore:
    """A store that records what it is asked to claim, and until when."""

    def __init__(self) -> None:
        self.claims: list[tuple[str, float | None]] = []

    def claim(self, approval_id: str, expires_at: float | None = None) -> bool:
        self.claims.append((approval_id, expires_at))
        return True


def test_the_store_is_asked_to_remember_a_claim_until_the_token_expires(refunds: Refunds) -> None:
    store = RecordingStore()
    registry = refund_registry(refunds, approval_max_age=600, approval_store=store)
    with freezegun.freeze_time(T0):
        data = signed(registry, {"order": 1})
    with freezegun.freeze_time("2030-01-01 12:09:00"):  # claimed 9 minutes later
        assert redeem(registry, data) == Ok("refunded")
        assert redeem(registry, data, max_age=3600) == Ok("refunded")  # from_dict's own
        assert registry.execute_approved(registry.execute("refund", {"order": 2})).is_ok()
    # issued_at + max_age + the clock skew allowed, not "max_age from the claim"
    assert [expires for _, expires in store.claims] == [
        T0_UNIX + 600 + 60,
        T0_UNIX + 3600 + 60,
        T0_UNIX + 9 * 60 + 600 + 60,
    ]
    unlimited = RecordingStore()
    forever = refund_registry(refunds, approval_max_age=None, approval_store=unlimited)
    assert forever.execute_approved(forever.execute("refund", {"order": 3})).is_ok()
    assert unlimited.claims[0][1] is None


def test_a_batch_and_its_approvals_are_claimed_until_they_expire(refunds: Refunds) -> None:
    store = RecordingStore()
    registry = refund_registry(refunds, approval_max_age=600, approval_store=store)
    with freezegun.freeze_time(T0):
        batch = execute_tool_calls(registry, [call("c1", "refund", {"order": 1})])
        wire = json.loads(json.dumps(batch.to_dict(SECRET)))
    with freezegun.freeze_time("2030-01-01 12:05:00"):
        back = ToolCallResults.from_dict(wire, registry, SECRET)
        assert back.resolve({"c1": "reject"}).results[0].is_ok() is False
    assert [expires for _, expires in store.claims] == [T0_UNIX + 660, T0_UNIX + 660]
    assert refunds.calls == []


def test_an_approval_past_its_max_age_does_not_run_even_from_memory(refunds: Refunds) -> None:
    registry = refund_registry(refunds, approval_max_age=600)
    with freezegun.freeze_time(T0):
        pending = registry.execute("refund", {"order": 1})
        assert isinstance(pending, NeedsApproval)
    with freezegun.freeze_time("2030-01-01 12:10:01"):
        outcome = registry.execute_approved(pending)
    assert isinstance(outcome, Err)
    assert outcome.reason.message == (
        "Tool 'refund' was not run: its approval has expired (issued 601 s ago; max_age 600.0 s)"
    )
    assert refunds.calls == []


def test_the_in_memory_store_forgets_a_claim_only_after_its_expiry() -> None:
    store = InMemoryApprovalStore(ttl=60)  # ttl: for claims made without an expiry
    with freezegun.freeze_time(T0):
        assert store.claim("token", T0_UNIX + 3600) is True
        assert store.claim("bare") is True
    with freezegun.freeze_time("2030-01-01 12:01:01"):
        assert "bare" not in store and store.claim("token", T0_UNIX + 3600) is False
    with freezegun.freeze_time("2030-01-01 13:00:00"):  # exactly the expiry: still valid
        assert store.claim("token", T0_UNIX + 3600) is False
    with freezegun.freeze_time("2030-01-01 13:00:01"):
        assert store.claim("token", T0_UNIX + 7200) is True
    with pytest.raises(TypeError):
        store.claim("x", t.cast(float, "soon"))


class OldStore:
    """A store written for the first protocol: claim(approval_id)."""

    def __init__(self) -> None:
        self.ids: set[str] = set()

    def claim(self, approval_id: str) -> bool:
        if approval_id in self.ids:
            return False
        self.ids.add(approval_id)
        return True


def test_a_store_without_expires_at_still_works_and_is_warned_about_once(
    refunds: Refunds, caplog: pytest.LogCaptureFixture
) -> None:
    registry = refund_registry(refunds, approval_store=OldStore())
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        for order in (1, 2):
            pending = registry.execute("refund", {"order": order})
            assert registry.execute_approved(pending) == Ok("refunded")
            assert already_used(registry.execute_approved(pending))
    warnings = [r.getMessage() for r in caplog.records if "without expires_at" in r.getMessage()]
    assert len(warnings) == 1 and "OldStore" in warnings[0]
    assert refunds.calls == [{"order": 1}, {"order": 2}]


class FakeCache:
    """Django's cache API, as far as ``add`` goes."""

    def __init__(self) -> None:
        self.timeouts: list[t.Any] = []
        self.keys: set[str] = set()

    def add(self, key: str, value: t.Any, timeout: t.Any = None, version: t.Any = None) -> bool:
        self.timeouts.append(timeout)
        if key in self.keys:
            return False
        self.keys.add(key)
        return True


def test_the_django_store_keeps_a_claim_until_the_token_expires(refunds: Refunds) -> None:
    cache = FakeCache()
    registry = refund_registry(
        refunds, approval_max_age=600, approval_store=CacheApprovalStore(cache, timeout=30)
    )
    with freezegun.freeze_time(T0):
        data = signed(registry, {"order": 1})
    with freezegun.freeze_time("2030-01-01 12:09:00"):
        assert redeem(registry, data) == Ok("refunded")
        assert already_used(redeem(registry, data))
    store = CacheApprovalStore(cache, timeout=30)
    with freezegun.freeze_time(T0):
        store.claim("bare")  # no expiry: the store's timeout
        store.claim("forever", float("inf"))
        store.claim("past", T0_UNIX - 5.0)
    # 600 + 60 - 540 s left when it was claimed
    assert cache.timeouts == [120, 120, 30, None, 1]


# -- item 6: an approved side effect is never repeated by a retry ------------------------


class SideEffectThenRaise:
    """Sends the refund, then fails (the receipt e-mail, say)."""

    def __init__(self) -> None:
        self.sent: list[int] = []

    def __call__(self, order: int) -> str:
        self.sent.append(order)
        raise ConnectionError("receipt mailer unreachable")


def test_an_approved_tool_that_fails_after_its_side_effect_runs_once() -> None:
    body = SideEffectThenRaise()
    registry = Registry([Tool.from_function(body, name="refund", approval="ask", timeout=5)])
    pending = registry.execute("refund", {"order": 42})
    assert isinstance(pending, NeedsApproval)
    outcome = registry.execute_approved(pending)
    assert isinstance(outcome, Err) and outcome.reason.attempt == 1
    assert body.sent == [42]
    # the approval handler's path too
    from nous_tools import RunContext, execute

    approved = RunContext.new(approval_handler=lambda request: "approve")
    assert execute(registry.lookup("refund"), {"order": 43}, approved).is_ok() is False
    assert body.sent == [42, 43]


@pytest.mark.parametrize(
    "make",
    [
        lambda f, **kw: Tool(name="f", function=f, **kw),
        lambda f, **kw: Tool.from_function(f, **kw),
        lambda f, **kw: tool(**kw)(f),
    ],
    ids=["Tool", "Tool.from_function", "@tool"],
)
def test_ask_and_destructive_tools_default_to_no_retry_unless_retries_is_given(
    make: t.Callable[..., Tool],
) -> None:
    def f(x: int = 0) -> int:
        return x

    assert make(f).retries == 1
    assert make(f, approval="ask").retries == 0
    assert make(f, requires_approval=True).retries == 0
    assert make(f, destructive=True).retries == 0
    assert make(f, destructive=False).retries == 1
    assert make(f, approval="deny").retries == 1  # never runs anyway
    assert make(f, approval="ask", retries=2).retries == 2
    assert make(f, destructive=True, retries=1).retries == 1
    assert make(f, approval="ask", retries=None).retries == 0  # None: not given


def test_evolve_keeps_an_explicit_retries_and_works_a_default_out_again() -> None:
    def f() -> None:
        return None

    explicit = Tool(name="f", function=f, approval="ask", retries=2)
    assert attrs.evolve(explicit, approval="auto").retries == 2
    assert attrs.evolve(explicit, timeout=5).retries == 2
    default = Tool(name="f", function=f)
    assert attrs.evolve(default, approval="ask").retries == 0
    assert attrs.evolve(attrs.evolve(default, approval="ask"), approval="auto").retries == 1
    assert attrs.evolve(default, retries=0, approval="auto").retries == 0
    assert repr(Tool(name="f", function=f, approval="ask")).endswith("retries=0)")
