"""The one bridge from blocking code to the async core.

Every sync method of the library goes through ``run`` or ``iterate``. They run coroutines on one
long-lived event loop in a daemon thread, so async SDK clients (bound to the loop they first ran
on) keep working across many sync calls. Called from inside a running event loop they refuse with
a clear error naming the async form, instead of deadlocking.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

from ._streams import close_stream
from .errors import SyncInAsyncContextError

__all__ = ["iterate", "run"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _bridge_loop() -> asyncio.AbstractEventLoop:
    global _loop
    loop = _loop
    if loop is not None and not loop.is_closed():
        return loop
    with _lock:
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="advisorchain-sync", daemon=True).start()
        return _loop


def ensure_no_running_loop(sync_name: str, async_name: str) -> None:
    """Refuse a blocking call made from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise SyncInAsyncContextError(
        f"{sync_name} blocks, and was called inside a running event loop; use `{async_name}` there instead"
    )


def run(coro: Coroutine[Any, Any, T], sync_name: str, async_name: str) -> T:
    """Run ``coro`` to completion from blocking code and return its result."""
    try:
        ensure_no_running_loop(sync_name, async_name)
    except SyncInAsyncContextError:
        coro.close()
        raise
    future = _submit(coro, _bridge_loop(), contextvars.copy_context())
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


def iterate(source: AsyncIterator[T], sync_name: str, async_name: str) -> Iterator[T]:
    """Iterate an async iterator from blocking code; closing the iterator early (or an interrupt
    while waiting) cancels the pending step and closes ``source``."""
    ensure_no_running_loop(sync_name, async_name)
    loop = _bridge_loop()
    context = contextvars.copy_context()  # every step sees what earlier steps set
    finished = False
    try:
        while True:
            future = _submit(_next(source), loop, context)
            try:
                item = future.result()
            except StopAsyncIteration:
                finished = True
                return
            except BaseException:
                future.cancel()  # e.g. KeyboardInterrupt while waiting: stop the running step
                raise
            yield item
    finally:
        if not finished:
            _submit(_close_when_idle(source), loop, context).result()


def _submit(
    coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop, context: contextvars.Context
) -> concurrent.futures.Future[T]:
    """Run ``coro`` on ``loop`` as a task in ``context`` (the caller's context variables: tracing
    spans, held conversation turns); cancelling the returned future cancels the task."""
    outer: concurrent.futures.Future[T] = concurrent.futures.Future()

    def start() -> None:
        if outer.cancelled():
            coro.close()
            return
        task = loop.create_task(coro, context=context)

        def settle(done: asyncio.Task[T]) -> None:
            if outer.cancelled():
                return
            if done.cancelled():
                outer.cancel()
            elif (exc := done.exception()) is not None:
                outer.set_exception(exc)
            else:
                outer.set_result(done.result())

        task.add_done_callback(settle)
        outer.add_done_callback(lambda f: loop.call_soon_threadsafe(task.cancel) if f.cancelled() else None)

    loop.call_soon_threadsafe(start)
    return outer


async def _close_when_idle(source: AsyncIterator[T]) -> None:
    # A cancelled step may still be unwinding; aclose() on a running async generator is an error.
    for _ in range(10_000):
        if not getattr(source, "ag_running", False):
            break
        await asyncio.sleep(0)
    await close_stream(source)


async def _next(source: AsyncIterator[T]) -> T:
    return await anext(source)
