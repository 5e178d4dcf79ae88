"""What ``PostgresVectorStore`` needs from psycopg: reused connections, vectors sent in pgvector's
binary form, metadata as ``jsonb`` text that keeps numbers exact, and where a server is (never its
password) for error messages.

psycopg is imported when a store is built, so ``import advisorchain.rag`` works without it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..._extras import missing_extra
from ..filters.sql import exact_number

__all__ = ["Connections", "PgVector", "drivers", "metadata_json", "server_name", "vector_dumper"]

# A connection idle for longer than this is checked with a round trip before it is reused: the
# server may have restarted or dropped it meanwhile (HikariCP's rule, 0.5 s there).
_CHECK_AFTER = 1.0


def drivers() -> Any:
    """The psycopg module, or a ModuleNotFoundError naming the ``postgres`` extra."""
    try:
        import psycopg
    except ImportError as exc:
        raise missing_extra("advisorchain.rag.PostgresVectorStore", "postgres", exc) from exc
    return psycopg


def server_name(psycopg: Any, dsn: str) -> str:
    """``host:port/database`` of a DSN (never its user or password), for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<a DSN that does not parse>"
    host = info.get("host") or info.get("hostaddr") or "localhost"
    return f"{host}:{info.get('port') or 5432}/{info.get('dbname') or info.get('user') or '<default>'}"


class PgVector:
    """A vector in pgvector's binary wire form: dimension and a spare field (int16 each), then
    float4s, all big-endian."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    @classmethod
    def batch(cls, vectors: Sequence[Sequence[float]] | Any) -> list[PgVector]:
        """One ``PgVector`` per row of ``vectors`` (converted once, as a matrix)."""
        import numpy as np

        matrix = np.asarray(vectors, dtype=">f4")
        header = int(matrix.shape[1]).to_bytes(2, "big") + b"\0\0"
        return [cls(header + row.tobytes()) for row in matrix]


def vector_dumper(oid: int) -> type:
    """A psycopg dumper sending ``PgVector`` as the server's ``vector`` type (its ``oid``)."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class VectorDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            return obj.data  # type: ignore[no-any-return]

    VectorDumper.oid = oid
    return VectorDumper


def _json_value(value: Any) -> str:
    if isinstance(value, float) and not isinstance(value, bool):
        if value.is_integer():
            return f"{exact_number(value)}.0"  # stays a float when read back, exact in numeric
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(_json_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def metadata_json(metadata: Mapping[str, Any]) -> str:
    """Metadata as JSON text for a ``jsonb`` column. A float's text is one that ``numeric`` holds
    exactly as the filters bind it (see ``exact_number``) and that reads back as the same float."""
    pairs = (f"{json.dumps(k, ensure_ascii=False)}:{_json_value(v)}" for k, v in metadata.items())
    return "{" + ",".join(pairs) + "}"


class Connections:
    """Connections to one server, reused across calls and threads (one per concurrent call).

    A connection comes from the idle ones (checked first when idle for a while) or is opened at
    once, so a server that is down fails the call at once with the driver's reason, and a server
    back up serves the next call. One that broke, or is left inside a transaction, is closed
    instead of being reused.
    """

    def __init__(self, connect: Callable[[], Any], *, max_idle: int = 8) -> None:
        self._connect = connect
        self._max_idle = max_idle
        self._idle: list[tuple[Any, float]] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A connection in autocommit mode (``with conn.transaction():`` for several statements)."""
        conn = self._take()
        try:
            yield conn
        finally:
            self._give_back(conn)

    def _take(self) -> Any:
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("this PostgresVectorStore is closed")
                if not self._idle:
                    break
                conn, since = self._idle.pop()
            if time.monotonic() - since < _CHECK_AFTER or _alive(conn):
                return conn
            conn.close()
        return self._connect()

    def _give_back(self, conn: Any) -> None:
        from psycopg.pq import TransactionStatus

        if not conn.closed and not conn.broken and conn.info.transaction_status == TransactionStatus.IDLE:
            with self._lock:
                if not self._closed and len(self._idle) < self._max_idle:
                    self._idle.append((conn, time.monotonic()))
                    return
        conn.close()

    def close(self) -> None:
        """Close the idle connections; the ones in use close when their call ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()


def _alive(conn: Any) -> bool:
    import psycopg

    try:
        conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True
