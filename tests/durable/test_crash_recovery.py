"""A 3-round tool loop whose worker is SIGKILLed during round 2 and restarted: the run finishes,
round 1's model and tool calls ran exactly once, and the stored conversation is exact — on
Temporal and on DBOS (SQLite and PostgreSQL). And a worker SIGKILLed in the middle of a tool call:
the call runs again (as documented) with the same ``(run_id, tool_call_id)`` in its ToolContext, so
a tool that keys its side effect on it pays once."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest

from advisorchain import AssistantMessage, UserMessage
from tests.durable.agent_app import attempts_file, hang_file, stored
from tests.durable.worker_processes import Workers
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import AGENT_FINAL, round_counts, wait_for_round

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _tool_calls(tool_file: Path) -> list[str]:
    return tool_file.read_text(encoding="utf-8").split()


def _assert_ran_once_except_the_killed_round(server: ScriptedServer, model: str) -> None:
    assert round_counts(server)[(model, 1)] == 1  # round 1: recorded, never repeated
    assert round_counts(server)[(model, 2)] == 2  # round 2: cut by the kill, retried once
    assert round_counts(server)[(model, 3)] == 1


async def test_temporal_run_survives_a_killed_worker(
    server: ScriptedServer, temporal_env: object, workers: Workers, tmp_path: Path
) -> None:
    from temporalio.testing import WorkflowEnvironment

    from advisorchain.durable.temporal import TemporalAgent
    from tests.durable.agent_app import build_client

    assert isinstance(temporal_env, WorkflowEnvironment)
    model, queue = f"hang2-{uuid.uuid4().hex}", f"q-{uuid.uuid4().hex}"
    tool_file, memory_db = tmp_path / "tools.txt", tmp_path / "memory.sqlite"
    target = temporal_env.client.service_client.config.target_host
    args = ("temporal", target, queue, server.base_url, model, str(tool_file), str(memory_db))
    first = workers.start(*args)
    # The caller needs only the agent's names: its client builds the same agent without serving it.
    agent = TemporalAgent(build_client(server.base_url, model, tool_file, memory_db), name="crashtest")
    handle = await agent.start(
        temporal_env.client, "Record 1 and 2.", id=f"run-{model}", task_queue=queue, conversation_id="c1"
    )
    await asyncio.to_thread(wait_for_round, server, model, 2)
    workers.kill(first)
    workers.start(*args)
    result = await agent.result(handle)

    assert result.output == AGENT_FINAL
    _assert_ran_once_except_the_killed_round(server, model)
    assert _tool_calls(tool_file) == ["1", "2"]
    assert stored(memory_db, "c1") == [UserMessage("Record 1 and 2."), AssistantMessage(AGENT_FINAL)]


async def test_dbos_run_survives_a_killed_process(
    server: ScriptedServer, system_db: str, workers: Workers, tmp_path: Path
) -> None:
    model, workflow_id = f"hang2-{uuid.uuid4().hex}", f"run-{uuid.uuid4().hex}"
    tool_file, memory_db, result_file = (
        tmp_path / "tools.txt",
        tmp_path / "memory.sqlite",
        tmp_path / "result.json",
    )
    common = (server.base_url, model, str(tool_file), str(memory_db), str(result_file))
    first = workers.start("dbos", system_db, "start", workflow_id, *common)
    await asyncio.to_thread(wait_for_round, server, model, 2)
    workers.kill(first)
    second = workers.start("dbos", system_db, "finish", workflow_id, *common, wait_ready=False)
    assert await asyncio.to_thread(second.wait, 600) == 0

    assert json.loads(result_file.read_text(encoding="utf-8")) == {"output": AGENT_FINAL}
    _assert_ran_once_except_the_killed_round(server, model)
    assert _tool_calls(tool_file) == ["1", "2"]
    assert stored(memory_db, "c1") == [UserMessage("Record 1 and 2."), AssistantMessage(AGENT_FINAL)]


def _wait_for_file(path: Path) -> None:
    for _ in range(1200):
        if path.exists():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{path} never appeared within 60 s")


def _assert_paid_once(tool_file: Path, run_id: str) -> None:
    key = f"{run_id}/call_pay"
    # The call in flight at the kill ran again, with the same key both times...
    assert attempts_file(tool_file).read_text(encoding="utf-8").split() == [key, key]
    assert hang_file(tool_file).read_text(encoding="utf-8") == key
    # ...and the tool, keyed on it, paid once.
    assert tool_file.read_text(encoding="utf-8").splitlines() == [f"paid 5 {key}"]


async def test_temporal_a_tool_killed_mid_call_deduplicates_on_run_id_and_tool_call_id(
    server: ScriptedServer, temporal_env: object, workers: Workers, tmp_path: Path
) -> None:
    from temporalio.testing import WorkflowEnvironment

    from advisorchain.durable.temporal import TemporalAgent
    from tests.durable.agent_app import build_client

    assert isinstance(temporal_env, WorkflowEnvironment)
    model, queue = f"pay-{uuid.uuid4().hex}", f"q-{uuid.uuid4().hex}"
    tool_file, memory_db = tmp_path / "tools.txt", tmp_path / "memory.sqlite"
    target = temporal_env.client.service_client.config.target_host
    args = ("temporal", target, queue, server.base_url, model, str(tool_file), str(memory_db))
    first = workers.start(*args)
    agent = TemporalAgent(build_client(server.base_url, model, tool_file, memory_db), name="crashtest")
    run_id = f"run-{model}"
    handle = await agent.start(
        temporal_env.client, "Pay 5.", id=run_id, task_queue=queue, conversation_id="c1"
    )
    await asyncio.to_thread(_wait_for_file, hang_file(tool_file))
    workers.kill(first)
    workers.start(*args)
    result = await agent.result(handle)

    assert result.output == AGENT_FINAL
    _assert_paid_once(tool_file, run_id)
    assert round_counts(server)[(model, 1)] == 1  # the model call before the tool was not repeated


async def test_dbos_a_tool_killed_mid_call_deduplicates_on_run_id_and_tool_call_id(
    server: ScriptedServer, system_db: str, workers: Workers, tmp_path: Path
) -> None:
    model, workflow_id = f"pay-{uuid.uuid4().hex}", f"run-{uuid.uuid4().hex}"
    tool_file, memory_db, result_file = (
        tmp_path / "tools.txt",
        tmp_path / "memory.sqlite",
        tmp_path / "result.json",
    )
    common = (server.base_url, model, str(tool_file), str(memory_db), str(result_file))
    first = workers.start("dbos", system_db, "start", workflow_id, *common)
    await asyncio.to_thread(_wait_for_file, hang_file(tool_file))
    workers.kill(first)
    second = workers.start("dbos", system_db, "finish", workflow_id, *common, wait_ready=False)
    assert await asyncio.to_thread(second.wait, 60) == 0

    assert json.loads(result_file.read_text(encoding="utf-8")) == {"output": AGENT_FINAL}
    _assert_paid_once(tool_file, workflow_id)
    assert round_counts(server)[(model, 1)] == 1
