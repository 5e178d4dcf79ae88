"""Helpers of the MCP tests: the one scripted MCP server (``tests/support/mcp_server.py``) started
over stdio or streamable HTTP, a served coroutine on a loop of its own, and the session threads a
test may leave behind."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from tests.support.processes import free_port, stop, wait_for_port

Kind = Literal["scripted", "served", "weather"]

SERVER = str(Path(__file__).resolve().with_name("mcp_server.py"))


def stdio_args(kind: Kind) -> list[str]:
    """The arguments of ``sys.executable`` that run the ``kind`` server over stdio."""
    return [SERVER, kind, "stdio"]


def stdio_command(kind: Kind) -> str:
    """The whole command line (for ``--mcp``) that runs the ``kind`` server over stdio."""
    return shlex.join([sys.executable, *stdio_args(kind)])


def start_http(kind: Kind) -> tuple[subprocess.Popen[bytes], str]:
    """The ``kind`` server over streamable HTTP in a process of its own, and its URL, once it listens."""
    port = free_port()
    process = subprocess.Popen([sys.executable, SERVER, kind, "http", str(port)])
    try:
        wait_for_port(port, process)
    except RuntimeError:
        stop(process)
        raise
    return process, f"http://127.0.0.1:{port}/mcp"


@contextmanager
def http_server(kind: Kind) -> Iterator[str]:
    """The URL of the ``kind`` server over streamable HTTP while inside; stopped at the end."""
    process, url = start_http(kind)
    try:
        yield url
    finally:
        stop(process)


@contextmanager
def serving(serve: Callable[[int], Coroutine[Any, Any, None]]) -> Iterator[str]:
    """``serve(port)`` (an ``aserve(...)`` over streamable HTTP) on a free port, on an event loop in
    a thread of its own; its URL while inside, every task of that loop ended at the end."""
    port = free_port()
    loop = asyncio.new_event_loop()
    task = loop.create_task(serve(port))
    thread = threading.Thread(target=loop.run_until_complete, args=(asyncio.wait([task]),))
    thread.start()
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join()
        # The SSE library keeps a shutdown watcher task per loop; end it as asyncio.run would.
        leftovers = asyncio.all_tasks(loop)
        for leftover in leftovers:
            leftover.cancel()
        loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
        loop.close()


def mcp_threads() -> list[str]:
    """The names of the MCP session threads running now."""
    return [t.name for t in threading.enumerate() if t.name.startswith("advisorchain-mcp")]
