"""Retrieval: a document retriever finds the documents for a query (Spring AI's
``VectorStoreDocumentRetriever``), and every search the pipeline makes goes through ``search``: one
span ``retrieve <store>``, and any failure of a store — built-in or the user's own — a
``VectorStoreError`` (an embedding model's failure stays a ``ModelError``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

from .. import observability as obs
from .._checks import check_int
from ..errors import AdvisorChainError, VectorStoreError
from ._calls import call
from .documents import Document
from .filters import Filter, as_filter
from .query import Query
from .search import SearchRequest

__all__ = ["DocumentRetriever", "FilterSource", "VectorStoreDocumentRetriever", "search"]


@runtime_checkable
class DocumentRetriever(Protocol):
    """``retrieve(query) -> list[Document]`` (a plain or ``async`` method)."""

    def retrieve(self, query: Query) -> Any: ...


FilterSource = str | Filter | Callable[[Mapping[str, Any]], "str | Filter | None"] | None
"""A retriever's filter: its text, a Filter, or a callable of the request context (per tenant)."""


def _store_label(store: object) -> str:
    return type(store).__name__


async def search(store: Any, request: SearchRequest) -> list[Document]:
    """``store``'s documents for ``request`` inside a ``retrieve <store>`` span; a store's failure
    is a VectorStoreError naming the store (its ``__cause__`` the original)."""
    filter_text = str(request.filter) if request.filter is not None else None
    attrs = obs.retrieve_span_attributes(request.top_k, filter_text)
    with obs.span(f"retrieve {_store_label(store)}", attrs) as span:
        try:
            method = getattr(store, "asimilarity_search", None)
            if method is not None:
                found = await method(request)
            else:
                found = await call(store.similarity_search, request)
            documents = list(found)
        except AdvisorChainError:
            raise
        except Exception as exc:
            raise VectorStoreError(
                f"vector store {store!r} failed: {type(exc).__name__}: {exc}", store=store
            ) from exc
        if not all(isinstance(d, Document) for d in documents):
            raise VectorStoreError(
                f"vector store {store!r} returned something other than Documents", store=store
            )
        if span is not None:
            span.set_attribute("advisorchain.rag.documents", len(documents))
            span.set_attribute("advisorchain.rag.document_ids", [d.id or "" for d in documents])
            if obs.content_capture_enabled():
                span.set_attribute("advisorchain.rag.query", request.query)
                span.set_attribute("advisorchain.rag.document_texts", [d.text for d in documents])
        return documents


def _check_threshold(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"similarity_threshold must be a number in [0, 1], got {value!r}")
    return float(value)


class VectorStoreDocumentRetriever:
    """Finds documents in a vector store: the query's ``top_k`` most similar over the threshold,
    filtered. ``filter`` may be a callable of the request context (a filter per tenant); the request
    param ``VectorStoreDocumentRetriever.FILTER_EXPRESSION`` replaces it for one request."""

    FILTER_EXPRESSION: ClassVar[str] = "vector_store_filter_expression"

    def __init__(
        self,
        store: Any,
        top_k: int = 4,
        similarity_threshold: float = 0.0,
        filter: FilterSource = None,
    ) -> None:
        self.store = store
        self.top_k = check_int(top_k, "top_k", minimum=1)
        self.similarity_threshold = _check_threshold(similarity_threshold)
        if isinstance(filter, str | Filter) or filter is None:
            self._filter: Filter | Callable[[Mapping[str, Any]], Any] | None = as_filter(filter)
        elif callable(filter):
            self._filter = filter
        else:
            raise TypeError(
                f"filter must be a str, a Filter, a callable of the context or None, got {filter!r}"
            )

    def filter_for(self, context: Mapping[str, Any]) -> Filter | None:
        """The filter of one request: the param's, else the callable's, else the retriever's own."""
        override = context.get(self.FILTER_EXPRESSION)
        if override is not None:
            return as_filter(override)
        if isinstance(self._filter, Filter) or self._filter is None:
            return self._filter
        return as_filter(self._filter(context))

    async def retrieve(self, query: Query) -> list[Document]:
        """The documents for ``query`` (best first)."""
        request = SearchRequest(
            query.text, self.top_k, self.similarity_threshold, self.filter_for(query.context)
        )
        return await search(self.store, request)
