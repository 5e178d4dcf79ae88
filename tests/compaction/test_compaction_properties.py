"""Properties of compaction over open-ended conversations (hypothesis): whatever the history, the
budget and ``keep_last_turns``, the prompt sent keeps its system messages first, its current
question and its newest round, never splits a round, holds one summary at most, and replaces only
what a summary stands for."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ContextCompactionAdvisor,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.testing import FunctionChatModel

SUMMARY = ContextCompactionAdvisor.SUMMARY_PREFIX


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """A system message (or none), earlier turns with tool rounds, and a current turn whose rounds
    end with a tool response (a prompt as the tool loop sends it)."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(SystemMessage("s" * draw(st.integers(1, 80))))
    turns = draw(st.integers(1, 5))
    for t in range(turns):
        messages.append(UserMessage(f"u{t} " + "x" * draw(st.integers(0, 120))))
        rounds = draw(st.integers(0, 3))
        for r in range(rounds):
            calls = draw(st.integers(1, 2))
            ids = [f"t{t}r{r}c{c}" for c in range(calls)]
            messages.append(AssistantMessage(None, [ToolCall(i, "f", "{}") for i in ids]))
            messages.append(
                ToolResponseMessage([ToolResponse(i, "f", "y" * draw(st.integers(0, 150))) for i in ids])
            )
        if t < turns - 1:
            messages.append(AssistantMessage(f"a{t} " + "z" * draw(st.integers(0, 80))))
    return messages


def _rounds_whole(messages: list[Message]) -> bool:
    for i, m in enumerate(messages):
        if isinstance(m, ToolResponseMessage):
            before = messages[i - 1] if i else None
            if not isinstance(before, AssistantMessage) or [c.id for c in before.tool_calls] != [
                r.id for r in m.responses
            ]:
                return False
        answered = i + 1 < len(messages) and isinstance(messages[i + 1], ToolResponseMessage)
        if isinstance(m, AssistantMessage) and m.tool_calls and not answered:
            return False
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(1, 400), st.integers(0, 3))
def test_the_sent_prompt_keeps_what_must_be_kept(history: list[Message], budget: int, keep: int) -> None:
    sent: list[tuple[Message, ...]] = []
    summaries: list[str] = []

    def reply(prompt: object) -> str:
        instructions = prompt.instructions  # type: ignore[attr-defined]
        first = instructions[0]
        if isinstance(first, SystemMessage) and first.text.startswith("You compact"):
            summaries.append(instructions[-1].text)
            return "short"
        sent.append(instructions)
        return "answer"

    advisor = ContextCompactionAdvisor(max_tokens=budget, keep_last_turns=keep)
    client = ChatClient(FunctionChatModel(reply), default_advisors=[advisor], tool_calling_auto_register=False)
    client.prompt().messages(history).call().content()

    (prompt,) = sent
    systems = [m for m in history if isinstance(m, SystemMessage)]
    assert list(prompt[: len(systems)]) == systems  # system messages first, untouched
    question = max(i for i, m in enumerate(history) if isinstance(m, UserMessage))
    assert history[question] in prompt  # the current question is never summarized
    if isinstance(history[-1], ToolResponseMessage):
        assert list(prompt[-2:]) == history[-2:]  # nor the newest round
    assert _rounds_whole(list(prompt))
    summary_messages = [m for m in prompt if isinstance(m, UserMessage) and m.text.startswith(SUMMARY)]
    assert len(summary_messages) == len(summaries) <= 1
    kept = [m for m in prompt if m not in summary_messages]
    assert [m for m in history if m in kept] == kept  # the rest in its order, nothing invented
    if not summaries:
        assert list(prompt) == history
