"""``HandoffAdvisor``: several agents in one conversation, as a recursive advisor (API.md §18).

It sits inside memory (at its default order) and outside the tool loop. For each agent in turn it
shapes the request — the agent's instructions in place of every system message, its options laid
over the request's, its tools and one tool per handoff beside the request's — and calls the rest of
the chain (tool loop included) with the agent's model. A handoff tool's call ends the tool loop
once its round's tools ran (``end_tool_loop``); the advisor then calls the rest of the chain again
with the target active and the history so far. Every advisor after it sees every agent's rounds.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar

from .. import observability as obs
from .._streams import closing
from ..advisors.tool_calling import ToolCallingAdvisor, end_tool_loop
from ..chain.vocabulary import AdvisorParams, MemoryAdvisor, check_order
from ..errors import ChainConfigurationError
from ..messages import AssistantMessage, Message, SystemMessage, ToolCall
from ..model import (
    ChatClientRequest,
    ChatClientResponse,
    ChatModel,
    ChatOptions,
    ChatResponse,
    Generation,
    Prompt,
    Usage,
)
from ..tools.api import ToolContext, ToolDefinition
from ..tools.callbacks import FixedTool
from ._kernel import CallAdvisorChain, StreamAdvisorChain, current_run, emit_handoff, rebased
from .agent import Agent, AgentGraph, Route, check_agent, graph_of

__all__ = ["AGENT_PARAM", "HandoffAdvisor", "newest_agent"]

AGENT_PARAM = "advisorchain.agent.start"
"""The request param ``spec.agent(agent, resume=...)`` sets: ``(agent, resume)``."""

_NO_PARAMETERS = {"type": "object", "properties": {}}
_TURN = object()  # the run slot holding the turn of the HandoffAdvisor running in it
_ONE_PER_ROUND = "Error: only one handoff per round; the conversation went to "


class HandoffAdvisor:
    """Runs a graph of agents: the active agent's instructions, tools and options shape the request,
    and a handoff re-runs the rest of the chain with the target agent.

    The starting agent is the request's ``.agent(...)``, else the client's ``default_agent``, else
    ``agent``. With ``resume`` (the default) a conversation goes on with the agent named by the
    newest assistant message's ``metadata["agent"]``.

    >>> client = ChatClient(model, default_advisors=[HandoffAdvisor(triage, max_handoffs=3)])
    """

    DEFAULT_ORDER: ClassVar[int] = ToolCallingAdvisor.DEFAULT_ORDER - 50

    def __init__(self, agent: Agent, *, max_handoffs: int = 10, order: int = DEFAULT_ORDER) -> None:
        self.agent = check_agent(agent, "HandoffAdvisor")
        if isinstance(max_handoffs, bool) or not isinstance(max_handoffs, int) or max_handoffs < 0:
            raise ValueError(f"max_handoffs must be an int >= 0, got {max_handoffs!r}")
        self.max_handoffs = max_handoffs
        self.order = check_order(order)
        graph_of(agent)  # a bad graph fails here, before any request

    @property
    def name(self) -> str:
        return "Handoff Advisor"

    # -- the two paths -------------------------------------------------------------------------

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        rest = chain.copy(self).call_advisors
        turn = await self._begin(request, rest)
        chain.run.put(_TURN, turn)
        current = turn.shaped(request, request.prompt.instructions)
        usages: list[Usage | None] = []
        while True:
            turn.pending = None
            sub = rebased(chain, rest, model=turn.model(chain.model))
            response = await sub.next_call(current)
            if turn.pending is None or not _handed_over(response):
                break
            usages.append(_usage_of(response.chat_response))
            current = await self._hand_over(request, response, turn, chain)
        return turn.finished(response, usages)

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        rest = chain.copy(self).stream_advisors
        turn = await self._begin(request, rest)
        chain.run.put(_TURN, turn)
        current = turn.shaped(request, request.prompt.instructions)
        usages: list[Usage | None] = []
        while True:
            turn.pending = None
            stop: ChatClientResponse | None = None
            sub = rebased(chain, rest, model=turn.model(chain.model))
            async with closing(sub.next_stream(current)) as stream:
                async for chunk in stream:
                    if turn.pending is not None and _handed_over(chunk):
                        stop = chunk  # the handoff round's end: its text goes on, its tool calls not
                        text = _text_only(chunk)
                        if text is not None:
                            yield turn.tagged_chunk(text, ())
                        continue
                    yield turn.tagged_chunk(chunk, usages)
            if stop is None or turn.pending is None:
                return
            usages.append(_usage_of(stop.chat_response))
            current = await self._hand_over(request, stop, turn, chain)

    # -- one turn ------------------------------------------------------------------------------

    async def _begin(self, request: ChatClientRequest, rest: Sequence[object]) -> _Turn:
        start, resume = self.agent, True
        given = request.context.get(AGENT_PARAM)
        if given is not None:
            start, resume = given
        graph = graph_of(start)
        agent = start
        if resume:
            name = newest_agent(request.prompt.instructions)
            if name is None:  # memory inside the loop holds the conversation the model saw
                memory = next((a for a in rest if isinstance(a, MemoryAdvisor)), None)
                reader = getattr(memory, "conversation_history", None)
                if reader is not None:
                    name = newest_agent(await reader(request))
            if name is not None:
                agent = graph.agents.get(name, start)
        return _Turn(graph, agent, self.max_handoffs, request)

    async def _hand_over(
        self,
        request: ChatClientRequest,
        stop: ChatClientResponse,
        turn: _Turn,
        chain: CallAdvisorChain | StreamAdvisorChain,
    ) -> ChatClientRequest:
        """The target's request: the history so far (the handoff round last, through the handoff's
        ``input_filter``) under the target's system text; the handoff is recorded."""
        route = turn.pending
        assert route is not None
        source = turn.agent
        history = tuple(stop.context.get(AdvisorParams.CONVERSATION_HISTORY, ()))
        conversation = tuple(m for m in history if not isinstance(m, SystemMessage))
        handoff_round = conversation[-2:]
        label = f"{route.tool_name!r} ({source.name} -> {route.target.name})"
        chosen = conversation
        if route.handoff.input_filter is not None:
            try:
                result = route.handoff.input_filter(conversation)
                if inspect.isawaitable(result):
                    result = await result
                chosen = tuple(result)
            except ChainConfigurationError:
                raise
            except Exception as exc:
                raise ChainConfigurationError(
                    f"the input_filter of handoff {label} raised {type(exc).__name__}: {exc}"
                ) from exc
            if len(chosen) < 2 or list(chosen[-2:]) != list(handoff_round):
                raise ChainConfigurationError(
                    f"the input_filter of handoff {label} returned a history that does not end with "
                    "the handoff round (the assistant message that called the handoff and its tool "
                    "responses); keep those two messages last"
                )
        turn.handoffs.append((source.name, route.target.name))
        turn.agent = route.target
        if obs.tracing_enabled():
            target = route.target.name
            attributes = {"advisorchain.handoff.from": source.name, "advisorchain.handoff.to": target}
            with obs.span(f"handoff {source.name} -> {target}", attributes):
                pass
        emit_handoff(chain, source.name, route.target.name)
        context = dict(request.context)
        context.pop(AdvisorParams.TOOL_APPROVALS, None)  # a decided round ran: its decisions are spent
        resumed = stop.context.get(AdvisorParams.RESUMED_TOOL_RESPONSES)
        if resumed is not None:  # memory outside the loop stores the decided round's responses
            context[AdvisorParams.RESUMED_TOOL_RESPONSES] = resumed
        rounds = stop.context.get(AdvisorParams.TOOL_LOOP_ITERATION)
        if isinstance(rounds, int):  # the target's loop numbers its rounds after the old agent's
            context[AdvisorParams.TOOL_LOOP_ITERATION] = rounds
        systems = tuple(m for m in request.prompt.instructions if isinstance(m, SystemMessage))
        return turn.shaped(request.copy(context=context), (*systems, *chosen))


class _Turn:
    """One request through the graph: the active agent, the handoffs so far, and the handoff the
    current round claimed (``pending``)."""

    __slots__ = ("agent", "base", "graph", "handoffs", "max_handoffs", "pending", "round_calls")

    def __init__(self, graph: AgentGraph, agent: Agent, max_handoffs: int, base: ChatClientRequest) -> None:
        self.graph = graph
        self.agent = agent
        self.max_handoffs = max_handoffs
        self.base = base
        self.handoffs: list[tuple[str, str]] = []
        self.pending: Route | None = None
        self.round_calls: ChatResponse | tuple[ToolCall, ...] = ()

    def model(self, default: ChatModel) -> ChatModel:
        return _AgentModel(self.agent.model or default, self.agent.name, self)

    def shaped(self, request: ChatClientRequest, instructions: Sequence[Message]) -> ChatClientRequest:
        """``request`` as the active agent sends it: its instructions, options and tools."""
        agent = self.agent
        if agent.instructions is not None:
            instructions = (
                SystemMessage(agent.instructions),
                *(m for m in instructions if not isinstance(m, SystemMessage)),
            )
        context = {
            **request.context,
            AdvisorParams.ACTIVE_AGENT: agent.name,
            AdvisorParams.HANDOFFS: tuple(self.handoffs),
        }
        return ChatClientRequest(Prompt(tuple(instructions), self.options(agent)), context)

    def options(self, agent: Agent) -> ChatOptions | None:
        """The request's options with ``agent``'s laid over and its tools and handoff tools added
        (kept per agent for the last options object seen: a client's requests share theirs)."""
        base = self.base.prompt.options
        cache = self.graph.cache
        key = ("options", agent.name)
        kept = cache.get(key)
        if kept is not None and kept[0] is base:
            return kept[1]  # type: ignore[no-any-return]
        options = base if agent.options is None else agent.options.merged_over(base)
        handoff_tools = _handoff_tools(self.graph, agent)
        taken = {c.definition.name for c in (options.tool_callbacks if options is not None else ())}
        taken.update(c.definition.name for c in agent.tool_callbacks())
        for tool in handoff_tools:
            if tool.definition.name in taken:
                raise ChainConfigurationError(
                    f"the handoff tool {tool.definition.name!r} of agent {agent.name!r} has the name of "
                    "another tool of the request; give the Handoff a tool_name of its own"
                )
        added = (*agent.tool_callbacks(), *handoff_tools)
        if added:
            options = ChatOptions(tool_callbacks=added).merged_over(options)
        if not agent.has_tool_sources:  # a tool source's tools can change: asked again each time
            cache[key] = (base, options)
        return options

    def claim(self, route: Route, call_id: str | None) -> str:
        """A handoff call's answer: the first handoff call of the round hands over."""
        if len(self.handoffs) >= self.max_handoffs:
            return f"Error: handoff limit ({self.max_handoffs}) reached"
        routes = self.graph.routes[self.agent.name]
        calls = self.round_calls
        if isinstance(calls, ChatResponse):
            calls = self.round_calls = tuple(c for g in calls.generations for c in g.output.tool_calls)
        first = next((c for c in calls if c.name in routes), None)
        if first is not None and call_id is not None and any(c.id == call_id for c in calls):
            if first.id != call_id:
                return _ONE_PER_ROUND + routes[first.name].target.name
        elif self.pending is not None:
            return _ONE_PER_ROUND + self.pending.target.name
        self.pending = route
        end_tool_loop()
        return f"Transferred to {route.target.name}."

    def tagged_chunk(self, chunk: ChatClientResponse, usages: Sequence[Usage | None]) -> ChatClientResponse:
        """A chunk that names its agent (message metadata and context), with the usage of earlier
        agents added to the answer's end."""
        chat = chunk.chat_response
        if chat is not None:
            tagged = _tagged(chat, self.agent.name)
            if usages and chat.metadata.finish_reason is not None and chat.metadata.usage is not None:
                tagged = tagged.with_usage(_summed([*usages, chat.metadata.usage]))
            if tagged is not chat:
                chunk = chunk.copy(chat_response=tagged)
        context = chunk.context
        if context.get(AdvisorParams.ACTIVE_AGENT) != self.agent.name or context.get(
            AdvisorParams.HANDOFFS
        ) != tuple(self.handoffs):
            chunk = chunk.copy(context=self.context_of(context))
        return chunk

    def context_of(self, context: Any) -> dict[str, Any]:
        return {
            **context,
            AdvisorParams.ACTIVE_AGENT: self.agent.name,
            AdvisorParams.HANDOFFS: tuple(self.handoffs),
        }

    def finished(self, response: ChatClientResponse, usages: Sequence[Usage | None]) -> ChatClientResponse:
        chat = response.chat_response
        if chat is not None:
            chat = _tagged(chat, self.agent.name)
            if usages:
                chat = chat.with_usage(_summed([*usages, chat.metadata.usage]))
        return ChatClientResponse(chat, self.context_of(response.context))


class _HandoffTool(FixedTool):
    """The tool a handoff gives the model: no parameters; its call hands the conversation over
    (the turn of the run it runs in decides how)."""

    __slots__ = ("_route",)

    def __init__(self, route: Route) -> None:
        super().__init__(ToolDefinition(route.tool_name, route.description, _NO_PARAMETERS))
        self._route = route

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        run = current_run()
        turn = run.get(_TURN) if run is not None else None
        if not isinstance(turn, _Turn):
            return f"Error: {self._route.tool_name} hands over only inside a run of its HandoffAdvisor"
        return turn.claim(self._route, context.tool_call_id if context is not None else None)


def _handoff_tools(graph: AgentGraph, agent: Agent) -> tuple[_HandoffTool, ...]:
    """The handoff tools of ``agent`` (made once per graph)."""
    key = ("handoffs", agent.name)
    tools = graph.cache.get(key)
    if tools is None:
        tools = graph.cache[key] = tuple(_HandoffTool(route) for route in graph.routes[agent.name].values())
    return tools


class _AgentModel:
    """The active agent's model: every assistant message it produces names the agent
    (``metadata["agent"]``), and the tool calls of the round are noted (handoff order)."""

    __slots__ = ("_inner", "_name", "_turn")

    def __init__(self, inner: ChatModel, name: str, turn: _Turn) -> None:
        self._inner = inner
        self._name = name
        self._turn = turn

    @property
    def model_name(self) -> str:
        inner = self._inner
        name = getattr(inner, "model_name", None) or getattr(inner, "model", None)
        return str(name or type(inner).__name__)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def call(self, prompt: Prompt) -> ChatResponse:
        response = await self._inner.call(prompt)
        if isinstance(response, ChatResponse):
            self._turn.round_calls = response  # its tool calls order the round's handoff calls
            return _tagged(response, self._name)
        return response

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        self._turn.round_calls = ()
        async with closing(self._inner.stream(prompt)) as stream:
            async for chunk in stream:
                if isinstance(chunk, ChatResponse):
                    if chunk.has_tool_calls():
                        calls = tuple(c for g in chunk.generations for c in g.output.tool_calls)
                        known = self._turn.round_calls
                        self._turn.round_calls = (*(known if isinstance(known, tuple) else ()), *calls)
                    chunk = _tagged(chunk, self._name)
                yield chunk


def _tagged(chat: ChatResponse, name: str) -> ChatResponse:
    """``chat`` with every generation's message naming agent ``name`` (``chat`` itself when all do)."""
    generations = chat.generations
    if len(generations) == 1:  # the usual answer
        output = generations[0].output
        if output.metadata.get("agent") == name:
            return chat
        tagged: tuple[Generation, ...] = (_tagged_generation(generations[0], name),)
    else:
        if all(g.output.metadata.get("agent") == name for g in generations):
            return chat
        tagged = tuple(_tagged_generation(g, name) for g in generations)
    return ChatResponse(tagged, chat.metadata)


def _tagged_generation(generation: Generation, name: str) -> Generation:
    output = generation.output
    if output.metadata.get("agent") == name:
        return generation
    message = AssistantMessage(output.text, output.tool_calls, {**output.metadata, "agent": name})
    return Generation(message, generation.finish_reason)


def newest_agent(messages: Sequence[Message]) -> str | None:
    """The ``metadata["agent"]`` of the newest AssistantMessage that carries one."""
    for m in reversed(messages):
        if isinstance(m, AssistantMessage):
            name = m.metadata.get("agent")
            if isinstance(name, str):
                return name
    return None


def _handed_over(response: ChatClientResponse) -> bool:
    """True for the tool loop's end after a handoff round (its history, the round's tool calls)."""
    chat = response.chat_response
    return (
        chat is not None
        and AdvisorParams.CONVERSATION_HISTORY in response.context
        and chat.finish_reason != ToolCallingAdvisor.APPROVAL_REQUIRED
        and chat.has_tool_calls()
    )


def _text_only(chunk: ChatClientResponse) -> ChatClientResponse | None:
    chat = chunk.chat_response
    text = chat.text if chat is not None else None
    if chat is None or not text:
        return None
    message = AssistantMessage(text, (), chat.generations[0].output.metadata)
    meta = dataclasses.replace(chat.metadata, finish_reason=None, usage=None)
    return chunk.copy(chat_response=ChatResponse((Generation(message),), meta))


def _usage_of(chat: ChatResponse | None) -> Usage | None:
    return chat.metadata.usage if chat is not None else None


def _summed(usages: Sequence[Usage | None]) -> Usage:
    total = Usage(0, 0)
    for usage in usages:
        if usage is not None:
            total = total + usage
    return total
