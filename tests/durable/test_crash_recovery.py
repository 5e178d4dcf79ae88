"""A 3-round tool loop whose worker is SIGKILLed during round 2 and restarted: the run finishes,
round 1's model and tool calls ran exactly once, and the stored conversation is exact — on
Temporal and on DBOS (SQLite and PostgreSQL). And a worker SIGKILLed in the middle of a tool call:
the call runs again (as documented) with the same ``(run_id, tool_call_id)`` in its ToolContext, so
a tool that keys its side effect on it pays once."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from advisorchain import AssistantMessage, UserMessage
from tests.durable.agent_app import attempts_file, hang_file, stored
from tests.durable.engines import Crash
from tests.support.openai_server import ScriptedServer
from tests.support.scripts import AGENT_FINAL, round_counts, wait_for_round

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _files(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "tools.txt", tmp_path / "memory.sqlite"


async def test_a_run_survives_a_killed_worker(crash: Crash, server: ScriptedServer, tmp_path: Path) -> None:
    model = f"hang2-{uuid.uuid4().hex}"
    tool_file, memory_db = _files(tmp_path)
    await crash.start("agent", server.base_url, model, str(tool_file), str(memory_db))
    await asyncio.to_thread(wait_for_round, server, model, 2)
    output = await crash.finish()

    assert output == AGENT_FINAL
    counts = round_counts(server)
    assert counts[(model, 1)] == 1  # round 1: recorded, never repeated
    assert counts[(model, 2)] == 2  # round 2: cut by the kill, retried once
    assert counts[(model, 3)] == 1
    assert tool_file.read_text(encoding="utf-8").split() == ["1", "2"]
    assert stored(memory_db, "c1") == [UserMessage("Record 1 and 2."), AssistantMessage(AGENT_FINAL)]


def _wait_for_file(path: Path) -> None:
    for _ in range(1200):
        if path.exists():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{path} never appeared within 60 s")


async def test_a_tool_killed_mid_call_deduplicates_on_run_id_and_tool_call_id(
    crash: Crash, server: ScriptedServer, tmp_path: Path
) -> None:
    model = f"pay-{uuid.uuid4().hex}"
    tool_file, memory_db = _files(tmp_path)
    await crash.start("agent", server.base_url, model, str(tool_file), str(memory_db))
    await asyncio.to_thread(_wait_for_file, hang_file(tool_file))
    output = await crash.finish()

    assert output == AGENT_FINAL
    key = f"{crash.run_id}/call_pay"
    # The call in flight at the kill ran again, with the same key both times...
    assert attempts_file(tool_file).read_text(encoding="utf-8").split() == [key, key]
    assert hang_file(tool_file).read_text(encoding="utf-8") == key
    # ...and the tool, keyed on it, paid once.
    assert tool_file.read_text(encoding="utf-8").splitlines() == [f"paid 5 {key}"]
    assert round_counts(server)[(model, 1)] == 1  # the model call before the tool was not repeated
