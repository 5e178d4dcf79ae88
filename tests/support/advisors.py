"""Small advisors shared by the core tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

from advisorchain import (
    BaseAdvisor,
    CallAdvisorChain,
    ChatClientRequest,
    ChatClientResponse,
    StreamAdvisorChain,
)


class Recorder(BaseAdvisor):
    """Appends its name to a shared log on the way in and on the way out."""

    def __init__(self, name: str, order: int, log: list[str]) -> None:
        self._name, self.order, self.log = name, order, log

    @property
    def name(self) -> str:
        return self._name

    def before(self, request: ChatClientRequest, chain: object) -> ChatClientRequest:
        self.log.append(f"before {self._name}")
        return request

    def after(self, response: ChatClientResponse, chain: object) -> ChatClientResponse:
        self.log.append(f"after {self._name}")
        return response


class CallOnly:
    """An advisor written against the protocol, without BaseAdvisor."""

    name = "call-only"
    order = 0

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        return await chain.next_call(request)


class Twice:
    """A recursive advisor: runs the rest of the chain twice and returns the second answer."""

    name = "twice"
    order = 0

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        await chain.copy(self).next_call(request)
        return await chain.copy(self).next_call(request)

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        async for chunk in chain.next_stream(request):
            yield chunk
