"""Post-retrieval: document post-processors rank, filter or compress the documents before they reach
the model (they receive the ORIGINAL query, as in Spring AI)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .documents import Document
from .query import Query

__all__ = ["DocumentPostProcessor"]


@runtime_checkable
class DocumentPostProcessor(Protocol):
    """``process(query, documents) -> list[Document]`` (a plain or ``async`` method)."""

    def process(self, query: Query, documents: list[Document]) -> Any: ...
