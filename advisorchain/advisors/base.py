"""BaseAdvisor: an advisor made of two plain functions, safe on calls and on streams."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar, Literal, get_args

from .._streams import closing, collect
from ..chain import (
    CallAdvisorChain,
    StreamAdvisorChain,
    checked_request,
    checked_response,
    is_end_of_answer,
)
from ..chain.vocabulary import DEFAULT_ORDER
from ..errors import ChainConfigurationError
from ..model import ChatClientMessageAggregator, ChatClientRequest, ChatClientResponse

__all__ = ["BaseAdvisor", "StreamMode"]

StreamMode = Literal["observe", "buffer"]


class BaseAdvisor:
    """An advisor made of two plain functions: ``before`` edits the request, ``after`` the response.

    Subclasses override either or both, and set ``order`` (default 0) and ``name`` (default the
    class name) as class attributes or properties. No constructor arguments are needed.

    On the stream path ``before`` runs once; ``after`` is called once, with the whole answer
    aggregated (text, tool calls, finish reason, usage), whatever ``stream_mode`` says:

    - ``"observe"`` (default): chunks reach the caller live and unchanged; the context of what
      ``after`` returns rides on the answer's last chunk (text changes cannot reach the caller: the
      text already went out).
    - ``"buffer"``: the advisor holds the answer and the caller receives exactly what ``after``
      returned, as one chunk — for redaction, rewriting and guards.

    "The answer" is what ``chain.next_stream`` yields: one tool-loop round for an advisor inside the
    loop, the whole loop's output for one outside it.

    >>> class Redact(BaseAdvisor):
    ...     stream_mode = "buffer"
    ...     def after(self, response, chain):
    ...         return redacted(response)
    """

    order: int = DEFAULT_ORDER
    stream_mode: ClassVar[StreamMode] = "observe"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.stream_mode not in get_args(StreamMode):
            raise ChainConfigurationError(
                f"{cls.__name__}.stream_mode is {cls.stream_mode!r}; use 'observe' (chunks pass live, "
                "after() sees the whole answer) or 'buffer' (the caller gets what after() returns)"
            )

    @property
    def name(self) -> str:
        return type(self).__name__

    def before(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientRequest:
        """The request the rest of the chain receives (default: unchanged)."""
        return request

    def after(
        self, response: ChatClientResponse, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientResponse:
        """The response the caller receives (default: unchanged)."""
        return response

    def _before(
        self, request: ChatClientRequest, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientRequest:
        return checked_request(self.before(request, chain), self, "before()")

    def _after(
        self, response: ChatClientResponse, chain: CallAdvisorChain | StreamAdvisorChain
    ) -> ChatClientResponse:
        return checked_response(self.after(response, chain), self, "after()")

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        # The checks of _before/_after, inlined: this is every BaseAdvisor's hop on the call path.
        edited = self.before(request, chain)
        if type(edited) is not ChatClientRequest:
            edited = checked_request(edited, self, "before()")
        response = self.after(await chain.next_call(edited), chain)
        if type(response) is ChatClientResponse:
            return response
        return checked_response(response, self, "after()")

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        stream = chain.next_stream(self._before(request, chain))
        if self.stream_mode == "buffer":
            answer = ChatClientMessageAggregator.aggregate_responses(await collect(stream))
            yield self._after(answer, chain)
            return
        if type(self).after is BaseAdvisor.after:  # nothing to observe: relay the chunks as they are
            async with closing(stream):
                async for chunk in stream:
                    yield chunk
            return
        # observe: pass chunks live; hold the end of the answer (from its finish reason on) so the
        # context after() returns can ride on its last chunk.
        chunks: list[ChatClientResponse] = []
        held: list[ChatClientResponse] = []
        async with closing(stream):
            async for chunk in stream:
                chunks.append(chunk)
                if held or is_end_of_answer(chunk):
                    held.append(chunk)
                else:
                    yield chunk
        result = self._after(ChatClientMessageAggregator.aggregate_responses(chunks), chain)
        if held:
            for chunk in held[:-1]:
                yield chunk
            yield ChatClientResponse(held[-1].chat_response, result.context)
        elif result.context != (chunks[-1].context if chunks else {}):
            yield ChatClientResponse(None, result.context)  # no chunk left to carry the context
