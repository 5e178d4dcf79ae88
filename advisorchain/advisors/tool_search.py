"""ToolSearchToolCallingAdvisor: a tool loop for large tool sets.

Sending hundreds of tool definitions with every request costs tokens and confuses models. This
loop indexes the request's tools when it starts, shows the model only a ``tool_search`` tool
(plus any tools named ``always_available``), and from then on exposes each tool the search has
found, on every following iteration of the loop.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._checks import check_int
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..model import ChatClientRequest, ChatOptions, Prompt
from ..tools.api import ToolCallback, ToolContext, ToolDefinition
from ..tools.callbacks import ParsedTool
from .tool_calling import ToolCallingAdvisor

__all__ = ["ToolIndex", "ToolSearchToolCallingAdvisor"]

_STATE_KEY = "advisorchain.tool_search.state"
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _words(text: str) -> list[str]:
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


class ToolIndex:
    """A keyword index over tool names and descriptions (BM25-style scoring; a tool's name
    counts twice as much as its description)."""

    def __init__(self, tools: Sequence[ToolCallback]) -> None:
        self._tools = {t.definition.name: t for t in tools}
        self._terms: dict[str, Counter[str]] = {}
        for name, t in self._tools.items():
            terms = Counter(_words(name) * 2 + _words(t.definition.description))
            self._terms[name] = terms
        df: Counter[str] = Counter()
        for terms in self._terms.values():
            df.update(set(terms))
        n = max(len(self._tools), 1)
        self._idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}
        self._avg_len = sum(sum(t.values()) for t in self._terms.values()) / n or 1.0

    def __len__(self) -> int:
        return len(self._tools)

    def tool(self, name: str) -> ToolCallback | None:
        return self._tools.get(name)

    def search(self, query: str, limit: int) -> list[ToolDefinition]:
        """The definitions of the best-matching tools, best first (ties by name)."""
        words = set(_words(query))
        scored: list[tuple[float, str]] = []
        for name, terms in self._terms.items():
            length = sum(terms.values())
            score = 0.0
            for w in words:
                tf = terms.get(w, 0)
                if tf:
                    score += self._idf[w] * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / self._avg_len))
            if score > 0:
                scored.append((-score, name))
        return [self._tools[name].definition for _, name in sorted(scored)[:limit]]


@dataclass
class _SearchState:
    """The state of one loop: the index and the tools found so far (in the order found)."""

    index: ToolIndex
    search_tool: _ToolSearchTool
    discovered: list[str] = field(default_factory=list)

    def exposed(self) -> tuple[ToolCallback, ...]:
        found = (self.index.tool(n) for n in self.discovered)
        return (self.search_tool, *(t for t in found if t is not None))


_SEARCH = ToolDefinition(
    "tool_search",
    "Search the available tools by keywords describing the capability you need. "
    "The tools found become callable in your next step.",
    {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "keywords, e.g. 'weather forecast'"}},
        "required": ["query"],
    },
)


class _ToolSearchTool(ParsedTool):
    """The ``tool_search`` tool: finds tools by keywords and makes them available."""

    def __init__(self, limit: int) -> None:
        super().__init__(_SEARCH)
        self.limit = limit
        self.state: _SearchState | None = None

    async def call_parsed(self, args: Mapping[str, Any], context: ToolContext | None) -> str:
        state = self.state
        if state is None:
            return "Error: tool_search is only available inside a ToolSearchToolCallingAdvisor loop."
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            return 'Error: give a non-blank "query" of keywords, e.g. {"query": "send email"}.'
        found = state.index.search(query, self.limit)
        if not found:
            return f"No tools matched {query!r}. Try other keywords."
        for d in found:
            if d.name not in state.discovered:
                state.discovered.append(d.name)
        lines = [f"- {d.name}: {d.description}" for d in found]
        return "Found these tools; they are now available:\n" + "\n".join(lines)


class ToolSearchToolCallingAdvisor(ToolCallingAdvisor):
    """A ToolCallingAdvisor that shows the model a ``tool_search`` tool instead of every tool.

    ``max_results`` bounds the tools one search returns; ``always_available`` names tools exposed
    from the start.
    """

    def __init__(self, *, max_results: int = 5, always_available: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_results = check_int(max_results, "max_results", minimum=1)
        self.always_available = tuple(always_available)

    @property
    def name(self) -> str:
        return "Tool Search Tool Calling Advisor"

    async def do_initialize_loop(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientRequest:
        request = await super().do_initialize_loop(request, chain)
        options = request.prompt.options
        tools = options.tool_callbacks if options is not None else ()
        index = ToolIndex(tools)
        unknown = [n for n in self.always_available if index.tool(n) is None]
        if unknown:
            raise ValueError(f"always_available names tools this request does not have: {unknown!r}")
        search_tool = _ToolSearchTool(self.max_results)
        state = _SearchState(index, search_tool, list(self.always_available))
        search_tool.state = state
        return request.copy(context={**request.context, _STATE_KEY: state})

    async def do_before_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientRequest:
        request = await super().do_before_call(request, chain)
        state = request.context.get(_STATE_KEY)
        if not isinstance(state, _SearchState):
            return request
        return request.copy(prompt=_with_tools(request.prompt, state.exposed()))


def _with_tools(prompt: Prompt, tools: tuple[ToolCallback, ...]) -> Prompt:
    options = prompt.options or ChatOptions()
    return prompt.copy(options=options.copy(tool_callbacks=tools))
