"""What the session's own thread costs per MCP tool call.

Run: ``.venv/bin/python benchmarks/bench_mcp.py`` — starts mcp-server-time over stdio twice and
times ``get_current_time`` calls: through ``McpServerStdio`` (a ToolCallback; the call hops to the
session's thread and back) and through the SDK's ``mcp.Client`` used directly on the caller's loop
(the floor). Prints a markdown table of wall-clock microseconds per call, sequential and 20 at a
time, the best of several repeats (other processes on a shared machine only slow a repeat down).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable

import mcp

from advisorchain.mcp import McpServerStdio
from advisorchain.tools import tool_callbacks

CALLS = 200
CONCURRENCY = 20
REPEATS = 5
ARGS = ["-m", "mcp_server_time", "--local-timezone", "UTC"]


async def _per_call(call: Callable[[], Awaitable[object]], concurrency: int) -> float:
    """Microseconds per call, ``concurrency`` calls in flight at a time."""
    start = time.perf_counter()
    for _ in range(CALLS // concurrency):
        await asyncio.gather(*(call() for _ in range(concurrency)))
    return (time.perf_counter() - start) / CALLS * 1e6


async def _measure() -> dict[tuple[str, int], float]:
    """Both paths open at once; their repeats interleave, so load on the machine hits both alike."""
    params = mcp.StdioServerParameters(command=sys.executable, args=ARGS)
    async with (
        mcp.Client(params, mode="legacy", cache=None) as client,
        McpServerStdio(sys.executable, ARGS) as server,
    ):
        [callback] = [cb for cb in tool_callbacks(server) if cb.definition.name == "get_current_time"]
        paths: dict[str, Callable[[], Awaitable[object]]] = {
            "floor": lambda: client.call_tool("get_current_time", {"timezone": "Asia/Tokyo"}),
            "ours": lambda: callback.call('{"timezone": "Asia/Tokyo"}', None),
        }
        best = {(path, n): float("inf") for path in paths for n in (1, CONCURRENCY)}
        for _ in range(REPEATS):
            for (path, n), value in best.items():
                best[path, n] = min(value, await _per_call(paths[path], n))
        return best


def main() -> None:
    best = asyncio.run(_measure())
    print("| calls | SDK client (floor) | McpServerStdio | extra per call |\n|---|---:|---:|---:|")
    for label, n in (("sequential", 1), (f"{CONCURRENCY} at a time", CONCURRENCY)):
        f, o = best["floor", n], best["ours", n]
        print(f"| {label} | {f:.0f} µs | {o:.0f} µs | {o - f:+.0f} µs ({o / f:.2f}x) |")


if __name__ == "__main__":
    main()
