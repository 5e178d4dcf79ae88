from __future__ import annotations

import pytest

from advisorchain import AssistantMessage, ChatClient, ScriptedChatModel, ToolCall, ToolResponseMessage
from advisorchain.advisors.tool_search import ToolIndex, ToolSearchToolCallingAdvisor
from advisorchain.tools import tool, tool_callbacks


@tool
def get_weather(city: str) -> str:
    """Current weather forecast for a city."""
    return f"sunny in {city}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email message to a recipient."""
    return "sent"


@tool
def convert_currency(amount: float, currency: str) -> str:
    """Convert an amount of money into another currency."""
    return "42"


TOOLS = [get_weather, send_email, convert_currency]


def _tool_names(model: ScriptedChatModel, i: int) -> list[str]:
    options = model.prompts[i].options
    assert options is not None
    return [cb.definition.name for cb in options.tool_callbacks]


def test_the_index_ranks_by_keywords_in_names_and_descriptions() -> None:
    index = ToolIndex(tool_callbacks(*TOOLS))
    assert [d.name for d in index.search("weather forecast", 5)] == ["get_weather"]
    assert [d.name for d in index.search("email", 5)] == ["send_email"]
    assert index.search("quantum chromodynamics", 5) == []


def test_the_model_first_sees_only_tool_search_then_what_it_found() -> None:
    model = ScriptedChatModel(
        [
            AssistantMessage(None, [ToolCall("s1", "tool_search", '{"query": "weather"}')]),
            AssistantMessage(None, [ToolCall("w1", "get_weather", '{"city": "Oslo"}')]),
            "Sunny in Oslo.",
        ]
    )
    client = ChatClient(model, default_advisors=[ToolSearchToolCallingAdvisor()])
    assert client.prompt("Weather in Oslo?").tools(*TOOLS).call().content() == "Sunny in Oslo."
    assert _tool_names(model, 0) == ["tool_search"]
    assert _tool_names(model, 1) == ["tool_search", "get_weather"]
    search_result = model.prompts[1].instructions[-1]
    assert isinstance(search_result, ToolResponseMessage)
    assert "- get_weather: Current weather forecast for a city." in search_result.responses[0].response_data
    last = model.prompts[2].instructions[-1]
    assert isinstance(last, ToolResponseMessage) and last.responses[0].response_data == "sunny in Oslo"


def test_an_undiscovered_tool_cannot_run() -> None:
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("e1", "send_email", '{"to": "a", "body": "b"}')]), "ok"]
    )
    client = ChatClient(model, default_advisors=[ToolSearchToolCallingAdvisor()])
    client.prompt("Mail Ann").tools(*TOOLS).call().content()
    result = model.prompts[1].instructions[-1]
    assert isinstance(result, ToolResponseMessage)
    assert "send_email" in result.responses[0].response_data
    assert result.responses[0].response_data != "sent"


def test_always_available_tools_are_exposed_from_the_start() -> None:
    model = ScriptedChatModel(["ok"])
    advisor = ToolSearchToolCallingAdvisor(always_available=["send_email"])
    ChatClient(model, default_advisors=[advisor]).prompt("q").tools(*TOOLS).call().content()
    assert _tool_names(model, 0) == ["tool_search", "send_email"]


def test_a_blank_query_gets_an_error_the_model_can_fix() -> None:
    model = ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("s1", "tool_search", '{"query": " "}')]), "ok"]
    )
    ChatClient(model, default_advisors=[ToolSearchToolCallingAdvisor()]).prompt("q").tools(
        *TOOLS
    ).call().content()
    result = model.prompts[1].instructions[-1]
    assert isinstance(result, ToolResponseMessage)
    assert result.responses[0].response_data.startswith("Error: give a non-blank")


def test_unknown_always_available_names_are_rejected() -> None:
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_advisors=[ToolSearchToolCallingAdvisor(always_available=["nope"])])
    with pytest.raises(ValueError, match="'nope'"):
        client.prompt("q").tools(*TOOLS).call().content()
    assert model.prompts == []


def test_it_is_the_chains_tool_advisor() -> None:
    from advisorchain import ToolAdvisor

    advisor = ToolSearchToolCallingAdvisor()
    assert isinstance(advisor, ToolAdvisor)
    assert advisor.name == "Tool Search Tool Calling Advisor"


async def test_the_stream_path_uses_the_same_discovery() -> None:
    model = ScriptedChatModel(
        [
            AssistantMessage("Searching. ", [ToolCall("s1", "tool_search", '{"query": "currency"}')]),
            "Done.",
        ]
    )
    client = ChatClient(model, default_advisors=[ToolSearchToolCallingAdvisor()])
    text = "".join([t async for t in client.prompt("q").tools(*TOOLS).astream().content()])
    assert text == "Searching. Done."
    assert _tool_names(model, 1) == ["tool_search", "convert_currency"]
