"""The worker protocol: one implementation in one process (stdlib only).

``<venv python> benchmarks/harness/worker.py '<json spec>'`` imports the implementation (timed),
then for each cell warms it up, runs the cell's agent runs with the cell's concurrency, checks every
answer and that the server saw exactly the requests the runs need. It prints one line
``RESULT <json>``: ``{"ok", "import_s", "versions", "peak_rss_mb", "cells": {key: measurements or
{"ok": false, "error"}}}``, or ``{"ok": false, "error"}`` when the implementation cannot load.

Spec keys: ``impl`` (module under ``benchmarks/impls``), ``options`` (passed to ``Impl``),
``server`` (the scripted server's root URL; the SDKs get ``<server>/v1``) and ``cells``, a list of
``{"key", "model", "stream", "runs", "concurrency", "warmup", "slices"}`` (and optionally
``variants``, see ``measure``); ``model`` is a scenario string (see scenarios.py). A cell with a
``probe`` key is a scale probe (see probes.py and ``measure_probe``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import importlib.metadata
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH_DIR))

from harness.probes import TICK_S, history_messages  # noqa: E402
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


# -- scale probes (issue 13) ------------------------------------------------------------------------


def _rss_bytes() -> int:
    """The resident set now (Linux); elsewhere the peak so far, the best the platform offers."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _raise_fd_limit(needed: int) -> None:
    """Lift the soft limit on open files as far as the hard one when ``needed`` would not fit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise RuntimeError(
            f"{needed} open files are needed but the hard limit is {hard}; raise it (ulimit -Hn)"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed if hard == resource.RLIM_INFINITY else hard, hard))


class _Ticker:
    """A task that sleeps ``TICK_S`` over and over: how late it wakes is the event-loop lag; it
    also samples the resident set, keeping the peak."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.peak_rss = _rss_bytes()
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.lags.append(time.perf_counter() - start - TICK_S)
            self.peak_rss = max(self.peak_rss, _rss_bytes())

    def start(self) -> None:
        self._task = asyncio.create_task(self._tick())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.peak_rss = max(self.peak_rss, _rss_bytes())


async def _probe_inflight(module: Any, spec: dict[str, Any], probe: dict[str, Any]) -> dict[str, Any]:
    in_flight, runs, warmup = int(probe["in_flight"]), int(probe["runs"]), int(probe["warmup"])
    _raise_fd_limit(in_flight + 256)
    scenario = Scenario.parse(probe["model"])
    expected = scenario.expected_text(False)
    impl = module.Impl(spec["server"] + "/v1", scenario.model, spec.get("options") or {})
    lanes, ticker = _Lanes(impl.run, expected), _Ticker()
    try:
        first = _server_stats(spec["server"])
        await _Lanes(impl.run, expected).go(warmup, warmup)
        gc.collect()
        before = _rss_bytes()
        ticker.start()
        cpu0, t0 = time.process_time(), time.perf_counter()
        await lanes.go(runs, in_flight)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        await ticker.stop()
        last = _server_stats(spec["server"])
    finally:
        await ticker.stop()
        await impl.aclose()
    if lanes.wrong:
        raise AssertionError(f"{len(lanes.wrong)} wrong answers, e.g. {lanes.wrong[0][:200]!r}")
    _check_requests(scenario, warmup + runs, first, last)
    return {
        "ok": True,
        "in_flight": in_flight,
        "runs": len(lanes.latencies),
        "wall_per_run_s": wall / runs,
        "cpu_per_run_s": cpu / runs,
        "runs_per_s": runs / wall,
        "p50_ms": 1000 * _percentile(lanes.latencies, 0.50),
        "p99_ms": 1000 * _percentile(lanes.latencies, 0.99),
        "lag_p50_ms": 1000 * _percentile(ticker.lags, 0.50) if ticker.lags else 0.0,
        "lag_p99_ms": 1000 * _percentile(ticker.lags, 0.99) if ticker.lags else 0.0,
        "ticks": len(ticker.lags),
        "kb_per_run": (ticker.peak_rss - before) / 1024 / in_flight,
        "server_cpu_per_run_s": (last["cpu_s"] - first["cpu_s"]) / (warmup + runs),
    }


async def _two_points(
    probe: dict[str, Any], server: str, scenario: Scenario, runners: list[Any], expected: list[str]
) -> tuple[float, float, int, list[int]]:
    """Warm up and time the two ``runners`` (one per point, taking turns slice by slice): the
    fastest slice's CPU per run of each, the messages the server received meanwhile and the runs
    of each point, warm-up included."""
    lanes = [_Lanes(run, text) for run, text in zip(runners, expected, strict=True)]
    first = _server_stats(server)
    for lane in lanes:
        await _Lanes(lane.run, lane.expected).go(int(probe["warmup"]), 1)
    timings = await _timed_slices(lanes, probe)
    last = _server_stats(server)
    for lane in lanes:
        if lane.wrong:
            raise AssertionError(f"{len(lane.wrong)} wrong answers, e.g. {lane.wrong[0][:200]!r}")
    runs = sum(len(lane.latencies) for lane in lanes)
    _check_requests(scenario, int(probe["warmup"]) * len(lanes) + runs, first, last)
    low, high = (min(c for _, c in t) for t in timings)
    counts = [int(probe["warmup"]) + len(lane.latencies) for lane in lanes]
    return low, high, last["messages"] - first["messages"], counts


async def _probe_history(module: Any, spec: dict[str, Any], probe: dict[str, Any]) -> dict[str, Any]:
    scenario = Scenario.parse(probe["model"])
    impl = module.Impl(spec["server"] + "/v1", scenario.model, spec.get("options") or {})
    histories = [impl.prepare_history(history_messages(n)) for n in probe["points"]]

    def runner(history: Any) -> Any:
        return lambda prompt: impl.run_with_history(prompt, history)

    try:
        expected = scenario.expected_text(False)
        runners = [runner(h) for h in histories]
        low, high, received, runs = await _two_points(
            probe, spec["server"], scenario, runners, [expected] * 2
        )
    finally:
        await impl.aclose()
    # one model call per run (loop-0): the history, then the user's question
    sent = sum(r * (n + 1) for r, n in zip(runs, probe["points"], strict=True))
    if scenario.rounds == 0 and received != sent:
        raise AssertionError(f"the server received {received} messages; the histories make {sent}")
    extra_messages = probe["points"][1] - probe["points"][0]
    return {
        "ok": True,
        "runs": int(probe["runs"]),
        "cpu_low_per_run_s": low,
        "cpu_high_per_run_s": high,
        # every model call of the run sends the whole history once
        "us_per_message": 1e6 * (high - low) / extra_messages / scenario.requests_per_run,
    }


def _first_token_timed(impl: Any, first_tokens: list[float]) -> Any:
    """A run that joins ``impl.deltas`` and records when the first non-empty one arrived."""

    async def run(prompt: str) -> str:
        start = time.perf_counter()
        parts: list[str] = []
        async for piece in impl.deltas(prompt):
            if piece and not parts:
                first_tokens.append(time.perf_counter() - start)
            if piece:
                parts.append(piece)
        return "".join(parts)

    return run


async def _probe_stream(module: Any, spec: dict[str, Any], probe: dict[str, Any]) -> dict[str, Any]:
    scenarios = [Scenario.parse(m) for m in probe["models"]]
    options = spec.get("options") or {}
    impls = [module.Impl(spec["server"] + "/v1", s.model, options) for s in scenarios]
    first_tokens: list[list[float]] = [[], []]
    runners = [_first_token_timed(impl, ft) for impl, ft in zip(impls, first_tokens, strict=True)]
    try:
        expected = [s.expected_text(True) for s in scenarios]
        low, high, _, _ = await _two_points(probe, spec["server"], scenarios[0], runners, expected)
    finally:
        for impl in impls:
            await impl.aclose()
    warmup = int(probe["warmup"])
    extra_chunks = probe["points"][1] - probe["points"][0]
    return {
        "ok": True,
        "runs": int(probe["runs"]),
        "cpu_low_per_run_s": low,
        "cpu_high_per_run_s": high,
        # the chunk count is the final answer's; the tool round before it is the same at both points
        "us_per_chunk": 1e6 * (high - low) / extra_chunks,
        "ttft_ms": 1000 * statistics.median(first_tokens[0][warmup:]),
        "ttft_high_ms": 1000 * statistics.median(first_tokens[1][warmup:]),
    }


_IMPORT_TIMER = "import time; t = time.perf_counter(); import {}; print(time.perf_counter() - t)"


def _import_s(module: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_TIMER.format(module)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


async def _probe_import(module: Any, spec: dict[str, Any], probe: dict[str, Any]) -> dict[str, Any]:
    subject, reference = "advisorchain, advisorchain.models.openai", "openai"
    for name in (subject, reference):
        _import_s(name)  # compiles any missing bytecode: not what a user pays on every start
    times: dict[str, list[float]] = {subject: [], reference: []}
    for i in range(int(probe["repeat"])):
        for name in (subject, reference)[i % 2 :] + (subject, reference)[: i % 2]:
            times[name].append(_import_s(name))
    return {
        "ok": True,
        "runs": int(probe["repeat"]),
        "import_subject_s": statistics.median(times[subject]),
        "import_reference_s": statistics.median(times[reference]),
    }


_PROBES = {
    "inflight": _probe_inflight,
    "history": _probe_history,
    "stream": _probe_stream,
    "import": _probe_import,
}


async def measure_probe(module: Any, spec: dict[str, Any], probe: dict[str, Any]) -> dict[str, Any]:
    """One scale probe (see probes.py for what each kind measures); its result dict."""
    return await _PROBES[probe["probe"]](module, spec, probe)


async def _measure_all(module: Any, spec: dict[str, Any]) -> dict[str, Any]:
    # One event loop for every cell: some libraries cache loop-bound SDK clients process-wide.
    cells: dict[str, Any] = {}
    for cell in spec["cells"]:
        try:
            if "probe" in cell:
                cells[cell["key"]] = await measure_probe(module, spec, cell)
                continue
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
