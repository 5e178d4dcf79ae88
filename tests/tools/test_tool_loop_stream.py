"""ToolCallingAdvisor on the stream path: live text, hidden tool-call chunks, one final chunk for
return direct and limits, the shared hooks, and cancellation that leaves nothing running."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    BaseAdvisor,
    ChatClient,
    ChatClientResponse,
    ChatResponse,
    Generation,
    Prompt,
    ToolCall,
    Usage,
)
from advisorchain.advisors.tool_calling import ToolCallingAdvisor
from advisorchain.testing import FunctionChatModel, ScriptedChatModel
from advisorchain.tools.function import tool
from advisorchain.tools.manager import ToolCallingManager
from tests.tools.toolloop_helpers import (
    INSIDE,
    OUTSIDE,
    TIME,
    WEATHER,
    Observer,
    asks,
    collect,
    get_time,
    get_weather,
    lookup,
    request_of,
    stream_chain,
    with_usage,
)


def stream(model: Any, advisor: ToolCallingAdvisor, *others: Any, request: Any = None) -> Any:
    return stream_chain(model, advisor, *others).next_stream(request or request_of(get_weather, get_time))


def texts(chunks: list[ChatClientResponse]) -> list[str | None]:
    return [c.chat_response.text for c in chunks if c.chat_response is not None]


# -- what the caller receives --------------------------------------------------------------------------


async def test_the_caller_gets_the_text_of_every_round_and_never_a_tool_call_chunk() -> None:
    model = ScriptedChatModel([asks(WEATHER, text="Let me check."), "It is sunny."])
    chunks = await collect(stream(model, ToolCallingAdvisor()))
    assert "".join(t or "" for t in texts(chunks)) == "Let me check.It is sunny."
    assert not any(c.chat_response.has_tool_calls() for c in chunks)
    assert [c.chat_response.finish_reason for c in chunks].count("tool_calls") == 0


async def test_text_is_streamed_live_before_the_tools_run() -> None:
    model = ScriptedChatModel([asks(WEATHER, text="Let me check."), "sunny"])
    source = stream(model, ToolCallingAdvisor())
    first = await anext(source)
    assert first.chat_response.text == "Let"
    assert len(model.prompts) == 1
    await source.aclose()


async def test_only_the_final_answer_carries_a_finish_reason_with_the_summed_usage() -> None:
    model = ScriptedChatModel(
        [with_usage(asks(WEATHER), 10, 1), with_usage(AssistantMessage("sunny now"), 20, 2)]
    )
    chunks = await collect(stream(model, ToolCallingAdvisor()))
    ends = [c for c in chunks if c.chat_response.finish_reason is not None]
    assert len(ends) == 1
    assert ends[0] is chunks[-1]
    assert (ends[0].chat_response.finish_reason, ends[0].chat_response.metadata.usage) == (
        "stop",
        Usage(30, 3),
    )


async def test_a_final_chunk_with_text_and_finish_reason_keeps_its_text_once() -> None:
    def one_chunk(prompt: Prompt) -> AsyncIterator[ChatResponse]:
        async def chunks() -> AsyncIterator[ChatResponse]:
            yield ChatResponse.of(AssistantMessage("all at once"), "stop")

        return chunks()

    model = FunctionChatModel(lambda p: "unused", stream_fn=one_chunk)
    chunks = await collect(stream(model, ToolCallingAdvisor()))
    assert "".join(t or "" for t in texts(chunks)) == "all at once"
    assert chunks[-1].chat_response.finish_reason == "stop"


async def test_an_outer_advisor_sees_one_end_of_answer_per_request() -> None:
    ends: list[str | None] = []

    class Outer(BaseAdvisor):
        order = OUTSIDE

        def after(self, response: ChatClientResponse, chain: object) -> ChatClientResponse:
            ends.append(response.chat_response.finish_reason if response.chat_response else None)
            return response

    model = ScriptedChatModel([asks(WEATHER), asks(TIME), "done"])
    await collect(stream(model, ToolCallingAdvisor(), Outer()))
    assert ends == ["stop"]


async def test_advisors_inside_the_loop_see_every_raw_chunk_of_every_round() -> None:
    inside = Observer(INSIDE)
    model = ScriptedChatModel([asks(WEATHER, text="Let me check."), "sunny"])
    await collect(stream(model, ToolCallingAdvisor(), inside))
    assert len(inside.requests) == 2
    assert texts(inside.responses) == ["Let", " me", " check.", None, "sunny", None]
    assert inside.responses[3].chat_response.result.output.tool_calls == (ToolCall(*WEATHER),)


async def test_return_direct_is_one_final_chunk_with_the_tool_outputs() -> None:
    model = ScriptedChatModel([asks(("1", "lookup", '{"key": "a"}'), text="Looking.")])
    chunks = await collect(stream(model, ToolCallingAdvisor(), request=request_of(lookup)))
    assert texts(chunks) == ["Looking.", "value of a"]
    assert chunks[-1].chat_response.finish_reason == "returnDirect"
    assert len(model.prompts) == 1


async def test_a_limit_breach_is_one_final_chunk_naming_the_limit() -> None:
    model = ScriptedChatModel([asks(WEATHER), asks(("w2", "get_weather", '{"city": "Rome"}'))])
    chunks = await collect(stream(model, ToolCallingAdvisor(ToolCallingManager(max_calls_per_tool=1))))
    assert len(chunks) == 1
    assert chunks[0].chat_response.finish_reason == "toolCallLimitExceeded"
    assert "max_calls_per_tool=1" in (chunks[0].chat_response.text or "")


async def test_a_checker_that_says_no_streams_the_tool_calls_to_the_caller() -> None:
    model = ScriptedChatModel([asks(WEATHER)])
    chunks = await collect(
        stream(model, ToolCallingAdvisor(tool_execution_eligibility_checker=lambda r: False))
    )
    assert chunks[-1].chat_response.result.output.tool_calls == (ToolCall(*WEATHER),)


async def test_client_astream_content_joins_the_text_of_every_round() -> None:
    model = ScriptedChatModel([asks(WEATHER, text="Checking."), "Sunny in Oslo."])
    client = ChatClient(model)
    parts = [p async for p in client.prompt("weather?").tools(get_weather).astream().content()]
    assert "".join(parts) == "Checking.Sunny in Oslo."


# -- hooks -----------------------------------------------------------------------------------------------


async def test_do_after_call_gets_the_aggregated_round_and_drives_the_loop() -> None:
    seen: list[ChatResponse] = []

    class Stopping(ToolCallingAdvisor):
        async def do_after_call(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
            assert response.chat_response is not None
            seen.append(response.chat_response)
            return response.copy(chat_response=ChatResponse([Generation(AssistantMessage("stop"), "stop")]))

    model = ScriptedChatModel([asks(WEATHER, text="Let me check.")])
    await collect(stream(model, Stopping()))
    assert [(r.text, r.has_tool_calls()) for r in seen] == [("Let me check.", True)]
    assert len(model.prompts) == 1


# -- cancellation ----------------------------------------------------------------------------------------


class BlockingModel:
    """Streams one chunk per round, then either asks for ``tool`` or blocks until cancelled."""

    model_name = "blocking"

    def __init__(self, tool_calls: list[ToolCall]) -> None:
        self.tool_calls = tool_calls
        self.closed = 0
        self.calls = 0

    async def call(self, prompt: Prompt) -> ChatResponse:
        raise AssertionError("stream only")

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        self.calls += 1
        try:
            yield ChatResponse([Generation(AssistantMessage("working"))])
            if self.tool_calls:
                yield ChatResponse.of(AssistantMessage(None, self.tool_calls), "tool_calls")
            else:
                await asyncio.Event().wait()
        finally:
            self.closed += 1


async def test_closing_the_stream_closes_the_model_stream() -> None:
    model = BlockingModel([])
    source = stream(model, ToolCallingAdvisor())
    assert (await anext(source)).chat_response.text == "working"
    await source.aclose()
    assert model.closed == 1


async def test_cancelling_the_consumer_while_the_model_streams_leaves_no_task_running() -> None:
    model = BlockingModel([])
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in ChatClient(model).prompt("hi").astream().chat_client_responses():
            first.set()

    before = asyncio.all_tasks()
    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.closed == 1
    assert asyncio.all_tasks() == before


async def test_cancelling_the_consumer_while_tools_run_cancels_them_and_leaves_no_task_running() -> None:
    started: list[str] = []
    cancelled: list[str] = []
    both_started = asyncio.Event()

    @tool
    async def wait_forever(name: str) -> str:
        started.append(name)
        if len(started) == 2:
            both_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return name

    model = BlockingModel(
        [ToolCall("1", "wait_forever", '{"name": "a"}'), ToolCall("2", "wait_forever", '{"name": "b"}')]
    )
    source = stream(model, ToolCallingAdvisor(), request=request_of(wait_forever))
    before = asyncio.all_tasks()
    task = asyncio.create_task(collect(source))
    await asyncio.wait_for(both_started.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["a", "b"]
    assert asyncio.all_tasks() == before
    assert model.closed == 1
