"""MessageChatMemoryAdvisor on the call and stream paths (tool-loop placement: test_memory_tool_loop)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from advisorchain.advisors.api import MemoryAdvisor, Ordered
from advisorchain.advisors.memory import MessageChatMemoryAdvisor
from advisorchain.client import ChatClient
from advisorchain.memory.api import ChatMemory, ChatMemoryDecodeError
from advisorchain.memory.window import MessageWindowChatMemory
from advisorchain.messages import AssistantMessage, Message, SystemMessage, UserMessage
from advisorchain.model import Prompt
from advisorchain.testing import FunctionChatModel, ScriptedChatModel

CID = ChatMemory.CONVERSATION_ID


def _client(model: Any, memory: ChatMemory, **advisor_args: Any) -> ChatClient:
    # No tools here, so the tool-calling advisor is left out: these tests need only the memory advisor.
    return ChatClient(
        model,
        default_advisors=[MessageChatMemoryAdvisor(memory, **advisor_args)],
        tool_calling_auto_register=False,
    )


def test_the_advisor_is_a_memory_advisor_with_springs_default_order() -> None:
    advisor = MessageChatMemoryAdvisor(MessageWindowChatMemory())

    assert isinstance(advisor, MemoryAdvisor)
    assert advisor.order == Ordered.HIGHEST_PRECEDENCE + 200
    assert advisor.conversation_id == "default"
    assert advisor.name == "MessageChatMemoryAdvisor"


def test_a_call_stores_the_user_message_and_the_answer() -> None:
    memory = MessageWindowChatMemory()
    _client(ScriptedChatModel(["Hello Ada."]), memory).prompt("I'm Ada.").call().content()

    assert memory.get("default") == [UserMessage("I'm Ada."), AssistantMessage("Hello Ada.")]


def test_the_next_call_sends_the_history_before_the_new_message() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["Hello Ada.", "You are Ada."])
    client = _client(model, memory)
    client.prompt("I'm Ada.").system("Be brief.").call().content()
    client.prompt("Who am I?").system("Be brief.").call().content()

    assert model.prompts[1].instructions == (
        SystemMessage("Be brief."),
        UserMessage("I'm Ada."),
        AssistantMessage("Hello Ada."),
        UserMessage("Who am I?"),
    )


def test_the_conversation_id_param_selects_the_conversation() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["A", "B", "C"])
    client = _client(model, memory)
    client.prompt("to alice").param(CID, "alice").call().content()
    client.prompt("to bob").param(CID, "bob").call().content()
    client.prompt("alice again").param(CID, "alice").call().content()

    assert memory.get("bob") == [UserMessage("to bob"), AssistantMessage("B")]
    assert model.prompts[2].instructions == (
        UserMessage("to alice"),
        AssistantMessage("A"),
        UserMessage("alice again"),
    )


def test_without_the_param_the_advisors_conversation_id_is_used() -> None:
    memory = MessageWindowChatMemory()
    _client(ScriptedChatModel(["ok"]), memory, conversation_id="fixed").prompt("hi").call().content()

    assert memory.get("fixed") == [UserMessage("hi"), AssistantMessage("ok")]
    assert memory.get("default") == []


def test_history_already_in_the_prompt_is_not_sent_twice() -> None:
    memory = MessageWindowChatMemory()
    history: list[Message] = [UserMessage("q0"), AssistantMessage("a0")]
    memory.add("default", history)
    model = ScriptedChatModel(["a1"])
    _client(model, memory).prompt().messages(history).user("q1").call().content()

    assert model.prompts[0].instructions == (UserMessage("q0"), AssistantMessage("a0"), UserMessage("q1"))
    assert memory.get("default") == [*history, UserMessage("q1"), AssistantMessage("a1")]


def test_a_stored_system_message_is_moved_first() -> None:
    memory = MessageWindowChatMemory()
    memory.add("default", [UserMessage("q0"), SystemMessage("rules")])
    model = ScriptedChatModel(["a1"])
    _client(model, memory).prompt("q1").call().content()

    assert model.prompts[0].instructions == (SystemMessage("rules"), UserMessage("q0"), UserMessage("q1"))


@pytest.mark.parametrize("bad", ["", 42, ["c1"]])
def test_a_bad_conversation_id_param_is_refused_by_name(bad: object) -> None:
    client = _client(ScriptedChatModel(["never"]), MessageWindowChatMemory())

    with pytest.raises(ValueError, match=CID):
        client.prompt("hi").param(CID, bad).call().content()


def test_a_bad_advisor_configuration_is_refused() -> None:
    with pytest.raises(TypeError, match="ChatMemory"):
        MessageChatMemoryAdvisor(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="order"):
        MessageChatMemoryAdvisor(MessageWindowChatMemory(), order="first")  # type: ignore[arg-type]


def test_a_failed_model_call_stores_nothing_and_the_next_turn_asks_again() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([RuntimeError("provider down"), "hello"])
    client = _client(model, memory)

    with pytest.raises(RuntimeError, match="provider down"):
        client.prompt("hi").call().content()
    assert memory.get("default") == []

    client.prompt("hi again").call().content()
    assert model.prompts[1].instructions == (UserMessage("hi again"),)
    assert memory.get("default") == [UserMessage("hi again"), AssistantMessage("hello")]


def test_a_corrupted_conversation_fails_the_request_naming_it(make_backend: Any) -> None:
    backend = make_backend("sqlite")
    repository = backend.repository()
    repository.save_all("c9", [UserMessage("fine")])
    backend.inject("c9", "garbage")
    client = _client(ScriptedChatModel(["never"]), MessageWindowChatMemory(repository))

    with pytest.raises(ChatMemoryDecodeError, match="'c9'"):
        client.prompt("hi").param(CID, "c9").call().content()


# -- streams -------------------------------------------------------------------------------------


async def test_a_stream_stores_the_whole_answer_when_it_ends() -> None:
    memory = MessageWindowChatMemory()
    client = _client(ScriptedChatModel(["It is sunny today."]), memory)

    deltas = [d async for d in client.prompt("Weather?").astream().content()]

    assert "".join(deltas) == "It is sunny today."
    assert memory.get("default") == [UserMessage("Weather?"), AssistantMessage("It is sunny today.")]


async def test_a_stream_sends_the_history_like_a_call() -> None:
    memory = MessageWindowChatMemory()
    memory.add("default", [UserMessage("q0"), AssistantMessage("a0")])
    model = ScriptedChatModel(["a1"])

    [d async for d in _client(model, memory).prompt("q1").astream().content()]

    assert model.prompts[0].instructions == (UserMessage("q0"), AssistantMessage("a0"), UserMessage("q1"))


async def test_a_stream_the_consumer_abandons_stores_nothing() -> None:
    memory = MessageWindowChatMemory()
    stream = _client(ScriptedChatModel(["one two three four"]), memory).prompt("count").astream().content()

    first = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]

    assert first == "one"
    assert memory.get("default") == []


def test_a_blocking_stream_stores_the_answer() -> None:
    memory = MessageWindowChatMemory()

    text = "".join(_client(ScriptedChatModel(["fine thanks"]), memory).prompt("how?").stream().content())

    assert text == "fine thanks"
    assert memory.get("default")[-1] == AssistantMessage("fine thanks")


# -- never blocking the loop, concurrency --------------------------------------------------------


class _ThreadSpyMemory:
    """A blocking ChatMemory (no async methods) that records which threads touch it."""

    def __init__(self) -> None:
        self.inner = MessageWindowChatMemory()
        self.threads: list[int] = []

    def get(self, conversation_id: str) -> list[Message]:
        self.threads.append(threading.get_ident())
        return self.inner.get(conversation_id)

    def add(self, conversation_id: str, messages: Sequence[Message]) -> None:
        self.threads.append(threading.get_ident())
        self.inner.add(conversation_id, messages)

    def clear(self, conversation_id: str) -> None:
        self.inner.clear(conversation_id)


async def test_a_blocking_memory_is_never_called_on_the_event_loop_thread() -> None:
    memory = _ThreadSpyMemory()
    client = _client(ScriptedChatModel(["a", "b"]), memory)  # type: ignore[arg-type]

    await client.prompt("q").acall().content()
    [d async for d in client.prompt("q2").astream().content()]

    assert len(memory.threads) == 4  # per turn: one read, one write (question and answer together)
    assert threading.get_ident() not in memory.threads


@pytest.mark.parametrize("backend_name", ["in_memory", "sqlite", "postgres", "redis"])
async def test_eight_conversations_of_fifty_turns_run_concurrently(
    make_backend: Any, backend_name: str
) -> None:
    memory = MessageWindowChatMemory(make_backend(backend_name).repository(), max_messages=20)

    def answer(prompt: Prompt) -> str:
        history = [m.text for m in prompt.instructions[:-1]]  # type: ignore[union-attr]
        question = prompt.instructions[-1].text  # type: ignore[union-attr]
        return f"re {question} after {len(history)}"

    client = _client(FunctionChatModel(answer), memory)

    async def converse(c: int) -> list[str | None]:
        return [
            await client.prompt(f"c{c} t{t}").param(CID, f"conv-{c}").acall().content() for t in range(50)
        ]

    answers = await asyncio.gather(*(converse(c) for c in range(8)))

    for c in range(8):
        # From turn 10 on, the window holds the 10 previous exchanges (20 messages).
        assert answers[c][:2] == [f"re c{c} t0 after 0", f"re c{c} t1 after 2"]
        assert answers[c][49] == f"re c{c} t49 after 20"
        expected: list[Message] = []
        for t in range(40, 50):
            expected += [UserMessage(f"c{c} t{t}"), AssistantMessage(f"re c{c} t{t} after {min(2 * t, 20)}")]
        assert await memory.aget(f"conv-{c}") == expected
