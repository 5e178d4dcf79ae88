"""SearchRequest: what a similarity search asks for."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._checks import check_int
from .filters import Filter, as_filter

__all__ = ["SearchRequest", "as_search_request"]


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A similarity search: the query text, how many documents (``top_k``), the lowest similarity
    accepted (in [0, 1]; 0.0 accepts every document) and an optional metadata filter (its text
    form is parsed here, so a filter that does not parse fails when the request is built).

    ``filter`` always holds the parsed ``Filter`` (or None).
    """

    query: str
    top_k: int = 4
    similarity_threshold: float = 0.0
    filter: Filter | None = None

    def __init__(
        self,
        query: str,
        top_k: int = 4,
        similarity_threshold: float = 0.0,
        filter: str | Filter | None = None,
    ) -> None:
        if not isinstance(query, str):
            raise TypeError(f"SearchRequest.query must be a str, got {query!r}")
        check_int(top_k, "SearchRequest.top_k", minimum=1)
        if (
            isinstance(similarity_threshold, bool)
            or not isinstance(similarity_threshold, int | float)
            or not math.isfinite(similarity_threshold)
            or not 0.0 <= similarity_threshold <= 1.0
        ):
            raise ValueError(
                f"SearchRequest.similarity_threshold must be a number in [0, 1] (0.0 accepts every "
                f"document), got {similarity_threshold!r}"
            )
        object.__setattr__(self, "query", query)
        object.__setattr__(self, "top_k", top_k)
        object.__setattr__(self, "similarity_threshold", float(similarity_threshold))
        object.__setattr__(self, "filter", as_filter(filter))

    def copy(
        self,
        *,
        query: str | None = None,
        top_k: int | None = None,
        similarity_threshold: float | None = None,
        filter: str | Filter | None = None,
    ) -> SearchRequest:
        """A copy with the given fields replaced (``filter=None`` keeps the filter)."""
        return SearchRequest(
            self.query if query is None else query,
            self.top_k if top_k is None else top_k,
            self.similarity_threshold if similarity_threshold is None else similarity_threshold,
            self.filter if filter is None else filter,
        )


def as_search_request(request: SearchRequest | str) -> SearchRequest:
    """A search request from a request or a plain query text."""
    if isinstance(request, SearchRequest):
        return request
    if isinstance(request, str):
        return SearchRequest(request)
    raise TypeError(f"a search takes a SearchRequest or a query str, got {request!r}")
