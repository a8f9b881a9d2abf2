"""Per-tool limits (issue 23): concurrency caps, rate limits, run budgets, batch
fan-out caps and the size of a result's text — with real threads, the real
``limits`` library, a real MCP server and, under ``make slow``, a real Redis shared
by two processes. Synchronised with Events and Barriers, never with sleeps."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
import threading
import time
import typing as t
from pathlib import Path

import anyio
import freezegun
import pytest

from nous_tools import (
    Advice,
    Err,
    Ok,
    RateLimited,
    Registry,
    ResultTooLarge,
    RunContext,
    Tool,
    ToolCall,
    ToolError,
    ToolExecutor,
    execute_tool_calls,
    format_tool_result,
    signals,
)
from nous_tools.contrib.opentelemetry import error_type

ROOT = Path(__file__).resolve().parents[2]
WAIT = 30.0  # generous: the machine is small and shared


class Inside:
    """How many calls are inside a tool at once, measured inside it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.calls = 0

    def __enter__(self) -> Inside:
        with self.lock:
            self.now += 1
            self.calls += 1
            self.most = max(self.most, self.now)
        return self

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.now -= 1


def _limited(result: object, limit: str) -> RateLimited:
    assert isinstance(result, Err), result
    reason = result.reason
    assert isinstance(reason, RateLimited), reason
    assert reason.limit == limit
    return reason


# -- options ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_concurrency", 0),
        ("max_concurrency", -3),
        ("max_concurrency", True),
        ("max_calls_per_run", 0),
        ("max_result_chars", 0),
        ("max_result_chars", "lots"),
        ("rate_limit", "ten a minute"),
        ("rate_limit", "0/minute"),
        ("rate_limit", "10/fortnight"),
        ("on_result_overflow", "drop"),
    ],
)
def test_bad_limit_options_are_refused_at_construction_naming_the_option(option, value):
    with pytest.raises(ValueError, match=f"'{option}'"):
        Tool(name="t", function=len, **{option: value})


def test_limit_options_default_to_no_limit_but_the_executors_result_cap():
    tool = Tool(name="t", function=len)
    assert (tool.max_concurrency, tool.rate_limit, tool.max_calls_per_run) == (None, None, None)
    assert (tool.max_result_chars, tool.on_result_overflow) == ("executor", "truncate")
    assert tool._limits is None  # the executor's one check on the hot path
    with ToolExecutor(max_workers=1) as executor:
        assert executor.max_result_chars == 100_000
        assert executor.limits_storage is None


def test_a_rate_limit_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="'rate_limit'"):
        Tool(name="t", function=len, rate_limit=10)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_result_chars", 0),
        ("rate_limit_strategy", "leaky-bucket"),
        ("limits_storage", "nosuch://host"),
        ("limits_storage", "async+memory://"),
    ],
)
def test_bad_executor_limit_options_are_refused_naming_the_option(option, value):
    with pytest.raises(ValueError, match=f"'{option}'"):
        ToolExecutor(max_workers=1, **{option: value})


def test_a_bad_batch_cap_is_a_value_error_before_anything_runs():
    ran = []
    tool = Tool(name="t", function=lambda: ran.append(1), timeout=None)
    registry = Registry([tool])
    with (
        ToolExecutor(max_workers=2) as executor,
        pytest.raises(ValueError, match="'max_concurrency'"),
    ):
        executor.execute_many([(tool, {}), (tool, {})], max_concurrency=0)
    with pytest.raises(ValueError, match="'max_concurrency'"):
        execute_tool_calls(registry, [ToolCall("1", "t", {})], max_concurrency=0)
    with pytest.raises(ValueError, match="'max_concurrency'"):
        registry.execute_many([("t", {})], max_concurrency=-1)
    assert ran == []


# -- max_concurrency ---------------------------------------------------------------------


def test_max_concurrency_2_called_by_50_threads_never_has_more_than_2_inside():
    inside = Inside()
    pair = threading.Barrier(2, timeout=WAIT)  # two at once must be possible, too

    def work(i: int) -> int:
        with inside:
            pair.wait()
            return i

    tool = Tool(name="capped", function=work, timeout=WAIT, max_concurrency=2)
    results: list[t.Any] = [None] * 50
    with ToolExecutor(max_workers=8) as executor:

        def caller(i: int) -> None:
            results[i] = executor.execute(tool, {"i": i})

        threads = [threading.Thread(target=caller, args=(i,)) for i in range(50)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT * 2)
    assert results == [Ok(i) for i in range(50)]
    assert inside.most == 2
    assert inside.calls == 50


def test_a_call_over_the_cap_waits_until_its_deadline_then_is_rate_limited(recorder):
    entered = threading.Event()
    release = threading.Event()

    def hold() -> str:
        entered.set()
        release.wait(WAIT)
        return "held"

    holder = Tool(name="db", function=hold, timeout=WAIT, max_concurrency=1)
    ran: list[int] = []
    waiter = Tool(name="db", function=lambda: ran.append(1), timeout=0.3, max_concurrency=1)
    limited: list[t.Any] = []

    def on_limited(sender, *, measurements, metadata):
        limited.append((sender, measurements, metadata))

    signals.tool_rate_limited.connect(on_limited)
    try:
        with ToolExecutor(max_workers=4) as executor:
            first: list[t.Any] = []
            thread = threading.Thread(target=lambda: first.append(executor.execute(holder, {})))
            thread.start()
            assert entered.wait(WAIT)
            recorder.events.clear()
            result = executor.execute(waiter, {}, call_id="call_9")
            seen = list(recorder.names)  # before the holder ends
            release.set()
            thread.join(WAIT)
    finally:
        release.set()
        signals.tool_rate_limited.disconnect(on_limited)
    reason = _limited(result, "max_concurrency")
    assert reason.retry_after is None
    assert reason.message.startswith("rate limited: 'db' allows 1 call at once")
    assert "retry later" in reason.message
    assert ran == []  # it never ran
    assert seen == []  # not an attempt: no start, no stop
    assert limited == [
        (
            waiter,
            {"retry_after": None},
            {"tool_name": "db", "limit": "max_concurrency", "call_id": "call_9"},
        )
    ]
    assert first == [Ok("held")]


def test_a_tool_that_calls_itself_through_the_same_executor_never_waits_for_itself():
    with ToolExecutor(max_workers=2) as executor:

        def countdown(ctx: RunContext, n: int) -> int:
            if n == 0:
                return 0
            return t.cast(int, executor.execute(recursive, {"n": n - 1}, ctx).unwrap()) + 1

        def inline_countdown(ctx: RunContext, n: int) -> int:
            if n == 0:
                return 0
            return t.cast(int, executor.execute(inline, {"n": n - 1}, ctx).unwrap()) + 1

        recursive = Tool.from_function(countdown, timeout=WAIT, max_concurrency=1)
        inline = Tool.from_function(inline_countdown, timeout=None, max_concurrency=1)
        assert executor.execute(recursive, {"n": 5}) == Ok(5)
        assert executor.execute(inline, {"n": 3}) == Ok(3)


def test_siblings_that_call_each_other_through_the_same_executor_do_not_deadlock():
    with ToolExecutor(max_workers=2) as executor:

        def ping(ctx: RunContext, n: int) -> str:
            return "ping" if n == 0 else executor.execute(pong_tool, {"n": n - 1}, ctx).unwrap()

        def pong(ctx: RunContext, n: int) -> str:
            return "pong" if n == 0 else executor.execute(ping_tool, {"n": n - 1}, ctx).unwrap()

        ping_tool = Tool.from_function(ping, timeout=WAIT, max_concurrency=1)
        pong_tool = Tool.from_function(pong, timeout=WAIT, max_concurrency=1)
        assert executor.execute(ping_tool, {"n": 3}) == Ok("pong")


def test_a_call_holding_a_slot_does_not_wait_without_a_deadline_for_another_tools_slot():
    """Waiting there could close a cycle for ever; it is refused at once instead."""
    inside_b = threading.Event()
    release = threading.Event()

    def b_work() -> str:
        inside_b.set()
        release.wait(WAIT)
        return "b"

    b = Tool(name="b", function=b_work, timeout=None, max_concurrency=1)
    inner: list[t.Any] = []
    with ToolExecutor(max_workers=2) as executor:
        a = Tool(
            name="a",
            function=lambda: inner.append(executor.execute(b, {})) or "a",
            timeout=None,
            max_concurrency=1,
        )
        holder = threading.Thread(target=executor.execute, args=(b, {}))
        holder.start()
        try:
            assert inside_b.wait(WAIT)
            outcome = executor.execute(a, {})
        finally:
            release.set()
            holder.join(WAIT)
    assert outcome == Ok("a")
    assert len(inner) == 1
    _limited(inner[0], "max_concurrency")  # a ran; its call of b was refused at once


def test_a_retry_waits_for_a_slot_of_its_own_and_retries_never_exceed_the_cap():
    inside = Inside()
    tries: list[int] = []

    def flaky(ctx: RunContext) -> int:
        with inside:
            tries.append(ctx.retry)
            if ctx.retry == 0:
                raise ConnectionError("reset")
            return ctx.retry

    tool = Tool.from_function(flaky, timeout=WAIT, retries=1, max_concurrency=1)
    with ToolExecutor(max_workers=4) as executor:
        results = executor.execute_many([(tool, {})] * 6)
    assert results == [Ok(1)] * 6
    assert inside.most == 1
    assert len(tries) == 12


# -- rate_limit ----------------------------------------------------------------------------


def _burst(rate: str, calls: int = 20) -> tuple[list[t.Any], list[int], float]:
    ran: list[int] = []
    tool = Tool(
        name="search", function=lambda: ran.append(1) or "found", timeout=None, rate_limit=rate
    )
    with ToolExecutor(max_workers=2) as executor:
        began = time.monotonic()
        results = [executor.execute(tool, {}) for _ in range(calls)]
        took = time.monotonic() - began
        if took < 0.9:
            reason = _limited(results[-1], "rate_limit")
            time.sleep(t.cast(float, reason.retry_after))
            results.append(executor.execute(tool, {}))
    return results, ran, took


def test_rate_limit_5_per_second_lets_5_of_a_burst_of_20_run_then_one_after_retry_after():
    for _ in range(5):  # a burst slower than the window proves nothing: take another
        results, ran, took = _burst("5/second")
        if took < 0.9:
            break
    else:
        pytest.skip("the machine never ran 20 inline calls within a second")
    burst, after = results[:20], results[20]
    assert burst[:5] == [Ok("found")] * 5
    for result in burst[5:]:
        reason = _limited(result, "rate_limit")
        assert 0 < t.cast(float, reason.retry_after) <= 1
        assert reason.message.startswith(
            "rate limited: 'search' allows 5 calls a second; retry after "
        )
    assert after == Ok("found")
    assert len(ran) == 6


def test_rate_limit_under_freezegun_frees_the_next_call_after_exactly_retry_after():
    ran: list[int] = []
    tool = Tool(
        name="search", function=lambda: ran.append(1) or "found", timeout=5, rate_limit="5/second"
    )
    with (
        freezegun.freeze_time("2030-01-01 12:00:00") as frozen,
        ToolExecutor(max_workers=2) as executor,
    ):
        results = [executor.execute(tool, {}) for _ in range(20)]
        assert results[:5] == [Ok("found")] * 5
        waits = {_limited(r, "rate_limit").retry_after for r in results[5:]}
        assert waits == {1.0}
        frozen.tick(0.5)
        assert _limited(executor.execute(tool, {}), "rate_limit").retry_after == 0.5
        frozen.tick(0.5)
        assert executor.execute(tool, {}) == Ok("found")
    assert len(ran) == 6


def test_the_model_reads_which_limit_and_when_to_retry():
    tool = Tool(name="search", function=lambda: "found", timeout=None, rate_limit="10/minute")
    with (
        freezegun.freeze_time("2030-01-01 12:00:00") as frozen,
        ToolExecutor(max_workers=1) as executor,
    ):
        for _ in range(10):
            executor.execute(tool, {})
        frozen.tick(48)
        refused = executor.execute(tool, {})
    assert format_tool_result(refused, "search") == (
        "Error: rate limited: 'search' allows 10 calls a minute; retry after 12 s"
    )
    assert error_type(refused) == "rate_limited"


def test_a_rate_limited_call_is_not_an_attempt_and_retries_do_not_spend_the_rate(recorder):
    tries: list[int] = []

    def flaky(ctx: RunContext) -> str:
        tries.append(ctx.retry)
        if ctx.retry == 0:
            raise ConnectionError("reset")
        return "ok"

    tool = Tool.from_function(flaky, timeout=None, retries=3, rate_limit="2/hour")
    with ToolExecutor(max_workers=1) as executor:
        assert executor.execute(tool, {}) == Ok("ok")  # two attempts, one call
        assert executor.execute(tool, {}) == Ok("ok")
        assert len(tries) == 4
        recorder.events.clear()
        reason = _limited(executor.execute(tool, {}), "rate_limit")
    assert len(tries) == 4  # never ran, never retried
    assert recorder.names == []
    assert 0 < t.cast(float, reason.retry_after) <= 3600


def test_rate_limit_with_several_rates_names_the_one_that_refused():
    tool = Tool(name="s", function=lambda: 1, timeout=None, rate_limit="3/second; 4/hour")
    with (
        freezegun.freeze_time("2030-01-01 12:00:00") as frozen,
        ToolExecutor(max_workers=1) as executor,
    ):
        assert [executor.execute(tool, {}).is_ok() for _ in range(4)] == [True, True, True, False]
        frozen.tick(2)
        assert executor.execute(tool, {}).is_ok()
        frozen.tick(2)
        reason = _limited(executor.execute(tool, {}), "rate_limit")
    assert "allows 4 calls an hour" in reason.message


@pytest.mark.parametrize("strategy", ["fixed-window", "moving-window", "sliding-window-counter"])
def test_every_limits_strategy_refuses_the_call_over_the_rate(strategy):
    tool = Tool(name="s", function=lambda: 1, timeout=None, rate_limit="2/hour")
    with ToolExecutor(max_workers=1, rate_limit_strategy=strategy) as executor:
        outcomes = [executor.execute(tool, {}) for _ in range(3)]
    assert outcomes[:2] == [Ok(1), Ok(1)]
    assert 0 < t.cast(float, _limited(outcomes[2], "rate_limit").retry_after) <= 3600


def test_a_storage_that_cannot_be_reached_fails_closed_with_an_err():
    pytest.importorskip("redis")
    ran: list[int] = []
    tool = Tool(name="s", function=lambda: ran.append(1), timeout=None, rate_limit="5/second")
    with ToolExecutor(max_workers=1, limits_storage="redis://127.0.0.1:1") as executor:
        result = executor.execute(tool, {})
    assert isinstance(result, Err) and not isinstance(result.reason, RateLimited)
    assert "its limits could not be checked" in result.reason.message
    assert ran == []


# -- max_calls_per_run ------------------------------------------------------------------------


def test_max_calls_per_run_3_across_a_batch_of_5_and_across_two_batches_of_one_run():
    ran: list[int] = []
    tool = Tool(
        name="charge", function=lambda: ran.append(1) or "charged", timeout=5, max_calls_per_run=3
    )
    with ToolExecutor(max_workers=4) as executor:
        run = RunContext.new(run_id="run-1")
        outcomes = executor.execute_many([(tool, {})] * 5, run)
        assert outcomes.count(Ok("charged")) == 3
        refused = [_limited(r, "max_calls_per_run") for r in outcomes if not r.is_ok()]
        assert len(refused) == 2
        assert all(r.retry_after is None for r in refused)
        assert "budget of 3 calls per run used" in refused[0].message

        other = RunContext.new(run_id="run-2")
        first = executor.execute_many([(tool, {})] * 2, other)
        second = executor.execute_many([(tool, {})] * 2, other)
        assert first == [Ok("charged")] * 2
        assert sorted(r.is_ok() for r in second) == [False, True]
        # without a run id the budget does not apply
        assert executor.execute_many([(tool, {})] * 5) == [Ok("charged")] * 5
    assert len(ran) == 3 + 3 + 5


def test_max_calls_per_run_counts_model_tool_calls_of_one_run_across_turns():
    registry = Registry(
        [Tool(name="charge", function=lambda: "charged", timeout=None, max_calls_per_run=3)]
    )
    ctx = RunContext.new(run_id="conversation-7")
    turn = [ToolCall(f"c{i}", "charge", {}) for i in range(2)]
    first = execute_tool_calls(registry, turn, ctx)
    second = execute_tool_calls(registry, turn, ctx)
    assert first.all_ok
    texts = [m["content"] for m in second.to_openai_messages()]
    assert sorted(texts) == sorted(
        [
            "charged",
            "Error: rate limited: 'charge' has its budget of 3 calls per run used up; "
            "do not call it again in this run",
        ]
    )


# -- a batch's fan-out ---------------------------------------------------------------------------


def _fan_out_tool(inside: Inside, timeout: float | None) -> Tool:
    group = threading.Barrier(4, timeout=WAIT)  # exactly four at once, never more

    def work(i: int) -> int:
        with inside:
            group.wait()
            return i

    return Tool(name="work", function=work, timeout=timeout)


@pytest.mark.parametrize("timeout", [WAIT, None])
def test_execute_tool_calls_max_concurrency_4_runs_64_calls_never_more_than_4_at_once(timeout):
    inside = Inside()
    registry = Registry([_fan_out_tool(inside, timeout)], executor=ToolExecutor(max_workers=16))
    try:
        calls = [ToolCall(f"c{i}", "work", {"i": i}) for i in range(64)]
        results = execute_tool_calls(registry, calls, max_concurrency=4)
    finally:
        registry.executor.shutdown()
    assert results.results == [Ok(i) for i in range(64)]
    assert inside.most == 4


@pytest.mark.parametrize("timeout", [WAIT, None])
def test_execute_many_max_concurrency_4_runs_64_calls_never_more_than_4_at_once(timeout):
    inside = Inside()
    tool = _fan_out_tool(inside, timeout)
    with ToolExecutor(max_workers=16) as executor:
        results = executor.execute_many([(tool, {"i": i}) for i in range(64)], max_concurrency=4)
    assert results == [Ok(i) for i in range(64)]
    assert inside.most == 4


# -- max_result_chars ------------------------------------------------------------------------------


MEGABYTE = "".join(f"{i:07d}\n" for i in range(125_000))  # 1,000,000 characters


def _notice_bound(text: str, limit: int) -> None:
    assert len(text) <= limit + len(
        "\n[... 980,000 characters omitted: the result was 1,000,000 characters; "
        "the tool's limit is 20,000 ...]\n"
    )
    assert (
        "characters omitted: the result was 1,000,000 characters; the tool's limit is 20,000"
        in text
    )


def test_a_1_mb_result_is_clipped_in_every_provider_message_and_ok_value_stays_whole():
    assert len(MEGABYTE) == 1_000_000
    big = Tool(name="dump", function=lambda: MEGABYTE, timeout=5, max_result_chars=20_000)
    registry = Registry([big])
    results = execute_tool_calls(registry, [ToolCall("call_1", "dump", {})])
    assert results.results == [Ok(MEGABYTE)]  # the program gets it whole
    texts = [
        results.to_openai_messages()[0]["content"],
        results.to_responses_items()[0]["output"],
        results.to_anthropic_blocks()[0]["content"],
        results.to_anthropic_message()["content"][0]["content"],
        results.to_dict()["calls"][0]["output"]["content"],
        format_tool_result(results[0], "dump", max_chars=20_000),
    ]
    for text in texts:
        _notice_bound(text, 20_000)
        assert text.startswith("0000000\n0000001\n")  # the head
        assert text.endswith("0124998\n0124999\n")  # the tail
        assert len(text) <= 20_000
    assert len(set(texts)) == 1


def test_the_executors_max_result_chars_applies_to_tools_without_their_own():
    words = Tool(name="words", function=lambda: "w" * 5_000, timeout=None)
    uncapped = Tool(name="all", function=lambda: "a" * 5_000, timeout=None, max_result_chars=None)
    registry = Registry(
        [words, uncapped], executor=ToolExecutor(max_workers=2, max_result_chars=1_000)
    )
    try:
        calls = [ToolCall("1", "words", {}), ToolCall("2", "all", {})]
        capped_text, whole_text = (
            m["content"] for m in execute_tool_calls(registry, calls).to_openai_messages()
        )
    finally:
        registry.executor.shutdown()
    assert len(capped_text) <= 1_000 and "the tool's limit is 1,000" in capped_text
    assert whole_text == "a" * 5_000


def test_the_default_cap_is_100000_characters():
    text = format_tool_result(Ok({"rows": list(range(100_000))}))
    assert len(text) <= 100_000
    assert text.startswith('{"rows": [0, 1, 2') and text.endswith("99998, 99999]}")


def test_on_result_overflow_error_gives_result_too_large_and_a_short_text():
    tool = Tool(
        name="dump",
        function=lambda: {"rows": list(range(10_000))},
        timeout=5,
        max_result_chars=1_000,
        on_result_overflow="error",
    )
    small = Tool(
        name="small",
        function=lambda: "ok",
        timeout=5,
        max_result_chars=1_000,
        on_result_overflow="error",
    )
    with ToolExecutor(max_workers=2) as executor:
        result = executor.execute(tool, {})
        batch = executor.execute_many([(tool, {}), (small, {})])
        assert executor.execute(small, {}) == Ok("ok")
    assert isinstance(result, Err) and isinstance(result.reason, ResultTooLarge)
    assert (result.reason.limit, result.reason.size) == (
        1_000,
        len(json.dumps({"rows": list(range(10_000))})),
    )
    assert format_tool_result(result, "dump") == (
        f"Error: tool 'dump' returned a result of {result.reason.size:,} characters, "
        "over its limit of 1,000 (max_result_chars)"
    )
    assert isinstance(batch[0].reason, ResultTooLarge) and batch[1] == Ok("ok")


def test_a_clipped_text_is_never_clipped_twice():
    from nous_tools._engine._admission import clip_text

    once = clip_text(MEGABYTE, 20_000)
    assert clip_text(once, 20_000) is once
    tiny = clip_text(MEGABYTE, 10)
    assert clip_text(tiny, 10) is tiny


@pytest.mark.parametrize("limit", [1, 10, 30, 60, 92, 93, 120, 1_000])
def test_a_clipped_text_is_never_longer_than_its_limit_notice_included(limit: int) -> None:
    from nous_tools._engine._admission import clip_text
    from nous_tools._util._text import _notice, _short_notice

    clipped = clip_text(MEGABYTE, limit)
    assert len(clipped) <= limit
    size = len(MEGABYTE)
    if limit >= len(_notice(size, size, limit)):  # room for the whole notice
        assert f"the result was {size:,} characters" in clipped
    elif limit >= len(_short_notice(size, size, limit)):  # room for the short one
        assert (
            f"\n[... {size - limit + len(_short_notice(size, size, limit)):,} omitted]\n" in clipped
        )
        assert "the result was" not in clipped
    else:  # the head alone
        assert clipped == MEGABYTE[:limit]


def test_the_mcp_servers_content_is_clipped_and_the_whole_value_is_not_sent_structured():
    from mcp import Client

    from nous_tools.contrib.mcp import serve_http_in_thread

    rows = {"rows": MEGABYTE.splitlines()}
    registry = Registry(
        [
            Tool(name="dump", function=lambda: MEGABYTE, timeout=5, max_result_chars=20_000),
            Tool(name="table", function=lambda: rows, timeout=5, max_result_chars=20_000),
        ]
    )

    async def main(url: str) -> list[t.Any]:
        async with Client(url, read_timeout_seconds=WAIT) as client:
            return [await client.call_tool("dump", {}), await client.call_tool("table", {})]

    with serve_http_in_thread(registry, host="127.0.0.1", port=0) as running:
        dump, table = anyio.run(main, running.url)
    for result in (dump, table):
        assert not result.is_error and len(result.content) == 1
        text = result.content[0].text
        assert len(text) <= 20_000 and "characters omitted" in text
        assert result.structured_content is None
    assert dump.content[0].text.startswith("0000000\n") and dump.content[0].text.endswith(
        "0124999\n"
    )


def test_what_the_mcp_client_returns_from_a_remote_server_is_clipped():
    from nous_tools.contrib.mcp import MCPServer, serve_http_in_thread

    served = Registry(
        [Tool(name="dump", function=lambda: MEGABYTE, timeout=5)],
        executor=ToolExecutor(max_workers=2, max_result_chars=None),  # the server sends it all
    )
    try:
        with (
            serve_http_in_thread(served, host="127.0.0.1", port=0) as running,
            MCPServer.http(running.url) as server,
        ):
            registry = Registry()
            registry.register_mcp(server, trusted=True)
            result = registry.execute_approved("dump", {})
    finally:
        served.executor.shutdown()
    assert isinstance(result, Ok)
    assert len(result.value) <= 100_000
    assert result.value.startswith("0000000\n") and result.value.endswith("0124999\n")
    assert "the result was 1,000,000 characters; the tool's limit is 100,000" in result.value


# -- the errors, the signal, the breaker --------------------------------------------------------


def test_rate_limited_and_result_too_large_survive_pickling():
    limited = RateLimited(
        "rate limited: 's' ...", tool_name="s", limit="rate_limit", retry_after=1.5
    )
    back = pickle.loads(pickle.dumps(limited))
    assert (type(back), back.message, back.tool_name, back.limit, back.retry_after) == (
        RateLimited,
        limited.message,
        "s",
        "rate_limit",
        1.5,
    )
    assert isinstance(back, ToolError)
    large = pickle.loads(pickle.dumps(ResultTooLarge(tool_name="d", size=10, limit=5)))
    assert (large.size, large.limit, large.message) == (
        10,
        5,
        "Tool 'd' returned a result of 10 characters, over its limit of 5 (max_result_chars)",
    )


def test_the_signals_table_lists_the_rate_limited_signal_with_its_keys():
    row = next(
        line
        for line in (ROOT / "docs" / "reference" / "signals.md")
        .read_text(encoding="utf-8")
        .splitlines()
        if line.startswith("| `tool_rate_limited` |")
    )
    for key in ("retry_after", "tool_name", "limit", "call_id"):
        assert f"`{key}`" in row


def test_the_advice_breaker_half_opens_after_its_cooldown_and_says_when(caplog):
    advice = Advice()  # default cooldown: 60 s
    fail = [True]
    calls: list[int] = []

    def audit(args: t.Any) -> t.Any:
        calls.append(1)
        if fail[0]:
            raise RuntimeError("down")
        return args

    advice.register("before", "echo", audit)
    wrapped = advice.wrap("echo", lambda args: Ok(args))
    with freezegun.freeze_time("2030-01-01 12:00:00") as frozen:
        for _ in range(5):
            wrapped({})
        assert advice.disabled("before", "echo", audit)
        assert advice.retry_after("before", "echo", audit) == 60
        assert "disabled, retry after 60 s" in caplog.text
        frozen.tick(48)
        assert advice.retry_after("before", "echo", audit) == 12
        wrapped({})
        assert len(calls) == 5  # still open: skipped
        frozen.tick(12)
        assert not advice.disabled("before", "echo", audit)  # half-open
        wrapped({})
        assert len(calls) == 6  # tried again, failed: open again for a cooldown
        assert advice.retry_after("before", "echo", audit) == 60
        frozen.tick(60)
        fail[0] = False
        wrapped({})
        assert len(calls) == 7
        assert advice.retry_after("before", "echo", audit) is None  # closed
        fail[0] = True
        for _ in range(4):
            wrapped({})
        assert not advice.disabled("before", "echo", audit)  # the count started again


def test_an_advice_breaker_without_a_cooldown_stays_open_until_reset():
    advice = Advice(breaker_cooldown=None)
    advice.register("after", "echo", lambda result: 1 / 0)
    for _ in range(5):
        advice.wrap("echo", lambda args: Ok(args))({})
    fn = advice._chains["echo"].after[0].fn
    assert advice.retry_after("after", "echo", fn) == float("inf")
    advice.reset_breakers()
    assert advice.retry_after("after", "echo", fn) is None
    with pytest.raises(ValueError, match="'breaker_cooldown'"):
        Advice(breaker_cooldown=0)


# -- shared across processes (make slow) ------------------------------------------------------


_WORKER = textwrap.dedent(
    """
    import json, sys
    from nous_tools import Tool, ToolExecutor, RunContext

    url, go = sys.argv[1], sys.argv[2]
    tool = Tool(name="shared_search", function=lambda: "found", timeout=5, rate_limit="10/hour")
    budget = Tool(name="shared_charge", function=lambda: "charged", timeout=None, max_calls_per_run=4)
    ctx = RunContext.new(run_id="run-shared")
    with ToolExecutor(max_workers=2, limits_storage=url) as executor:
        print("ready", flush=True)
        sys.stdin.readline()  # both processes start their calls together
        ran = [executor.execute(tool, {}).is_ok() for _ in range(15)]
        spent = [executor.execute(budget, {}, ctx).is_ok() for _ in range(5)]
        refused = executor.execute(tool, {})
    print(json.dumps({"ran": sum(ran), "spent": sum(spent), "limit": refused.reason.limit,
                      "retry_after": refused.reason.retry_after}), flush=True)
    """
)


@pytest.mark.slow
def test_two_processes_share_one_rate_limit_and_one_run_budget_in_a_real_redis():
    pytest.importorskip("redis")
    from servers import redis_server

    with redis_server() as url:
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, url, "go"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
            for _ in range(2)
        ]
        try:
            for worker in workers:
                assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
            for worker in workers:
                assert worker.stdin is not None
                worker.stdin.write("go\n")
                worker.stdin.flush()
            reports = [json.loads(worker.communicate(timeout=120)[0]) for worker in workers]
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
    assert sum(report["ran"] for report in reports) == 10  # 10 of 30, across both
    assert sum(report["spent"] for report in reports) == 4  # 4 of 10, one run's budget
    for report in reports:
        assert report["limit"] == "rate_limit"
        assert 0 < report["retry_after"] <= 3600


def test_format_tool_result_takes_the_tool_and_clips_at_its_cap() -> None:
    capped = Tool(name="dump", function=lambda: "", timeout=5, max_result_chars=200)
    uncapped = Tool(name="dump", function=lambda: "", timeout=5, max_result_chars=None)
    default = Tool(name="dump", function=lambda: "", timeout=5)
    text = format_tool_result(Ok(MEGABYTE), capped)
    assert 150 < len(text) <= 200 and "the tool's limit is 200" in text
    assert format_tool_result(Ok(MEGABYTE), uncapped) == MEGABYTE
    in_full = format_tool_result(Ok(MEGABYTE), default)  # the executor's default: 100,000
    assert 99_900 < len(in_full) <= 100_000 and "the tool's limit is 100,000" in in_full
    assert format_tool_result(Ok(MEGABYTE), "dump") == in_full  # a name: the default cap
    assert len(format_tool_result(Ok(MEGABYTE), capped, max_chars=50)) <= 50  # asked: wins
    err = Err(ToolError("Tool execution failed: boom"))
    assert (
        format_tool_result(err, capped) == "Error: tool 'dump' failed: Tool execution failed: boom"
    )
