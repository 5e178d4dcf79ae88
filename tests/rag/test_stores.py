"""What every built-in store does the same way (parametrized over ``conftest.STORES``): upsert by id,
ids from the content, delete, scores and ordering, bad input refused with nothing stored, the
dimension rule, and blocking methods that work from threads and beside a running event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from advisorchain.errors import ChainConfigurationError
from advisorchain.rag import Document, SearchRequest, VectorStore
from advisorchain.rag.documents import document_id

from .conftest import HYBRID, StoreFactory, WordsEmbeddingModel


def everything(store: Any) -> list[Document]:
    return store.similarity_search(SearchRequest("anything at all", top_k=1000))


def test_a_store_is_a_vector_store(store: Any) -> None:
    assert isinstance(store, VectorStore)


def test_an_empty_store_finds_nothing_without_embedding(store: Any, words_model: WordsEmbeddingModel) -> None:
    assert store.similarity_search("anything") == []
    assert words_model.calls == []


def test_ids_are_a_hash_of_text_and_metadata_and_adding_again_replaces(store: Any) -> None:
    doc = Document("the same chunk", {"b": 1, "a": "x"})
    store.add([doc])
    store.add([Document("the same chunk", {"a": "x", "b": 1})])
    [stored] = everything(store)
    assert stored.id == document_id("the same chunk", {"a": "x", "b": 1}) == document_id("the same chunk", {"b": 1, "a": "x"})
    assert stored.metadata == {"a": "x", "b": 1}


def test_a_document_with_the_id_of_a_stored_one_replaces_it(store: Any) -> None:
    store.add([Document("old text", {"v": 1}, id="doc")])
    store.add([Document("new text", {"v": 2}, id="doc")])
    [stored] = everything(store)
    assert (stored.id, stored.text, stored.metadata) == ("doc", "new text", {"v": 2})
    assert store.similarity_search("old")[0].text == "new text"


def test_search_returns_the_best_first_with_scores_in_0_1_and_at_most_top_k(store: Any) -> None:
    store.add([Document(t) for t in ["red apples", "green apples", "red cars", "blue sky", "deep sea"]])
    found = store.similarity_search(SearchRequest("red apples", top_k=3))
    assert len(found) == 3
    assert found[0].text == "red apples"
    assert all(0.0 <= d.score <= 1.0 for d in found)  # type: ignore[operator]
    assert [d.score for d in found] == sorted((d.score for d in found), reverse=True)


def test_a_plain_str_is_a_search_with_the_defaults(store: Any) -> None:
    store.add([Document(f"text {i}") for i in range(10)])
    assert len(store.similarity_search("text")) == 4


def test_a_threshold_keeps_only_similar_enough_documents(make_store: StoreFactory, words_model: WordsEmbeddingModel) -> None:
    store = make_store(words_model, **({"hybrid": False} if make_store.kind in HYBRID else {}))  # type: ignore[attr-defined]
    store.add([Document("red apples"), Document("unrelated words")])
    found = store.similarity_search(SearchRequest("red apples", top_k=5, similarity_threshold=0.9))
    assert [d.text for d in found] == ["red apples"]


def test_delete_by_ids_counts_what_it_deleted(store: Any) -> None:
    store.add([Document("one", id="1"), Document("two", id="2"), Document("three", id="3")])
    assert store.delete(["1", "3", "nope", "1"]) == 2
    assert [d.id for d in everything(store)] == ["2"]


@pytest.mark.parametrize("arguments", [{}, {"ids": ["1"], "filter": "a == 1"}])
def test_delete_takes_exactly_one_of_ids_and_filter(store: Any, arguments: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        store.delete(**arguments)


@pytest.mark.parametrize(
    "metadata",
    [{"when": object()}, {"nested": {"a": 1}}, {"f": float("nan")}, {"big": 2**70}, {"l": [1, {"a": 2}]}, {1: "x"}],
)
def test_metadata_of_the_wrong_type_is_refused_and_nothing_of_the_batch_is_stored(
    store: Any, words_model: WordsEmbeddingModel, metadata: dict[Any, Any]
) -> None:
    with pytest.raises(ValueError, match="metadata"):
        store.add([Document("fine", {"ok": 1}), Document("bad", metadata)])
    assert everything(store) == []
    assert words_model.calls == []  # refused before anything was embedded


def test_vectors_of_another_dimension_are_refused_naming_both_before_anything_is_written(
    make_store: StoreFactory,
) -> None:
    model = WordsEmbeddingModel(64)
    store = make_store(model)
    store.add([Document("first")])
    store.embedding_model = WordsEmbeddingModel(32, name="words-32")
    with pytest.raises(ChainConfigurationError, match=r"64.*32"):
        store.add([Document("second"), Document("third")])
    store.embedding_model = model
    assert [d.text for d in everything(store)] == ["first"]


def test_a_failing_embedding_model_is_a_model_error_and_nothing_is_stored(make_store: StoreFactory) -> None:
    from advisorchain.errors import ModelError

    class Broken(WordsEmbeddingModel):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise ConnectionError("embedding server refused the connection")

    store = make_store(Broken())
    with pytest.raises(ModelError, match="refused") as caught:
        store.add([Document("x")])
    assert isinstance(caught.value.__cause__, ConnectionError)
    store.embedding_model = WordsEmbeddingModel()
    assert everything(store) == []


def test_a_model_answering_the_wrong_number_of_vectors_is_a_model_error(make_store: StoreFactory) -> None:
    from advisorchain.errors import ModelError

    class Short(WordsEmbeddingModel):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return super().embed_documents(texts)[:-1]

    with pytest.raises(ModelError, match="1 vectors for 2 texts"):
        make_store(Short()).add([Document("a"), Document("b")])


async def test_async_twins_and_blocking_methods_beside_a_running_loop(store: Any) -> None:
    await store.aadd([Document("async one", id="a1")])
    store.add([Document("sync two", id="s2")])  # a blocking call inside a running loop: no loop error
    assert {d.id for d in await store.asimilarity_search(SearchRequest("one two", top_k=5))} == {"a1", "s2"}
    assert len(store.similarity_search("two")) == 2
    assert await store.adelete(["a1"]) == 1


def test_concurrent_use_from_threads_loses_nothing(store: Any) -> None:
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(10):
                store.add([Document(f"thread {n} text {i}", {"n": n}, id=f"{n}-{i}")])
                store.similarity_search(SearchRequest("text", top_k=3, filter=f"n == {n}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(everything(store)) == 40


async def test_concurrent_tasks_lose_nothing(store: Any) -> None:
    await asyncio.gather(*(store.aadd([Document(f"task {i}", id=str(i))]) for i in range(20)))
    assert len(await store.asimilarity_search(SearchRequest("task", top_k=50))) == 20


def test_equally_similar_documents_keep_insertion_order(store: Any) -> None:
    store.add([Document("same words", {"n": i}, id=f"d{i}") for i in range(6)])
    assert [d.id for d in store.similarity_search(SearchRequest("same words", top_k=4))] == ["d0", "d1", "d2", "d3"]


class ZeroForBlankModel(WordsEmbeddingModel):
    """Like ``WordsEmbeddingModel``, but a text with no word gets the zero vector, whose cosine
    distance no database can measure (sqlite-vec answers NULL, pgvector NaN)."""

    def _vector(self, text: str) -> list[float]:
        return super()._vector(text) if text.strip(" .") else [0.0] * self.dimensions


def test_a_document_with_a_zero_vector_is_found_last_and_fails_no_search(make_store: StoreFactory) -> None:
    hybrid = make_store.kind in HYBRID  # type: ignore[attr-defined]
    for options in [{"hybrid": False}, {"hybrid": True}] if hybrid else [{}]:
        store = make_store(ZeroForBlankModel(), **options)
        store.add([Document("...", id="blank"), Document("red apples", id="apples"), Document("red cars", id="cars")])
        found = store.similarity_search(SearchRequest("red apples", top_k=5))
        assert [d.id for d in found] == ["apples", "cars", "blank"], options  # nothing dropped, nothing made up
        if not options.get("hybrid"):
            assert found[-1].score == 0.0
