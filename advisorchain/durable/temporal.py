"""Durable agent runs on Temporal (extra ``temporal``): an agent's run is a Temporal workflow; its
model calls, tool calls and memory reads/writes are activities. A worker that dies mid-run is
replaced by any other worker on the task queue: completed activities are replayed from the
workflow's history, the activity in flight is retried after its ``start_to_close_timeout``.

>>> agent = TemporalAgent(client, name="support")
>>> worker = Worker(temporal, task_queue="agents", workflows=[agent.workflow], activities=agent.activities)
>>> result = await agent.run(temporal, "Where is my parcel?", id="order-42", task_queue="agents")

Streaming: the model activity sends its chunks to the workflow in batches (the signal
``CHUNKS_SIGNAL``); ``agent.stream(...)`` reads them live with the query ``CHUNKS_QUERY``. The
workflow itself sees one aggregated response per round.

Approval: when the tool loop ends with ``approvalRequired`` (a tool with ``requires_approval=True``
and no inline approver), the workflow publishes the pending calls (query ``PENDING_QUERY``, read
with ``agent.pending(handle)``) and waits — durably, for as long as it takes, across worker and
server restarts — for the update ``DECIDE_UPDATE`` (sent by ``agent.decide(handle, {...})``); its
validator refuses decisions that do not match the pending calls. The loop then resumes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, ClassVar, Generic, Unpack

from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from ..client import ChatClient
from ..errors import AdvisorChainError
from ..messages import ToolCall
from ..model import ChatResponse
from . import RunRequest
from ._agent import (
    DurableParts,
    DurableResult,
    DurableToolError,
    OutputT,
    check_decisions,
    pending_from_dicts,
    run_agent,
    run_input,
    run_result,
)
from ._codec import response_from_dict

__all__ = [
    "CHUNKS_QUERY",
    "CHUNKS_SIGNAL",
    "DECIDE_UPDATE",
    "PENDING_QUERY",
    "DurableResult",
    "DurableToolError",
    "TemporalAgent",
]

CHUNKS_SIGNAL = "advisorchain.chunks"
"""Signal by which a streaming model activity hands its chunks (a list of dicts) to the workflow."""

CHUNKS_QUERY = "advisorchain.chunks"
"""Query ``(offset) -> {"chunks": [...], "done": bool}``: the run's chunks from ``offset`` on."""

PENDING_QUERY = "advisorchain.pending"
"""Query ``() -> [{"id", "name", "arguments"}, ...]``: the tool calls the run waits to have decided."""

DECIDE_UPDATE = "advisorchain.decide"
"""Update ``({call_id: {"approved": bool, "arguments"|"reason": ...}})``: the decisions for every
pending call; its validator rejects unknown or missing call ids (send it with ``agent.decide``)."""

_FLUSH_SECONDS = 0.05


class TemporalAgent(Generic[OutputT]):
    """Runs a ChatClient's requests as Temporal workflows: the advisor chain and tool loop are the
    workflow's code; model calls, the agent's tools (the client's default tools, MCP servers
    included, plus ``tools``) and memory reads/writes are activities named ``<name>.model``,
    ``<name>.tool.<tool>``, ``<name>.memory.<op>`` (the tools of the client's agents:
    ``<name>.agent.<agent>.tool.<tool>``); the workflow type is ``<name>.run``.

    Register ``workflow`` and ``activities`` on your workers. The workflow runs outside Temporal's
    sandbox: the chain does no I/O and reads no clock in workflow code (everything that does is an
    activity), and advisors of your own must keep to that too. ``workflow_tools`` run as workflow
    code instead of activities: async tools that do no I/O and keep their state in memory (such as
    ``TodoTools``), which every replay rebuilds. ``output_type`` makes ``run`` return an instance
    of it (as ``entity(output_type)``). Every activity gets
    ``start_to_close_timeout`` (how soon a call lost with its worker is retried) and
    ``retry_policy`` (default: 3 attempts); model and tool failures are results, never retried.
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        name: str,
        tools: Iterable[object] = (),
        workflow_tools: Iterable[object] = (),
        output_type: type[OutputT] | None = None,
        start_to_close_timeout: timedelta = timedelta(seconds=60),
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        if not isinstance(start_to_close_timeout, timedelta) or start_to_close_timeout <= timedelta(0):
            raise ValueError(
                f"start_to_close_timeout must be a positive timedelta, got {start_to_close_timeout!r}"
            )
        self.parts = DurableParts(client, name, tools, workflow_tools)
        self.name = self.parts.name
        self.output_type = output_type
        self.start_to_close_timeout = start_to_close_timeout
        self.retry_policy = retry_policy or RetryPolicy(maximum_attempts=3)
        self.activities: list[Callable[..., Any]] = _activities(self.parts)
        """The activity functions to register on a worker."""
        self.workflow: type = _workflow_class(self)
        """The workflow class to register on a worker."""

    @property
    def workflow_name(self) -> str:
        """The workflow type name (``<name>.run``)."""
        return f"{self.name}.run"

    async def _dispatch(self, seam: str, payload: Any) -> Any:
        return await workflow.execute_activity(
            seam,
            payload,
            start_to_close_timeout=self.start_to_close_timeout,
            retry_policy=self.retry_policy,
        )

    # -- the caller's side ----------------------------------------------------------------------------

    async def start(
        self,
        temporal: Client,
        user: str | None = None,
        *,
        id: str,
        task_queue: str,
        stream: bool = False,
        **request: Unpack[RunRequest],
    ) -> WorkflowHandle[Any, dict[str, Any]]:
        """Start a run as workflow ``id`` on ``task_queue``; finish with ``result(handle)``.
        ``request``: ``messages``, ``system``, ``conversation_id``, ``tool_context`` (``RunRequest``).
        ``stream=True`` also sends the model's chunks to the workflow (read them with ``chunks``)."""
        payload = run_input(user, stream=stream, **request)
        return await temporal.start_workflow(self.workflow_name, payload, id=id, task_queue=task_queue)

    async def result(self, handle: WorkflowHandle[Any, Any]) -> DurableResult[OutputT]:
        """Wait for a run and return its result."""
        return run_result(await handle.result(), self.output_type)

    async def run(
        self,
        temporal: Client,
        user: str | None = None,
        *,
        id: str,
        task_queue: str,
        **request: Unpack[RunRequest],
    ) -> DurableResult[OutputT]:
        """Run one request durably and return its result: ``output`` and the final chat response."""
        return await self.result(await self.start(temporal, user, id=id, task_queue=task_queue, **request))

    async def stream(
        self,
        temporal: Client,
        user: str | None = None,
        *,
        id: str,
        task_queue: str,
        poll_interval: float = 0.05,
        **request: Unpack[RunRequest],
    ) -> AsyncIterator[ChatResponse]:
        """Run one request durably, yielding the model's stream chunks (every round's) as they
        reach the workflow; then ``await agent.result(temporal.get_workflow_handle(id))``."""
        handle = await self.start(temporal, user, id=id, task_queue=task_queue, stream=True, **request)
        async for chunk in self.chunks(handle, poll_interval=poll_interval):
            yield chunk

    async def chunks(
        self, handle: WorkflowHandle[Any, Any], *, offset: int = 0, poll_interval: float = 0.05
    ) -> AsyncIterator[ChatResponse]:
        """The stream chunks of a run started with ``stream=True``, from ``offset`` on, until the
        run ends or waits for approval (its last chunk then has finish reason
        ``approvalRequired``; after ``decide``, read on from the count of chunks read so far).
        Any process may read them, also after a reconnect."""
        while True:
            state = await handle.query(CHUNKS_QUERY, offset)
            for chunk in state["chunks"]:
                yield response_from_dict(chunk)
            offset += len(state["chunks"])
            if state["done"] or state["waiting"]:
                return
            await asyncio.sleep(poll_interval)

    async def pending(self, handle: WorkflowHandle[Any, Any]) -> tuple[ToolCall, ...]:
        """The tool calls run ``handle`` waits to have decided, in call order (empty when it waits
        for none)."""
        return pending_from_dicts(await handle.query(PENDING_QUERY))

    async def decide(self, handle: WorkflowHandle[Any, Any], decisions: Mapping[str, object]) -> None:
        """Decide every pending call of a waiting run — ``{call_id: Approved() | Denied("why") |
        bool}`` — and let it resume; raises ChainConfigurationError (nothing sent) when the run
        waits for none or the ids do not match its pending calls."""
        encoded = check_decisions(handle.id, await self.pending(handle), decisions)
        await handle.execute_update(DECIDE_UPDATE, encoded)


def _activities(parts: DurableParts) -> list[Callable[..., Any]]:
    found: list[Callable[..., Any]] = [
        activity.defn(name=seam)(_activity_body(handler)) for seam, handler in parts.seams().items()
    ]

    async def model(payload: dict[str, Any]) -> dict[str, Any]:
        if not payload["stream"]:
            return await parts.call_model(payload, None)
        batcher = _ChunkBatcher()
        try:
            return await parts.call_model(payload, batcher.add)
        finally:
            await batcher.flush()

    found.append(activity.defn(name=parts.model_seam)(model))
    return found


def _activity_body(handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
    async def run(payload: Any) -> Any:
        return await handler(payload)

    return run


class _ChunkBatcher:
    """Sends a streaming activity's chunks to its workflow, a batch at most every 50 ms."""

    def __init__(self) -> None:
        info = activity.info()
        if info.workflow_id is None:
            raise AdvisorChainError(
                "a streaming model activity must run inside its agent's workflow (it sends the "
                "chunks to that workflow); start streamed runs with TemporalAgent.stream"
            )
        self._handle = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
        self._pending: list[dict[str, Any]] = []
        self._last = time.monotonic()

    async def add(self, chunk: dict[str, Any]) -> None:
        self._pending.append(chunk)
        if time.monotonic() - self._last >= _FLUSH_SECONDS:
            await self.flush()

    async def flush(self) -> None:
        self._last = time.monotonic()
        if self._pending:
            batch, self._pending = self._pending, []
            await self._handle.signal(CHUNKS_SIGNAL, batch)


class _AgentWorkflow:
    """One request through an agent's chain, its seams run as activities. Each TemporalAgent
    registers a subclass of its own (Temporal needs a module-level class for the handlers)."""

    agent: ClassVar[TemporalAgent[Any]]

    def __init__(self) -> None:
        self._chunks: list[dict[str, Any]] = []
        self._done = False
        self._pending: list[dict[str, Any]] = []
        self._decisions: dict[str, Any] | None = None

    async def _run(self, payload: dict[str, Any]) -> dict[str, Any]:
        agent = type(self).agent
        try:
            return await run_agent(
                agent.parts,
                payload,
                agent._dispatch,
                agent.output_type,
                self._wait,
                run_id=workflow.info().workflow_id,
            )
        finally:
            self._done = True

    async def _wait(self, pending: list[dict[str, Any]], chunk: dict[str, Any] | None) -> dict[str, Any]:
        # A durable wait: no timer, no clock; the update wakes the workflow however long it takes.
        if chunk is not None:
            self._chunks.append(chunk)
        self._decisions = None
        self._pending = pending
        await workflow.wait_condition(lambda: self._decisions is not None)
        decisions, self._decisions = self._decisions, None
        assert decisions is not None
        return decisions

    @workflow.query(name=PENDING_QUERY)
    def read_pending(self) -> list[dict[str, Any]]:
        return self._pending

    @workflow.update(name=DECIDE_UPDATE)
    def decide(self, decisions: dict[str, Any]) -> None:
        self._pending = []
        self._decisions = decisions

    @decide.validator
    def check_decide(self, decisions: dict[str, Any]) -> None:
        ids = [p["id"] for p in self._pending]
        if not ids:
            raise ApplicationError("the run is not waiting for approval", type="NotWaiting")
        if not isinstance(decisions, dict) or sorted(decisions) != sorted(ids):
            given = sorted(decisions) if isinstance(decisions, dict) else decisions
            raise ApplicationError(
                f"the decisions must name exactly the pending calls {ids!r}, got {given!r}",
                type="DecisionsMismatch",
            )
        for call_id, decision in decisions.items():
            if not isinstance(decision, dict) or not isinstance(decision.get("approved"), bool):
                raise ApplicationError(
                    f"the decision for tool call {call_id!r} is malformed: {decision!r}", type="BadDecision"
                )

    @workflow.signal(name=CHUNKS_SIGNAL)
    def add_chunks(self, chunks: list[dict[str, Any]]) -> None:
        self._chunks.extend(chunks)

    @workflow.query(name=CHUNKS_QUERY)
    def read_chunks(self, offset: int) -> dict[str, Any]:
        return {"chunks": self._chunks[offset:], "done": self._done, "waiting": bool(self._pending)}


def _workflow_class(agent: TemporalAgent[Any]) -> type:
    class_name = f"AgentWorkflow_{agent.name.replace('.', '_').replace('-', '_')}"

    async def run(self: _AgentWorkflow, payload: dict[str, Any]) -> dict[str, Any]:
        return await self._run(payload)

    # Temporal wants the run method on the registered class itself, named as its member.
    run.__qualname__ = f"{class_name}.run"
    cls = type(class_name, (_AgentWorkflow,), {"agent": agent, "run": workflow.run(run)})
    return workflow.defn(
        name=agent.workflow_name, sandboxed=False, failure_exception_types=[AdvisorChainError]
    )(cls)
