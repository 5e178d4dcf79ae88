"""Auto-registration of the ToolCallingAdvisor by the ChatClient, and driving the loop by hand."""

from typing import Any

import pytest

from advisorchain import (
    AdvisorParams,
    BaseAdvisor,
    ChatClient,
    ChatMemory,
    ChatOptions,
    MemoryAdvisor,
    Prompt,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisorchain.advisors.tool_calling import ToolCallingAdvisor
from advisorchain.testing import ScriptedChatModel
from advisorchain.tools.api import ToolContext
from advisorchain.tools.function import tool, tool_callbacks
from advisorchain.tools.manager import ToolCallingManager
from tests.tools.toolloop_helpers import INSIDE, OUTSIDE, Observer, asks, get_weather

WEATHER = ("w1", "get_weather", '{"city": "Oslo"}')
SUNNY = ToolResponseMessage([ToolResponse("w1", "get_weather", "sunny in Oslo")])


class InnerMemory(BaseAdvisor, MemoryAdvisor):
    """A memory advisor placed inside the loop (it stores nothing; its order is what matters)."""

    order = INSIDE


class OuterMemory(BaseAdvisor, MemoryAdvisor):
    order = OUTSIDE


class MyToolAdvisor(ToolCallingAdvisor):
    @property
    def name(self) -> str:
        return "My Tool Advisor"


def test_tools_are_executed_without_registering_an_advisor() -> None:
    model = ScriptedChatModel([asks(WEATHER), "sunny"])
    assert ChatClient(model).prompt("weather?").tools(get_weather).call().content() == "sunny"
    assert model.prompts[1].instructions[-1] == SUNNY


def test_with_auto_registration_off_on_the_client_tool_calls_come_back_unexecuted() -> None:
    model = ScriptedChatModel([asks(WEATHER)])
    client = ChatClient(model, tool_calling_auto_register=False)
    response = client.prompt("weather?").tools(get_weather).call().chat_response()
    assert response.has_tool_calls()
    assert len(model.prompts) == 1
    assert model.prompts[0].options is not None
    assert [cb.definition.name for cb in model.prompts[0].options.tool_callbacks] == ["get_weather"]


def test_with_auto_registration_off_for_one_request_tool_calls_come_back_unexecuted() -> None:
    model = ScriptedChatModel([asks(WEATHER)])
    spec = ChatClient(model).prompt("weather?").tools(get_weather)
    response = spec.param(AdvisorParams.TOOL_CALLING_ADVISOR_AUTO_REGISTER, False).call().chat_response()
    assert response.has_tool_calls()
    assert len(model.prompts) == 1


def test_two_tool_advisors_raise_naming_both_before_any_model_call() -> None:
    model = ScriptedChatModel(["unused"])
    client = ChatClient(model, default_advisors=[ToolCallingAdvisor()])
    with pytest.raises(ValueError, match="'Tool Calling Advisor' and 'My Tool Advisor'"):
        client.prompt("weather?").advisors(MyToolAdvisor()).call().content()
    assert model.prompts == []


def test_a_registered_tool_advisor_replaces_the_automatic_one() -> None:
    class Counting(ToolCallingAdvisor):
        rounds = 0

        async def do_before_call(self, request: Any, chain: Any) -> Any:
            Counting.rounds += 1
            return request

    model = ScriptedChatModel([asks(WEATHER), "sunny"])
    ChatClient(model).prompt("weather?").tools(get_weather).advisors(Counting()).call().content()
    assert Counting.rounds == 2


def test_a_memory_advisor_inside_the_loop_turns_the_automatic_history_off() -> None:
    model = ScriptedChatModel([asks(WEATHER), "sunny"])
    ChatClient(model).prompt("weather?").tools(get_weather).advisors(InnerMemory()).call().content()
    assert list(model.prompts[1].instructions) == [SUNNY]


def test_a_memory_advisor_outside_the_loop_keeps_the_automatic_history_on() -> None:
    model = ScriptedChatModel([asks(WEATHER), "sunny"])
    ChatClient(model).prompt("weather?").tools(get_weather).advisors(OuterMemory()).call().content()
    assert list(model.prompts[1].instructions) == [UserMessage("weather?"), asks(WEATHER), SUNNY]


def test_an_observing_advisor_inside_the_loop_sees_every_iteration() -> None:
    observer = Observer(INSIDE)
    model = ScriptedChatModel([asks(WEATHER), "sunny"])
    ChatClient(model, default_advisors=[observer]).prompt("weather?").tools(get_weather).call().content()
    assert [r.chat_response.has_tool_calls() for r in observer.responses] == [True, False]


def test_the_conversation_id_reaches_the_tool_context() -> None:
    @tool
    def whoami(context: ToolContext) -> str:
        return f"conversation {context.conversation_id}"

    model = ScriptedChatModel([asks(("1", "whoami", "{}")), "ok"])
    ChatClient(model).prompt("who?").tools(whoami).param(ChatMemory.CONVERSATION_ID, "c-42").call().content()
    assert model.prompts[1].instructions[-1] == ToolResponseMessage(
        [ToolResponse("1", "whoami", "conversation c-42")]
    )


async def test_a_loop_driven_by_hand_with_the_manager() -> None:
    model = ScriptedChatModel([asks(WEATHER), "sunny"])
    client = ChatClient(model, tool_calling_auto_register=False)
    manager = ToolCallingManager()
    options = ChatOptions(tool_callbacks=tool_callbacks(get_weather))
    prompt = Prompt([UserMessage("weather?")], options)
    response = await client.prompt(prompt).acall().chat_response()
    while response.has_tool_calls():
        result = await manager.execute_tool_calls(prompt, response)
        prompt = Prompt(result.conversation_history, options)
        response = await client.prompt(prompt).acall().chat_response()
    assert response.text == "sunny"
    assert list(model.prompts[1].instructions) == [UserMessage("weather?"), asks(WEATHER), SUNNY]
