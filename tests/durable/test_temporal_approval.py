"""Approval inside durable runs on a real Temporal dev server: the run waits (query of the pending
calls, update with the decisions), resumes, and survives a killed worker and a restarted server."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from advisorchain import (
    Approved,
    AssistantMessage,
    ChainConfigurationError,
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
from tests.durable.worker_processes import Workers
from tests.support.openai_server import ScriptedServer
from tests.support.processes import free_port
from tests.support.scripts import AGENT_FINAL

pytestmark = pytest.mark.asyncio(loop_scope="session")

pytest.importorskip("temporalio")

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError  # noqa: E402
from temporalio.service import RPCError  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402
from temporalio.worker import Replayer, Worker  # noqa: E402

from advisorchain.durable.temporal import DECIDE_UPDATE, TemporalAgent  # noqa: E402

DECISIONS = {"call_a": True, "call_b": Denied("not now")}


def _ids() -> dict[str, str]:
    return {"id": f"run-{uuid.uuid4().hex}", "task_queue": f"q-{uuid.uuid4().hex}"}


async def _waiting(agent: TemporalAgent[Any], handle: WorkflowHandle[Any, Any]) -> tuple[ToolCall, ...]:
    """The pending calls, once the run waits for them (polled: the test has no other signal)."""
    deadline = time.monotonic() + 600  # a bound for a hang: a busy machine may take minutes
    while time.monotonic() < deadline:
        try:
            pending = await agent.pending(handle)
        except RPCError:  # a query needs a worker, which may not have polled yet
            pending = ()
        if pending:
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {handle.id!r} never waited for approval")


def _agent(server: ScriptedServer, tmp_path: Path, name: str = "approver") -> tuple[TemporalAgent[Any], str]:
    model = f"approve-{uuid.uuid4().hex}"
    client = build_client(server.base_url, model, tmp_path / "tools.txt", tmp_path / "memory.sqlite")
    return TemporalAgent(client, name=name), model


async def test_a_run_waits_for_decisions_then_runs_the_approved_call_and_answers_the_denied_one(
    server: ScriptedServer, temporal_env: Any, tmp_path: Path
) -> None:
    agent, model = _agent(server, tmp_path)
    ids = _ids()
    async with Worker(
        temporal_env.client,
        task_queue=ids["task_queue"],
        workflows=[agent.workflow],
        activities=agent.activities,
    ):
        handle = await agent.start(temporal_env.client, "Record 1 and 2.", conversation_id="c1", **ids)
        pending = await _waiting(agent, handle)
        await agent.decide(handle, DECISIONS)
        result = await agent.result(handle)
        after = await agent.pending(handle)
    await _close(agent)

    assert pending == CALLS
    assert result.output == AGENT_FINAL
    assert after == ()
    assert_decided_once(server, model, tmp_path / "tools.txt", tmp_path / "memory.sqlite")


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
    agent = TemporalAgent(ChatClient(model, default_tools=[charge]), name="history")
    ids = _ids()
    async with Worker(
        temporal_env.client,
        task_queue=ids["task_queue"],
        workflows=[agent.workflow],
        activities=agent.activities,
    ):
        handle = await agent.start(temporal_env.client, "Pay.", system="Be brief.", **ids)
        await _waiting(agent, handle)
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


async def test_decisions_that_miss_a_pending_call_are_refused_naming_it(
    server: ScriptedServer, temporal_env: Any, tmp_path: Path
) -> None:
    agent, _ = _agent(server, tmp_path)
    ids = _ids()
    async with Worker(
        temporal_env.client,
        task_queue=ids["task_queue"],
        workflows=[agent.workflow],
        activities=agent.activities,
    ):
        handle = await agent.start(temporal_env.client, "Record 1 and 2.", conversation_id="c1", **ids)
        await _waiting(agent, handle)
        with pytest.raises(ChainConfigurationError, match=r"'call_b' \(tool 'guarded'\)"):
            await agent.decide(handle, {"call_a": True})
        with pytest.raises(ChainConfigurationError, match=r"\['call_x'\]"):
            await agent.decide(handle, {**DECISIONS, "call_x": True})
        still = await agent.pending(handle)
        await handle.terminate()
    await _close(agent)

    assert still == CALLS


async def test_the_update_validator_rejects_decisions_for_unknown_calls(
    server: ScriptedServer, temporal_env: Any, tmp_path: Path
) -> None:
    agent, _ = _agent(server, tmp_path)
    ids = _ids()
    async with Worker(
        temporal_env.client,
        task_queue=ids["task_queue"],
        workflows=[agent.workflow],
        activities=agent.activities,
    ):
        handle = await agent.start(temporal_env.client, "Record 1 and 2.", conversation_id="c1", **ids)
        await _waiting(agent, handle)
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await handle.execute_update(DECIDE_UPDATE, {"call_x": {"approved": True, "arguments": None}})
        still = await agent.pending(handle)
        await handle.terminate()
    await _close(agent)

    assert "call_a" in str(caught.value.cause)
    assert still == CALLS


async def test_a_streamed_run_ends_its_stream_waiting_for_approval_and_streams_on_after_the_decision(
    server: ScriptedServer, temporal_env: Any, tmp_path: Path
) -> None:
    agent, model = _agent(server, tmp_path, name="approvestream")
    ids = _ids()
    async with Worker(
        temporal_env.client,
        task_queue=ids["task_queue"],
        workflows=[agent.workflow],
        activities=agent.activities,
    ):
        first = [
            c async for c in agent.stream(temporal_env.client, "Record 1 and 2.", conversation_id="c1", **ids)
        ]
        handle = temporal_env.client.get_workflow_handle(ids["id"])
        await agent.decide(handle, DECISIONS)
        rest = [c async for c in agent.chunks(handle, offset=len(first))]
        result = await agent.result(handle)
    await _close(agent)

    assert first[-1].metadata.finish_reason == "approvalRequired"
    assert tuple(first[-1].result.output.tool_calls) == CALLS
    assert "".join(c.text or "" for c in rest) == AGENT_FINAL
    assert result.output == AGENT_FINAL
    assert_decided_once(server, model, tmp_path / "tools.txt", tmp_path / "memory.sqlite")


async def test_an_approval_waits_across_a_killed_worker(
    server: ScriptedServer, temporal_env: Any, workers: Workers, tmp_path: Path
) -> None:
    model, queue = f"approve-{uuid.uuid4().hex}", f"q-{uuid.uuid4().hex}"
    tool_file, memory_db = tmp_path / "tools.txt", tmp_path / "memory.sqlite"
    target = temporal_env.client.service_client.config.target_host
    args = ("temporal", target, queue, server.base_url, model, str(tool_file), str(memory_db))
    first = workers.start(*args)
    agent = TemporalAgent(build_client(server.base_url, model, tool_file, memory_db), name="crashtest")
    handle = await agent.start(
        temporal_env.client, "Record 1 and 2.", id=f"run-{model}", task_queue=queue, conversation_id="c1"
    )
    await _waiting(agent, handle)
    workers.kill(first)
    workers.start(*args)
    await agent.decide(handle, DECISIONS)
    result = await agent.result(handle)

    assert result.output == AGENT_FINAL
    assert_decided_once(server, model, tool_file, memory_db)


async def _close(agent: TemporalAgent[Any]) -> None:
    """Close the in-process OpenAI client's pooled connections to the scripted server."""
    await agent.parts.client.model.client.close()  # type: ignore[attr-defined]



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
    args = ("temporal", target, queue, server.base_url, model, str(tool_file), str(memory_db))
    agent = TemporalAgent(build_client(server.base_url, model, tool_file, memory_db), name="crashtest")
    async with await _server(db_file, port) as first_env:
        worker = workers.start(*args)
        handle = await agent.start(
            first_env.client, "Record 1 and 2.", id=f"run-{model}", task_queue=queue, conversation_id="c1"
        )
        await _waiting(agent, handle)
        workers.kill(worker)
    async with await _server(db_file, port):
        client = await Client.connect(target)
        workers.start(*args)
        handle = client.get_workflow_handle(f"run-{model}")
        pending = await _waiting(agent, handle)
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
    agent = TemporalAgent(ChatClient(model, default_tools=[remote]), name="remote")
    ids = _ids()
    async with Worker(
        temporal_env.client,
        task_queue=ids["task_queue"],
        workflows=[agent.workflow],
        activities=agent.activities,
    ):
        handle = await agent.start(temporal_env.client, "Clean up.", **ids)
        pending = await _waiting(agent, handle)
        await agent.decide(handle, {"c1": Approved('{"path": "/tmp/x"}')})
        result = await agent.result(handle)

    assert [c.name for c in pending] == ["delete_file"]
    assert result.output == "done"
    assert remote.received == ['{"path": "/tmp/x"}']
    assert model.prompts[1].instructions[1] == asked  # the history keeps the model's call unchanged
