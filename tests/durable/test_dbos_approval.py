"""Approval inside durable runs on DBOS (SQLite and PostgreSQL): the run publishes its pending calls
(an event), waits with recv for the decisions, resumes, and survives a killed process and a
relaunched DBOS runtime."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from advisorchain import AssistantMessage, ChainConfigurationError, ChatClient, Denied, ToolCall, tool
from advisorchain.testing import ScriptedChatModel
from tests.durable.agent_app import build_client
from tests.durable.approval_checks import CALLS, assert_decided_once
from tests.durable.worker_processes import Workers
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import AGENT_FINAL

dbos = pytest.importorskip("dbos")

from advisorchain.durable.dbos import DBOSAgent  # noqa: E402

DBOS = dbos.DBOS
DECISIONS = {"call_a": True, "call_b": Denied("not now")}


def _config(url: str) -> dict[str, Any]:
    return {
        "name": "advisorchain-approval-test",
        "system_database_url": url,
        "notification_listener_polling_interval_sec": 0.05,
    }


@pytest.fixture
def launch(system_db: str) -> Iterator[Callable[[], None]]:
    """Launch DBOS on a fresh system database (after the test built its agents); destroyed after."""

    def start() -> None:
        DBOS(config=_config(system_db))  # type: ignore[arg-type]
        DBOS.launch()

    yield start
    DBOS.destroy(destroy_registry=True)


async def _waiting(agent: DBOSAgent[Any], workflow_id: str) -> tuple[ToolCall, ...]:
    """The pending calls, once the run waits for them (polled: the test has no other signal)."""
    deadline = time.monotonic() + 600  # a bound for a hang: a busy machine may take minutes
    while time.monotonic() < deadline:
        pending = await agent.pending(workflow_id)
        if pending:
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {workflow_id!r} never waited for approval")


def _agent(server: ScriptedServer, tmp_path: Path, name: str = "approver") -> tuple[DBOSAgent[Any], str]:
    model = f"approve-{uuid.uuid4().hex}"
    client = build_client(server.base_url, model, tmp_path / "tools.txt", tmp_path / "memory.sqlite")
    return DBOSAgent(client, name=name), model


async def _close(agent: DBOSAgent[Any]) -> None:
    """Close the in-process OpenAI client's pooled connections to the scripted server."""
    await agent.parts.client.model.client.close()  # type: ignore[attr-defined]


async def test_a_run_waits_for_decisions_then_runs_the_approved_call_and_answers_the_denied_one(
    server: ScriptedServer, launch: Callable[[], None], tmp_path: Path
) -> None:
    agent, model = _agent(server, tmp_path)
    launch()
    await agent.start("Record 1 and 2.", conversation_id="c1", workflow_id="w1")
    pending = await _waiting(agent, "w1")
    await agent.decide("w1", DECISIONS)
    result = await agent.result("w1")
    after = await agent.pending("w1")
    await _close(agent)

    assert pending == CALLS
    assert result.output == AGENT_FINAL
    assert after == ()
    assert_decided_once(server, model, tmp_path / "tools.txt", tmp_path / "memory.sqlite")


async def test_without_memory_the_run_resumes_from_its_history(launch: Callable[[], None]) -> None:
    ran: list[int] = []

    @tool(requires_approval=True)
    def charge(cents: int) -> str:
        """Charge a card."""
        ran.append(cents)
        return "charged"

    model = ScriptedChatModel([AssistantMessage(tool_calls=[ToolCall("c1", "charge", '{"cents": 5}')]), "no"])
    agent = DBOSAgent(ChatClient(model, default_tools=[charge]), name="history")
    launch()
    await agent.start("Pay.", system="Be brief.", workflow_id="w2")
    await _waiting(agent, "w2")
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


async def test_decisions_that_do_not_match_the_pending_calls_are_refused_and_nothing_is_sent(
    server: ScriptedServer, launch: Callable[[], None], tmp_path: Path
) -> None:
    agent, _ = _agent(server, tmp_path)
    launch()
    await agent.start("Record 1 and 2.", conversation_id="c1", workflow_id="w3")
    await _waiting(agent, "w3")
    with pytest.raises(ChainConfigurationError, match=r"'call_b' \(tool 'guarded'\)"):
        await agent.decide("w3", {"call_a": True})
    with pytest.raises(ChainConfigurationError, match=r"\['call_x'\]"):
        await agent.decide("w3", {**DECISIONS, "call_x": True})
    with pytest.raises(ChainConfigurationError, match="'nobody' is not waiting"):
        await agent.decide("nobody", DECISIONS)
    still = await agent.pending("w3")
    await DBOS.cancel_workflow_async("w3")
    await _close(agent)

    assert still == CALLS


async def test_a_streamed_run_ends_its_stream_waiting_for_approval_and_streams_on_after_the_decision(
    server: ScriptedServer, launch: Callable[[], None], tmp_path: Path
) -> None:
    agent, model = _agent(server, tmp_path, name="approvestream")
    launch()
    first = [c async for c in agent.stream("Record 1 and 2.", conversation_id="c1", workflow_id="w4")]
    await agent.decide("w4", DECISIONS)
    rest = [c async for c in agent.chunks("w4", offset=len(first))]
    result = await agent.result("w4")

    assert first[-1].metadata.finish_reason == "approvalRequired"
    assert tuple(first[-1].result.output.tool_calls) == CALLS
    assert "".join(c.text or "" for c in rest) == AGENT_FINAL
    assert result.output == AGENT_FINAL
    assert_decided_once(server, model, tmp_path / "tools.txt", tmp_path / "memory.sqlite")


async def test_an_approval_waits_across_a_relaunched_dbos_runtime(
    server: ScriptedServer, system_db: str, tmp_path: Path
) -> None:
    agent, model = _agent(server, tmp_path)
    DBOS(config=_config(system_db))  # type: ignore[arg-type]
    DBOS.launch()
    try:
        await agent.start("Record 1 and 2.", conversation_id="c1", workflow_id="w5")
        await _waiting(agent, "w5")
        DBOS.destroy()  # the runtime goes away while the run waits; the database keeps it
        DBOS(config=_config(system_db))  # type: ignore[arg-type]
        DBOS.launch()  # recovers the waiting run
        pending = await _waiting(agent, "w5")
        await agent.decide("w5", DECISIONS)
        result = await agent.result("w5")
        await _close(agent)
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
    common = (server.base_url, model, str(tool_file), str(memory_db), str(result_file))
    first = workers.start("dbos", system_db, "await-approval", workflow_id, *common)
    workers.kill(first)
    second = workers.start("dbos", system_db, "decide", workflow_id, *common, wait_ready=False)
    assert await asyncio.to_thread(second.wait, 600) == 0

    assert json.loads(result_file.read_text(encoding="utf-8")) == {"output": AGENT_FINAL}
    assert_decided_once(server, model, tool_file, memory_db)
