"""What the SQL stores' searches share: how many candidates each side ranks, the vector side's
distances as similarities, the keyword side of a hybrid search and the fusion of two rankings.

A cosine distance becomes the similarity ``1 - distance``, clamped to [0, 1]; a distance the database
could not measure (a zero vector: NULL in sqlite-vec, NaN in pgvector) counts as the farthest, so such
a document is ranked last instead of failing the search.

The user's text never reaches the full-text engine as it is: it is cut into words (letters, digits
and underscores, so ``max_wal_size`` and ``E1054`` stay whole), lowercased, very common words dropped,
and the words are OR-ed as quoted terms. Two rankings are fused by reciprocal rank (k = 60) in exact
arithmetic; a tie goes to the better keyword rank, then the better vector rank, then the older row.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from fractions import Fraction

__all__ = ["RRF_K", "candidate_count", "fuse", "keyword_query", "keyword_terms", "nearest_first"]

RRF_K = 60

_WORD = re.compile(r"[^\W]+", re.UNICODE)

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves""".split()  # noqa: SIM905
)


def candidate_count(top_k: int, *, hybrid: bool) -> int:
    """How many rows each side of a search ranks: ``top_k``, or more when two rankings are fused
    (a row ranked low on one side may come first on the other)."""
    return max(top_k * 3, 30) if hybrid else top_k


def nearest_first(rows: Iterable[tuple[int, float | None]], threshold: float) -> list[tuple[int, float]]:
    """The vector side's ``(row, cosine distance)`` pairs as ``(row, similarity)``, nearest first (a
    tie: the older row), those under ``threshold`` left out."""
    measured = sorted(((row, _distance(distance)) for row, distance in rows), key=lambda r: (r[1], r[0]))
    similar = ((row, min(max(1.0 - distance, 0.0), 1.0)) for row, distance in measured)
    return [(row, similarity) for row, similarity in similar if similarity >= threshold]


def _distance(value: float | None) -> float:
    """A cosine distance; none measured (NULL or NaN: a zero vector) as the farthest, 2."""
    if value is None or math.isnan(value):
        return 2.0
    return float(value)


def keyword_terms(text: str) -> list[str]:
    """The query's words for the keyword side: lowercased, common words and repeats dropped."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOP_WORDS and word not in seen:
            seen[word] = None
    return list(seen)


def keyword_query(text: str) -> str | None:
    """An FTS5 query matching ANY of the words of ``text`` (each quoted), or None when none is left."""
    terms = keyword_terms(text)
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def fuse(vector: Sequence[int], keyword: Sequence[int], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion of two rankings of row ids (best first): ``(row, score)`` best first,
    the score scaled to [0, 1] (1.0: first on both sides)."""
    vector_rank = {row: i for i, row in enumerate(vector, 1)}
    keyword_rank = {row: i for i, row in enumerate(keyword, 1)}
    missing = len(vector) + len(keyword) + 1
    fused: list[tuple[Fraction, int, int, int]] = []
    for row in {**dict.fromkeys(keyword), **dict.fromkeys(vector)}:
        score = Fraction(0)
        kr, vr = keyword_rank.get(row), vector_rank.get(row)
        if kr is not None:
            score += Fraction(1, k + kr)
        if vr is not None:
            score += Fraction(1, k + vr)
        fused.append((score, kr or missing, vr or missing, row))
    fused.sort(key=lambda item: (-item[0], item[1], item[2], item[3]))
    best = Fraction(2, k + 1)
    return [(row, float(score / best)) for score, _, _, row in fused]
