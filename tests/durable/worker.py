"""A worker process for the crash tests: serves a test agent on Temporal or DBOS until killed.

    python -m tests.durable.worker temporal APP TARGET TASK_QUEUE PART...
    python -m tests.durable.worker dbos MODE APP SYSTEM_DB_URL WORKFLOW_ID RESULT_FILE PART...

APP is ``agent`` or ``agents`` (``agent_app``, one agent or two with a handoff; PART: BASE_URL
MODEL TOOL_FILE MEMORY_DB) or ``rag`` (``rag_app``;
PART: BASE_URL MODEL TOOL_FILE KNOWLEDGE_DB QUERY_FILE). ``dbos start`` launches DBOS, starts the
run and waits to be killed; ``dbos finish`` launches DBOS (which resumes the pending run), waits for
the run and writes its result as JSON. ``dbos await-approval`` starts the run, says READY once it
waits for approval and waits to be killed; ``dbos decide`` launches DBOS (resuming the waiting run),
approves ``call_a``, denies ``call_b`` (reason ``not now``) and writes the run's result like
``finish``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from advisorchain import ChatClient


def _agent_client(base_url: str, model: str, tool_file: str, memory_db: str) -> ChatClient:
    from tests.durable.agent_app import build_client

    return build_client(base_url, model, Path(tool_file), Path(memory_db))


def _agents_client(base_url: str, model: str, tool_file: str, memory_db: str) -> ChatClient:
    from tests.durable.agent_app import build_agents_client

    return build_agents_client(base_url, model, Path(tool_file), Path(memory_db))


def _rag_client(base_url: str, model: str, tool_file: str, knowledge_db: str, query_file: str) -> ChatClient:
    from tests.durable.rag_app import build_rag_client

    return build_rag_client(base_url, model, Path(tool_file), Path(knowledge_db), Path(query_file))


@dataclass(frozen=True)
class App:
    """An agent a worker serves: how to build it from the PART arguments, its name, how long an
    activity may run (a killed worker's activity is retried once it has passed; every other one ends
    well within it on a busy machine), the question a run asks and its conversation."""

    build: Callable[..., ChatClient]
    name: str
    timeout: timedelta
    question: str
    conversation_id: str | None


APPS = {
    "agent": App(_agent_client, "crashtest", timedelta(seconds=10), "Record 1 and 2.", "c1"),
    "agents": App(_agents_client, "handofftest", timedelta(seconds=10), "Record 2, billing.", "c1"),
    "rag": App(
        _rag_client, "ragcrash", timedelta(seconds=2), "Which slot holds back WAL? Record 1 and 2.", None
    ),
}


async def temporal_worker(app: str, target: str, task_queue: str, *parts: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from advisorchain.durable.temporal import TemporalAgent

    served = APPS[app]
    agent = TemporalAgent(served.build(*parts), name=served.name, start_to_close_timeout=served.timeout)
    client = await Client.connect(target)
    # No sticky cache: a replacement worker takes over the run's next workflow task at once.
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[agent.workflow],
        activities=agent.activities,
        max_cached_workflows=0,
    ):
        print("READY", flush=True)
        await asyncio.Event().wait()


async def waiting(agent: Any, workflow_id: str) -> None:
    """Return once run ``workflow_id`` waits for approval."""
    deadline = time.monotonic() + 600  # a bound for a hang: a busy machine may take minutes
    while time.monotonic() < deadline:
        if await agent.pending(workflow_id):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"run {workflow_id!r} never waited for approval")


def dbos_worker(mode: str, app: str, url: str, workflow_id: str, result_file: str, *parts: str) -> None:
    from dbos import DBOS

    from advisorchain import Denied
    from advisorchain.durable.dbos import DBOSAgent
    from tests.durable.engines import launch_dbos

    served = APPS[app]
    agent = DBOSAgent(served.build(*parts), name=served.name)
    launch_dbos(url)
    options = {"conversation_id": served.conversation_id} if served.conversation_id else {}

    async def main() -> object:
        if mode in ("start", "await-approval"):
            await agent.start(served.question, workflow_id=workflow_id, **options)
            if mode == "await-approval":
                await waiting(agent, workflow_id)
            print("READY", flush=True)
            await asyncio.Event().wait()
        if mode == "decide":
            await waiting(agent, workflow_id)
            await agent.decide(workflow_id, {"call_a": True, "call_b": Denied("not now")})
        return (await agent.result(workflow_id)).output

    try:
        output = asyncio.run(main())
    finally:
        DBOS.destroy()
    Path(result_file).write_text(json.dumps({"output": output}), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1] == "temporal":
        asyncio.run(temporal_worker(*sys.argv[2:]))
    else:
        dbos_worker(*sys.argv[2:])
