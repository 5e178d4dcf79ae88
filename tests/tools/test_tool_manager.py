"""ToolCallingManager: history shape, concurrency, return direct, limits, errors the model receives."""

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Prompt,
    SystemMessage,
    ToolCallLimitExceeded,
    ToolExecutionError,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain import observability as obs
from advisorchain.tools.api import ToolContext
from advisorchain.tools.function import tool
from advisorchain.tools.manager import ToolCallingManager, ToolExecutionResult
from tests.tools.toolloop_helpers import asks, get_time, get_weather, lookup, lookup_more, prompt_with


def response_of(message: AssistantMessage) -> ChatResponse:
    return ChatResponse.of(message, "tool_calls")


async def run(manager: ToolCallingManager, prompt: Prompt, message: AssistantMessage) -> ToolExecutionResult:
    return await manager.execute_tool_calls(prompt, response_of(message))


def texts(result: ToolExecutionResult) -> list[str]:
    last = result.conversation_history[-1]
    assert isinstance(last, ToolResponseMessage)
    return [r.response_data for r in last.responses]


@tool
def fail(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


@tool
async def stall() -> str:
    """Never finishes on its own."""
    await asyncio.Event().wait()
    return "never"


# -- the history -------------------------------------------------------------------------------------


async def test_history_is_the_prompt_then_the_assistant_message_then_one_tool_response_message() -> None:
    prompt = prompt_with(get_weather, get_time, messages=[SystemMessage("s"), UserMessage("u")])
    message = asks(("1", "get_weather", '{"city": "Oslo"}'), ("2", "get_time", '{"city": "Rome"}'))
    result = await run(ToolCallingManager(), prompt, message)
    assert result.conversation_history == (
        SystemMessage("s"),
        UserMessage("u"),
        message,
        ToolResponseMessage(
            [ToolResponse("1", "get_weather", "sunny in Oslo"), ToolResponse("2", "get_time", "noon in Rome")]
        ),
    )
    assert result.return_direct is False


async def test_the_first_generation_with_tool_calls_is_executed() -> None:
    message = asks(("1", "get_weather", '{"city": "Oslo"}'))
    chat = ChatResponse(
        [*ChatResponse.of(AssistantMessage("thinking")).generations, *response_of(message).generations]
    )
    result = await ToolCallingManager().execute_tool_calls(prompt_with(get_weather), chat)
    assert result.conversation_history[-2] == message


async def test_a_response_without_tool_calls_is_rejected() -> None:
    with pytest.raises(
        ValueError, match=r"the response has no tool calls to execute \(finish reason 'stop'\)"
    ):
        await ToolCallingManager().execute_tool_calls(
            prompt_with(get_weather), ChatResponse.of(AssistantMessage("hi"), "stop")
        )


async def test_the_tool_context_of_the_request_reaches_the_tool() -> None:
    @tool
    def whoami(context: ToolContext) -> str:
        return f"{context['user']} in {context.conversation_id}"

    prompt = Prompt(
        [UserMessage("u")],
        ChatOptions(tool_callbacks=[whoami], tool_context={"user": "ada", "conversation_id": "c1"}),
    )
    result = await run(ToolCallingManager(), prompt, asks(("1", "whoami", "{}")))
    assert texts(result) == ["ada in c1"]


def test_resolve_tool_definitions_lists_the_request_tools() -> None:
    options = ChatOptions(tool_callbacks=[get_weather, get_time])
    assert ToolCallingManager().resolve_tool_definitions(options) == [
        get_weather.definition,
        get_time.definition,
    ]
    assert ToolCallingManager().resolve_tool_definitions(None) == []


async def test_duplicate_tool_names_in_one_request_raise() -> None:
    @tool(name="get_weather")
    def other(city: str) -> str:
        return ""

    with pytest.raises(ValueError, match=r"two tools are named 'get_weather' in one request"):
        await run(ToolCallingManager(), prompt_with(get_weather, other), asks(("1", "get_weather", "{}")))


# -- concurrency ---------------------------------------------------------------------------------------


def _handshake() -> tuple[Any, Any]:
    """Two tools that each wait for the other to have started: sequential execution deadlocks."""
    ping_started, pong_started = asyncio.Event(), asyncio.Event()

    @tool
    async def ping() -> str:
        ping_started.set()
        await pong_started.wait()
        return "ping done"

    @tool
    async def pong() -> str:
        pong_started.set()
        await ping_started.wait()
        return "pong done"

    return ping, pong


async def test_tool_calls_of_one_response_run_concurrently() -> None:
    ping, pong = _handshake()
    message = asks(("1", "ping", "{}"), ("2", "pong", "{}"))
    result = await asyncio.wait_for(run(ToolCallingManager(), prompt_with(ping, pong), message), timeout=5)
    assert texts(result) == ["ping done", "pong done"]


async def test_responses_keep_the_call_order_whatever_the_completion_order() -> None:
    second_done = asyncio.Event()

    @tool
    async def slow() -> str:
        await second_done.wait()
        return "slow"

    @tool
    async def fast() -> str:
        second_done.set()
        return "fast"

    message = asks(("1", "slow", "{}"), ("2", "fast", "{}"))
    result = await asyncio.wait_for(run(ToolCallingManager(), prompt_with(slow, fast), message), timeout=5)
    assert [(r.id, r.response_data) for r in result.conversation_history[-1].responses] == [  # type: ignore[union-attr]
        ("1", "slow"),
        ("2", "fast"),
    ]


async def test_parallel_false_runs_the_calls_one_after_another() -> None:
    log: list[str] = []

    @tool
    async def step(n: int) -> str:
        log.append(f"start {n}")
        await asyncio.sleep(0)
        log.append(f"end {n}")
        return str(n)

    message = asks(("1", "step", '{"n": 1}'), ("2", "step", '{"n": 2}'))
    await run(ToolCallingManager(parallel=False), prompt_with(step), message)
    assert log == ["start 1", "end 1", "start 2", "end 2"]


async def test_a_failure_with_raise_on_error_cancels_the_other_running_calls() -> None:
    message = asks(("1", "stall", "{}"), ("2", "fail", '{"reason": "boom"}'))
    before = asyncio.all_tasks()
    with pytest.raises(ToolExecutionError):
        await run(ToolCallingManager(raise_on_error=True), prompt_with(stall, fail), message)
    assert asyncio.all_tasks() == before


# -- return direct -------------------------------------------------------------------------------------


async def test_return_direct_when_every_called_tool_has_it() -> None:
    message = asks(("1", "lookup", '{"key": "a"}'), ("2", "lookup_more", '{"key": "b"}'))
    result = await run(ToolCallingManager(), prompt_with(lookup, lookup_more), message)
    assert result.return_direct is True


async def test_no_return_direct_when_one_called_tool_lacks_it() -> None:
    message = asks(("1", "lookup", '{"key": "a"}'), ("2", "get_weather", '{"city": "Oslo"}'))
    result = await run(ToolCallingManager(), prompt_with(lookup, get_weather), message)
    assert result.return_direct is False


async def test_no_return_direct_when_a_return_direct_tool_got_bad_arguments() -> None:
    result = await run(ToolCallingManager(), prompt_with(lookup), asks(("1", "lookup", "{}")))
    assert result.return_direct is False


def test_build_generations_gives_one_generation_per_tool_response() -> None:
    result = ToolExecutionResult(
        (UserMessage("u"), ToolResponseMessage([ToolResponse("1", "a", "A"), ToolResponse("2", "b", "B")])),
        True,
    )
    generations = ToolExecutionResult.build_generations(result)
    assert [(g.output.text, g.finish_reason) for g in generations] == [
        ("A", "returnDirect"),
        ("B", "returnDirect"),
    ]
    assert generations[0].output.metadata == {"tool_id": "1", "tool_name": "a"}
    assert ToolExecutionResult.FINISH_REASON == "returnDirect"


# -- what the model is told when something is wrong ----------------------------------------------------


async def test_an_unknown_tool_gets_an_error_listing_the_available_tools() -> None:
    result = await run(
        ToolCallingManager(), prompt_with(get_weather, get_time), asks(("1", "get_wether", "{}"))
    )
    assert texts(result) == [
        "Error: there is no tool named 'get_wether'; available tools: 'get_weather', 'get_time'. "
        "Call one of them by its exact name"
    ]


async def test_only_the_request_tools_can_run() -> None:
    result = await run(ToolCallingManager(), prompt_with(), asks(("1", "get_weather", '{"city": "Oslo"}')))
    assert texts(result) == [
        "Error: there is no tool named 'get_weather': this request has no tools; answer without calling tools"
    ]


async def test_malformed_argument_json_gets_the_parser_message() -> None:
    result = await run(
        ToolCallingManager(), prompt_with(get_weather), asks(("1", "get_weather", '{"city": '))
    )
    assert texts(result) == [
        "Error: the arguments of tool 'get_weather' are not valid JSON "
        "(Expecting value at line 1 column 10); send one strict JSON object that matches the tool's input schema: keys and strings in double quotes, no trailing commas, no comments, nothing around it"
    ]


async def test_arguments_that_are_not_an_object_get_an_error() -> None:
    result = await run(ToolCallingManager(), prompt_with(get_weather), asks(("1", "get_weather", '["Oslo"]')))
    assert texts(result) == [
        "Error: the arguments of tool 'get_weather' must be a JSON object, got list ['Oslo']; "
        "send one JSON object that matches the tool's input schema"
    ]


async def test_schema_invalid_arguments_get_the_field_and_the_fix() -> None:
    result = await run(
        ToolCallingManager(), prompt_with(get_weather), asks(("1", "get_weather", '{"town": "Oslo"}'))
    )
    assert texts(result) == [
        "Error: invalid arguments for tool 'get_weather': city: Field required; "
        "town: Extra inputs are not permitted (got 'Oslo'); fix them and call 'get_weather' again"
    ]


async def test_an_exception_in_the_tool_gets_its_type_and_message() -> None:
    result = await run(
        ToolCallingManager(), prompt_with(fail), asks(("1", "fail", '{"reason": "disk full"}'))
    )
    assert texts(result) == [
        "Error: tool 'fail' failed with RuntimeError: disk full; check the arguments or answer without it"
    ]


@pytest.mark.parametrize("arguments", ["", "   ", "null"])
async def test_null_or_blank_arguments_mean_an_empty_object(arguments: str) -> None:
    @tool
    def ping() -> str:
        return "pong"

    result = await run(ToolCallingManager(), prompt_with(ping), asks(("1", "ping", arguments)))
    assert texts(result) == ["pong"]


async def test_a_tool_past_its_timeout_is_cancelled_and_reported() -> None:
    result = await run(ToolCallingManager(tool_timeout=0.01), prompt_with(stall), asks(("1", "stall", "{}")))
    assert texts(result) == [
        "Error: tool 'stall' did not finish within 0.01 seconds and was cancelled; "
        "try a smaller request or answer without it"
    ]


async def test_a_timeout_error_raised_by_the_tool_itself_is_a_tool_failure() -> None:
    @tool
    async def slow_service() -> str:
        raise TimeoutError("upstream")

    result = await run(
        ToolCallingManager(tool_timeout=5), prompt_with(slow_service), asks(("1", "slow_service", ""))
    )
    assert texts(result) == [
        "Error: tool 'slow_service' failed with TimeoutError: upstream; "
        "check the arguments or answer without it"
    ]


_BAD_CALLS = {
    "unknown tool": (("1", "nope", "{}"), LookupError),
    "malformed json": (("1", "fail", "{"), ValueError),
    "schema-invalid": (("1", "fail", '{"reason": 3}'), ValueError),
    "tool raised": (("1", "fail", '{"reason": "x"}'), RuntimeError),
}


@pytest.mark.parametrize("case", list(_BAD_CALLS))
async def test_raise_on_error_raises_tool_execution_error_with_name_id_and_cause(case: str) -> None:
    call, cause = _BAD_CALLS[case]
    with pytest.raises(ToolExecutionError) as info:
        await run(ToolCallingManager(raise_on_error=True), prompt_with(fail), asks(call))
    assert (info.value.tool_name, info.value.tool_call_id) == (call[1], "1")
    assert isinstance(info.value.__cause__, cause)


async def test_raise_on_error_reports_a_timeout_with_a_timeout_cause() -> None:
    with pytest.raises(ToolExecutionError, match="did not finish within") as info:
        await run(
            ToolCallingManager(raise_on_error=True, tool_timeout=0.01),
            prompt_with(stall),
            asks(("7", "stall", "")),
        )
    assert isinstance(info.value.__cause__, TimeoutError)


# -- per-turn limits -----------------------------------------------------------------------------------


def turn(*rounds: list[str], user: str = "u") -> list[Any]:
    """A history: a user message, then one assistant + tool-response pair per round of tool names."""
    history: list[Any] = [UserMessage(user)]
    for index, names in enumerate(rounds):
        calls = [(f"{index}-{i}", n, "{}") for i, n in enumerate(names)]
        history.append(asks(*calls))
        history.append(ToolResponseMessage([ToolResponse(c[0], c[1], "ok") for c in calls]))
    return history


async def test_the_per_tool_limit_counts_the_calls_of_this_turn() -> None:
    prompt = prompt_with(get_time, messages=turn(["get_time"], ["get_time"]))
    with pytest.raises(ToolCallLimitExceeded) as info:
        await run(
            ToolCallingManager(max_calls_per_tool=2), prompt, asks(("x", "get_time", '{"city": "Oslo"}'))
        )
    assert (info.value.tool_name, info.value.limit) == ("get_time", 2)
    assert "more than max_calls_per_tool=2 calls of 'get_time' in this turn" in str(info.value)


async def test_calls_before_the_last_user_message_do_not_count() -> None:
    history = [*turn(["get_time"], ["get_time"]), *turn(user="next question")]
    result = await run(
        ToolCallingManager(max_calls_per_tool=2),
        prompt_with(get_time, messages=history),
        asks(("x", "get_time", '{"city": "Oslo"}')),
    )
    assert texts(result) == ["noon in Oslo"]


async def test_the_calls_being_executed_count_toward_the_limit() -> None:
    message = asks(*[(str(i), "get_time", '{"city": "Oslo"}') for i in range(3)])
    with pytest.raises(ToolCallLimitExceeded) as info:
        await run(ToolCallingManager(max_calls_per_tool=2), prompt_with(get_time), message)
    assert info.value.partial_result is not None
    assert texts(info.value.partial_result) == [
        "noon in Oslo",
        "noon in Oslo",
        "Error: not executed: tool call limit reached: the model asked for more than "
        "max_calls_per_tool=2 calls of 'get_time' in this turn",
    ]


async def test_the_total_limit_has_no_tool_name() -> None:
    prompt = prompt_with(get_time, get_weather, messages=turn(["get_time", "get_weather"]))
    message = asks(("x", "get_weather", '{"city": "Oslo"}'))
    with pytest.raises(ToolCallLimitExceeded) as info:
        await run(ToolCallingManager(max_total_calls=2), prompt, message)
    assert (info.value.tool_name, info.value.limit) == (None, 2)
    assert "more than max_total_calls=2 tool calls in this turn" in str(info.value)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_calls_per_tool": 0}, {"max_total_calls": -1}, {"max_calls_per_tool": True}, {"tool_timeout": 0}],
)
def test_bad_manager_settings_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        ToolCallingManager(**kwargs)


# -- observability -------------------------------------------------------------------------------------


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(obs, "tracing_enabled", lambda: True)
    monkeypatch.setattr(obs, "_tracer", lambda: provider.get_tracer(obs.TRACER_NAME))
    yield exporter
    provider.shutdown()


async def test_each_tool_execution_is_an_execute_tool_span(spans: InMemorySpanExporter) -> None:
    message = asks(("1", "get_weather", '{"city": "Oslo"}'), ("2", "nope", "{}"))
    await run(ToolCallingManager(), prompt_with(get_weather), message)
    finished = {s.name: s for s in spans.get_finished_spans()}
    assert set(finished) == {"execute_tool get_weather", "execute_tool nope"}
    attributes = dict(finished["execute_tool get_weather"].attributes or {})
    assert attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "1",
    }
    assert (finished["execute_tool nope"].attributes or {})["error.type"] == "LookupError"


_NESTED_SCRIPT = """
from advisorchain import AssistantMessage, ChatClient, ToolCall, ToolResponseMessage, tool
from advisorchain.testing import FunctionChatModel

@tool
def leaf() -> str:
    \"\"\"The innermost tool.\"\"\"
    return "leaf"

def inner_answer(prompt):
    if isinstance(prompt.instructions[-1], ToolResponseMessage):
        return "inner done"
    return AssistantMessage(None, [ToolCall("l", "leaf", "{}")])

inner = ChatClient(FunctionChatModel(inner_answer), default_tools=[leaf])

@tool
def sub_agent() -> str:
    \"\"\"Asks another agent, blocking.\"\"\"
    return inner.prompt("go").call().content() or ""

def outer_answer(prompt):
    last = prompt.instructions[-1]
    if isinstance(last, ToolResponseMessage):
        return ",".join(r.response_data for r in last.responses)
    return AssistantMessage(None, [ToolCall(f"s{i}", "sub_agent", "{}") for i in range(8)])

print(ChatClient(FunctionChatModel(outer_answer), default_tools=[sub_agent]).prompt("go").call().content())
"""


def test_sync_tools_can_make_nested_blocking_calls_in_parallel() -> None:
    """Sub-agents: eight parallel sync tools, each making a blocking client call whose own sync tool
    needs a thread too. On the loop's small default pool this deadlocks; run in a subprocess so a
    regression fails by timeout instead of hanging the suite."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _NESTED_SCRIPT], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ",".join(["inner done"] * 8)
