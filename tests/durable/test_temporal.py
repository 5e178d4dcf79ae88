"""Durable runs on a real Temporal dev server, with an in-process worker."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from advisorchain import AssistantMessage, ChatClient, ModelError, ToolCall, tool
from advisorchain.testing import ScriptedChatModel
from tests.durable.agent_app import build_client
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import AGENT_FINAL

pytestmark = pytest.mark.asyncio(loop_scope="session")

temporalio = pytest.importorskip("temporalio")

from temporalio.client import WorkflowFailureError  # noqa: E402
from temporalio.exceptions import ApplicationError  # noqa: E402
from temporalio.worker import Replayer, Worker  # noqa: E402

from advisorchain.durable.temporal import TemporalAgent  # noqa: E402


class Answer(BaseModel):
    city: str
    degrees: int


def _ids() -> dict[str, str]:
    return {"id": f"run-{uuid.uuid4().hex}", "task_queue": f"q-{uuid.uuid4().hex}"}


async def _serving(env: Any, agent: TemporalAgent[Any], queue: str) -> Worker:
    return Worker(env.client, task_queue=queue, workflows=[agent.workflow], activities=agent.activities)


async def test_a_streamed_run_delivers_the_chunks_live_and_the_workflow_one_response_per_round(
    server: ScriptedServer, temporal_env: Any, tmp_path: Path
) -> None:
    model = f"stream-{uuid.uuid4().hex}"
    agent = TemporalAgent(
        build_client(server.base_url, model, tmp_path / "t.txt", tmp_path / "m.db"), name="streamer"
    )
    ids = _ids()
    async with await _serving(temporal_env, agent, ids["task_queue"]):
        chunks = [c async for c in agent.stream(temporal_env.client, "Record 1 and 2.", **ids)]
        handle = temporal_env.client.get_workflow_handle(ids["id"])
        result = await agent.result(handle)
    history = await handle.fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]

    assert "".join(c.text or "" for c in chunks) == AGENT_FINAL
    assert [c.result.output.tool_calls[0].name for c in chunks if c.has_tool_calls()] == ["record", "record"]
    assert result.output == AGENT_FINAL
    assert all(b["stream"] for b in server.bodies if b["model"] == model)
    assert scheduled.count("streamer.model") == 3  # one recorded (aggregated) response per round


async def test_a_completed_run_replays_deterministically_from_its_history(temporal_env: Any) -> None:
    @tool
    def double(n: int) -> int:
        """Double a number."""
        return 2 * n

    model = ScriptedChatModel([AssistantMessage(tool_calls=[ToolCall("c1", "double", '{"n": 21}')]), "42"])
    agent = TemporalAgent(ChatClient(model, default_tools=[double]), name="replayed")
    ids = _ids()
    async with await _serving(temporal_env, agent, ids["task_queue"]):
        handle = await agent.start(temporal_env.client, "Double 21.", **ids)
        assert (await agent.result(handle)).output == "42"
    history = await handle.fetch_history()

    await Replayer(workflows=[agent.workflow]).replay_workflow(history)  # raises on nondeterminism
    assert model.remaining == 0


async def test_activities_are_named_by_agent_seam_and_tool(temporal_env: Any, tmp_path: Path) -> None:
    agent = TemporalAgent(
        build_client("http://127.0.0.1:9/v1", "m", tmp_path / "t", tmp_path / "m.db"), name="named"
    )
    names = sorted(fn.__temporal_activity_definition.name for fn in agent.activities)  # type: ignore[attr-defined]
    assert names == [
        "named.memory.add",
        "named.memory.clear",
        "named.memory.get",
        "named.model",
        "named.tool.guarded",
        "named.tool.pay",
        "named.tool.record",
    ]
    assert agent.workflow_name == "named.run"


async def test_an_output_type_comes_back_as_an_instance(temporal_env: Any) -> None:
    agent = TemporalAgent(
        ChatClient(ScriptedChatModel(['{"city": "Paris", "degrees": 21}'])), name="typed", output_type=Answer
    )
    ids = _ids()
    async with await _serving(temporal_env, agent, ids["task_queue"]):
        result = await agent.run(temporal_env.client, "Weather in Paris?", **ids)

    assert result.output == Answer(city="Paris", degrees=21)


async def test_a_model_error_fails_the_run_naming_it(temporal_env: Any) -> None:
    agent = TemporalAgent(
        ChatClient(ScriptedChatModel([ModelError("quota exceeded", status_code=429)])), name="failing"
    )
    ids = _ids()
    async with await _serving(temporal_env, agent, ids["task_queue"]):
        with pytest.raises(WorkflowFailureError) as caught:
            await agent.run(temporal_env.client, "Hello?", **ids)

    cause = caught.value.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.message) == ("ModelError", "quota exceeded")


async def test_a_failing_tool_answers_the_model_with_its_error(temporal_env: Any) -> None:
    @tool
    def explode() -> str:
        """Always fails."""
        raise ValueError("boom")

    model = ScriptedChatModel([AssistantMessage(tool_calls=[ToolCall("c1", "explode", "{}")]), "sorry"])
    agent = TemporalAgent(ChatClient(model, default_tools=[explode]), name="exploding")
    ids = _ids()
    async with await _serving(temporal_env, agent, ids["task_queue"]):
        result = await agent.run(temporal_env.client, "Go.", **ids)

    tool_text = model.prompts[1].instructions[-1].responses[0].response_data  # type: ignore[attr-defined]
    assert result.output == "sorry"
    assert "ValueError: boom" in tool_text
