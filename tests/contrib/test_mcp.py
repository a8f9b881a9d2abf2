"""MCP both ways, with real processes and the official SDK on the other side.

* Serving: ``nous-tools serve`` runs as a subprocess and the SDK's own client talks
  to it over stdio (both protocol eras); a registry served over Streamable HTTP
  on 127.0.0.1 (an ephemeral port) answers the SDK's client.
* Calling: ``tests/support/mcp_server.py`` (an SDK server) runs as a subprocess and plain
  synchronous code calls its tools through the registry and the executor.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from pathlib import Path

import anyio
import attrs
import mcp_served_tools
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from nous_tools import (
    Edit,
    Elicitation,
    Err,
    NeedsApproval,
    Ok,
    OutcomeUnknown,
    Registry,
    RunContext,
    Tool,
    ToolError,
    ToolTimeout,
    execute,
    signals,
)
from nous_tools.contrib.mcp import (
    MCPElicitation,
    MCPServer,
    describe_tool,
    serve_http_in_thread,
    tool_title,
)

SUPPORT = Path(__file__).resolve().parents[1] / "support"
SERVER_SCRIPT = str(SUPPORT / "mcp_server.py")

# Generous: the machine is small and shared.
WAIT = 30.0


def run_async(fn, *args):
    return anyio.run(fn, *args)


# -- values ------------------------------------------------------------------------------


def test_tool_annotation_fields_default_to_not_stated():
    plain = Tool(name="x", function=len)
    assert (plain.read_only, plain.destructive, plain.idempotent) == (None, None, None)
    hinted = Tool(name="x", function=len, read_only=True, idempotent=False)
    assert (hinted.read_only, hinted.destructive, hinted.idempotent) == (True, None, False)
    with pytest.raises(TypeError, match="'destructive'"):
        Tool(name="x", function=len, destructive="yes")


def test_published_tool_carries_title_annotations_and_schema():
    entry = describe_tool(mcp_served_tools.add)
    assert entry.name == "add"
    assert entry.title == "Add"
    assert entry.description == "Add two numbers."
    assert entry.input_schema["required"] == ["a"]
    hints = entry.annotations
    assert (hints.title, hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (
        "Add",
        True,
        None,
        True,
    )
    assert tool_title("remove_file") == "Remove file"


# -- serving over stdio, to the SDK's client in a subprocess ----------------------------


def served_stdio(mode: str, elicit=None, sample=None) -> Client:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "nous_tools", "serve", "mcp_served_tools:registry"],
        cwd=str(SUPPORT),
    )
    return Client(
        params,
        mode=mode,
        elicitation_callback=elicit,
        sampling_callback=sample,
        read_timeout_seconds=WAIT,
    )


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_served_registry_answers_the_sdk_client_over_stdio(mode):
    asked: list[str] = []

    async def elicit(ctx, params):
        asked.append(params.message)
        action = "accept" if "/tmp/yes" in params.message else "decline"
        if "/tmp/later" in params.message:
            action = "cancel"
        return types.ElicitResult(action=action, content={} if action == "accept" else None)

    async def main():
        async with served_stdio(mode, elicit) as client:
            expected_era = "2026-07-28" if mode == "auto" else "2025-11-25"
            assert client.protocol_version == expected_era
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            # deny tools are not listed; the rest carry their hints and a title
            assert sorted(listed) == [
                "add",
                "boom",
                "haiku",
                "isolated_trip",
                "plan_trip",
                "reconnect",
                "remove_file",
                "shout",
                "stamp",
                "summary_or_text",
                "wait_for_cancel",
                "whoami",
            ]
            assert listed["remove_file"].annotations.destructive_hint is True
            assert listed["remove_file"].title == "Remove file"

            ok = await client.call_tool("add", {"a": 2, "b": 3})
            assert (ok.is_error, text_of(ok)) == (False, "5")

            invalid = await client.call_tool("add", {"a": "two"})
            assert invalid.is_error
            assert "Type mismatch: a: expected integer, got string" in text_of(invalid)

            failed = await client.call_tool("boom", {})
            assert failed.is_error and "boom on purpose" in text_of(failed)

            denied = await client.call_tool("format_disk", {})
            assert denied.is_error and "format_disk" in text_of(denied)

            with pytest.raises(MCPError) as unknown:
                await client.call_tool("no_such_tool", {})
            assert unknown.value.code == types.INVALID_PARAMS

            # ask: the client is asked through elicitation; only accept runs the tool
            yes = await client.call_tool("remove_file", {"path": "/tmp/yes"})
            assert (yes.is_error, text_of(yes)) == (False, "removed /tmp/yes")
            no = await client.call_tool("remove_file", {"path": "/tmp/no"})
            assert no.is_error and "rejected by the client" in text_of(no)
            later = await client.call_tool("remove_file", {"path": "/tmp/later"})
            assert later.is_error and "cancelled" in text_of(later)
            if mode == "auto":
                await forged_state_is_refused(client)

    run_async(main)
    assert len(asked) == 3
    assert "remove_file" in asked[0] and '"/tmp/yes"' in asked[0]


@pytest.mark.parametrize("mode", ["auto", pytest.param("legacy", marks=pytest.mark.slow)])
def test_client_without_elicitation_gets_an_approval_required_error(mode):
    """2025-11-25: an error result; 2026-07-28: the -32021 error naming the capability
    the approval needs (SEP-2575). The tool does not run."""

    async def main():
        async with served_stdio(mode) as client:
            if mode == "legacy":
                result = await client.call_tool("remove_file", {"path": "/tmp/x"})
                assert result.is_error
                assert "requires approval" in text_of(result)
                assert "did not run" in text_of(result)
                return
            with pytest.raises(MCPError) as raised:
                await client.call_tool("remove_file", {"path": "/tmp/x"})
            assert raised.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
            assert raised.value.error.data == {
                "requiredCapabilities": {"elicitation": {"form": {}}}
            }
            assert "requires approval" in raised.value.error.message

    run_async(main)


async def forged_state_is_refused(client: Client) -> None:
    """On 2026-07-28 the approval answer rides the retry; a state that does not
    match the call (other arguments) is not an approval: the call is refused."""
    first = await client.session.call_tool(
        "remove_file", {"path": "/tmp/yes"}, allow_input_required=True
    )
    assert isinstance(first, types.InputRequiredResult)
    key = next(iter(first.input_requests))
    accepted = {key: types.ElicitResult(action="accept", content={})}
    with pytest.raises(MCPError) as swapped:
        await client.session.call_tool(
            "remove_file",
            {"path": "/etc/passwd"},
            input_responses=accepted,
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert swapped.value.error.code == types.INVALID_PARAMS
    same = await client.session.call_tool(
        "remove_file",
        {"path": "/tmp/yes"},
        input_responses=accepted,
        request_state=first.request_state,
        allow_input_required=True,
    )
    assert text_of(same) == "removed /tmp/yes"


# -- served tools that ask the client: ctx.sample and ctx.elicit ------------------------


async def _poet(context, params):
    prompt = params.messages[0].content.text
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(text=f"poem: {prompt}"), model="test-model"
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_served_ctx_sample_and_elicit_go_to_the_sdk_client(mode):
    sampled: list[types.CreateMessageRequestParams] = []
    elicited: list[types.ElicitRequestFormParams] = []

    async def sample(context, params):
        sampled.append(params)
        return await _poet(context, params)

    async def elicit(context, params):
        elicited.append(params)
        return types.ElicitResult(action="accept", content={"nights": 3})

    async def main():
        async with served_stdio(mode, elicit, sample) as client:
            poem = await client.call_tool("haiku", {"topic": "rain"})
            assert (poem.is_error, text_of(poem)) == (False, "poem: A haiku about rain")
            trip = await client.call_tool("plan_trip", {})
            assert trip.structured_content == {
                "action": "accept",
                "trip": {"nights": 3, "city": "Paris"},  # the default filled in
                "plan": "poem: Plan 3 nights in Paris",
            }

    run_async(main)
    assert (sampled[0].system_prompt, sampled[0].max_tokens) == ("You are a poet", 40)
    [question] = elicited
    assert question.message == "Where to, and for how long?"
    assert question.requested_schema["properties"]["city"]["default"] == "Paris"  # SEP-1034


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_served_process_isolated_tool_asks_the_client_through_its_pipe(mode):
    async def elicit(context, params):
        return types.ElicitResult(action="accept", content={"nights": 2, "city": "Rome"})

    async def main():
        async with served_stdio(mode, elicit, _poet) as client:
            trip = await client.call_tool("isolated_trip", {})
            assert trip.structured_content == {
                "action": "accept",
                "trip": {"nights": 2, "city": "Rome"},
                "plan": "poem: Plan 2 nights in Rome",
            }

    run_async(main)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_served_ctx_sample_without_the_clients_capability_is_sampling_unavailable(mode):
    """The tool may carry on without the answer. A call that fails for want of it is,
    on 2025-11-25, an error result naming it; on 2026-07-28 the -32021 error naming
    the capability the client did not declare (SEP-2575)."""

    async def main():
        async with served_stdio(mode) as client:
            fallback = await client.call_tool("summary_or_text", {"text": "abcdefgh"})
            assert text_of(fallback) == "abcde"
            for name, args, missing, error in [
                ("haiku", {"topic": "rain"}, {"sampling": {}}, "SamplingUnavailable"),
                ("plan_trip", {}, {"elicitation": {"form": {}}}, "ElicitationUnavailable"),
            ]:
                if mode == "legacy":
                    failed = await client.call_tool(name, args)
                    assert failed.is_error and error in text_of(failed)
                    continue
                with pytest.raises(MCPError) as raised:
                    await client.call_tool(name, args)
                assert raised.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
                assert raised.value.error.data == {"requiredCapabilities": missing}

    run_async(main)


@pytest.mark.parametrize(("mode", "starts"), [("auto", 3), ("legacy", 1)])
def test_a_served_tool_that_asks_twice_runs_once_per_round(http_server, mode, starts):
    """2025-11-25: the tool waits for each answer. 2026-07-28: each question ends the
    round and the tool runs again with the answers so far (3 runs for 2 questions)."""
    mcp_served_tools.plan_starts.clear()

    async def elicit(context, params):
        return types.ElicitResult(action="accept", content={"nights": 1, "city": "Oslo"})

    async def main():
        async with Client(
            http_server.url,
            mode=mode,
            elicitation_callback=elicit,
            sampling_callback=_poet,
            read_timeout_seconds=WAIT,
        ) as client:
            trip = await client.call_tool("plan_trip", {})
            assert trip.structured_content["plan"] == "poem: Plan 1 nights in Oslo"

    run_async(main)
    assert len(mcp_served_tools.plan_starts) == starts


def test_a_forged_or_foreign_round_state_is_refused(http_server):
    """2026-07-28: the answers ride the round's requestState, signed and bound to the
    tool and its arguments; a state edited, not the server's, or from another call is
    refused with -32602 (SEP-2322), and the tool does not run on it."""

    async def never(context, params):
        raise AssertionError("the test answers by hand")

    async def main():
        async with Client(
            http_server.url,
            elicitation_callback=never,
            sampling_callback=never,
            read_timeout_seconds=WAIT,
        ) as client:
            first = await client.session.call_tool("plan_trip", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            [key] = first.input_requests
            answer = {key: types.ElicitResult(action="accept", content={"nights": 2})}
            second = await client.session.call_tool(
                "plan_trip",
                {},
                input_responses=answer,
                request_state=first.request_state,
                allow_input_required=True,
            )
            # answered: the tool got past the question and now asks the model
            assert isinstance(second, types.InputRequiredResult)
            assert second.input_requests.keys() != first.input_requests.keys()
            payload, _, mac = first.request_state.rpartition(".")
            for forged in (payload + "." + "0" * len(mac), "garbage", ""):
                with pytest.raises(MCPError) as refused:
                    await client.session.call_tool(
                        "plan_trip",
                        {},
                        input_responses=answer,
                        request_state=forged,
                        allow_input_required=True,
                    )
                assert refused.value.error.code == types.INVALID_PARAMS
                assert "integrity" in refused.value.error.message

    run_async(main)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_questions_pass_through_a_chain_of_servers_to_the_first_callers_context(http_server, mode):
    """Our client calls our served tool, which asks: the question reaches the calling
    context's sampler and elicitor."""
    people = []

    def elicitor(message, schema):
        people.append(message)
        return Elicitation("accept", {"nights": 4})

    def sampler(messages, *, max_tokens, system=None, temperature=None):
        return f"model says: {messages[0]['content']}"

    with MCPServer.http(http_server.url, mode=mode) as far:
        plan = next(t for t in far.tools() if t.name == "plan_trip")
        ctx = RunContext.new(sampler=sampler, elicitor=elicitor)
        result = Registry().execute_approved(plan, {}, ctx)
    assert result == Ok(
        {
            "action": "accept",
            "trip": {"nights": 4, "city": "Paris"},
            "plan": "model says: Plan 4 nights in Paris",
        }
    )
    assert people == ["Where to, and for how long?"]


# -- serving over Streamable HTTP -------------------------------------------------------


@pytest.fixture
def http_server():
    mcp_served_tools.started.clear()
    mcp_served_tools.cancelled.clear()
    running = serve_http_in_thread(mcp_served_tools.registry, host="127.0.0.1", port=0)
    try:
        yield running
    finally:
        running.close()


def test_served_registry_answers_over_streamable_http(http_server):
    assert http_server.url.startswith("http://127.0.0.1:")

    async def main():
        async with Client(http_server.url, read_timeout_seconds=WAIT) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "format_disk" not in names and "add" in names
            result = await client.call_tool("shout", {"text": "hi"})
            assert (result.is_error, text_of(result)) == (False, "HI")
            assert (await client.call_tool("add", {"a": 1})).structured_content == 1

    run_async(main)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_structured_results_for_values_written_with_the_fallback_encoder(http_server, mode):
    """A datetime, a Decimal, a set or bytes goes as the JSON its text holds. Before
    2026-07-28 the protocol allows only an object as structured content: a number or
    a list is text alone there."""
    expected = {"when": "2026-01-02T03:04:05", "price": "1.10", "tags": ["a"], "raw": "ab"}

    async def main():
        async with Client(http_server.url, mode=mode, read_timeout_seconds=WAIT) as client:
            whole = await client.call_tool("stamp", {"shape": "object"})
            assert whole.structured_content == expected
            listed = await client.call_tool("stamp", {"shape": "list"})
            assert text_of(listed) == '["2026-01-02T03:04:05", "1.10"]'
            assert listed.structured_content == (
                ["2026-01-02T03:04:05", "1.10"] if mode == "auto" else None
            )
            when = await client.call_tool("stamp", {"shape": "when"})
            assert when.structured_content == ("2026-01-02T03:04:05" if mode == "auto" else None)

    run_async(main)
    with MCPServer.http(http_server.url, mode=mode) as far:
        stamp = next(t for t in far.tools() if t.name == "stamp")
        assert Registry().execute_approved(stamp, {"shape": "object"}) == Ok(expected)
        if mode == "auto":  # no quotes: the value, not its JSON text
            assert Registry().execute_approved(stamp, {"shape": "price"}) == Ok("1.10")


def test_logging_set_level_is_accepted_and_the_capability_declared(http_server):
    async def main():
        async with Client(http_server.url, mode="legacy", read_timeout_seconds=WAIT) as client:
            assert client.session.server_capabilities.logging is not None
            with pytest.warns(match="deprecated as of 2026-07-28"):
                await client.session.set_logging_level("warning")

    run_async(main)


def test_a_served_tool_closes_its_sse_stream_and_the_client_still_gets_the_result(http_server):
    with MCPServer.http(http_server.url, mode="legacy") as far:
        reconnect = next(t for t in far.tools() if t.name == "reconnect")
        assert Registry().execute_approved(reconnect, {}) == Ok("closed=True")


def test_close_sse_stream_outside_streamable_http_is_false():
    from nous_tools.contrib.mcp import close_sse_stream

    assert close_sse_stream(RunContext.new()) is False

    async def main():
        async with served_stdio("legacy") as client:
            assert text_of(await client.call_tool("reconnect", {})) == "closed=False"

    run_async(main)


def test_ctx_factory_makes_each_served_calls_context():
    contexts = iter([RunContext.new({"user": "ada"})])

    def factory():
        return next(contexts)  # the second call: StopIteration, a broken factory

    async def main(url):
        async with Client(url, read_timeout_seconds=WAIT) as client:
            first = await client.call_tool("whoami", {})
            assert (first.is_error, text_of(first)) == (False, "ada")
            broken = await client.call_tool("whoami", {})
            assert broken.is_error and "could not make a context" in text_of(broken)

    with serve_http_in_thread(mcp_served_tools.registry, ctx_factory=factory) as running:
        run_async(main, running.url)


def test_client_cancellation_sets_the_served_attempts_ctx_cancelled(http_server):
    async def main():
        async with (
            Client(http_server.url, read_timeout_seconds=WAIT) as client,
            anyio.create_task_group() as group,
        ):
            group.start_soon(client.call_tool, "wait_for_cancel", {})
            started = await anyio.to_thread.run_sync(mcp_served_tools.started.wait, WAIT)
            assert started, "the served tool never started"
            group.cancel_scope.cancel()  # the SDK sends notifications/cancelled

    run_async(main)
    assert mcp_served_tools.cancelled.wait(WAIT), "the attempt never saw ctx.cancelled"


# -- calling an external server (tests/support/mcp_server.py) ------------------------------------


@pytest.fixture(scope="module")
def markers(tmp_path_factory):
    return tmp_path_factory.mktemp("mcp-markers")


@pytest.fixture(scope="module")
def remote(markers):
    server = MCPServer.stdio(sys.executable, [SERVER_SCRIPT, str(markers)])
    with server:
        yield server


def test_remote_tools_follow_the_trust_rule(remote):
    untrusted = {tool.name: tool for tool in remote.tools()}
    assert {tool.approval for tool in untrusted.values()} == {"ask"}
    assert {tool.retries for tool in untrusted.values()} == {0}

    trusted = {tool.name: tool for tool in remote.tools(trusted=True)}
    assert (trusted["read_note"].approval, trusted["read_note"].retries) == ("auto", 1)
    assert trusted["read_note"].read_only is True
    assert (trusted["delete_file"].approval, trusted["delete_file"].destructive) == ("ask", True)
    assert trusted["echo"].approval == "ask"  # not annotated
    assert trusted["echo"].retries == 0
    assert trusted["echo"].parameters["required"] == ["text"]
    assert remote.name == "nous-tools-test-server"


def test_remote_results_become_ok_and_err(remote):
    registry = Registry()
    tools = registry.register_mcp(remote, trusted=True, prefix="remote_")
    assert "remote_echo" in registry and len(tools) == len(registry)

    assert registry.execute("remote_read_note", {}) == Ok({"result": "the note"})
    assert registry.execute_approved("remote_echo", {"text": "hi"}) == Ok("hi")
    assert registry.execute_approved("remote_shape", {"side": 3}) == Ok({"side": 3, "area": 9})
    failed = registry.execute_approved("remote_fail", {})
    assert isinstance(failed, Err) and isinstance(failed.reason, ToolError)
    assert "nous-tools-test-server" in failed.reason.message
    assert "fail" in failed.reason.message
    # the remote schema is checked here, before any request
    invalid = registry.execute_approved("remote_shape", {"side": "three"})
    assert "Type mismatch: side: expected integer, got string" in invalid.reason.message


def test_destructive_remote_tool_is_held_for_approval(remote):
    registry = Registry()
    registry.register_mcp(remote, trusted=True)
    pending = registry.execute("delete_file", {"path": "/tmp/x"})
    assert isinstance(pending, NeedsApproval)
    ctx = RunContext.new(approval_handler=lambda request: "approve")
    assert registry.execute("delete_file", {"path": "/tmp/x"}, ctx) == Ok(
        {"result": "deleted /tmp/x"}
    )
    rejected = registry.execute(
        "delete_file", {"path": "/tmp/x"}, RunContext.new(approval_handler=lambda r: "reject")
    )
    assert "rejected by the approval handler" in rejected.reason.message


def test_hung_remote_tool_is_cut_off_at_its_deadline_and_cancelled(remote, markers):
    hang = next(tool for tool in remote.tools() if tool.name == "hang")
    hang = attrs.evolve(hang, timeout=1.0)
    starts = []

    def on_start(sender, **kwargs):
        starts.append(sender)

    signals.tool_execute_start.connect(on_start, sender=hang)
    try:
        began = time.monotonic()
        result = Registry().execute_approved(hang, {"seconds": 120})
        elapsed = time.monotonic() - began
    finally:
        signals.tool_execute_start.disconnect(on_start, sender=hang)
    assert isinstance(result, Err) and isinstance(result.reason, ToolTimeout)
    assert len(starts) == 1  # terminal: never retried
    assert elapsed < 60  # cut off long before the remote sleep ends
    marker = markers / "cancelled"
    for _ in range(int(WAIT / 0.05)):
        if marker.exists():
            break
        time.sleep(0.05)
    assert marker.exists(), "the remote tool never received the cancellation"


def test_server_elicitation_goes_to_the_context_approval_handler(remote):
    ask_name = next(tool for tool in remote.tools() if tool.name == "ask_name")
    seen: list[MCPElicitation] = []

    def handler(request):
        seen.append(request)
        return Edit({"name": "Ada"})

    registry = Registry()
    ctx = RunContext.new(approval_handler=handler)
    assert registry.execute_approved(ask_name, {}, ctx) == Ok({"result": "hello Ada"})
    [request] = seen
    assert isinstance(request, MCPElicitation)
    assert request.message == "What is your name?"
    assert request.name == "ask_name" and request.arguments == {"name": "anonymous"}

    approve = RunContext.new(approval_handler=lambda r: "approve")
    assert registry.execute_approved(ask_name, {}, approve) == Ok({"result": "hello anonymous"})
    reject = RunContext.new(approval_handler=lambda r: "reject")
    assert registry.execute_approved(ask_name, {}, reject) == Ok({"result": "no name (decline)"})
    # no handler: fail closed
    assert registry.execute_approved(ask_name, {}) == Ok({"result": "no name (decline)"})


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_server_sampling_goes_to_the_calling_contexts_sampler(markers, mode):
    asked = []

    def sampler(messages, *, max_tokens, system=None, temperature=None):
        asked.append((messages, max_tokens, system, temperature))
        return "drops on the roof"

    with MCPServer.stdio(sys.executable, [SERVER_SCRIPT, str(markers)], mode=mode) as server:
        haiku = next(t for t in server.tools() if t.name == "haiku")
        ctx = RunContext.new(sampler=sampler)
        result = Registry().execute_approved(haiku, {}, ctx)
        assert result == Ok({"result": "nous-tools-sampler: drops on the roof"})
        assert asked == [
            ([{"role": "user", "content": "A haiku about rain"}], 30, "You are a poet", 0.2)
        ]
        # no sampler: the server is refused and its tool fails
        refused = Registry().execute_approved(haiku, {})
        assert isinstance(refused, Err) and "haiku" in refused.reason.message


def test_server_elicitation_goes_to_the_calling_contexts_elicitor_before_the_handler(remote):
    """A served tool calling a remote tool passes the remote server's question on to
    its own asker: the context's elicitor wins over the approval handler."""
    ask_name = next(tool for tool in remote.tools() if tool.name == "ask_name")
    questions = []

    def elicitor(message, schema):
        questions.append((message, schema["properties"]["name"]["default"]))
        return Elicitation("accept", {"name": "Grace"})

    ctx = RunContext.new(elicitor=elicitor, approval_handler=lambda request: "reject")
    assert Registry().execute_approved(ask_name, {}, ctx) == Ok({"result": "hello Grace"})
    assert questions == [("What is your name?", "anonymous")]
    bad = RunContext.new(elicitor=lambda m, s: Elicitation("accept", {"name": 7}))
    assert Registry().execute_approved(ask_name, {}, bad) == Ok({"result": "no name (decline)"})


def test_legacy_protocol_elicitation_goes_to_the_waiting_calls_handler(markers):
    with MCPServer.stdio(sys.executable, [SERVER_SCRIPT, str(markers)], mode="legacy") as legacy:
        tool = next(t for t in legacy.tools() if t.name == "ask_name_legacy")
        ctx = RunContext.new(approval_handler=lambda r: Edit({"name": "Grace"}))
        assert Registry().execute_approved(tool, {}, ctx) == Ok({"result": "hello Grace"})


def test_server_killed_mid_call_is_an_err_naming_it_and_the_next_call_reconnects(markers):
    with MCPServer.stdio(sys.executable, [SERVER_SCRIPT, str(markers)], name="doomed") as server:
        registry = Registry()
        registry.register_mcp(server, trusted=True)
        first = registry.execute_approved("pid", {})
        died = registry.execute_approved("die", {})
        assert isinstance(died, Err)
        assert "MCP server 'doomed'" in died.reason.message
        assert "die" in died.reason.message
        second = registry.execute_approved("pid", {})
        assert isinstance(first, Ok) and isinstance(second, Ok)
        assert first.value != second.value  # a new process answered


def test_idempotent_remote_call_whose_server_died_mid_call_is_not_retried(markers):
    """The request was sent, then the server died: the outcome is unknown (it may have
    run), so even a trusted tool annotated idempotent is not sent again."""
    with MCPServer.stdio(sys.executable, [SERVER_SCRIPT, str(markers)], name="doomed") as server:
        tool = next(t for t in server.tools(trusted=True) if t.name == "die_idempotent")
        assert tool.retries == 1  # a trusted idempotent tool keeps its retry otherwise
        result = execute(tool, {})
    assert isinstance(result, Err) and isinstance(result.reason, OutcomeUnknown)
    assert "outcome is unknown" in result.reason.message
    assert "MCP server 'doomed'" in result.reason.message
    assert (markers / "die_idempotent").read_text().count("called") == 1


# -- register_mcp never replaces a tool silently ------------------------------------------


def test_register_mcp_name_collision_is_an_error_naming_both_tools(remote):
    registry = Registry()

    @registry.register
    @Tool.from_function
    def echo(text: str) -> str:
        """A local tool that happens to share the remote tool's name."""
        return text

    local = registry.register(attrs.evolve(echo, approval="ask"))
    with pytest.raises(ValueError) as raised:
        registry.register_mcp(remote, trusted=True)
    message = str(raised.value)
    assert "'echo'" in message and "nous-tools-test-server" in message
    assert "test_mcp" in message  # the local tool's module
    assert "replace=True" in message and "prefix" in message
    # nothing was registered: the local tool is still the one called
    assert registry.lookup("echo") is local
    assert registry.names() == ["echo"]

    registry.register_mcp(remote, trusted=True, replace=True)
    assert registry.lookup("echo") is not local
    assert registry.lookup("echo").module == "mcp:nous-tools-test-server"


def test_register_mcp_twice_collides_with_its_own_tools_unless_replace(remote):
    registry = Registry()
    registry.register_mcp(remote, prefix="r_")
    with pytest.raises(ValueError, match="'r_echo'"):
        registry.register_mcp(remote, prefix="r_")
    assert len(registry.register_mcp(remote, prefix="r_", replace=True)) == len(registry)


def test_plain_register_still_replaces_a_tool_of_the_same_name():
    registry = Registry()
    first = registry.register(Tool.from_function(lambda: 1, name="same"))
    second = registry.register(Tool.from_function(lambda: 2, name="same"))
    assert registry.lookup("same") is second is not first


# -- elicitation answers are checked by exact type and against the schema ----------------


class _AlwaysApprove(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class _EqualToEverything:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


class _SneakyEdit(Edit):
    pass


@pytest.mark.parametrize(
    "answer",
    [
        _AlwaysApprove("reject"),
        _EqualToEverything(),
        _SneakyEdit({"name": "Mallory"}),
        Edit({"name": 5}),  # not a string: not what the server asked for
        Edit({"name": "Ada", "password": "x"}),  # a field the schema does not have
        Edit(["not", "an", "object"]),
    ],
    ids=[
        "str-subclass",
        "equal-to-everything",
        "edit-subclass",
        "wrong-type",
        "extra-field",
        "not-object",
    ],
)
def test_elicitation_answer_of_the_wrong_type_or_shape_declines(remote, answer):
    ask_name = next(tool for tool in remote.tools() if tool.name == "ask_name")
    ctx = RunContext.new(approval_handler=lambda request: answer)
    result = Registry().execute_approved(ask_name, {}, ctx)
    assert result == Ok({"result": "no name (decline)"})


def test_elicitation_edit_missing_a_field_gets_the_schema_default(remote):
    ask_name = next(tool for tool in remote.tools() if tool.name == "ask_name")
    ctx = RunContext.new(approval_handler=lambda request: Edit({}))
    assert Registry().execute_approved(ask_name, {}, ctx) == Ok({"result": "hello anonymous"})


@pytest.mark.slow
def test_closed_server_gives_err_not_a_new_process(markers):
    server = MCPServer.stdio(sys.executable, [SERVER_SCRIPT, str(markers)], name="short-lived")
    echo = next(tool for tool in server.tools() if tool.name == "echo")
    server.close()
    result = Registry().execute_approved(echo, {"text": "hi"})
    assert isinstance(result, Err) and "'short-lived' is closed" in result.reason.message


def test_unreachable_server_is_an_err_naming_it():
    server = MCPServer.stdio(sys.executable, ["-c", "raise SystemExit(4)"], name="broken")
    with pytest.raises(ConnectionError, match="'broken' could not be reached"):
        server.tools()
    server.close()


def test_http_client_talks_to_a_served_registry(http_server):
    """Both directions at once: our synchronous client calls our server."""
    with MCPServer.http(http_server.url) as server:
        registry = Registry()
        registry.register_mcp(server, trusted=True, prefix="far_")
        assert registry.execute("far_add", {"a": 40, "b": 2}) == Ok(42)
        assert registry.execute_approved("far_shout", {"text": "hey"}) == Ok("HEY")
        pending = registry.execute("far_remove_file", {"path": "/tmp/z"})
        assert isinstance(pending, NeedsApproval)
        # the served side asks back (elicitation); the handler answers for the person
        asked = threading.Event()

        def handler(request):
            if isinstance(request, MCPElicitation):
                asked.set()
            return "approve"

        ctx = RunContext.new(approval_handler=handler)
        assert registry.execute("far_remove_file", {"path": "/tmp/z"}, ctx) == Ok("removed /tmp/z")
        assert asked.is_set()


# -- the command line -------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve_process(*args: str, env: dict[str, str] | None = None):
    """``nous-tools serve mcp_served_tools:registry --http PORT ARGS...`` as a
    subprocess; yields (process, port) once the port accepts connections (or the
    process ended). Its stderr is ``process.err`` once the block is left."""
    import os
    import socket
    import subprocess

    port = _free_port()
    command = [sys.executable, "-m", "nous_tools", "serve", "mcp_served_tools:registry"]
    process = subprocess.Popen(
        [*command, "--http", str(port), *args],
        cwd=SUPPORT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + WAIT
        while True:
            if process.poll() is not None:
                break
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        yield process, port
    finally:
        if process.poll() is None:
            process.terminate()
        _, process.err = process.communicate(timeout=WAIT)


def _initialize(port: int, headers: dict[str, str]) -> int:
    import httpx2

    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "security-test", "version": "1"},
        },
    }
    response = httpx2.post(
        f"http://127.0.0.1:{port}/mcp",
        json=body,
        headers={"Accept": "application/json, text/event-stream", **headers},
        timeout=WAIT,
    )
    return response.status_code


TOKEN = "correct-horse-battery-staple-42"


def test_serve_on_a_non_loopback_host_refuses_to_start_without_a_token_and_hosts():
    with serve_process("--host", "0.0.0.0") as (process, _):
        assert process.wait(WAIT) == 2
    err = process.err
    assert "--auth-token" in err and "--allowed-hosts" in err and "--insecure" in err


def test_serve_security_needs_both_the_token_and_the_hosts_and_a_long_token():
    from nous_tools.contrib.mcp._http import security_for

    def check(host, **options):
        defaults = {"auth_token": None, "allowed_hosts": None, "allowed_origins": None}
        return security_for(host, **{**defaults, "insecure": False, **options})

    with pytest.raises(ValueError, match="--allowed-hosts") as missing:
        check("0.0.0.0", auth_token=TOKEN)
    assert "--auth-token" not in str(missing.value)
    with pytest.raises(ValueError, match="--auth-token"):
        check("192.168.1.5", allowed_hosts=["mcp.lan"])
    with pytest.raises(ValueError, match="too short"):
        check("0.0.0.0", auth_token="short", allowed_hosts=["mcp.lan"])
    protected = check("0.0.0.0", auth_token=TOKEN, allowed_hosts=["mcp.lan", "[::1]:9"])
    assert protected.enable_dns_rebinding_protection
    assert protected.allowed_hosts == ["mcp.lan", "mcp.lan:*", "[::1]:9"]
    for loopback in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert check(loopback).enable_dns_rebinding_protection
    assert not check("0.0.0.0", insecure=True).enable_dns_rebinding_protection


def test_serve_on_a_non_loopback_host_requires_the_bearer_token_and_an_allowed_host():
    args = ("--host", "0.0.0.0", "--allowed-hosts", "127.0.0.1")
    with serve_process(*args, env={"NOUS_TOOLS_SERVE_TOKEN": TOKEN}) as (process, port):
        assert process.poll() is None
        assert _initialize(port, {}) == 401
        assert _initialize(port, {"Authorization": "Bearer wrong-token-of-some-length"}) == 401
        assert _initialize(port, {"Authorization": f"Bearer {TOKEN}x"}) == 401
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert _initialize(port, {**good, "Host": "evil.example.com"}) == 421
        assert _initialize(port, {**good, "Origin": "http://evil.example.com"}) == 403
        assert _initialize(port, good) == 200
        url = f"http://127.0.0.1:{port}/mcp"
        with MCPServer.http(url, headers=good) as far:
            assert Registry().execute_approved(
                next(t for t in far.tools() if t.name == "add"), {"a": 1, "b": 2}
            ) == Ok(3)
        wrong = {"Authorization": "Bearer wrong-token-of-some-length"}
        refusal = pytest.raises(ConnectionError, match=r"refused the token \(HTTP 401\)")
        with refusal, MCPServer.http(url, headers=wrong) as refused:
            refused.tools()
    banner = process.err
    assert "bearer token required" in banner and TOKEN not in banner
    # what clients see: the deny tool is not listed, nor counted
    listed = sum(1 for t in mcp_served_tools.registry.all() if t.approval != "deny")
    assert f"serving {listed} tool(s) (1 'deny' tool(s) not listed)" in banner


def test_serve_insecure_starts_unprotected_with_a_warning():
    with serve_process("--host", "0.0.0.0", "--insecure") as (process, port):
        assert process.poll() is None
        assert _initialize(port, {}) == 200
    err = process.err
    assert "warning: --insecure" in err and "anyone who can reach this port" in err


def test_serve_command_resolves_module_registry_and_tool_targets(monkeypatch):
    from nous_tools.cli import _serve as cli

    monkeypatch.chdir(SUPPORT)
    assert cli._serve_registry("mcp_served_tools:registry") is mcp_served_tools.registry
    assert cli._serve_registry("mcp_served_tools:add").names() == ["add"]
    module_tools = cli._serve_registry("mcp_served_tools").names()
    assert module_tools == mcp_served_tools.registry.names()


def test_serve_command_usage_errors_exit_2(monkeypatch, capsys):
    from nous_tools.cli import _main as cli

    monkeypatch.chdir(SUPPORT)
    assert cli.main(["serve", "mcp_served_tools:nothing"]) == 2
    assert "has no attribute 'nothing'" in capsys.readouterr().err
    assert cli.main(["serve", "mcp_served_tools:WAIT_NOT_THERE.x"]) == 2
    assert cli.main(["serve", "json"]) == 2  # a module without tools
    assert "has no tools to serve" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad_port:
        cli.main(["serve", "mcp_served_tools", "--http", "70000"])
    assert bad_port.value.code == 2


def test_serve_command_without_the_extra_says_how_to_install_it(monkeypatch, capsys):
    import nous_tools.contrib
    from nous_tools.cli import _main as cli

    # as if the extra were not installed: the import of the submodule fails
    monkeypatch.setitem(sys.modules, "nous_tools.contrib.mcp", None)
    monkeypatch.delattr(nous_tools.contrib, "mcp")
    assert cli.main(["serve", "mcp_served_tools:registry"]) == 2
    assert "pip install 'nous-tools[mcp]'" in capsys.readouterr().err


def test_core_package_and_cli_do_not_import_mcp():
    import subprocess

    code = (
        "import sys, nous_tools, nous_tools.cli; "
        "loaded = [m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'nous_tools.contrib'))]; "
        "print(loaded)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
