from __future__ import annotations

import pytest

from advisorchain import (
    AssistantMessage,
    CallAdvisorChain,
    ChatClientRequest,
    ChatMemory,
    Prompt,
    ScriptedChatModel,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.advisors.todo import TodoReminderAdvisor

REMINDER = "<reminder>Update your todos.</reminder>"


def _round(*names: str, conversation: str | None = None) -> ChatClientRequest:
    responses = [ToolResponse(f"id-{n}", n, f"result of {n}") for n in names]
    context = {ChatMemory.CONVERSATION_ID: conversation} if conversation else {}
    return ChatClientRequest(
        Prompt([UserMessage("go"), AssistantMessage(None), ToolResponseMessage(responses)]), context
    )


async def _sent(advisor: TodoReminderAdvisor, request: ChatClientRequest) -> ToolResponseMessage:
    model = ScriptedChatModel(["ok"])
    await CallAdvisorChain([advisor], model).next_call(request)
    last = model.prompts[0].instructions[-1]
    assert isinstance(last, ToolResponseMessage)
    return last


async def test_the_reminder_starts_at_the_threshold_round_and_stays() -> None:
    advisor = TodoReminderAdvisor(threshold=3)
    sent = [await _sent(advisor, _round("search", "fetch")) for _ in range(4)]
    firsts = [m.responses[0].response_data for m in sent]
    assert firsts[:2] == ["result of search", "result of search"]
    assert firsts[2:] == [f"{REMINDER}\nresult of search"] * 2
    assert all(m.responses[1].response_data == "result of fetch" for m in sent)
    assert all(len(m.responses) == 2 for m in sent)


async def test_calling_todo_write_resets_the_count() -> None:
    advisor = TodoReminderAdvisor(threshold=2)
    await _sent(advisor, _round("search"))
    await _sent(advisor, _round("todo_write", "search"))
    assert advisor.rounds_without_todo() == 0
    assert (await _sent(advisor, _round("search"))).responses[0].response_data == "result of search"
    assert (await _sent(advisor, _round("search"))).responses[0].response_data.startswith(REMINDER)


async def test_counts_are_kept_per_conversation() -> None:
    advisor = TodoReminderAdvisor(threshold=1)
    assert (
        (await _sent(advisor, _round("a", conversation="c1"))).responses[0].response_data.startswith(REMINDER)
    )
    assert advisor.rounds_without_todo("c1") == 1
    assert advisor.rounds_without_todo("c2") == 0


async def test_a_first_call_is_not_a_tool_round() -> None:
    advisor = TodoReminderAdvisor(threshold=1)
    model = ScriptedChatModel(["ok"])
    await CallAdvisorChain([advisor], model).next_call(ChatClientRequest(Prompt([UserMessage("hi")])))
    assert advisor.rounds_without_todo() == 0
    assert model.prompts[0].instructions == (UserMessage("hi"),)


def test_defaults_follow_the_contract() -> None:
    advisor = TodoReminderAdvisor()
    assert (advisor.threshold, advisor.reminder) == (3, REMINDER)
    assert advisor.order == -(2**31) + 400
    with pytest.raises(ValueError, match="threshold must be an int >= 1"):
        TodoReminderAdvisor(threshold=0)
