"""The model a pipeline piece asks (a query transformer, an expander): a ChatModel is used through a
plain client of its own (no advisors, no tools), never through the chain being advised."""

from __future__ import annotations

from typing import Any

from ..client import ChatClient

__all__ = ["ask", "plain_client"]


def plain_client(client: Any) -> ChatClient:
    """``client`` when it is a ChatClient; a ChatModel wrapped in a plain client."""
    if isinstance(client, ChatClient):
        return client
    if not callable(getattr(client, "call", None)):
        raise TypeError(f"expected a ChatModel or a ChatClient, got {client!r}")
    return ChatClient(client, tool_calling_auto_register=False)


async def ask(client: ChatClient, text: str) -> str:
    """The model's answer to ``text`` (verbatim; stripped; "" when it said nothing)."""
    answer = await client.prompt().user(text).acall().content()
    return (answer or "").strip()
