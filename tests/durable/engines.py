"""The two durable engines behind one face, so that a test of what both promise runs on each:
``Engine`` serves an agent in this process (Temporal with an in-process worker on the session's dev
server, DBOS launched on a SQLite or PostgreSQL system database); ``Crash`` runs it in worker
processes (``python -m tests.durable.worker``) that a test kills and replaces.

A run is named the engine's way (a Temporal workflow handle, a DBOS workflow id); the agents'
``result``, ``pending``, ``decide`` and ``chunks`` take either, so a test passes it on unchanged."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from advisorchain import ChatClient, ChatResponse, ToolCall
from tests.durable.worker import APPS
from tests.durable.worker_processes import Workers

ENGINES = ["temporal", "dbos-sqlite", "dbos-postgres"]
"""Every engine a durable promise is tested on: Temporal, and DBOS on each system database."""


class Engine(Protocol):
    """An engine that serves agents in this process."""

    def agent(self, client: ChatClient, **options: Any) -> Any:
        """The engine's durable agent around ``client`` (``name=`` and the agent's other options)."""

    def serving(self, agent: Any) -> AbstractAsyncContextManager[None]:
        """Inside, ``agent``'s runs make progress (a Temporal worker polls; DBOS is launched)."""

    async def start(self, agent: Any, prompt: str, **options: Any) -> Any:
        """Start a run of ``agent`` (a fresh id) and return the run."""

    async def stream(self, agent: Any, prompt: str, **options: Any) -> tuple[list[ChatResponse], Any]:
        """Start a run, read its stream to the end (or to a wait for approval); chunks and the run."""

    async def steps(self, run: Any) -> list[str]:
        """The names of the recorded steps (DBOS) or scheduled activities (Temporal) of ``run``."""

    async def pending(self, agent: Any, run: Any) -> tuple[ToolCall, ...]:
        """The calls ``run`` waits for (none while the engine cannot tell yet)."""

    async def cancel(self, run: Any) -> None:
        """End ``run`` where it stands."""


class TemporalEngine:
    """Temporal: the session's dev server, a worker in this process on a task queue of its own."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.queue = f"q-{uuid.uuid4().hex}"

    def agent(self, client: ChatClient, **options: Any) -> Any:
        from advisorchain.durable.temporal import TemporalAgent

        return TemporalAgent(client, **options)

    @asynccontextmanager
    async def serving(self, agent: Any) -> AsyncIterator[None]:
        from temporalio.worker import Worker

        async with Worker(
            self.env.client, task_queue=self.queue, workflows=[agent.workflow], activities=agent.activities
        ):
            yield

    async def start(self, agent: Any, prompt: str, **options: Any) -> Any:
        return await agent.start(self.env.client, prompt, id=_run_id(), task_queue=self.queue, **options)

    async def stream(self, agent: Any, prompt: str, **options: Any) -> tuple[list[ChatResponse], Any]:
        run_id = _run_id()
        chunks = [
            c async for c in agent.stream(self.env.client, prompt, id=run_id, task_queue=self.queue, **options)
        ]
        return chunks, self.env.client.get_workflow_handle(run_id)

    async def steps(self, run: Any) -> list[str]:
        history = await run.fetch_history()
        return [
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
        ]

    async def pending(self, agent: Any, run: Any) -> tuple[ToolCall, ...]:
        from temporalio.service import RPCError

        try:
            return tuple(await agent.pending(run))
        except RPCError:  # a query needs a worker, which may not have polled yet
            return ()

    async def cancel(self, run: Any) -> None:
        await run.terminate()


class DBOSEngine:
    """DBOS in this process, launched once (after the test built its agents) on ``system_db``."""

    def __init__(self, system_db: str) -> None:
        self.system_db = system_db
        self.loop: asyncio.AbstractEventLoop | None = None  # where DBOS was launched

    def agent(self, client: ChatClient, **options: Any) -> Any:
        from advisorchain.durable.dbos import DBOSAgent

        return DBOSAgent(client, **options)

    @asynccontextmanager
    async def serving(self, agent: Any) -> AsyncIterator[None]:
        if self.loop is None:
            launch_dbos(self.system_db)
            self.loop = asyncio.get_running_loop()
        yield

    async def start(self, agent: Any, prompt: str, **options: Any) -> Any:
        run_id = _run_id()
        await agent.start(prompt, workflow_id=run_id, **options)
        return run_id

    async def stream(self, agent: Any, prompt: str, **options: Any) -> tuple[list[ChatResponse], Any]:
        run_id = _run_id()
        return [c async for c in agent.stream(prompt, workflow_id=run_id, **options)], run_id

    async def steps(self, run: Any) -> list[str]:
        from dbos import DBOS

        return [s["function_name"] for s in await DBOS.list_workflow_steps_async(run)]

    async def pending(self, agent: Any, run: Any) -> tuple[ToolCall, ...]:
        return tuple(await agent.pending(run))

    async def cancel(self, run: Any) -> None:
        from dbos import DBOS

        await DBOS.cancel_workflow_async(run)

    def close(self) -> None:
        """Destroy DBOS and its registry; give the loop it ran on a live default executor again
        (DBOS made its own that loop's default, and shut it down)."""
        from dbos import DBOS

        DBOS.destroy(destroy_registry=True)
        if self.loop is not None:
            self.loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="durable-tests"))


def dbos_config(system_db: str) -> dict[str, Any]:
    """The DBOS configuration of the tests (fast notifications, so a decision arrives at once)."""
    return {
        "name": "advisorchain-durable-test",
        "system_database_url": system_db,
        "notification_listener_polling_interval_sec": 0.05,
    }


def launch_dbos(system_db: str) -> None:
    """Configure and launch DBOS on ``system_db`` (after the agents were built)."""
    from dbos import DBOS

    DBOS(config=dbos_config(system_db))  # type: ignore[arg-type]
    DBOS.launch()


async def waiting(engine: Engine, agent: Any, run: Any) -> tuple[ToolCall, ...]:
    """The pending calls, once ``run`` waits for them (polled: the test has no other signal)."""
    deadline = time.monotonic() + 600  # a bound for a hang: a busy machine may take minutes
    while time.monotonic() < deadline:
        if pending := await engine.pending(agent, run):
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run!r} never waited for approval")


async def close_model(agent: Any) -> None:
    """Close the in-process OpenAI client's pooled connections to the scripted server."""
    await agent.parts.client.model.client.close()


def _run_id() -> str:
    return f"run-{uuid.uuid4().hex}"


# -- runs in worker processes ----------------------------------------------------------------------


class Crash(Protocol):
    """An engine whose runs are served by worker processes the test kills."""

    run_id: str

    async def start(self, app: str, *parts: str) -> None:
        """Start a worker for ``app`` (``agent`` or ``rag``, with its ``parts``: the scripted server's
        URL, the model, then the app's files) and a run of it; the run id is ``run_id``."""

    async def finish(self) -> object:
        """Kill the worker, let a fresh one finish the run, and return the run's output."""


class TemporalCrash:
    """Temporal: the run is started from this process and served by worker processes."""

    def __init__(self, env: Any, workers: Workers) -> None:
        self.env, self.workers = env, workers
        self.queue, self.run_id = f"q-{uuid.uuid4().hex}", _run_id()

    async def start(self, app: str, *parts: str) -> None:
        from advisorchain.durable.temporal import TemporalAgent

        target = self.env.client.service_client.config.target_host
        self.args = ("temporal", app, target, self.queue, *parts)
        self.first = self.workers.start(*self.args)
        # The caller needs only the agent's names: its client builds the same agent without serving it.
        served = APPS[app]
        self.agent = TemporalAgent(served.build(*parts), name=served.name)
        options = {"conversation_id": served.conversation_id} if served.conversation_id else {}
        self.handle = await self.agent.start(
            self.env.client, served.question, id=self.run_id, task_queue=self.queue, **options
        )

    def restart(self) -> None:
        """Kill the worker and start a fresh one."""
        self.workers.kill(self.first)
        self.first = self.workers.start(*self.args)

    async def finish(self) -> object:
        self.restart()
        return (await self.agent.result(self.handle)).output


class DBOSCrash:
    """DBOS: a worker process starts the run; after the kill, a relaunched one finishes it."""

    def __init__(self, system_db: str, workers: Workers, result_file: Path) -> None:
        self.system_db, self.workers, self.result_file = system_db, workers, result_file
        self.run_id = _run_id()

    async def start(self, app: str, *parts: str) -> None:
        self.args = (app, self.system_db, self.run_id, str(self.result_file), *parts)
        self.first = self.workers.start("dbos", "start", *self.args)

    async def finish(self) -> object:
        self.workers.kill(self.first)
        second = self.workers.start("dbos", "finish", *self.args, wait_ready=False)
        assert await asyncio.to_thread(second.wait, 600) == 0
        return json.loads(self.result_file.read_text(encoding="utf-8"))["output"]
