"""Vector stores: the contract and the built-in stores (in memory; one SQLite file)."""

from .api import BaseVectorStore, VectorStore
from .memory import InMemoryVectorStore
from .sqlite import SQLiteVectorStore

__all__ = ["BaseVectorStore", "InMemoryVectorStore", "SQLiteVectorStore", "VectorStore"]
