"""One SDK client per event loop, so that a model object works from any loop.

An async SDK client (``openai.AsyncOpenAI``, ``anthropic.AsyncAnthropic``) keeps an HTTP connection
pool, and a pooled connection belongs to the loop that opened it: used from a second loop
(``asyncio.run`` twice, ``call()`` beside ``acall()``, a worker thread with its own loop) it fails
with "Event loop is closed" or "attached to a different loop". ``LoopClients`` derives one client
per running loop from the user's client with the SDK's own ``copy(http_client=...)``, so the key,
base URL, headers, organization/project, timeouts and retry policy stay exactly the user's; only
the connection pool is new (same TLS, proxy and limit settings). A derived client's connections
are closed when its loop shuts down (``asyncio.run`` / ``asyncio.Runner`` close async generators),
and the loop is weakly referenced, so a finished loop frees its client.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import threading
import weakref
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["LoopClients"]

C = TypeVar("C")


@dataclass
class _Entry(Generic[C]):
    client: C
    pools: list[Any]
    companion: Any = None
    closer: AsyncGenerator[None, None] | None = None


class LoopClients(Generic[C]):
    """The user's SDK client ``template`` made loop-local: ``await current()`` gives the client for
    the running loop. ``derive(template, http_client)`` builds a client like ``template`` over
    another HTTP client (the SDK's ``copy``). When this object is garbage collected, the clients
    it made on loops still running are closed on them."""

    def __init__(
        self, template: C, derive: Callable[[C, Any], C], companion: Callable[[C], Any] | None = None
    ) -> None:
        self.template = template
        self._derive = derive
        self._companion = companion
        self._shared_companion: Any = None
        self._lock = threading.Lock()
        self._last: tuple[weakref.ref[asyncio.AbstractEventLoop], _Entry[C]] | None = None
        """The loop of the last request and its entry: most requests come from the same loop."""
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Entry[C]] = (
            weakref.WeakKeyDictionary()
        )
        weakref.finalize(self, _close_on_running_loops, self._by_loop, self._lock)

    async def current(self) -> C:
        """The client for the running event loop (made on the loop's first request)."""
        entry = await self._entry()
        return self.template if entry is None else entry.client

    async def current_companion(self) -> Any:
        """What ``companion(client)`` made of the running loop's client (once per loop, closed
        with ``aclose()`` when the loop ends, unless None); for a client with nothing pooled, one
        shared."""
        if self._companion is None:
            raise ValueError("these LoopClients were made without a companion factory")
        entry = await self._entry()
        if entry is not None:
            return entry.companion
        with self._lock:
            if self._shared_companion is None:
                self._shared_companion = self._companion(self.template)
            return self._shared_companion

    def ready_companion(self) -> Any:
        """``current_companion()`` without awaiting, when the running loop's was made already and
        the loop is the last one that asked (most requests); else None."""
        last = self._last
        if last is not None and last[0]() is asyncio.get_running_loop() and last[1].closer is not None:
            return last[1].companion
        return None

    async def _entry(self) -> _Entry[C] | None:
        loop = asyncio.get_running_loop()
        last = self._last
        if last is not None and last[0]() is loop and last[1].closer is not None:
            return last[1]
        with self._lock:
            entry = self._by_loop.get(loop)
            if entry is None:
                http_client, pools = _fresh_pools(getattr(self.template, "_client", None))
                if http_client is None:  # not a Stainless SDK client: nothing pooled to split
                    return None
                entry = _Entry(self._derive(self.template, http_client), pools)
                if self._companion is not None:
                    entry.companion = self._companion(entry.client)
                    if entry.companion is not None:  # closed with the loop's pools
                        pools.append(entry.companion)
                self._by_loop[loop] = entry
        if entry.closer is None:
            closer = _close_at_loop_end(self._by_loop, self._lock, loop, entry)
            entry.closer = closer
            await anext(closer)  # the loop now knows it: closed when the loop shuts down
        self._last = (weakref.ref(loop), entry)
        return entry

    @property
    def loops(self) -> int:
        """How many live loops have a client of their own."""
        with self._lock:
            return len(self._by_loop)


_ByLoop = weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Entry[Any]]


async def _close_at_loop_end(
    by_loop: _ByLoop, lock: threading.Lock, loop: asyncio.AbstractEventLoop, entry: _Entry[Any]
) -> AsyncGenerator[None, None]:
    """Suspended until the loop shuts down its async generators (or ``aclose()``): then closes the
    entry's connections on their own loop. Refers to no LoopClients, so a dropped model is freed."""
    try:
        yield
    finally:
        with lock:
            if by_loop.get(loop) is entry:
                del by_loop[loop]
        # A finished generator still refers to its loop: let go of it so the loop can be freed.
        entry.closer = None
        for pool in entry.pools:
            await pool.aclose()


def _close_on_running_loops(by_loop: _ByLoop, lock: threading.Lock) -> None:
    """The model was dropped: close its clients on the loops that still run (the sync bridge's
    loop never stops), each on its own loop."""
    with lock:
        entries = list(by_loop.items())
    for loop, entry in entries:
        closer = entry.closer
        if closer is None or loop.is_closed() or not loop.is_running():
            continue
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            asyncio.run_coroutine_threadsafe(_aclose(closer), loop)


async def _aclose(closer: AsyncGenerator[None, None]) -> None:
    await closer.aclose()


def _fresh_pools(http_client: Any) -> tuple[Any, list[Any]]:
    """A shallow copy of an httpx(2) ``AsyncClient`` whose connection-pooling transports are
    copies with no connections yet (every setting kept), and those new transports. Transports
    that pool nothing (a mock or replay transport, a user's own) are shared as they are."""
    if http_client is None or not hasattr(http_client, "_transport"):
        return None, []
    clone = copy.copy(http_client)
    pools: list[Any] = []
    clone._transport = _fresh_transport(http_client._transport, pools)
    mounts = getattr(http_client, "_mounts", None)
    if isinstance(mounts, dict):
        clone._mounts = {
            pattern: None if t is None else _fresh_transport(t, pools) for pattern, t in mounts.items()
        }
    return clone, pools


def _fresh_transport(transport: Any, pools: list[Any]) -> Any:
    pool = getattr(transport, "_pool", None)
    if pool is None or not hasattr(pool, "_connections"):
        return transport
    new_pool = copy.copy(pool)
    new_pool._connections = []
    new_pool._requests = []
    lock = getattr(pool, "_optional_thread_lock", None)
    if lock is not None:
        new_pool._optional_thread_lock = type(lock)()
    new_transport = copy.copy(transport)
    new_transport._pool = new_pool
    pools.append(new_transport)
    return new_transport
