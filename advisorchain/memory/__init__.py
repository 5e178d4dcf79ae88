"""Chat memory: the ``ChatMemory`` contract, the window policy and the repositories.

The PostgreSQL and Redis repositories import their drivers only when one is built, so this package
imports without them.
"""

from .api import (
    AtomicChatMemoryRepository,
    ChatMemory,
    ChatMemoryDecodeError,
    ChatMemoryRepository,
    ConversationChange,
)
from .entries import EntryChatMemoryRepository, StoredEntry, drop_unreadable, read_entries
from .in_memory import InMemoryChatMemoryRepository
from .postgres import PostgresChatMemoryRepository
from .redis import RedisChatMemoryRepository
from .sqlite import SQLiteChatMemoryRepository
from .window import MessageWindowChatMemory, apply_window

__all__ = [
    # the contract (api)
    "ChatMemory",
    "ChatMemoryRepository",
    "AtomicChatMemoryRepository",
    "ConversationChange",
    "ChatMemoryDecodeError",
    # the window policy
    "MessageWindowChatMemory",
    "apply_window",
    # the repositories
    "InMemoryChatMemoryRepository",
    "SQLiteChatMemoryRepository",
    "PostgresChatMemoryRepository",
    "RedisChatMemoryRepository",
    "EntryChatMemoryRepository",
    "StoredEntry",
    "read_entries",
    "drop_unreadable",
]
