"""registry.code_tool: a Tool a model calls with a program, through execute_tool_calls in
the OpenAI and Anthropic shapes, and a batch paused on a program's nested call."""

from __future__ import annotations

import json
import pathlib

import pytest

from nous_tools import Err, Ok, ProgramPaused, RunContext, SQLiteJournal, execute_tool_calls
from nous_tools.program._tool import signature
from tests.program.conftest import confined, count, marking_registry

pytestmark = confined

LOOP = """
found = [lookup(item=f"x{i}") for i in range(3)]
print("done")
result = {"found": found}
"""


def openai_call(call_id: str, code: str) -> dict[str, object]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "run_python", "arguments": json.dumps({"code": code})},
    }


def anthropic_message(call_id: str, code: str) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "I'll write a program."},
            {"type": "tool_use", "id": call_id, "name": "run_python", "input": {"code": code}},
        ],
    }


def test_the_description_lists_each_function_with_its_signature_and_doc(
    markers: pathlib.Path,
) -> None:
    registry = marking_registry(markers)
    tool = registry.code_tool()
    assert tool.name == "run_python"
    assert tool.parameters is not None and list(tool.parameters["properties"]) == ["code"]
    description = tool.description or ""
    assert "- lookup(item: str): Find an item." in description
    assert "- publish(text: str): Publish a text (asks a person first)." in description
    assert "run_python(" not in description


def test_a_signature_shows_types_and_defaults(markers: pathlib.Path) -> None:
    from nous_tools import Tool

    def find(query: str, limit: int = 10, exact: bool | None = None) -> str:
        """Find."""
        return query

    assert signature(Tool.from_function(find)) == (
        "find(query: str, limit: int = 10, exact: bool | None = None)"
    )


def test_the_code_tool_runs_through_execute_tool_calls_in_the_openai_shape(
    markers: pathlib.Path,
) -> None:
    registry = marking_registry(markers)
    registry.register(registry.code_tool())
    batch = execute_tool_calls(registry, [openai_call("call_1", LOOP)])
    assert batch.all_ok, batch.results
    [message] = batch.to_openai_messages()
    assert message["tool_call_id"] == "call_1"
    content = json.loads(message["content"])
    assert content == {
        "result": {"found": ["found x0", "found x1", "found x2"]},
        "stdout": "done\n",
    }
    assert count(markers, "lookup-x2") == 1


def test_the_code_tool_runs_through_execute_tool_calls_in_the_anthropic_shape(
    markers: pathlib.Path,
) -> None:
    registry = marking_registry(markers)
    registry.register(registry.code_tool())
    batch = execute_tool_calls(registry, anthropic_message("toolu_1", LOOP))
    [block] = batch.to_anthropic_blocks()
    assert block["tool_use_id"] == "toolu_1" and block["is_error"] is False
    assert json.loads(block["content"])["result"]["found"][0] == "found x0"


def test_a_failing_program_is_an_error_result_for_the_model(markers: pathlib.Path) -> None:
    registry = marking_registry(markers)
    registry.register(registry.code_tool())
    batch = execute_tool_calls(registry, anthropic_message("toolu_2", "nope()"))
    [block] = batch.to_anthropic_blocks()
    assert block["is_error"] is True
    assert "lookup, publish, score" in block["content"]


@pytest.mark.parametrize("journaled", [True, False])
def test_a_batch_paused_on_a_nested_call_shows_it_and_resumes_by_its_id(
    markers: pathlib.Path, tmp_path: pathlib.Path, journaled: bool
) -> None:
    options = {"journal": SQLiteJournal(str(tmp_path / "calls.db"))} if journaled else {}
    registry = marking_registry(markers, **options)
    registry.register(registry.code_tool())
    code = 'a = lookup(item="a")\np = publish(text="hi")\nresult = [a, p]\n'
    ctx = RunContext.new(run_id="conversation-1")
    batch = execute_tool_calls(registry, [openai_call("call_9", code)], ctx)
    assert len(batch.pending) == 1
    assert batch.to_openai_messages() == []  # nothing to send the model yet
    [summary] = batch.pending_summary()
    assert summary["id"] == "call_9/2"
    assert summary["tool"] == "publish" and summary["arguments"] == {"text": "hi"}
    assert summary["program_call_id"] == "call_9"
    with pytest.raises(ValueError, match="decide those instead"):
        batch.resolve({"call_9": "approve"})

    resolved = batch.resolve({"call_9/2": "approve"})
    assert resolved.pending == [] and resolved.all_ok
    [message] = resolved.to_openai_messages()
    assert message["tool_call_id"] == "call_9"
    assert json.loads(message["content"])["result"] == ["found a", "published hi"]
    assert count(markers, "lookup-a") == 1 and count(markers, "publish-hi") == 1


def test_a_batch_paused_on_a_program_crosses_requests_signed_and_resolves_there(
    markers: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    from nous_tools import ToolCallResults

    journal = SQLiteJournal(str(tmp_path / "calls.db"))
    registry = marking_registry(markers, journal=journal)
    registry.register(registry.code_tool())
    code = 'a = lookup(item="a")\np = publish(text="web")\nresult = [a, p]\n'
    ctx = RunContext.new(run_id="conversation-2")
    batch = execute_tool_calls(registry, [openai_call("call_w", code)], ctx)
    wire = json.loads(json.dumps(batch.to_dict(secret="s3cret")))

    # a later request, another registry object over the same tools and journal
    later = marking_registry(markers, journal=journal)
    later.register(later.code_tool())
    back = ToolCallResults.from_dict(wire, later, secret="s3cret")
    assert [entry["id"] for entry in back.pending_summary()] == ["call_w/2"]
    resolved = back.resolve({"call_w/2": "approve"})
    [message] = resolved.to_openai_messages()
    assert json.loads(message["content"])["result"] == ["found a", "published web"]
    assert count(markers, "lookup-a") == 1 and count(markers, "publish-web") == 1

    forged = json.loads(json.dumps(wire))
    forged["calls"][0]["program"]["source"] = 'publish(text="evil")'
    with pytest.raises(ValueError, match="refused"):
        ToolCallResults.from_dict(forged, later, secret="s3cret")


def test_the_code_tool_run_directly_returns_the_paused_program(markers: pathlib.Path) -> None:
    registry = marking_registry(markers)
    registry.register(registry.code_tool())
    result = registry.execute("run_python", {"code": 'publish(text="y")'}, call_id="d1")
    assert isinstance(result, Ok) and isinstance(result.value, ProgramPaused)
    outcome = result.value.resolve({result.value.ids[0]: "reject"})
    assert isinstance(outcome, Err)
    assert "rejected by the user" in outcome.reason.message


def test_a_code_tool_in_a_context_that_can_ask_asks_there_for_a_nested_call(
    markers: pathlib.Path,
) -> None:
    from nous_tools import Elicitation

    asked: list[str] = []

    def elicitor(message: str, schema: object) -> Elicitation:
        asked.append(message)
        return Elicitation("accept", {})

    registry = marking_registry(markers)
    registry.register(registry.code_tool())
    ctx = RunContext.new(elicitor=elicitor)
    batch = execute_tool_calls(registry, [openai_call("e1", 'publish(text="asked")')], ctx)
    assert batch.all_ok, batch.results
    assert len(asked) == 1 and "publish" in asked[0] and "asked" in asked[0]
    assert count(markers, "publish-asked") == 1


def test_the_code_tool_runs_through_execute_tool_calls_in_the_responses_shape(
    markers: pathlib.Path,
) -> None:
    registry = marking_registry(markers)
    registry.register(registry.code_tool())
    item = {
        "type": "function_call",
        "call_id": "fc_1",
        "name": "run_python",
        "arguments": json.dumps({"code": LOOP}),
    }
    batch = execute_tool_calls(registry, {"output": [item]})
    [output] = batch.to_responses_items()
    assert output["call_id"] == "fc_1" and output["type"] == "function_call_output"
    assert json.loads(output["output"])["stdout"] == "done\n"


def test_the_same_response_again_after_resolve_answers_from_the_journal(
    markers: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    registry = marking_registry(markers, journal=SQLiteJournal(str(tmp_path / "calls.db")))
    registry.register(registry.code_tool())
    code = 'a = lookup(item="a")\np = publish(text="again")\nresult = [a, p]\n'
    ctx = RunContext.new(run_id="conversation-3")
    batch = execute_tool_calls(registry, [openai_call("call_r", code)], ctx)
    batch.resolve({"call_r/2": "approve"})
    again = execute_tool_calls(registry, [openai_call("call_r", code)], ctx)
    assert again.all_ok, again.results
    [message] = again.to_openai_messages()
    assert json.loads(message["content"])["result"] == ["found a", "published again"]
    assert count(markers, "lookup-a") == 1 and count(markers, "publish-again") == 1


def test_the_code_tool_run_directly_on_a_journal_never_records_its_call_under_its_id(
    markers: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    journal = SQLiteJournal(str(tmp_path / "calls.db"))
    registry = marking_registry(markers, journal=journal)
    registry.register(registry.code_tool())
    ctx = RunContext.new(run_id="direct-1")
    code = 'a = lookup(item="d")\npublish(text="direct")\n'
    first = registry.execute("run_python", {"code": code}, ctx, call_id="d1")
    assert isinstance(first, Ok) and isinstance(first.value, ProgramPaused), first
    assert journal.get("direct-1", "d1") is None  # a paused program is no outcome

    # The same call again is the program again (its nested calls from the journal),
    # paused on the same nested call: never the paused program's text as an answer.
    again = registry.execute("run_python", {"code": code}, ctx, call_id="d1")
    assert isinstance(again, Ok) and isinstance(again.value, ProgramPaused), again
    assert again.value.ids == first.value.ids
    assert count(markers, "lookup-d") == 1
    assert journal.get("direct-1", "d1") is None


@pytest.mark.parametrize("journaled", [True, False])
def test_the_program_calls_start_signal_carries_its_batch_call_id_and_it_is_not_journaled(
    markers: pathlib.Path, tmp_path: pathlib.Path, journaled: bool
) -> None:
    import threading
    import typing as t

    from nous_tools import Tool, signals

    journal = SQLiteJournal(str(tmp_path / "calls.db")) if journaled else None
    registry = marking_registry(markers, **({"journal": journal} if journal else {}))
    registry.register(registry.code_tool())
    seen: list[tuple[str, str, object]] = []
    lock = threading.Lock()

    def on(kind: str) -> t.Callable[..., None]:
        def receive(sender: Tool, *, measurements: t.Any, metadata: t.Any) -> None:
            with lock:
                seen.append((kind, sender.name, metadata.get("call_id")))

        return receive

    start, stop = on("start"), on("stop")
    signals.tool_execute_start.connect(start)
    signals.tool_execute_stop.connect(stop)
    try:
        code = 'a = lookup(item="g")\np = publish(text="signal")\nresult = [a, p]\n'
        ctx = RunContext.new(run_id="signals-1")
        batch = execute_tool_calls(registry, [openai_call("call_s", code)], ctx)
    finally:
        signals.tool_execute_start.disconnect(start)
        signals.tool_execute_stop.disconnect(stop)
    assert [entry["id"] for entry in batch.pending_summary()] == ["call_s/2"]
    program = [(kind, call_id) for kind, name, call_id in seen if name == "run_python"]
    # (a stop signal names no call: signals.tool_execute_stop)
    assert program == [("start", "call_s"), ("stop", None)]
    assert ("start", "lookup", "call_s/1") in seen
    if journal is not None:  # the program's call itself is never an outcome
        assert journal.get("signals-1", "call_s") is None
        assert journal.get("signals-1", "call_s/1") is not None


def test_a_batch_resolves_a_nested_call_with_an_edit(
    markers: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    from nous_tools import Edit

    registry = marking_registry(markers, journal=SQLiteJournal(str(tmp_path / "calls.db")))
    registry.register(registry.code_tool())
    code = 'a = lookup(item="a")\np = publish(text="draft")\nresult = [a, p]\n'
    ctx = RunContext.new(run_id="conversation-e")
    batch = execute_tool_calls(registry, [openai_call("call_e", code)], ctx)
    with pytest.raises(ValueError, match="'approve', 'reject' or an Edit"):
        batch.resolve({"call_e/2": 42})
    resolved = batch.resolve({"call_e/2": Edit({"text": "final"})})
    assert resolved.pending == [] and resolved.all_ok, resolved.results
    [message] = resolved.to_openai_messages()
    assert json.loads(message["content"])["result"] == ["found a", "published final"]
    assert count(markers, "publish-final") == 1 and count(markers, "publish-draft") == 0

    # The same response again, as a new batch, has no paused program to say the call
    # at #2 was edited: the asked call conflicts with the journal's (edited) record,
    # and the program diverges there; nothing runs twice.
    again = execute_tool_calls(registry, [openai_call("call_e", code)], ctx)
    [error] = again.to_openai_messages()
    assert "diverged at nested call #2" in error["content"]
    assert count(markers, "publish-final") == 1 and count(markers, "publish-draft") == 0
    assert count(markers, "lookup-a") == 1
