"""What ToolCallingAdvisor does the same on the call path and the stream path: the messages each
round sends, with and without history, and the order of its hooks."""

import pytest

from advisorchain import SystemMessage, ToolResponse, ToolResponseMessage, UserMessage
from advisorchain.advisors.tool_calling import ToolCallingAdvisor
from advisorchain.testing import ScriptedChatModel
from tests.tools.toolloop_helpers import (
    HOOKS,
    PATHS,
    TIME,
    WEATHER,
    Auditing,
    Path,
    asks,
    get_time,
    get_weather,
    request_of,
    run_loop,
)

pytestmark = pytest.mark.parametrize("path", PATHS)


async def test_with_history_each_round_sends_the_whole_conversation(path: Path) -> None:
    first, second = asks(WEATHER, text="Let me check."), asks(TIME)
    model = ScriptedChatModel([first, second, "done"])
    await run_loop(path, model, ToolCallingAdvisor(), request=request_of(get_weather, get_time, system="be brief"))
    weather = ToolResponseMessage([ToolResponse("w1", "get_weather", "sunny in Oslo")])
    time = ToolResponseMessage([ToolResponse("t1", "get_time", "noon in Oslo")])
    base = [SystemMessage("be brief"), UserMessage("weather?")]
    assert [list(p.instructions) for p in model.prompts] == [
        base,
        [*base, first, weather],
        [*base, first, weather, second, time],
    ]


async def test_without_history_each_round_sends_the_system_message_and_the_newest_tool_responses(
    path: Path,
) -> None:
    model = ScriptedChatModel([asks(WEATHER), asks(TIME), "done"])
    advisor = ToolCallingAdvisor(conversation_history_enabled=False)
    await run_loop(path, model, advisor, request=request_of(get_weather, get_time, system="be brief"))
    assert [list(p.instructions) for p in model.prompts] == [
        [SystemMessage("be brief"), UserMessage("weather?")],
        [
            SystemMessage("be brief"),
            ToolResponseMessage([ToolResponse("w1", "get_weather", "sunny in Oslo")]),
        ],
        [SystemMessage("be brief"), ToolResponseMessage([ToolResponse("t1", "get_time", "noon in Oslo")])],
    ]


async def test_hooks_run_in_the_same_order(path: Path) -> None:
    advisor = Auditing()
    await run_loop(path, ScriptedChatModel([asks(WEATHER), "done"]), advisor)
    assert advisor.log == HOOKS
