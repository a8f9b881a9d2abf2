"""Advice (SPEC 5, after Minga's Config.Advice tests): phases, order, crash isolation,
the circuit breaker, and where advice sits around the executor pipeline."""

from __future__ import annotations

import collections.abc as c
import logging
import typing as t

import pytest

from nous_tools import (
    Advice,
    Err,
    NeedsApproval,
    Ok,
    Registry,
    RunContext,
    Tool,
    ToolError,
    ToolExecutor,
)


def make(fn: c.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("timeout", None)
    return Tool.from_function(fn, **options)


def identity(x: t.Any) -> t.Any:
    return x


def around_identity(proceed: c.Callable[[t.Any], t.Any], args: t.Any) -> t.Any:
    return proceed(args)


@pytest.fixture
def log() -> list[str]:
    return []


@pytest.fixture
def registry(executor: ToolExecutor, log: list[str]) -> Registry:
    def echo(text: str) -> str:
        log.append(f"core:{text}")
        return text

    return Registry([make(echo)], executor=executor)


def core_of(log: list[str]) -> c.Callable[[t.Any], t.Any]:
    def core(args: t.Any) -> t.Any:
        log.append("core")
        return Ok(args)

    return core


# -- registration --------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "fn"),
    [
        ("before", identity),
        ("after", identity),
        ("around", around_identity),
        ("override", identity),
    ],
)
def test_each_phase_registers(phase: str, fn: c.Callable[..., t.Any]) -> None:
    advice = Advice()
    assert not advice.advised("echo")
    advice.register(phase, "echo", fn)
    assert advice.has_advice(phase, "echo")
    assert advice.advised("echo")
    assert not advice.advised("other")
    others = [p for p in Advice.PHASES if p != phase]
    assert not any(advice.has_advice(p, "echo") for p in others)


def test_a_bad_phase_is_refused_naming_the_valid_phases() -> None:
    advice = Advice()
    with pytest.raises(ValueError, match="'before', 'after', 'around', 'override'") as info:
        advice.register("during", "echo", identity)
    assert "'during'" in str(info.value)
    with pytest.raises(ValueError):
        advice.has_advice("during", "echo")
    assert not advice.advised("echo")


@pytest.mark.parametrize(
    ("phase", "fn", "expected"),
    [
        ("before", lambda: None, "1 positional argument"),
        ("after", lambda a, b: None, "1 positional argument"),
        ("override", lambda a, b: None, "1 positional argument"),
        ("around", lambda args: None, "2 positional arguments (proceed, args)"),
        ("around", lambda a, b, c: None, "2 positional arguments"),
        ("before", lambda a, *, required: None, "1 positional argument"),
    ],
)
def test_a_function_of_the_wrong_arity_is_refused_naming_the_arity(
    phase: str, fn: c.Callable[..., t.Any], expected: str
) -> None:
    advice = Advice()
    with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        advice.register(phase, "echo", fn)
    assert not advice.advised("echo")


def test_functions_with_star_args_or_defaults_have_an_acceptable_arity() -> None:
    advice = Advice()
    advice.register("before", "echo", lambda *args: args[0])
    advice.register("around", "echo", lambda *args: args[0](args[1]))
    advice.register("after", "echo", lambda result, extra=None: result)
    advice.register("override", "echo", lambda args, **kwargs: args)
    assert all(advice.has_advice(p, "echo") for p in Advice.PHASES)


def test_a_non_callable_or_a_bad_name_is_refused() -> None:
    advice = Advice()
    with pytest.raises(TypeError):
        advice.register("before", "echo", t.cast(t.Any, 42))
    with pytest.raises(TypeError):
        advice.register("before", t.cast(t.Any, None), identity)


def test_unregister_removes_one_function_and_reset_removes_all_advice() -> None:
    advice = Advice()
    advice.register("before", "echo", identity)
    advice.register("after", "echo", identity)
    advice.register("override", "other", identity)
    assert advice.unregister("before", "echo", identity)
    assert not advice.unregister("before", "echo", identity)
    assert not advice.has_advice("before", "echo") and advice.advised("echo")
    advice.reset_breakers()
    assert advice.has_advice("after", "echo")  # reset_breakers() keeps the advice
    advice.reset()  # Minga's reset/0: every name, every phase
    assert not advice.advised("echo") and not advice.advised("other")
    assert advice.names() == []
    advice.register("before", "echo", identity)
    advice.clear()  # the same as reset()
    assert advice.names() == []


# -- order ---------------------------------------------------------------------


def test_wrap_returns_the_core_itself_when_the_name_has_no_advice() -> None:
    advice = Advice()
    core = core_of([])
    assert advice.wrap("echo", core) is core
    advice.register("before", "other", identity)
    assert advice.wrap("echo", core) is core
    assert advice.wrap("other", core) is not core


def test_befores_then_core_then_afters_each_in_registration_order(log: list[str]) -> None:
    advice = Advice()

    def before(tag: str) -> c.Callable[[t.Any], t.Any]:
        def fn(args: t.Any) -> t.Any:
            log.append(f"before{tag}")
            return {**args, "trail": [*args["trail"], tag]}

        return fn

    def after(tag: str) -> c.Callable[[t.Any], t.Any]:
        def fn(result: t.Any) -> t.Any:
            log.append(f"after{tag}")
            return Ok([*result.value, tag])

        return fn

    advice.register("before", "echo", before("1"))
    advice.register("after", "echo", after("A"))
    advice.register("before", "echo", before("2"))
    advice.register("after", "echo", after("B"))

    def core(args: t.Any) -> t.Any:
        log.append("core")
        return Ok(args["trail"])

    result = advice.wrap("echo", core)({"trail": []})
    assert log == ["before1", "before2", "core", "afterA", "afterB"]
    assert result == Ok(["1", "2", "A", "B"])


def test_the_last_registered_override_replaces_the_call(log: list[str]) -> None:
    advice = Advice()
    advice.register("override", "echo", lambda args: "first override")
    advice.register("override", "echo", lambda args: f"second override {args['x']}")
    assert advice.wrap("echo", core_of(log))({"x": 1}) == "second override 1"
    assert log == []


def test_befores_and_afters_still_run_around_an_override(log: list[str]) -> None:
    advice = Advice()
    advice.register("before", "echo", lambda args: {"x": args["x"] + 1})
    advice.register("override", "echo", lambda args: Ok(args["x"] * 10))
    advice.register("after", "echo", lambda result: Ok(result.value + 1))
    assert advice.wrap("echo", core_of(log))({"x": 1}) == Ok(21)
    assert log == []


def test_nested_arounds_run_outer_before_inner_before_core_inner_after_outer_after(
    log: list[str],
) -> None:
    advice = Advice()

    def around(tag: str) -> c.Callable[..., t.Any]:
        def fn(proceed: c.Callable[[t.Any], t.Any], args: t.Any) -> t.Any:
            log.append(f"{tag}-before")
            result = proceed(args)
            log.append(f"{tag}-after")
            return result

        return fn

    advice.register("around", "echo", around("outer"))
    advice.register("around", "echo", around("inner"))
    advice.wrap("echo", core_of(log))({})
    assert log == ["outer-before", "inner-before", "core", "inner-after", "outer-after"]


def test_arounds_wrap_the_override(log: list[str]) -> None:
    advice = Advice()
    advice.register("override", "echo", lambda args: log.append("override") or Ok("o"))
    advice.register(
        "around", "echo", lambda proceed, args: (log.append("around"), proceed(args))[1]
    )
    assert advice.wrap("echo", core_of(log))({}) == Ok("o")
    assert log == ["around", "override"]


def test_an_around_that_skips_the_call_returns_its_own_value(log: list[str]) -> None:
    advice = Advice()
    advice.register("around", "echo", lambda proceed, args: "skipped")
    assert advice.wrap("echo", core_of(log))({}) == "skipped"  # value-agnostic, as Minga
    advice.reset()
    err = Err("refused by policy")
    advice.register("around", "echo", lambda proceed, args: err)
    assert advice.wrap("echo", core_of(log))({}) is err
    assert log == []


def test_an_around_can_change_the_arguments_it_proceeds_with(registry: Registry) -> None:
    registry.advice.register("around", "echo", lambda proceed, args: proceed({"text": "swapped"}))
    assert registry.execute("echo", {"text": "original"}) == Ok("swapped")


# -- crash isolation and the breaker -------------------------------------------


def test_a_crashing_before_is_skipped_and_the_next_still_runs(
    log: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    advice = Advice()

    def crash(args: t.Any) -> t.Any:
        raise RuntimeError("secret-value-in-message")

    advice.register("before", "echo", crash)
    advice.register("before", "echo", lambda args: {**args, "second": True})
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        result = advice.wrap("echo", core_of(log))({"first": True})
    assert result == Ok({"first": True, "second": True})
    warnings = [
        r for r in caplog.records if r.name == "nous_tools" and r.levelno == logging.WARNING
    ]
    assert any("crash" in r.getMessage() and "RuntimeError" in r.getMessage() for r in warnings)
    assert not any("secret-value-in-message" in r.getMessage() for r in warnings)


def test_a_crashing_after_is_skipped_and_the_next_still_runs(log: list[str]) -> None:
    advice = Advice()
    advice.register("after", "echo", lambda result: 1 / 0)
    advice.register("after", "echo", lambda result: Ok(("next ran", result.value)))
    assert advice.wrap("echo", core_of(log))({"a": 1}) == Ok(("next ran", {"a": 1}))


def test_wrap_passes_whatever_the_core_and_the_advice_return_through_unchanged() -> None:
    advice = Advice()

    def times_ten(n: int) -> int:
        return n * 10

    advice.register("before", "n", lambda n: n + 1)  # arguments need not be a mapping
    advice.register("after", "n", times_ten)  # nor results an Ok/Err
    advice.register("after", "n", lambda n: [n])
    assert advice.wrap("n", lambda n: n * 2)(1) == [40]
    advice.unregister("after", "n", times_ten)
    advice.register("around", "n", lambda proceed, n: ("around", proceed(n)))
    assert advice.wrap("n", lambda n: n * 2)(1) == [("around", 4)]  # the afters see it as is


def test_the_registry_skips_a_before_or_after_returning_the_wrong_kind_of_value(
    registry: Registry, log: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    registry.advice.register("before", "echo", lambda args: None)  # forgot to return them
    registry.advice.register("after", "echo", lambda result: "not a result")
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        assert registry.execute("echo", {"text": "a"}) == Ok("a")
    assert "expected a mapping of arguments; skipped" in caplog.text
    assert "expected an Ok or Err; skipped" in caplog.text
    assert log == ["core:a"]


def test_the_registry_turns_a_bare_value_from_an_override_or_around_into_ok(
    registry: Registry, log: list[str]
) -> None:
    seen: list[t.Any] = []
    registry.advice.register("after", "echo", lambda result: (seen.append(result), result)[1])

    def override(args: t.Any) -> str:
        return f"override {args['text']}"

    registry.advice.register("override", "echo", override)
    assert registry.execute("echo", {"text": "x"}) == Ok("override x")
    registry.advice.unregister("override", "echo", override)
    registry.advice.register("around", "echo", lambda proceed, args: "cached")
    assert registry.execute("echo", {"text": "y"}) == Ok("cached")
    assert seen == [Ok("override x"), Ok("cached")]  # the afters see an Ok, too
    err = Err("refused by policy")
    registry.advice.register("around", "echo", lambda proceed, args: err)  # innermost now
    assert registry.execute("echo", {"text": "z"}) == Ok("cached")
    assert log == []


def test_the_breaker_trips_on_the_fifth_consecutive_failure_not_the_fourth() -> None:
    advice = Advice()
    calls: list[int] = []

    def flaky(args: t.Any) -> t.Any:
        calls.append(1)
        raise RuntimeError("always")

    advice.register("before", "echo", flaky)
    wrapped = advice.wrap("echo", core_of([]))
    for _ in range(4):
        wrapped({})
    assert not advice.disabled("before", "echo", flaky)
    wrapped({})
    assert advice.disabled("before", "echo", flaky)
    assert len(calls) == 5
    for _ in range(3):  # stays off
        assert wrapped({"x": 1}) == Ok({"x": 1})
    assert len(calls) == 5
    assert advice.disabled("before", "echo", flaky)


def test_a_success_resets_the_failure_count() -> None:
    advice = Advice()
    fail = [True]

    def sometimes(result: t.Any) -> t.Any:
        if fail[0]:
            raise RuntimeError("bad")
        return result

    advice.register("after", "echo", sometimes)
    wrapped = advice.wrap("echo", core_of([]))
    for _ in range(4):
        wrapped({})
    fail[0] = False
    wrapped({})
    fail[0] = True
    for _ in range(4):
        wrapped({})
    assert not advice.disabled("after", "echo", sometimes)
    wrapped({})
    assert advice.disabled("after", "echo", sometimes)


def test_reset_breakers_re_enables_a_disabled_function() -> None:
    advice = Advice()
    calls: list[int] = []

    def flaky(args: t.Any) -> t.Any:
        calls.append(1)
        raise RuntimeError("always")

    advice.register("before", "echo", flaky)
    for _ in range(5):
        advice.wrap("echo", core_of([]))({})
    assert advice.disabled("before", "echo", flaky)
    advice.reset_breakers()
    assert not advice.disabled("before", "echo", flaky)
    advice.wrap("echo", core_of([]))({})
    assert len(calls) == 6
    for _ in range(3):  # the count started again from zero
        advice.wrap("echo", core_of([]))({})
    assert not advice.disabled("before", "echo", flaky)


def test_only_the_failing_function_is_disabled() -> None:
    advice = Advice()
    healthy_calls: list[int] = []

    def broken(args: t.Any) -> t.Any:
        raise RuntimeError("broken")

    def healthy(args: t.Any) -> t.Any:
        healthy_calls.append(1)
        return args

    advice.register("before", "echo", broken)
    advice.register("before", "echo", healthy)
    advice.register("before", "other", broken)
    for _ in range(6):
        advice.wrap("echo", core_of([]))({})
    assert advice.disabled("before", "echo", broken)
    assert not advice.disabled("before", "echo", healthy)
    assert not advice.disabled("before", "other", broken)  # same function, other name
    assert len(healthy_calls) == 6


def test_a_raising_around_makes_the_call_an_err_tool_error(log: list[str]) -> None:
    advice = Advice()

    def explode(proceed: t.Any, args: t.Any) -> t.Any:
        raise KeyError("gone")

    advice.register("around", "echo", explode)
    result = advice.wrap("echo", core_of(log))({})
    assert isinstance(result, Err) and isinstance(result.reason, ToolError)
    assert "explode" in result.reason.message and "KeyError" in result.reason.message
    assert isinstance(result.reason.original_error, KeyError)
    assert log == []


def test_a_raising_override_makes_the_call_an_err_tool_error(log: list[str]) -> None:
    advice = Advice()

    def replacement(args: t.Any) -> t.Any:
        raise ValueError("no")

    advice.register("override", "echo", replacement)
    advice.register("after", "echo", lambda result: (log.append(repr(result)), result)[1])
    result = advice.wrap("echo", core_of(log))({})
    assert isinstance(result, Err) and isinstance(result.reason, ToolError)
    assert (
        "override replacement" in result.reason.message
        and "ValueError: no" in result.reason.message
    )
    assert len(log) == 1 and log[0].startswith("Err(")  # the afters see it


# -- advice around the executor pipeline ---------------------------------------


def test_a_before_can_fix_arguments_before_validation(registry: Registry) -> None:
    invalid = registry.execute("echo", {"text": 3})
    assert isinstance(invalid, Err) and "Type mismatch" in invalid.reason.message
    registry.advice.register("before", "echo", lambda args: {"text": str(args["text"])})
    assert registry.execute("echo", {"text": 3}) == Ok("3")


def test_an_after_sees_the_final_ok_or_err(registry: Registry) -> None:
    seen: list[t.Any] = []
    registry.advice.register("after", "echo", lambda result: (seen.append(result), result)[1])
    registry.execute("echo", {"text": "fine"})
    registry.execute("echo", {"text": 3})
    assert seen[0] == Ok("fine")
    assert isinstance(seen[1], Err) and "Invalid arguments for 'echo'" in seen[1].reason.message


def test_an_after_sees_the_err_of_a_tool_after_all_its_retries(executor: ToolExecutor) -> None:
    attempts: list[int] = []

    def flaky(ctx: RunContext[t.Any]) -> None:
        attempts.append(ctx.retry)
        raise RuntimeError("down")

    registry = Registry([make(flaky, retries=2)], executor=executor)
    seen: list[t.Any] = []
    registry.advice.register("after", "flaky", lambda result: (seen.append(result), result)[1])
    registry.execute("flaky", {})
    assert attempts == [0, 1, 2]
    assert len(seen) == 1 and seen[0].reason.attempt == 3


def test_an_override_replaces_the_tool_without_running_it(
    registry: Registry, log: list[str]
) -> None:
    registry.advice.register("override", "echo", lambda args: f"override:{args['text']}")
    assert registry.execute("echo", {"text": "x"}) == Ok("override:x")
    assert log == []


def test_befores_run_once_before_the_approval_and_the_rest_when_it_runs(
    registry: Registry,
) -> None:
    ran: list[str] = []
    registry.register(make(lambda path: f"rm {path}", name="rm", approval="ask"))

    def backup(args: t.Any) -> t.Any:
        ran.append("before")
        return {"path": args["path"] + ".bak"}

    registry.advice.register("before", "rm", backup)
    registry.advice.register("after", "rm", lambda result: (ran.append("after"), result)[1])
    pending = registry.execute("rm", {"path": "a"})
    assert isinstance(pending, NeedsApproval)
    assert pending.arguments == {"path": "a.bak"}  # the person approves what will run
    assert ran == ["before"]
    assert registry.execute_approved(pending) == Ok("rm a.bak")  # not a.bak.bak
    assert ran == ["before", "after"]
    # a direct execute_approved is the program's own call: all the advice applies
    assert registry.execute_approved("rm", {"path": "b"}) == Ok("rm b.bak")
    assert ran == ["before", "after", "before", "after"]


def test_no_advice_runs_for_a_denied_tool(registry: Registry) -> None:
    ran: list[str] = []
    registry.register(make(lambda: None, name="nuke", approval="deny"))
    registry.advice.register("before", "nuke", lambda args: ran.append("before") or args)
    registry.advice.register("after", "nuke", lambda result: ran.append("after") or result)
    result = registry.execute("nuke", {})
    assert isinstance(result, Err)
    assert ran == []


def test_a_registry_has_its_own_advice_table(executor: ToolExecutor) -> None:
    one = Registry([make(lambda: "one", name="t")], executor=executor)
    two = Registry([make(lambda: "two", name="t")], executor=executor)
    one.advice.register("override", "t", lambda args: "advised")
    assert one.execute("t") == Ok("advised")
    assert two.execute("t") == Ok("two")
