"""ctx.sample and ctx.elicit outside MCP: the context's callables, or a clear error."""

from __future__ import annotations

import os
import threading

import attrs
import pytest

from nous_tools import (
    Elicitation,
    ElicitationUnavailable,
    Err,
    Ok,
    Question,
    Root,
    RootsUnavailable,
    RunContext,
    SamplingUnavailable,
    Tool,
    ToolError,
    ToolExecutor,
    ToolTimeout,
    execute,
)
from nous_tools.asking import check_elicitation_schema, elicitation_content_errors
from nous_tools.run_context import for_attempt

FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30, "minimum": 0},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
    "required": ["name"],
}

ENUMS = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First"},
                {"const": "value2", "title": "Second"},
            ],
        },
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2"], "enumNames": ["One", "Two"]},
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2"]},
            "maxItems": 2,
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [{"const": "value1", "title": "A"}, {"const": "value2", "title": "B"}]
            },
        },
    },
}


def echo_sampler(messages, *, max_tokens, system=None, temperature=None):
    return f"{messages[-1]['content']}|{max_tokens}|{system}|{temperature}"


def summarise(ctx: RunContext, text: str) -> str:
    return ctx.sample(f"Summarise: {text}", max_tokens=20, system="Be brief", temperature=0.5)


def ask_age(ctx: RunContext) -> str:
    answer = ctx.elicit("How old are you?", FORM)
    return f"{answer.action}:{answer.content}"


# -- sampling ---------------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [None, 10.0], ids=["inline", "thread"])
def test_sample_goes_to_the_contexts_sampler_inline_and_in_a_worker_thread(timeout):
    tool = Tool.from_function(summarise, timeout=timeout)
    result = execute(tool, {"text": "hi"}, RunContext.new(sampler=echo_sampler))
    assert result == Ok("Summarise: hi|20|Be brief|0.5")


def test_sample_takes_a_conversation_of_messages():
    seen = []

    def sampler(messages, **options):
        seen.append((messages, options))
        return "ok"

    ctx = RunContext.new(sampler=sampler)
    conversation = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Bye"},
    ]
    assert ctx.sample(conversation, max_tokens=5) == "ok"
    [(messages, options)] = seen
    assert messages == conversation and messages is not conversation
    assert options == {"max_tokens": 5, "system": None, "temperature": None}


def test_sample_without_a_sampler_raises_sampling_unavailable():
    with pytest.raises(SamplingUnavailable, match="no sampler"):
        RunContext.new().sample("hi", max_tokens=1)
    assert issubclass(SamplingUnavailable, ToolError)


@pytest.mark.parametrize("timeout", [None, 10.0], ids=["inline", "thread"])
def test_uncaught_sampling_unavailable_is_an_err_naming_it_and_never_retried(timeout):
    runs = []

    def needs_a_model(ctx: RunContext) -> str:
        runs.append(1)
        return ctx.sample("hi", max_tokens=1)

    tool = Tool.from_function(needs_a_model, timeout=timeout, retries=3)
    result = execute(tool, {}, RunContext.new())
    assert isinstance(result, Err)
    assert "SamplingUnavailable" in result.reason.message
    assert isinstance(result.reason.original_error, SamplingUnavailable)
    assert len(runs) == 1


def test_a_tool_may_catch_sampling_unavailable_and_carry_on():
    def maybe_summarise(ctx: RunContext, text: str) -> str:
        try:
            return ctx.sample(text, max_tokens=10)
        except SamplingUnavailable:
            return text[:3]

    assert execute(Tool.from_function(maybe_summarise), {"text": "abcdef"}) == Ok("abc")


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda ctx: ctx.sample("", max_tokens=1), ValueError),
        (lambda ctx: ctx.sample(b"bytes", max_tokens=1), TypeError),
        (lambda ctx: ctx.sample([{"role": "system", "content": "x"}], max_tokens=1), ValueError),
        (lambda ctx: ctx.sample([{"role": "user", "content": 3}], max_tokens=1), TypeError),
        (lambda ctx: ctx.sample([], max_tokens=1), ValueError),
        (lambda ctx: ctx.sample("hi", max_tokens=0), ValueError),
        (lambda ctx: ctx.sample("hi", max_tokens=True), ValueError),
        (lambda ctx: ctx.sample("hi", max_tokens=5, temperature=float("nan")), ValueError),
        (lambda ctx: ctx.sample("hi", max_tokens=5, system=3), TypeError),
    ],
)
def test_bad_sample_requests_are_refused_before_the_sampler_is_called(call, error):
    called = []
    ctx = RunContext.new(sampler=lambda *a, **k: called.append(1) or "x")
    with pytest.raises(error):
        call(ctx)
    assert called == []


def test_a_sampler_answer_that_is_not_exactly_str_is_refused():
    class Sneaky(str):
        pass

    ctx = RunContext.new(sampler=lambda messages, **options: Sneaky("text"))
    with pytest.raises(TypeError, match="returned Sneaky"):
        ctx.sample("hi", max_tokens=1)


def test_sampler_and_elicitor_must_be_callable():
    with pytest.raises(TypeError, match="'sampler' must be callable"):
        RunContext(sampler="gpt")
    with pytest.raises(TypeError, match="'elicitor' must be callable"):
        RunContext.new(elicitor=3)


def test_attempt_contexts_and_nested_calls_keep_the_sampler_and_elicitor():
    ctx = RunContext.new(sampler=echo_sampler, elicitor=lambda m, s: Elicitation("decline"))
    attempt = for_attempt(ctx, 1, None, threading.Event())
    assert attempt.sampler is echo_sampler and attempt.elicitor is ctx.elicitor
    inner = Tool.from_function(summarise, timeout=5.0, name="inner")

    def outer(ctx: RunContext) -> object:
        return execute(inner, {"text": "nested"}, ctx).value

    assert execute(Tool.from_function(outer, timeout=5.0), {}, ctx) == Ok(
        "Summarise: nested|20|Be brief|0.5"
    )


# -- elicitation --------------------------------------------------------------------------


def test_elicit_goes_to_the_contexts_elicitor_with_the_schema_and_its_defaults():
    asked = []

    def elicitor(message, schema):
        asked.append((message, schema))
        return Elicitation("accept", {"name": "Ada", "age": 36})

    result = execute(Tool.from_function(ask_age), {}, RunContext.new(elicitor=elicitor))
    assert result == Ok(
        "accept:{'name': 'Ada', 'age': 36, 'score': 95.5, 'status': 'active', 'verified': True}"
    )
    [(message, schema)] = asked
    assert message == "How old are you?"
    assert schema == FORM and schema is not FORM
    assert schema["properties"]["age"]["default"] == 30  # SEP-1034 defaults kept


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_elicit_decline_and_cancel_carry_no_content(action):
    ctx = RunContext.new(elicitor=lambda m, s: Elicitation(action))
    answer = ctx.elicit("Continue?", FORM)
    assert (answer.action, answer.content, answer.accepted) == (action, None, False)
    with pytest.raises(ValueError, match="has no content"):
        Elicitation(action, {"name": "x"})


def test_elicit_without_an_elicitor_raises_elicitation_unavailable_and_the_err_names_it():
    with pytest.raises(ElicitationUnavailable, match="no elicitor"):
        RunContext.new().elicit("Name?", FORM)
    result = execute(Tool.from_function(ask_age), {}, RunContext.new())
    assert isinstance(result, Err) and "ElicitationUnavailable" in result.reason.message


class SneakyElicitation(Elicitation):
    pass


class AlwaysAccept(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


@pytest.mark.parametrize(
    "answer",
    ["accept", AlwaysAccept("accept"), {"action": "accept"}, None],
    ids=["str", "str-subclass", "dict", "none"],
)
def test_elicitor_answers_other_than_an_elicitation_are_refused(answer):
    ctx = RunContext.new(elicitor=lambda m, s: answer)
    with pytest.raises(TypeError, match="expected an Elicitation"):
        ctx.elicit("Name?", FORM)


def test_elicitation_subclasses_and_str_subclass_actions_are_refused():
    with pytest.raises(ValueError, match="action must be one of"):
        Elicitation(AlwaysAccept("accept"))
    sneaky = SneakyElicitation.__new__(SneakyElicitation)
    object.__setattr__(sneaky, "action", "accept")
    object.__setattr__(sneaky, "content", {"name": "x"})
    ctx = RunContext.new(elicitor=lambda m, s: sneaky)
    with pytest.raises(TypeError, match="returned SneakyElicitation"):
        ctx.elicit("Name?", FORM)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({"name": 5}, "'name' must be a string"),
        ({"name": "x", "password": "p"}, "'password' is not a field"),
        ({"name": "x", "age": -1}, "'age' must be at least 0"),
        ({"name": "x", "age": 3.5}, "'age' must be an integer"),
        ({"name": "x", "age": True}, "'age' must be an integer"),
        ({"name": "x", "status": "gone"}, "'status' must be one of"),
        ({"name": "x", "verified": "yes"}, "'verified' must be true or false"),
    ],
)
def test_accepted_content_that_does_not_fit_the_schema_is_refused(content, problem):
    ctx = RunContext.new(elicitor=lambda m, s: Elicitation("accept", content))
    with pytest.raises(ValueError, match=problem):
        ctx.elicit("Name?", FORM)


def test_missing_required_field_without_default_is_refused():
    form = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
    assert elicitation_content_errors(form, {}) == ["'code' is required"]


def test_titled_untitled_single_and_multi_select_enums_are_valid_forms():
    assert check_elicitation_schema(ENUMS) == ENUMS
    good = {
        "untitledSingle": "option1",
        "titledSingle": "value2",
        "legacyEnum": "opt2",
        "untitledMulti": ["option1", "option2"],
        "titledMulti": ["value1"],
    }
    assert elicitation_content_errors(ENUMS, good) == []
    assert elicitation_content_errors(ENUMS, {"titledSingle": "First"}) == [
        "'titledSingle' must be one of 'value1', 'value2'"
    ]
    assert elicitation_content_errors(ENUMS, {"titledMulti": ["value3"]}) == [
        "'titledMulti' has 'value3', not one of 'value1', 'value2'"
    ]
    assert elicitation_content_errors(
        ENUMS, {"untitledMulti": ["option1", "option2", "option1"]}
    ) == ["'untitledMulti' allows at most 2 choice(s)"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array"},
        {"type": "object", "properties": {"nested": {"type": "object"}}},
        {"type": "object", "properties": {"n": {"type": "string", "format": "phone"}}},
        {"type": "object", "properties": {"n": {"type": "string", "enum": []}}},
        {"type": "object", "properties": {"n": {"type": "string", "oneOf": [{"const": 1}]}}},
        {"type": "object", "properties": {"n": {"type": "integer", "default": "x"}}},
        {"type": "object", "properties": {}, "required": ["missing"]},
        {"type": "object", "properties": {"n": {"type": "array", "items": {"type": "string"}}}},
    ],
)
def test_schemas_outside_the_mcp_form_are_refused_before_asking(schema):
    asked = []
    ctx = RunContext.new(elicitor=lambda m, s: asked.append(1) or Elicitation("decline"))
    with pytest.raises(ValueError):
        ctx.elicit("Question?", schema)
    assert asked == []


def test_elicitation_is_a_frozen_value():
    answer = Elicitation("accept", {"a": 1})
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        answer.action = "decline"  # type: ignore[misc]
    assert answer == Elicitation("accept", {"a": 1})


def test_a_process_isolated_tool_without_a_way_to_ask_gets_sampling_unavailable():
    tool = Tool.from_function(summarise, timeout=30.0, isolation="process", name="iso_summarise")
    result = execute(tool, {"text": "x"}, RunContext.new())
    assert isinstance(result, Err) and "SamplingUnavailable" in result.reason.message


def test_a_process_isolated_tool_asks_the_parents_sampler_and_elicitor_over_its_pipe():
    """The child's ctx.sample/ctx.elicit cross the pipe as a question of the call; the
    parent's context answers (its callables need not pickle: they run in the parent)."""
    parent_pid = os.getpid()
    asked = []

    def sampler(messages, **options):
        asked.append(os.getpid())
        return f"parent {messages[0]['content']} {options['max_tokens']}"

    ctx = RunContext.new(
        sampler=sampler, elicitor=lambda message, schema: Elicitation("accept", {"name": "Ada"})
    )
    sampling = Tool.from_function(summarise, timeout=30.0, isolation="process", name="iso_sample")
    assert execute(sampling, {"text": "x"}, ctx) == Ok("parent Summarise: x 20")
    assert asked == [parent_pid]
    eliciting = Tool.from_function(ask_age, timeout=30.0, isolation="process", name="iso_elicit")
    assert execute(eliciting, {}, ctx) == Ok(
        "accept:{'name': 'Ada', 'age': 30, 'score': 95.5, 'status': 'active', 'verified': True}"
    )


def test_a_batchs_process_isolated_tools_ask_the_parents_sampler_too():
    """A batch hands process calls straight to the children only when nobody can be
    asked; a context with a sampler runs them where the question can be answered."""
    ctx = RunContext.new(sampler=lambda messages, **options: f"parent {messages[0]['content']}")
    sampling = Tool.from_function(
        summarise, timeout=30.0, isolation="process", name="iso_batch_sample"
    )
    with ToolExecutor(max_workers=4, process_workers=2) as executor:
        results = executor.execute_many(
            [(sampling, {"text": "a"}), (sampling, {"text": "b"}), (sampling, {"text": "c"})],
            ctx,
        )
    assert results == [
        Ok("parent Summarise: a"),
        Ok("parent Summarise: b"),
        Ok("parent Summarise: c"),
    ]


def test_a_process_isolated_tools_answers_are_checked_in_the_child_and_errors_cross_back():
    eliciting = Tool.from_function(ask_age, timeout=30.0, isolation="process", name="iso_elicit2")
    wrong = RunContext.new(elicitor=lambda message, schema: "accept")
    result = execute(eliciting, {}, wrong)
    assert isinstance(result, Err) and "expected an Elicitation" in result.reason.message

    def refusing(messages, **options):
        raise SamplingUnavailable("no model today")

    sampling = Tool.from_function(summarise, timeout=30.0, isolation="process", name="iso_sample2")
    refused = execute(sampling, {"text": "x"}, RunContext.new(sampler=refusing))
    assert isinstance(refused, Err) and "no model today" in refused.reason.message


def test_a_process_isolated_tool_waiting_on_an_answer_is_still_killed_at_its_deadline():
    answered = threading.Event()

    def slow(messages, **options):
        answered.wait(30)  # a person who never answers
        return "late"

    tool = Tool.from_function(summarise, timeout=1.0, isolation="process", name="iso_slow")
    try:
        result = execute(tool, {"text": "x"}, RunContext.new(sampler=slow))
    finally:
        answered.set()
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)


# -- several questions at once (ctx.ask_all) ----------------------------------------------


def _asked_in_order() -> tuple[RunContext, list[str]]:
    order: list[str] = []

    def person(message, schema):
        order.append(message)
        return Elicitation("accept", {})

    def model(messages, *, max_tokens, system=None, temperature=None):
        order.append(messages[0]["content"])
        return "a text"

    return RunContext.new(elicitor=person, sampler=model), order


def test_ask_all_outside_mcp_asks_each_question_in_turn_and_answers_by_key():
    ctx, order = _asked_in_order()
    answers = ctx.ask_all(
        {
            "trip": Question.elicit("Where to?", FORM),
            "poem": Question.sample("Write a poem", max_tokens=10),
        }
    )
    assert order == ["Where to?", "Write a poem"]
    assert answers["trip"].content["name"] == "John Doe"  # the form's default filled in
    assert answers["poem"] == "a text"


def test_a_named_question_outside_mcp_is_asked_as_an_unnamed_one():
    ctx, order = _asked_in_order()
    assert ctx.elicit("Where to?", FORM, key="trip").content["name"] == "John Doe"
    assert ctx.sample("Say hi", max_tokens=5, key="hi") == "a text"
    assert order == ["Where to?", "Say hi"]


def test_roots_outside_mcp_raise_roots_unavailable_and_a_tool_call_is_not_retried():
    with pytest.raises(RootsUnavailable, match="only a call served over MCP"):
        RunContext.new().roots()
    attempts: list[int] = []

    def needs_roots(ctx: RunContext) -> str:
        attempts.append(ctx.retry)
        return str(ctx.roots())

    result = execute(Tool(name="needs_roots", function=needs_roots, retries=3), {})
    assert isinstance(result, Err)
    assert isinstance(result.unwrap_err().original_error, RootsUnavailable)
    assert attempts == [0]


@pytest.mark.parametrize(
    ("questions", "error"),
    [
        ({"": Question.roots()}, ValueError),
        ({"nous_tools.ask.0": Question.roots()}, ValueError),
        ({"x": "What is your name?"}, TypeError),
    ],
)
def test_ask_all_refuses_a_bad_key_or_a_value_that_is_not_a_question(questions, error):
    ctx, order = _asked_in_order()
    with pytest.raises(error):
        ctx.ask_all(questions)
    assert order == []


def test_a_question_is_checked_when_it_is_made():
    with pytest.raises(ValueError, match="non-empty"):
        Question.elicit("", FORM)
    with pytest.raises(ValueError, match="max_tokens"):
        Question.sample("hi", max_tokens=0)
    assert Question.roots().kind == "roots"
    assert Root("file:///work").name is None
