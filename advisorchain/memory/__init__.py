"""Chat memory: the ``ChatMemory`` contract, the window policy and the repositories.

The PostgreSQL and Redis repositories import their drivers only when one is built, so this package
imports without them.
"""

from . import api
from .api import *  # noqa: F403
from .entries import EntryChatMemoryRepository, StoredEntry, drop_unreadable, read_entries
from .in_memory import InMemoryChatMemoryRepository
from .postgres import PostgresChatMemoryRepository
from .redis import RedisChatMemoryRepository
from .sqlite import SQLiteChatMemoryRepository
from .window import MessageWindowChatMemory, apply_window

__all__ = [
    "EntryChatMemoryRepository",
    "InMemoryChatMemoryRepository",
    "MessageWindowChatMemory",
    "PostgresChatMemoryRepository",
    "RedisChatMemoryRepository",
    "SQLiteChatMemoryRepository",
    "StoredEntry",
    "apply_window",
    "drop_unreadable",
    "read_entries",
]
__all__ += api.__all__  # the contract: ChatMemory, the repository protocols, conversation_id_of
