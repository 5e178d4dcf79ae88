"""``PostgresChatMemoryRepository``: one row per message in PostgreSQL, over psycopg 3 and a pool.

psycopg is imported when a repository is built, so ``import advisorchain`` works without it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..messages import Message
from ._store import BlockingRepository, check_conversation_id, check_messages, decode, encode, plan_rows
from .api import ConversationChange
from .entries import StoredEntry, entries_from_raw
from .sqlite import check_table_name

__all__ = ["PostgresChatMemoryRepository"]

# How long a first wait for a pooled connection lasts before the server is probed: a dead server is
# named within seconds, not after the pool's whole ``timeout``.
_PROBE_AFTER = 3.0

# First key of the two-int advisory locks this module takes ("ACMM"); the second is the hash of
# the conversation id (or 0 for schema creation). Colliding hashes only serialise two writers.
_LOCK_SPACE = 0x41434D4D


def _drivers() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as e:
        raise ImportError(
            "PostgresChatMemoryRepository needs psycopg 3 and psycopg_pool: "
            "pip install 'advisorchain[postgres]'"
        ) from e
    return psycopg, psycopg_pool


class PostgresChatMemoryRepository(BlockingRepository):
    """Conversations in PostgreSQL: one row per message, the table created on first use.

    Connections come from a ``psycopg_pool.ConnectionPool`` (opened on first use). ``update`` takes
    a transaction-scoped advisory lock on the conversation, so concurrent appends from any number of
    threads or processes are serialised and none is lost. The ``a``-methods run in worker threads.

    Turns on one conversation are ordered across processes by a session advisory lock taken on one
    connection of its own (so it is released at once if the process dies; ``lock_lease`` is None).

    A server that cannot be reached, or that drops the connection, fails the call within seconds with
    a ``ConnectionError`` naming the server (``host:port``, never the password) and the reason: a
    connection the pool does not hand out within 3 s makes the repository try the server directly.
    ``timeout`` bounds the wait for a connection when the pool is busy.

    >>> repository = PostgresChatMemoryRepository("postgresql://app@localhost/app")
    >>> memory = MessageWindowChatMemory(repository)
    """

    def __init__(
        self,
        dsn: str,
        *,
        table_name: str = "advisorchain_chat_memory",
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 30.0,
    ) -> None:
        psycopg, psycopg_pool = _drivers()
        self.table_name = check_table_name(table_name)
        self._pool: Any = psycopg_pool.ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            name="advisorchain-memory",
            kwargs={"autocommit": True},
        )
        self._ready = False
        self._ready_lock = threading.Lock()
        self._sql = _statements(psycopg.sql, self.table_name)
        self._dsn = dsn
        self._psycopg = psycopg
        self._pool_timeout: type[Exception] = psycopg_pool.PoolTimeout
        self._timeout = timeout
        self._max_size = max_size
        self._server = _server_of(psycopg, dsn)
        self._connect = psycopg.connect
        self._lock_conn: Any = None
        self._lock_conn_lock = threading.Lock()
        self.lock_lease: float | None = None

    def __repr__(self) -> str:
        return f"PostgresChatMemoryRepository({self._server}, table {self.table_name!r})"

    # -- connections ---------------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A pooled autocommit connection: each statement is its own transaction. A server that
        cannot be reached or drops the connection is a ``ConnectionError`` naming it."""
        if not self._ready:
            self._prepare()
        with self._pooled() as conn:
            yield conn

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A pooled connection in a transaction: committed at the end, rolled back on error."""
        with self._connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def _pooled(self) -> Iterator[Any]:
        conn = self._getconn()
        try:
            with conn:
                yield conn
        except self._psycopg.OperationalError as exc:
            if conn.broken or conn.closed:  # the server went away (not a lock timeout, say)
                raise self._unreachable(exc, "dropped the connection") from exc
            raise
        finally:
            self._pool.putconn(conn)

    def _getconn(self) -> Any:
        """A connection of the pool; when none comes within a few seconds, the server is tried
        directly, so that a dead one is named at once instead of after the pool's ``timeout``."""
        first = min(self._timeout, _PROBE_AFTER)
        try:
            return self._pool.getconn(timeout=first)
        except self._pool_timeout:
            pass
        self._probe()
        rest = self._timeout - first
        if rest > 0:
            try:
                return self._pool.getconn(timeout=rest)
            except self._pool_timeout:
                pass
        raise self._pool_timeout(
            f"{self!r}: no pooled connection came free within {self._timeout:g} s though the server answers; "
            f"raise max_size (now {self._max_size}) or timeout"
        )

    def _probe(self) -> None:
        """Connect to the server directly, once: a ConnectionError naming it and the reason when it
        cannot be reached."""
        try:
            self._connect(self._dsn, connect_timeout=_connect_timeout(self._timeout)).close()
        except self._psycopg.OperationalError as exc:
            raise self._unreachable(exc, "could not be reached") from exc

    def _unreachable(self, exc: BaseException, what: str) -> ConnectionError:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return ConnectionError(
            f"{self!r}: the PostgreSQL server at {self._server} {what} ({reason}); check that it is "
            "running and accepts connections"
        )

    def _prepare(self) -> None:
        with self._ready_lock:
            if self._ready:
                return
            self._probe()  # a server that is not there fails at once, before the pool tries it
            try:
                self._pool.open(wait=True, timeout=self._timeout)  # the workers idle once it returns
            except self._pool_timeout:
                self._probe()  # it went away meanwhile: named
                raise
            with self._pooled() as conn, conn.transaction():
                # CREATE TABLE IF NOT EXISTS races with itself across processes; the lock orders them.
                conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_SPACE,))
                conn.execute(self._sql["create"])
            self._ready = True

    def close(self) -> None:
        """Close the connection pool (and the turn-lock connection)."""
        self._pool.close()
        with self._lock_conn_lock:
            if self._lock_conn is not None:
                self._lock_conn.close()
                self._lock_conn = None

    # -- the repository ------------------------------------------------------------------------

    def find_conversation_ids(self) -> list[str]:
        """Every conversation id with stored messages."""
        with self._connection() as conn:
            return [row[0] for row in conn.execute(self._sql["ids"]).fetchall()]

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """The conversation's messages, oldest first ([] when unknown)."""
        check_conversation_id(conversation_id)
        with self._connection() as conn:
            rows = conn.execute(self._sql["select"], (conversation_id,)).fetchall()
        return [decode(conversation_id, i, raw) for i, (_, raw) in enumerate(rows)]

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace the conversation's messages in one transaction (an empty list deletes it)."""
        check_conversation_id(conversation_id)
        encoded = [encode(conversation_id, m) for m in check_messages(conversation_id, messages)]
        with self._transaction() as conn:
            self._lock(conn, conversation_id)
            conn.execute(self._sql["delete_all"], (conversation_id,))
            if encoded:
                conn.execute(self._sql["insert"], (conversation_id, list(range(len(encoded))), encoded))

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Forget the conversation."""
        check_conversation_id(conversation_id)
        with self._transaction() as conn:
            self._lock(conn, conversation_id)
            conn.execute(self._sql["delete_all"], (conversation_id,))

    def update(self, conversation_id: str, change: ConversationChange) -> list[Message]:
        """Apply ``change`` in one transaction under the conversation's lock; writes only changed rows."""
        check_conversation_id(conversation_id)
        with self._transaction() as conn:
            self._lock(conn, conversation_id)
            rows = conn.execute(self._sql["select"], (conversation_id,)).fetchall()
            old = [(seq, decode(conversation_id, i, raw)) for i, (seq, raw) in enumerate(rows)]
            new = check_messages(conversation_id, change([m for _, m in old]))
            deletes, inserts = plan_rows(old, new)
            encoded = [encode(conversation_id, m) for _, m in inserts]
            if deletes:
                conn.execute(self._sql["delete_many"], (conversation_id, deletes))
            if inserts:
                conn.execute(self._sql["insert"], (conversation_id, [seq for seq, _ in inserts], encoded))
        return new

    # -- stored entries (see advisorchain.memory.entries) --------------------------------------

    def find_entries(self, conversation_id: str) -> list[StoredEntry]:
        """Every stored entry of the conversation, readable or not, oldest first."""
        check_conversation_id(conversation_id)
        with self._connection() as conn:
            rows = conn.execute(self._sql["select"], (conversation_id,)).fetchall()
        return entries_from_raw(conversation_id, [raw for _, raw in rows])

    def delete_unreadable(self, conversation_id: str) -> list[StoredEntry]:
        """Delete the unreadable entries in one transaction under the conversation's lock."""
        check_conversation_id(conversation_id)
        with self._transaction() as conn:
            self._lock(conn, conversation_id)
            rows = conn.execute(self._sql["select"], (conversation_id,)).fetchall()
            entries = entries_from_raw(conversation_id, [raw for _, raw in rows])
            dropped = [(seq, e) for (seq, _), e in zip(rows, entries, strict=True) if not e.readable]
            if dropped:
                conn.execute(self._sql["delete_many"], (conversation_id, [seq for seq, _ in dropped]))
        return [e for _, e in dropped]

    # -- turn locks (see advisorchain.memory.locks) --------------------------------------------

    def try_lock(self, conversation_id: str, owner: str) -> bool:
        """Take the conversation's turn lock unless another session holds it (never waits)."""
        return bool(
            self._on_lock_connection("SELECT pg_try_advisory_lock(%s, hashtext(%s))", conversation_id)
        )

    def renew_lock(self, conversation_id: str, owner: str) -> bool:
        """Session locks need no renewal: they last as long as the lock connection."""
        return True

    def unlock(self, conversation_id: str, owner: str) -> None:
        """Release the conversation's turn lock."""
        self._on_lock_connection("SELECT pg_advisory_unlock(%s, hashtext(%s))", conversation_id)

    def _on_lock_connection(self, statement: str, conversation_id: str) -> Any:
        check_conversation_id(conversation_id)
        with self._lock_conn_lock:
            if self._lock_conn is None or self._lock_conn.closed or self._lock_conn.broken:
                try:
                    self._lock_conn = self._connect(
                        self._dsn, autocommit=True, connect_timeout=_connect_timeout(self._timeout)
                    )
                except self._psycopg.OperationalError as exc:
                    raise self._unreachable(exc, "could not be reached") from exc
            try:
                row = self._lock_conn.execute(statement, (_TURN_SPACE, conversation_id)).fetchone()
            except self._psycopg.OperationalError as exc:
                if self._lock_conn.broken or self._lock_conn.closed:
                    raise self._unreachable(exc, "dropped the connection") from exc
                raise
            return row[0]

    def _lock(self, conn: Any, conversation_id: str) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_SPACE, conversation_id))


def _server_of(psycopg: Any, dsn: str) -> str:
    """``host:port`` of a DSN (a URL or ``key=value`` pairs), never its password."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "an unparsable DSN"
    host = str(info.get("host") or info.get("hostaddr") or "localhost").split(",")[0]
    port = str(info.get("port") or "5432").split(",")[0]
    return f"{host}:{port}"


def _connect_timeout(timeout: float) -> int:
    """libpq's ``connect_timeout`` (whole seconds, at least 2) for a direct connection."""
    return max(2, min(int(timeout), 10))


def _statements(sql: Any, table_name: str) -> dict[str, Any]:
    table = sql.Identifier(table_name)
    return {
        "create": sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (conversation_id TEXT NOT NULL, seq BIGINT NOT NULL, "
            "message TEXT NOT NULL, PRIMARY KEY (conversation_id, seq))"
        ).format(table),
        "select": sql.SQL("SELECT seq, message FROM {} WHERE conversation_id = %s ORDER BY seq").format(
            table
        ),
        # One statement for any number of rows: a round trip per write, not per message.
        "insert": sql.SQL(
            "INSERT INTO {} (conversation_id, seq, message) "
            "SELECT %s, unnest(%s::bigint[]), unnest(%s::text[])"
        ).format(table),
        "delete_many": sql.SQL(
            "DELETE FROM {} WHERE conversation_id = %s AND seq = ANY(%s::bigint[])"
        ).format(table),
        "delete_all": sql.SQL("DELETE FROM {} WHERE conversation_id = %s").format(table),
        "ids": sql.SQL("SELECT DISTINCT conversation_id FROM {} ORDER BY conversation_id").format(table),
    }


# Turn locks live in a key space of their own: a turn holds its conversation's turn lock while its
# writes take the per-write lock above on other connections.
_TURN_SPACE = 0x41435455
