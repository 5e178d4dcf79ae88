"""What the repositories share: one JSON encoding of messages (through ``message_to_dict``), errors
that name the conversation, the row plan for stores that keep one row per message, and async
methods that run the blocking driver in a worker thread."""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, Self

from .._checks import check_conversation_id
from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
    message_from_dict,
    message_to_dict,
)
from .api import ChatMemoryDecodeError, ConversationChange

__all__ = [
    "BlockingRepository",
    "check_conversation_id",
    "check_messages",
    "decode",
    "decode_all",
    "encode",
    "plan_rows",
]

_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolResponseMessage)


def check_messages(conversation_id: str, messages: Message | Iterable[object]) -> list[Message]:
    """The messages as a list; anything that is not a Message is a TypeError naming it."""
    if isinstance(messages, _MESSAGE_TYPES):
        return [messages]
    result: list[Message] = []
    for i, m in enumerate(messages):
        if not isinstance(m, _MESSAGE_TYPES):
            raise TypeError(
                f"message {i} for conversation {conversation_id!r} is {m!r}, not a Message "
                "(SystemMessage, UserMessage, AssistantMessage or ToolResponseMessage)"
            )
        result.append(m)
    return result


def encode(conversation_id: str, message: Message) -> str:
    """The stored JSON text of ``message`` (ASCII, so any backend stores it byte for byte).

    Metadata that would not come back equal (a tuple, a NaN, a non-str key...) is a ValueError
    raised before anything is written.
    """
    data = message_to_dict(message)
    try:
        text = json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"cannot store {message!r} in conversation {conversation_id!r}: "
            f"its metadata is not JSON-safe ({e})"
        ) from e
    metadata = data["metadata"]
    if metadata and json.loads(json.dumps(metadata)) != metadata:
        raise ValueError(
            f"cannot store {message!r} in conversation {conversation_id!r}: its metadata would not "
            "read back equal (use str keys, lists instead of tuples, plain JSON values)"
        )
    return text


def decode(conversation_id: str, position: int, raw: str | bytes | bytearray | memoryview) -> Message:
    """The message stored as ``raw``; anything unreadable is a ChatMemoryDecodeError naming it."""
    try:
        data: Any = json.loads(bytes(raw) if isinstance(raw, memoryview) else raw)
        return message_from_dict(data)
    except (ValueError, TypeError) as e:
        raise ChatMemoryDecodeError(conversation_id, position, f"{e} (stored text: {_preview(raw)})") from e


def decode_all(conversation_id: str, raws: Iterable[str | bytes | bytearray | memoryview]) -> list[Message]:
    """Every stored message of a conversation, oldest first."""
    return [decode(conversation_id, i, raw) for i, raw in enumerate(raws)]


def _preview(raw: object, limit: int = 120) -> str:
    text = repr(raw)
    return text if len(text) <= limit else text[:limit] + "..."


def plan_rows(
    old: Sequence[tuple[int, Message]], new: Sequence[Message]
) -> tuple[list[int], list[tuple[int, Message]]]:
    """The rows to delete and the rows to insert so that rows ordered by ``seq`` read ``new``.

    ``old`` is ``(seq, message)`` in seq order. Old rows that start ``new`` (as a subsequence, by
    equality) stay where they are; the rest of ``new`` gets fresh seqs after the highest old one. A
    plain append writes only the new rows; a window trim deletes only the dropped ones.
    """
    matched = 0
    deletes: list[int] = []
    for seq, message in old:
        if matched < len(new) and new[matched] == message:
            matched += 1
        else:
            deletes.append(seq)
    next_seq = old[-1][0] + 1 if old else 0
    inserts = [(next_seq + i, m) for i, m in enumerate(new[matched:])]
    return deletes, inserts


class BlockingRepository(ABC):
    """Async forms of the repository methods, running the blocking driver in a worker thread so the
    event loop never waits on a database. Subclasses implement the blocking methods; ``with``
    closes the repository (its connections) at the end."""

    @abstractmethod
    def close(self) -> None:
        """Release the repository's connections."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @abstractmethod
    def find_conversation_ids(self) -> list[str]:
        """See the ChatMemoryRepository protocol."""

    @abstractmethod
    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """See the ChatMemoryRepository protocol."""

    @abstractmethod
    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """See the ChatMemoryRepository protocol."""

    @abstractmethod
    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """See the ChatMemoryRepository protocol."""

    @abstractmethod
    def update(self, conversation_id: str, change: ConversationChange) -> list[Message]:
        """See the ChatMemoryRepository protocol."""

    async def afind_conversation_ids(self) -> list[str]:
        """``find_conversation_ids`` without blocking the event loop."""
        return await asyncio.to_thread(self.find_conversation_ids)

    async def afind_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """``find_by_conversation_id`` without blocking the event loop."""
        return await asyncio.to_thread(self.find_by_conversation_id, conversation_id)

    async def asave_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """``save_all`` without blocking the event loop."""
        await asyncio.to_thread(self.save_all, conversation_id, messages)

    async def adelete_by_conversation_id(self, conversation_id: str) -> None:
        """``delete_by_conversation_id`` without blocking the event loop."""
        await asyncio.to_thread(self.delete_by_conversation_id, conversation_id)

    async def aupdate(self, conversation_id: str, change: ConversationChange) -> list[Message]:
        """``update`` without blocking the event loop."""
        return await asyncio.to_thread(self.update, conversation_id, change)
