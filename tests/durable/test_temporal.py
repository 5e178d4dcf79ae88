"""Durable runs on a real Temporal dev server, with an in-process worker: what is Temporal's own (what
both engines promise is in test_durable_runs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from advisorchain import AssistantMessage, ChatClient, ModelError, ToolCall, tool
from advisorchain.testing import ScriptedChatModel
from tests.durable.agent_app import build_client
from tests.durable.engines import TemporalEngine

pytestmark = pytest.mark.asyncio(loop_scope="session")

temporalio = pytest.importorskip("temporalio")

from temporalio.client import WorkflowFailureError  # noqa: E402
from temporalio.exceptions import ApplicationError  # noqa: E402
from temporalio.worker import Replayer  # noqa: E402

from advisorchain.durable.temporal import TemporalAgent  # noqa: E402


async def test_a_completed_run_replays_deterministically_from_its_history(temporal_env: Any) -> None:
    @tool
    def double(n: int) -> int:
        """Double a number."""
        return 2 * n

    model = ScriptedChatModel([AssistantMessage(tool_calls=[ToolCall("c1", "double", '{"n": 21}')]), "42"])
    engine = TemporalEngine(temporal_env)
    agent = engine.agent(ChatClient(model, default_tools=[double]), name="replayed")
    async with engine.serving(agent):
        handle = await engine.start(agent, "Double 21.")
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


async def test_a_model_error_fails_the_run_naming_it(temporal_env: Any) -> None:
    engine = TemporalEngine(temporal_env)
    agent = engine.agent(
        ChatClient(ScriptedChatModel([ModelError("quota exceeded", status_code=429)])), name="failing"
    )
    async with engine.serving(agent):
        with pytest.raises(WorkflowFailureError) as caught:
            await agent.result(await engine.start(agent, "Hello?"))

    cause = caught.value.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.message) == ("ModelError", "quota exceeded")
