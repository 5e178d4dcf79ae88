"""PostgresVectorStore on a real PostgreSQL 16 with pgvector (the shared store and filter tests run
on it through ``conftest.STORES``; these are its own): the HNSW index serves searches and a filtered
search is never short, the dimension is recorded and checked, many processes write and search at
once, and each failure — no extension, a server that is down, a connection lost mid-search or
mid-insert, text PostgreSQL cannot hold — is a clear error with nothing half-written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisorchain.errors import ChainConfigurationError, VectorStoreError
from advisorchain.rag import Document, PostgresVectorStore, SearchRequest

from .conftest import WordsEmbeddingModel, fresh_table, pgvector_dsn

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def dsn() -> str:
    return pgvector_dsn()


@pytest.fixture
def admin(dsn: str) -> Iterator[Any]:
    """A connection of the test's own, beside the store's."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def table() -> str:
    return fresh_table()


def count(admin: Any, table: str) -> int:
    return int(admin.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])


class DirectionModel:
    """Documents and queries as given 2-d directions (the ranking set by hand), no known dimension."""

    name = "directions"

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vectors.get(text, [1.0, 0.0])


# -- the index -----------------------------------------------------------------------------------


def _clustered(n: int, keep_every: int) -> tuple[list[Document], Any]:
    """``n`` documents near the query direction, every ``keep_every``-th one tagged keep=true and
    pointing away: a filter on ``keep`` rejects the index's nearest candidates."""
    import math

    vectors: dict[str, list[float]] = {}
    docs = []
    for i in range(n):
        keep = i % keep_every == 0
        angle = (1.2 + i / n * 0.3) if keep else i / n * 0.5
        text = f"doc {i}"
        vectors[text] = [math.cos(angle), math.sin(angle)]
        docs.append(Document(text, {"keep": keep, "i": i}, id=f"d{i}"))
    return docs, DirectionModel(vectors)


def test_the_hnsw_index_serves_searches_and_a_filtered_search_is_never_short(dsn: str, admin: Any, table: str) -> None:
    docs, model = _clustered(3000, 100)  # 30 keep=true, all far from the query
    store = PostgresVectorStore(dsn, model, table=table, hybrid=False)
    for start in range(0, len(docs), 1000):
        store.add(docs[start : start + 1000])
    admin.execute(f'ANALYZE "{table}"')

    def index_scans() -> int:
        row = admin.execute(
            "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s", (f"{table}_embedding",)
        ).fetchone()
        return int(row[0])

    before = index_scans()
    for top_k in (1, 5, 20, 30):
        found = store.similarity_search(SearchRequest("query", top_k=top_k, filter="keep == true"))
        assert len(found) == top_k and all(d.metadata["keep"] for d in found)
    found = store.similarity_search(SearchRequest("query", top_k=50, filter="keep == true"))
    assert sorted(d.metadata["i"] for d in found) == list(range(0, 3000, 100))  # all 30, none made up
    assert len(store.similarity_search(SearchRequest("query", top_k=150))) == 150  # past ef_search
    store.close()  # a backend reports its statistics when it ends
    deadline = time.monotonic() + 10
    while index_scans() == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert index_scans() > before


def test_an_exact_scan_answers_when_the_index_stops_short(dsn: str, table: str) -> None:
    # The index may look at only 20 tuples: a filter it cannot satisfy in that many sends the search
    # to an exact scan, which still finds every match.
    docs, model = _clustered(2000, 50)
    limited = f"{dsn}{'&' if '?' in dsn else '?'}options=-c%20hnsw.max_scan_tuples%3D20"
    store = PostgresVectorStore(limited, model, table=table, hybrid=False)
    store.add(docs)
    found = store.similarity_search(SearchRequest("query", top_k=5, filter="keep == true"))
    assert len(found) == 5 and all(d.metadata["keep"] for d in found)
    assert len(store.similarity_search(SearchRequest("query", top_k=100, filter="keep == true"))) == 40
    store.close()


def test_hybrid_finds_an_exact_identifier_the_vectors_rank_last(dsn: str) -> None:
    vectors = {f"general note {i}": [1.0, 0.01 * i] for i in range(40)}
    vectors["Error E1054: the max_wal_size is too small"] = [-1.0, 0.0]
    model = DirectionModel(vectors)
    hybrid = PostgresVectorStore(dsn, model, table=fresh_table())
    vector_only = PostgresVectorStore(dsn, model, table=fresh_table(), hybrid=False)
    for store in (hybrid, vector_only):
        store.add([Document(t) for t in vectors])
    assert "E1054" not in " ".join(d.text for d in vector_only.similarity_search("what is E1054"))
    assert "E1054" in hybrid.similarity_search("what is E1054")[0].text
    assert "max_wal_size" in hybrid.similarity_search("raise max_wal_size")[0].text
    for store in (hybrid, vector_only):
        store.close()


@pytest.mark.parametrize("query", ['"unbalanced', "a & b | !c", "x:* <-> y", "'; DROP TABLE documents; --", "___", ""])
def test_any_user_text_is_a_safe_keyword_query(dsn: str, query: str) -> None:
    with PostgresVectorStore(dsn, WordsEmbeddingModel(), table=fresh_table()) as store:
        store.add([Document("a b c value start"), Document("documents table")])
        assert len(store.similarity_search(SearchRequest(query, top_k=5))) == 2


# -- the dimension -------------------------------------------------------------------------------


def test_the_dimension_is_recorded_and_checked_when_the_store_is_opened_again(dsn: str, table: str) -> None:
    with PostgresVectorStore(dsn, WordsEmbeddingModel(64), table=table) as store:
        store.add([Document("kept across processes", {"k": 1}, id="x")])
    with pytest.raises(ChainConfigurationError, match=r"64-dimensional.*'words-64'.*16-dimensional"):
        PostgresVectorStore(dsn, WordsEmbeddingModel(16, name="other"), table=table)
    with PostgresVectorStore(dsn, WordsEmbeddingModel(64), table=table) as reopened:
        [doc] = reopened.similarity_search("kept")
        assert (doc.id, doc.text, doc.metadata) == ("x", "kept across processes", {"k": 1})


def test_a_model_of_unknown_dimension_records_it_at_the_first_add(dsn: str, admin: Any, table: str) -> None:
    store = PostgresVectorStore(dsn, DirectionModel({"a": [1.0, 0.0]}), table=table)
    assert admin.execute(f'SELECT count(*) FROM "{table}_store" WHERE key = %s', ("dimensions",)).fetchone()[0] == 0
    store.add([Document("a")])
    assert admin.execute(f'SELECT value FROM "{table}_store" WHERE key = %s', ("dimensions",)).fetchone()[0] == "2"
    store.embedding_model = WordsEmbeddingModel(3, name="three")
    with pytest.raises(ChainConfigurationError, match=r"2-dimensional.*3-dimensional"):
        store.add([Document("b")])
    assert count(admin, table) == 1
    store.close()


def test_a_dimension_past_the_index_limit_is_served_by_exact_scans(dsn: str, admin: Any, table: str) -> None:
    with PostgresVectorStore(dsn, WordsEmbeddingModel(2048), table=table) as store:
        store.add([Document(f"wide vector {i}", {"i": i}) for i in range(20)])
        found = store.similarity_search(SearchRequest("wide vector 3", top_k=3, filter="i >= 10"))
        assert len(found) == 3 and all(d.metadata["i"] >= 10 for d in found)
    assert admin.execute("SELECT count(*) FROM pg_indexes WHERE indexname = %s", (f"{table}_embedding",)).fetchone()[0] == 0


# -- many processes --------------------------------------------------------------------------------

_WORKER = """
import json, sys
sys.path.insert(0, {tests!r})
from rag.conftest import WordsEmbeddingModel
from advisorchain.rag import Document, PostgresVectorStore, SearchRequest

class Unknown(WordsEmbeddingModel):  # no dimension until the first add: they race to record it
    dimensions = None

dsn, table, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = PostgresVectorStore(dsn, Unknown(32), table=table)
short = 0
for i in range(10):
    store.add([Document(f"worker {{n}} batch {{i}} chunk {{j}}", {{"n": n, "i": i}}, id=f"{{n}}-{{i}}-{{j}}") for j in range(10)])
    found = store.similarity_search(SearchRequest("chunk batch", top_k=5, filter=f"n == {{n}}"))
    short += len(found) < 5 or any(d.metadata["n"] != n for d in found)
    store.add([Document("shared chunk", {{"shared": True}}, id="shared")])  # all upsert one row
print(json.dumps({{"short": short}}))
"""


def test_many_processes_write_and_search_at_once_and_nothing_is_lost(dsn: str, admin: Any, table: str) -> None:
    script = _WORKER.format(tests=str(Path(__file__).resolve().parent.parent))
    workers = [
        subprocess.Popen([sys.executable, "-c", script, dsn, table, str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in range(4)
    ]
    results = [w.communicate(timeout=120) for w in workers]
    for (out, err), worker in zip(results, workers, strict=True):
        assert worker.returncode == 0, err
        assert json.loads(out) == {"short": 0}
    assert count(admin, table) == 4 * 100 + 1
    assert admin.execute(f'SELECT value FROM "{table}_store" WHERE key = %s', ("dimensions",)).fetchone()[0] == "32"


# -- failures --------------------------------------------------------------------------------------


def test_a_server_without_pgvector_names_create_extension() -> None:
    plain = os.environ.get("ADVISORCHAIN_TEST_POSTGRES_DSN")
    if not plain:
        pytest.skip("ADVISORCHAIN_TEST_POSTGRES_DSN is not set: run the tests with scripts/test.sh")
    with psycopg.connect(plain, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
            pytest.skip("the plain PostgreSQL test server has pgvector installed")
    with pytest.raises(VectorStoreError, match="CREATE EXTENSION vector") as caught:
        PostgresVectorStore(plain, WordsEmbeddingModel(), table=fresh_table())
    assert isinstance(caught.value.store, PostgresVectorStore)
    assert isinstance(caught.value.__cause__, psycopg.Error)


def test_a_server_that_is_down_is_a_vector_store_error_naming_it_without_the_password() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    started = time.monotonic()
    with pytest.raises(VectorStoreError, match=rf"127\.0\.0\.1:{port}/kb.*running") as caught:
        PostgresVectorStore(f"postgresql://app:s3cret@127.0.0.1:{port}/kb", WordsEmbeddingModel())
    assert time.monotonic() - started < 5  # refused at once, not after a pool's timeout
    assert "s3cret" not in str(caught.value)
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)


def _backend_of(admin: Any, table: str, waiting: bool) -> int:
    """The pid of the store's backend (waiting on a lock, when asked), polled until it shows."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'advisorchain-rag' AND query LIKE %s"
            + (" AND wait_event_type = 'Lock'" if waiting else ""),
            (f'%"{table}"%',),
        ).fetchone()
        if row:
            return int(row[0])
        time.sleep(0.02)
    raise AssertionError("the store's backend never showed in pg_stat_activity")


def test_a_connection_lost_mid_search_is_a_vector_store_error_and_the_next_search_works(
    dsn: str, admin: Any, table: str
) -> None:
    store = PostgresVectorStore(dsn, WordsEmbeddingModel(), table=table)
    store.add([Document("before the outage", id="b")])
    outcome: list[Any] = []
    blocker = psycopg.connect(dsn)  # holds the table so the search waits, mid-query
    blocker.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')

    def search() -> None:
        try:
            outcome.append(store.similarity_search("before"))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=search)
    thread.start()
    try:
        admin.execute("SELECT pg_terminate_backend(%s)", (_backend_of(admin, table, waiting=True),))
        thread.join(10)
    finally:
        blocker.rollback()
        blocker.close()
    [error] = outcome
    assert isinstance(error, VectorStoreError) and "could not be reached or dropped the connection" in str(error)
    assert error.store is store and isinstance(error.__cause__, psycopg.OperationalError)
    assert [d.id for d in store.similarity_search("before")] == ["b"]  # a fresh connection serves the next one
    store.close()


def test_a_connection_lost_during_a_bulk_insert_leaves_none_of_the_batch(dsn: str, admin: Any, table: str) -> None:
    store = PostgresVectorStore(dsn, WordsEmbeddingModel(), table=table)
    store.add([Document("already there", id="kept")])
    # The server side of the store's connection dies at the 300th row of 500 (as a crash or a
    # network cut would end it): a trigger terminates its own backend.
    admin.execute(
        "CREATE FUNCTION die_at_300() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.id = 'file.md#300' THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF; "
        "RETURN NEW; END $$"
    )
    admin.execute(f'CREATE TRIGGER die BEFORE INSERT ON "{table}" FOR EACH ROW EXECUTE FUNCTION die_at_300()')
    chunks = [Document(f"chunk {i} of file.md", {"path": "file.md"}, id=f"file.md#{i}") for i in range(500)]
    try:
        with pytest.raises(VectorStoreError, match="dropped the connection"):
            store.add(chunks)
        assert count(admin, table) == 1  # the file's chunks: all there or none
        admin.execute(f'DROP TRIGGER die ON "{table}"')
        store.add(chunks)  # the next call reconnects
        assert count(admin, table) == 501
    finally:
        admin.execute(f'DROP TRIGGER IF EXISTS die ON "{table}"')
        admin.execute("DROP FUNCTION die_at_300()")
        store.close()


def test_text_postgresql_cannot_hold_is_refused_before_anything_is_embedded(dsn: str, admin: Any, table: str) -> None:
    model = WordsEmbeddingModel()
    store = PostgresVectorStore(dsn, model, table=table)
    for bad in (Document("fine"), Document("nul \0 inside")), (Document("x", {"k": ["a\0b"]}),), (Document("x", {"k\0": 1}),):
        with pytest.raises(ValueError, match="NUL"):
            store.add(list(bad))
    assert model.calls == [] and count(admin, table) == 0
    store.add([Document("a literal backslash-u0000", {"k": "\\u0000"})])  # only the character itself is refused
    assert store.similarity_search("literal")[0].metadata == {"k": "\\u0000"}
    store.close()


@pytest.mark.parametrize("table", ["x; DROP TABLE y", "public.documents", "", "a" * 41, "1abc"])
def test_a_table_name_that_is_not_a_plain_identifier_is_refused(dsn: str, table: str) -> None:
    with pytest.raises(ValueError, match="plain SQL identifier"):
        PostgresVectorStore(dsn, WordsEmbeddingModel(), table=table)


async def test_async_twins_run_concurrently_on_separate_connections(dsn: str, admin: Any, table: str) -> None:
    import asyncio

    store = PostgresVectorStore(dsn, WordsEmbeddingModel(), table=table)
    await asyncio.gather(*(store.aadd([Document(f"task {i}", {"i": i})]) for i in range(30)))
    found = await asyncio.gather(*(store.asimilarity_search(SearchRequest("task", top_k=40)) for _ in range(8)))
    assert all(len(f) == 30 for f in found)
    store.close()
