"""Vector stores: the contract and the built-in stores (in memory; one SQLite file; PostgreSQL
with pgvector)."""

from .api import BaseVectorStore, VectorStore
from .memory import InMemoryVectorStore
from .postgres import PostgresVectorStore
from .sqlite import SQLiteVectorStore

__all__ = [
    "BaseVectorStore",
    "InMemoryVectorStore",
    "PostgresVectorStore",
    "SQLiteVectorStore",
    "VectorStore",
]
