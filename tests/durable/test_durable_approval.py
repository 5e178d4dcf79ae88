"""Approval inside durable runs, on Temporal and on DBOS (SQLite and PostgreSQL): the run waits for
decisions (Temporal: a query of the pending calls and an update; DBOS: an event and recv), then runs
the approved call once and answers the denied one; a streamed run ends its stream at the wait; and
decisions that do not match the pending calls are refused with nothing sent.
``test_temporal_approval.py`` and ``test_dbos_approval.py`` hold what is each engine's own."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from advisorchain import ChainConfigurationError, Denied
from tests.durable.agent_app import build_client
from tests.durable.approval_checks import CALLS, assert_decided_once
from tests.durable.engines import Engine, close_model, waiting
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import AGENT_FINAL

pytestmark = pytest.mark.asyncio(loop_scope="session")

DECISIONS = {"call_a": True, "call_b": Denied("not now")}


def _agent(engine: Engine, server: ScriptedServer, tmp_path: Path, name: str = "approver") -> tuple[Any, str]:
    model = f"approve-{uuid.uuid4().hex}"
    client = build_client(server.base_url, model, tmp_path / "tools.txt", tmp_path / "memory.sqlite")
    return engine.agent(client, name=name), model


async def test_a_run_waits_for_decisions_then_runs_the_approved_call_and_answers_the_denied_one(
    engine: Engine, server: ScriptedServer, tmp_path: Path
) -> None:
    agent, model = _agent(engine, server, tmp_path)
    async with engine.serving(agent):
        run = await engine.start(agent, "Record 1 and 2.", conversation_id="c1")
        pending = await waiting(engine, agent, run)
        await agent.decide(run, DECISIONS)
        result = await agent.result(run)
        after = await agent.pending(run)
    await close_model(agent)

    assert pending == CALLS
    assert result.output == AGENT_FINAL
    assert after == ()
    assert_decided_once(server, model, tmp_path / "tools.txt", tmp_path / "memory.sqlite")


async def test_decisions_that_miss_or_add_a_call_are_refused_naming_it_and_nothing_is_sent(
    engine: Engine, server: ScriptedServer, tmp_path: Path
) -> None:
    agent, _ = _agent(engine, server, tmp_path)
    async with engine.serving(agent):
        run = await engine.start(agent, "Record 1 and 2.", conversation_id="c1")
        await waiting(engine, agent, run)
        with pytest.raises(ChainConfigurationError, match=r"'call_b' \(tool 'guarded'\)"):
            await agent.decide(run, {"call_a": True})
        with pytest.raises(ChainConfigurationError, match=r"\['call_x'\]"):
            await agent.decide(run, {**DECISIONS, "call_x": True})
        still = await agent.pending(run)
        await engine.cancel(run)
    await close_model(agent)

    assert still == CALLS


async def test_a_streamed_run_ends_its_stream_waiting_for_approval_and_streams_on_after_the_decision(
    engine: Engine, server: ScriptedServer, tmp_path: Path
) -> None:
    agent, model = _agent(engine, server, tmp_path, name="approvestream")
    async with engine.serving(agent):
        first, run = await engine.stream(agent, "Record 1 and 2.", conversation_id="c1")
        await agent.decide(run, DECISIONS)
        rest = [c async for c in agent.chunks(run, offset=len(first))]
        result = await agent.result(run)
    await close_model(agent)

    assert first[-1].metadata.finish_reason == "approvalRequired"
    assert tuple(first[-1].result.output.tool_calls) == CALLS
    assert "".join(c.text or "" for c in rest) == AGENT_FINAL
    assert result.output == AGENT_FINAL
    assert_decided_once(server, model, tmp_path / "tools.txt", tmp_path / "memory.sqlite")
