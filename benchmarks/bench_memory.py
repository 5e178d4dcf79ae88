"""Chat-memory throughput per backend, against a floor of the raw driver doing the same work.

    .venv/bin/python benchmarks/bench_memory.py

"append" is ``MessageWindowChatMemory(repository, max_messages=20).add`` on a full window (so every
other append also trims), alternating user and assistant messages. Its floor runs the same
transaction with the raw driver (lock, read the rows, delete the trimmed ones, insert the new one)
on pre-encoded JSON. "load" is ``find_by_conversation_id`` of a 20-message conversation; its floor
fetches the same rows. The "+ codec" floor also decodes what it reads and encodes what it writes
(``json`` + ``message_from_dict``/``message_to_dict``), which any caller must do: the gap between it
and us is the library's own overhead. Ratios are time per operation over the floor's (1.00x = none).
Each figure is the best of three interleaved rounds, to damp the noise of a shared machine.
PostgreSQL and Redis are measured when ADVISORCHAIN_TEST_POSTGRES_DSN / ADVISORCHAIN_TEST_REDIS_URL
are set (``eval "$(scripts/services.sh start)"``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from advisorchain.memory.in_memory import InMemoryChatMemoryRepository
from advisorchain.memory.postgres import PostgresChatMemoryRepository
from advisorchain.memory.redis import RedisChatMemoryRepository
from advisorchain.memory.sqlite import SQLiteChatMemoryRepository
from advisorchain.memory.window import MessageWindowChatMemory
from advisorchain.messages import AssistantMessage, Message, UserMessage, message_from_dict, message_to_dict

WINDOW = 20
ROUNDS = 3
TEXT = "What is the weather like in Paris today, and should I take an umbrella? " * 3

Bench = Callable[[int], None]  # one operation, given a fresh increasing index


def _message(i: int) -> Message:
    return UserMessage(f"{i} {TEXT}") if i % 2 == 0 else AssistantMessage(f"{i} {TEXT}")


def _encoded(i: int) -> str:
    return json.dumps(message_to_dict(_message(i)), separators=(",", ":"))


class _Counter:
    """Hands out increasing operation indices across rounds (so inserted seqs never collide)."""

    def __init__(self, start: int) -> None:
        self.next = start

    def take(self, n: int) -> range:
        r = range(self.next, self.next + n)
        self.next += n
        return r


def _rate(run: Bench, indices: range) -> float:
    start = time.perf_counter()
    for i in indices:
        run(i)
    return len(indices) / (time.perf_counter() - start)


def _best(benches: list[tuple[Bench, _Counter]], n: int) -> list[float]:
    """Best ops/s of each bench over ROUNDS interleaved rounds (after one warm-up round)."""
    best = [0.0] * len(benches)
    for round_no in range(ROUNDS + 1):
        for k, (run, counter) in enumerate(benches):
            rate = _rate(run, counter.take(n if round_no else 20))
            if round_no:
                best[k] = max(best[k], rate)
    return best


def _decode(rows: list[Any], codec: bool) -> None:
    if codec:
        for row in rows:
            message_from_dict(json.loads(row[1] if isinstance(row, tuple) else row))


def _payload(i: int, codec: bool, texts: dict[int, str]) -> str:
    if codec:
        return _encoded(i)
    if i not in texts:
        texts[i] = _encoded(i)  # pre-encoded outside the timed path below
    return texts[i]


def _trim_plan(seqs: deque[int], i: int) -> list[int]:
    """The seqs the window drops when message ``i`` is appended (it mirrors the window: on a full
    window a user message drops the oldest exchange, an assistant message then fits)."""
    if len(seqs) < WINDOW:
        return []
    return [seqs.popleft(), seqs.popleft()] if i % 2 == 0 else [seqs.popleft()]


def _prefill(append: Bench, counter: _Counter) -> None:
    for i in counter.take(WINDOW):
        append(i)


# -- ours ------------------------------------------------------------------------------------------


def _ours(repository: Any) -> tuple[Bench, Bench, _Counter]:
    memory = MessageWindowChatMemory(repository, max_messages=WINDOW)
    cid = f"bench-{uuid.uuid4().hex[:8]}"
    counter = _Counter(0)
    _prefill(lambda i: memory.add(cid, [_message(i)]), counter)
    return (
        (lambda i: memory.add(cid, [_message(i)])),
        (lambda i: repository.find_by_conversation_id(cid)),
        counter,
    )


# -- raw-driver floors -----------------------------------------------------------------------------


def _sqlite_floor(path: str, codec: bool) -> tuple[Bench, Bench, _Counter, Callable[[], None]]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE raw (cid TEXT, seq INTEGER, message TEXT, PRIMARY KEY (cid, seq)) WITHOUT ROWID"
    )
    seqs: deque[int] = deque()
    texts: dict[int, str] = {}
    select = "SELECT seq, message FROM raw WHERE cid = ? ORDER BY seq"

    def append(i: int) -> None:
        payload = _payload(i, codec, texts)
        conn.execute("BEGIN IMMEDIATE")
        _decode(conn.execute(select, ("c",)).fetchall(), codec)
        for seq in _trim_plan(seqs, i):
            conn.execute("DELETE FROM raw WHERE cid = ? AND seq = ?", ("c", seq))
        conn.execute("INSERT INTO raw VALUES (?, ?, ?)", ("c", i, payload))
        seqs.append(i)
        conn.execute("COMMIT")

    counter = _Counter(0)
    _prefill(append, counter)
    return append, (lambda i: _decode(conn.execute(select, ("c",)).fetchall(), codec)), counter, conn.close


def _postgres_floor(dsn: str, table: str, codec: bool) -> tuple[Bench, Bench, _Counter, Callable[[], None]]:
    import psycopg

    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(f"CREATE TABLE {table} (cid TEXT, seq BIGINT, message TEXT, PRIMARY KEY (cid, seq))")
    seqs: deque[int] = deque()
    texts: dict[int, str] = {}
    select = f"SELECT seq, message FROM {table} WHERE cid = %s ORDER BY seq"

    def append(i: int) -> None:
        payload = _payload(i, codec, texts)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(1, hashtext(%s))", ("c",))
            _decode(conn.execute(select, ("c",)).fetchall(), codec)
            conn.execute(f"DELETE FROM {table} WHERE cid = %s AND seq = ANY(%s)", ("c", _trim_plan(seqs, i)))
            conn.execute(f"INSERT INTO {table} VALUES (%s, %s, %s)", ("c", i, payload))
            seqs.append(i)

    def close() -> None:
        conn.execute(f"DROP TABLE {table}")
        conn.close()

    counter = _Counter(0)
    _prefill(append, counter)
    return append, (lambda i: _decode(conn.execute(select, ("c",)).fetchall(), codec)), counter, close


def _redis_floor(url: str, key: str, codec: bool) -> tuple[Bench, Bench, _Counter, Callable[[], None]]:
    import redis

    client = redis.Redis.from_url(url)
    window: deque[str] = deque()
    seqs: deque[int] = deque()
    texts: dict[int, str] = {}

    def append(i: int) -> None:
        payload = _payload(i, codec, texts)
        with client.pipeline(transaction=True) as pipe:
            pipe.watch(key)
            _decode(pipe.lrange(key, 0, -1), codec)
            for _ in _trim_plan(seqs, i):
                window.popleft()
            window.append(payload)
            seqs.append(i)
            pipe.multi()
            pipe.delete(key)
            pipe.rpush(key, *window)
            pipe.execute()

    def close() -> None:
        client.delete(key)
        client.close()

    counter = _Counter(0)
    _prefill(append, counter)
    return append, (lambda i: _decode(client.lrange(key, 0, -1), codec)), counter, close


def _in_memory_floor(codec: bool) -> tuple[Bench, Bench, _Counter, Callable[[], None]]:
    lock = threading.Lock()
    store: dict[str, list[Message]] = {"c": [_message(i) for i in range(WINDOW)]}

    def append(i: int) -> None:
        message = _message(i)
        with lock:
            store["c"] = [*store["c"][-(WINDOW - 1) :], message]

    def load(i: int) -> None:
        with lock:
            list(store["c"])

    return append, load, _Counter(0), lambda: None


# -- the table -------------------------------------------------------------------------------------

Floor = Callable[[bool], tuple[Bench, Bench, _Counter, Callable[[], None]]]


def _compare(name: str, repository: Any, floor: Floor, n_append: int, n_load: int, codec: bool) -> list[str]:
    append, load, counter = _ours(repository)
    raw_append, raw_load, raw_counter, raw_close = floor(False)
    benches_append = [(append, counter), (raw_append, raw_counter)]
    benches_load = [(load, counter), (raw_load, raw_counter)]
    if codec:
        codec_append, codec_load, codec_counter, codec_close = floor(True)
        benches_append.append((codec_append, codec_counter))
        benches_load.append((codec_load, codec_counter))
    try:
        rows = []
        for op, benches, n in (("append", benches_append, n_append), ("load", benches_load, n_load)):
            rates = _best(benches, n)
            with_codec = f"{rates[2]:,.0f} | {rates[2] / rates[0]:.2f}x" if codec else "— | —"
            raw = f"{rates[1]:,.0f} | {rates[1] / rates[0]:.2f}x"
            rows.append(f"| {name} | {op} | {rates[0]:,.0f} | {raw} | {with_codec} |")
        return rows
    finally:
        raw_close()
        if codec:
            codec_close()
        close = getattr(repository, "close", None)
        if close is not None:
            close()


def _measure(tmp: str) -> tuple[list[str], list[str]]:
    rows = _compare(
        "in-memory", InMemoryChatMemoryRepository(), _in_memory_floor, 10_000, 30_000, codec=False
    )
    rows += _compare(
        "SQLite (WAL)",
        SQLiteChatMemoryRepository(os.path.join(tmp, "ours.db")),
        lambda codec: _sqlite_floor(os.path.join(tmp, f"raw-{codec}.db"), codec),
        1_000,
        3_000,
        codec=True,
    )
    notes = []
    dsn = os.environ.get("ADVISORCHAIN_TEST_POSTGRES_DSN")
    if dsn:
        table = f"bench_{uuid.uuid4().hex[:8]}"
        repository = PostgresChatMemoryRepository(dsn, table_name=table)
        floor: Floor = lambda codec: _postgres_floor(dsn, f"{table}_raw_{int(codec)}", codec)  # noqa: E731
        rows += _compare("PostgreSQL", repository, floor, 300, 1_000, codec=True)
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    else:
        notes.append("PostgreSQL skipped: ADVISORCHAIN_TEST_POSTGRES_DSN is not set.")
    url = os.environ.get("ADVISORCHAIN_TEST_REDIS_URL")
    if url:
        prefix = f"bench:{uuid.uuid4().hex[:8]}:"
        repository = RedisChatMemoryRepository(url, key_prefix=prefix)
        for_cleanup = RedisChatMemoryRepository(url, key_prefix=prefix)
        floor = lambda codec: _redis_floor(url, f"{prefix}raw{int(codec)}", codec)  # noqa: E731
        rows += _compare("Redis", repository, floor, 500, 2_000, codec=True)
        for cid in for_cleanup.find_conversation_ids():
            for_cleanup.delete_by_conversation_id(cid)
        for_cleanup.close()
    else:
        notes.append("Redis skipped: ADVISORCHAIN_TEST_REDIS_URL is not set.")
    return rows, notes


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows, notes = _measure(tmp)
    print(f"Chat memory throughput (window of {WINDOW} messages, Python {sys.version.split()[0]})\n")
    print(
        "| backend | operation | advisorchain ops/s | raw driver ops/s | ratio | raw + codec ops/s | ratio |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row)
    for note in notes:
        print(f"\n{note}")


if __name__ == "__main__":
    main()
