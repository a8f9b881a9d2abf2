"""``RunContext.run_id``: the run a call belongs to, carried to every attempt, to
child processes and to nested calls (the key of the call journal and of per-run
budgets)."""

from __future__ import annotations

import pytest

from nous_tools import RunContext, Tool, ToolExecutor, execute


def report_run_id(ctx: RunContext) -> str | None:
    return ctx.run_id


def test_run_id_defaults_to_none_and_is_set_by_new() -> None:
    assert RunContext().run_id is None
    assert RunContext.new().run_id is None
    assert RunContext.new(run_id="conversation-42").run_id == "conversation-42"


@pytest.mark.parametrize("bad", ["", 42, b"run"])
def test_run_id_must_be_a_non_empty_str(bad: object) -> None:
    with pytest.raises(ValueError, match="run_id"):
        RunContext.new(run_id=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("timeout", "isolation"), [(None, "thread"), (10.0, "thread"), (10.0, "process")]
)
def test_run_id_reaches_the_tool_in_every_mode(timeout: float | None, isolation: str) -> None:
    tool = Tool.from_function(report_run_id, timeout=timeout, isolation=isolation, retries=0)
    with ToolExecutor(max_workers=2, process_workers=1) as executor:
        result = executor.execute(tool, {}, RunContext.new(run_id="run-7"))
    assert result.unwrap() == "run-7"


def test_run_id_is_kept_on_a_retry_and_in_nested_calls() -> None:
    inner = Tool.from_function(report_run_id, name="inner", timeout=10.0)
    seen: list[object] = []

    def outer(ctx: RunContext) -> object:
        seen.append(ctx.run_id)
        if ctx.retry == 0:
            raise RuntimeError("first attempt fails")
        return execute(inner, {}, ctx).unwrap()

    tool = Tool.from_function(outer, timeout=10.0, retries=1)
    assert execute(tool, {}, RunContext.new(run_id="run-8"), call_id="call-1").unwrap() == "run-8"
    assert seen == ["run-8", "run-8"]
