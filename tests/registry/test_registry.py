"""The registry path (SPEC 5, after Minga's executor tests): lookup by name, approval
levels, NeedsApproval and its JSON form, execute_approved, execute_many, threads."""

from __future__ import annotations

import collections
import collections.abc as c
import hashlib
import json
import threading
import typing as t

import attrs
import pytest

from nous_tools import (
    ApprovalAlreadyUsed,
    ApprovalRequest,
    Edit,
    Err,
    InMemoryApprovalStore,
    NeedsApproval,
    Ok,
    Registry,
    RunContext,
    Tool,
    ToolCall,
    ToolDenied,
    ToolError,
    ToolExecutor,
    ToolNotFound,
    default_executor,
)
from nous_tools.approval import tool_digest


def make(fn: c.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("timeout", None)
    return Tool.from_function(fn, **options)


def echo(text: str) -> str:
    """Say it back."""
    return text


@pytest.fixture
def registry(executor: ToolExecutor) -> Registry:
    return Registry(executor=executor)


class Calls:
    """A tool function that records each call."""

    def __init__(self, value: t.Any = "ran") -> None:
        self.calls: list[dict[str, t.Any]] = []
        self.value = value

    def __call__(self, **kwargs: t.Any) -> t.Any:
        self.calls.append(kwargs)
        return self.value


# -- execute by name -----------------------------------------------------------


def test_auto_tool_echoes_its_argument(registry: Registry) -> None:
    registry.register(make(echo))
    assert registry.execute("echo", {"text": "hello"}) == Ok("hello")


def test_auto_tool_with_a_timeout_runs_in_a_worker_and_echoes(registry: Registry) -> None:
    registry.register(make(echo, timeout=5))
    assert registry.execute("echo", {"text": "hello"}) == Ok("hello")


def test_unknown_name_is_err_tool_not_found(registry: Registry) -> None:
    result = registry.execute("missing", {"x": 1})
    assert isinstance(result, Err)
    assert isinstance(result.reason, ToolNotFound)
    assert result.reason.name == "missing"


def test_a_tool_given_in_place_of_its_name_runs_through_the_registry_path(
    registry: Registry,
) -> None:
    unregistered = make(echo)
    assert registry.execute(unregistered, {"text": "hi"}) == Ok("hi")
    registry.advice.register("after", "echo", lambda result: Ok(result.value.upper()))
    assert registry.execute(unregistered, {"text": "hi"}) == Ok("HI")  # the name's advice
    asked = make(Calls(), name="rm", approval="ask")
    pending = registry.execute(asked, {"path": "/tmp/x"})
    assert isinstance(pending, NeedsApproval) and pending.tool is asked
    denied = registry.execute(make(Calls(), name="nuke", approval="deny"), {})
    assert isinstance(denied, Err) and isinstance(denied.reason, ToolDenied)
    stranger = registry.execute(object(), {})  # neither a name nor a Tool
    assert isinstance(stranger, Err) and isinstance(stranger.reason, ToolNotFound)


def test_ask_tool_returns_needs_approval_with_the_original_arguments_and_does_not_run(
    registry: Registry,
) -> None:
    body = Calls()
    tool = registry.register(make(body, name="rm", approval="ask"))
    arguments = {"path": "/tmp/x"}
    result = registry.execute("rm", arguments)
    assert isinstance(result, NeedsApproval)
    assert result.tool is tool
    assert result.arguments == {"path": "/tmp/x"}
    assert result.is_ok() is False
    assert body.calls == []


def test_ask_tool_with_none_arguments_needs_approval_for_empty_arguments(
    registry: Registry,
) -> None:
    registry.register(make(Calls(), name="rm", approval="ask"))
    result = registry.execute("rm")
    assert isinstance(result, NeedsApproval)
    assert result.arguments == {}


def test_ask_tool_with_a_handler_is_decided_by_the_executor_approval_step(
    registry: Registry,
) -> None:
    body = Calls()
    registry.register(make(body, name="rm", approval="ask"))
    seen: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> str:
        seen.append(request)
        return "approve"

    ok = registry.execute(
        "rm", {"path": "a"}, RunContext.new(approval_handler=approve), call_id="c1"
    )
    assert ok == Ok("ran")
    assert [(r.name, r.id, dict(r.arguments)) for r in seen] == [("rm", "c1", {"path": "a"})]

    rejected = registry.execute(
        "rm", {"path": "b"}, RunContext.new(approval_handler=lambda r: "reject")
    )
    assert isinstance(rejected, Err)
    assert "rejected by the approval handler" in rejected.reason.message
    assert body.calls == [{"path": "a"}]


def test_ask_tool_in_a_gated_context_runs_without_asking(registry: Registry) -> None:
    body = Calls()
    registry.register(make(body, name="rm", approval="ask"))
    assert registry.execute("rm", {"path": "a"}, RunContext.new(approval_gated=True)) == Ok("ran")
    assert body.calls == [{"path": "a"}]


def test_an_edit_never_changes_which_tool_runs(registry: Registry) -> None:
    body = Calls("rm ran")
    other = Calls("other ran")
    registry.register(make(body, name="rm", approval="ask"))
    registry.register(make(other, name="other"))
    ctx = RunContext.new(approval_handler=lambda r: Edit({"path": "edited", "tool": "other"}))
    assert registry.execute("rm", {"path": "a"}, ctx) == Ok("rm ran")
    assert body.calls == [{"path": "edited", "tool": "other"}]
    assert other.calls == []


def test_deny_tool_is_err_tool_denied_and_never_runs(registry: Registry) -> None:
    body = Calls()
    registry.register(make(body, name="nuke", approval="deny"))
    for ctx in (
        None,
        RunContext.new(approval_gated=True),
        RunContext.new(approval_handler=lambda r: "approve"),
    ):
        result = registry.execute("nuke", {}, ctx)
        assert isinstance(result, Err)
        assert isinstance(result.reason, ToolDenied)
    assert body.calls == []


def test_a_tool_returning_a_bare_value_is_ok(registry: Registry) -> None:
    registry.register(make(lambda: {"n": 1}, name="bare"))
    registry.register(make(lambda: None, name="nothing"))
    assert registry.execute("bare", {}) == Ok({"n": 1})
    assert registry.execute("nothing") == Ok(None)


def test_a_raising_tool_is_err_tool_error(registry: Registry) -> None:
    def boom() -> None:
        raise RuntimeError("kaput")

    registry.register(make(boom, retries=0))
    result = registry.execute("boom", {})
    assert isinstance(result, Err)
    assert isinstance(result.reason, ToolError)
    assert result.reason.message == "Tool execution failed: RuntimeError: kaput"
    assert isinstance(result.reason.original_error, RuntimeError)


def test_a_returned_err_passes_through_unchanged(registry: Registry) -> None:
    err = Err("nope")
    registry.register(make(lambda: err, name="refuse"))
    assert registry.execute("refuse", {}) is err


def test_execution_by_name_goes_through_the_executor_pipeline(
    registry: Registry, recorder: t.Any
) -> None:
    attempts: list[int] = []

    def flaky(ctx: RunContext[t.Any], n: int) -> int:
        attempts.append(ctx.retry)
        if ctx.retry == 0:
            raise ValueError("first try fails")
        return n

    registry.register(make(flaky, retries=1))
    invalid = registry.execute("flaky", {"n": "one"})
    assert isinstance(invalid, Err)
    assert invalid.reason.message.startswith("Invalid arguments for 'flaky'")
    assert attempts == []
    assert registry.execute("flaky", {"n": 3}) == Ok(3)
    assert attempts == [0, 1]
    assert recorder.names == ["start", "exception", "start", "stop"]


def test_execute_never_raises_for_bad_input(registry: Registry) -> None:
    registry.register(make(Calls(), name="rm", approval="ask"))
    registry.register(make(echo))
    unhashable = registry.execute(t.cast(str, ["echo"]), {})
    assert isinstance(unhashable, Err) and isinstance(unhashable.reason, ToolNotFound)
    not_a_mapping = registry.execute("rm", t.cast(t.Any, [1, 2]))
    assert isinstance(not_a_mapping, Err)
    assert "expected a mapping" in not_a_mapping.reason.message
    bad_ctx = registry.execute("echo", {"text": "x"}, t.cast(t.Any, "ctx"))
    assert isinstance(bad_ctx, Err)
    not_names = registry.execute("rm", {1: "a", "b": 2})
    assert isinstance(not_names, Err)
    assert "argument names of an approval must be str" in not_names.reason.message
    unfingerprintable = registry.execute("rm", {"when": object()})
    assert isinstance(unfingerprintable, Err)
    assert "cannot be fingerprinted" in unfingerprintable.reason.message


def test_the_default_executor_is_used_when_none_is_given() -> None:
    registry = Registry([make(echo)])
    assert registry.executor is default_executor()
    assert registry.execute("echo", {"text": "x"}) == Ok("x")


# -- execute_approved ----------------------------------------------------------


def test_execute_approved_runs_an_ask_tool(registry: Registry) -> None:
    body = Calls()
    tool = registry.register(make(body, name="rm", approval="ask"))
    assert registry.execute_approved(tool, {"path": "a"}) == Ok("ran")
    assert registry.execute_approved("rm", {"path": "b"}) == Ok("ran")
    assert body.calls == [{"path": "a"}, {"path": "b"}]


def test_execute_approved_runs_even_a_deny_tool(registry: Registry) -> None:
    body = Calls()
    tool = registry.register(make(body, name="nuke", approval="deny"))
    assert registry.execute_approved(tool, {}) == Ok("ran")
    assert body.calls == [{}]


def test_execute_approved_of_a_deny_tool_says_so_in_a_warning(
    registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    tool = registry.register(make(Calls(), name="nuke", approval="deny"))
    with caplog.at_level("WARNING", logger="nous_tools"):
        assert registry.execute_approved("nuke", {"what": "everything"}) == Ok("ran")
        assert registry.execute_approved(tool, {}) == Ok("ran")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert (
        warnings
        == ["Tool 'nuke' is 'deny' and ran only because the program called execute_approved"] * 2
    )
    assert "everything" not in caplog.text  # no argument values


def test_execute_approved_runs_with_an_approval_gated_context(registry: Registry) -> None:
    seen: list[RunContext[t.Any]] = []

    def look(ctx: RunContext[t.Any]) -> t.Any:
        seen.append(ctx)
        return ctx.deps

    registry.register(make(look, approval="ask"))
    assert registry.execute_approved("look", {}) == Ok(None)
    assert registry.execute_approved("look", {}, RunContext.new({"k": 1})) == Ok({"k": 1})
    assert [ctx.approval_gated for ctx in seen] == [True, True]


def test_execute_approved_still_validates_the_arguments(registry: Registry) -> None:
    registry.register(make(echo, approval="ask"))
    result = registry.execute_approved("echo", {"text": 3})
    assert isinstance(result, Err)
    assert "Type mismatch: text: expected string, got integer" in result.reason.message


def test_execute_approved_with_a_needs_approval_runs_its_arguments_once(
    registry: Registry,
) -> None:
    body = Calls()
    registry.register(make(body, name="rm", approval="ask"))
    for ctx_given in ((), (RunContext.new({"d": 1}),)):
        pending = registry.execute("rm", {"path": "/tmp/x"})
        assert isinstance(pending, NeedsApproval)
        assert registry.execute_approved(pending, *ctx_given) == Ok("ran")
        again = registry.execute_approved(pending, ctx=RunContext.new())
        assert isinstance(again, Err) and isinstance(again.reason, ApprovalAlreadyUsed)
        assert again.reason.message == "Tool 'rm' was not run: its approval was already used"
    assert body.calls == [{"path": "/tmp/x"}] * 2


def test_execute_approved_refuses_a_needs_approval_whose_arguments_changed(
    registry: Registry,
) -> None:
    body = Calls()
    registry.register(make(body, name="rm", approval="ask"))
    pending = registry.execute("rm", {"path": "/tmp/x"})
    assert isinstance(pending, NeedsApproval)

    evolved = attrs.evolve(pending, arguments={"path": "/"})
    result = registry.execute_approved(evolved)
    assert isinstance(result, Err)
    assert "arguments changed after approval" in result.reason.message

    with pytest.raises(TypeError, match="read-only"):  # its arguments cannot change in place
        t.cast(dict[str, t.Any], pending.arguments)["path"] = "/etc"
    assert body.calls == []
    assert registry.execute_approved(pending) == Ok("ran")  # the refusal did not use it up
    assert body.calls == [{"path": "/tmp/x"}]


def test_execute_approved_refuses_separate_arguments_with_a_needs_approval(
    registry: Registry,
) -> None:
    body = Calls()
    registry.register(make(body, name="rm", approval="ask"))
    pending = registry.execute("rm", {"path": "/tmp/x"})
    result = registry.execute_approved(pending, {"path": "/"})
    assert isinstance(result, Err)
    assert "not separately" in result.reason.message
    assert body.calls == []


def test_execute_approved_refuses_a_needs_approval_for_a_replaced_tool(
    registry: Registry,
) -> None:
    first, second = Calls("first"), Calls("second")
    registry.register(make(first, name="rm", approval="ask"))
    pending = registry.execute("rm", {"path": "a"})
    registry.register(make(second, name="rm", approval="ask"))
    replaced = registry.execute_approved(pending)
    assert isinstance(replaced, Err)
    assert "not the one that was approved" in replaced.reason.message
    registry.unregister("rm")
    gone = registry.execute_approved(pending)
    assert isinstance(gone, Err) and isinstance(gone.reason, ToolNotFound)
    assert first.calls == [] and second.calls == []


def test_execute_approved_reports_unknown_names_and_bad_input(registry: Registry) -> None:
    unknown = registry.execute_approved("missing", {})
    assert isinstance(unknown, Err) and isinstance(unknown.reason, ToolNotFound)
    wrong = registry.execute_approved(t.cast(t.Any, 42), {})
    assert isinstance(wrong, Err)
    assert "expects a Tool, a tool name or a NeedsApproval" in wrong.reason.message


# -- the table -----------------------------------------------------------------


def test_register_replaces_a_tool_of_the_same_name(registry: Registry) -> None:
    registry.register(make(lambda: "old", name="t"))
    new = registry.register(make(lambda: "new", name="t"))
    assert registry.lookup("t") is new
    assert len(registry) == 1
    assert registry.execute("t") == Ok("new")


def test_all_is_sorted_by_name(registry: Registry) -> None:
    for name in ("zeta", "alpha", "mid"):
        registry.register(make(lambda: None, name=name))
    assert [tool.name for tool in registry.all()] == ["alpha", "mid", "zeta"]
    assert registry.names() == ["alpha", "mid", "zeta"]
    assert [tool.name for tool in registry] == ["alpha", "mid", "zeta"]


def test_membership_by_name_and_by_tool(registry: Registry) -> None:
    tool = registry.register(make(echo))
    assert "echo" in registry
    assert "other" not in registry
    assert tool in registry
    assert make(echo) not in registry  # same name, another tool
    assert ["unhashable"] not in registry
    assert registry.lookup("other") is None


def test_unregister_removes_and_returns_the_tool(registry: Registry) -> None:
    tool = registry.register(make(echo))
    assert registry.unregister("echo") is tool
    assert "echo" not in registry
    assert registry.unregister("echo") is None
    result = registry.execute("echo", {"text": "x"})
    assert isinstance(result, Err) and isinstance(result.reason, ToolNotFound)


def test_register_accepts_a_plain_function_and_works_as_a_decorator(registry: Registry) -> None:
    @registry.register
    def shout(text: str) -> str:
        """Upper-case it."""
        return text.upper()

    assert isinstance(shout, Tool)
    assert registry.lookup("shout") is shout
    assert shout.description == "Upper-case it."
    assert registry.execute("shout", {"text": "hi"}) == Ok("HI")
    with pytest.raises(TypeError):
        registry.register(t.cast(t.Any, 42))


def test_registry_built_with_tools_registers_them() -> None:
    registry = Registry([make(echo), make(lambda: 1, name="one")])
    assert registry.names() == ["echo", "one"]


# -- execute_many --------------------------------------------------------------


def test_execute_many_runs_the_registry_path_per_call_in_input_order(
    registry: Registry,
) -> None:
    registry.register(make(echo, timeout=5))
    registry.register(make(Calls(), name="rm", approval="ask"))
    registry.register(make(Calls(), name="nuke", approval="deny"))
    registry.advice.register("after", "echo", lambda r: Ok(r.value + "!"))
    results = registry.execute_many(
        [
            ("echo", {"text": "a"}),
            ToolCall("c2", "echo", {"text": "b"}),
            ("rm", {"path": "x"}),
            ("nuke", {}),
            ToolCall("c5", "missing", {}),
            ("missing", {}),
        ]
    )
    assert results[:2] == [Ok("a!"), Ok("b!")]
    assert isinstance(results[2], NeedsApproval) and results[2].arguments == {"path": "x"}
    assert isinstance(results[3], Err) and isinstance(results[3].reason, ToolDenied)
    assert isinstance(results[4], Err) and isinstance(results[4].reason, ToolNotFound)
    assert isinstance(results[5], Err) and isinstance(results[5].reason, ToolNotFound)


def test_execute_many_passes_tool_call_ids_to_the_approval_handler(registry: Registry) -> None:
    registry.register(make(Calls(), name="rm", approval="ask"))
    ids: list[str | None] = []
    lock = threading.Lock()

    def handler(request: ApprovalRequest) -> str:
        with lock:
            ids.append(request.id)
        return "approve"

    results = registry.execute_many(
        [ToolCall("a", "rm", {}), ToolCall("b", "rm", {})],
        RunContext.new(approval_handler=handler),
    )
    assert results == [Ok("ran"), Ok("ran")]
    assert sorted(t.cast(list[str], ids)) == ["a", "b"]


def test_execute_many_reports_malformed_calls_per_call(registry: Registry) -> None:
    registry.register(make(echo))
    results = registry.execute_many([t.cast(t.Any, 42), ("echo", {"text": "ok"})])
    assert isinstance(results[0], Err)
    assert "(name, arguments) pairs or ToolCalls" in results[0].reason.message
    assert results[1] == Ok("ok")


# -- NeedsApproval -------------------------------------------------------------


@pytest.fixture
def pending(registry: Registry) -> NeedsApproval:
    registry.register(make(Calls(), name="rm", approval="ask", description="Remove a file."))
    result = registry.execute("rm", {"path": "/tmp/x", "force": True, "n": [1, 2]})
    assert isinstance(result, NeedsApproval)
    return result


def test_needs_approval_has_a_stable_id_and_a_sha256_fingerprint(pending: NeedsApproval) -> None:
    canonical = json.dumps(
        {"tool": "rm", "arguments": {"path": "/tmp/x", "force": True, "n": [1, 2]}},
        sort_keys=True,
        separators=(",", ":"),
    )
    assert pending.fingerprint == hashlib.sha256(canonical.encode()).hexdigest()
    assert len(pending.id) == 32 and pending.id == pending.id
    assert NeedsApproval(pending.tool, {}, id="given").id == "given"
    assert NeedsApproval(pending.tool, {}).id != NeedsApproval(pending.tool, {}).id
    assert pending.verify()


def test_needs_approval_round_trips_through_a_signed_json_token(
    registry: Registry, pending: NeedsApproval
) -> None:
    data = json.loads(json.dumps(pending.to_dict(secret="server-secret")))
    assert data == {
        "v": 1,
        "id": pending.id,
        "tool": "rm",
        "tool_digest": tool_digest(pending.tool),
        "arguments": {"path": "/tmp/x", "force": True, "n": [1, 2]},
        "issued_at": pending.issued_at,
        "audience": None,
        "call_id": None,
        "description": "Remove a file.",
        "signature": data["signature"],
    }
    assert data["signature"].startswith("hmac-sha256:") and len(data["signature"]) == 12 + 64
    back = NeedsApproval.from_dict(data, registry, secret="server-secret")
    assert back == pending
    assert back.tool is pending.tool
    assert registry.execute_approved(back) == Ok("ran")


def test_from_dict_refuses_a_token_signed_with_another_secret_or_read_without_one(
    registry: Registry, pending: NeedsApproval
) -> None:
    data = pending.to_dict(secret="server-secret")
    with pytest.raises(ValueError, match="signature does not match"):
        NeedsApproval.from_dict(data, registry, secret="another-secret")
    with pytest.raises(ValueError, match="signed, but no secret was given"):
        NeedsApproval.from_dict(data, registry)
    with pytest.raises(ValueError, match="non-empty str or bytes"):
        NeedsApproval.from_dict(data, registry, secret="")


def test_an_unsigned_token_is_read_only_when_allowed_and_still_checksummed(
    registry: Registry, pending: NeedsApproval
) -> None:
    data = json.loads(json.dumps(pending.to_dict()))
    assert data["signature"].startswith("sha256:")
    with pytest.raises(ValueError, match="unsigned tokens are refused"):
        NeedsApproval.from_dict(data, registry)
    with pytest.raises(ValueError, match="not signed"):
        NeedsApproval.from_dict(data, registry, secret="server-secret")
    back = NeedsApproval.from_dict(data, registry, allow_unsigned=True)
    assert back == pending
    data["arguments"]["path"] = "/"  # a corrupted row in your own database
    with pytest.raises(ValueError, match="signature does not match"):
        NeedsApproval.from_dict(data, registry, allow_unsigned=True)


def test_from_dict_names_an_unknown_tool(registry: Registry, pending: NeedsApproval) -> None:
    data = pending.to_dict(secret="s")
    registry.unregister("rm")
    with pytest.raises(ValueError, match="tool 'rm' is not registered"):
        NeedsApproval.from_dict(data, registry, secret="s")


@pytest.mark.parametrize(
    "broken",
    [
        [],
        {"arguments": {}, "signature": "f", "id": "i"},
        {"tool": "rm", "v": 2},
        {"tool": "rm", "v": True},
        {"tool": "rm", "v": 1, "id": "i"},
        {"tool": "", "v": 1},
    ],
)
def test_from_dict_refuses_malformed_data(registry: Registry, broken: t.Any) -> None:
    registry.register(make(Calls(), name="rm", approval="ask"))
    with pytest.raises(ValueError, match="refused"):
        NeedsApproval.from_dict(broken, registry, secret="s")


def test_to_dict_refuses_to_sign_changed_arguments(pending: NeedsApproval) -> None:
    changed = attrs.evolve(pending, arguments={"path": "/"})
    assert not changed.verify()
    with pytest.raises(ValueError, match="no longer match the fingerprint"):
        changed.to_dict(secret="s")
    with pytest.raises(ValueError, match="no longer match the fingerprint"):
        changed.to_dict()


def test_to_dict_writes_what_json_cannot_say_exactly_as_tagged_values(registry: Registry) -> None:
    tool = registry.register(make(Calls(), name="rm", approval="ask"))
    na = NeedsApproval(tool, {"when": {3}, "tup": (1, 2), "raw": b"\x00", "ratio": 1.0})
    data = json.loads(json.dumps(na.to_dict(secret="s")))
    assert data["arguments"] == {
        "when": {"$set": [3]},
        "tup": {"$tuple": [1, 2]},
        "raw": {"$bytes": "AA=="},
        "ratio": {"$float": "1.0"},
    }
    back = NeedsApproval.from_dict(data, registry, secret="s")
    assert back.arguments == {"when": {3}, "tup": (1, 2), "raw": b"\x00", "ratio": 1.0}
    assert type(back.arguments["tup"]) is tuple and type(back.arguments["ratio"]) is float


def test_values_an_approval_cannot_represent_are_refused_not_repr_ed(registry: Registry) -> None:
    tool = registry.register(make(Calls(), name="rm", approval="ask"))
    for value in (object(), Calls, 1 + 2j, bytearray(b"x"), collections.OrderedDict(a=1)):
        with pytest.raises(ValueError, match="cannot represent faithfully"):
            NeedsApproval(tool, {"v": [value]})
        result = registry.execute("rm", {"v": value})
        assert isinstance(result, Err) and "arguments['v']" in result.reason.message


def test_needs_approval_carries_the_call_id_and_the_registry_name(executor: ToolExecutor) -> None:
    registry = Registry([make(Calls(), name="rm", approval="ask")], executor=executor, name="ops")
    pending = registry.execute("rm", {}, call_id="call_9")
    assert isinstance(pending, NeedsApproval)
    assert (pending.call_id, pending.audience) == ("call_9", "ops")
    assert registry.execute("rm", {}).call_id is None  # type: ignore[union-attr]
    assert isinstance(pending.issued_at, int)


def test_registry_options_are_checked(executor: ToolExecutor) -> None:
    registry = Registry(executor=executor)
    assert registry.name is None and registry.approval_max_age == 24 * 3600
    assert isinstance(registry.approval_store, InMemoryApprovalStore)
    with pytest.raises(TypeError, match="claim"):
        Registry(approval_store=t.cast(t.Any, object()))
    with pytest.raises(ValueError, match="max_age"):
        Registry(approval_max_age=-1)
    with pytest.raises(TypeError, match="name"):
        Registry(name=t.cast(t.Any, 3))
    assert Registry(approval_max_age=None).approval_max_age is None


# -- threads -------------------------------------------------------------------


def test_eight_threads_registering_executing_and_advising_lose_nothing(
    executor: ToolExecutor,
) -> None:
    registry = Registry([make(echo)], executor=executor)
    threads_n, rounds = 8, 200
    barrier = threading.Barrier(threads_n)
    errors: list[BaseException] = []
    results: list[list[t.Any]] = [[] for _ in range(threads_n)]
    befores_run: list[int] = []

    def count_before(arguments: t.Any) -> t.Any:
        befores_run.append(1)
        return arguments

    # Built beforehand: no schema, so building them costs nothing next to the work.
    tools = [
        [
            Tool(name=f"t{i}_{k}", function=lambda text, _i=i: f"{_i}:{text}", timeout=None)
            for k in range(rounds)
        ]
        for i in range(threads_n)
    ]

    def work(i: int) -> None:
        try:
            barrier.wait()
            for k in range(rounds):
                name = f"t{i}_{k}"
                registry.register(tools[i][k])
                registry.advice.register("after", name, lambda r: Ok(f"[{r.value}]"))
                if k < 5:
                    registry.advice.register("before", "echo", count_before)
                results[i].append(registry.execute(name, {"text": str(k)}))
                results[i].append(registry.execute("echo", {"text": name}))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(registry) == 1 + threads_n * rounds
    assert len(registry.advice.names()) == 1 + threads_n * rounds
    befores_run.clear()
    assert registry.execute("echo", {"text": "last"}) == Ok("last")
    assert len(befores_run) == threads_n * 5
    for i in range(threads_n):
        assert results[i][0::2] == [Ok(f"[{i}:{k}]") for k in range(rounds)]
        assert results[i][1::2] == [Ok(f"t{i}_{k}") for k in range(rounds)]
