"""Approval inside durable runs on a real Temporal dev server, what is Temporal's own: a run without
memory resumes from its history and replays deterministically, the update's validator, a killed
worker and a restarted server while the run waits, a hand-written tool callback (what both engines
promise is in test_durable_approval.py)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from advisorchain import (
    Approved,
    AssistantMessage,
    ChatClient,
    Denied,
    ToolCall,
    ToolContext,
    ToolDefinition,
    ToolMetadata,
    tool,
)
from advisorchain.testing import ScriptedChatModel
from tests.durable.agent_app import build_client
from tests.durable.approval_checks import CALLS, assert_decided_once
from tests.durable.conftest import temporal_binary
from tests.durable.engines import TemporalCrash, TemporalEngine, close_model, waiting
from tests.durable.worker_processes import Workers
from tests.support.openai_server import ScriptedServer
from tests.support.processes import free_port
from tests.support.scripts import AGENT_FINAL

pytestmark = pytest.mark.asyncio(loop_scope="session")

pytest.importorskip("temporalio")

from temporalio.client import Client, WorkflowUpdateFailedError  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402
from temporalio.worker import Replayer  # noqa: E402

from advisorchain.durable.temporal import DECIDE_UPDATE, TemporalAgent  # noqa: E402

DECISIONS = {"call_a": True, "call_b": Denied("not now")}


async def test_without_memory_the_run_resumes_from_its_history_and_replays_deterministically(
    temporal_env: Any,
) -> None:
    ran: list[int] = []

    @tool(requires_approval=True)
    def charge(cents: int) -> str:
        """Charge a card."""
        ran.append(cents)
        return "charged"

    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "charge", '{"cents": 5}')]), "paid"]
    )
    engine = TemporalEngine(temporal_env)
    agent = engine.agent(ChatClient(model, default_tools=[charge]), name="history")
    async with engine.serving(agent):
        handle = await engine.start(agent, "Pay.", system="Be brief.")
        await waiting(engine, agent, handle)
        await agent.decide(handle, {"c1": True})
        result = await agent.result(handle)
    history = await handle.fetch_history()
    await Replayer(workflows=[agent.workflow]).replay_workflow(history)  # the wait replays deterministically

    assert result.output == "paid"
    assert ran == [5]
    assert [type(m).__name__ for m in model.prompts[1].instructions] == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
    ]


async def test_the_update_validator_rejects_decisions_for_unknown_calls(
    server: ScriptedServer, temporal_env: Any, tmp_path: Path
) -> None:
    engine = TemporalEngine(temporal_env)
    client = build_client(server.base_url, f"approve-{uuid.uuid4().hex}", tmp_path / "t.txt", tmp_path / "m.db")
    agent = engine.agent(client, name="approver")
    async with engine.serving(agent):
        handle = await engine.start(agent, "Record 1 and 2.", conversation_id="c1")
        await waiting(engine, agent, handle)
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await handle.execute_update(DECIDE_UPDATE, {"call_x": {"approved": True, "arguments": None}})
        still = await agent.pending(handle)
        await handle.terminate()
    await close_model(agent)

    assert "call_a" in str(caught.value.cause)
    assert still == CALLS


async def test_an_approval_waits_across_a_killed_worker(
    server: ScriptedServer, temporal_env: Any, workers: Workers, tmp_path: Path
) -> None:
    model = f"approve-{uuid.uuid4().hex}"
    tool_file, memory_db = tmp_path / "tools.txt", tmp_path / "memory.sqlite"
    crash = TemporalCrash(temporal_env, workers)
    await crash.start("agent", server.base_url, model, str(tool_file), str(memory_db))
    await waiting(TemporalEngine(temporal_env), crash.agent, crash.handle)
    crash.restart()
    await crash.agent.decide(crash.handle, DECISIONS)
    result = await crash.agent.result(crash.handle)

    assert result.output == AGENT_FINAL
    assert_decided_once(server, model, tool_file, memory_db)


async def _server(db_file: Path, port: int) -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        ui=False,
        port=port,
        dev_server_log_level="error",
        dev_server_extra_args=["--db-filename", str(db_file)],
    )


async def test_an_approval_waits_across_a_restarted_temporal_server(
    server: ScriptedServer, workers: Workers, tmp_path: Path
) -> None:
    model, queue = f"approve-{uuid.uuid4().hex}", f"q-{uuid.uuid4().hex}"
    tool_file, memory_db, db_file = (
        tmp_path / "tools.txt",
        tmp_path / "memory.sqlite",
        tmp_path / "temporal.db",
    )
    port = free_port()
    target = f"127.0.0.1:{port}"
    args = ("temporal", "agent", target, queue, server.base_url, model, str(tool_file), str(memory_db))
    agent = TemporalAgent(build_client(server.base_url, model, tool_file, memory_db), name="crashtest")
    async with await _server(db_file, port) as first_env:
        worker = workers.start(*args)
        handle = await agent.start(
            first_env.client, "Record 1 and 2.", id=f"run-{model}", task_queue=queue, conversation_id="c1"
        )
        await waiting(TemporalEngine(first_env), agent, handle)
        workers.kill(worker)
    async with await _server(db_file, port) as second_env:
        client = await Client.connect(target)
        workers.start(*args)
        handle = client.get_workflow_handle(f"run-{model}")
        pending = await waiting(TemporalEngine(second_env), agent, handle)
        await agent.decide(handle, DECISIONS)
        result = await agent.result(handle)

    assert pending == CALLS
    assert result.output == AGENT_FINAL
    assert_decided_once(server, model, tool_file, memory_db)


class _RemoteTool:
    """A ToolCallback written by hand, as MCP tools are: approval comes from its metadata."""

    def __init__(self) -> None:
        self.received: list[str] = []

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition("delete_file", "Delete a file.", {"type": "object", "properties": {}})

    @property
    def metadata(self) -> ToolMetadata:
        return ToolMetadata(requires_approval=True)

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        self.received.append(arguments)
        return "deleted"


async def test_a_tool_callback_whose_metadata_requires_approval_waits_and_gets_the_approved_arguments(
    temporal_env: Any,
) -> None:
    remote = _RemoteTool()
    asked = AssistantMessage(tool_calls=[ToolCall("c1", "delete_file", '{"path": "/"}')])
    model = ScriptedChatModel([asked, "done"])
    engine = TemporalEngine(temporal_env)
    agent = engine.agent(ChatClient(model, default_tools=[remote]), name="remote")
    async with engine.serving(agent):
        handle = await engine.start(agent, "Clean up.")
        pending = await waiting(engine, agent, handle)
        await agent.decide(handle, {"c1": Approved('{"path": "/tmp/x"}')})
        result = await agent.result(handle)

    assert [c.name for c in pending] == ["delete_file"]
    assert result.output == "done"
    assert remote.received == ['{"path": "/tmp/x"}']
    assert model.prompts[1].instructions[1] == asked  # the history keeps the model's call unchanged
