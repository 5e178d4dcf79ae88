"""The memory contract: ``ChatMemory`` (what advisors use) over a ``ChatMemoryRepository`` (where
messages are stored).

A repository may also offer ``update(conversation_id, change)`` (``AtomicChatMemoryRepository``):
an atomic read-modify-write of one conversation, so that two clients appending to the same
conversation at once both keep their messages. Every repository shipped here does, across threads
and (for SQLite, PostgreSQL and Redis) across processes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from .._checks import check_conversation_id
from ..errors import AdvisorChainError
from ..messages import Message

__all__ = [
    "AtomicChatMemoryRepository",
    "ChatMemory",
    "ChatMemoryDecodeError",
    "ChatMemoryRepository",
    "ConversationChange",
    "conversation_id_of",
]


@runtime_checkable
class ChatMemory(Protocol):
    """The conversations an application remembers, by conversation id."""

    CONVERSATION_ID: ClassVar[str] = "chat_memory_conversation_id"
    """Request param naming the conversation (``.param(ChatMemory.CONVERSATION_ID, "c1")``)."""

    DEFAULT_CONVERSATION_ID: ClassVar[str] = "default"

    def get(self, conversation_id: str) -> list[Message]: ...

    def add(self, conversation_id: str, messages: Sequence[Message]) -> None: ...

    def clear(self, conversation_id: str) -> None: ...


def conversation_id_of(context: Mapping[str, Any], default: str | None = None) -> str | None:
    """The conversation a request names (its param ``ChatMemory.CONVERSATION_ID``), checked to be a
    non-empty str; ``default`` when it names none. The one way the library reads it."""
    given = context.get(ChatMemory.CONVERSATION_ID)
    if given is None:
        return default
    return check_conversation_id(given, f"request param {ChatMemory.CONVERSATION_ID!r}")


@runtime_checkable
class ChatMemoryRepository(Protocol):
    """Stores whole conversations: ``save_all`` replaces a conversation's messages."""

    def find_conversation_ids(self) -> list[str]: ...

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]: ...

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None: ...

    def delete_by_conversation_id(self, conversation_id: str) -> None: ...


ConversationChange = Callable[[list[Message]], Sequence[Message]]
"""Given a conversation's stored messages, the messages to store instead (a pure function: it may
run more than once when an optimistic store retries)."""


@runtime_checkable
class AtomicChatMemoryRepository(ChatMemoryRepository, Protocol):
    """A repository that can change one conversation atomically.

    ``update`` reads the stored messages, applies ``change`` and writes the result as one atomic
    step: a concurrent ``update`` of the same conversation sees either none or all of this one.
    It returns the messages now stored.
    """

    def update(self, conversation_id: str, change: ConversationChange) -> list[Message]: ...


class ChatMemoryDecodeError(AdvisorChainError, ValueError):
    """A stored message could not be read back (a corrupted row, an unknown message type...).

    ``conversation_id`` names the conversation and ``position`` the message's place in it (0 is the
    oldest). Nothing is dropped silently: fix or delete the row, or clear the conversation.
    """

    def __init__(self, conversation_id: str, position: int, reason: str) -> None:
        super().__init__(
            f"stored message {position} of conversation {conversation_id!r} cannot be decoded: {reason}; "
            f"fix or delete that entry, or clear the conversation (delete_by_conversation_id)"
        )
        self.conversation_id = conversation_id
        self.position = position
        self.reason = reason
