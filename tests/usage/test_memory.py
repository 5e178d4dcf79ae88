"""Nothing is half-stored (§6, §17): a raised UsageLimitExceeded is a failed call — memory outside
the loop stores nothing of the turn, inside the loop completed rounds stay and a tool-call message
is never stored without its responses; ``on_exceeded="finish"`` is stored as a tool-call-limit
ending is."""

from __future__ import annotations

import pytest

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatMemory,
    Message,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ScriptedChatModel,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolResponseMessage,
    UsageLimitExceeded,
    UsageLimits,
)
from tests.usage.usage_support import PATHS, Path, asks, ran, run, says, weather

pytestmark = pytest.mark.parametrize("path", PATHS)


def _client(
    model: ScriptedChatModel, memory: MessageWindowChatMemory, limits: UsageLimits, *, inside: bool
) -> ChatClient:
    order = ToolCallingAdvisor.DEFAULT_ORDER + (100 if inside else -100)
    return ChatClient(
        model,
        default_tools=[weather],
        default_advisors=[MessageChatMemoryAdvisor(memory, order=order)],
        usage_limits=limits,
    )


def _kinds(messages: list[Message]) -> list[str]:
    return [
        "call"
        if isinstance(m, AssistantMessage) and m.tool_calls
        else type(m).__name__.removesuffix("Message")
        for m in messages
    ]


def _answered_calls(messages: list[Message]) -> bool:
    """Every stored tool-call message is followed by the responses to its calls."""
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage) and m.tool_calls:
            after = messages[i + 1] if i + 1 < len(messages) else None
            if not isinstance(after, ToolResponseMessage):
                return False
            if {r.id for r in after.responses} != {c.id for c in m.tool_calls}:
                return False
    return True


async def test_outside_the_loop_a_raised_limit_stores_nothing_of_the_turn(path: Path) -> None:
    memory = MessageWindowChatMemory()
    memory.add("c", [])
    model = ScriptedChatModel([asks("Oslo"), asks("Rome", round_id="b"), says("x")])
    client = _client(model, memory, UsageLimits(request_limit=2), inside=False)
    with pytest.raises(UsageLimitExceeded):
        await run(client.prompt("W?").param(ChatMemory.CONVERSATION_ID, "c"), path)
    assert memory.get("c") == []


async def test_inside_the_loop_completed_rounds_stay_and_no_call_goes_unanswered(path: Path) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([asks("Oslo"), asks("Rome", round_id="b"), says("x")])
    client = _client(model, memory, UsageLimits(request_limit=2), inside=True)
    with pytest.raises(UsageLimitExceeded):
        await run(client.prompt("W?").param(ChatMemory.CONVERSATION_ID, "c"), path)
    stored = memory.get("c")
    assert _kinds(stored) == ["User", "call", "ToolResponse", "call", "ToolResponse"]
    assert _answered_calls(stored)


async def test_inside_the_loop_a_round_refused_before_its_tools_is_not_stored(path: Path) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([asks("Oslo"), asks("Rome", "Paris", round_id="b"), says("x")])
    client = _client(model, memory, UsageLimits(tool_calls_limit=2), inside=True)
    with pytest.raises(UsageLimitExceeded) as caught:
        await run(client.prompt("W?").param(ChatMemory.CONVERSATION_ID, "c"), path)
    assert caught.value.when == "before_tool_calls"
    stored = memory.get("c")
    assert _kinds(stored) == ["User", "call", "ToolResponse"] and _answered_calls(stored)
    assert ran == ["Oslo"]


async def test_outside_the_loop_a_finish_ending_is_stored_as_the_answer(path: Path) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([asks("Oslo"), asks("Rome", round_id="b"), says("x")])
    client = _client(model, memory, UsageLimits(request_limit=2, on_exceeded="finish"), inside=False)
    outcome = await run(client.prompt("W?").param(ChatMemory.CONVERSATION_ID, "c"), path)
    stored = memory.get("c")
    assert [m.text for m in stored] == ["W?", outcome.text]
    assert "request_limit=2" in (outcome.text or "")


async def test_a_finish_ending_is_stored_as_a_tool_call_limit_ending_is(path: Path) -> None:
    """The same conversation ended by the manager's tool-call limit and by a usage limit leaves
    the same messages in memory (inside and outside the loop), the ending's text aside."""
    for inside in (False, True):
        stored: list[list[str]] = []
        for how in ("tool-call limit", "usage limit"):
            memory = MessageWindowChatMemory()
            model = ScriptedChatModel([asks("Oslo"), asks("Rome", round_id="b"), says("x")])
            advisors: list[object] = [
                MessageChatMemoryAdvisor(
                    memory, order=ToolCallingAdvisor.DEFAULT_ORDER + (100 if inside else -100)
                )
            ]
            if how == "tool-call limit":
                advisors.append(ToolCallingAdvisor(ToolCallingManager(max_total_calls=1)))
                client = ChatClient(model, default_tools=[weather], default_advisors=advisors)
            else:
                client = ChatClient(
                    model,
                    default_tools=[weather],
                    default_advisors=advisors,
                    usage_limits=UsageLimits(tool_calls_limit=1, on_exceeded="finish"),
                )
            await run(client.prompt("W?").param(ChatMemory.CONVERSATION_ID, "c"), path)
            stored.append(_kinds(memory.get("c")))
        assert stored[0] == stored[1], f"inside={inside}"
