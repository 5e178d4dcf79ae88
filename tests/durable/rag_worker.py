"""A worker process for the retrieval crash tests: serves the retrieval agent (``rag_app``) on
Temporal or DBOS until killed, as ``worker.py`` does for the plain agent.

    python rag_worker.py temporal TARGET TASK_QUEUE BASE_URL MODEL TOOL_FILE KNOWLEDGE_DB QUERY_FILE
    python rag_worker.py dbos SYSTEM_DB_URL start|finish WORKFLOW_ID BASE_URL MODEL TOOL_FILE KNOWLEDGE_DB QUERY_FILE RESULT_FILE
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rag_app import build_rag_client

AGENT_NAME = "ragcrash"
TIMEOUT = timedelta(seconds=2)
QUESTION = "Which slot holds back WAL? Record 1 and 2."


async def temporal_worker(target: str, task_queue: str, *parts: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from advisorchain.durable.temporal import TemporalAgent

    base_url, model, tool_file, knowledge_db, query_file = parts
    client = build_rag_client(base_url, model, Path(tool_file), Path(knowledge_db), Path(query_file))
    agent = TemporalAgent(client, name=AGENT_NAME, start_to_close_timeout=TIMEOUT)
    temporal = await Client.connect(target)
    async with Worker(
        temporal, task_queue=task_queue, workflows=[agent.workflow], activities=agent.activities, max_cached_workflows=0
    ):
        print("READY", flush=True)
        await asyncio.Event().wait()


def dbos_worker(url: str, mode: str, workflow_id: str, *parts: str) -> None:
    from dbos import DBOS

    from advisorchain.durable.dbos import DBOSAgent

    base_url, model, tool_file, knowledge_db, query_file, result_file = parts
    client = build_rag_client(base_url, model, Path(tool_file), Path(knowledge_db), Path(query_file))
    agent = DBOSAgent(client, name=AGENT_NAME)
    DBOS(
        config={
            "name": "advisorchain-durable-rag-test",
            "system_database_url": url,
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()

    async def main() -> object:
        if mode == "start":
            await agent.start(QUESTION, workflow_id=workflow_id)
            print("READY", flush=True)
            await asyncio.Event().wait()
        return (await agent.result(workflow_id)).output

    try:
        output = asyncio.run(main())
    finally:
        DBOS.destroy()
    Path(result_file).write_text(json.dumps({"output": output}), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1] == "temporal":
        asyncio.run(temporal_worker(*sys.argv[2:9]))
    else:
        dbos_worker(*sys.argv[2:12])
