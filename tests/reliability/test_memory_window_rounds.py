"""Memory inside the loop keeps whole rounds and the current question (API.md §6; issue 11,
failure 3): a turn with more rounds than the window holds never sends a tool response without its
tool call, and never loses the question."""

from __future__ import annotations

from advisorchain import (
    AssistantMessage,
    MessageWindowChatMemory,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.model import Prompt
from advisorchain.testing import FunctionChatModel
from tests.reliability.memory_support import agent_client, agent_reply, question


def _check_prompt(prompt: Prompt) -> None:
    """Every tool response follows the assistant message that called it."""
    called: set[str] = set()
    for m in prompt.instructions:
        if isinstance(m, AssistantMessage):
            called = {c.id for c in m.tool_calls}
        elif isinstance(m, ToolResponseMessage):
            missing = [r.id for r in m.responses if r.id not in called]
            assert not missing, f"orphan tool responses {missing} in {prompt.instructions!r}"
            called = set()
        else:
            called = set()


def _run(max_messages: int, rounds: int, *, system: bool = False) -> FunctionChatModel:
    model = FunctionChatModel(agent_reply)
    client = agent_client(MessageWindowChatMemory(max_messages=max_messages), "inside", model)
    spec = client.prompt().user(question("1", rounds))
    if system:
        spec = spec.system("Be brief.")
    assert spec.call().content() == "a1"
    return model


def test_a_window_of_3_sends_the_question_and_the_newest_round_in_round_3() -> None:
    model = _run(3, 4)

    for prompt in model.prompts:
        _check_prompt(prompt)
    third = model.prompts[2].instructions
    assert third[0] == UserMessage(question("1", 4))
    assert [m.tool_calls[0].id for m in third if isinstance(m, AssistantMessage)] == ["1-1"]


def test_the_default_window_keeps_the_question_in_every_round_of_a_25_round_turn() -> None:
    model = _run(MessageWindowChatMemory.DEFAULT_MAX_MESSAGES, 25)

    assert len(model.prompts) == 26
    for prompt in model.prompts:
        _check_prompt(prompt)
        assert prompt.instructions[0] == UserMessage(question("1", 25))
        assert len(prompt.instructions) <= MessageWindowChatMemory.DEFAULT_MAX_MESSAGES


def test_when_the_window_trims_the_newest_rounds_are_kept() -> None:
    model = _run(MessageWindowChatMemory.DEFAULT_MAX_MESSAGES, 25)

    round_22 = model.prompts[21].instructions
    ids = [m.tool_calls[0].id for m in round_22 if isinstance(m, AssistantMessage)]
    assert ids == [f"1-{i}" for i in range(12, 21)]  # the question and the 9 newest rounds: 19 messages


def test_older_turns_go_before_rounds_of_the_current_turn() -> None:
    memory = MessageWindowChatMemory(max_messages=6)
    model = FunctionChatModel(agent_reply)
    client = agent_client(memory, "inside", model)
    client.prompt(question("0", 0)).call().content()  # an older turn: q0, a0

    client.prompt(question("1", 2)).call().content()

    assert model.prompts[1].instructions[:2] == (UserMessage(question("0", 0)), AssistantMessage("a0"))
    last = model.prompts[-1].instructions
    assert last[0] == UserMessage(question("1", 2))  # q0/a0 went first, both rounds still fit
    assert len(last) == 5


def test_when_even_the_question_and_the_newest_round_do_not_fit_both_are_sent() -> None:
    model = _run(1, 3, system=True)

    last = model.prompts[-1].instructions
    assert last[0] == SystemMessage("Be brief.")
    assert last[1] == UserMessage(question("1", 3))
    assert [type(m) for m in last[2:]] == [AssistantMessage, ToolResponseMessage]
