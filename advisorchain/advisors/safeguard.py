"""SafeGuardAdvisor: answers a fixed text, without calling the model, when the user's text holds a
sensitive word (as Spring AI's SafeGuardAdvisor)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence

from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..chain.vocabulary import DEFAULT_ORDER, check_order
from ..messages import AssistantMessage
from ..model import ChatClientRequest, ChatClientResponse, ChatResponse

__all__ = ["SafeGuardAdvisor"]

DEFAULT_FAILURE_RESPONSE = (
    "I'm unable to respond to that due to sensitive content. Could we rephrase or discuss something else?"
)


class SafeGuardAdvisor:
    """Blocks requests whose user text contains a sensitive word (case-insensitive): the caller
    gets ``failure_response`` (finish reason ``"stop"``) and the model is not called, on calls and
    streams. The user text is the request's last user message (earlier turns in memory are not
    judged again).

    >>> ChatClient(model, default_advisors=[SafeGuardAdvisor(["password"])])
    """

    def __init__(
        self,
        sensitive_words: Sequence[str],
        failure_response: str = DEFAULT_FAILURE_RESPONSE,
        order: int = DEFAULT_ORDER,
    ) -> None:
        if isinstance(sensitive_words, str):
            raise TypeError(
                f"sensitive_words must be a sequence of words, not one string: {sensitive_words!r}"
            )
        words = [w for w in sensitive_words if isinstance(w, str) and w.strip()]
        if len(words) != len(sensitive_words):
            raise ValueError(f"sensitive_words must be non-blank strings, got {list(sensitive_words)!r}")
        self.sensitive_words: tuple[str, ...] = tuple(words)
        self.failure_response = failure_response
        self.order = check_order(order)
        self._pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE) if words else None

    @property
    def name(self) -> str:
        return "SafeGuardAdvisor"

    def blocks(self, request: ChatClientRequest) -> bool:
        """True when the request's user text contains a sensitive word."""
        user = request.prompt.last_user_message
        return self._pattern is not None and user is not None and bool(self._pattern.search(user.text))

    def _refusal(self, request: ChatClientRequest) -> ChatClientResponse:
        return ChatClientResponse(
            ChatResponse.of(AssistantMessage(self.failure_response), "stop"), request.context
        )

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        if self.blocks(request):
            return self._refusal(request)
        return await chain.next_call(request)

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        if self.blocks(request):
            yield self._refusal(request)
            return
        async for chunk in chain.next_stream(request):
            yield chunk
