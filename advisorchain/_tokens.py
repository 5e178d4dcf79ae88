"""The token estimate, in one place: 4 characters a token.

Used where a prompt's size must be known before a provider reports it: context compaction
(``ContextCompactionAdvisor``) and the usage limits' estimate of the next prompt. A message's
characters are its text, its tool calls' names and argument JSON, and its tool responses' names and
data; media, tool definitions and the provider's per-message overhead are not counted.
"""

from __future__ import annotations

from collections.abc import Iterable

from .messages import AssistantMessage, Message, ToolResponseMessage

__all__ = ["CHARS_PER_TOKEN", "estimate_tokens", "message_chars"]

CHARS_PER_TOKEN = 4
"""How many characters the estimate counts as one token."""


def message_chars(message: Message) -> int:
    """The characters of ``message`` that the estimate counts."""
    if isinstance(message, ToolResponseMessage):
        return sum(len(r.name) + len(r.response_data) for r in message.responses)
    chars = len(message.text or "")
    if isinstance(message, AssistantMessage):
        chars += sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
    return chars


def estimate_tokens(messages: Iterable[Message]) -> int:
    """The estimated tokens of ``messages``: their characters divided by 4, rounded up."""
    chars = sum(message_chars(m) for m in messages)
    return -(-chars // CHARS_PER_TOKEN)
