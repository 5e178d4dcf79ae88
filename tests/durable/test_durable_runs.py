"""Durable runs, on Temporal (an in-process worker on a real dev server) and on DBOS (in this
process, on SQLite and PostgreSQL): a streamed run delivers its chunks live and records one response
per round, an output type comes back as an instance, and a failing tool answers the model with its
error. ``test_temporal.py`` and ``test_dbos.py`` hold what is each engine's own."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pydantic import BaseModel

from advisorchain import AssistantMessage, ChatClient, ToolCall, tool
from advisorchain.testing import ScriptedChatModel
from tests.durable.agent_app import build_client
from tests.durable.engines import Engine
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import AGENT_FINAL

pytestmark = pytest.mark.asyncio(loop_scope="session")


class Answer(BaseModel):
    city: str
    degrees: int


async def test_a_streamed_run_delivers_the_chunks_live_and_the_workflow_one_response_per_round(
    engine: Engine, server: ScriptedServer, tmp_path: Path
) -> None:
    model = f"stream-{uuid.uuid4().hex}"
    agent = engine.agent(
        build_client(server.base_url, model, tmp_path / "t.txt", tmp_path / "m.db"), name="streamer"
    )
    async with engine.serving(agent):
        chunks, run = await engine.stream(agent, "Record 1 and 2.")
        result = await agent.result(run)
    steps = await engine.steps(run)

    assert "".join(c.text or "" for c in chunks) == AGENT_FINAL
    assert [c.result.output.tool_calls[0].name for c in chunks if c.has_tool_calls()] == ["record", "record"]
    assert result.output == AGENT_FINAL
    assert (tmp_path / "t.txt").read_text().split() == ["1", "2"]
    assert all(b["stream"] for b in server.bodies if b["model"] == model)
    assert steps.count("streamer.model") == 3  # one recorded (aggregated) response per round


async def test_an_output_type_comes_back_as_an_instance(engine: Engine) -> None:
    agent = engine.agent(
        ChatClient(ScriptedChatModel(['{"city": "Paris", "degrees": 21}'])), name="typed", output_type=Answer
    )
    async with engine.serving(agent):
        result = await agent.result(await engine.start(agent, "Weather in Paris?"))

    assert result.output == Answer(city="Paris", degrees=21)
    assert (
        result.chat_response is not None and result.chat_response.text == '{"city": "Paris", "degrees": 21}'
    )


async def test_a_failing_tool_answers_the_model_with_its_error(engine: Engine) -> None:
    @tool
    def explode() -> str:
        """Always fails."""
        raise ValueError("boom")

    model = ScriptedChatModel([AssistantMessage(tool_calls=[ToolCall("c1", "explode", "{}")]), "sorry"])
    agent = engine.agent(ChatClient(model, default_tools=[explode]), name="exploding")
    async with engine.serving(agent):
        result = await agent.result(await engine.start(agent, "Go."))

    tool_text = model.prompts[1].instructions[-1].responses[0].response_data  # type: ignore[attr-defined]
    assert result.output == "sorry"
    assert "ValueError: boom" in tool_text
