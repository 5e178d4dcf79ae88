"""The scale probes of issue 13: advisorchain against the aiohttp + orjson floor where a fleet of
agents in one process feels it (stdlib only: the worker imports this in every venv).

* ``inflight-N``: N agent runs of ``weather+lat200`` in flight at once (lanes taking runs off one
  counter): runs/s, p50/p99 latency per run, event-loop lag (how late ``asyncio.sleep(0.01)`` wakes,
  measured by a ticker task during the wave) and memory per in-flight run (RSS delta, see below).
* ``history``: client CPU per agent run of ``loop-0`` (one model call, no tool round) after a history
  of ``low`` and of ``high`` messages; the slope is the CPU per extra history message per round.
* ``stream``: client CPU per streamed agent run of ``weather+k{low}`` and ``weather+k{high}``; the
  slope is the CPU per streamed chunk. Also the time from the start of a run to its first text delta.
* ``import``: wall time of ``import advisorchain, advisorchain.models.openai`` in a fresh
  interpreter, against ``import openai`` alone (the median of ``repeat`` of each, alternating).

Memory per in-flight run: the process's resident set (``/proc/self/statm``) sampled by the ticker
during the wave, its peak minus its size just before the wave (after a warm-up wave and a
``gc.collect()``), divided by the number in flight. The same for every implementation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from harness.cells import ADVISORCHAIN, ADVISORCHAIN_SDK, AIOHTTP_FLOOR, Implementation
from harness.scenarios import Scenario

PROBE_IMPLS = (AIOHTTP_FLOOR, ADVISORCHAIN, ADVISORCHAIN_SDK)
"""The probes compare advisorchain (its default install, and its SDK path beside it) with the
limit of a Python client only."""
TICK_S = 0.01
"""The ticker's sleep: event-loop lag is how much later than this it wakes."""


def history_messages(count: int) -> list[dict[str, str]]:
    """``count`` earlier turns as wire dicts, user and assistant alternating, none a tool message."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Earlier turn {i}: a sentence of ordinary length about the weather and travel.",
        }
        for i in range(count)
    ]


@dataclass(frozen=True, slots=True)
class Probe:
    """One scale probe; ``kind`` says which measurement the worker runs (see the module doc)."""

    key: str
    title: str
    kind: str  # "inflight", "history", "stream" or "import"
    scenario: str = "weather"
    in_flight: int = 1
    runs: int = 0
    warmup: int = 10
    slices: int = 1
    points: tuple[int, int] = (0, 0)
    repeat: int = 5
    impls: tuple[Implementation, ...] = PROBE_IMPLS
    timeout_s: float = 300
    """How long one worker may take over this probe before it is reported as failed."""

    def model(self, point: int | None = None) -> str:
        """The scenario string the server reads (for ``stream``, the one with ``point`` chunks)."""
        if self.kind == "stream":
            return Scenario.name_for(self.scenario, point)
        return self.scenario

    def worker_spec(self, impl: Implementation) -> dict[str, Any]:
        """This probe in the worker protocol (the worker tells probes from cells by ``probe``)."""
        spec: dict[str, Any] = {
            "key": self.key,
            "probe": self.kind,
            "model": self.model(),
            "in_flight": self.in_flight,
            "runs": self.runs,
            "concurrency": 1,
            "warmup": self.warmup,
            "slices": self.slices,
            "points": list(self.points),
            "repeat": self.repeat,
        }
        if self.kind == "stream":
            spec["models"] = [self.model(p) for p in self.points]
        return spec

    def summary(self, got: dict[str, Any]) -> str:
        """One progress line for a measured repetition."""
        if self.kind == "inflight":
            return (
                f"{got['runs_per_s']:7.0f} runs/s, p99 {got['p99_ms']:.0f} ms, "
                f"lag p50 {got['lag_p50_ms']:.1f} ms, {got['kb_per_run']:.1f} KB/run"
            )
        if self.kind == "history":
            return f"{got['us_per_message']:6.3f} µs per history message per round"
        if self.kind == "stream":
            return f"{got['us_per_chunk']:6.2f} µs per chunk, first token {got['ttft_ms']:.2f} ms"
        return f"import {got['import_subject_s']:.3f} s (openai alone {got['import_reference_s']:.3f} s)"


def in_flight_title(in_flight: int, scenario: str) -> str:
    """``1,000 runs in flight, 200 ms``: the title of an in-flight probe."""
    return f"{in_flight:,} runs in flight, {Scenario.parse(scenario).latency_ms:g} ms"


IN_FLIGHT_SCENARIO = "weather+lat200"
PROBES = (
    # A small warm-up (code paths, lazy imports): the wave's memory must not reuse a warm-up's heap.
    *(
        Probe(
            f"inflight-{n}",
            in_flight_title(n, IN_FLIGHT_SCENARIO),
            "inflight",
            IN_FLIGHT_SCENARIO,
            in_flight=n,
            runs=runs,
            warmup=20,
            timeout_s=600,  # 5,000 runs at 40 runs/s take two minutes already
            # The SDK path at 5,000 in flight would take most of the run's time for one figure.
            impls=PROBE_IMPLS if n <= 1000 else (AIOHTTP_FLOOR, ADVISORCHAIN),
        )
        for n, runs in ((1000, 2000), (5000, 5000))
    ),
    Probe("history", "history 10 vs 200 messages", "history", "loop-0", runs=400, slices=8, points=(10, 200)),
    Probe(
        "stream-chunks",
        "streaming 50 vs 400 chunks",
        "stream",
        "weather",
        runs=60,
        slices=6,
        points=(50, 400),
    ),
    Probe(
        "import", "import of advisorchain and its OpenAI adapter", "import", repeat=5, impls=(ADVISORCHAIN,)
    ),
)
"""The probes of a full run, in order."""

QUICK_IN_FLIGHT_SHARE = 50
"""A quick run keeps 1/50 of a probe's runs in flight (1,000 -> 20, 5,000 -> 100)."""


def _quick_in_flight(probe: Probe) -> int:
    return max(1, probe.in_flight // QUICK_IN_FLIGHT_SHARE)


def quick_probes(probes: tuple[Probe, ...]) -> tuple[Probe, ...]:
    """The same probes with a sliver of the work: a smoke run, not a measurement."""
    return tuple(
        replace(
            p,
            title=in_flight_title(_quick_in_flight(p), p.scenario) if p.kind == "inflight" else p.title,
            in_flight=_quick_in_flight(p),
            runs=2 * _quick_in_flight(p) if p.kind == "inflight" else min(p.runs, 6),
            warmup=min(p.warmup, 2),
            slices=min(p.slices, 2),
            repeat=1,
        )
        for p in probes
    )
