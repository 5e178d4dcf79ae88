"""The engine-neutral half of a durable agent.

``DurableParts`` holds an agent's real parts (its model, tools and memories) under stable seam
names and runs each of them when an activity or step asks. ``run_agent`` is the workflow code: it
rebuilds the agent's ChatClient with *seam proxies* in place of those parts, so the advisor chain
and the tool loop run unchanged while every model call, tool call and memory read/write goes
through the engine's ``Dispatch`` (an activity on Temporal, a step on DBOS) and is recorded there.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic

from pydantic import TypeAdapter
from typing_extensions import TypeVar

from .._checks import check_conversation_id
from .._run_meter import RunMeter
from ..advisors import AdvisorParams, ToolCallingAdvisor
from ..advisors.api import CallAdvisorChain, ChatClientRequest, ChatClientResponse, Ordered
from ..agents import Agent, HandoffAdvisor
from ..agents.agent import graph_agents, rebuilt
from ..client import ChatClient, ChatClientRequestSpec
from ..errors import ChainConfigurationError, ModelError
from ..memory.api import ChatMemory
from ..messages import Message, ToolCall, message_from_dict, message_to_dict
from ..model import ChatClientMessageAggregator, ChatModel, ChatResponse, Prompt
from ..output import converter_for
from ..tools import Approved, Denied, tool_callbacks
from ..tools.api import InvalidToolArgumentsError, ToolCallback, ToolContext
from ..tools.approvals import as_decisions
from ..tools.callbacks import FixedTool
from ..tools.function import encode_result
from ._codec import (
    model_error_from_dict,
    model_error_to_dict,
    prompt_from_dict,
    prompt_to_dict,
    response_from_dict,
    response_to_dict,
    tool_result_from_dict,
    tool_result_to_dict,
)
from ._retrieval import StoreSeams, stores_of

__all__ = [
    "RUN_ID",
    "Dispatch",
    "DurableParts",
    "DurableResult",
    "DurableToolError",
    "Emit",
    "OutputT",
    "WaitForDecisions",
    "check_decisions",
    "pending_from_dicts",
    "run_agent",
    "run_input",
    "run_result",
]

OutputT = TypeVar("OutputT", default=str | None)
"""The output of a durable agent's runs: the answer's text (``str | None``) unless the agent has an
``output_type``; the one type variable of ``TemporalAgent``, ``DBOSAgent`` and ``DurableResult``."""

RUN_ID = "run_id"
"""The ToolContext key of a durable run's workflow id (see ``run_agent``)."""

Dispatch = Callable[[str, Any], Awaitable[Any]]
"""``dispatch(seam_name, payload)``: run a seam as an activity/step; payload and result are JSON-safe."""

Emit = Callable[[dict[str, Any]], Awaitable[None]]
"""Hands one stream chunk (``response_to_dict``) to the engine's side channel."""

WaitForDecisions = Callable[[list[dict[str, Any]], dict[str, Any] | None], Awaitable[dict[str, Any]]]
"""``wait(pending, waiting_chunk)``: workflow code that publishes the pending tool calls (dicts with
``id``, ``name``, ``arguments``) — and, on a streamed run, the chunk that ends the stream's part
before the wait — then waits durably for the decisions; returns them encoded (``check_decisions``)."""

_MEMORY_OPS = ("get", "add", "clear")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


@dataclass(frozen=True, slots=True)
class DurableResult(Generic[OutputT]):
    """The outcome of a durable run: ``output`` (the answer's text, or an instance of the agent's
    ``output_type``) and the final ``chat_response`` (usage summed over the tool loop's rounds)."""

    output: OutputT
    chat_response: ChatResponse | None


def check_agent_name(name: object) -> str:
    """An agent name: it prefixes every workflow, activity and step name, so it must stay stable."""
    if not isinstance(name, str) or not name or not set(name) <= _NAME_CHARS:
        raise ChainConfigurationError(
            f"agent name must be a non-empty str of letters, digits, '_', '-' or '.', got {name!r}; "
            "it names the workflow and its activities/steps, so keep it stable across deployments"
        )
    return name


class DurableParts:
    """An agent's model, tools and memories, each under a stable seam name.

    Seam names: ``<agent>.model``, ``<agent>.tool.<tool name>``, ``<agent>.memory.<get|add|clear>``
    (``<agent>.memory<i>.<op>`` for the i-th memory when advisors hold more than one),
    ``<agent>.store.search`` for the vector store retrieval advisors search (``store<i>``, as memory).
    """

    def __init__(
        self, client: ChatClient, name: str, tools: Iterable[object], workflow_tools: Iterable[object]
    ) -> None:
        if not isinstance(client, ChatClient):
            raise ChainConfigurationError(
                f"a durable agent wraps a ChatClient, got {client!r}; build one with ChatClient(model, ...)"
            )
        self.client = client
        self.name = check_agent_name(name)
        self.tools: dict[str, ToolCallback] = {}
        inline = tuple(tool_callbacks(*workflow_tools))
        self.workflow_tools = {cb.definition.name for cb in inline}
        # Tool sources (an MCP server) are asked once, here: the durable agent's tools are fixed.
        for cb in (*client.default_tool_callbacks(), *tool_callbacks(*tools), *inline):
            if cb.definition.name in self.tools:
                raise ChainConfigurationError(
                    f"two tools of agent {name!r} are named {cb.definition.name!r}; tool names must be unique"
                )
            self.tools[cb.definition.name] = cb
        # Several agents (default_agent, or a HandoffAdvisor): each agent's tools are seams too.
        self.agent_tools: dict[str, ToolCallback] = {}
        for agent in _agents_of(client):
            if agent.model is not None:
                raise ChainConfigurationError(
                    f"agent {agent.name!r} has a model of its own, which a durable run cannot record; "
                    "give the durable agent's ChatClient the model (Agent(model=None))"
                )
            for cb in agent.tool_callbacks():
                self.agent_tools[self.agent_tool_seam(agent.name, cb.definition.name)] = cb
        self.memories: list[ChatMemory] = []
        for advisor in client.default_advisors:
            for value in _memories_of(advisor):
                if not any(value is m for m in self.memories):
                    self.memories.append(value)
        self.stores = StoreSeams(self.name, stores_of(client.default_advisors))

    # -- names ------------------------------------------------------------------------------------

    @property
    def model_seam(self) -> str:
        return f"{self.name}.model"

    def tool_seam(self, tool_name: str) -> str:
        return f"{self.name}.tool.{tool_name}"

    def agent_tool_seam(self, agent_name: str, tool_name: str) -> str:
        return f"{self.name}.agent.{agent_name}.tool.{tool_name}"

    def memory_seam(self, index: int, op: str) -> str:
        which = "memory" if len(self.memories) == 1 else f"memory{index}"
        return f"{self.name}.{which}.{op}"

    def seams(self) -> dict[str, Callable[[Any], Awaitable[Any]]]:
        """Every seam name with the function an activity/step runs for it (the model seam is
        served by ``call_model`` instead, which needs the engine's stream side channel)."""
        handlers: dict[str, Callable[[Any], Awaitable[Any]]] = {}
        for tool_name, cb in self.tools.items():
            if tool_name not in self.workflow_tools:
                handlers[self.tool_seam(tool_name)] = _tool_handler(cb)
        for seam, cb in self.agent_tools.items():
            handlers[seam] = _tool_handler(cb)
        for index, memory in enumerate(self.memories):
            for op in _MEMORY_OPS:
                handlers[self.memory_seam(index, op)] = _memory_handler(memory, op)
        handlers.update(self.stores.handlers())
        return handlers

    # -- activity/step side -----------------------------------------------------------------------

    async def call_model(self, payload: Mapping[str, Any], emit: Emit | None) -> dict[str, Any]:
        """One model call: a plain call, or — when ``emit`` is given — a stream whose chunks go to
        ``emit`` live and whose aggregate is returned (the workflow sees one response per round)."""
        try:
            return await self._call_model(prompt_from_dict(payload["prompt"]), emit)
        except ModelError as exc:
            # A provider's answer (a 400, a refused key) is the call's recorded outcome; raised
            # again in workflow code, advisors see it as they would outside a durable run (of the
            # same class: a ContextLengthExceededError stays one).
            return {"model_error": model_error_to_dict(exc)}

    async def _call_model(self, prompt: Prompt, emit: Emit | None) -> dict[str, Any]:
        model = self.client.model
        if emit is None:
            return response_to_dict(await model.call(prompt))
        chunks: list[ChatResponse] = []
        source = model.stream(prompt)
        try:
            async for chunk in source:
                chunks.append(chunk)
                await emit(response_to_dict(chunk))
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()
        return response_to_dict(ChatClientMessageAggregator.aggregate(chunks))

    # -- workflow side ----------------------------------------------------------------------------

    def workflow_client(self, dispatch: Dispatch, stream: bool) -> tuple[ChatClient, _ResultRecorder]:
        """The agent's ChatClient with seam proxies for its model, tools and memories, and the
        outermost advisor that records the run's final response."""
        client = self.client
        memories = [_MemorySeam(self, index, dispatch) for index in range(len(self.memories))]
        advisors = [
            self.stores.advised(self._with_memory_seams(a, memories), dispatch)
            for a in client.default_advisors
        ]
        advisors = [_seamed_handoffs(a, self, dispatch) for a in advisors]
        recorder = _ResultRecorder()
        durable = ChatClient(
            _ModelSeam(self.model_seam, dispatch, stream, client.model),
            [*advisors, recorder],
            default_system=client.default_system,
            default_tools=[
                cb if n in self.workflow_tools else _ToolSeam(cb, self.tool_seam(n), dispatch)
                for n, cb in self.tools.items()
            ],
            default_options=client.default_options,
            tool_calling_auto_register=client.tool_calling_auto_register,
            usage_limits=client.usage_limits,
            prices=client.prices,
            default_agent=_seamed_agent(client.default_agent, self, dispatch),
        )
        return durable, recorder

    def _with_memory_seams(self, advisor: object, memories: Sequence[_MemorySeam]) -> object:
        fields = getattr(advisor, "__dict__", None)
        if not fields:
            return advisor
        swapped = {
            key: memories[self._memory_index(value)] for key, value in fields.items() if _is_memory(value)
        }
        if not swapped:
            return advisor
        twin = copy.copy(advisor)
        for key, seam in swapped.items():
            setattr(twin, key, seam)
        return twin

    def _memory_index(self, memory: object) -> int:
        return next(i for i, m in enumerate(self.memories) if m is memory)


def _agents_of(client: ChatClient) -> list[Agent]:
    """The agents a client's requests may run (its default agent's graph, a HandoffAdvisor's)."""
    starts = [client.default_agent] if client.default_agent is not None else []
    starts += [a.agent for a in client.default_advisors if isinstance(a, HandoffAdvisor)]
    found: dict[int, Agent] = {}
    for start in starts:
        for agent in graph_agents(start):
            found.setdefault(id(agent), agent)
    return list(found.values())


def _seamed_agent(agent: Agent | None, parts: DurableParts, dispatch: Dispatch) -> Agent | None:
    """``agent``'s graph with each agent's tools replaced by their seams (workflow code)."""
    if agent is None:
        return None

    def seam(owner: Agent, cb: ToolCallback) -> ToolCallback:
        return _ToolSeam(cb, parts.agent_tool_seam(owner.name, cb.definition.name), dispatch)

    return rebuilt(agent, seam)


def _seamed_handoffs(advisor: object, parts: DurableParts, dispatch: Dispatch) -> object:
    """A HandoffAdvisor over the seamed graph of its agent; any other advisor as it is."""
    if not isinstance(advisor, HandoffAdvisor):
        return advisor
    agent = _seamed_agent(advisor.agent, parts, dispatch)
    assert agent is not None
    return HandoffAdvisor(agent, max_handoffs=advisor.max_handoffs, order=advisor.order)


def _is_memory(value: object) -> bool:
    return isinstance(value, ChatMemory) and not isinstance(value, type)


def _memories_of(advisor: object) -> list[ChatMemory]:
    fields = getattr(advisor, "__dict__", None) or {}
    return [v for v in fields.values() if _is_memory(v)]


def _tool_handler(cb: ToolCallback) -> Callable[[Any], Awaitable[Any]]:
    async def run(payload: Any) -> dict[str, Any]:
        context = payload["context"]
        try:
            result = await cb.call(payload["arguments"], None if context is None else ToolContext(context))
        except InvalidToolArgumentsError as exc:
            return {"error": str(exc), "invalid_arguments": True}
        except Exception as exc:
            # A tool's own failure is its result (recorded, never retried), as outside a durable
            # run; the engine retries only a call cut short by a crash or a timeout.
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return {"error": detail, "invalid_arguments": False}
        return tool_result_to_dict(result if isinstance(result, str) else encode_result(result))

    return run


def _memory_handler(memory: ChatMemory, op: str) -> Callable[[Any], Awaitable[Any]]:
    async def run(payload: Any) -> Any:
        cid = payload["conversation_id"]
        if op == "get":
            aget = getattr(memory, "aget", None)
            got = await aget(cid) if aget is not None else await asyncio.to_thread(memory.get, cid)
            return [message_to_dict(m) for m in got]
        if op == "add":
            messages = [message_from_dict(m) for m in payload["messages"]]
            aadd = getattr(memory, "aadd", None)
            if aadd is not None:
                await aadd(cid, messages)
            else:
                await asyncio.to_thread(memory.add, cid, messages)
            return None
        aclear = getattr(memory, "aclear", None)
        if aclear is not None:
            await aclear(cid)
        else:
            await asyncio.to_thread(memory.clear, cid)
        return None

    return run


# -- seam proxies (workflow code: no I/O of their own) -------------------------------------------


class _ModelSeam:
    """A ChatModel whose every call is the agent's model seam (an activity or step)."""

    def __init__(self, seam: str, dispatch: Dispatch, stream: bool, real: ChatModel) -> None:
        self._seam = seam
        self._dispatch = dispatch
        self._stream = stream
        name = getattr(real, "model_name", None) or getattr(real, "model", None)
        self.model_name = name if isinstance(name, str) else seam
        self.provider = getattr(real, "provider", None)

    async def call(self, prompt: Prompt) -> ChatResponse:
        result = await self._dispatch(self._seam, {"prompt": prompt_to_dict(prompt), "stream": self._stream})
        error = result.get("model_error")
        if error is not None:
            raise model_error_from_dict(error)
        return response_from_dict(result)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        # A durable round is one recorded response; live chunks travel on the side channel.
        yield await self.call(prompt)


class _ToolSeam(FixedTool):
    """A ToolCallback whose calls are the tool's seam; definition and metadata are the tool's."""

    def __init__(self, real: ToolCallback, seam: str, dispatch: Dispatch) -> None:
        super().__init__(real.definition, real.metadata)
        self._seam = seam
        self._dispatch = dispatch

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        payload = {"arguments": arguments, "context": None if context is None else dict(context)}
        outcome = await self._dispatch(self._seam, payload)
        if "result" in outcome:
            return tool_result_from_dict(outcome)
        if outcome["invalid_arguments"]:
            raise InvalidToolArgumentsError(outcome["error"])
        raise DurableToolError(outcome["error"])


class _MemorySeam:
    """A ChatMemory whose reads and writes are the memory's seams (``aget``/``aadd``/``aclear``,
    which the memory advisor prefers); the blocking forms are refused in workflow code."""

    def __init__(self, parts: DurableParts, index: int, dispatch: Dispatch) -> None:
        self._seams = {op: parts.memory_seam(index, op) for op in _MEMORY_OPS}
        self._dispatch = dispatch

    async def aget(self, conversation_id: str) -> list[Message]:
        got = await self._dispatch(self._seams["get"], {"conversation_id": conversation_id})
        return [message_from_dict(m) for m in got]

    async def aadd(self, conversation_id: str, messages: Sequence[Message]) -> None:
        payload = {"conversation_id": conversation_id, "messages": [message_to_dict(m) for m in messages]}
        await self._dispatch(self._seams["add"], payload)

    async def aclear(self, conversation_id: str) -> None:
        await self._dispatch(self._seams["clear"], {"conversation_id": conversation_id})

    def get(self, conversation_id: str) -> list[Message]:
        raise self._blocking("get")

    def add(self, conversation_id: str, messages: Sequence[Message]) -> None:
        raise self._blocking("add")

    def clear(self, conversation_id: str) -> None:
        raise self._blocking("clear")

    def _blocking(self, op: str) -> ChainConfigurationError:
        return ChainConfigurationError(
            f"memory.{op}() blocks, and workflow code must not; inside a durable run use "
            f"`await memory.a{op}(...)`, which runs as the seam {self._seams[op]!r}"
        )


class DurableToolError(Exception):
    """A tool failed inside its activity or step; the message is the original error's type and text."""


class _ResultRecorder:
    """The outermost advisor of a durable run: keeps the final response for the run's result."""

    name = "DurableResultRecorder"
    order = Ordered.HIGHEST_PRECEDENCE

    def __init__(self) -> None:
        self.response: ChatResponse | None = None

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        response = await chain.next_call(request)
        self.response = response.chat_response
        return response


# -- the run ----------------------------------------------------------------------------------------


def run_input(
    user: str | None,
    *,
    messages: Iterable[Message] = (),
    system: str | None = None,
    conversation_id: str | None = None,
    tool_context: Mapping[str, Any] | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """The JSON-safe input of a durable run (checked here, so bad input fails at the caller)."""
    if user is not None and not isinstance(user, str):
        raise ChainConfigurationError(f"the user text must be a str, got {user!r}")
    if conversation_id is not None:
        check_conversation_id(conversation_id, "conversation_id")
    return {
        "user": user,
        "messages": [message_to_dict(m) for m in messages],
        "system": system,
        "conversation_id": conversation_id,
        "tool_context": dict(tool_context or {}),
        "stream": stream,
    }


async def run_agent(
    parts: DurableParts,
    payload: Mapping[str, Any],
    dispatch: Dispatch,
    output_type: Any,
    wait_for_decisions: WaitForDecisions,
    *,
    run_id: str,
) -> dict[str, Any]:
    """Workflow code: one request through the agent's chain, its seams dispatched to the engine.
    When the tool loop ends with ``approvalRequired``, the run waits (``wait_for_decisions``) and
    resumes the loop with the decisions — through memory when the agent has one, else with the
    history — as often as rounds need approval. Returns ``{"output": ..., "response": ...}``.

    ``run_id`` (the workflow id) goes into every tool's ``ToolContext`` as ``run_id``: with the
    call's ``tool_call_id`` it is the key a tool with side effects deduplicates on, when a crash
    makes the call in flight run again."""
    payload = {**payload, "tool_context": {**payload["tool_context"], RUN_ID: run_id}}
    client, _ = parts.workflow_client(dispatch, bool(payload["stream"]))
    converter = None if output_type is None else converter_for(output_type)
    # One budget for the whole run, across its approval pauses; on a resume the engine replays the
    # recorded model and tool calls through it, so the totals are rebuilt as they were.
    meter = RunMeter(client.usage_limits, client.price_table)
    spec = _spec(client, payload, converter, meter)
    if payload["system"] is not None:
        spec.system(payload["system"])
    spec.messages([message_from_dict(m) for m in payload["messages"]])
    if payload["user"] is not None:
        spec.user(payload["user"])
    answer = await spec.acall().chat_client_response()
    while _waits_for_approval(answer):
        pending: Sequence[ToolCall] = answer.context[AdvisorParams.PENDING_TOOL_CALLS]
        history: Sequence[Message] = answer.context[AdvisorParams.CONVERSATION_HISTORY]
        waiting = answer.chat_response
        decisions = await wait_for_decisions(
            [_call_to_dict(c) for c in pending],
            response_to_dict(waiting) if waiting is not None and payload["stream"] else None,
        )
        spec = _spec(client, payload, converter, meter)
        if parts.memories:
            # Memory holds the user message and the waiting tool-call message already.
            if payload["system"] is not None:
                spec.system(payload["system"])
        else:
            spec.messages(history)
        spec.tool_approvals({cid: _decision_from_dict(d) for cid, d in decisions.items()})
        answer = await spec.acall().chat_client_response()
    response = answer.chat_response
    text = None if response is None else response.text
    output = (
        text
        if converter is None
        else TypeAdapter(output_type).dump_python(converter.parse(text), mode="json")
    )
    return {"output": output, "response": None if response is None else response_to_dict(response)}


def _spec(
    client: ChatClient, payload: Mapping[str, Any], converter: Any, meter: RunMeter
) -> ChatClientRequestSpec:
    spec = client.prompt()._run_settings(meter=meter)
    if payload["conversation_id"] is not None:
        spec.param(ChatMemory.CONVERSATION_ID, payload["conversation_id"])
    if payload["tool_context"]:
        spec.tool_context(payload["tool_context"])
    if converter is not None:
        spec.param(AdvisorParams.OUTPUT_FORMAT, converter.format_instructions)
    return spec


def _waits_for_approval(answer: ChatClientResponse) -> bool:
    response = answer.chat_response
    return (
        response is not None
        and response.metadata.finish_reason == ToolCallingAdvisor.APPROVAL_REQUIRED
        and bool(answer.context.get(AdvisorParams.PENDING_TOOL_CALLS))
    )


def _call_to_dict(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def pending_from_dicts(pending: Iterable[Mapping[str, Any]] | None) -> tuple[ToolCall, ...]:
    """The pending tool calls a run published, as ToolCalls (empty when it waits for none)."""
    return tuple(ToolCall(p["id"], p["name"], p["arguments"]) for p in pending or ())


def check_decisions(
    run: str, pending: Sequence[ToolCall], decisions: Mapping[str, object]
) -> dict[str, dict[str, Any]]:
    """The decisions for a waiting run, checked (one for every pending call, no other) and encoded
    JSON-safe; raises ChainConfigurationError naming what is wrong."""
    if not pending:
        raise ChainConfigurationError(
            f"run {run!r} is not waiting for approval; check `pending(...)` before deciding"
        )
    checked = as_decisions(decisions)
    ids = [c.id for c in pending]
    unknown = sorted(set(checked) - set(ids))
    if unknown:
        raise ChainConfigurationError(
            f"the decisions name tool calls {unknown!r} that run {run!r} does not wait for; "
            f"it waits for {ids!r}"
        )
    missing = [c for c in pending if c.id not in checked]
    if missing:
        named = ", ".join(f"{c.id!r} (tool {c.name!r})" for c in missing)
        raise ChainConfigurationError(
            f"run {run!r} needs a decision for every pending call; none was given for {named}: "
            "give Approved(), Denied('why'), True or False for each"
        )
    return {cid: _decision_to_dict(d) for cid, d in checked.items()}


def _decision_to_dict(decision: Approved | Denied) -> dict[str, Any]:
    if isinstance(decision, Approved):
        return {"approved": True, "arguments": decision.arguments}
    return {"approved": False, "reason": decision.reason}


def _decision_from_dict(data: Mapping[str, Any]) -> Approved | Denied:
    return Approved(data["arguments"]) if data["approved"] else Denied(data["reason"])


def run_result(data: Mapping[str, Any], output_type: Any) -> DurableResult[Any]:
    """The caller's DurableResult from ``run_agent``'s JSON-safe result."""
    output = data["output"]
    if output_type is not None:
        output = TypeAdapter(output_type).validate_python(output)
    response = data["response"]
    return DurableResult(output, None if response is None else response_from_dict(response))
