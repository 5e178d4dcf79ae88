"""Chat memory: the ``ChatMemory`` contract, the window policy and the repositories."""

from .api import ChatMemory, ChatMemoryRepository

__all__ = ["ChatMemory", "ChatMemoryRepository"]
