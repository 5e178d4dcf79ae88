"""Stores that outlive the process: SQLite files and InMemoryVectorStore.save/load keep documents,
the model's name and dimension; a model of another dimension, a damaged or a locked file each fail
clearly, before anything is written."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import apsw
import pytest

from advisorchain.errors import ChainConfigurationError, VectorStoreError
from advisorchain.rag import (
    Document,
    InMemoryVectorStore,
    PostgresVectorStore,
    SearchRequest,
    SQLiteVectorStore,
)

from .conftest import WordsEmbeddingModel, fresh_table, pgvector_dsn


def test_a_sqlite_store_reopens_with_its_documents(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    with SQLiteVectorStore(path, WordsEmbeddingModel()) as store:
        store.add([Document("kept across processes", {"k": 1}, id="x")])
    reopened = SQLiteVectorStore(path, WordsEmbeddingModel())
    [doc] = reopened.similarity_search("kept")
    assert (doc.id, doc.text, doc.metadata) == ("x", "kept across processes", {"k": 1})


def test_opening_a_store_with_a_model_of_another_dimension_names_both(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    SQLiteVectorStore(path, WordsEmbeddingModel(64)).add([Document("x")])
    with pytest.raises(ChainConfigurationError, match=r"64-dimensional.*'words-64'.*16-dimensional"):
        SQLiteVectorStore(path, WordsEmbeddingModel(16, name="other"))


def test_in_memory_save_and_load_round_trip(tmp_path: Path) -> None:
    store = InMemoryVectorStore(WordsEmbeddingModel(64))
    store.add([Document("saved text", {"tags": ["a", "b"], "n": 1.5}, id="s")])
    store.save(tmp_path / "store.json")
    loaded = InMemoryVectorStore.load(tmp_path / "store.json", WordsEmbeddingModel(64))
    [doc] = loaded.similarity_search(SearchRequest("saved", filter="n > 1"))
    assert (doc.id, doc.text, doc.metadata) == ("s", "saved text", {"tags": ["a", "b"], "n": 1.5})
    with pytest.raises(ChainConfigurationError, match=r"64.*8"):
        InMemoryVectorStore.load(tmp_path / "store.json", WordsEmbeddingModel(8))


def test_loading_a_damaged_file_is_a_vector_store_error(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    path.write_text("{not json")
    with pytest.raises(VectorStoreError, match="damaged"):
        InMemoryVectorStore.load(path, WordsEmbeddingModel())


def test_a_damaged_sqlite_file_is_a_vector_store_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    path.write_bytes(b"this is not a database at all" * 200)
    with pytest.raises(VectorStoreError, match="damaged or not a SQLite database") as caught:
        SQLiteVectorStore(path, WordsEmbeddingModel())
    assert str(path) in str(caught.value)
    assert isinstance(caught.value.__cause__, apsw.Error)


def test_a_locked_sqlite_file_is_a_vector_store_error_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    store = SQLiteVectorStore(path, WordsEmbeddingModel(), timeout=0.2)
    store.add([Document("before", id="b")])
    other = apsw.Connection(str(path))
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(VectorStoreError, match="locked") as caught:
            store.add([Document("during", id="d")])
        assert caught.value.store is store
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert [d.id for d in store.similarity_search(SearchRequest("before during", top_k=5))] == ["b"]


def test_two_stores_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    first, second = SQLiteVectorStore(path, WordsEmbeddingModel()), SQLiteVectorStore(path, WordsEmbeddingModel())
    threads = [
        threading.Thread(target=s.add, args=([Document(f"{n} {i}", id=f"{n}{i}") for i in range(5)],))
        for n, s in (("a", first), ("b", second))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(first.similarity_search(SearchRequest("a b 1 2 3", top_k=20))) == 10


def test_a_new_store_records_its_models_dimension_when_created(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    SQLiteVectorStore(path, WordsEmbeddingModel(64))
    with pytest.raises(ChainConfigurationError, match=r"64-dimensional.*16-dimensional"):
        SQLiteVectorStore(path, WordsEmbeddingModel(16))


# -- another model of the same width (issue 37) ----------------------------------------------------


def _reopeners(kind: str, tmp_path: Path) -> tuple[Any, Any]:
    """``(make(model), reopen(store, model))`` for a store kind that outlives its object."""
    if kind == "memory":
        saved = tmp_path / "store.json"

        def made(model: Any) -> Any:
            return InMemoryVectorStore(model)

        def reopened(store: Any, model: Any) -> Any:
            store.save(saved)
            return InMemoryVectorStore.load(saved, model)

        return made, reopened
    if kind == "sqlite":
        path = tmp_path / "kb.db"
        return (lambda model: SQLiteVectorStore(path, model)), (
            lambda store, model: SQLiteVectorStore(path, model)
        )
    dsn, table = pgvector_dsn(), fresh_table()
    return (
        lambda model: PostgresVectorStore(dsn, model, table=table),
        lambda store, model: PostgresVectorStore(dsn, model, table=table),
    )


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_a_store_reopened_with_another_model_of_the_same_width_is_refused_naming_both(
    kind: str, tmp_path: Path
) -> None:
    make, reopen = _reopeners(kind, tmp_path)
    store = make(WordsEmbeddingModel(64, name="words-a"))
    store.add([Document("kept", {"k": 1}, id="x")])
    opened = [store]
    try:
        with pytest.raises(
            ChainConfigurationError, match=r"made with the embedding model 'words-a'.*'words-b'"
        ):
            opened.append(reopen(store, WordsEmbeddingModel(64, name="words-b")))
        again = reopen(store, WordsEmbeddingModel(64, name="words-a"))  # the model it was made with
        opened.append(again)
        [doc] = again.similarity_search("kept")
        assert doc.id == "x"
        # Swapped on an open store, the other model is refused before anything is written or searched.
        again.embedding_model = WordsEmbeddingModel(64, name="words-b")
        with pytest.raises(ChainConfigurationError, match=r"'words-a'.*'words-b'"):
            again.add([Document("never", id="y")])
        with pytest.raises(ChainConfigurationError, match=r"'words-a'.*'words-b'"):
            again.similarity_search("kept")
        again.embedding_model = WordsEmbeddingModel(64, name="words-a")
        assert [d.id for d in again.similarity_search(SearchRequest("kept never", top_k=5))] == ["x"]
    finally:
        for s in opened:
            if hasattr(s, "close"):
                s.close()
