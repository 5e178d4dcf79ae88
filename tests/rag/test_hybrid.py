"""SQLiteVectorStore's hybrid search: the keyword side finds exact identifiers the vectors rank low,
the user's text never reaches the full-text engine raw, a fused tie goes to the keyword side, and
the threshold applies to vector similarity only."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisorchain.rag import Document, SearchRequest, SQLiteVectorStore
from advisorchain.rag.stores._fusion import fuse, keyword_terms

from .conftest import WordsEmbeddingModel


class FixedEmbeddingModel:
    """Every document and query gets the vector its text names in ``vectors`` (ranking set by hand)."""

    name = "fixed"
    dimensions = 3

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vectors.get(text, [1.0, 0.0, 0.0])


def test_an_exact_identifier_is_found_though_the_embedding_ranks_it_last(tmp_path: Path) -> None:
    texts = {f"general note {i}": [1.0, 0.01 * i, 0.0] for i in range(30)}
    texts["Error E1054: the replication slot is missing"] = [0.0, 0.0, 1.0]
    model = FixedEmbeddingModel(texts)
    hybrid = SQLiteVectorStore(tmp_path / "h.db", model)
    vector_only = SQLiteVectorStore(tmp_path / "v.db", model, hybrid=False)
    for store in (hybrid, vector_only):
        store.add([Document(t) for t in texts])
    assert "E1054" not in " ".join(d.text for d in vector_only.similarity_search("what is E1054"))
    assert "E1054" in hybrid.similarity_search("what is E1054")[0].text


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "a* OR NEAR(b c)", "col:value", "AND OR NOT", "'; DROP TABLE documents; --", "^start", "-", ""],
)
def test_any_user_text_is_a_safe_keyword_query(tmp_path: Path, query: str) -> None:
    store = SQLiteVectorStore(tmp_path / "kb.db", WordsEmbeddingModel())
    store.add([Document("a b c value start"), Document("documents table")])
    found = store.similarity_search(SearchRequest(query, top_k=5))
    assert len(found) == 2
    assert len(store.similarity_search(SearchRequest("documents", top_k=5))) == 2


def test_keyword_terms_keep_identifiers_whole_and_drop_common_words() -> None:
    assert keyword_terms("What is the max_wal_size of E1054, and why?") == ["max_wal_size", "e1054"]


def test_a_fused_tie_goes_to_the_keyword_side() -> None:
    # row 1 is first on the vector side only, row 2 first on the keyword side only: equal fused scores
    assert [row for row, _ in fuse([1], [2])] == [2, 1]
    ranked = fuse([1, 2, 3], [3, 4])
    assert ranked[0] == (3, pytest.approx((1 / 63 + 1 / 61) / (2 / 61)))
    assert all(0 <= score <= 1 for _, score in ranked)


def test_fused_scores_are_scaled_to_0_1(tmp_path: Path) -> None:
    store = SQLiteVectorStore(tmp_path / "kb.db", WordsEmbeddingModel())
    store.add([Document("exact words here"), Document("other text")])
    best = store.similarity_search("exact words here")[0]
    assert best.text == "exact words here" and best.score == pytest.approx(1.0)


def test_the_threshold_filters_vector_hits_and_keeps_keyword_hits(tmp_path: Path) -> None:
    model = FixedEmbeddingModel({"has E1054 inside": [0.0, 1.0, 0.0], "close vector": [1.0, 0.0, 0.0]})
    store = SQLiteVectorStore(tmp_path / "kb.db", model)
    store.add([Document("has E1054 inside"), Document("close vector")])
    found = store.similarity_search(SearchRequest("E1054", top_k=5, similarity_threshold=0.9))
    assert sorted(d.text for d in found) == ["close vector", "has E1054 inside"]
    found = store.similarity_search(SearchRequest("nothing matches", top_k=5, similarity_threshold=0.9))
    assert [d.text for d in found] == ["close vector"]


def test_a_large_top_k_is_served_beyond_the_index_limit(tmp_path: Path) -> None:
    store = SQLiteVectorStore(tmp_path / "kb.db", WordsEmbeddingModel(8), hybrid=False)
    store.add([Document(f"row {i}", {"i": i}) for i in range(4200)])
    found = store.similarity_search(SearchRequest("row", top_k=4200, filter="i >= 10"))
    assert len(found) == 4190
