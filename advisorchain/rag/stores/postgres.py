"""PostgresVectorStore: documents and vectors in PostgreSQL with pgvector, for knowledge bases that
outgrow one file (many workers and machines, millions of chunks, a database already run).

One table holds each document's id, text, ``jsonb`` metadata, vector and a generated ``tsvector``;
a small table beside it records the embedding model's name and dimension. The vectors get an HNSW
index (cosine) once the dimension is known, up to pgvector's 2,000 dimensions; past that every
search is an exact scan. A search asks the index with ``hnsw.iterative_scan`` (pgvector 0.8+), so a
filter that rejects the nearest rows makes the index look further instead of returning fewer rows,
and when the index still returns fewer than wanted (its scan limit, vectors it does not hold) the
search is repeated as an exact scan: a filtered search is never short. With ``hybrid=True`` the
vector ranking is fused with a full-text one (``ts_rank`` over the ``tsvector``, any of the query's
words) by reciprocal rank, as ``SQLiteVectorStore`` does.

Every write is one transaction (a batch is all there or not at all); rows are upserted in id order so
concurrent writers never deadlock; the dimension is recorded under an advisory lock so two processes
adding the first documents at once agree. Filters are translated to SQL with every key and value
bound, never spliced.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..._checks import check_seconds
from ...errors import VectorStoreError
from ..documents import Document
from ..embeddings import model_dimensions, model_name
from ..filters import Filter, PostgresFilterTranslator
from ..filters.sql import check_parameter_count
from ..search import SearchRequest
from ._fusion import candidate_count, fuse, keyword_terms, nearest_first
from ._pg import Connections, PgVector, drivers, metadata_json, server_name, vector_dumper
from .api import BaseVectorStore

__all__ = ["PostgresVectorStore"]

_FORMAT = "1"
_LOCK_SPACE = 0x41435247  # "ACRG": the first key of this module's advisory locks
_HNSW_MAX_DIMENSIONS = 2000  # pgvector indexes the vector type up to this many dimensions
_MAX_PARAMETERS = 65_535  # PostgreSQL's protocol: bound parameters in one statement
_EF_SEARCH = 100  # the index's candidate list per search step (pgvector's default is 40)
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}\Z")


def _check_table(table: object) -> str:
    if not isinstance(table, str) or not _TABLE.match(table):
        raise ValueError(
            "table must be a plain SQL identifier of at most 40 characters (letters, digits, _; no "
            f"schema: set the role's search_path for that), got {table!r}"
        )
    return table


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


class PostgresVectorStore(BaseVectorStore):
    """A store in a PostgreSQL database with the pgvector extension (``pip install
    'advisorchain[postgres]'``).

    ``dsn`` is a libpq connection string or URL (``postgresql://user@host/db``). The tables are
    created on first use (``table`` and ``<table>_store``); the extension too when the role may
    (else a ``VectorStoreError`` naming ``CREATE EXTENSION vector``). ``embedding_model=None``
    means ``LocalEmbeddingModel()``; the model's name and dimension are recorded, and a model of
    another dimension raises ``ChainConfigurationError``. ``connect_timeout`` bounds how long
    opening a connection may take. Safe for many threads, tasks and processes at once.

    >>> store = PostgresVectorStore("postgresql://app@db/app")
    >>> store.add(TextSplitter().split(documents))
    """

    def __init__(
        self,
        dsn: str,
        embedding_model: Any = None,
        *,
        table: str = "advisorchain_documents",
        hybrid: bool = True,
        connect_timeout: float = 10.0,
    ) -> None:
        psycopg = drivers()
        super().__init__(embedding_model)
        if not isinstance(dsn, str) or not dsn:
            raise ValueError(f"dsn must be a PostgreSQL connection string or URL, got {dsn!r}")
        self.table = _check_table(table)
        self.hybrid = bool(hybrid)
        self.connect_timeout = check_seconds(connect_timeout, "connect_timeout")
        self._psycopg = psycopg
        self._dsn = dsn
        self._server = server_name(psycopg, dsn)
        self._translator = PostgresFilterTranslator("d.metadata")
        self._sql = _statements(psycopg.sql, self.table)
        self._known: tuple[int, str | None] | None = None
        self._dumper: type | None = None
        self._iterative = False
        self._connections = Connections(self._connect)
        try:
            self._set_up()
        except BaseException as exc:
            self._connections.close()
            if isinstance(exc, psycopg.Error):
                raise VectorStoreError(self.describe_failure(exc), store=self) from exc
            raise

    def __repr__(self) -> str:
        return f"PostgresVectorStore({self._server!r}, table={self.table!r})"

    # -- connections and schema ----------------------------------------------------------------------

    def _connect(self) -> Any:
        psycopg = self._psycopg
        info = psycopg.conninfo.conninfo_to_dict(self._dsn)
        options: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in info:
            options["connect_timeout"] = max(1, round(self.connect_timeout))
        if "application_name" not in info:
            options["application_name"] = "advisorchain-rag"
        conn = psycopg.connect(self._dsn, **options)
        try:
            if self._dumper is not None:
                self._configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _configure(self, conn: Any) -> None:
        assert self._dumper is not None
        conn.adapters.register_dumper(PgVector, self._dumper)
        if self._iterative:
            # The index keeps scanning until enough rows pass the filter (pgvector 0.8+).
            conn.execute(f"SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = {_EF_SEARCH}")

    def _set_up(self) -> None:
        with self._connections.connection() as conn:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_SPACE,))
                version = self._extension(conn)
                conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_SPACE, self.table))
                for statement in self._sql["create"]:
                    conn.execute(statement)
                conn.execute(self._sql["format"](), (_FORMAT,))
            self._iterative = _version(version) >= (0, 8)
            oid = conn.execute(
                "SELECT t.oid FROM pg_type t JOIN pg_extension e ON t.typnamespace = e.extnamespace "
                "WHERE e.extname = 'vector' AND t.typname = 'vector'"
            ).fetchone()[0]
            self._dumper = vector_dumper(oid)
            self._configure(conn)
            dims, model = self._recorded(conn)
            self.check_model(dims, model)
            known = model_dimensions(self.embedding_model)
            if dims is None and known is not None:
                with conn.transaction():
                    self._record(conn, known)

    def _extension(self, conn: Any) -> str:
        """pgvector's version, the extension created when missing (VectorStoreError if it cannot be)."""
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        if row is not None:
            return str(row[0])
        try:
            with conn.transaction():  # a savepoint: a refusal leaves the outer transaction usable
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except self._psycopg.Error as exc:
            raise VectorStoreError(
                f"{self!r}: the database has no pgvector extension and it could not be created "
                f"({type(exc).__name__}: {' '.join(str(exc).split())}); install pgvector on the PostgreSQL "
                "server and run CREATE EXTENSION vector; in this database as a role allowed to (a superuser "
                "or the database owner)",
                store=self,
            ) from exc
        return str(conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0])

    def _recorded(self, conn: Any) -> tuple[int | None, str | None]:
        """The recorded dimension and model name (kept once known: they never change)."""
        if self._known is not None:
            return self._known
        values = dict(conn.execute(self._sql["recorded"]()).fetchall())
        if "dimensions" not in values:
            return None, values.get("model")
        self._known = (int(values["dimensions"]), values.get("model"))
        return self._known

    def _record(self, conn: Any, dims: int) -> tuple[int, str | None]:
        """Record ``dims`` (unless another process just did: then its record), the column typed and
        indexed for it. Inside the caller's transaction, under the table's advisory lock."""
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_SPACE, self.table))
        values = dict(conn.execute(self._sql["recorded"]()).fetchall())
        if "dimensions" in values:
            return int(values["dimensions"]), values.get("model")
        conn.execute(self._sql["record"](), (str(dims), model_name(self.embedding_model)))
        conn.execute(self._sql["typed"](dims=self._psycopg.sql.Literal(int(dims))))
        if dims <= _HNSW_MAX_DIMENSIONS:
            conn.execute(self._sql["index"]())
        return dims, model_name(self.embedding_model)

    def describe_failure(self, exc: BaseException) -> str:
        errors = self._psycopg.errors
        reason = f"{type(exc).__name__}: {' '.join(str(exc).split())}"  # one line
        if isinstance(exc, self._psycopg.OperationalError) and "number of parameters" in str(exc):
            return (
                f"{self!r}: the query binds more than the {_MAX_PARAMETERS:,} parameters PostgreSQL takes in "
                f"one statement ({reason}); use a filter with fewer terms or values, or split the call"
            )
        if isinstance(exc, self._psycopg.OperationalError):
            return (
                f"{self!r}: the PostgreSQL server could not be reached or dropped the connection "
                f"({reason}); check that it is running and accepts connections"
            )
        if isinstance(exc, errors.InsufficientPrivilege):
            return f"{self!r}: the role may not use table {self.table!r} ({reason}); grant it, or pass table="
        if isinstance(exc, errors.UndefinedTable):
            return f"{self!r}: table {self.table!r} is gone ({reason}); open the store again to create it"
        return f"{self!r} failed: {reason}"

    def close(self) -> None:
        """Close the store's connections (the store cannot be used afterwards)."""
        self._connections.close()

    def __enter__(self) -> PostgresVectorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writes --------------------------------------------------------------------------------------

    def check_batch(self, documents: Sequence[Document]) -> None:
        """PostgreSQL text cannot hold NUL: refuse it before anything is embedded."""
        for i, doc in enumerate(documents):
            if "\0" in doc.text or any("\0" in text for text in _texts(doc.metadata)):
                raise ValueError(
                    f"document {i} ({doc.id!r}) holds a NUL character (\\x00) in its text or metadata, "
                    "which PostgreSQL text cannot hold; remove it"
                )

    def _write(self, documents: Sequence[Document], vectors: Sequence[Sequence[float]]) -> None:
        found = len(vectors[0])
        rows = sorted(
            (
                (doc.id or "", doc.text, metadata_json(doc.metadata), vector)
                for doc, vector in zip(documents, PgVector.batch(vectors), strict=True)
            ),
            key=lambda r: r[0],  # one lock order for every writer: no deadlock between batches
        )
        with self._connections.connection() as conn, conn.transaction():
            dims, model = self._recorded(conn)
            if dims is None:
                dims, model = self._record(conn, found)
            self.check_dimension(dims, model, found)
            with conn.cursor() as cursor:
                cursor.executemany(self._sql["upsert"](), rows)
        self._known = (dims, model)

    def _delete(self, ids: list[str] | None, filter: Filter | None) -> int:
        with self._connections.connection() as conn:
            if ids is not None:
                cursor = conn.execute(self._sql["delete_ids"](), (list(dict.fromkeys(ids)),))
            else:
                assert filter is not None
                where, params = self._where(filter)
                cursor = conn.execute(self._sql["delete_where"](where=self._psycopg.sql.SQL(where)), params)
            return int(cursor.rowcount)

    # -- search --------------------------------------------------------------------------------------

    def _is_empty(self) -> bool:
        with self._connections.connection() as conn:
            return bool(conn.execute(self._sql["empty"]()).fetchone()[0])

    def _search(self, request: SearchRequest, vector: Sequence[float]) -> list[Document]:
        with self._connections.connection() as conn:
            dims, model = self._recorded(conn)
            if dims is None:
                return []
            self.check_dimension(dims, model, len(vector))
            where, params = self._where(request.filter)
            wanted = candidate_count(request.top_k, hybrid=self.hybrid)
            [query] = PgVector.batch([vector])
            similar = self._vector_side(conn, query, wanted, where, params, request.similarity_threshold)
            if not self.hybrid:
                ranked = similar[: request.top_k]
            else:
                keyword = self._keyword_side(conn, request.query, wanted, where, params)
                ranked = fuse([row for row, _ in similar], keyword)[: request.top_k]
            return self._documents(conn, ranked)

    def _where(self, filter: Filter | None) -> tuple[str, list[Any]]:
        if filter is None:
            return "true", []
        where, params = self._translator.translate(filter)
        # the search binds the query vector twice and the count beside the filter's values
        return where, check_parameter_count(params, 4, _MAX_PARAMETERS, "PostgreSQL")

    def _vector_side(
        self, conn: Any, query: PgVector, wanted: int, where: str, params: list[Any], threshold: float
    ) -> list[tuple[int, float]]:
        where_sql = self._psycopg.sql.SQL(where)
        arguments = [query, *params, query, wanted]
        rows = conn.execute(self._sql["nearest"](where=where_sql), arguments).fetchall()
        if len(rows) < wanted and self._known is not None and self._known[0] <= _HNSW_MAX_DIMENSIONS:
            # The index may have stopped short (its scan limit, vectors it does not hold): ask again
            # with an ordering it cannot serve, so every matching row is measured.
            rows = conn.execute(self._sql["exact"](where=where_sql), arguments).fetchall()
        return nearest_first(rows, threshold)

    def _keyword_side(self, conn: Any, text: str, wanted: int, where: str, params: list[Any]) -> list[int]:
        terms = keyword_terms(text)
        if not terms:
            return []
        sql = self._psycopg.sql
        # Each word as a phrase of the words the parser cuts it into (max_wal_size: max <-> wal <->
        # size), any of them matching; the user's text is bound, never parsed as a tsquery.
        query = sql.SQL(" || ").join(sql.SQL("phraseto_tsquery('simple', %s)") for _ in terms)
        statement = self._sql["keyword"](query=query, where=sql.SQL(where))
        return [seq for (seq,) in conn.execute(statement, [*terms, *params, wanted])]

    def _documents(self, conn: Any, ranked: list[tuple[int, float]]) -> list[Document]:
        if not ranked:
            return []
        found = conn.execute(self._sql["documents"](), ([s for s, _ in ranked],))
        rows = {seq: (doc_id, text, metadata) for seq, doc_id, text, metadata in found}
        return [Document(rows[s][1], rows[s][2], rows[s][0], score) for s, score in ranked if s in rows]


def _texts(metadata: Mapping[str, Any]) -> Iterator[str]:
    """Every key and str value of ``metadata`` (inside lists too)."""
    for key, value in metadata.items():
        yield key
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                yield item


def _statements(sql: Any, name: str) -> dict[str, Any]:
    """The store's SQL, its names quoted as identifiers; each but ``create`` is called with the parts
    known at the call (``where=``, ``query=``, ``dims=``)."""
    names = {
        "table": sql.Identifier(name),
        "store": sql.Identifier(f"{name}_store"),
        "tsv_index": sql.Identifier(f"{name}_tsv"),
        "vector_index": sql.Identifier(f"{name}_embedding"),
    }
    texts = {
        "create": [
            "CREATE TABLE IF NOT EXISTS {store} (key text PRIMARY KEY, value text NOT NULL)",
            "CREATE TABLE IF NOT EXISTS {table} ("
            " seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,"
            " id text PRIMARY KEY,"
            " text text NOT NULL,"
            " metadata jsonb NOT NULL,"
            " embedding vector NOT NULL,"
            " tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, text)) STORED)",
            "CREATE INDEX IF NOT EXISTS {tsv_index} ON {table} USING gin (tsv)",
        ],
        "format": "INSERT INTO {store} (key, value) VALUES ('format', %s) ON CONFLICT DO NOTHING",
        "recorded": "SELECT key, value FROM {store} WHERE key IN ('dimensions', 'model')",
        "record": "INSERT INTO {store} (key, value) VALUES ('dimensions', %s), ('model', %s) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        "typed": "ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({dims})",
        "index": "CREATE INDEX IF NOT EXISTS {vector_index} ON {table} "
        "USING hnsw (embedding vector_cosine_ops)",
        "upsert": "INSERT INTO {table} (id, text, metadata, embedding) VALUES (%s, %s, %s::jsonb, %s) "
        "ON CONFLICT (id) DO UPDATE SET text = EXCLUDED.text, metadata = EXCLUDED.metadata, "
        "embedding = EXCLUDED.embedding",
        "delete_ids": "DELETE FROM {table} WHERE id = ANY(%s::text[])",
        "delete_where": "DELETE FROM {table} d WHERE {where}",
        "empty": "SELECT NOT EXISTS (SELECT 1 FROM {table})",
        "nearest": "SELECT d.seq, d.embedding <=> %s FROM {table} d WHERE {where} "
        "ORDER BY d.embedding <=> %s LIMIT %s",
        # `+ 0`: an ordering the index cannot serve, so the planner measures every matching row.
        "exact": "SELECT d.seq, d.embedding <=> %s FROM {table} d WHERE {where} "
        "ORDER BY (d.embedding <=> %s) + 0 LIMIT %s",
        "keyword": "SELECT d.seq FROM {table} d, (SELECT {query}) AS q(query) "
        "WHERE d.tsv @@ q.query AND {where} ORDER BY ts_rank(d.tsv, q.query) DESC, d.seq LIMIT %s",
        "documents": "SELECT seq, id, text, metadata FROM {table} WHERE seq = ANY(%s)",
    }
    statements: dict[str, Any] = {}
    for key, text in texts.items():
        if isinstance(text, list):
            statements[key] = [sql.SQL(t).format(**names) for t in text]
        else:
            statements[key] = _Statement(sql.SQL(text), names)
    return statements


class _Statement:
    """A statement whose identifiers are known and whose ``{where}``/``{query}``/``{dims}`` parts
    are given at the call: ``statement(where=...)`` is the composed SQL."""

    __slots__ = ("names", "template")

    def __init__(self, template: Any, names: dict[str, Any]) -> None:
        self.template = template
        self.names = names

    def __call__(self, **parts: Any) -> Any:
        return self.template.format(**{**self.names, **parts})
