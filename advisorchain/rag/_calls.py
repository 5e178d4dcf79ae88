"""How the retrieval pieces are called: a user's method may be plain or ``async`` (plain ones that
may block run in a worker thread), and the stores' blocking methods work from any thread, beside a
running event loop too."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .. import _sync

__all__ = ["call", "run_blocking"]

T = TypeVar("T")


async def call(fn: Callable[..., Any], *args: Any, thread: bool = True) -> Any:
    """``fn(*args)``, awaited when it is async; a plain ``fn`` runs in a worker thread (``thread``)
    or inline (cheap, non-blocking pieces)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await asyncio.to_thread(fn, *args) if thread else fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def run_blocking(coro: Coroutine[Any, Any, T], sync_name: str, async_name: str) -> T:
    """Run ``coro`` to completion from blocking code: on the library's bridge loop, or — called from
    a thread whose event loop is running (a notebook, a sync tool inside an async app) — on a loop of
    its own in a helper thread, so it never fails with an event-loop error (it blocks that loop
    meanwhile, as any blocking call does)."""
    if _running_loop() is None:
        return _sync.run(coro, sync_name, async_name)
    context = contextvars.copy_context()
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = context.run(asyncio.run, coro)
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="advisorchain-rag-blocking", daemon=True)
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]
