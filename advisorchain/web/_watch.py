"""Tool calls as they run: an advisor outside the tool loop hands the loop the request's tools
wrapped, so each call reports its start (name, arguments) and its end (result or error, duration)
to the page while the turn streams on. The page's own instrumentation: the tree it draws leaves
this advisor out (its hops are the agent's)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from .._streams import closing
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..model import ChatClientRequest, ChatClientResponse
from ..tools import ToolCallback, ToolContext
from ..tools.callbacks import WrappedTool
from ._views import error_line, jsonable

__all__ = ["WATCH_NAME", "Emit", "ToolWatch", "WatchedTool"]

Emit = Callable[[str, dict[str, Any]], None]
"""Sends one event (its name and data) to the page."""

WATCH_NAME = "advisorchain web tool watch"


class WatchedTool(WrappedTool):
    """A ToolCallback that reports each call's start and end through ``emit``, then answers exactly
    as the wrapped tool does (its errors included)."""

    def __init__(self, inner: ToolCallback, emit: Emit) -> None:
        super().__init__(inner)
        self._emit = emit

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        """Report the start, run the wrapped tool, report the result or the error."""
        event: dict[str, Any] = {
            "id": context.tool_call_id if context is not None else None,
            "name": self._inner.definition.name,
            "arguments": jsonable(arguments),
        }
        self._emit("tool", {**event, "state": "running"})
        started = time.perf_counter()
        try:
            result = await self._inner.call(arguments, context)
        except Exception as exc:
            self._emit("tool", {**event, "state": "error", "error": error_line(exc), "ms": _ms(started)})
            raise
        self._emit("tool", {**event, "state": "done", "result": jsonable(result), "ms": _ms(started)})
        return result


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


class ToolWatch:
    """An advisor placed just outside the tool loop: the request's tools reach the loop wrapped in
    ``WatchedTool``."""

    def __init__(self, emit: Emit, order: int) -> None:
        self._emit = emit
        self._order = order

    @property
    def name(self) -> str:
        return WATCH_NAME

    @property
    def order(self) -> int:
        return self._order

    def _watched(self, request: ChatClientRequest) -> ChatClientRequest:
        options = request.prompt.options
        if options is None or not options.tool_callbacks:
            return request
        tools = tuple(WatchedTool(t, self._emit) for t in options.tool_callbacks)
        return request.copy(prompt=request.prompt.copy(options=options.copy(tool_callbacks=tools)))

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        """The rest of the chain, with the tools watched."""
        return await chain.next_call(self._watched(request))

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """The rest of the chain's stream, with the tools watched."""
        async with closing(chain.next_stream(self._watched(request))) as stream:
            async for chunk in stream:
                yield chunk
