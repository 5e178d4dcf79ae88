"""Durable agent runs on DBOS (extra ``dbos``): an agent's run is a DBOS workflow; its model calls,
tool calls and memory reads/writes are DBOS steps, checkpointed in the DBOS system database
(SQLite or PostgreSQL). After a crash, ``DBOS.launch()`` in a restarted process resumes the run:
completed steps return their recorded results, the step in flight runs again.

>>> agent = DBOSAgent(client, name="support")      # before DBOS.launch()
>>> DBOS(config={"name": "app", "system_database_url": "sqlite:///app.sqlite"}); DBOS.launch()
>>> result = await agent.run("Where is my parcel?", conversation_id="c42")
>>> result.output

Streaming: ``agent.stream(...)`` yields the model's chunks live; the model step writes them to
the workflow's DBOS stream ``STREAM_KEY`` and returns one aggregated response per round.

Approval: when the tool loop ends with ``approvalRequired``, the workflow publishes the pending
calls as its event ``PENDING_EVENT`` (read with ``agent.pending(workflow_id)``) and waits with
``DBOS.recv`` on ``DECISIONS_TOPIC`` (``agent.decide(workflow_id, {...})`` sends there) — durably,
for days if need be, across process and database restarts. The loop then resumes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Generic, Unpack

from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync

from ..advisors import ToolCallingAdvisor
from ..client import ChatClient
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

__all__ = ["DECISIONS_TOPIC", "PENDING_EVENT", "STREAM_KEY", "DBOSAgent", "DurableResult", "DurableToolError"]

STREAM_KEY = "advisorchain.chunks"
"""The DBOS stream of a run that carries its model chunks (``DBOS.read_stream_async(id, STREAM_KEY)``)."""

PENDING_EVENT = "advisorchain.pending"
"""The run's event ``{"round": int, "calls": [{"id", "name", "arguments"}, ...]}``: the tool calls it
waits to have decided (``calls`` is empty while it waits for none)."""

DECISIONS_TOPIC = "advisorchain.decisions"
"""The topic of the message ``{"round": int, "decisions": {call_id: ...}}`` that decides a waiting
round (send it with ``agent.decide``); a message for another round or other ids is dropped."""

_RECV_SECONDS = 24 * 3600.0  # one durable wait; the workflow waits again until decided


class DBOSAgent(Generic[OutputT]):
    """Runs a ChatClient's requests as DBOS workflows: the advisor chain and tool loop are the
    workflow's code; model calls, the agent's tools (the client's default tools, MCP servers
    included, plus ``tools``) and memory reads/writes are steps named ``<name>.model``,
    ``<name>.tool.<tool>``, ``<name>.memory.<op>`` (the tools of the client's agents:
    ``<name>.agent.<agent>.tool.<tool>``); the workflow is ``<name>.run``.

    Create every agent before ``DBOS.launch()`` (DBOS registers workflows and steps then), with the
    same ``name`` in every process that may resume its runs. ``workflow_tools`` run as workflow
    code instead of steps: async tools that do no I/O and keep their state in memory (such as
    ``TodoTools``), which every replay rebuilds. ``output_type`` makes ``run`` return an instance
    of it (as ``entity(output_type)``). ``step_max_attempts`` bounds retries of a step whose own
    code raised unexpectedly (model and tool failures are results, never retried).
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        name: str,
        tools: Iterable[object] = (),
        workflow_tools: Iterable[object] = (),
        output_type: type[OutputT] | None = None,
        step_max_attempts: int = 3,
    ) -> None:
        if (
            isinstance(step_max_attempts, bool)
            or not isinstance(step_max_attempts, int)
            or step_max_attempts < 1
        ):
            raise ValueError(f"step_max_attempts must be a positive int, got {step_max_attempts!r}")
        self.parts = DurableParts(client, name, tools, workflow_tools)
        self.name = self.parts.name
        self.output_type = output_type
        self._workflow = _register(self.parts, output_type, step_max_attempts)

    # -- the caller's side ----------------------------------------------------------------------------

    async def start(
        self,
        user: str | None = None,
        *,
        workflow_id: str | None = None,
        stream: bool = False,
        **request: Unpack[RunRequest],
    ) -> WorkflowHandleAsync[dict[str, Any]]:
        """Start a run and return its DBOS handle (``workflow_id`` makes starting idempotent: a
        second start with the same id attaches to the first run). ``request``: ``messages``,
        ``system``, ``conversation_id``, ``tool_context`` (``RunRequest``). ``stream=True`` also
        writes the model's chunks to the run's stream ``STREAM_KEY``. Finish with ``result(handle)``."""
        payload = run_input(user, stream=stream, **request)
        if workflow_id is None:
            return await DBOS.start_workflow_async(self._workflow, payload)
        with SetWorkflowID(workflow_id):
            return await DBOS.start_workflow_async(self._workflow, payload)

    async def result(self, handle: WorkflowHandleAsync[dict[str, Any]] | str) -> DurableResult[OutputT]:
        """Wait for a run (its handle or workflow id) and return its result."""
        if isinstance(handle, str):
            handle = await DBOS.retrieve_workflow_async(handle)
        return run_result(await handle.get_result(), self.output_type)

    async def run(
        self, user: str | None = None, *, workflow_id: str | None = None, **request: Unpack[RunRequest]
    ) -> DurableResult[OutputT]:
        """Run one request durably and return its result: ``output`` and the final chat response."""
        return await self.result(await self.start(user, workflow_id=workflow_id, **request))

    async def stream(
        self, user: str | None = None, *, workflow_id: str | None = None, **request: Unpack[RunRequest]
    ) -> AsyncIterator[ChatResponse]:
        """Run one request durably, yielding the model's stream chunks live (every round's); the
        run's result is ``await agent.result(workflow_id)`` afterwards. A model call retried after
        a crash streams again from its start."""
        handle = await self.start(user, workflow_id=workflow_id, stream=True, **request)
        async for chunk in self.chunks(handle.get_workflow_id()):
            yield chunk

    async def chunks(self, workflow_id: str, *, offset: int = 0) -> AsyncIterator[ChatResponse]:
        """The stream chunks of a run started with ``stream=True``, from ``offset`` on, until the
        run ends or waits for approval (its last chunk then has finish reason
        ``approvalRequired``; after ``decide``, read on from the count of chunks read so far)."""
        async for data in DBOS.read_stream_async(workflow_id, STREAM_KEY, offset=offset):
            chunk = response_from_dict(data)
            yield chunk
            if chunk.metadata.finish_reason == ToolCallingAdvisor.APPROVAL_REQUIRED:
                return

    async def pending(self, workflow_id: str) -> tuple[ToolCall, ...]:
        """The tool calls run ``workflow_id`` waits to have decided, in call order (empty when it
        waits for none)."""
        event = await DBOS.get_event_async(workflow_id, PENDING_EVENT, timeout_seconds=0)
        return pending_from_dicts(None if event is None else event["calls"])

    async def decide(self, workflow_id: str, decisions: Mapping[str, object]) -> None:
        """Decide every pending call of a waiting run — ``{call_id: Approved() | Denied("why") |
        bool}`` — and let it resume; raises ChainConfigurationError (nothing sent) when the run
        waits for none or the ids do not match its pending calls."""
        event = await DBOS.get_event_async(workflow_id, PENDING_EVENT, timeout_seconds=0)
        pending = pending_from_dicts(None if event is None else event["calls"])
        encoded = check_decisions(workflow_id, pending, decisions)
        assert event is not None
        message = {"round": event["round"], "decisions": encoded}
        await DBOS.send_async(workflow_id, message, DECISIONS_TOPIC)


def _register(parts: DurableParts, output_type: Any, max_attempts: int) -> Any:
    """Register the agent's steps and its workflow with DBOS; return the workflow function."""
    retry: dict[str, Any] = {"retries_allowed": max_attempts > 1, "max_attempts": max_attempts}
    steps: dict[str, Any] = {
        seam: DBOS.step(name=seam, **retry)(handler) for seam, handler in parts.seams().items()
    }

    async def model_step(payload: dict[str, Any]) -> dict[str, Any]:
        return await parts.call_model(payload, _write_chunk if payload["stream"] else None)

    steps[parts.model_seam] = DBOS.step(name=parts.model_seam, **retry)(model_step)

    async def dispatch(seam: str, payload: Any) -> Any:
        return await steps[seam](payload)

    async def agent_run(payload: dict[str, Any]) -> dict[str, Any]:
        try:
            run_id = DBOS.workflow_id
            assert run_id is not None  # workflow code always has one
            return await run_agent(parts, payload, dispatch, output_type, _Approvals().wait, run_id=run_id)
        finally:
            if payload["stream"]:
                await DBOS.close_stream_async(STREAM_KEY)

    return DBOS.workflow(name=f"{parts.name}.run")(agent_run)


class _Approvals:
    """One run's approval rounds (workflow code: every DBOS call here is recorded, so a resumed
    run replays them and counts its rounds the same way)."""

    def __init__(self) -> None:
        self.round = 0

    async def wait(self, pending: list[dict[str, Any]], chunk: dict[str, Any] | None) -> dict[str, Any]:
        self.round += 1
        round_ = self.round
        # The pending calls are recorded before the chunk that tells a stream reader the run
        # waits: a caller who decides as soon as its stream ends must find them.
        await DBOS.set_event_async(PENDING_EVENT, {"round": round_, "calls": pending})
        if chunk is not None:
            await DBOS.write_stream_async(STREAM_KEY, chunk)
        ids = sorted(p["id"] for p in pending)
        while True:  # each recv is a durable wait; a stale or mismatched message is dropped
            message = await DBOS.recv_async(DECISIONS_TOPIC, timeout_seconds=_RECV_SECONDS)
            if _matches(message, round_, ids):
                break
        await DBOS.set_event_async(PENDING_EVENT, {"round": round_, "calls": []})
        decisions: dict[str, Any] = message["decisions"]
        return decisions


def _matches(message: Any, round_: int, ids: list[str]) -> bool:
    return (
        isinstance(message, dict)
        and message.get("round") == round_
        and isinstance(message.get("decisions"), dict)
        and sorted(message["decisions"]) == ids
    )


async def _write_chunk(chunk: dict[str, Any]) -> None:
    await DBOS.write_stream_async(STREAM_KEY, chunk)
