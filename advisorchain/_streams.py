"""Stream plumbing, in one place: closing a stream after ``async for``, collecting one, and tapping
one (re-yielding every item and handing them all over once it ended normally), and draining a
queue in batches of what is ready.

A stream here is any async iterator: async generators can be closed (``aclose``), a plain async
iterator may not be. Every module that consumes a stream goes through these helpers, so an early
stop, an error or a cancellation always closes what was opened.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["close_stream", "closing", "collect", "ready_batches", "tap"]

T = TypeVar("T")


async def close_stream(stream: object) -> None:
    """Close ``stream`` if it can be closed (async generators can; a plain async iterator may not)."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


class closing(Generic[T]):
    """``async with closing(s) as s: async for x in s: ...`` — ``s`` is closed however the block ends.

    A plain class rather than ``@asynccontextmanager``: it runs on every hop of every stream.
    """

    __slots__ = ("_stream",)

    def __init__(self, stream: AsyncIterator[T]) -> None:
        self._stream = stream

    async def __aenter__(self) -> AsyncIterator[T]:
        return self._stream

    async def __aexit__(self, *exc_info: object) -> None:
        await close_stream(self._stream)


async def collect(stream: AsyncIterator[T]) -> list[T]:
    """Every item of ``stream``, which is closed afterwards (also when it fails)."""
    async with closing(stream):
        return [item async for item in stream]


async def tap(stream: AsyncIterator[T], on_end: Callable[[list[T]], Awaitable[None]]) -> AsyncIterator[T]:
    """Re-yield ``stream``; once it has ended normally, await ``on_end`` with every item.

    A stream that fails, is cancelled or is abandoned by its consumer never reaches ``on_end``
    (nothing half-done is reported or stored).
    """
    items: list[T] = []
    async with closing(stream):
        async for item in stream:
            items.append(item)
            yield item
    await on_end(items)


async def ready_batches(queue: asyncio.Queue[T | None]) -> AsyncIterator[list[T]]:
    """The items put on ``queue`` until a ``None``, in batches: each batch holds what is ready when
    the reader asks (one item while the producer is slow, many when it is faster), never empty."""
    ended = False
    while not ended:
        batch: list[T] = []
        item = await queue.get()
        while item is not None:
            batch.append(item)
            if queue.empty():
                break
            item = queue.get_nowait()
        ended = item is None
        if batch:
            yield batch
