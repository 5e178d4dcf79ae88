"""Turn locks: one turn at a time per conversation, within a process and across processes.

A conversation's turn lock has two layers. The *local* layer orders the tasks of this process,
whatever thread or event loop they run on (a sync call beside an ``acall()``, a sub-agent on the
sync bridge). The *shared* layer, offered by a repository through ``try_lock``/``renew_lock``/
``unlock``, orders processes: a lock row with a lease (SQLite), a session advisory lock
(PostgreSQL), a token key with expiry (Redis). A lock is re-entrant along one flow of control: a
sub-agent that a tool of the running turn starts on the same conversation does not wait for its
own caller.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import socket
import threading
import uuid
from collections import deque
from collections.abc import AsyncIterator, Hashable
from collections.abc import Set as AbstractSet
from contextlib import asynccontextmanager
from typing import Any, Protocol, runtime_checkable

__all__ = ["SharedLocks", "conversation_lock", "is_process_alive", "new_owner_token", "owner_is_gone"]

_HOST = socket.gethostname()
_log = logging.getLogger("advisorchain.memory")


@runtime_checkable
class SharedLocks(Protocol):
    """What a repository offers to lock a conversation across processes (blocking methods).

    ``lock_lease`` is how long a lock lives without renewal (seconds), or None when it lives as long
    as the process that holds it (it is released when the process dies).
    """

    lock_lease: float | None

    def try_lock(self, conversation_id: str, owner: str) -> bool: ...

    def renew_lock(self, conversation_id: str, owner: str) -> bool: ...

    def unlock(self, conversation_id: str, owner: str) -> None: ...


def new_owner_token() -> str:
    """A lock owner token naming this host and process (so a dead owner can be recognised), unique
    across processes (a random part drawn once per process) and within one (a counter)."""
    pid = os.getpid()
    global _TOKEN_PID, _TOKEN_PREFIX
    if pid != _TOKEN_PID:  # drawn again in a forked child
        _TOKEN_PID, _TOKEN_PREFIX = pid, uuid.uuid4().hex[:16]
    return f"{_HOST}:{pid}:{_TOKEN_PREFIX}.{next(_TOKEN_COUNT)}"


_TOKEN_PID = -1
_TOKEN_PREFIX = ""
_TOKEN_COUNT = itertools.count()


def is_process_alive(pid: int) -> bool:
    """True when a process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_is_gone(owner: str) -> bool:
    """True when ``owner`` (a ``new_owner_token``) names a process of this host that has died."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    return host == _HOST and pid_text.isdigit() and not is_process_alive(int(pid_text))


class _LocalLocks:
    """Exclusive locks by key for tasks on any thread and event loop, granted first come first served."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._waiters: dict[Hashable, deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}

    async def acquire(self, key: Hashable) -> None:
        with self._mutex:
            waiters = self._waiters.get(key)
            if waiters is None:
                self._waiters[key] = deque()
                return
            loop = asyncio.get_running_loop()
            entry = (loop, loop.create_future())
            waiters.append(entry)
        try:
            await entry[1]
        except BaseException:
            with self._mutex:
                if entry in waiters:  # never granted: just leave the queue
                    waiters.remove(entry)
                    raise
            if entry[1].done() and not entry[1].cancelled():
                self.release(key)  # granted, then cancelled before resuming: pass it on
            raise  # (a cancelled future is passed on by _grant)

    def release(self, key: Hashable) -> None:
        while True:
            with self._mutex:
                waiters = self._waiters[key]
                if not waiters:
                    del self._waiters[key]
                    return
                loop, future = waiters.popleft()  # ownership moves to this waiter now
            try:
                loop.call_soon_threadsafe(self._grant, key, future)
                return
            except RuntimeError:  # its loop is closed: the waiter is gone, try the next
                continue

    def _grant(self, key: Hashable, future: asyncio.Future[None]) -> None:
        if future.cancelled():
            self.release(key)
        else:
            future.set_result(None)


_LOCAL = _LocalLocks()
_POLL_FIRST, _POLL_MAX = 0.002, 0.05


def _shared_of(memory: Any) -> SharedLocks | None:
    repository = getattr(memory, "repository", None)
    return repository if isinstance(repository, SharedLocks) else None


def lock_key(memory: Any, conversation_id: str) -> tuple[int, str]:
    """The key two requests share when they touch the same stored conversation."""
    store = getattr(memory, "repository", None) or memory
    return (id(store), conversation_id)


@asynccontextmanager
async def conversation_lock(
    memory: Any, conversation_id: str, held: AbstractSet[Hashable] = frozenset()
) -> AsyncIterator[None]:
    """Hold the turn lock of ``conversation_id`` in ``memory``'s store for the body's duration.

    Waits (without blocking the event loop) while another turn holds it; cancellation or an error
    in the body releases it. ``held``: the keys (``lock_key``) the turns around this one hold — a
    request made by a tool of a turn that holds the lock (a sub-agent on the same conversation)
    goes on inside that turn instead of waiting for it forever.
    """
    key = lock_key(memory, conversation_id)
    if key in held:
        yield
        return
    await _LOCAL.acquire(key)
    try:
        shared = _shared_of(memory)
        if shared is None:
            yield
        else:
            async with _shared_lock(shared, conversation_id):
                yield
    finally:
        _LOCAL.release(key)


@asynccontextmanager
async def _shared_lock(shared: SharedLocks, conversation_id: str) -> AsyncIterator[None]:
    owner = new_owner_token()
    await _acquire_shared(shared, conversation_id, owner)
    renewal = None
    if shared.lock_lease is not None:
        renewal = asyncio.get_running_loop().create_task(_renew(shared, conversation_id, owner))
    try:
        yield
    finally:
        if renewal is not None:
            renewal.cancel()
        await asyncio.to_thread(shared.unlock, conversation_id, owner)


async def _acquire_shared(shared: SharedLocks, conversation_id: str, owner: str) -> None:
    delay = _POLL_FIRST
    while True:
        attempt = asyncio.ensure_future(asyncio.to_thread(shared.try_lock, conversation_id, owner))
        try:
            acquired = await asyncio.shield(attempt)
        except asyncio.CancelledError:
            attempt.add_done_callback(lambda done: _undo(shared, conversation_id, owner, done))
            raise
        if acquired:
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, _POLL_MAX)


def _undo(shared: SharedLocks, conversation_id: str, owner: str, attempt: asyncio.Future[bool]) -> None:
    """A cancelled acquisition that still succeeded gives the lock back."""
    if not attempt.cancelled() and attempt.exception() is None and attempt.result():
        threading.Thread(target=shared.unlock, args=(conversation_id, owner), daemon=True).start()


async def _renew(shared: SharedLocks, conversation_id: str, owner: str) -> None:
    lease = shared.lock_lease or 0.0
    while True:
        await asyncio.sleep(lease / 3)
        if not await asyncio.to_thread(shared.renew_lock, conversation_id, owner):
            _log.warning(
                "the turn lock of conversation %r expired before it could be renewed (lease %.1f s); "
                "another turn may run beside this one: raise lock_lease",
                conversation_id,
                lease,
            )
            return
