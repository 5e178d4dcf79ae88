"""``RedisChatMemoryRepository``: one Redis list per conversation, replaced atomically.

redis-py is imported when a repository is built, so ``import advisorchain`` works without it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from .._checks import check_seconds
from ..messages import Message
from ._store import BlockingRepository, check_conversation_id, check_messages, decode_all, encode
from .api import ConversationChange
from .entries import StoredEntry, entries_from_raw
from .sqlite import check_lease

__all__ = ["RedisChatMemoryRepository"]

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def _driver() -> Any:
    try:
        import redis
    except ImportError as e:
        raise ImportError(
            "RedisChatMemoryRepository needs redis-py: pip install 'advisorchain[redis]'"
        ) from e
    return redis


def _ttl_ms(ttl: float | timedelta | None) -> int | None:
    if ttl is None:
        return None
    return max(1, round(check_seconds(ttl, "ttl") * 1000))


class RedisChatMemoryRepository(BlockingRepository):
    """Conversations in Redis: the key ``key_prefix + conversation_id`` holds a list of messages.

    Every write replaces the list in one MULTI/EXEC transaction; ``update`` WATCHes the key and
    retries when another client changed it in between, so concurrent appends from any number of
    threads or processes are all kept. ``ttl`` (seconds or a timedelta) makes a conversation expire
    that long after its last write. The ``a``-methods run in worker threads.

    Turns on one conversation are ordered across processes by a token key
    (``"advisorchain-turn:" + key_prefix + conversation_id``) set with NX and an expiry of
    ``lock_lease`` seconds, renewed while the turn runs and deleted only by its owner.

    >>> repository = RedisChatMemoryRepository("redis://localhost:6379/0", ttl=timedelta(days=7))
    >>> memory = MessageWindowChatMemory(repository)
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        key_prefix: str = "advisorchain:chat_memory:",
        ttl: float | timedelta | None = None,
        client: Any = None,
        lock_lease: float = 30.0,
    ) -> None:
        redis = _driver()
        self.key_prefix = key_prefix
        self.ttl_ms = _ttl_ms(ttl)
        self.lock_lease: float | None = check_lease(lock_lease)
        self._lock_prefix = _LOCK_NAMESPACE + key_prefix
        self._watch_error: type[Exception] = redis.WatchError
        self._client: Any = client if client is not None else redis.Redis.from_url(url)

    def _key(self, conversation_id: str) -> str:
        return self.key_prefix + check_conversation_id(conversation_id)

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()

    def find_conversation_ids(self) -> list[str]:
        """Every conversation id with stored messages (a SCAN over the prefix)."""
        pattern = _GLOB_SPECIAL.sub(r"\\\1", self.key_prefix) + "*"
        prefix = self.key_prefix.encode()
        locks = self._lock_prefix.encode()
        # A client made with decode_responses=True yields str keys, the default bytes.
        keys = (
            k if isinstance(k, bytes) else k.encode()
            for k in self._client.scan_iter(match=pattern, count=500)
        )
        ids = {key[len(prefix) :].decode() for key in keys if not key.startswith(locks)}
        return sorted(ids)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """The conversation's messages, oldest first ([] when unknown)."""
        return decode_all(conversation_id, self._client.lrange(self._key(conversation_id), 0, -1))

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace the conversation's messages atomically (an empty list deletes it)."""
        key = self._key(conversation_id)
        encoded = [encode(conversation_id, m) for m in check_messages(conversation_id, messages)]
        with self._client.pipeline(transaction=True) as pipe:
            self._queue_replace(pipe, key, encoded)
            pipe.execute()

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Forget the conversation."""
        self._client.delete(self._key(conversation_id))

    def update(self, conversation_id: str, change: ConversationChange) -> list[Message]:
        """Apply ``change`` optimistically: WATCH, read, replace in MULTI/EXEC, retry on conflict."""
        key = self._key(conversation_id)
        with self._client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(key)
                    old = decode_all(conversation_id, pipe.lrange(key, 0, -1))
                    new = check_messages(conversation_id, change(old))
                    encoded = [encode(conversation_id, m) for m in new]
                    pipe.multi()
                    self._queue_replace(pipe, key, encoded)
                    pipe.execute()
                    return new
                except self._watch_error:
                    continue

    def find_entries(self, conversation_id: str) -> list[StoredEntry]:
        """Every stored entry of the conversation, readable or not, oldest first."""
        return entries_from_raw(conversation_id, self._client.lrange(self._key(conversation_id), 0, -1))

    def delete_unreadable(self, conversation_id: str) -> list[StoredEntry]:
        """Drop the unreadable entries optimistically (WATCH, read, replace with the readable ones
        exactly as stored, retry on conflict); returns those dropped."""
        key = self._key(conversation_id)
        with self._client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(key)
                    raws = pipe.lrange(key, 0, -1)
                    entries = entries_from_raw(conversation_id, raws)
                    dropped = [e for e in entries if not e.readable]
                    if not dropped:
                        pipe.unwatch()
                        return []
                    pipe.multi()
                    self._queue_replace(
                        pipe, key, [r for r, e in zip(raws, entries, strict=True) if e.readable]
                    )
                    pipe.execute()
                    return dropped
                except self._watch_error:
                    continue

    def _queue_replace(self, pipe: Any, key: str, encoded: Sequence[str | bytes]) -> None:
        pipe.delete(key)
        if encoded:
            pipe.rpush(key, *encoded)
            if self.ttl_ms is not None:
                pipe.pexpire(key, self.ttl_ms)

    # -- turn locks (see advisorchain.memory.locks) --------------------------------------------

    def try_lock(self, conversation_id: str, owner: str) -> bool:
        """Take the conversation's turn lock for ``owner`` unless another owner's key is alive."""
        key = self._lock_prefix + check_conversation_id(conversation_id)
        return bool(self._client.set(key, owner, nx=True, px=self._lease_ms()))

    def renew_lock(self, conversation_id: str, owner: str) -> bool:
        """Extend ``owner``'s lease; False when the key is no longer its own."""
        key = self._lock_prefix + check_conversation_id(conversation_id)
        return bool(self._client.eval(_RENEW, 1, key, owner, self._lease_ms()))

    def unlock(self, conversation_id: str, owner: str) -> None:
        """Delete the lock key if ``owner`` still holds it."""
        self._client.eval(_UNLOCK, 1, self._lock_prefix + check_conversation_id(conversation_id), owner)

    def _lease_ms(self) -> int:
        return max(1, round((self.lock_lease or 0.0) * 1000))


_LOCK_NAMESPACE = "advisorchain-turn:"
# Compare-and-act, so an owner whose lease ran out never extends or deletes another owner's lock.
_RENEW = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end "
    "return 0"
)
_UNLOCK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
