"""Sync sub-agent tools never deadlock (issue 11, failure 4): many conversations at once, each
with a sync tool that makes a blocking call whose own request runs a sync tool, however deep —
from blocking calls and from a tool under ``acall()``."""

from __future__ import annotations

import asyncio
import threading

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatMemory,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ToolCall,
    ToolResponseMessage,
)
from advisorchain.model import Prompt
from advisorchain.testing import FunctionChatModel
from advisorchain.tools import tool

_BARRIER_TIMEOUT = 60


def _delegating_model(tool_name: str) -> FunctionChatModel:
    """Asks for ``tool_name`` once, then answers with what the tool returned."""

    def reply(prompt: Prompt) -> AssistantMessage:
        last = prompt.instructions[-1]
        if isinstance(last, ToolResponseMessage):
            return AssistantMessage(f"done: {last.responses[0].response_data}")
        return AssistantMessage(None, [ToolCall("c1", tool_name, '{"depth": 0}')])

    return FunctionChatModel(reply)


def _nested_agent(depth: int, leaf: threading.Barrier | None = None) -> ChatClient:
    """An agent whose sync tool calls an agent one level down; the deepest tool is a plain sync tool."""
    if depth == 0:

        @tool
        def leaf_tool(depth: int) -> str:
            """The innermost sync tool."""
            if leaf is not None:
                leaf.wait(_BARRIER_TIMEOUT)  # every conversation is inside its innermost tool at once
            return "leaf"

        return ChatClient(_delegating_model("leaf_tool"), default_tools=[leaf_tool])
    inner = _nested_agent(depth - 1, leaf)

    @tool
    def sub_agent(depth: int) -> str:
        """A sync tool that asks a sub-agent with a blocking call."""
        return inner.prompt("go deeper").call().content() or ""

    return ChatClient(_delegating_model("sub_agent"), default_tools=[sub_agent])


def test_forty_concurrent_blocking_sub_agents_each_running_a_sync_tool_finish() -> None:
    conversations = 40
    client = _nested_agent(1, threading.Barrier(conversations))
    results: list[str | None] = []

    def run() -> None:
        results.append(client.prompt("delegate").call().content())

    threads = [threading.Thread(target=run) for _ in range(conversations)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(_BARRIER_TIMEOUT + 30)

    assert results == ["done: done: leaf"] * conversations


async def test_sub_agents_three_deep_from_forty_async_conversations_finish() -> None:
    conversations = 40
    client = _nested_agent(3, threading.Barrier(conversations))

    answers = await asyncio.wait_for(
        asyncio.gather(*(client.prompt("delegate").acall().content() for _ in range(conversations))),
        _BARRIER_TIMEOUT + 30,
    )

    assert answers == ["done: done: done: done: leaf"] * conversations


async def test_a_blocking_sub_agent_on_the_same_conversation_does_not_wait_for_its_caller() -> None:
    memory = MessageWindowChatMemory()
    inner = ChatClient(_delegating_model("leaf"), default_advisors=[MessageChatMemoryAdvisor(memory)])

    @tool
    def leaf(depth: int) -> str:
        """A plain sync tool."""
        return "leaf"

    @tool
    def ask_same_conversation(depth: int) -> str:
        """Asks a sub-agent that remembers in the caller's own conversation."""
        spec = inner.prompt("inner question").tools(leaf).param(ChatMemory.CONVERSATION_ID, "c")
        return spec.call().content() or ""

    outer = ChatClient(
        _delegating_model("ask_same_conversation"),
        default_advisors=[MessageChatMemoryAdvisor(memory)],
        default_tools=[ask_same_conversation],
    )

    answer = await asyncio.wait_for(
        outer.prompt("outer question").param(ChatMemory.CONVERSATION_ID, "c").acall().content(), 30
    )

    assert answer == "done: done: leaf"


def test_sequential_sync_tools_reuse_idle_threads_instead_of_starting_new_ones() -> None:
    @tool
    def noop(depth: int) -> str:
        """Does nothing."""
        return "ok"

    client = ChatClient(_delegating_model("noop"), default_tools=[noop])
    client.prompt("go").call().content()
    before = threading.active_count()
    for _ in range(20):
        client.prompt("go").call().content()

    assert threading.active_count() <= before
