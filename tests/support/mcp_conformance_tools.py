"""The tools the official MCP conformance suite (npm ``@modelcontextprotocol/conformance``)
calls on a server, as plain nous-tools tools: ``nous-tools serve
mcp_conformance_tools:registry --http PORT`` (from ``tests/support/``).

Each tool is what the suite's scenario of the same name asks for (see its
``Server Implementation Requirements``).
"""

from __future__ import annotations

import typing as t

from mcp_rich_tools import PNG, WAV

from nous_tools import Question, Registry, RunContext, Tool, tool
from nous_tools.content import Audio, Image, Resource
from nous_tools.contrib.mcp import close_sse_stream
from nous_tools.errors import ElicitationUnavailable

registry = Registry()


@registry.register
@tool(timeout=10)
def test_simple_text() -> str:
    """Returns a simple text response (tools-call-simple-text)."""
    return "This is a simple text response for testing."


@registry.register
@tool(timeout=10)
def test_image_content() -> Image:
    """Returns a 1x1 red PNG (tools-call-image)."""
    return Image(PNG, "image/png")


@registry.register
@tool(timeout=10)
def test_audio_content() -> Audio:
    """Returns a short WAV (tools-call-audio)."""
    return Audio(WAV, "audio/wav")


@registry.register
@tool(timeout=10)
def test_embedded_resource() -> Resource:
    """Returns an embedded text resource (tools-call-embedded-resource)."""
    return Resource(
        "test://embedded-resource", "text/plain", text="This is an embedded resource content."
    )


@registry.register
@tool(timeout=10)
def test_multiple_content_types() -> list[t.Any]:
    """Returns text, an image and a resource (tools-call-mixed-content)."""
    return [
        "Multiple content types test:",
        Image(PNG, "image/png"),
        Resource(
            "test://mixed-content-resource", "application/json", text='{"test":"data","value":123}'
        ),
    ]


@registry.register
@tool(timeout=10)
def test_tool_with_logging(ctx: RunContext) -> str:
    """Logs three lines, 50 ms apart (tools-call-with-logging)."""
    ctx.log("info", "Tool execution started")
    ctx.cancelled.wait(0.05)
    ctx.log("info", "Tool processing data")
    ctx.cancelled.wait(0.05)
    ctx.log("info", "Tool execution completed")
    return "Tool with logging executed successfully"


@registry.register
@tool(timeout=10)
def test_tool_with_progress(ctx: RunContext) -> str:
    """Reports 0, 50 and 100 of 100, 50 ms apart (tools-call-with-progress)."""
    for done in (0, 50, 100):
        ctx.report_progress(done, 100, f"{done} of 100")
        if done < 100:
            ctx.cancelled.wait(0.06)  # past the 20-a-second coalescing
    return "Tool with progress executed successfully"


@registry.register
@tool(timeout=10, retries=0)
def test_error_handling() -> str:
    """Always fails (tools-call-error)."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@registry.register
@tool(timeout=30, retries=0)
def test_sampling(ctx: RunContext, prompt: str) -> str:
    """Asks the client's model (tools-call-sampling)."""
    return "LLM response: " + ctx.sample(prompt, max_tokens=100)


@registry.register
@tool(timeout=30, retries=0)
def test_elicitation(ctx: RunContext, message: str) -> str:
    """Asks the user for a username and an email (tools-call-elicitation)."""
    answer = ctx.elicit(
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    return f"User response: action={answer.action}, content={answer.content}"


@registry.register
@tool(timeout=30, retries=0)
def test_elicitation_sep1034_defaults(ctx: RunContext) -> str:
    """Asks with a default for every primitive type (SEP-1034)."""
    answer = ctx.elicit(
        "Please review your details",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {
                    "type": "string",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "default": True},
            },
        },
    )
    return f"Elicitation completed: action={answer.action}, content={answer.content}"


@registry.register
@tool(timeout=30, retries=0)
def test_elicitation_sep1330_enums(ctx: RunContext) -> str:
    """Asks with the five enum forms: untitled, titled, legacy, and multi-selects (SEP-1330)."""
    answer = ctx.elicit(
        "Please choose",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {
                    "type": "string",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
        },
    )
    return f"Elicitation completed: action={answer.action}, content={answer.content}"


@registry.register
@tool(timeout=30, retries=0)
def test_reconnection(ctx: RunContext) -> str:
    """Closes its SSE stream mid-call; the client reconnects for the result (SEP-1699)."""
    close_sse_stream(ctx)
    ctx.cancelled.wait(0.1)  # the client reconnects meanwhile
    return (
        "Reconnection test completed successfully. If you received this, the client "
        "properly reconnected after stream closure."
    )


def _schema_2020_12(
    name: str | None = None,
    address: dict | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    return f"JSON Schema 2020-12 tool called with: name={name}, address={address}"


registry.register(
    Tool(
        name="json_schema_2020_12_tool",
        function=_schema_2020_12,
        description="Tool with JSON Schema 2020-12 features (SEP-1613, SEP-2106)",
        timeout=10,
        parameters={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"},
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {
                "properties": {"contactMethod": {"const": "phone"}},
                "required": ["contactMethod"],
            },
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": False,
        },
    )
)


def _greet_in_region(region: str, name: str = "there") -> str:
    return f"Hello {name}, from {region}"


# http-custom-header-server-validation (SEP-2243): a string parameter a client mirrors
# as the Mcp-Param-Region header, which the server checks against the body.
registry.register(
    Tool(
        name="test_region_header",
        function=_greet_in_region,
        description="Greets from a region sent as the Mcp-Param-Region header too (SEP-2243)",
        timeout=10,
        parameters={
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "name": {"type": "string"},
            },
            "required": ["region"],
        },
    )
)


# server-stateless (SEP-2575, 2026-07-28): the suite's diagnostic tools.


@registry.register
@tool(timeout=10, retries=0)
def test_missing_capability(ctx: RunContext) -> str:
    """Asks the client's model: a client that did not declare sampling gets -32021."""
    return "LLM response: " + ctx.sample("Say hello", max_tokens=20)


@registry.register
@tool(timeout=30, retries=0)
def test_streaming_elicitation(ctx: RunContext) -> str:
    """Asks the user a question: on 2026-07-28 the call answers with the question
    (an InputRequiredResult), never a request of its own on the stream."""
    answer = ctx.elicit(
        "What is your name?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"


@registry.register
@tool(timeout=10)
def test_logging_tool(ctx: RunContext) -> str:
    """Logs two lines: sent only to a request that asked for a log level."""
    ctx.log("info", "Tool execution started")
    ctx.log("info", "Tool execution completed")
    return "Tool with logging executed successfully"


# input-required-result-* (SEP-2322, 2026-07-28): a question ends the round; the client
# calls again with the answer (and the round's signed requestState), and the tool runs
# again from the start, its earlier questions answered from that state. Each question
# is named (key=) as the scenario names it.

_NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@registry.register
@tool(timeout=30, retries=0)
def test_input_required_result_elicitation(ctx: RunContext) -> str:
    """Asks the user's name, as "user_name" (input-required-result-basic-elicitation and
    the scenarios built on it: the suite may answer it by that name on its first call)."""
    answer = ctx.elicit("What is your name?", _NAME_FORM, key="user_name")
    return f"Hello, {(answer.content or {}).get('name')}!"


@registry.register
@tool(timeout=30, retries=0)
def test_input_required_result_sampling(ctx: RunContext) -> str:
    """Asks the client's model a question (input-required-result-basic-sampling)."""
    return ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")


@registry.register
@tool(timeout=30, retries=0)
def test_input_required_result_request_state(ctx: RunContext) -> str:
    """Asks for a confirmation; the answer came back through the signed requestState
    (input-required-result-request-state)."""
    answer = ctx.elicit(
        "Please confirm",
        {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        key="confirm",
    )
    return f"state-ok: confirmed={(answer.content or {}).get('ok')}"


@registry.register
@tool(timeout=30, retries=0)
def test_input_required_result_multi_round(ctx: RunContext) -> str:
    """Asks two questions, one round each (input-required-result-multi-round)."""
    name = ctx.elicit("Step 1: What is your name?", _NAME_FORM, key="step1")
    color = ctx.elicit(
        "Step 2: What is your favorite color?",
        {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        key="step2",
    )
    return f"{(name.content or {}).get('name')} likes {(color.content or {}).get('color')}"


@registry.register
@tool(timeout=30, retries=0)
def test_input_required_result_list_roots(ctx: RunContext) -> str:
    """Asks the client for its roots (input-required-result-basic-list-roots)."""
    roots = ctx.roots(key="client_roots")
    return "Roots: " + ", ".join(f"{root.name} ({root.uri})" for root in roots)


@registry.register
@tool(timeout=30, retries=0)
def test_input_required_result_multiple_inputs(ctx: RunContext) -> str:
    """Asks a person, a model and the client's roots at once, in one round
    (input-required-result-multiple-input-requests)."""
    answers = ctx.ask_all(
        {
            "user_name": Question.elicit("What is your name?", _NAME_FORM),
            "greeting": Question.sample("Generate a greeting", max_tokens=50),
            "client_roots": Question.roots(),
        }
    )
    name = (answers["user_name"].content or {}).get("name")
    return f"{answers['greeting']} {name}, with {len(answers['client_roots'])} root(s)"


@registry.register
@tool(timeout=30, retries=0)
def test_input_required_result_tampered_state(ctx: RunContext) -> str:
    """Asks for a name; a requestState changed by the client is refused
    (input-required-result-tampered-state)."""
    answer = ctx.elicit("What is your name?", _NAME_FORM)
    return f"Hello, {(answer.content or {}).get('name')}!"


@registry.register
@tool(timeout=30, retries=0)
def test_input_required_result_capabilities(ctx: RunContext) -> str:
    """Asks the person when the client can elicit, else the model: only what the client
    declared (input-required-result-capability-check)."""
    try:
        answer = ctx.elicit("What is your name?", _NAME_FORM)
        return f"Hello, {(answer.content or {}).get('name')}!"
    except ElicitationUnavailable:
        return ctx.sample("Make up a name.", max_tokens=20)


# -- the Tasks extension (tasks-* scenarios) --------------------------------------------


@registry.register
@tool(timeout=10, retries=0)
def echo(text: str = "") -> str:
    """Says ``text`` back. It lists first (tools are listed by name): the
    http-header-validation scenario calls the first listed tool with no arguments,
    which must not be a task-required one such as ``failing_job``."""
    return text or "echo"


@registry.register
@tool(timeout=10, retries=0, task="never")
def greet(name: str) -> str:
    """Greets: a sync-only tool (task='never')."""
    return f"Hello, {name}!"


@registry.register
@tool(timeout=120, retries=0, task="optional")
def slow_compute(ctx: RunContext, seconds: float = 1, label: str = "") -> str:
    """Sleeps ``seconds`` (stopping when cancelled), then says so: a task-supporting tool."""
    ctx.cancelled.wait(seconds)
    return f"computed {label} in {seconds} s"


@registry.register
@tool(timeout=30, retries=0, task="required")
def failing_job() -> str:
    """Fails after about a second: a tool error (a task that must be a task)."""
    import time

    time.sleep(1)
    raise RuntimeError("failing_job failed, as it always does")


@registry.register
@tool(timeout=30, retries=0, task="optional")
def protocol_error_job() -> str:
    """Raises a protocol-level error: its task fails (not completed with isError)."""
    from mcp.shared.exceptions import MCPError

    raise MCPError(code=-32603, message="protocol_error_job: an internal error")


_CONFIRM_FORM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


@registry.register
@tool(timeout=120, retries=0, task="optional")
def confirm_delete(ctx: RunContext, filename: str) -> str:
    """Asks the person to confirm, as a task waits (input_required), then answers."""
    answer = ctx.elicit(f"Delete {filename}?", _CONFIRM_FORM)
    confirmed = answer.action == "accept" and (answer.content or {}).get("confirm")
    return f"{filename} deleted" if confirmed else f"{filename} kept"


@registry.register
@tool(timeout=120, retries=0, task="optional")
def multi_input(ctx: RunContext) -> str:
    """Asks two questions at once (two threads): two input requests pending together."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda n: ctx.elicit(f"Question {n}?", _NAME_FORM), (1, 2)))
    return ", ".join(str((a.content or {}).get("name")) for a in answers)


@registry.register
@tool(timeout=120, retries=0, task="required", ask_before_task=True)
def test_tool_with_task(ctx: RunContext) -> str:
    """Asks the user's name in multi-round-trip rounds, then goes on as a task
    (tasks-mrtr-composition): the round that answers creates the task."""
    answer = ctx.elicit("What is your name?", _NAME_FORM, key="user_name")
    ctx.cancelled.wait(0.2)  # the long part, in the task
    return f"Hello, {(answer.content or {}).get('name')}, from a task!"
