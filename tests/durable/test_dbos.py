"""Durable runs on DBOS in this process (SQLite system database): what is DBOS's own (what both
engines promise is in test_durable_runs.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from advisorchain import (
    AssistantMessage,
    ChainConfigurationError,
    ChatClient,
    MessageChatMemoryAdvisor,
    ModelError,
    TodoTools,
    ToolCall,
    UserMessage,
    tool,
)
from advisorchain.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from advisorchain.testing import ScriptedChatModel

dbos = pytest.importorskip("dbos")

from advisorchain.durable.dbos import DBOSAgent  # noqa: E402

DBOS = dbos.DBOS





async def test_each_seam_is_one_recorded_step_named_by_agent_seam_and_tool(
    launch: Callable[..., None],
) -> None:
    @tool
    def double(n: int) -> int:
        """Double a number."""
        return 2 * n

    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    model = ScriptedChatModel([AssistantMessage(tool_calls=[ToolCall("c1", "double", '{"n": 21}')]), "42"])
    agent = DBOSAgent(
        ChatClient(model, default_tools=[double], default_advisors=[MessageChatMemoryAdvisor(memory)]),
        name="steps",
    )
    launch()
    result = await agent.run("Double 21.", conversation_id="c1", workflow_id="w1")
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async("w1")]

    assert result.output == "42"
    # The question is stored with its answer, in one write, once the answer is complete.
    assert steps == [
        "steps.memory.get",
        "steps.model",
        "steps.tool.double",
        "steps.model",
        "steps.memory.add",
    ]
    assert memory.get("c1") == [UserMessage("Double 21."), AssistantMessage("42")]


async def test_a_model_error_reaches_the_caller_as_a_model_error(launch: Callable[..., None]) -> None:
    agent = DBOSAgent(
        ChatClient(ScriptedChatModel([ModelError("quota exceeded", status_code=429)])), name="failing"
    )
    launch()
    with pytest.raises(ModelError, match="quota exceeded") as caught:
        await agent.run("Hello?")
    assert caught.value.status_code == 429


def test_an_agent_name_that_cannot_name_steps_is_refused() -> None:
    with pytest.raises(ChainConfigurationError, match="'my agent'"):
        DBOSAgent(ChatClient(ScriptedChatModel(["hi"])), name="my agent")
    DBOS.destroy(destroy_registry=True)


def test_an_agent_wraps_a_chat_client_only() -> None:
    with pytest.raises(ChainConfigurationError, match="wraps a ChatClient"):
        DBOSAgent(ScriptedChatModel(["hi"]), name="bad")  # type: ignore[call-overload]


async def test_workflow_tools_run_as_workflow_code_not_as_steps(launch: Callable[..., None]) -> None:
    todos = TodoTools()
    items = '{"items": [{"id": "1", "text": "Plan", "status": "in_progress"}]}'
    model = ScriptedChatModel([AssistantMessage(tool_calls=[ToolCall("c1", "todo_write", items)]), "planned"])
    agent = DBOSAgent(ChatClient(model), name="planner", workflow_tools=[todos])
    launch()
    result = await agent.run("Plan.", conversation_id="c1", workflow_id="p1")
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async("p1")]

    assert result.output == "planned"
    assert steps == ["planner.model", "planner.model"]
    assert [item.text for item in todos.todos("c1")] == ["Plan"]
