"""StructuredOutputValidationAdvisor on the stream path: attempts are buffered, only a valid answer
(or a tool-call iteration) reaches the consumer."""

from __future__ import annotations

import pytest

from advisorchain.advisors.structured_output import StructuredOutputValidationAdvisor
from advisorchain.errors import StructuredOutputValidationError
from advisorchain.messages import AssistantMessage, UserMessage
from advisorchain.model import ChatClientMessageAggregator, ChatResponse, Usage
from advisorchain.testing import ScriptedChatModel, stream_chunks
from tests.structured_output.structured_output_helpers import (
    FEEDBACK,
    VALID_PERSON,
    Person,
    client,
    tool_call_message,
    with_usage,
)


def _advisor(max_repeat_attempts: int = 3) -> StructuredOutputValidationAdvisor:
    return StructuredOutputValidationAdvisor(output_type=Person, max_repeat_attempts=max_repeat_attempts)


async def test_valid_answer_is_emitted_as_the_chunks_the_model_streamed() -> None:
    model = ScriptedChatModel([VALID_PERSON])
    spec = client(model, default_advisors=[_advisor()]).prompt("q").astream()
    chunks = [c.chat_response async for c in spec.chat_client_responses()]
    expected = stream_chunks(ChatResponse.of(AssistantMessage(VALID_PERSON), "stop"))
    assert chunks == expected


async def test_invalid_attempts_never_reach_the_consumer() -> None:
    model = ScriptedChatModel(["not json at all", '{"name": "Ann"}', VALID_PERSON])
    spec = client(model, default_advisors=[_advisor()]).prompt("q").astream()
    deltas = [d async for d in spec.content()]
    assert "".join(deltas) == VALID_PERSON
    assert len(deltas) > 1
    assert len(model.prompts) == 3


async def test_stream_retry_prompt_carries_the_newest_errors() -> None:
    model = ScriptedChatModel(["sorry", '{"name": "Ann"}', VALID_PERSON])
    spec = client(model, default_advisors=[_advisor()]).prompt("q").astream()
    _ = [d async for d in spec.content()]
    texts = [p.instructions[-1] for p in model.prompts]
    assert texts[1] == UserMessage(
        "q\n" + FEEDBACK + "<root>: Invalid JSON: expected value at line 1 column 1"
    )
    assert texts[2] == UserMessage("q\n" + FEEDBACK + "age: Field required")


async def test_stream_exhaustion_raises_before_anything_is_emitted() -> None:
    model = ScriptedChatModel(["bad one", "bad two"])
    spec = client(model, default_advisors=[_advisor(max_repeat_attempts=1)]).prompt("q").astream()
    received: list[str] = []
    with pytest.raises(StructuredOutputValidationError) as info:
        async for delta in spec.content():
            received.append(delta)
    assert received == []
    assert info.value.text == "bad two"
    assert info.value.errors == "<root>: Invalid JSON: expected value at line 1 column 1"
    assert len(model.prompts) == 2


async def test_tool_call_stream_passes_through_unvalidated() -> None:
    model = ScriptedChatModel([tool_call_message()])
    spec = client(model, default_advisors=[_advisor()]).prompt("q").astream()
    chunks = [c async for c in spec.chat_client_responses()]
    aggregated = ChatClientMessageAggregator.aggregate_responses(chunks).chat_response
    assert aggregated is not None and aggregated.has_tool_calls()
    assert len(model.prompts) == 1


async def test_stream_usage_is_summed_over_attempts_on_the_last_chunk() -> None:
    model = ScriptedChatModel([with_usage("bad", 10, 1), with_usage(VALID_PERSON, 20, 2)])
    spec = client(model, default_advisors=[_advisor()]).prompt("q").astream()
    chunks = [c async for c in spec.chat_client_responses()]
    last = chunks[-1].chat_response
    assert last is not None and last.metadata.usage == Usage(30, 3)
    aggregated = ChatClientMessageAggregator.aggregate_responses(chunks).chat_response
    assert aggregated is not None and aggregated.metadata.usage == Usage(30, 3)


def test_sync_stream_emits_only_the_valid_answer() -> None:
    model = ScriptedChatModel(["bad", VALID_PERSON])
    deltas = list(client(model, default_advisors=[_advisor()]).prompt("q").stream().content())
    assert "".join(deltas) == VALID_PERSON
