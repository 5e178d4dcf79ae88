"""SelfRefineEvaluationAdvisor on the stream path: each attempt is held back, only the answer
returned reaches the caller, and its last chunk carries the evaluations and the summed usage."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import (
    AdvisorParams,
    ChatClient,
    ChatClientResponse,
    EvaluationFailedError,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ScriptedChatModel,
    SelfRefineEvaluationAdvisor,
    tool,
)
from advisorchain.memory import ChatMemory
from advisorchain.testing import stream_chunks
from tests.evaluation.eval_helpers import GOOD, QUESTION, Judge, answer, tool_round

LONG_BAD = "Well it is a large city in the north of France"
LONG_GOOD = "The capital of France is Paris"


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"{city}: sunny"


async def _chunks(client: ChatClient, **params: Any) -> list[ChatClientResponse]:
    spec = client.prompt(QUESTION)
    for key, value in params.items():
        spec.param(key, value)
    return [c async for c in spec.astream().chat_client_responses()]


def _text(chunks: list[ChatClientResponse]) -> str:
    return "".join(c.chat_response.text or "" for c in chunks if c.chat_response is not None)


async def test_only_the_accepted_answer_is_streamed() -> None:
    model = ScriptedChatModel([LONG_BAD, LONG_GOOD])
    chunks = await _chunks(
        ChatClient(model, default_advisors=[SelfRefineEvaluationAdvisor(Judge((LONG_GOOD,)))])
    )
    assert _text(chunks) == LONG_GOOD
    assert not any("north" in (c.chat_response.text or "") for c in chunks if c.chat_response is not None)
    assert len(chunks) == len(stream_chunks(answer(LONG_GOOD)))  # the model's own chunks, not one block
    assert len(model.prompts) == 2


async def test_the_last_chunk_carries_the_evaluations_and_the_summed_usage() -> None:
    model = ScriptedChatModel([answer(LONG_BAD, 10, 5), answer(LONG_GOOD, 12, 6)])
    chunks = await _chunks(
        ChatClient(model, default_advisors=[SelfRefineEvaluationAdvisor(Judge((LONG_GOOD,)))])
    )
    last = chunks[-1]
    assert [r.passed for r in last.context[AdvisorParams.EVALUATIONS]] == [False, True]
    assert last.chat_response is not None and last.chat_response.metadata.usage is not None
    usage = last.chat_response.metadata.usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (22, 11)
    assert all(AdvisorParams.EVALUATIONS not in c.context for c in chunks[:-1])


async def test_a_stream_that_passes_first_time_is_one_model_call() -> None:
    model, judge = ScriptedChatModel([GOOD]), Judge()
    chunks = await _chunks(ChatClient(model, default_advisors=[SelfRefineEvaluationAdvisor(judge)]))
    assert _text(chunks) == GOOD and len(model.prompts) == 1 and len(judge.requests) == 1


async def test_exhaustion_with_raise_streams_nothing() -> None:
    model = ScriptedChatModel([LONG_BAD, "still wrong"])
    advisor = SelfRefineEvaluationAdvisor(Judge(), max_attempts=2, on_failure="raise")
    received: list[ChatClientResponse] = []
    with pytest.raises(EvaluationFailedError) as caught:
        async for chunk in (
            ChatClient(model, default_advisors=[advisor]).prompt(QUESTION).astream().chat_client_responses()
        ):
            received.append(chunk)
    assert received == []
    assert caught.value.answer == "still wrong" and len(caught.value.results) == 2


async def test_exhaustion_with_return_streams_the_last_answer_only() -> None:
    model = ScriptedChatModel([LONG_BAD, "still wrong"])
    advisor = SelfRefineEvaluationAdvisor(Judge(), max_attempts=2)
    chunks = await _chunks(ChatClient(model, default_advisors=[advisor]))
    assert _text(chunks) == "still wrong"
    assert [r.passed for r in chunks[-1].context[AdvisorParams.EVALUATIONS]] == [False, False]


async def test_the_tool_loop_runs_in_every_attempt_and_a_rejected_preamble_never_shows() -> None:
    model = ScriptedChatModel(
        [tool_round("c1", text="Checking the weather first."), LONG_BAD, tool_round("c2"), LONG_GOOD]
    )
    client = ChatClient(
        model,
        default_advisors=[SelfRefineEvaluationAdvisor(Judge((LONG_GOOD,)))],
        default_tools=[get_weather],
    )
    chunks = await _chunks(client)
    assert _text(chunks) == LONG_GOOD
    assert len(model.prompts) == 4


async def test_memory_outside_stores_only_the_streamed_answer() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([LONG_BAD, LONG_GOOD])
    client = ChatClient(
        model,
        default_advisors=[MessageChatMemoryAdvisor(memory), SelfRefineEvaluationAdvisor(Judge((LONG_GOOD,)))],
    )
    chunks = await _chunks(client, **{ChatMemory.CONVERSATION_ID: "s"})
    assert _text(chunks) == LONG_GOOD
    assert [m.text for m in memory.get("s")] == [QUESTION, LONG_GOOD]  # type: ignore[union-attr]


async def test_an_evaluator_failure_on_the_stream_path_raises_before_any_chunk() -> None:
    def judge(request: Any) -> bool:
        raise RuntimeError("judge crashed")

    received: list[ChatClientResponse] = []
    client = ChatClient(ScriptedChatModel([GOOD]), default_advisors=[SelfRefineEvaluationAdvisor(judge)])
    with pytest.raises(RuntimeError, match="judge crashed"):
        async for chunk in client.prompt(QUESTION).astream().chat_client_responses():
            received.append(chunk)
    assert received == []
