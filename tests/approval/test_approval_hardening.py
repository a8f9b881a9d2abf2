"""Approval promises that broke in round 3 of the attacks (issue 21), each as a test
that failed before its fix: skewed clocks and the claim's lifetime (item 3), the
retry default of dangerous tools (item 6), what the tool digest covers (item 9),
decorator order (item 11) and a name whose ``__hash__`` raises (item 12).
"""

from __future__ import annotations

import functools
import json
import logging
import os
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


def test_a_registry_subclass_whose_max_age_property_says_otherwise_is_obeyed(
    refunds: Refunds,
) -> None:
    # A Registry reads its approval limits at once, unless a subclass overrides them.
    class ShortLived(Registry):
        @property
        def approval_max_age(self) -> float | None:
            return 60.0

    tool = Tool(name="refund", function=refunds, approval="ask", timeout=None)
    registry = ShortLived([tool], name="shop", approval_max_age=600)
    with freezegun.freeze_time(T0):
        batch = execute_tool_calls(registry, [call("c1", "refund", {"order": 1})])
        wire = json.loads(json.dumps(batch.to_dict(SECRET)))
        pending = registry.execute("refund", {"order": 2})
        assert isinstance(pending, NeedsApproval)
        token = pending.to_dict(SECRET)
    with freezegun.freeze_time("2030-01-01 12:01:01"):  # 61 s: past the subclass's 60 s
        with pytest.raises(ValueError, match="has expired"):
            ToolCallResults.from_dict(wire, registry, SECRET)
        with pytest.raises(ValueError, match="has expired"):
            NeedsApproval.from_dict(token, registry, SECRET)
        outcome = registry.execute_approved(pending)
    assert isinstance(outcome, Err)
    assert "its approval has expired" in outcome.reason.message
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


# -- item 9: the tool digest covers the code and its configuration -------------------


def compiled(source: str, name: str, module: str = "shop.refunds") -> t.Any:
    """A function compiled from ``source`` as if defined in ``module`` (a redeploy)."""
    namespace: dict[str, t.Any] = {"__name__": module}
    exec(compile(source, f"/srv/{module.replace('.', '/')}.py", "exec"), namespace)
    return namespace[name]


V1 = '''
def refund(order: int) -> str:
    """Refund an order."""
    return f"refunded {order}"
'''
V2 = '''
def refund(order: int) -> str:
    """Refund an order."""
    return f"refunded {order} and closed the account"
'''


def test_an_old_token_for_a_redeployed_function_with_a_changed_body_is_refused() -> None:
    before = Registry([Tool.from_function(compiled(V1, "refund"), approval="ask")], name="shop")
    data = json.loads(json.dumps(before.execute("refund", {"order": 7}).to_dict(SECRET)))
    redeployed = Registry([Tool.from_function(compiled(V2, "refund"), approval="ask")], name="shop")
    with pytest.raises(ValueError, match="not the tool that was approved"):
        NeedsApproval.from_dict(data, redeployed, SECRET)
    # the same body moved down the file (a restart after an unrelated edit) still redeems it
    moved = Registry(
        [Tool.from_function(compiled("\n\n\n# a comment\n" + V1, "refund"), approval="ask")],
        name="shop",
    )
    assert redeem(moved, data) == Ok("refunded 7")


def make_refund(account: str, limit: int = 100) -> t.Callable[..., str]:
    def refund(order: int, *, note: str = "") -> str:
        """Refund an order from one account."""
        return f"refunded {order} from {account} (limit {limit})"

    return refund


def refund_from(order: int, account: str = "A") -> str:
    """Refund an order from an account."""
    return f"refunded {order} from {account}"


def test_two_closures_of_one_factory_with_different_configuration_do_not_share_a_digest() -> None:
    from nous_tools.approval import tool_digest

    def digest(function: t.Any) -> str:
        return tool_digest(Tool.from_function(function, name="refund", approval="ask"))

    assert digest(make_refund("A")) == digest(make_refund("A"))
    assert digest(make_refund("A")) != digest(make_refund("B"))
    assert digest(make_refund("A")) != digest(make_refund("A", limit=5))
    assert digest(functools.partial(refund_from, account="A")) != digest(
        functools.partial(refund_from, account="B")
    )
    a_default = compiled('def f(order, account="A"):\n    return account\n', "f")
    b_default = compiled('def f(order, account="B"):\n    return account\n', "f")
    assert digest(a_default) != digest(b_default)
    # and an approval for one does not run the other
    shop_a = Registry([Tool.from_function(make_refund("A"), approval="ask")], name="shop")
    data = json.loads(json.dumps(shop_a.execute("refund", {"order": 1}).to_dict(SECRET)))
    shop_b = Registry([Tool.from_function(make_refund("B"), approval="ask")], name="shop")
    with pytest.raises(ValueError, match="not the tool that was approved"):
        NeedsApproval.from_dict(data, shop_b, SECRET)
    assert redeem(shop_a, data) == Ok("refunded 1 from A (limit 100)")


def test_the_digest_follows_a_rebound_closure_variable_new_code_and_new_defaults() -> None:
    from nous_tools.approval import tool_digest

    account = "A"
    config = {"limit": 10}

    def refund(order: int) -> str:
        return f"{order} from {account} up to {config['limit']}"

    tool_ = Tool.from_function(refund)
    first = tool_digest(tool_)
    assert tool_digest(tool_) == first  # cached, and still right
    account = "B"
    second = tool_digest(tool_)
    assert second != first
    config["limit"] = 20  # a mutable value changed in place
    third = tool_digest(tool_)
    assert third not in (first, second)
    refund.__defaults__ = (5,)
    assert tool_digest(tool_) != third
    refund.__code__ = make_refund("A").__code__.replace(co_freevars=refund.__code__.co_freevars)
    assert tool_digest(tool_) != third
    assert account == "B"


def test_a_closure_with_a_value_a_token_cannot_represent_gets_a_clear_refusal() -> None:
    lock = threading.Lock()

    def make_send(client: object) -> t.Callable[..., str]:
        def send_email(to: str) -> str:
            """Send an e-mail."""
            with lock:
                return f"sent to {to} by {client}"

        return send_email

    registry = Registry(
        [Tool.from_function(make_send(object()), approval="ask", timeout=None)], name="mail"
    )
    pending = registry.execute("send_email", {"to": "a@example.com"})
    assert isinstance(pending, NeedsApproval)
    with pytest.raises(ValueError) as raised:
        pending.to_dict(SECRET)
    message = str(raised.value)
    assert message.startswith("tool 'send_email' cannot be approved with a token: ")
    assert "the variable 'client' captured by " in message
    assert "make_send.<locals>.send_email is a builtins.object" in message
    assert "which a token cannot represent faithfully" in message
    assert "pass such objects to the tool in ctx.deps" in message
    # a token made before the tool captured such a value is refused, saying why
    plain = Registry(
        [Tool.from_function(make_refund("A"), name="send_email", approval="ask")], name="mail"
    )
    data = json.loads(json.dumps(plain.execute("send_email", {"order": 1}).to_dict(SECRET)))
    with pytest.raises(ValueError, match="refused: tool 'send_email' cannot be approved with a"):
        NeedsApproval.from_dict(data, registry, SECRET)
    # in memory (no token) the approval still runs once
    assert registry.execute_approved(pending).is_ok()


def test_the_digest_is_the_same_in_another_process_whatever_its_hash_seed() -> None:
    import os
    import pathlib
    import subprocess
    import sys

    import approval_race

    here = pathlib.Path(approval_race.__file__).resolve().parent
    digests = {approval_race.digest_of_classify()}
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", "import approval_race; print(approval_race.digest_of_classify())"],
            capture_output=True, text=True, timeout=120, cwd=str(here),
            env={**os.environ, "PYTHONHASHSEED": seed},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        digests.add(done.stdout.strip())
    assert len(digests) == 1, digests


# -- item 11: decorator order never drops options -----------------------------------


def test_tool_above_registry_register_registers_the_options_written() -> None:
    registry = Registry(name="ops")

    @tool(approval="ask", timeout=5)
    @registry.register
    def wipe(path: str) -> str:
        """Wipe a path."""
        return f"wiped {path}"

    registered = registry.lookup("wipe")
    assert registered is wipe  # the registry holds the tool with the options written
    assert (wipe.approval, wipe.timeout, wipe.retries) == ("ask", 5.0, 0)
    assert wipe.description == "Wipe a path." and wipe("/x") == "wiped /x"
    assert isinstance(registry.execute("wipe", {"path": "/tmp"}), NeedsApproval)
    assert registry.names() == ["wipe"]


def test_registry_register_above_tool_registers_the_options_written() -> None:
    registry = Registry(name="ops")

    @registry.register
    @tool(approval="ask", timeout=5)
    def wipe(path: str) -> str:
        """Wipe a path."""
        return f"wiped {path}"

    assert registry.lookup("wipe") is wipe
    assert (wipe.approval, wipe.timeout, wipe.retries) == ("ask", 5.0, 0)
    assert isinstance(registry.execute("wipe", {"path": "/tmp"}), NeedsApproval)


def test_a_renaming_tool_above_registry_register_moves_the_registration() -> None:
    registry = Registry()

    @tool(name="wipe_disk", approval="deny")
    @registry.register
    def wipe(path: str) -> str:
        return path

    assert registry.names() == ["wipe_disk"]
    assert registry.lookup("wipe_disk") is wipe and wipe.approval == "deny"


def test_options_on_a_tool_that_is_already_a_tool_raise_saying_which_order_to_use() -> None:
    def wipe(path: str) -> str:
        return path

    made = tool(timeout=5)(wipe)
    for attempt in (
        lambda: tool(approval="ask")(made),
        lambda: Tool.from_function(made, approval="ask"),
        lambda: tool(made),
    ):
        with pytest.raises(TypeError) as raised:
            attempt()
        message = str(raised.value)
        assert "got a Tool ('wipe'), not a function" in message
        assert "@registry.register\n    @tool(...)\n    def wipe(...)" in message
    # two option decorators above a register: the second would have to guess
    registry = Registry()
    with pytest.raises(TypeError, match="give all the options in one @tool"):

        @tool(timeout=5)
        @tool(approval="ask")
        @registry.register
        def erase(path: str) -> str:
            return path

    erased = registry.lookup("erase")
    assert erased is not None and erased.approval == "ask"  # what the first one wrote


# -- item 12: a name whose __hash__ raises is bad input, not a crash --------------------


class BadHash:
    """A "name" whose hash raises something other than TypeError (and whose repr too)."""

    def __hash__(self) -> int:
        raise RuntimeError("no hash for you")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


class BadHashStr(str):
    __slots__ = ()

    def __hash__(self) -> int:
        raise ValueError("no hash for this str")


@pytest.mark.parametrize("name", [BadHash(), BadHashStr("refund")], ids=["object", "str"])
def test_a_name_whose_hash_raises_is_an_err_on_every_path(refunds: Refunds, name: t.Any) -> None:
    from nous_tools import ToolCall, ToolNotFound

    registry = refund_registry(refunds)
    outcome = registry.execute(name, {"order": 1})
    assert isinstance(outcome, Err) and isinstance(outcome.reason, ToolNotFound)
    approved = registry.execute_approved(name, {"order": 1})
    assert isinstance(approved, Err) and "internal error" not in approved.reason.message
    assert registry.lookup(name) is None
    assert (name in registry) is False
    for result in registry.execute_many([(name, {"order": 1}), ToolCall("c1", name, {})]):
        assert isinstance(result, Err) and isinstance(result.reason, ToolNotFound)
    batch = execute_tool_calls(registry, [ToolCall("c1", name, {"order": 1})])
    assert isinstance(batch.results[0], Err)
    assert refunds.calls == []


def test_approval_ids_are_random_version_4_uuids_never_repeated() -> None:
    import uuid

    from nous_tools._util._tokens import _new_id

    ids = [_new_id() for _ in range(1000)]  # several reads of os.urandom
    assert len(set(ids)) == len(ids)
    for made in ids:
        parsed = uuid.UUID(hex=made)
        assert (parsed.version, parsed.variant, parsed.hex) == (4, uuid.RFC_4122, made)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_process_never_hands_out_the_ids_its_parent_will() -> None:
    """Ids are read from os.urandom several at a time: a child made by fork must not
    inherit the ones its parent has ready (two approvals with one id would let one
    decision use up the other)."""
    from nous_tools._util._tokens import _new_id

    _new_id()  # the parent has ids ready
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            os.write(write, "".join(_new_id() for _ in range(3)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        received = pipe.read().decode()
    os.waitpid(child, 0)
    theirs = {received[i : i + 32] for i in range(0, len(received), 32)}
    ours = {_new_id() for _ in range(3)}
    assert len(theirs) == 3 and not theirs & ours
