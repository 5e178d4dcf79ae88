"""SimpleLoggerAdvisor: logs each request and response passing its place in the chain.

Placed inside the tool loop (order above ``ToolCallingAdvisor.DEFAULT_ORDER``) it logs every
iteration; outside, one exchange per call. It logs message text, so it is opt-in and logs at
DEBUG by default.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

from .._streams import tap
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..chain.vocabulary import DEFAULT_ORDER, check_order
from ..model import ChatClientMessageAggregator, ChatClientRequest, ChatClientResponse

__all__ = ["SimpleLoggerAdvisor"]

_LOGGER = logging.getLogger("advisorchain.advisors.logging")


def _describe_request(request: ChatClientRequest) -> str:
    lines = [f"request: {len(request.prompt.instructions)} message(s)"]
    for m in request.prompt.instructions:
        lines.append(f"  {m.type.value}: {m!r}")
    options = request.prompt.options
    if options is not None and options.tool_callbacks:
        lines.append(f"  tools: {[cb.definition.name for cb in options.tool_callbacks]}")
    return "\n".join(lines)


def _describe_response(response: ChatClientResponse) -> str:
    chat = response.chat_response
    if chat is None:
        return "response: none"
    lines = [f"response: finish_reason={chat.finish_reason!r} usage={chat.metadata.usage!r}"]
    for g in chat.generations:
        lines.append(f"  assistant: text={g.output.text!r} tool_calls={list(g.output.tool_calls)!r}")
    return "\n".join(lines)


class SimpleLoggerAdvisor:
    """Logs requests and responses (call and stream; a stream is logged once, aggregated).

    ``request_to_string`` / ``response_to_string`` replace the default renderings.
    """

    def __init__(
        self,
        *,
        order: int = DEFAULT_ORDER,
        level: int = logging.DEBUG,
        logger: logging.Logger | None = None,
        request_to_string: Callable[[ChatClientRequest], str] = _describe_request,
        response_to_string: Callable[[ChatClientResponse], str] = _describe_response,
    ) -> None:
        self.order = check_order(order)
        self.level = level
        self.logger = logger or _LOGGER
        self._request_to_string = request_to_string
        self._response_to_string = response_to_string

    @property
    def name(self) -> str:
        return "SimpleLoggerAdvisor"

    def _log_request(self, request: ChatClientRequest) -> None:
        if self.logger.isEnabledFor(self.level):
            self.logger.log(self.level, self._request_to_string(request))

    def _log_response(self, response: ChatClientResponse) -> None:
        if self.logger.isEnabledFor(self.level):
            self.logger.log(self.level, self._response_to_string(response))

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        self._log_request(request)
        response = await chain.next_call(request)
        self._log_response(response)
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        self._log_request(request)

        async def log_answer(chunks: list[ChatClientResponse]) -> None:
            self._log_response(ChatClientMessageAggregator.aggregate_responses(chunks))

        async for chunk in tap(chain.next_stream(request), log_answer):
            yield chunk
