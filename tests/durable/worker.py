"""A worker process for the crash tests: serves the test agent on Temporal or DBOS until killed.

    python -m tests.durable.worker temporal TARGET TASK_QUEUE BASE_URL MODEL TOOL_FILE MEMORY_DB
    python -m tests.durable.worker dbos SYSTEM_DB_URL start|finish WORKFLOW_ID BASE_URL MODEL TOOL_FILE MEMORY_DB RESULT_FILE

``dbos ... start`` launches DBOS, starts the run and waits to be killed; ``dbos ... finish``
launches DBOS (which resumes the pending run), waits for the run and writes its result as JSON.
``dbos ... await-approval`` starts the run, says READY once it waits for approval and waits to be
killed; ``dbos ... decide`` launches DBOS (resuming the waiting run), approves ``call_a``, denies
``call_b`` (reason ``not now``) and writes the run's result like ``finish``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.durable.agent_app import build_client

AGENT_NAME = "crashtest"
TIMEOUT = timedelta(seconds=10)
"""How long an activity may run: a killed worker's activity is retried once it has passed, and every
other activity (a call to the loopback model server, a tool) ends well within it on a busy machine."""


async def temporal_worker(
    target: str, task_queue: str, base_url: str, model: str, tool_file: str, memory_db: str
) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from advisorchain.durable.temporal import TemporalAgent

    agent = TemporalAgent(
        build_client(base_url, model, Path(tool_file), Path(memory_db)),
        name=AGENT_NAME,
        start_to_close_timeout=TIMEOUT,
    )
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


def dbos_worker(
    url: str,
    mode: str,
    workflow_id: str,
    base_url: str,
    model: str,
    tool_file: str,
    memory_db: str,
    result_file: str,
) -> None:
    from dbos import DBOS

    from advisorchain import Denied
    from advisorchain.durable.dbos import DBOSAgent

    agent = DBOSAgent(build_client(base_url, model, Path(tool_file), Path(memory_db)), name=AGENT_NAME)
    DBOS(
        config={
            "name": "advisorchain-durable-test",
            "system_database_url": url,
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()

    async def main() -> object:
        if mode in ("start", "await-approval"):
            await agent.start("Record 1 and 2.", conversation_id="c1", workflow_id=workflow_id)
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
        asyncio.run(temporal_worker(*sys.argv[2:8]))
    else:
        dbos_worker(*sys.argv[2:10])
