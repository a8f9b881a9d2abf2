"""Signals of SPEC section 3."""

from __future__ import annotations

import traceback
import typing as t

from nous_tools import Err, Ok, Tool, ToolExecutor, signals
from tests.conftest import Recorder


def make(fn: t.Callable[..., t.Any], **options: t.Any) -> Tool:
    options.setdefault("timeout", None)
    return Tool.from_function(fn, **options)


def test_success_emits_start_then_stop_with_the_spec_keys(
    executor: ToolExecutor, recorder: Recorder
) -> None:
    tool = make(lambda: 1, name="one")
    assert executor.execute(tool, {}) == Ok(1)
    assert recorder.names == ["start", "stop"]
    (_, start_m, start_md), (_, stop_m, stop_md) = recorder.events
    assert set(start_m) == {"system_time", "monotonic_time"}
    assert set(start_md) == {"tool_name", "tool_module", "attempt", "max_retries", "has_timeout"}
    assert start_md["tool_name"] == "one" and start_md["attempt"] == 1
    assert start_md["max_retries"] == 2 and start_md["has_timeout"] is False
    assert set(stop_m) == {"duration", "attempt"} and isinstance(stop_m["duration"], int)
    assert stop_md == {"tool_name": "one", "attempt": 1, "success": True}


def test_failing_tool_with_one_retry_emits_two_exceptions(
    executor: ToolExecutor, recorder: Recorder
) -> None:
    def broken() -> None:
        raise ValueError("bad")

    executor.execute(make(broken, retries=1), {})
    assert recorder.names == ["start", "exception", "start", "exception"]
    first, second = recorder.events[1][2], recorder.events[3][2]
    assert first["will_retry"] is True and second["will_retry"] is False
    assert first["kind"] is ValueError and isinstance(first["reason"], ValueError)
    assert isinstance(first["stacktrace"], traceback.StackSummary)
    assert set(recorder.events[1][1]) == {"duration"}


def test_timed_attempt_signals_come_from_the_calling_thread(
    executor: ToolExecutor, recorder: Recorder
) -> None:
    import threading

    threads: list[int] = []

    def on_any(sender: t.Any, **kwargs: t.Any) -> None:
        threads.append(threading.get_ident())

    for signal in (signals.tool_execute_start, signals.tool_execute_stop):
        signal.connect(on_any)
    try:
        executor.execute(make(lambda: 1, name="one", timeout=5), {})
    finally:
        for signal in (signals.tool_execute_start, signals.tool_execute_stop):
            signal.disconnect(on_any)
    assert threads == [threading.get_ident()] * 2


def test_timeout_emits_exception_of_kind_timeout_then_timeout(
    executor: ToolExecutor, recorder: Recorder
) -> None:
    import threading

    release = threading.Event()
    executor.execute(make(lambda: release.wait(5), name="hang", timeout=0.05), {})
    release.set()
    assert recorder.names == ["start", "exception", "timeout"]
    metadata = recorder.events[1][2]
    assert metadata["kind"] == "timeout" and metadata["reason"] == "timeout"
    assert "stacktrace" not in metadata
    assert recorder.events[2][1] == {"timeout": 0.05}
    assert recorder.events[2][2] == {"tool_name": "hang"}


def test_returned_err_emits_stop_with_success_true(
    executor: ToolExecutor, recorder: Recorder
) -> None:
    executor.execute(make(lambda: Err("no"), name="no"), {})
    assert recorder.names == ["start", "stop"]
    assert recorder.events[1][2]["success"] is True


def test_raising_receiver_changes_nothing_and_others_still_run(
    executor: ToolExecutor, recorder: Recorder
) -> None:
    def bad(sender: t.Any, **kwargs: t.Any) -> None:
        raise RuntimeError("receiver broke")

    signals.tool_execute_start.connect(bad)
    try:
        assert executor.execute(make(lambda: 7, name="seven"), {}) == Ok(7)
    finally:
        signals.tool_execute_start.disconnect(bad)
    assert recorder.names == ["start", "stop"]


def test_scrub_drops_raw_reason_and_stacktrace() -> None:
    metadata = {
        "tool_name": "t",
        "attempt": 1,
        "will_retry": False,
        "kind": ValueError,
        "reason": ValueError("sk-test-SECRET"),
        "stacktrace": traceback.extract_stack(),
    }
    clean = signals.scrub(metadata)
    assert "reason" not in clean and "stacktrace" not in clean
    assert clean["kind"] == "ValueError"
    assert "SECRET" not in repr(clean)
    assert "reason" in metadata  # the input is not changed


# -- naming (issue 18): one scheme, and the old name kept as an alias --------------


def test_the_four_signals_share_one_naming_scheme() -> None:
    assert [signal.name for signal in signals.ALL_SIGNALS] == [
        "nous_tools.tool.execute.start",
        "nous_tools.tool.execute.stop",
        "nous_tools.tool.execute.exception",
        "nous_tools.tool.execute.timeout",
    ]
    assert signals.ALL_SIGNALS[3] is signals.tool_execute_timeout
    assert "tool_execute_timeout" in signals.__all__ and "tool_timeout" in signals.__all__
    assert [signal.name for signal in signals.REPORT_SIGNALS] == [
        "nous_tools.tool.progress",
        "nous_tools.tool.log",
    ]


def test_tool_timeout_is_the_same_signal_object_as_tool_execute_timeout(
    executor: ToolExecutor,
) -> None:
    import threading

    assert signals.tool_timeout is signals.tool_execute_timeout
    seen: list[tuple[str, t.Any]] = []

    def via_old_name(sender: t.Any, *, measurements: t.Any, metadata: t.Any) -> None:
        seen.append(("tool_timeout", measurements["timeout"]))

    def via_new_name(sender: t.Any, *, measurements: t.Any, metadata: t.Any) -> None:
        seen.append(("tool_execute_timeout", measurements["timeout"]))

    signals.tool_timeout.connect(via_old_name)
    signals.tool_execute_timeout.connect(via_new_name)
    release = threading.Event()
    try:
        result = executor.execute(make(lambda: release.wait(5), name="hang", timeout=0.05), {})
    finally:
        release.set()
        signals.tool_execute_timeout.disconnect(via_old_name)  # disconnect through either name
        signals.tool_timeout.disconnect(via_new_name)
    assert isinstance(result, Err)
    assert sorted(seen) == [("tool_execute_timeout", 0.05), ("tool_timeout", 0.05)]
    hold = threading.Event()
    try:  # a second timeout, after both were disconnected, reaches neither
        executor.execute(make(lambda: hold.wait(5), name="again", timeout=0.05), {})
    finally:
        hold.set()
    assert len(seen) == 2


def test_a_lambda_connected_weakly_is_dropped_and_one_connected_with_weak_false_is_kept(
    executor: ToolExecutor,
) -> None:
    """What the docs warn about: blinker holds receivers weakly by default."""
    import gc

    calls: list[str] = []
    signals.tool_execute_stop.connect(lambda sender, **kw: calls.append("weak"))
    kept = signals.tool_execute_stop.connect(
        lambda sender, **kw: calls.append("strong"), weak=False
    )
    gc.collect()
    try:
        assert executor.execute(make(lambda: 1, name="one"), {}) == Ok(1)
    finally:
        signals.tool_execute_stop.disconnect(kept)
    assert calls == ["strong"]


def test_a_slow_start_receiver_eats_into_the_timeout_and_never_stretches_it() -> None:
    """Receivers run in the caller's thread: the attempt's deadline is set before the
    ``start`` signal, so 2 s spent in a receiver leave the tool 3 s of its 5 s."""
    import time

    from nous_tools import RunContext

    seen: list[float] = []

    def deadline_of(ctx: RunContext) -> str:
        assert ctx.deadline is not None
        seen.append(ctx.deadline)
        return "ok"

    def slow(sender: object, **kw: object) -> None:
        time.sleep(2.0)

    tool = Tool.from_function(deadline_of, timeout=5.0, retries=0)
    signals.tool_execute_start.connect(slow)
    try:
        with ToolExecutor(max_workers=2) as executor:
            began = time.monotonic()
            assert executor.execute(tool, {}, RunContext.new()).unwrap() == "ok"
    finally:
        signals.tool_execute_start.disconnect(slow)
    assert seen and seen[0] - began < 5.0 + 1.0  # not 5 s after the receiver's 2 s
