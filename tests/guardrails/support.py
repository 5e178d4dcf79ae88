"""What the guardrail tests share: running a request on either path, and a guard that records what
it was shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from advisorchain import ChatClientRequestSpec, ChatClientResponse, ChatResponse, GuardContext, GuardResult

Path = Literal["call", "stream"]
PATHS: tuple[Path, ...] = ("call", "stream")


async def run(spec: ChatClientRequestSpec, path: Path) -> ChatResponse:
    """The request's answer: the call's response, or the stream's chunks aggregated."""
    if path == "call":
        return await spec.acall().chat_response()
    from advisorchain import ChatClientMessageAggregator

    chunks = [c async for c in spec.astream().chat_responses()]
    return ChatClientMessageAggregator.aggregate(chunks)


async def chunks_of(spec: ChatClientRequestSpec) -> list[ChatClientResponse]:
    """Every chunk the caller receives."""
    return [c async for c in spec.astream().chat_client_responses()]


class Recorder:
    """A guard that records each text and context it was shown and answers with ``verdict``."""

    def __init__(
        self, verdict: Callable[[str], bool | GuardResult] = lambda _: True, name: str = "rec"
    ) -> None:
        self.verdict = verdict
        self.name = name
        self.texts: list[str] = []
        self.contexts: list[GuardContext] = []

    async def __call__(self, text: str, context: GuardContext) -> bool | GuardResult:
        self.texts.append(text)
        self.contexts.append(context)
        return self.verdict(text)


def texts_of(messages: list[Any]) -> list[str | None]:
    return [getattr(m, "text", None) for m in messages]
