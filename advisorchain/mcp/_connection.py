"""The one place an MCP session lives.

The SDK's session (and the transport under it) must be entered and left by one task. A
``Connection`` gives it a thread with an event loop of its own: one task there opens the session,
keeps it open until asked to stop and closes it; every request (from any task, thread or event
loop) is handed to that loop and awaited from wherever it was made. Closing is bounded, so it never
hangs on a server that does not answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar, cast

import mcp
import mcp.types as mcp_types
from mcp.client.session import IncomingMessage, MessageHandlerFnT

__all__ = ["Connection", "ConnectionClosed"]

T = TypeVar("T")
_log = logging.getLogger(__name__)

# How long closing waits for the SDK to wind the session down (it bounds its own waits, about 6 s
# for a stdio server that ignores its closed stdin) before the thread is left to finish alone.
_CLOSE_WAIT = 10.0
# Pages of tools/list fetched at most: a server whose cursor never ends cannot hang a refresh.
_MAX_PAGES = 100
# How long a burst of list_changed notifications may go on before the queued refresh runs.
_SETTLE = 0.05


class ConnectionClosed(Exception):
    """The session is gone (closed, or the server went away) and cannot serve requests."""


class Connection:
    """A session to one MCP server, owned by a dedicated thread and event loop.

    ``client_factory`` builds the SDK ``Client`` (given the notification handler to install);
    ``on_tools`` receives the server's tool list after the start and after each refresh.
    """

    def __init__(
        self,
        client_factory: Callable[[MessageHandlerFnT], AbstractAsyncContextManager[mcp.Client]],
        on_tools: Callable[[Sequence[mcp_types.Tool]], None],
        thread_name: str,
    ) -> None:
        self._client_factory = client_factory
        self._on_tools = on_tools
        self._loop = asyncio.new_event_loop()
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._finished: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._stop: asyncio.Event | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._client: mcp.Client | None = None
        self._requests: set[asyncio.Task[Any]] = set()
        self._refresh: asyncio.Task[None] | None = None
        self._refresh_again = False
        self.lists = 0
        """How many times the tool list was fetched (the start, and each refresh)."""
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    # -- lifecycle (called from any thread or loop) ----------------------------------------------

    async def start(self) -> None:
        """Open the session and fetch the tool list; raises what the start raised."""
        self._thread.start()
        # Shielded: a caller that gives up must not cancel the future the session thread settles.
        await asyncio.shield(asyncio.wrap_future(self._ready))

    async def close(self) -> None:
        """Close the session and stop the thread, waiting a bounded time for the SDK to finish."""
        if self._thread.is_alive() and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between: nothing to stop
                self._loop.call_soon_threadsafe(self._request_stop)
        if self._thread.ident is None:
            return
        try:
            async with asyncio.timeout(_CLOSE_WAIT):
                await asyncio.shield(asyncio.wrap_future(self._finished))
        except TimeoutError:
            return

    # -- requests (called from any thread or loop) -----------------------------------------------

    async def submit(self, work: Callable[[mcp.Client], Coroutine[Any, Any, T]]) -> T:
        """Run ``work(client)`` on the session's loop, in the caller's context (so the SDK's spans
        nest under the caller's), and await its result here; cancelling the caller cancels the work.
        Raises ConnectionClosed when the session closes first."""
        coro = self._in_context(work, contextvars.copy_context())
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:  # the session's loop is already closed
            coro.close()
            raise ConnectionClosed("the session is closed") from None
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # Not our caller's cancellation: the session closed under the call.
            raise ConnectionClosed("the session closed while the call ran") from None

    async def _in_context(
        self, work: Callable[[mcp.Client], Coroutine[Any, Any, T]], context: contextvars.Context
    ) -> T:
        client = self._client
        if client is None or self.failure is not None:
            raise ConnectionClosed("the session is closed")
        task = cast("asyncio.Task[T]", asyncio.current_task())
        self._requests.add(task)  # cancelled when the session closes; cancelling it cancels the work
        try:
            return await self._loop.create_task(self._serve(client, work), context=context)
        finally:
            self._requests.discard(task)

    async def _serve(self, client: mcp.Client, work: Callable[[mcp.Client], Coroutine[Any, Any, T]]) -> T:
        result = await work(client)
        if self._refresh is not None:
            # A list change announced while this call ran is applied before its result is returned,
            # so the next request sees the new tools.
            await asyncio.shield(self._refresh)
        return result

    # -- the session's own thread ----------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.close()
            self._finished.set_result(None)

    def _request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if not self._ready.done() and self._main_task is not None:
            # Still starting (a server that never answers its handshake): stop waiting for it. The
            # SDK's exit on cancellation still stops the server process.
            self._main_task.cancel()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self._main_task = asyncio.current_task()
        try:
            async with self._client_factory(self._on_message) as client:
                self._client = client
                await self._list_tools(client)
                self._ready.set_result(None)
                await self._stop.wait()
                await self._cancel_requests()
        except BaseException as exc:  # handed to whoever waits on the start
            if not self._ready.done():
                self._ready.set_exception(exc)
            else:
                self.failure = exc
        finally:
            self._client = None
            await self._cancel_requests()

    async def _cancel_requests(self) -> None:
        pending = [t for t in (*self._requests, self._refresh) if t is not None and not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification) and self._client is not None:
            if self._refresh is not None and not self._refresh.done():
                # Coalesced: one refresh runs, at most one more follows it, however many
                # notifications come meanwhile (a storm of them costs two tools/list, not one each).
                self._refresh_again = True
                return
            # Never await a request inside the handler: the reply would queue behind it.
            self._refresh = asyncio.ensure_future(self._refresh_tools(self._client))

    async def _refresh_tools(self, client: mcp.Client) -> None:
        while True:
            self._refresh_again = False
            try:
                await self._list_tools(client)
            except Exception:  # the old list stays; a call of a removed tool gets the server's error
                _log.warning("refreshing the tool list of an MCP server failed", exc_info=True)
            if not self._refresh_again:
                return
            # More changes came meanwhile: let a burst of them settle before fetching once more.
            await asyncio.sleep(_SETTLE)

    async def _list_tools(self, client: mcp.Client) -> None:
        self.lists += 1
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self._on_tools(tools)
