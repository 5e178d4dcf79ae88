"""A durable run with a handoff (API.md §18, §12): triage hands the conversation to billing, the
worker is SIGKILLed during billing's first model call (between the two agents) and restarted; the
run resumes inside billing — triage's model call and the handoff are not repeated, billing's round
is sent billing's instructions and tools — on Temporal and on DBOS (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from advisorchain import AssistantMessage, UserMessage
from tests.durable.agent_app import stored
from tests.durable.engines import Crash
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import AGENT_FINAL, agent_round, round_counts, wait_for_round

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_run_killed_between_two_agents_resumes_in_the_target(
    crash: Crash, server: ScriptedServer, tmp_path: Path
) -> None:
    model = f"handoff-{uuid.uuid4().hex}"
    tool_file, memory_db = tmp_path / "tools.txt", tmp_path / "memory.sqlite"
    await crash.start("agents", server.base_url, model, str(tool_file), str(memory_db))
    await asyncio.to_thread(wait_for_round, server, model, 2)
    output = await crash.finish()

    assert output == AGENT_FINAL
    counts = round_counts(server)
    assert counts[(model, 1)] == 1  # triage's call (the handoff): recorded, never repeated
    assert counts[(model, 2)] == 2  # billing's first call: cut by the kill, sent again
    assert counts[(model, 3)] == 1
    bodies = [b for b in server.bodies if b["model"] == model]
    systems = {agent_round(b)[1]: b["messages"][0]["content"] for b in bodies}
    assert systems == {1: "You are triage.", 2: "You are billing.", 3: "You are billing."}
    second = [b for b in bodies if agent_round(b)[1] == 2]
    assert all([t["function"]["name"] for t in b["tools"]] == ["record"] for b in second)
    handed = [m for m in second[-1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in handed] == ["Transferred to billing."]
    assert tool_file.read_text(encoding="utf-8").split() == ["2"]
    conversation = stored(memory_db, "c1")
    assert conversation[0] == UserMessage("Record 2, billing.")
    assert conversation[1] == AssistantMessage(AGENT_FINAL, metadata={"agent": "billing"})
