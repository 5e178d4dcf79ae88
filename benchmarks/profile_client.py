"""Client CPU per agent run of one implementation, and where it goes (cProfile), on demand.

    .venv/bin/python benchmarks/profile_client.py [impl] [--cell seq|c200|stream] [--runs N] [--profile]

The scripted server runs in its own process (as in ``benchmarks/run``); this process runs ``impl``
(a module under ``benchmarks/impls``, default ``advisorchain_impl``). Prints CPU µs per run, the
fastest of five slices, and with ``--profile`` the top functions by own time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.runner import Server
from harness.scenarios import PROMPT, Scenario

CELLS = {
    "seq": ("weather", 1),
    "c50": ("weather", 50),
    "c200": ("weather+lat50", 200),
    "stream": ("weather+k200", 1),
    "loop-20": ("loop-20", 1),
}


async def _go(run: object, runs: int, concurrency: int) -> None:
    left = [runs]

    async def lane() -> None:
        while left[0] > 0:
            left[0] -= 1
            await run(PROMPT)  # type: ignore[operator]

    await asyncio.gather(*(lane() for _ in range(min(concurrency, runs))))


async def main(args: argparse.Namespace) -> None:
    """Warm up, time five slices, then optionally profile one more."""
    model, concurrency = CELLS[args.cell]
    module = importlib.import_module(f"impls.{args.impl}")
    server = Server()
    try:
        impl = module.Impl(server.url + "/v1", Scenario.parse(model).model, {})
        run = impl.stream if "+k" in model else impl.run
        await _go(run, max(concurrency, 10), concurrency)
        best = float("inf")
        for _ in range(5):
            cpu0 = time.process_time()
            await _go(run, args.runs, concurrency)
            best = min(best, (time.process_time() - cpu0) / args.runs)
        print(f"{args.impl} {args.cell}: {1e6 * best:.0f} µs CPU per run (fastest of 5 slices)")
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            await _go(run, args.runs, concurrency)
            profiler.disable()
            pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.top)
        await impl.aclose()
    finally:
        server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("impl", nargs="?", default="advisorchain_impl")
    parser.add_argument("--cell", choices=sorted(CELLS), default="seq")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--top", type=int, default=30)
    asyncio.run(main(parser.parse_args()))
