"""What the usage tests share: scripted answers that report usage, a tool, and one way to run a
request on either path (the stream's chunks kept, to look at the last one's context)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    ChatClientMessageAggregator,
    ChatClientRequestSpec,
    ChatClientResponse,
    ChatResponse,
    ModelPrice,
    RunUsage,
    ToolCall,
    Usage,
    tool,
)

Path = Literal["call", "stream"]
PATHS: tuple[Path, ...] = ("call", "stream")

PRICE = ModelPrice(Decimal("2"), Decimal("10"))
"""$2 / $10 per million tokens: 100 in + 10 out cost $0.0003."""
PRICES = {"scripted": PRICE}

ran: list[str] = []
ONE_CALL = Usage(100, 10)
"""What each scripted answer reports unless told otherwise."""


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    ran.append(city)
    return f"{city}: sunny"


def asks(*cities: str, usage: Usage | None = ONE_CALL, round_id: str = "r") -> ChatResponse:
    """An answer asking for ``weather`` once per city."""
    calls = tuple(ToolCall(f"{round_id}-{i}", "weather", f'{{"city": "{c}"}}') for i, c in enumerate(cities))
    return ChatResponse.of(AssistantMessage(None, calls), "tool_calls", usage=usage)


def says(text: str, usage: Usage | None = ONE_CALL, finish: str = "stop") -> ChatResponse:
    """A text answer."""
    return ChatResponse.of(AssistantMessage(text), finish, usage=usage)


@dataclass
class Outcome:
    """What one request gave back: its final response (the stream's aggregated) and, on the
    stream path, every chunk."""

    response: ChatClientResponse
    chunks: list[ChatClientResponse]

    @property
    def text(self) -> str | None:
        chat = self.response.chat_response
        return chat.text if chat is not None else None

    @property
    def usage(self) -> Usage | None:
        chat = self.response.chat_response
        return chat.metadata.usage if chat is not None else None

    @property
    def finish_reason(self) -> str | None:
        chat = self.response.chat_response
        return chat.finish_reason if chat is not None else None

    @property
    def run_usage(self) -> RunUsage:
        """``RUN_USAGE`` of the response (on the stream path: of the last chunk)."""
        context = self.chunks[-1].context if self.chunks else self.response.context
        value = context[AdvisorParams.RUN_USAGE]
        assert isinstance(value, RunUsage)
        return value


async def run(spec: ChatClientRequestSpec, path: Path) -> Outcome:
    """``spec`` on ``path``."""
    if path == "call":
        return Outcome(await spec.acall().chat_client_response(), [])
    chunks = [c async for c in spec.astream().chat_client_responses()]
    return Outcome(ChatClientMessageAggregator.aggregate_responses(chunks), chunks)
