"""Pre-retrieval: a query expander turns one query into several (Spring AI's ``MultiQueryExpander``);
each is retrieved, concurrently, and the joiner merges what they found."""

from __future__ import annotations

import logging
import re
from typing import Any, Protocol, runtime_checkable

from .. import observability as obs
from .._checks import check_int
from ._clients import ask, plain_client
from .query import Query

__all__ = ["MultiQueryExpander", "QueryExpander"]

_log = logging.getLogger("advisorchain.rag")


@runtime_checkable
class QueryExpander(Protocol):
    """``expand(query) -> list[Query]`` (a plain or ``async`` method)."""

    def expand(self, query: Query) -> Any: ...


EXPANSION_TEMPLATE = """You are an expert at information retrieval and search optimization.
Your task is to generate {number} different versions of the given query.

Each variant must cover different perspectives or aspects of the topic,
while maintaining the core intent of the original query. The goal is to
expand the search space and improve the chances of finding relevant information.

Do not explain your choices or add any other text.
Provide the query variants separated by newlines, one per line.

Original query: {query}

Query variants:"""

_MARKER = re.compile(r"^\s*(?:\d+[.)]|[-*•+])\s+")


def _variants(answer: str) -> list[str]:
    lines = (_MARKER.sub("", line).strip() for line in answer.splitlines())
    return [line for line in lines if line]


class MultiQueryExpander:
    """Asks the model for ``number_of_queries`` variants of the query, one per line (blank lines and
    list markers such as ``1.`` or ``-`` dropped). An answer with another number keeps the first
    ``number_of_queries`` it got and records a span event ``query_expansion_count``; the original
    query comes first when ``include_original``."""

    def __init__(self, client: Any, number_of_queries: int = 3, include_original: bool = True) -> None:
        self._client = plain_client(client)
        self.number_of_queries = check_int(number_of_queries, "number_of_queries", minimum=1)
        self.include_original = bool(include_original)

    async def expand(self, query: Query) -> list[Query]:
        text = EXPANSION_TEMPLATE.replace("{number}", str(self.number_of_queries)).replace(
            "{query}", query.text
        )
        variants = _variants(await ask(self._client, text))
        if len(variants) != self.number_of_queries:
            obs.add_span_event(
                "query_expansion_count", {"count": len(variants), "expected": self.number_of_queries}
            )
            _log.warning(
                "MultiQueryExpander asked for %d query variants and got %d",
                self.number_of_queries,
                len(variants),
            )
        queries = [query.copy(text=v) for v in variants[: self.number_of_queries]]
        return [query, *queries] if self.include_original else queries
