"""Every chat-memory repository backend, each isolated per test, for the memory tests and the
reliability tests that run on memory: in-memory, SQLite, and real PostgreSQL and Redis on loopback
(``tests.support.services``: without them those backends skip, except under CI=true, where they
fail). A conftest that wants the fixtures imports them (``make_backend``, ``backend``,
``persistent_backend``, ``repository``)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from advisorchain.memory.api import ChatMemoryRepository
from advisorchain.memory.in_memory import InMemoryChatMemoryRepository
from advisorchain.memory.postgres import PostgresChatMemoryRepository
from advisorchain.memory.redis import RedisChatMemoryRepository
from advisorchain.memory.sqlite import SQLiteChatMemoryRepository
from tests.support.services import POSTGRES_ENV, REDIS_ENV, service_url

BACKENDS = ["in_memory", "sqlite", "postgres", "redis"]
PERSISTENT_BACKENDS = ["sqlite", "postgres", "redis"]


@dataclass
class Backend:
    """One isolated store: ``open()`` makes another repository object over the same data;
    ``spec`` rebuilds one in a subprocess; ``inject`` writes a raw entry behind the repository."""

    name: str
    open: Callable[[], ChatMemoryRepository]
    spec: dict[str, Any]
    inject: Callable[[str, str], None]
    opened: list[Any] = field(default_factory=list)

    def repository(self) -> Any:
        repo = self.open()
        self.opened.append(repo)
        return repo

    def close(self) -> None:
        for repo in self.opened:
            close = getattr(repo, "close", None)
            if close is not None:
                close()


def _sqlite_backend(tmp_path: Path) -> Backend:
    path = str(tmp_path / "memory.db")

    def inject(conversation_id: str, raw: str) -> None:
        with sqlite3.connect(path) as conn:
            (seq,) = conn.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM chat_memory").fetchone()
            conn.execute("INSERT INTO chat_memory VALUES (?, ?, ?)", (conversation_id, seq, raw))
        conn.close()

    return Backend(
        "sqlite", lambda: SQLiteChatMemoryRepository(path), {"kind": "sqlite", "path": path}, inject
    )


def _postgres_backend(dsn: str, table: str) -> Backend:
    import psycopg

    def inject(conversation_id: str, raw: str) -> None:
        with psycopg.connect(dsn) as conn:
            conn.execute(
                f"INSERT INTO {table} SELECT %s, COALESCE(MAX(seq), -1) + 1, %s FROM {table}",
                (conversation_id, raw),
            )

    return Backend(
        "postgres",
        lambda: PostgresChatMemoryRepository(dsn, table_name=table, max_size=4),
        {"kind": "postgres", "dsn": dsn, "table_name": table},
        inject,
    )


def _redis_backend(url: str, prefix: str) -> Backend:
    import redis

    def inject(conversation_id: str, raw: str) -> None:
        with redis.Redis.from_url(url) as client:
            client.rpush(prefix + conversation_id, raw)

    return Backend(
        "redis",
        lambda: RedisChatMemoryRepository(url, key_prefix=prefix),
        {"kind": "redis", "url": url, "key_prefix": prefix},
        inject,
    )


def _drop_postgres_table(dsn: str, table: str) -> None:
    import psycopg

    with psycopg.connect(dsn) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def _drop_redis_keys(url: str, prefix: str) -> None:
    import redis

    with redis.Redis.from_url(url) as client:
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)


def _in_memory_backend() -> Backend:
    shared = InMemoryChatMemoryRepository()

    def inject(conversation_id: str, raw: str) -> None:
        raise NotImplementedError("the in-memory repository stores message objects, not text")

    return Backend("in_memory", lambda: shared, {"kind": "in_memory"}, inject)


@pytest.fixture
def make_backend(tmp_path: Path) -> Iterator[Callable[[str], Backend]]:
    """Builds an isolated backend by name; everything it opened is closed and dropped afterwards."""
    made: list[Backend] = []
    cleanups: list[Callable[[], None]] = []

    def make(name: str) -> Backend:
        unique = f"t{uuid.uuid4().hex[:12]}"
        if name == "in_memory":
            backend = _in_memory_backend()
        elif name == "sqlite":
            backend = _sqlite_backend(tmp_path / unique)
            (tmp_path / unique).mkdir()
        elif name == "postgres":
            dsn = service_url(POSTGRES_ENV)
            backend = _postgres_backend(dsn, f"chat_memory_{unique}")
            cleanups.append(lambda: _drop_postgres_table(dsn, f"chat_memory_{unique}"))
        elif name == "redis":
            url = service_url(REDIS_ENV)
            backend = _redis_backend(url, f"test:{unique}:")
            cleanups.append(lambda: _drop_redis_keys(url, f"test:{unique}:"))
        else:
            raise ValueError(f"unknown backend {name!r}")
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
    for cleanup in cleanups:
        cleanup()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, make_backend: Callable[[str], Backend]) -> Backend:
    """Each backend in turn."""
    return make_backend(request.param)


@pytest.fixture(params=PERSISTENT_BACKENDS)
def persistent_backend(request: pytest.FixtureRequest, make_backend: Callable[[str], Backend]) -> Backend:
    """Each backend that stores text (so a raw entry can be corrupted, or a subprocess share it)."""
    return make_backend(request.param)


@pytest.fixture
def repository(backend: Backend) -> Any:
    """A fresh, empty repository of each backend."""
    return backend.repository()
