"""SQLiteVectorStore: the embedded default. One file holds the documents, their vectors (a
``sqlite-vec`` index) and a full-text index (FTS5) side by side; with ``hybrid=True`` a search fuses
the vector and keyword (BM25) rankings by reciprocal rank, so exact identifiers are found even when
the embedding ranks them low.

This Python's ``sqlite3`` module may not load extensions, so the store goes through ``apsw`` (whose
bundled SQLite has FTS5 and JSON). One connection per store, guarded by a lock; every write is one
transaction, checked before it starts; metadata is kept as JSONB (read by filters without parsing
text); filters are translated to SQL with every value bound.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..._checks import check_seconds
from ..._extras import missing_extra
from ...errors import VectorStoreError
from ..documents import Document
from ..embeddings import model_dimensions, model_name
from ..filters import Filter, SQLiteFilterTranslator
from ..filters.sql import check_parameter_count
from ..search import SearchRequest
from ._fusion import candidate_count, fuse, keyword_query, nearest_first
from .api import BaseVectorStore

__all__ = ["SQLiteVectorStore"]

_FORMAT = "1"
_K_MAX = 4096  # sqlite-vec's largest k for one KNN query; beyond it the scan is done in SQL
_TOKENIZER = "unicode61 remove_diacritics 2 tokenchars '_'"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS advisorchain_store (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS documents ("
    " rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, text TEXT NOT NULL, metadata BLOB NOT NULL)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS documents_fts USING fts5("
    f"text, content='', contentless_delete=1, tokenize=\"{_TOKENIZER}\")",
)


def _modules() -> tuple[Any, Any]:
    try:
        import apsw
        import sqlite_vec
    except ImportError as exc:
        raise missing_extra("advisorchain.rag.SQLiteVectorStore", "rag", exc) from exc
    return apsw, sqlite_vec


class SQLiteVectorStore(BaseVectorStore):
    """A store in one SQLite file (``":memory:"`` for a private in-memory database).

    ``embedding_model=None`` means ``LocalEmbeddingModel()``. The file records the embedding model's
    name and dimension when vectors are first added; opening it with a model of another dimension
    raises ``ChainConfigurationError``. ``timeout`` is how long a write waits for another
    connection's lock before the store raises ``VectorStoreError``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        embedding_model: Any = None,
        *,
        hybrid: bool = True,
        timeout: float = 5.0,
    ) -> None:
        apsw, sqlite_vec = _modules()
        super().__init__(embedding_model)
        self.path = os.fspath(path)
        self.hybrid = bool(hybrid)
        self.timeout = check_seconds(timeout, "timeout")
        self._apsw = apsw
        self._lock = threading.RLock()
        self._translator = SQLiteFilterTranslator("d.metadata")
        self._known: tuple[int | None, str | None] | None = None
        self._conn = self._open(apsw, sqlite_vec)
        try:
            dims, model = self._recorded()
            self.check_model(dims, model)
            if dims is None:
                self._record_at_creation()
        except apsw.Error as exc:
            raise VectorStoreError(self.describe_failure(exc), store=self) from exc

    def _record_at_creation(self) -> None:
        """A new store records its model's name and dimension at once, when the model knows it (a
        remote model's is recorded at the first ``add``)."""
        dims = model_dimensions(self.embedding_model)
        if dims is None:
            return
        with self._writing() as conn:
            recorded, model = self._recorded()  # again, inside the transaction: another process may have
            if recorded is None:
                self._record(conn, dims)
            else:
                self.check_dimension(recorded, model, dims)

    def __repr__(self) -> str:
        return f"SQLiteVectorStore({self.path!r})"

    # -- connection and schema ---------------------------------------------------------------------

    def _open(self, apsw: Any, sqlite_vec: Any) -> Any:
        try:
            conn = apsw.Connection(self.path)
            self._max_parameters = conn.limit(apsw.SQLITE_LIMIT_VARIABLE_NUMBER)
            conn.set_busy_timeout(int(self.timeout * 1000))
            conn.enable_load_extension(True)
            conn.load_extension(sqlite_vec.loadable_path())
            conn.enable_load_extension(False)
            if self.path != ":memory:" and not self.path.startswith("file::memory:"):
                conn.execute("PRAGMA journal_mode=WAL")
            present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
            if not {"advisorchain_store", "documents", "documents_fts"} <= present:
                with conn:
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    conn.execute(
                        "INSERT OR IGNORE INTO advisorchain_store(key, value) VALUES ('format', ?)",
                        (_FORMAT,),
                    )
        except apsw.Error as exc:
            raise VectorStoreError(self.describe_failure(exc), store=self) from exc
        return conn

    def describe_failure(self, exc: BaseException) -> str:
        apsw = self._apsw
        where = f"the SQLite store file {self.path!r}"
        if isinstance(exc, apsw.BusyError | apsw.LockedError):
            return (
                f"{where} is locked by another connection (waited {self.timeout:g}s); close the other "
                "writer or pass a longer timeout="
            )
        if isinstance(exc, apsw.NotADBError | apsw.CorruptError):
            return f"{where} is damaged or not a SQLite database ({exc}); restore it or index into a new file"
        if isinstance(exc, apsw.CantOpenError | apsw.ReadOnlyError | apsw.PermissionsError):
            return f"{where} cannot be opened for writing ({exc}); check the path and its permissions"
        return f"{where} failed: {type(exc).__name__}: {exc}"

    @contextmanager
    def _locked(self) -> Iterator[Any]:
        with self._lock:
            yield self._conn

    @contextmanager
    def _writing(self) -> Iterator[Any]:
        """One write transaction, its lock taken at the start (BEGIN IMMEDIATE): a deferred one that
        read first could not upgrade once another connection wrote, and would fail at once instead
        of waiting ``timeout``."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _recorded(self) -> tuple[int | None, str | None]:
        """The dimension and model name the file records (kept once known: they never change)."""
        if self._known is not None:
            return self._known
        with self._locked() as conn:
            values = dict(conn.execute("SELECT key, value FROM advisorchain_store").fetchall())
        dims = values.get("dimensions")
        recorded = (int(dims) if dims is not None else None), values.get("model")
        if dims is not None:
            self._known = recorded
        return recorded

    def close(self) -> None:
        """Close the connection (the store cannot be used afterwards)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SQLiteVectorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writes --------------------------------------------------------------------------------------

    def _write(self, documents: Sequence[Document], vectors: Sequence[Sequence[float]]) -> None:
        import numpy as np

        found = len(vectors[0])
        blobs = np.asarray(vectors, dtype=np.float32)
        with self._writing() as conn:
            dims, model = self._recorded()
            self.check_dimension(dims, model, found)
            if dims is None:
                self._record(conn, found)
            for doc, blob in zip(documents, blobs, strict=True):
                self._upsert(conn, doc, blob.tobytes())

    def _record(self, conn: Any, dims: int) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO advisorchain_store(key, value) VALUES ('dimensions', ?), ('model', ?)",
            (str(dims), model_name(self.embedding_model)),
        )
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS documents_vec USING vec0("
            f"embedding float[{int(dims)}] distance_metric=cosine)"
        )

    def _upsert(self, conn: Any, doc: Document, blob: bytes) -> None:
        metadata = json.dumps(doc.metadata, ensure_ascii=False)
        row = conn.execute("SELECT rowid FROM documents WHERE id = ?", (doc.id,)).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO documents(id, text, metadata) VALUES (?, ?, ?)", (doc.id, doc.text, metadata)
            )
            rowid = conn.last_insert_rowid()
        else:
            rowid = row[0]
            conn.execute(
                "UPDATE documents SET text = ?, metadata = ? WHERE rowid = ?", (doc.text, metadata, rowid)
            )
            conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (rowid,))
            conn.execute("DELETE FROM documents_vec WHERE rowid = ?", (rowid,))
        conn.execute("INSERT INTO documents_fts(rowid, text) VALUES (?, ?)", (rowid, doc.text))
        conn.execute("INSERT INTO documents_vec(rowid, embedding) VALUES (?, ?)", (rowid, blob))

    def _delete(self, ids: list[str] | None, filter: Filter | None) -> int:
        with self._writing() as conn:
            if ids is not None:
                rows = [
                    r
                    for (r,) in (
                        conn.execute("SELECT rowid FROM documents WHERE id = ?", (i,)).fetchone() or (None,)
                        for i in dict.fromkeys(ids)
                    )
                    if r is not None
                ]
            else:
                assert filter is not None
                where, params = self._translate(filter)
                rows = [r for (r,) in conn.execute(f"SELECT d.rowid FROM documents d WHERE {where}", params)]
            has_vectors = self._recorded()[0] is not None
            for rowid in rows:
                conn.execute("DELETE FROM documents WHERE rowid = ?", (rowid,))
                conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (rowid,))
                if has_vectors:
                    conn.execute("DELETE FROM documents_vec WHERE rowid = ?", (rowid,))
            return len(rows)

    # -- search --------------------------------------------------------------------------------------

    def _is_empty(self) -> bool:
        with self._locked() as conn:
            return conn.execute("SELECT NOT EXISTS (SELECT 1 FROM documents)").fetchone()[0] == 1  # type: ignore[no-any-return]

    def _search(self, request: SearchRequest, vector: Sequence[float]) -> list[Document]:
        import numpy as np

        with self._locked() as conn:
            dims, model = self._recorded()
            if dims is None:
                return []
            self.check_dimension(dims, model, len(vector))
            restrict, params = self._restriction(request.filter)
            wanted = candidate_count(request.top_k, hybrid=self.hybrid)
            blob = np.asarray(vector, dtype=np.float32).tobytes()
            similar = self._vector_side(conn, blob, wanted, restrict, params, request.similarity_threshold)
            if not self.hybrid:
                ranked = similar[: request.top_k]
            else:
                keyword = self._keyword_side(conn, request.query, wanted, request.filter)
                ranked = fuse([row for row, _ in similar], keyword)[: request.top_k]
            return self._documents(conn, ranked)

    def _restriction(self, filter: Filter | None) -> tuple[str, list[Any]]:
        if filter is None:
            return "", []
        where, params = self._translate(filter)
        return f" AND rowid IN (SELECT d.rowid FROM documents d WHERE {where})", params

    def _translate(self, filter: Filter) -> tuple[str, list[Any]]:
        where, params = self._translator.translate(filter)
        # a search binds the query vector and the count beside the filter's values
        return where, check_parameter_count(params, 4, self._max_parameters, "SQLite")

    def _vector_side(
        self, conn: Any, blob: bytes, wanted: int, restrict: str, params: list[Any], threshold: float
    ) -> list[tuple[int, float]]:
        if wanted <= _K_MAX:
            sql = f"SELECT rowid, distance FROM documents_vec WHERE embedding MATCH ? AND k = ?{restrict}"
            rows = conn.execute(sql, [blob, wanted, *params]).fetchall()
        else:
            where = f"WHERE 1{restrict}" if restrict else ""
            sql = (
                f"SELECT rowid, vec_distance_cosine(embedding, ?) AS distance FROM documents_vec {where} "
                "ORDER BY distance, rowid LIMIT ?"
            )
            rows = conn.execute(sql, [blob, *params, wanted]).fetchall()
        return nearest_first(rows, threshold)

    def _keyword_side(
        self,
        conn: Any,
        query: str,
        wanted: int,
        filter: Filter | None,
    ) -> list[int]:
        match = keyword_query(query)
        if match is None:
            return []
        if filter is None:
            sql = (
                "SELECT rowid FROM documents_fts WHERE documents_fts MATCH ? "
                "ORDER BY bm25(documents_fts), rowid LIMIT ?"
            )
            return [row for (row,) in conn.execute(sql, [match, wanted])]
        # The hits first, then the filter on them alone: given the filter as a rowid constraint the
        # planner walks the filtered rows and tests MATCH on each (a hundred times slower).
        where, params = self._translate(filter)
        sql = (
            "WITH hits AS MATERIALIZED (SELECT rowid AS hit, bm25(documents_fts) AS rank "
            "FROM documents_fts WHERE documents_fts MATCH ?) "
            f"SELECT hit FROM hits JOIN documents d ON d.rowid = hit WHERE {where} ORDER BY rank, hit LIMIT ?"
        )
        return [row for (row,) in conn.execute(sql, [match, *params, wanted])]

    def _documents(self, conn: Any, ranked: list[tuple[int, float]]) -> list[Document]:
        if not ranked:
            return []
        marks = ", ".join("?" for _ in ranked)
        rows = {
            rowid: (doc_id, text, metadata)
            for rowid, doc_id, text, metadata in conn.execute(
                f"SELECT rowid, id, text, json(metadata) FROM documents WHERE rowid IN ({marks})",
                [r for r, _ in ranked],
            )
        }
        return [
            Document(rows[r][1], json.loads(rows[r][2]), rows[r][0], score)
            for r, score in ranked
            if r in rows
        ]
