"""``Agent`` and ``Handoff`` (API.md §18), and the graph of agents a run can reach through handoffs.

An agent is a value: its name, instructions, description, tools, handoffs, options and model. The
graph is checked once per starting agent (agents are frozen, so it never changes) and kept on it:
two distinct agents with one name, two handoffs of one agent with one tool name, or a handoff to a
name the graph does not hold raise ``ChainConfigurationError`` before any model call.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from ..errors import ChainConfigurationError
from ..messages import Message
from ..model import ChatModel, ChatOptions
from ..tools.function import ToolCallbackProvider, unchecked_tool_callbacks

if TYPE_CHECKING:
    from ..tools.api import ToolCallback

__all__ = ["Agent", "AgentGraph", "Handoff", "InputFilter", "graph_agents", "graph_of", "rebuilt"]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

InputFilter: TypeAlias = Callable[[tuple[Message, ...]], Sequence[Message] | Awaitable[Sequence[Message]]]
"""``input_filter(messages) -> messages`` (sync or async): the history a handoff's target is sent."""


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, got {name!r}")
    if _NAME.fullmatch(name) is None:
        raise ValueError(
            f"{what} {name!r} does not match [A-Za-z0-9_-]{{1,64}}: use 1 to 64 letters, digits, '_' or '-'"
        )
    return name


@dataclass(frozen=True, eq=False)
class Agent:
    """One agent: what the model is told (``instructions``), may call (``tools``, as ``.tools(...)``
    takes them) and hand the conversation to (``handoffs``: agents, ``Handoff``s, or an agent's name
    as short for ``Handoff(name)``), the options laid over the request's while it is active, and
    optionally a ``model`` of its own. ``name`` matches ``[A-Za-z0-9_-]{1,64}``.

    >>> billing = Agent("billing", instructions="You handle invoices.", tools=[lookup_invoice])
    >>> triage = Agent("triage", instructions="Route the customer.", handoffs=[billing])
    >>> client.prompt("My invoice is wrong").agent(triage).call().content()
    """

    name: str
    instructions: str | None = field(default=None, kw_only=True)
    description: str | None = field(default=None, kw_only=True)
    tools: Sequence[object] = field(default=(), kw_only=True)
    handoffs: Sequence[Agent | Handoff | str] = field(default=(), kw_only=True)
    options: ChatOptions | None = field(default=None, kw_only=True)
    model: ChatModel | None = field(default=None, kw_only=True)
    _graph: AgentGraph | None = field(default=None, init=False, repr=False, compare=False)
    _callbacks: tuple[ToolCallback, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _providers: tuple[Any, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_name(self.name, "Agent name")
        for what in ("instructions", "description"):
            value = getattr(self, what)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"Agent {self.name!r}: {what} must be a str or None, got {value!r}")
        if isinstance(self.tools, str | bytes):
            raise TypeError(f"Agent {self.name!r}: tools must be a sequence of tools, got {self.tools!r}")
        object.__setattr__(self, "tools", tuple(self.tools))
        if isinstance(self.handoffs, str | bytes | Agent | Handoff):
            raise TypeError(f"Agent {self.name!r}: handoffs must be a sequence, got {self.handoffs!r}")
        handoffs = tuple(self.handoffs)
        for h in handoffs:
            if not isinstance(h, Agent | Handoff | str):
                raise TypeError(
                    f"Agent {self.name!r}: a handoff must be an Agent, a Handoff or an agent's name, "
                    f"got {h!r}"
                )
        object.__setattr__(self, "handoffs", handoffs)
        if self.options is not None and not isinstance(self.options, ChatOptions):
            raise TypeError(f"Agent {self.name!r}: options must be ChatOptions, got {self.options!r}")
        if self.model is not None and not (
            callable(getattr(self.model, "call", None)) and callable(getattr(self.model, "stream", None))
        ):
            raise TypeError(f"Agent {self.name!r}: model must be a ChatModel, got {self.model!r}")

    def tool_callbacks(self) -> tuple[ToolCallback, ...]:
        """The agent's tools as ToolCallbacks (a tool source, such as an MCP server, is asked each
        time; other tools are turned into callbacks once)."""
        fixed = self._callbacks
        if fixed is None:
            providers = tuple(t for t in self.tools if isinstance(t, ToolCallbackProvider))
            plain = [t for t in self.tools if not isinstance(t, ToolCallbackProvider)]
            fixed = tuple(unchecked_tool_callbacks(*plain))
            object.__setattr__(self, "_providers", providers)
            object.__setattr__(self, "_callbacks", fixed)
        providers = self._providers
        return fixed + tuple(unchecked_tool_callbacks(*providers)) if providers else fixed

    @property
    def has_tool_sources(self) -> bool:
        """True when a tool of the agent is a source whose tools can change (an MCP server)."""
        self.tool_callbacks()
        return bool(self._providers)


@dataclass(frozen=True, eq=False)
class Handoff:
    """A handoff to ``agent`` (an ``Agent``, or the name of an agent of the graph), with the tool's
    name (default ``transfer_to_<name>``), a description in place of the target's, and an
    ``input_filter`` shaping the history the target is sent (it may not drop the handoff round)."""

    agent: Agent | str
    tool_name: str | None = field(default=None, kw_only=True)
    description: str | None = field(default=None, kw_only=True)
    input_filter: InputFilter | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if isinstance(self.agent, str):
            _check_name(self.agent, "Handoff target")
        elif not isinstance(self.agent, Agent):
            raise TypeError(f"Handoff takes an Agent or an agent's name, got {self.agent!r}")
        if self.tool_name is not None:
            _check_name(self.tool_name, "Handoff tool_name")
        if self.description is not None and not isinstance(self.description, str):
            raise TypeError(f"Handoff description must be a str or None, got {self.description!r}")
        if self.input_filter is not None and not callable(self.input_filter):
            raise TypeError(f"Handoff input_filter must be callable, got {self.input_filter!r}")

    @property
    def target_name(self) -> str:
        """The name of the agent this hands over to."""
        return self.agent if isinstance(self.agent, str) else self.agent.name


@dataclass(frozen=True, slots=True)
class Route:
    """One handoff of one agent, resolved: its tool's name and description, and the target."""

    tool_name: str
    description: str
    target: Agent
    handoff: Handoff


@dataclass(frozen=True, slots=True)
class AgentGraph:
    """The agents reachable from ``start`` through handoffs, by name, and each one's routes;
    ``cache`` keeps what the advisor derives from them (the handoff tools, shaped options)."""

    start: Agent
    agents: Mapping[str, Agent]
    routes: Mapping[str, Mapping[str, Route]]  # agent name -> tool name -> route
    cache: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def route(self, agent: Agent, tool_name: str) -> Route | None:
        return self.routes[agent.name].get(tool_name)


def _as_handoff(item: Agent | Handoff | str) -> Handoff:
    return item if isinstance(item, Handoff) else Handoff(item)


def graph_of(start: Agent) -> AgentGraph:
    """The graph reachable from ``start`` (checked once, then kept on ``start``)."""
    graph = start._graph
    if graph is None:
        graph = _build_graph(start)
        object.__setattr__(start, "_graph", graph)
    return graph


def _build_graph(start: Agent) -> AgentGraph:
    agents: dict[str, Agent] = {}
    todo = [start]
    while todo:  # every Agent object reachable by objects first; names are resolved after
        agent = todo.pop()
        known = agents.get(agent.name)
        if known is agent:
            continue
        if known is not None:
            raise ChainConfigurationError(
                f"two different agents are named {agent.name!r} in the graph of agent {start.name!r}; "
                "give each agent its own name (or reuse one Agent object)"
            )
        agents[agent.name] = agent
        for item in agent.handoffs:
            reached = _as_handoff(item).agent
            if isinstance(reached, Agent):
                todo.append(reached)
    routes: dict[str, dict[str, Route]] = {}
    for agent in agents.values():
        mine: dict[str, Route] = {}
        for item in agent.handoffs:
            handoff = _as_handoff(item)
            found = agents.get(handoff.target_name)
            if found is None:
                raise ChainConfigurationError(
                    f"agent {agent.name!r} hands off to {handoff.target_name!r}, which is not an agent "
                    f"of the graph (it has {sorted(agents)!r})"
                )
            target: Agent = found
            name = handoff.tool_name or f"transfer_to_{target.name}"
            if name in mine:
                raise ChainConfigurationError(
                    f"agent {agent.name!r} has two handoffs with the tool name {name!r}; give one "
                    "Handoff(tool_name=...) of its own"
                )
            about = handoff.description if handoff.description is not None else target.description
            description = f"Hand the conversation over to {target.name}" + (f": {about}" if about else "")
            mine[name] = Route(name, description, target, handoff)
        routes[agent.name] = mine
    return AgentGraph(start, agents, routes)


def check_agent(agent: object, what: str) -> Agent:
    """``agent`` if it is an Agent, else a TypeError naming ``what``."""
    if not isinstance(agent, Agent):
        raise TypeError(f"{what} takes an Agent, got {agent!r}")
    return agent


def describe(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def rebuilt(start: Agent, tool: Callable[[Agent, ToolCallback], object]) -> Agent:
    """``start``'s graph again, each agent's tools replaced by ``tool(agent, callback)`` (a durable
    run puts its seams there); handoffs lead to the rebuilt agents."""
    made: dict[int, Agent] = {}

    def again(agent: Agent) -> Agent:
        done = made.get(id(agent))
        if done is not None:
            return done
        handoffs: list[Agent | Handoff | str] = []
        for item in agent.handoffs:
            if isinstance(item, Agent):
                handoffs.append(again(item))
            elif isinstance(item, Handoff) and isinstance(item.agent, Agent):
                handoffs.append(
                    Handoff(
                        again(item.agent),
                        tool_name=item.tool_name,
                        description=item.description,
                        input_filter=item.input_filter,
                    )
                )
            else:
                handoffs.append(item)
        made[id(agent)] = copy = Agent(
            agent.name,
            instructions=agent.instructions,
            description=agent.description,
            tools=[tool(agent, cb) for cb in agent.tool_callbacks()],
            handoffs=handoffs,
            options=agent.options,
            model=agent.model,
        )
        return copy

    return again(start)


def graph_agents(start: Agent) -> tuple[Agent, ...]:
    """Every agent of ``start``'s graph."""
    return tuple(graph_of(start).agents.values())
