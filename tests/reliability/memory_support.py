"""Shared by the memory/concurrency/cancellation reliability tests (which run on every repository of
``tests.support.memory_backends``): a scripted agent whose turns are recognisable in storage, and a
checker that a stored conversation is made of whole turns."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatMemory,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    Ordered,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.messages import Message
from advisorchain.model import Prompt
from advisorchain.testing import FunctionChatModel
from advisorchain.tools import tool

INSIDE = Ordered.HIGHEST_PRECEDENCE + 400  # after the ToolCallingAdvisor: memory inside the loop
OUTSIDE = MessageChatMemoryAdvisor.DEFAULT_ORDER
PLACES = {"inside": INSIDE, "outside": OUTSIDE}


@tool
async def lookup(key: str) -> str:
    """Look a key up (yields to the loop, so concurrent turns really overlap)."""
    await asyncio.sleep(0.001)
    return f"value of {key}"


_QUESTION = re.compile(r"q(\S+) rounds=(\d+)")


async def agent_reply(prompt: Prompt) -> AssistantMessage:
    """The scripted agent: a question ``q<tag> rounds=<n>`` gets n tool rounds, then ``a<tag>``.

    Round i calls ``lookup`` with id ``<tag>-<i>``; the newest tool response tells the round. It
    reads only the current turn of the prompt, so it answers the same way whatever history (or
    however many of this turn's rounds) memory sends.
    """
    await asyncio.sleep(0.001)
    messages = prompt.instructions
    start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    match = _QUESTION.fullmatch(messages[start].text)
    assert match is not None, f"unexpected question {messages[start].text!r}"
    tag, rounds = match.group(1), int(match.group(2))
    responses = [m for m in messages[start:] if isinstance(m, ToolResponseMessage)]
    done = int(responses[-1].responses[0].id.rsplit("-", 1)[1]) + 1 if responses else 0
    if done < rounds:
        return AssistantMessage(None, [ToolCall(f"{tag}-{done}", "lookup", f'{{"key": "{tag}-{done}"}}')])
    return AssistantMessage(f"a{tag}")


def agent_client(
    memory: ChatMemory,
    place: str,
    model: Any = None,
    *,
    advisors: Sequence[Any] = (),
    tools: Sequence[Any] = (lookup,),
) -> ChatClient:
    """A client running the scripted agent with ``memory`` inside or outside the tool loop."""
    advisor = MessageChatMemoryAdvisor(memory, order=PLACES[place])
    return ChatClient(
        model or FunctionChatModel(agent_reply), default_advisors=[advisor, *advisors], default_tools=tools
    )


def question(tag: str, rounds: int) -> str:
    return f"q{tag} rounds={rounds}"


def expected_turn(tag: str, rounds: int, place: str) -> list[Message]:
    """What one complete turn stores: inside the loop every round, outside the question and answer."""
    stored: list[Message] = [UserMessage(question(tag, rounds))]
    if place == "inside":
        for i in range(rounds):
            call = ToolCall(f"{tag}-{i}", "lookup", f'{{"key": "{tag}-{i}"}}')
            stored.append(AssistantMessage(None, [call]))
            stored.append(ToolResponseMessage([ToolResponse(f"{tag}-{i}", "lookup", f"value of {tag}-{i}")]))
    stored.append(AssistantMessage(f"a{tag}"))
    return stored


def turns_of(messages: Sequence[Message]) -> list[list[Message]]:
    """``messages`` cut before each UserMessage."""
    turns: list[list[Message]] = []
    for m in messages:
        if isinstance(m, UserMessage) or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return turns


def check_whole_turns(messages: Sequence[Message], place: str) -> list[str]:
    """The tags of the turns stored, in order; fails unless every stored turn is whole and each
    tool response follows its own call."""
    tags = []
    for turn in turns_of(messages):
        first = turn[0]
        assert isinstance(first, UserMessage), f"a turn starts with {first!r}"
        match = _QUESTION.fullmatch(first.text)
        assert match is not None
        tag, rounds = match.group(1), int(match.group(2))
        assert turn == expected_turn(tag, rounds, place), f"turn {tag} is not whole: {turn!r}"
        tags.append(tag)
    return tags


def window(repository: Any, max_messages: int = 10_000) -> MessageWindowChatMemory:
    return MessageWindowChatMemory(repository, max_messages=max_messages)
