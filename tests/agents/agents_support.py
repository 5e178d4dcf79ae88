"""What the agent tests share: a triage → billing graph, scripted replies, and one way to run a
request on each path (call and stream, sync and async) that returns the answer and the chunks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from advisorchain import (
    AssistantMessage,
    ChatClientMessageAggregator,
    ChatClientRequestSpec,
    ChatClientResponse,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    ToolCall,
    Usage,
    tool,
)
from advisorchain.agents import Agent

Mode = Literal["call", "acall", "stream", "astream"]
MODES: tuple[Mode, ...] = ("call", "acall", "stream", "astream")

invoices_seen: list[str] = []


@tool
def lookup_invoice(invoice: str) -> str:
    """Look up an invoice by its number."""
    invoices_seen.append(invoice)
    return f"invoice {invoice}: 42 EUR, paid"


@tool
def refund(invoice: str) -> str:
    """Refund an invoice."""
    return f"refunded {invoice}"


def graph() -> tuple[Agent, Agent, Agent]:
    """triage hands to billing or refunds; billing can hand back to triage (by name)."""
    billing = Agent(
        "billing",
        instructions="You are billing.",
        description="Invoices and payments",
        tools=[lookup_invoice],
        handoffs=["triage"],
    )
    refunds = Agent("refunds", instructions="You are refunds.", tools=[refund])
    triage = Agent("triage", instructions="You are triage.", handoffs=[billing, refunds])
    return triage, billing, refunds


def call(name: str, arguments: str = "{}", id: str | None = None) -> ToolCall:
    return ToolCall(id or f"call_{name}", name, arguments)


def asks(*calls: ToolCall, text: str | None = None) -> AssistantMessage:
    return AssistantMessage(text, calls)


def with_usage(reply: AssistantMessage | str, prompt: int = 100, completion: int = 10) -> ChatResponse:
    message = AssistantMessage(reply) if isinstance(reply, str) else reply
    finish = "tool_calls" if message.tool_calls else "stop"
    return ChatResponse(
        (Generation(message, finish),),
        ChatResponseMetadata(finish_reason=finish, usage=Usage(prompt, completion), model="scripted"),
    )


@dataclass
class Ran:
    """A request's outcome: the answer (aggregated on the stream path) and the chunks."""

    response: ChatClientResponse
    chunks: Sequence[ChatClientResponse]

    @property
    def text(self) -> str | None:
        chat = self.response.chat_response
        return chat.text if chat is not None else None


def run(spec: ChatClientRequestSpec, mode: Mode) -> Ran:
    if mode == "call":
        response = spec.call().chat_client_response()
        return Ran(response, [response])
    if mode == "acall":
        response = asyncio.run(spec.acall().chat_client_response())
        return Ran(response, [response])
    if mode == "stream":
        chunks = list(spec.stream().chat_client_responses())
    else:

        async def collect() -> list[ChatClientResponse]:
            return [c async for c in spec.astream().chat_client_responses()]

        chunks = asyncio.run(collect())
    return Ran(ChatClientMessageAggregator.aggregate_responses(chunks), chunks)
