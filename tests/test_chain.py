from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import (
    AssistantMessage,
    BaseAdvisor,
    CallAdvisorChain,
    ChatClientMessageAggregator,
    ChatClientRequest,
    ChatClientResponse,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    ModelError,
    Ordered,
    Prompt,
    ScriptedChatModel,
    StreamAdvisorChain,
    ToolCall,
    Usage,
    UserMessage,
)
from tests.support.advisors import Recorder


def _request(text: str = "hi", **context: Any) -> ChatClientRequest:
    return ChatClientRequest(Prompt([UserMessage(text)]), context)


def test_order_constants_match_spring() -> None:
    assert Ordered.HIGHEST_PRECEDENCE == -(2**31)
    assert Ordered.LOWEST_PRECEDENCE == 2**31 - 1


async def test_advisors_run_outside_in_and_the_model_last() -> None:
    log: list[str] = []
    model = ScriptedChatModel(["ok"])
    chain = CallAdvisorChain([Recorder("a", 1, log), Recorder("b", 2, log)], model)
    response = await chain.next_call(_request())
    assert log == ["before a", "before b", "after b", "after a"]
    assert response.chat_response is not None and response.chat_response.text == "ok"


async def test_next_call_twice_on_the_same_chain_runs_the_rest_twice() -> None:
    log: list[str] = []
    model = ScriptedChatModel(["one", "two"])
    chain = CallAdvisorChain([Recorder("a", 1, log)], model)
    first = await chain.next_call(_request())
    second = await chain.next_call(_request())
    assert [first.chat_response.text, second.chat_response.text] == ["one", "two"]  # type: ignore[union-attr]
    assert log == ["before a", "after a", "before a", "after a"]


def test_copy_after_is_the_suffix_after_the_advisor() -> None:
    log: list[str] = []
    a, b, c = Recorder("a", 1, log), Recorder("b", 2, log), Recorder("c", 3, log)
    chain = CallAdvisorChain([a, b, c], ScriptedChatModel([]))
    assert chain.copy(a).call_advisors == (b, c)
    assert chain.copy(c).call_advisors == ()
    assert chain.call_advisors == (a, b, c)


def test_copy_after_an_advisor_not_in_the_chain_is_a_value_error() -> None:
    chain = CallAdvisorChain([Recorder("a", 1, [])], ScriptedChatModel([]))
    with pytest.raises(ValueError, match="'stranger' is not an advisor of this chain"):
        chain.copy(Recorder("stranger", 1, []))
    stream_chain = StreamAdvisorChain([], ScriptedChatModel([]))
    with pytest.raises(ValueError):
        stream_chain.copy(Recorder("stranger", 1, []))


def test_copy_finds_the_advisor_by_identity_not_equality() -> None:
    class Same(BaseAdvisor):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    first, second = Same(), Same()
    chain = CallAdvisorChain([first, second], ScriptedChatModel([]))
    assert chain.copy(first).call_advisors == (second,)
    assert chain.copy(second).call_advisors == ()


@given(st.lists(st.integers(min_value=0, max_value=8), min_size=1, max_size=8), st.data())
def test_copy_after_any_advisor_is_exactly_the_suffix(orders: list[int], data: st.DataObject) -> None:
    advisors = [Recorder(f"a{i}", o, []) for i, o in enumerate(orders)]
    chain = CallAdvisorChain(advisors, ScriptedChatModel([]))
    i = data.draw(st.integers(min_value=0, max_value=len(advisors) - 1))
    assert list(chain.copy(advisors[i]).call_advisors) == advisors[i + 1 :]
    assert (
        list(StreamAdvisorChain(advisors, ScriptedChatModel([])).copy(advisors[i]).stream_advisors)
        == (advisors[i + 1 :])
    )


async def test_the_model_prompt_carries_format_instructions_from_the_context() -> None:
    model = ScriptedChatModel(["{}"])
    chain = CallAdvisorChain([], model)
    await chain.next_call(_request("Give JSON", **{"advisorchain.output_format": "FORMAT"}))
    assert model.prompts[0].instructions == (UserMessage("Give JSON\nFORMAT"),)


async def test_context_written_before_reaches_later_advisors_and_comes_back() -> None:
    seen: list[Any] = []

    class Writer(BaseAdvisor):
        order = 1

        def before(self, request: ChatClientRequest, chain: object) -> ChatClientRequest:
            return request.copy(context={**request.context, "trace": "t-1"})

    class Reader(BaseAdvisor):
        order = 2

        def before(self, request: ChatClientRequest, chain: object) -> ChatClientRequest:
            seen.append(request.context.get("trace"))
            return request

    response = await CallAdvisorChain([Writer(), Reader()], ScriptedChatModel(["x"])).next_call(_request())
    assert seen == ["t-1"]
    assert response.context["trace"] == "t-1"


async def test_a_model_that_returns_none_is_a_model_error_naming_it() -> None:
    class Broken:
        async def call(self, prompt: Prompt) -> Any:
            return None

        def stream(self, prompt: Prompt) -> Any:
            raise AssertionError

    with pytest.raises(ModelError, match=r"Broken.call\(\) returned None, not a ChatResponse"):
        await CallAdvisorChain([], Broken()).next_call(_request())  # type: ignore[arg-type]


async def test_stream_before_runs_once_and_after_only_on_chunks_that_end_an_answer() -> None:
    calls: list[str] = []

    class Marker(BaseAdvisor):
        def before(self, request: ChatClientRequest, chain: object) -> ChatClientRequest:
            calls.append("before")
            return request

        def after(self, response: ChatClientResponse, chain: object) -> ChatClientResponse:
            calls.append("after")
            return response.copy(context={"ended": True})

    chain = StreamAdvisorChain([Marker()], ScriptedChatModel(["one two three"]))
    chunks = [c async for c in chain.next_stream(_request())]
    assert calls == ["before", "after"]
    assert [c.chat_response.text for c in chunks] == ["one", " two", " three", None]  # type: ignore[union-attr]
    assert [dict(c.context) for c in chunks][-1] == {"ended": True}
    assert chunks[-1].chat_response.finish_reason == "stop"  # type: ignore[union-attr]


def test_aggregate_joins_text_collects_tool_calls_and_keeps_the_last_metadata() -> None:
    call = ToolCall("c1", "weather", '{"city":"Paris"}')
    chunks = [
        ChatResponse([Generation(AssistantMessage("Let me "))], ChatResponseMetadata(id="r1", model="m")),
        ChatResponse([Generation(AssistantMessage("check."))]),
        ChatResponse(
            [Generation(AssistantMessage(None, [call]), "tool_calls")],
            ChatResponseMetadata(usage=Usage(3, 4), finish_reason="tool_calls"),
        ),
    ]
    merged = ChatClientMessageAggregator.aggregate(chunks)
    assert merged.text == "Let me check."
    assert merged.result is not None and merged.result.output.tool_calls == (call,)
    assert merged.metadata == ChatResponseMetadata("r1", "m", Usage(3, 4), "tool_calls")
    assert merged.finish_reason == "tool_calls"


def test_aggregate_without_any_text_has_none_text() -> None:
    merged = ChatClientMessageAggregator().aggregate([ChatResponse([Generation(AssistantMessage(None))])])
    assert merged.text is None


def test_aggregate_responses_merges_contexts() -> None:
    chunks = [
        ChatClientResponse(ChatResponse([Generation(AssistantMessage("a"))]), {"x": 1}),
        ChatClientResponse(ChatResponse([Generation(AssistantMessage("b"), "stop")]), {"y": 2}),
    ]
    merged = ChatClientMessageAggregator.aggregate_responses(chunks)
    assert merged.chat_response is not None and merged.chat_response.text == "ab"
    assert merged.context == {"x": 1, "y": 2}


def test_usage_adds_up() -> None:
    assert Usage(1, 2) + Usage(3, 4) == Usage(4, 6)
    assert (Usage(1, 2) + None).total_tokens == 3
    assert Usage.sum([None, Usage(1, 1), Usage(2, 2)]) == Usage(3, 3)
    assert Usage.sum([None]) is None


def test_chat_response_accessors() -> None:
    empty = ChatResponse([])
    assert empty.result is None and empty.text is None and not empty.has_tool_calls()
    response = ChatResponse(
        [Generation(AssistantMessage("a")), Generation(AssistantMessage(None, [ToolCall("1", "f", "{}")]))]
    )
    assert response.text == "a"
    assert response.has_tool_calls()
