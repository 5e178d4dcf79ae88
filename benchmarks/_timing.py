"""CPU time per run of an async callable, as the in-process benchmarks measure it (shared by
``bench_tool_loop.py`` and ``bench_usage.py``)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Coroutine
from typing import Any

REPEATS = 7
TARGET_SECONDS = 0.1  # per repeat


async def best_seconds_per_run(run: Callable[[], Coroutine[Any, Any, None]]) -> float:
    """Process CPU seconds per ``run()``: calibrated to about TARGET_SECONDS a repeat, the best of
    REPEATS repeats (other processes only ever slow a repeat down, and process time does not count
    them), with the garbage collector off during the repeats as timeit does (a collection landing in
    one repeat is noise, not the cost of the run)."""
    await run()  # warm-up (schema caches, first-call paths, price lookups)
    start, runs = time.process_time(), 0
    while time.process_time() - start < TARGET_SECONDS:
        await run()
        runs += 1
    best = float("inf")
    gc.disable()
    try:
        for _ in range(REPEATS):
            start = time.process_time()
            for _ in range(runs):
                await run()
            best = min(best, (time.process_time() - start) / runs)
    finally:
        gc.enable()
    return best
