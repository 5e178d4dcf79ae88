"""Durable runs on DBOS in this process (SQLite system database)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

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
from tests.durable.agent_app import build_client
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import AGENT_FINAL

dbos = pytest.importorskip("dbos")

from advisorchain.durable.dbos import DBOSAgent  # noqa: E402

DBOS = dbos.DBOS


class Answer(BaseModel):
    city: str
    degrees: int


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[[], None]]:
    """Launch DBOS on a fresh SQLite file (after the test built its agents); destroyed afterwards."""

    def start() -> None:
        DBOS(
            config={
                "name": "advisorchain-test",
                "system_database_url": f"sqlite:///{tmp_path / 'sys.sqlite'}",
            }
        )
        DBOS.launch()

    yield start
    DBOS.destroy(destroy_registry=True)


async def test_a_streamed_run_delivers_the_chunks_live_and_the_workflow_one_response_per_round(
    server: ScriptedServer, launch: Callable[[], None], tmp_path: Path
) -> None:
    model = f"stream-{uuid.uuid4().hex}"
    agent = DBOSAgent(
        build_client(server.base_url, model, tmp_path / "t.txt", tmp_path / "m.db"), name="streamer"
    )
    launch()
    chunks = [c async for c in agent.stream("Record 1 and 2.", workflow_id="s1")]
    result = await agent.result("s1")
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async("s1")]

    assert "".join(c.text or "" for c in chunks) == AGENT_FINAL
    assert [c.result.output.tool_calls[0].name for c in chunks if c.has_tool_calls()] == ["record", "record"]
    assert result.output == AGENT_FINAL
    assert (tmp_path / "t.txt").read_text().split() == ["1", "2"]
    assert all(b["stream"] for b in server.bodies if b["model"] == model)
    assert steps.count("streamer.model") == 3  # one recorded (aggregated) response per round


async def test_each_seam_is_one_recorded_step_named_by_agent_seam_and_tool(
    launch: Callable[[], None],
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


async def test_an_output_type_comes_back_as_an_instance(launch: Callable[[], None]) -> None:
    agent = DBOSAgent(
        ChatClient(ScriptedChatModel(['{"city": "Paris", "degrees": 21}'])), name="typed", output_type=Answer
    )
    launch()
    result = await agent.run("Weather in Paris?")

    assert result.output == Answer(city="Paris", degrees=21)
    assert (
        result.chat_response is not None and result.chat_response.text == '{"city": "Paris", "degrees": 21}'
    )


async def test_a_model_error_reaches_the_caller_as_a_model_error(launch: Callable[[], None]) -> None:
    agent = DBOSAgent(
        ChatClient(ScriptedChatModel([ModelError("quota exceeded", status_code=429)])), name="failing"
    )
    launch()
    with pytest.raises(ModelError, match="quota exceeded") as caught:
        await agent.run("Hello?")
    assert caught.value.status_code == 429


async def test_a_failing_tool_answers_the_model_with_its_error(launch: Callable[[], None]) -> None:
    @tool
    def explode() -> str:
        """Always fails."""
        raise ValueError("boom")

    model = ScriptedChatModel([AssistantMessage(tool_calls=[ToolCall("c1", "explode", "{}")]), "sorry"])
    agent = DBOSAgent(ChatClient(model, default_tools=[explode]), name="exploding")
    launch()
    result = await agent.run("Go.")

    tool_text: Any = model.prompts[1].instructions[-1]
    assert result.output == "sorry"
    assert "ValueError: boom" in tool_text.responses[0].response_data


def test_an_agent_name_that_cannot_name_steps_is_refused() -> None:
    with pytest.raises(ChainConfigurationError, match="'my agent'"):
        DBOSAgent(ChatClient(ScriptedChatModel(["hi"])), name="my agent")
    DBOS.destroy(destroy_registry=True)


def test_an_agent_wraps_a_chat_client_only() -> None:
    with pytest.raises(ChainConfigurationError, match="wraps a ChatClient"):
        DBOSAgent(ScriptedChatModel(["hi"]), name="bad")  # type: ignore[call-overload]


async def test_workflow_tools_run_as_workflow_code_not_as_steps(launch: Callable[[], None]) -> None:
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
