"""Memory inside the tool loop with a turn longer than the window (issue 37, API.md §6): the stored
conversation keeps the turn's question, drops older turns first and then the oldest whole rounds,
and never starts (after its system messages) with an assistant or tool message, which Anthropic
refuses ("first message must use the user role"). On every repository."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from advisorchain import (
    AssistantMessage,
    MessageWindowChatMemory,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.messages import Message
from advisorchain.testing import FunctionChatModel
from tests.reliability.memory_support import agent_client, agent_reply, question

ROUNDS = 12


def _anthropic_first_message_rule(messages: Sequence[Message]) -> None:
    """After the system messages, a conversation Anthropic accepts starts with a user message, and
    every tool response follows the assistant message that called it."""
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    assert rest, "nothing but system messages"
    assert isinstance(rest[0], UserMessage), f"starts with {type(rest[0]).__name__}: {messages!r}"
    called: set[str] = set()
    for m in rest:
        if isinstance(m, AssistantMessage):
            called = {c.id for c in m.tool_calls}
        elif isinstance(m, ToolResponseMessage):
            assert {r.id for r in m.responses} <= called, f"orphan tool response in {messages!r}"
            called = set()
        else:
            called = set()


def _call_ids(messages: Sequence[Message]) -> list[str]:
    return [m.tool_calls[0].id for m in messages if isinstance(m, AssistantMessage) and m.tool_calls]


@pytest.mark.parametrize("system", [False, True])
async def test_a_12_round_turn_in_the_default_window_keeps_its_question(backend: Any, system: bool) -> None:
    memory = MessageWindowChatMemory(backend.repository())
    model = FunctionChatModel(agent_reply)
    client = agent_client(memory, "inside", model)

    def prompt(text: str) -> Any:
        spec = client.prompt()
        return (spec.system("Be brief.") if system else spec).user(text)

    assert await prompt(question("0", 1)).acall().content() == "a0"  # an older turn, 4 messages
    assert await prompt(question("1", ROUNDS)).acall().content() == "a1"

    stored = await memory.aget("default")
    _anthropic_first_message_rule(stored)
    assert [m for m in stored if isinstance(m, UserMessage)] == [UserMessage(question("1", ROUNDS))]
    assert len(stored) == MessageWindowChatMemory.DEFAULT_MAX_MESSAGES
    # The older turn went first, then the oldest rounds: the question, the newest rounds, the answer.
    kept_rounds = (
        MessageWindowChatMemory.DEFAULT_MAX_MESSAGES - 2
    ) // 2  # system messages come with each prompt
    assert _call_ids(stored) == [f"1-{i}" for i in range(ROUNDS - kept_rounds, ROUNDS)]
    assert stored[-1] == AssistantMessage("a1")
    # A repository opened anew reads the same conversation.
    assert MessageWindowChatMemory(backend.repository()).get("default") == stored

    # Every prompt of the turn, and every prompt of the turns after it, starts right.
    assert await prompt(question("2", 3)).acall().content() == "a2"
    assert await prompt(question("3", 0)).acall().content() == "a3"
    for sent in model.prompts:
        _anthropic_first_message_rule(sent.instructions)
    _anthropic_first_message_rule(await memory.aget("default"))
    later = model.prompts[-1].instructions
    assert UserMessage(question("2", 3)) in later  # the turn before is still there
    assert later[-1] == UserMessage(question("3", 0))


async def test_a_turn_longer_than_a_tiny_window_keeps_the_question_and_the_newest_round(backend: Any) -> None:
    memory = MessageWindowChatMemory(backend.repository(), max_messages=2)
    model = FunctionChatModel(agent_reply)
    client = agent_client(memory, "inside", model)

    assert await client.prompt(question("1", ROUNDS)).acall().content() == "a1"

    assert await memory.aget("default") == [UserMessage(question("1", ROUNDS)), AssistantMessage("a1")]
    assert await client.prompt(question("2", 2)).acall().content() == "a2"
    for sent in model.prompts:
        _anthropic_first_message_rule(sent.instructions)


async def test_the_stream_path_stores_the_same_window(backend: Any) -> None:
    memory = MessageWindowChatMemory(backend.repository())
    client = agent_client(memory, "inside")

    chunks = [c async for c in client.prompt(question("1", ROUNDS)).astream().content()]

    assert "".join(chunks) == "a1"
    stored = await memory.aget("default")
    _anthropic_first_message_rule(stored)
    assert stored[0] == UserMessage(question("1", ROUNDS))
    assert _call_ids(stored) == [f"1-{i}" for i in range(ROUNDS - 9, ROUNDS)]
