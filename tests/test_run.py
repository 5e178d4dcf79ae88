"""The run: one object per client request, reachable from every chain of that request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatClientRequest,
    ChatClientResponse,
    ToolCall,
    UsageLimitExceeded,
    UsageLimits,
    UserMessage,
    tool,
)
from advisorchain.advisors.api import CallAdvisorChain, StreamAdvisorChain
from advisorchain.chain import Run, current_run
from advisorchain.chain.events import (
    RoundFinished,
    RoundStarted,
    RunEvent,
    ToolCallFinished,
    ToolCallStarted,
)
from advisorchain.model import ChatResponse, Prompt
from advisorchain.testing import ScriptedChatModel


class RunSpy:
    """An advisor that notes the run of every chain it is handed."""

    name = "RunSpy"
    order = 0

    def __init__(self) -> None:
        self.runs: list[Run] = []

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        self.runs.append(chain.run)
        return await chain.next_call(request)

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        self.runs.append(chain.run)
        async for chunk in chain.next_stream(request):
            yield chunk


def _calling(*answers: object) -> ScriptedChatModel:
    return ScriptedChatModel(list(answers))  # type: ignore[arg-type]


@tool
def lookup(city: str) -> str:
    """Looks a city up."""
    run = current_run()
    return f"{city}: run {run.id if run is not None else None}"


def test_every_request_gets_a_run_of_its_own_shared_by_every_round() -> None:
    spy = RunSpy()
    spy.order = -(2**31) + 10  # outside the tool loop: one hop per request
    inside = RunSpy()  # order 0: inside the tool loop, one hop per round
    model = _calling(
        AssistantMessage(None, [ToolCall("c1", "lookup", '{"city": "Oslo"}')]), "Done.", "Again."
    )
    client = ChatClient(model, default_advisors=[spy, inside], default_tools=[lookup])
    assert client.prompt("Oslo?").call().content() == "Done."
    assert len(spy.runs) == 1 and len(inside.runs) == 2
    assert inside.runs[0] is inside.runs[1] is spy.runs[0]
    assert spy.runs[0].meter.run_usage().requests == 2
    client.prompt("again").call().content()
    assert spy.runs[1] is not spy.runs[0] and spy.runs[1].id != spy.runs[0].id


def test_tools_find_the_run_they_execute_in() -> None:
    spy = RunSpy()
    model = _calling(AssistantMessage(None, [ToolCall("c1", "lookup", '{"city": "Oslo"}')]), "Done.")
    ChatClient(model, default_advisors=[spy], default_tools=[lookup]).prompt("Oslo?").call().content()
    tool_text = model.prompts[1].instructions[-1].responses[0].response_data  # type: ignore[attr-defined]
    assert tool_text == f"Oslo: run {spy.runs[0].id}"
    assert current_run() is None  # only while the tools run


def test_a_chain_built_without_a_client_has_an_unmetered_run() -> None:
    chain = CallAdvisorChain([], _calling("Hi."))
    request = ChatClientRequest(Prompt([UserMessage("hi")]))
    response = asyncio.run(chain.next_call(request))
    assert response.chat_response is not None and response.chat_response.text == "Hi."
    assert chain.run.meter.limits is None and chain.run.meter.run_usage().requests == 1


def test_slots_are_made_once_per_run() -> None:
    run = Run()
    first = run.slot("k", list)
    assert run.slot("k", list) is first and Run().slot("k", list) is not first
    assert run.get("missing") is None and run.put("k", [1]) == [1] and run.get("k") == [1]


@pytest.mark.parametrize("path", ["call", "stream"])
def test_a_listener_hears_rounds_and_tool_calls_in_order(path: str) -> None:
    events: list[RunEvent] = []
    call = ToolCall("c1", "lookup", '{"city": "Oslo"}')
    model = _calling(AssistantMessage(None, [call]), "Done.")
    spec = ChatClient(model, default_tools=[lookup]).prompt("Oslo?")._run_settings(listener=events.append)
    if path == "call":
        spec.call().content()
    else:
        list(spec.stream().content())
    kinds = [type(e) for e in events]
    assert kinds == [
        RoundStarted,
        RoundFinished,
        ToolCallStarted,
        ToolCallFinished,
        RoundStarted,
        RoundFinished,
    ]
    assert len({e.run_id for e in events}) == 1
    started, finished = events[2], events[3]
    assert isinstance(started, ToolCallStarted) and started.call == call
    assert isinstance(finished, ToolCallFinished) and finished.result.startswith("Oslo: run ")


def test_a_nested_run_counts_in_its_parent_and_its_limits_hold() -> None:
    parent_client = ChatClient(_calling(), usage_limits=UsageLimits(request_limit=2))
    parent = parent_client.prompt("x")._run(())
    nested = ChatClient(_calling("one", "two", "three"))
    assert nested.prompt("a")._run_settings(parent=parent).call().content() == "one"
    assert nested.prompt("b")._run_settings(parent=parent).call().content() == "two"
    assert parent.meter.run_usage().requests == 2
    with pytest.raises(UsageLimitExceeded) as caught:
        nested.prompt("c")._run_settings(parent=parent).call().content()
    assert caught.value.limit_name == "request_limit"


def test_a_call_sent_and_never_answered_makes_the_cost_unknown() -> None:
    sent = asyncio.Event()

    class Hangs:
        model_name = "hangs"

        async def call(self, prompt: object) -> ChatResponse:
            sent.set()
            await asyncio.sleep(10)
            raise AssertionError

        def stream(self, prompt: object) -> AsyncIterator[ChatResponse]:
            raise NotImplementedError

    spy = RunSpy()

    async def main() -> None:
        task = asyncio.create_task(ChatClient(Hangs(), default_advisors=[spy]).prompt("hi").acall().content())
        await sent.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    run_usage = spy.runs[0].meter.run_usage()
    assert run_usage.requests == 1 and run_usage.usage.cost is None  # unknown, never 0
