"""MessageChatMemoryAdvisor outside the tool loop (the default order) and inside it (an order after
the ToolCallingAdvisor's), on the call and the stream path."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain.advisors.api import Ordered
from advisorchain.advisors.memory import MessageChatMemoryAdvisor
from advisorchain.client import ChatClient
from advisorchain.memory.api import ChatMemory
from advisorchain.memory.window import MessageWindowChatMemory
from advisorchain.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.testing import ScriptedChatModel

tool_calling = pytest.importorskip("advisorchain.advisors.tool_calling")
tools = pytest.importorskip("advisorchain.tools")

INSIDE = Ordered.HIGHEST_PRECEDENCE + 400


@tools.tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _call(i: int, city: str) -> ToolCall:
    return ToolCall(f"call_{i}", "weather", f'{{"city": "{city}"}}')


ASK = AssistantMessage("Let me check.", [_call(1, "Paris")])
ASK_AGAIN = AssistantMessage(None, [_call(2, "Rome")])
TOOL_1 = ToolResponseMessage([ToolResponse("call_1", "weather", "sunny in Paris")])
TOOL_2 = ToolResponseMessage([ToolResponse("call_2", "weather", "sunny in Rome")])
ANSWER = AssistantMessage("Sunny in both.")


def _client(model: ScriptedChatModel, memory: ChatMemory, order: int, *extra: Any) -> ChatClient:
    advisor = MessageChatMemoryAdvisor(memory, order=order)
    return ChatClient(model, default_advisors=[advisor, *extra], default_tools=[weather])


def test_outside_the_loop_only_the_user_message_and_final_answer_are_stored() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([ASK, ANSWER])

    assert _client(model, memory, MessageChatMemoryAdvisor.DEFAULT_ORDER).prompt(
        "Paris?"
    ).call().content() == ("Sunny in both.")

    assert memory.get("default") == [UserMessage("Paris?"), ANSWER]
    assert model.prompts[1].instructions == (UserMessage("Paris?"), ASK, TOOL_1)


def test_inside_the_loop_every_iteration_is_stored_once() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([ASK, ASK_AGAIN, ANSWER])

    _client(model, memory, INSIDE).prompt("Paris and Rome?").call().content()

    assert memory.get("default") == [UserMessage("Paris and Rome?"), ASK, TOOL_1, ASK_AGAIN, TOOL_2, ANSWER]


def test_inside_the_loop_each_iteration_gets_the_history_from_memory() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([ASK, ANSWER])

    _client(model, memory, INSIDE).prompt().system("Be brief.").user("Paris?").call().content()

    assert model.prompts[0].instructions == (SystemMessage("Be brief."), UserMessage("Paris?"))
    assert model.prompts[1].instructions == (SystemMessage("Be brief."), UserMessage("Paris?"), ASK, TOOL_1)


def test_inside_the_loop_the_next_request_sees_the_whole_previous_tool_exchange() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([ASK, ANSWER, "You asked about Paris."])
    client = _client(model, memory, INSIDE)
    client.prompt("Paris?").call().content()

    client.prompt("What did I ask?").call().content()

    assert model.prompts[2].instructions == (
        UserMessage("Paris?"),
        ASK,
        TOOL_1,
        ANSWER,
        UserMessage("What did I ask?"),
    )


def test_inside_a_loop_that_keeps_its_own_history_nothing_is_stored_twice() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([ASK, ASK_AGAIN, ANSWER])
    loop = tool_calling.ToolCallingAdvisor(conversation_history_enabled=True)

    _client(model, memory, INSIDE, loop).prompt("Paris and Rome?").call().content()

    stored: list[Message] = [UserMessage("Paris and Rome?"), ASK, TOOL_1, ASK_AGAIN, TOOL_2, ANSWER]
    assert memory.get("default") == stored
    assert model.prompts[2].instructions == tuple(stored[:-1])


async def test_inside_the_loop_a_stream_stores_every_iteration_once() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([ASK, ASK_AGAIN, ANSWER])

    text = "".join(
        [d async for d in _client(model, memory, INSIDE).prompt("Paris and Rome?").astream().content()]
    )

    assert text == "Let me check.Sunny in both."
    assert await memory.aget("default") == [
        UserMessage("Paris and Rome?"),
        ASK,
        TOOL_1,
        ASK_AGAIN,
        TOOL_2,
        ANSWER,
    ]


async def test_outside_the_loop_a_stream_stores_only_the_final_answer_as_a_call_does() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([ASK, ANSWER])
    client = _client(model, memory, MessageChatMemoryAdvisor.DEFAULT_ORDER)

    text = "".join([d async for d in client.prompt("Paris?").astream().content()])

    assert text == "Let me check.Sunny in both."  # the caller saw the preamble live
    assert await memory.aget("default") == [UserMessage("Paris?"), AssistantMessage("Sunny in both.")]


@tools.tool(return_direct=True)
def lookup(city: str) -> str:
    """Look a city up; the result goes straight to the caller."""
    return f"{city}: 2.1M people"


def test_inside_the_loop_tool_calls_a_loop_left_unanswered_are_sent_as_text_only() -> None:
    memory = MessageWindowChatMemory()
    ask = AssistantMessage("Looking it up.", [ToolCall("call_9", "lookup", '{"city": "Paris"}')])
    model = ScriptedChatModel([ask, "Paris."])
    advisor = MessageChatMemoryAdvisor(memory, order=INSIDE)
    client = ChatClient(model, default_advisors=[advisor], default_tools=[lookup])

    assert client.prompt("Population of Paris?").call().content() == "Paris: 2.1M people"  # return direct
    client.prompt("Which city was it?").call().content()

    assert memory.get("default")[:2] == [UserMessage("Population of Paris?"), ask]
    assert model.prompts[1].instructions == (
        UserMessage("Population of Paris?"),
        AssistantMessage("Looking it up."),
        UserMessage("Which city was it?"),
    )
