"""Query: what the retrieval pipeline works on — the user's text, the conversation before it, and
the request context."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage, UserMessage
from ..model import Prompt

__all__ = ["Query", "query_of", "render_history"]


@dataclass(frozen=True, slots=True, eq=False)
class Query:
    """A query for the retrieval pipeline. ``history`` is the prompt's messages before the last user
    message (inside a tool loop, the round's tool calls and results too); ``context`` the request
    context (read-only). Equal and hashed by text and history."""

    text: str
    history: Sequence[Message] = ()
    context: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Query.text must be a str, got {self.text!r}")
        if type(self.history) is not tuple:
            object.__setattr__(self, "history", tuple(self.history))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Query):
            return NotImplemented
        return self.text == other.text and self.history == other.history

    def __hash__(self) -> int:
        return hash((self.text, len(self.history)))

    def copy(self, *, text: str | None = None, history: Sequence[Message] | None = None) -> Query:
        """A copy with ``text`` and/or ``history`` replaced (the context kept)."""
        return Query(
            self.text if text is None else text,
            self.history if history is None else tuple(history),
            self.context,
        )


def query_of(prompt: Prompt, context: Mapping[str, Any]) -> Query:
    """The query of a prompt: its last user message's text; the history is the messages before it
    — and, in a tool-loop round, the round's tool calls and results after it."""
    messages = prompt.instructions
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, UserMessage):
            return Query(message.text, (*messages[:i], *messages[i + 1 :]), context)
    return Query("", messages, context)


def render_history(messages: Sequence[Message]) -> str:
    """The conversation as plain lines for a model to read (``user: ...``, ``assistant: ...``,
    ``tool <name>: ...``)."""
    lines: list[str] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, UserMessage):
            lines.append(f"user: {message.text}")
        elif isinstance(message, AssistantMessage):
            if message.text:
                lines.append(f"assistant: {message.text}")
            for call in message.tool_calls:
                lines.append(f"assistant called {call.name}({call.arguments})")
        elif isinstance(message, ToolResponseMessage):
            lines.extend(f"tool {r.name}: {r.response_data}" for r in message.responses)
    return "\n".join(lines)
