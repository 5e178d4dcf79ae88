"""Nothing half-done is stored (API.md §6): outside the loop the question and the answer are one
write, made only once the answer is complete; inside the loop each round's tool-call message is
written together with its tool responses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    ChatClient,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ModelError,
    ToolCall,
    UserMessage,
)
from advisorchain.messages import Message
from advisorchain.testing import ScriptedChatModel
from tests.reliability.memory_support import INSIDE, OUTSIDE, agent_client, expected_turn, question


class CountingMemory(MessageWindowChatMemory):
    """A window memory that records every add as one batch."""

    def __init__(self) -> None:
        super().__init__(max_messages=1000)
        self.batches: list[list[Message]] = []

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        self.batches.append(list(messages) if isinstance(messages, Sequence) else [messages])
        super().add(conversation_id, messages)


def test_outside_the_loop_the_question_and_the_answer_are_one_write() -> None:
    memory = CountingMemory()

    agent_client(memory, "outside").prompt(question("1", 2)).call().content()

    assert memory.batches == [expected_turn("1", 2, "outside")]


def test_outside_the_loop_a_failed_model_call_stores_not_even_the_question() -> None:
    memory = CountingMemory()
    client = ChatClient(
        ScriptedChatModel([ModelError("stream ended early")]), [MessageChatMemoryAdvisor(memory)]
    )

    with pytest.raises(ModelError):
        client.prompt("Hello?").call().content()

    assert memory.get("default") == []


def test_outside_the_loop_a_failure_in_the_second_round_stores_nothing() -> None:
    memory = CountingMemory()
    ask = AssistantMessage(None, [ToolCall("x-0", "lookup", '{"key": "k"}')])
    client = agent_client(memory, "outside", ScriptedChatModel([ask, ModelError("truncated")]))

    with pytest.raises(ModelError):
        client.prompt("Look it up").call().content()

    assert memory.get("default") == []


def test_inside_the_loop_each_tool_call_message_is_written_with_its_tool_responses() -> None:
    memory = CountingMemory()

    agent_client(memory, "inside").prompt(question("1", 3)).call().content()

    turn = expected_turn("1", 3, "inside")
    assert memory.batches == [turn[0:3], turn[3:5], turn[5:7], turn[7:8]]


def test_inside_the_loop_a_failure_keeps_the_whole_rounds_before_it_and_nothing_of_its_own() -> None:
    memory = CountingMemory()
    ask = [AssistantMessage(None, [ToolCall(f"x-{i}", "lookup", f'{{"key": "x-{i}"}}')]) for i in range(2)]
    client = agent_client(memory, "inside", ScriptedChatModel([ask[0], ask[1], ModelError("truncated")]))

    with pytest.raises(ModelError):
        client.prompt("Look twice").call().content()

    stored = memory.get("default")
    assert [type(m).__name__ for m in stored] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "AssistantMessage",
        "ToolResponseMessage",
    ]
    assert [m.tool_calls[0].id for m in stored if isinstance(m, AssistantMessage)] == ["x-0", "x-1"]


@pytest.mark.parametrize("order", [OUTSIDE, INSIDE], ids=["outside", "inside"])
async def test_a_stream_that_fails_mid_answer_stores_nothing_of_that_turn(order: int) -> None:
    memory = CountingMemory()

    async def broken(prompt: Any) -> Any:
        yield (await ScriptedChatModel(["The answer is"]).call(prompt))
        raise ModelError("the stream ended before the provider said it was complete")

    from advisorchain.testing import FunctionChatModel

    model = FunctionChatModel(lambda p: "unused", stream_fn=broken)
    client = ChatClient(model, [MessageChatMemoryAdvisor(memory, order=order)])

    with pytest.raises(ModelError):
        [d async for d in client.prompt("What is it?").astream().content()]

    assert memory.get("default") == []


def test_the_conversation_goes_on_after_a_failed_turn() -> None:
    memory = CountingMemory()
    model = ScriptedChatModel([ModelError("down"), "Hi!"])
    client = ChatClient(model, [MessageChatMemoryAdvisor(memory)])

    with pytest.raises(ModelError):
        client.prompt("Hello?").call().content()
    assert client.prompt("Hello again?").call().content() == "Hi!"

    assert model.prompts[1].instructions == (UserMessage("Hello again?"),)
    assert memory.get("default") == [UserMessage("Hello again?"), AssistantMessage("Hi!")]


class NoAnswer:
    """An advisor that answers with no chat response at all."""

    name = "no answer"
    order = 0

    async def advise_call(self, request: Any, chain: Any) -> Any:
        from advisorchain import ChatClientResponse

        return ChatClientResponse(None, request.context)


def test_outside_the_loop_a_turn_without_an_answer_does_not_store_the_question_alone() -> None:
    memory = CountingMemory()
    client = ChatClient(ScriptedChatModel([]), [MessageChatMemoryAdvisor(memory), NoAnswer()])

    client.prompt("Hello?").call().chat_client_response()

    assert memory.batches == []
