"""``retrieval_tool``: a tool that lets the model decide when to search the documents.

Its result lists the documents numbered for citation. Inside a request advised by a retrieval
advisor, the numbers go on from the advisor's (``[5]`` after four retrieved documents) and the
documents join ``RETRIEVED_DOCUMENTS`` and the citations of the answer.
"""

from __future__ import annotations

from typing import Any

from .._tool_types import ToolContext, ToolDefinition, ToolMetadata
from ..tools.schema import string_argument
from ._calls import call
from .citations import current_ledger, format_numbered
from .documents import Document
from .query import Query
from .retrievers import DocumentRetriever, VectorStoreDocumentRetriever

__all__ = ["DEFAULT_TOOL_DESCRIPTION", "NO_DOCUMENTS_FOUND", "retrieval_tool"]

DEFAULT_TOOL_DESCRIPTION = (
    "Search the knowledge base (the user's documents) for passages relevant to a query. The result "
    "lists passages numbered like [1]; cite the ones you use by their number."
)
NO_DOCUMENTS_FOUND = "No documents found for this query."


class _RetrievalTool:
    """A ToolCallback with one parameter, ``query``."""

    def __init__(self, retriever: DocumentRetriever, name: str, description: str) -> None:
        self.retriever = retriever
        self.definition = ToolDefinition(
            name,
            description,
            {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to search for."}},
                "required": ["query"],
                "additionalProperties": False,
            },
        )
        self.metadata = ToolMetadata()

    def __repr__(self) -> str:
        return f"retrieval_tool({self.retriever!r}, name={self.definition.name!r})"

    async def call(self, arguments: str, context: ToolContext | None) -> str:
        query_text = string_argument(arguments, self.definition.name, "query")
        ledger = current_ledger()
        request_context: Any = ledger.context if ledger is not None else dict(context or {})
        documents = list(await call(self.retriever.retrieve, Query(query_text, (), request_context)))
        if not all(isinstance(d, Document) for d in documents):
            raise TypeError(f"retriever {self.retriever!r} returned something other than Documents")
        if not documents:
            return NO_DOCUMENTS_FOUND
        numbered = ledger.add(documents) if ledger is not None else list(enumerate(documents, 1))
        return format_numbered(numbered)


def retrieval_tool(
    retriever: Any, *, name: str = "search_documents", description: str = DEFAULT_TOOL_DESCRIPTION
) -> Any:
    """A ToolCallback (one parameter, ``query``) that searches with ``retriever`` — a
    DocumentRetriever, or a vector store (searched with a ``VectorStoreDocumentRetriever``)."""
    if not callable(getattr(retriever, "retrieve", None)):
        if callable(getattr(retriever, "asimilarity_search", None)) or callable(
            getattr(retriever, "similarity_search", None)
        ):
            retriever = VectorStoreDocumentRetriever(retriever)
        else:
            raise TypeError(f"retrieval_tool takes a DocumentRetriever or a vector store, got {retriever!r}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"a tool name must be a non-empty str, got {name!r}")
    return _RetrievalTool(retriever, name, description)
