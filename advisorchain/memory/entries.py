"""A conversation's stored entries as the store holds them, readable or not, and the one repair that
loses nothing readable: dropping the entries that cannot be read back.

``ChatMemoryRepository.find_by_conversation_id`` refuses a conversation with one unreadable entry
(``ChatMemoryDecodeError``), so nothing damaged is ever sent to a model. Tools that look after the
store (``advisorchain sessions``) need more: every entry, the readable ones decoded and the others
named with their position and why they cannot be read, and a way to drop only those. Every
repository shipped here offers both (``EntryChatMemoryRepository``); ``read_entries`` and
``drop_unreadable`` work on any repository::

    >>> repository = InMemoryChatMemoryRepository()
    >>> repository.save_all("c1", [UserMessage("Hi")])
    >>> [(e.position, e.readable) for e in read_entries(repository, "c1")]
    [(0, True)]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..messages import Message
from ._store import check_conversation_id, decode
from .api import ChatMemoryDecodeError, ChatMemoryRepository

__all__ = [
    "EntryChatMemoryRepository",
    "StoredEntry",
    "drop_unreadable",
    "entries_from_raw",
    "read_entries",
]


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One stored message of a conversation: its ``position`` (0 is the oldest), its stored
    ``text`` (undecodable bytes shown as U+FFFD), and either the ``message`` read back from it or,
    when it cannot be read, ``error`` saying why."""

    position: int
    text: str
    message: Message | None
    error: str | None = None

    @property
    def readable(self) -> bool:
        """True when the entry reads back as a message."""
        return self.message is not None


@runtime_checkable
class EntryChatMemoryRepository(ChatMemoryRepository, Protocol):
    """A repository that can show a conversation's stored entries as they are and drop the
    unreadable ones (in one atomic step, so a concurrent append is never lost)."""

    def find_entries(self, conversation_id: str) -> list[StoredEntry]: ...

    def delete_unreadable(self, conversation_id: str) -> list[StoredEntry]: ...


def entries_from_raw(
    conversation_id: str, raws: Iterable[str | bytes | bytearray | memoryview]
) -> list[StoredEntry]:
    """Each stored text of a conversation (oldest first) as an entry, read back when it can be."""
    return [_entry(conversation_id, i, raw) for i, raw in enumerate(raws)]


def _entry(conversation_id: str, position: int, raw: str | bytes | bytearray | memoryview) -> StoredEntry:
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
    try:
        return StoredEntry(position, text, decode(conversation_id, position, raw))
    except ChatMemoryDecodeError as e:
        return StoredEntry(position, text, None, e.reason)


def read_entries(repository: ChatMemoryRepository, conversation_id: str) -> list[StoredEntry]:
    """Every stored entry of the conversation, oldest first ([] when unknown).

    A repository without ``find_entries`` (one of your own) is read through
    ``find_by_conversation_id``, so there an unreadable entry still raises ChatMemoryDecodeError."""
    check_conversation_id(conversation_id)
    if isinstance(repository, EntryChatMemoryRepository):
        return repository.find_entries(conversation_id)
    messages = repository.find_by_conversation_id(conversation_id)
    return [StoredEntry(i, repr(m), m) for i, m in enumerate(messages)]


def drop_unreadable(repository: ChatMemoryRepository, conversation_id: str) -> list[StoredEntry]:
    """Delete the conversation's unreadable entries, keeping every readable one as stored and in
    order; returns the entries dropped ([] when none was unreadable).

    A repository without ``delete_unreadable`` whose conversation reads back has nothing to drop;
    one that does not read back cannot be repaired here: its ChatMemoryDecodeError is raised."""
    check_conversation_id(conversation_id)
    if isinstance(repository, EntryChatMemoryRepository):
        return repository.delete_unreadable(conversation_id)
    repository.find_by_conversation_id(conversation_id)
    return []
