"""Retrieval: a document joiner merges what several queries found into one list (Spring AI's
``ConcatenationDocumentJoiner``), or fuses the rankings (``ReciprocalRankFusionJoiner``)."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from .._checks import check_int
from .documents import Document, document_id
from .query import Query

__all__ = ["ConcatenationDocumentJoiner", "DocumentJoiner", "ReciprocalRankFusionJoiner"]


@runtime_checkable
class DocumentJoiner(Protocol):
    """``join(documents_by_query) -> list[Document]`` (a plain or ``async`` method)."""

    def join(self, documents_by_query: Mapping[Query, list[Document]]) -> Any: ...


def _key(doc: Document) -> str:
    return doc.id if doc.id is not None else document_id(doc.text, doc.metadata)


class ConcatenationDocumentJoiner:
    """The default: every query's documents in first-seen order, a duplicate (by id) dropped and
    the best score of its copies kept."""

    def join(self, documents_by_query: Mapping[Query, list[Document]]) -> list[Document]:
        kept: dict[str, Document] = {}
        for documents in documents_by_query.values():
            for doc in documents:
                key = _key(doc)
                seen = kept.get(key)
                if seen is None:
                    kept[key] = doc
                elif doc.score is not None and (seen.score is None or doc.score > seen.score):
                    kept[key] = seen.with_score(doc.score)
        return list(kept.values())


class ReciprocalRankFusionJoiner:
    """Fuses the queries' rankings by reciprocal rank (``k`` = 60): a document found high by several
    queries comes first. ``score`` is the fused score scaled to [0, 1]; ties keep first-seen order."""

    def __init__(self, k: int = 60) -> None:
        self.k = check_int(k, "k", minimum=1)

    def join(self, documents_by_query: Mapping[Query, list[Document]]) -> list[Document]:
        scores: dict[str, Fraction] = {}
        first: dict[str, Document] = {}
        for documents in documents_by_query.values():
            ranked: dict[str, int] = {}
            for doc in documents:
                ranked.setdefault(_key(doc), len(ranked) + 1)
                first.setdefault(_key(doc), doc)
            for key, rank in ranked.items():
                scores[key] = scores.get(key, Fraction(0)) + Fraction(1, self.k + rank)
        if not scores:
            return []
        best = Fraction(len(documents_by_query), self.k + 1)
        order = sorted(first, key=lambda key: -scores[key])  # stable: ties keep first-seen order
        return [first[key].with_score(float(scores[key] / best)) for key in order]
