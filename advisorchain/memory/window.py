"""``MessageWindowChatMemory``: a ChatMemory that keeps a sliding window of the newest messages."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Sequence
from typing import ClassVar

from .._checks import check_int
from ..messages import Message, SystemMessage, ToolResponseMessage, UserMessage
from ._store import check_conversation_id, check_messages
from .api import AtomicChatMemoryRepository, ChatMemory, ChatMemoryRepository
from .in_memory import InMemoryChatMemoryRepository

__all__ = ["MessageWindowChatMemory", "apply_window"]


def apply_window(stored: Sequence[Message], new: Sequence[Message], max_messages: int) -> list[Message]:
    """The messages to store after adding ``new`` to ``stored``, as Spring's window does.

    * A new system message that is not stored yet replaces every stored system message (one that
      is already stored is not added twice).
    * System messages are always kept. When there are more than ``max_messages`` messages, the
      oldest others are dropped, and dropping goes on until the first kept non-system message is a
      UserMessage, so a tool response never outlives its assistant tool-call message (possibly no
      non-system message is kept). ``max_messages`` bounds everything when the system messages
      themselves fit in it.
    * The same dropping happens, whatever the count, when the first non-system message would be a
      tool response (its tool call was dropped by an earlier add): an orphan tool result is never
      stored, since providers reject it.
    """
    new_systems = [m for m in new if isinstance(m, SystemMessage)]
    if any(s not in stored for s in new_systems):
        merged: list[Message] = [m for m in stored if not isinstance(m, SystemMessage)]
        merged.extend(new)
    else:
        merged = list(stored)
        merged.extend(m for m in new if not isinstance(m, SystemMessage))
    excess = len(merged) - max_messages
    if excess <= 0 and not _starts_with_tool_response(merged):
        return merged
    return _drop_oldest(merged, max(excess, 0))


def _starts_with_tool_response(messages: Sequence[Message]) -> bool:
    """True when the first non-system message answers a tool call that is no longer stored."""
    for m in messages:
        if not isinstance(m, SystemMessage):
            return isinstance(m, ToolResponseMessage)
    return False


def _drop_oldest(messages: Iterable[Message], excess: int) -> list[Message]:
    kept: list[Message] = []
    dropped = 0
    dropping = True
    for m in messages:
        if isinstance(m, SystemMessage):
            kept.append(m)
            continue
        if dropping and (dropped < excess or not isinstance(m, UserMessage)):
            dropped += 1
            continue
        dropping = False
        kept.append(m)
    return kept


class MessageWindowChatMemory(ChatMemory):
    """A ChatMemory keeping at most ``max_messages`` messages per conversation (see ``apply_window``).

    ``add`` is one atomic read-modify-write when the repository has ``update`` (every repository
    shipped here does), so concurrent appends to one conversation are all kept, in order of arrival,
    even from several processes. The ``a``-prefixed methods never block the event loop.

    >>> memory = MessageWindowChatMemory(SQLiteChatMemoryRepository("chat.db"), max_messages=30)
    >>> memory.add("c1", [UserMessage("Hi, I'm Ada.")])
    >>> memory.get("c1")
    [UserMessage(text="Hi, I'm Ada.", metadata={})]
    """

    DEFAULT_MAX_MESSAGES: ClassVar[int] = 20

    def __init__(
        self, repository: ChatMemoryRepository | None = None, max_messages: int = DEFAULT_MAX_MESSAGES
    ) -> None:
        check_int(max_messages, "max_messages", minimum=1)
        self.repository: ChatMemoryRepository = (
            InMemoryChatMemoryRepository() if repository is None else repository
        )
        self.max_messages = max_messages
        # Only for repositories without ``update``: then appends are atomic within this process only.
        self._fallback_lock = threading.Lock()

    def get(self, conversation_id: str) -> list[Message]:
        """The conversation's stored messages, oldest first."""
        return self.repository.find_by_conversation_id(check_conversation_id(conversation_id))

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        """Append ``messages`` (one message or several) and apply the window, atomically."""
        check_conversation_id(conversation_id)
        new = check_messages(conversation_id, messages)
        if not new:
            return
        max_messages = self.max_messages

        def change(stored: list[Message]) -> list[Message]:
            return apply_window(stored, new, max_messages)

        repository = self.repository
        if isinstance(repository, AtomicChatMemoryRepository):
            repository.update(conversation_id, change)
            return
        with self._fallback_lock:
            repository.save_all(conversation_id, change(repository.find_by_conversation_id(conversation_id)))

    def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        self.repository.delete_by_conversation_id(check_conversation_id(conversation_id))

    async def aget(self, conversation_id: str) -> list[Message]:
        """``get`` without blocking the event loop."""
        return await asyncio.to_thread(self.get, conversation_id)

    async def aadd(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        """``add`` without blocking the event loop."""
        await asyncio.to_thread(self.add, conversation_id, messages)

    async def aclear(self, conversation_id: str) -> None:
        """``clear`` without blocking the event loop."""
        await asyncio.to_thread(self.clear, conversation_id)
