"""``InMemoryChatMemoryRepository``: conversations in a dict, for tests and single-process apps."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ..messages import Message
from ._store import BlockingRepository, check_conversation_id, check_messages
from .api import ConversationChange
from .entries import StoredEntry

__all__ = ["InMemoryChatMemoryRepository"]


class InMemoryChatMemoryRepository(BlockingRepository):
    """Keeps conversations in process memory; thread-safe, lost when the process ends.

    Messages are immutable values, so storing them as they are round-trips them exactly.
    """

    def __init__(self) -> None:
        self._conversations: dict[str, list[Message]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Nothing to release: the conversations stay readable."""

    def find_conversation_ids(self) -> list[str]:
        """Every conversation id with stored messages."""
        with self._lock:
            return list(self._conversations)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """The conversation's messages, oldest first ([] when unknown)."""
        check_conversation_id(conversation_id)
        with self._lock:
            return list(self._conversations.get(conversation_id, ()))

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace the conversation's messages (an empty list deletes it)."""
        check_conversation_id(conversation_id)
        stored = check_messages(conversation_id, messages)
        with self._lock:
            self._put(conversation_id, stored)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Forget the conversation."""
        check_conversation_id(conversation_id)
        with self._lock:
            self._conversations.pop(conversation_id, None)

    def update(self, conversation_id: str, change: ConversationChange) -> list[Message]:
        """Apply ``change`` to the conversation atomically; returns the messages now stored."""
        check_conversation_id(conversation_id)
        with self._lock:
            stored = check_messages(
                conversation_id, change(list(self._conversations.get(conversation_id, ())))
            )
            self._put(conversation_id, stored)
            return list(stored)

    def find_entries(self, conversation_id: str) -> list[StoredEntry]:
        """Every stored message as an entry (its text is the message's repr; all are readable)."""
        return [
            StoredEntry(i, repr(m), m) for i, m in enumerate(self.find_by_conversation_id(conversation_id))
        ]

    def delete_unreadable(self, conversation_id: str) -> list[StoredEntry]:
        """Nothing to drop: message objects kept in memory are always readable."""
        check_conversation_id(conversation_id)
        return []

    def _put(self, conversation_id: str, messages: list[Message]) -> None:
        if messages:
            self._conversations[conversation_id] = messages
        else:
            self._conversations.pop(conversation_id, None)
