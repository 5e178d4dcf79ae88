"""``SQLiteChatMemoryRepository``: the embedded default store, one row per message in a WAL database."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ..messages import Message
from ._store import BlockingRepository, check_conversation_id, check_messages, decode, encode, plan_rows
from .api import ConversationChange
from .entries import StoredEntry, entries_from_raw
from .locks import owner_is_gone

__all__ = ["SQLiteChatMemoryRepository"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MEMORY = ":memory:"


def check_table_name(table_name: str) -> str:
    """``table_name`` when it is a plain SQL identifier; otherwise a ValueError naming it."""
    if not isinstance(table_name, str) or not _IDENTIFIER.match(table_name):
        raise ValueError(
            f"table_name must be a plain SQL identifier (letters, digits, _), got {table_name!r}"
        )
    return table_name


class SQLiteChatMemoryRepository(BlockingRepository):
    """Conversations in an SQLite file: one row per message, in WAL mode.

    Safe from many threads (one connection per thread) and many asyncio tasks (the ``a``-methods
    run in worker threads), and from several processes: ``update`` runs in a ``BEGIN IMMEDIATE``
    transaction, so concurrent appends are serialised and none is lost. Every write is one
    transaction: a process killed mid-write loses at most that write, never earlier messages.
    ``path=":memory:"`` keeps one private in-memory database (shared by the threads of this object).

    Turns on one conversation are ordered across processes by a lock row (table
    ``<table_name>_turns``) with a lease of ``lock_lease`` seconds, renewed while the turn runs; the
    lock of a process that died is taken over at once on the same host, else when its lease ends.

    >>> repository = SQLiteChatMemoryRepository("chat.db")
    >>> memory = MessageWindowChatMemory(repository)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table_name: str = "chat_memory",
        timeout: float = 30.0,
        lock_lease: float = 30.0,
    ) -> None:
        self.path = os.fspath(path)
        self.table_name = check_table_name(table_name)
        self.timeout = timeout
        self.lock_lease: float | None = check_lease(lock_lease)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        t = self.table_name
        self._select = f"SELECT seq, message FROM {t} WHERE conversation_id = ? ORDER BY seq"
        self._insert = f"INSERT INTO {t} (conversation_id, seq, message) VALUES (?, ?, ?)"
        self._delete_one = f"DELETE FROM {t} WHERE conversation_id = ? AND seq = ?"
        self._delete_all = f"DELETE FROM {t} WHERE conversation_id = ?"
        self._ids = f"SELECT DISTINCT conversation_id FROM {t} ORDER BY conversation_id"
        self._lock_read = f"SELECT owner, expires FROM {t}_turns WHERE conversation_id = ?"
        self._lock_take = (
            f"INSERT OR REPLACE INTO {t}_turns (conversation_id, owner, expires) VALUES (?, ?, ?)"
        )
        self._lock_renew = f"UPDATE {t}_turns SET expires = ? WHERE conversation_id = ? AND owner = ?"
        self._lock_drop = f"DELETE FROM {t}_turns WHERE conversation_id = ? AND owner = ?"
        with self._connection():
            pass  # create the schema now, so a bad path fails here and not at first use

    # -- connections ---------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL loses nothing when a process dies; only an OS crash can undo the
            # last commits.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table_name} (conversation_id TEXT NOT NULL, "
                "seq INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (conversation_id, seq)) "
                "WITHOUT ROWID"
            )
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table_name}_turns (conversation_id TEXT PRIMARY KEY, "
                "owner TEXT NOT NULL, expires REAL NOT NULL) WITHOUT ROWID"
            )
        except BaseException:
            conn.close()
            raise
        with self._lock:
            self._connections.append(conn)
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise RuntimeError(f"SQLiteChatMemoryRepository({self.path!r}) is closed")
        if self.path == _MEMORY:
            with self._shared_lock:
                if self._shared is None:
                    self._shared = self._open()
                yield self._shared
            return
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._open()
        yield conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction holding SQLite's write lock from its first statement."""
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close every connection this repository opened."""
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()

    # -- the repository ------------------------------------------------------------------------

    def find_conversation_ids(self) -> list[str]:
        """Every conversation id with stored messages."""
        with self._connection() as conn:
            return [row[0] for row in conn.execute(self._ids)]

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """The conversation's messages, oldest first ([] when unknown)."""
        check_conversation_id(conversation_id)
        with self._connection() as conn:
            rows = conn.execute(self._select, (conversation_id,)).fetchall()
        return [decode(conversation_id, i, raw) for i, (_, raw) in enumerate(rows)]

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace the conversation's messages in one transaction (an empty list deletes it)."""
        check_conversation_id(conversation_id)
        encoded = [encode(conversation_id, m) for m in check_messages(conversation_id, messages)]
        with self._transaction() as conn:
            conn.execute(self._delete_all, (conversation_id,))
            conn.executemany(self._insert, [(conversation_id, i, text) for i, text in enumerate(encoded)])

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Forget the conversation."""
        check_conversation_id(conversation_id)
        with self._transaction() as conn:
            conn.execute(self._delete_all, (conversation_id,))

    def update(self, conversation_id: str, change: ConversationChange) -> list[Message]:
        """Apply ``change`` in one write transaction; writes only the rows that changed."""
        check_conversation_id(conversation_id)
        with self._transaction() as conn:
            rows = conn.execute(self._select, (conversation_id,)).fetchall()
            old = [(seq, decode(conversation_id, i, raw)) for i, (seq, raw) in enumerate(rows)]
            new = check_messages(conversation_id, change([m for _, m in old]))
            deletes, inserts = plan_rows(old, new)
            encoded = [(conversation_id, seq, encode(conversation_id, m)) for seq, m in inserts]
            if deletes:
                conn.executemany(self._delete_one, [(conversation_id, seq) for seq in deletes])
            if encoded:
                conn.executemany(self._insert, encoded)
        return new

    # -- stored entries (see advisorchain.memory.entries) --------------------------------------

    def find_entries(self, conversation_id: str) -> list[StoredEntry]:
        """Every stored entry of the conversation, readable or not, oldest first."""
        check_conversation_id(conversation_id)
        with self._connection() as conn:
            rows = conn.execute(self._select, (conversation_id,)).fetchall()
        return entries_from_raw(conversation_id, [raw for _, raw in rows])

    def delete_unreadable(self, conversation_id: str) -> list[StoredEntry]:
        """Delete the unreadable entries in one write transaction; returns those dropped."""
        check_conversation_id(conversation_id)
        with self._transaction() as conn:
            rows = conn.execute(self._select, (conversation_id,)).fetchall()
            entries = entries_from_raw(conversation_id, [raw for _, raw in rows])
            dropped = [(seq, e) for (seq, _), e in zip(rows, entries, strict=True) if not e.readable]
            conn.executemany(self._delete_one, [(conversation_id, seq) for seq, _ in dropped])
        return [e for _, e in dropped]

    # -- turn locks (see advisorchain.memory.locks) --------------------------------------------

    def try_lock(self, conversation_id: str, owner: str) -> bool:
        """Take the conversation's turn lock for ``owner`` unless a live turn holds it."""
        check_conversation_id(conversation_id)
        with self._transaction() as conn:
            row = conn.execute(self._lock_read, (conversation_id,)).fetchone()
            now = time.time()
            if row is not None and row[1] > now and not owner_is_gone(row[0]):
                return False
            conn.execute(self._lock_take, (conversation_id, owner, now + (self.lock_lease or 0.0)))
            return True

    def renew_lock(self, conversation_id: str, owner: str) -> bool:
        """Extend ``owner``'s lease; False when the lock is no longer its own."""
        with self._transaction() as conn:
            expires = time.time() + (self.lock_lease or 0.0)
            return conn.execute(self._lock_renew, (expires, conversation_id, owner)).rowcount == 1

    def unlock(self, conversation_id: str, owner: str) -> None:
        """Release ``owner``'s turn lock (nothing happens when it is no longer its own)."""
        with self._transaction() as conn:
            conn.execute(self._lock_drop, (conversation_id, owner))


def check_lease(lease: float) -> float:
    """``lease`` when it is a positive number of seconds; otherwise a ValueError naming it."""
    if isinstance(lease, bool) or not isinstance(lease, int | float) or not lease > 0:
        raise ValueError(f"lock_lease must be a positive number of seconds, got {lease!r}")
    return float(lease)
