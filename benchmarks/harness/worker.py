"""The worker protocol: one implementation in one process (stdlib only).

``<venv python> benchmarks/harness/worker.py '<json spec>'`` imports the implementation (timed),
then for each cell warms it up, runs the cell's agent runs with the cell's concurrency, checks every
answer and that the server saw exactly the requests the runs need. It prints one line
``RESULT <json>``: ``{"ok", "import_s", "versions", "peak_rss_mb", "cells": {key: measurements or
{"ok": false, "error"}}}``, or ``{"ok": false, "error"}`` when the implementation cannot load.

Spec keys: ``impl`` (module under ``benchmarks/impls``), ``options`` (passed to ``Impl``),
``server`` (the scripted server's root URL; the SDKs get ``<server>/v1``) and ``cells``, a list of
``{"key", "model", "stream", "runs", "concurrency", "warmup", "slices"}`` (and optionally
``variants``, see ``measure``); ``model`` is a scenario string (see scenarios.py).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import importlib.metadata
import json
import resource
import sys
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH_DIR))

from harness.scenarios import PROMPT, Scenario  # noqa: E402


def _versions(module: Any) -> dict[str, str]:
    versions = {"python": sys.version.split()[0]}
    for name in getattr(module, "PACKAGES", ()):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "?"
    return versions


class _Lanes:
    """``concurrency`` coroutines taking agent runs off one counter; latencies and wrong answers."""

    def __init__(self, run: Any, expected: str) -> None:
        self.run = run
        self.expected = expected
        self.latencies: list[float] = []
        self.wrong: list[str] = []

    async def go(self, runs: int, concurrency: int) -> None:
        remaining = [runs]

        async def lane() -> None:
            while remaining[0] > 0:
                remaining[0] -= 1
                start = time.perf_counter()
                text = await self.run(PROMPT)
                self.latencies.append(time.perf_counter() - start)
                if text != self.expected:
                    self.wrong.append(text)

        await asyncio.gather(*(lane() for _ in range(min(concurrency, runs))))


def _server_stats(server: str) -> dict[str, Any]:
    with urllib.request.urlopen(server + "/stats", timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def _check_requests(scenario: Scenario, runs: int, first: dict[str, Any], last: dict[str, Any]) -> None:
    expected = runs * scenario.requests_per_run
    seen, bad = last["requests"] - first["requests"], last["bad"] - first["bad"]
    if bad or seen != expected:
        raise AssertionError(f"the server saw {seen} requests ({bad} bad); the runs need {expected}")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _timed_slices(variants: list[_Lanes], cell: dict[str, Any]) -> list[list[tuple[float, float]]]:
    """(wall, CPU) seconds per agent run of each slice, per variant; the variants take turns slice by
    slice (rotating), so whatever the machine does hits them alike."""
    runs = int(cell["runs"])
    slices = max(1, min(int(cell.get("slices", 1)), runs))
    per_slice = runs // slices
    timings: list[list[tuple[float, float]]] = [[] for _ in variants]
    for index in range(slices):
        for v in range(len(variants)):
            turn = (v + index) % len(variants)
            gc.collect()  # start every slice from the same heap, whoever ran before it
            cpu0, t0 = time.process_time(), time.perf_counter()
            await variants[turn].go(per_slice, int(cell["concurrency"]))
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            timings[turn].append((wall / per_slice, cpu / per_slice))
    return timings


def _metrics(lanes: _Lanes, timings: list[tuple[float, float]], server_cpu_per_run: float) -> dict[str, Any]:
    if lanes.wrong:
        raise AssertionError(f"{len(lanes.wrong)} wrong answers, e.g. {lanes.wrong[0][:200]!r}")
    wall, cpu = min(w for w, _ in timings), min(c for _, c in timings)
    return {
        "ok": True,
        "runs": len(lanes.latencies),
        "wall_per_run_s": wall,
        "cpu_per_run_s": cpu,
        "server_cpu_per_run_s": server_cpu_per_run,
        "runs_per_s": 1 / wall,
        "p50_ms": 1000 * _percentile(lanes.latencies, 0.50),
        "p99_ms": 1000 * _percentile(lanes.latencies, 0.99),
    }


async def measure(module: Any, spec: dict[str, Any], cell: dict[str, Any]) -> dict[str, Any]:
    """Warm up, then time the cell's agent runs in ``slices`` slices; the result dict.

    Per-run wall and CPU time are those of the fastest slice: other processes on the machine can
    only slow a slice down, never speed it up. p50/p99 are over every measured run. With
    ``variants`` (``[{"label", "options"}]``) one Impl per variant is built and they take turns
    slice by slice in this one process; the result is ``{"ok": true, "variants": {label: ...}}``.
    """
    scenario = Scenario.parse(cell["model"])
    stream = bool(cell["stream"])
    server = spec["server"]
    variants = cell.get("variants") or [{"label": "", "options": spec.get("options") or {}}]
    impls = [module.Impl(server + "/v1", scenario.model, v["options"]) for v in variants]
    expected = scenario.expected_text(stream)
    lanes = [_Lanes(impl.stream if stream else impl.run, expected) for impl in impls]
    try:
        first = _server_stats(server)
        for ln in lanes:
            await _Lanes(ln.run, expected).go(int(cell["warmup"]), int(cell["concurrency"]))
        middle = _server_stats(server)
        timings = await _timed_slices(lanes, cell)
        last = _server_stats(server)
    finally:
        for impl in impls:
            await impl.aclose()
    runs = sum(len(ln.latencies) for ln in lanes)
    _check_requests(scenario, int(cell["warmup"]) * len(lanes) + runs, first, last)
    server_cpu = (last["cpu_s"] - middle["cpu_s"]) / runs
    results = {
        v["label"]: _metrics(ln, t, server_cpu) for v, ln, t in zip(variants, lanes, timings, strict=True)
    }
    return {"ok": True, "variants": results} if cell.get("variants") else results[""]


def _failure(exc: BaseException) -> dict[str, Any]:
    traceback.print_exc(file=sys.stderr)
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return {"ok": False, "error": detail[:500]}


async def _measure_all(module: Any, spec: dict[str, Any]) -> dict[str, Any]:
    # One event loop for every cell: some libraries cache loop-bound SDK clients process-wide.
    cells: dict[str, Any] = {}
    for cell in spec["cells"]:
        try:
            cells[cell["key"]] = await measure(module, spec, cell)
        except Exception as exc:  # every failure becomes a reported cell
            cells[cell["key"]] = _failure(exc)
    return cells


def main() -> None:
    """Run the spec in argv[1]; print ``RESULT <json>``."""
    spec = json.loads(sys.argv[1])
    result: dict[str, Any]
    try:
        start = time.perf_counter()
        module = importlib.import_module(f"impls.{spec['impl']}")
        result = {"ok": True, "import_s": time.perf_counter() - start, "versions": _versions(module)}
        result["cells"] = asyncio.run(_measure_all(module, spec))
    except Exception as exc:  # an implementation that cannot even be imported
        result = _failure(exc)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
