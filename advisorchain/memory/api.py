"""The memory contract: ``ChatMemory`` (what advisors use) over a ``ChatMemoryRepository`` (where
messages are stored)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Protocol, runtime_checkable

from ..messages import Message

__all__ = ["ChatMemory", "ChatMemoryRepository"]


@runtime_checkable
class ChatMemory(Protocol):
    """The conversations an application remembers, by conversation id."""

    CONVERSATION_ID: ClassVar[str] = "chat_memory_conversation_id"
    """Request param naming the conversation (``.param(ChatMemory.CONVERSATION_ID, "c1")``)."""

    DEFAULT_CONVERSATION_ID: ClassVar[str] = "default"

    def get(self, conversation_id: str) -> list[Message]: ...

    def add(self, conversation_id: str, messages: Sequence[Message]) -> None: ...

    def clear(self, conversation_id: str) -> None: ...


@runtime_checkable
class ChatMemoryRepository(Protocol):
    """Stores whole conversations: ``save_all`` replaces a conversation's messages."""

    def find_conversation_ids(self) -> list[str]: ...

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]: ...

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None: ...

    def delete_by_conversation_id(self, conversation_id: str) -> None: ...
