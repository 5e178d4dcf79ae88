"""Approval inside durable runs on DBOS (SQLite and PostgreSQL), what is DBOS's own: a run without
memory resumes from its history, decisions for a run that is not waiting, a relaunched runtime and
a killed process while the run waits (what both engines promise is in test_durable_approval.py)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from advisorchain import AssistantMessage, ChainConfigurationError, ChatClient, Denied, ToolCall, tool
from advisorchain.testing import ScriptedChatModel
from tests.durable.agent_app import build_client
from tests.durable.approval_checks import CALLS, assert_decided_once
from tests.durable.engines import DBOSEngine, close_model, launch_dbos, waiting
from tests.durable.worker_processes import Workers
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import AGENT_FINAL

dbos = pytest.importorskip("dbos")

from advisorchain.durable.dbos import DBOSAgent  # noqa: E402

DBOS = dbos.DBOS
DECISIONS = {"call_a": True, "call_b": Denied("not now")}


async def test_without_memory_the_run_resumes_from_its_history(launch: Callable[..., None], system_db: str) -> None:
    ran: list[int] = []

    @tool(requires_approval=True)
    def charge(cents: int) -> str:
        """Charge a card."""
        ran.append(cents)
        return "charged"

    model = ScriptedChatModel([AssistantMessage(tool_calls=[ToolCall("c1", "charge", '{"cents": 5}')]), "no"])
    agent = DBOSAgent(ChatClient(model, default_tools=[charge]), name="history")
    launch(system_db)
    await agent.start("Pay.", system="Be brief.", workflow_id="w2")
    await waiting(DBOSEngine(system_db), agent, "w2")
    await agent.decide("w2", {"c1": Denied()})
    result = await agent.result("w2")

    assert result.output == "no"
    assert ran == []
    assert model.prompts[1].instructions[-1].responses[0].response_data == (  # type: ignore[union-attr]
        "Error: the user denied this tool call"
    )
    assert [type(m).__name__ for m in model.prompts[1].instructions] == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
    ]


async def test_decisions_for_a_run_that_is_not_waiting_are_refused_naming_it(
    launch: Callable[..., None], system_db: str
) -> None:
    agent = DBOSAgent(ChatClient(ScriptedChatModel([])), name="approver")
    launch(system_db)
    with pytest.raises(ChainConfigurationError, match="'nobody' is not waiting"):
        await agent.decide("nobody", DECISIONS)


async def test_an_approval_waits_across_a_relaunched_dbos_runtime(
    server: ScriptedServer, system_db: str, tmp_path: Path
) -> None:
    model = f"approve-{uuid.uuid4().hex}"
    engine = DBOSEngine(system_db)
    agent = engine.agent(
        build_client(server.base_url, model, tmp_path / "tools.txt", tmp_path / "memory.sqlite"), name="approver"
    )
    launch_dbos(system_db)
    try:
        await agent.start("Record 1 and 2.", conversation_id="c1", workflow_id="w5")
        await waiting(engine, agent, "w5")
        DBOS.destroy()  # the runtime goes away while the run waits; the database keeps it
        launch_dbos(system_db)  # recovers the waiting run
        pending = await waiting(engine, agent, "w5")
        await agent.decide("w5", DECISIONS)
        result = await agent.result("w5")
        await close_model(agent)
    finally:
        DBOS.destroy(destroy_registry=True)

    assert pending == CALLS
    assert result.output == AGENT_FINAL
    assert_decided_once(server, model, tmp_path / "tools.txt", tmp_path / "memory.sqlite")


async def test_an_approval_waits_across_a_killed_process(
    server: ScriptedServer, system_db: str, workers: Workers, tmp_path: Path
) -> None:
    model, workflow_id = f"approve-{uuid.uuid4().hex}", f"run-{uuid.uuid4().hex}"
    tool_file, memory_db, result_file = (
        tmp_path / "tools.txt",
        tmp_path / "memory.sqlite",
        tmp_path / "result.json",
    )
    args = ("agent", system_db, workflow_id, str(result_file), server.base_url, model, str(tool_file), str(memory_db))
    first = workers.start("dbos", "await-approval", *args)
    workers.kill(first)
    second = workers.start("dbos", "decide", *args, wait_ready=False)
    assert await asyncio.to_thread(second.wait, 600) == 0

    assert json.loads(result_file.read_text(encoding="utf-8")) == {"output": AGENT_FINAL}
    assert_decided_once(server, model, tool_file, memory_db)
