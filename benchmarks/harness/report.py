"""The markdown report: ratios to the floor, cost per advisor hop, the bar, details and versions."""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.cells import ADVISOR_COUNTS, Cell
from harness.probes import Probe
from harness.scenarios import Scenario

BAR = 1.10
SUBJECT = "advisorchain"
"""advisorchain's default install for a real model (``advisorchain[openai]``: the fast path)."""
SDK_SUBJECT = "advisorchain (sdk)"
"""The same install with every request on the SDK's own stack (``ADVISORCHAIN_HTTP=sdk``)."""
LIMIT = "aiohttp floor"
"""The limit of a Python client (issue 13): a hand-written loop on aiohttp + orjson."""
LIMIT_BAR = 1.25
"""Issue 22's target: advisorchain's client CPU per run at most this times the aiohttp floor's."""


class Outcome(Protocol):
    """What the runner hands over per implementation and cell."""

    results: list[dict[str, Any]]
    error: str | None

    def median(self, metric: str) -> float: ...


Outcomes = Mapping[str, Mapping[str, Outcome]]


def per_run(outcome: Outcome, metric: str) -> float:
    """Median over repetitions of ``metric`` (``wall``, ``cpu``, ``server_cpu``): seconds per run."""
    return outcome.median(f"{metric}_per_run_s")


def ratio(cell_outcomes: Mapping[str, Outcome], label: str, metric: str, base: str = "floor") -> float | None:
    """``label``'s per-run ``metric`` over the ``base`` floor's (None when either failed)."""
    mine, floor = cell_outcomes.get(label), cell_outcomes.get(base)
    if mine is None or floor is None or not mine.results or not floor.results:
        return None
    return per_run(mine, metric) / per_run(floor, metric)


def _fmt_ratio(value: float | None) -> str:
    return "failed" if value is None else f"{value:.2f}x"


def _ratio_table(
    cells: tuple[Cell, ...], outcomes: Outcomes, metric: str, labels: list[str], base: str = "floor"
) -> list[str]:
    lines = [f"| cell | {base} | " + " | ".join(labels) + " |", "|---|---:|" + "---:|" * len(labels)]
    for cell in cells:
        got = outcomes[cell.key]
        floor = got.get(base)
        base_ms = f"{1000 * per_run(floor, metric):.2f} ms" if floor and floor.results else "failed"
        row = [_fmt_ratio(ratio(got, lb, metric, base)) if lb in got else "—" for lb in labels]
        lines.append(f"| {cell.title} | {base_ms} | " + " | ".join(row) + " |")
    return lines


def _hop_section(cell: Cell, got: Mapping[str, Outcome]) -> list[str]:
    hops_per_run = Scenario.parse(cell.scenario).requests_per_run
    lines = [
        f"Each pass-through advisor sits inside the tool loop, so it runs once per model call "
        f"({hops_per_run} per agent run of `{cell.scenario}`). A hop costs microseconds against "
        "milliseconds of SDK work per model call, so a tiny or negative extra means it is below this "
        "machine's run-to-run noise; `benchmarks/bench_chain.py` times one hop in isolation.",
        "",
        "| advisors | time ratio | CPU ratio | extra CPU per advisor hop |",
        "|---:|---:|---:|---:|",
    ]
    zero = got.get(f"{SUBJECT} +0")
    for n in ADVISOR_COUNTS:
        o = got.get(f"{SUBJECT} +{n}")
        if o is None or not o.results:
            lines.append(f"| {n} | failed | failed | — |")
            continue
        hop = "—"
        if n and zero is not None and zero.results:
            extra = per_run(o, "cpu") - per_run(zero, "cpu")
            hop = f"{1e6 * extra / (n * hops_per_run):.1f} µs"
        time_r, cpu_r = ratio(got, f"{SUBJECT} +{n}", "wall"), ratio(got, f"{SUBJECT} +{n}", "cpu")
        lines.append(f"| {n} | {_fmt_ratio(time_r)} | {_fmt_ratio(cpu_r)} | {hop} |")
    return lines


def _bar_lines(cells: tuple[Cell, ...], outcomes: Outcomes, peers: list[str]) -> list[str]:
    lines = _limit_line(cells, outcomes)
    for subject, what in ((SUBJECT, "advisorchain"), (SDK_SUBJECT, "advisorchain on the SDK path")):
        if not any(subject in outcomes[c.key] for c in cells):
            continue
        over, behind = [], []
        for cell in cells:
            got = outcomes[cell.key]
            if subject not in got:
                continue
            mine = ratio(got, subject, "wall")
            if mine is None or mine > BAR:
                over.append(f"{cell.title} ({_fmt_ratio(mine)})")
            for peer in peers:
                theirs = ratio(got, peer, "wall")
                if mine is None or (theirs is not None and theirs <= mine):
                    behind.append(f"{cell.title} vs {peer} ({_fmt_ratio(mine)} vs {_fmt_ratio(theirs)})")
        yes = "**met**"
        lines += [
            f"- {what} ≤ {BAR:.2f}x the floor (time per run) in every cell: "
            + (yes if not over else "**not met** in " + "; ".join(over)),
            f"- {what} ahead of every peer in every cell: "
            + (yes if not behind else "**not met** in " + "; ".join(behind)),
        ]
    return lines


def _limit_line(cells: tuple[Cell, ...], outcomes: Outcomes) -> list[str]:
    """Issue 22's CPU target against the aiohttp floor, when that floor ran."""
    if not any(LIMIT in outcomes[c.key] for c in cells):
        return []
    over = []
    for cell in cells:
        got = outcomes[cell.key]
        if SUBJECT not in got:
            continue
        mine = ratio(got, SUBJECT, "cpu", LIMIT)
        if mine is None or mine > LIMIT_BAR:
            over.append(f"{cell.title} ({_fmt_ratio(mine)})")
    verdict = "**met**" if not over else "**not met** in " + "; ".join(over)
    target = f"advisorchain ≤ {LIMIT_BAR:.2f}x the aiohttp floor's client CPU per run in every cell"
    return [f"- {target}: {verdict}"]


@dataclass(frozen=True, slots=True)
class _ProbeRow:
    """One line of the probe table: a metric of a probe's results, and issue 13's target for it."""

    what: str
    metric: str
    unit: str
    digits: int
    target: str = "—"
    met: Callable[[float, float], bool] | None = None
    """(floor's figure, advisorchain's) -> whether the target is met."""
    added: bool = False
    """Show advisorchain minus the floor instead of a ratio."""
    reference: str | None = None
    """A metric of advisorchain's own results that stands in for the floor's (the import probe)."""


IN_FLIGHT_THROUGHPUT = 0.85
IN_FLIGHT_P99 = 1.3
KB_PER_RUN = 25.0
US_PER_HISTORY_MESSAGE = 0.3
US_PER_CHUNK = 10.0
ADDED_FIRST_TOKEN_MS = 0.5
IMPORT_S = 0.2
"""Issue 22's targets for the scale probes (the history slope keeps issue 13's)."""

_PROBE_ROWS: dict[str, tuple[_ProbeRow, ...]] = {
    "inflight": (
        _ProbeRow(
            "throughput",
            "runs_per_s",
            "runs/s",
            0,
            f"≥ {IN_FLIGHT_THROUGHPUT:.2f}x",
            lambda f, m: m >= IN_FLIGHT_THROUGHPUT * f,
        ),
        _ProbeRow("p50 latency per run", "p50_ms", "ms", 0),
        _ProbeRow(
            "p99 latency per run",
            "p99_ms",
            "ms",
            0,
            f"≤ {IN_FLIGHT_P99:.2f}x",
            lambda f, m: m <= IN_FLIGHT_P99 * f,
        ),
        _ProbeRow("event-loop lag p50", "lag_p50_ms", "ms", 2),
        _ProbeRow(
            "memory per in-flight run",
            "kb_per_run",
            "KB",
            1,
            f"≤ {KB_PER_RUN:g} KB",
            lambda f, m: m <= KB_PER_RUN,
        ),
    ),
    "history": (
        _ProbeRow(
            "client CPU per extra history message per round",
            "us_per_message",
            "µs",
            3,
            f"≤ {US_PER_HISTORY_MESSAGE:g} µs",
            lambda f, m: m <= US_PER_HISTORY_MESSAGE,
        ),
    ),
    "stream": (
        _ProbeRow(
            "client CPU per streamed chunk",
            "us_per_chunk",
            "µs",
            2,
            f"≤ {US_PER_CHUNK:g} µs",
            lambda f, m: m <= US_PER_CHUNK,
        ),
        _ProbeRow(
            "time to first token",
            "ttft_ms",
            "ms",
            2,
            f"≤ +{ADDED_FIRST_TOKEN_MS:g} ms",
            lambda f, m: m - f <= ADDED_FIRST_TOKEN_MS,
            added=True,
        ),
    ),
    "import": (
        _ProbeRow(
            "import time (floor column: `import openai` alone)",
            "import_subject_s",
            "s",
            3,
            f"≤ {IMPORT_S:g} s",
            lambda f, m: m <= IMPORT_S,
            reference="import_reference_s",
        ),
    ),
}


def _probe_figures(
    row: _ProbeRow, got: Mapping[str, Outcome], subject: str = SUBJECT
) -> tuple[float, float] | None:
    floor, mine = got.get(LIMIT if row.reference is None else subject), got.get(subject)
    if floor is None or mine is None or not floor.results or not mine.results:
        return None
    return floor.median(row.reference or row.metric), mine.median(row.metric)


def _compared(row: _ProbeRow, floor: float, mine: float) -> str:
    if row.added:
        return f"{mine - floor:+.{row.digits}f} {row.unit}"
    return f"{mine / floor:.2f}x" if floor > 0 else "—"


def _probe_table(probes: tuple[Probe, ...], outcomes: Outcomes) -> list[str]:
    lines = [
        f"| probe | {LIMIT} | {SUBJECT} | ratio | target | | {SDK_SUBJECT} | ratio |",
        "|---|---:|---:|---:|---|---|---:|---:|",
    ]
    for probe in probes:
        got = outcomes.get(probe.key, {})
        for row in _PROBE_ROWS[probe.kind]:
            what = f"{probe.title}: {row.what} ({row.unit})"
            sdk = _probe_figures(row, got, SDK_SUBJECT)
            beside = "| — | — |" if sdk is None else f"| {sdk[1]:.{row.digits}f} | {_compared(row, *sdk)} |"
            figures = _probe_figures(row, got)
            if figures is None:
                lines.append(f"| {what} | failed | failed | — | {row.target} | not measured {beside}")
                continue
            floor, mine = figures
            verdict = "—" if row.met is None else "**met**" if row.met(floor, mine) else "**not met**"
            lines.append(
                f"| {what} | {floor:.{row.digits}f} | {mine:.{row.digits}f} | {_compared(row, floor, mine)} "
                f"| {row.target} | {verdict} {beside}"
            )
    return lines


def _probe_notes(probes: tuple[Probe, ...]) -> list[str]:
    notes = []
    for probe in probes:
        if probe.kind == "inflight":
            notes.append(
                f"- {probe.title}: {probe.runs} agent runs of `{probe.scenario}` kept {probe.in_flight} "
                f"in flight (after {probe.warmup} warm-up runs), one worker process per implementation "
                "and repetition. Event-loop lag: how much later than 10 ms a ticker task's "
                "`asyncio.sleep(0.01)` wakes during the wave. Memory: the resident set's peak during "
                "the wave (sampled by the ticker) minus its size just before it, divided by the runs "
                "in flight."
            )
        elif probe.kind == "history":
            low, high = probe.points
            notes.append(
                f"- {probe.title}: client CPU per run of `{probe.scenario}` (one model call) after a "
                f"history of {low} and of {high} user/assistant messages, {probe.runs} runs each in "
                f"{probe.slices} interleaved slices (fastest slice kept); (CPU({high}) - CPU({low})) / "
                f"{high - low} per model call."
            )
        elif probe.kind == "stream":
            low, high = probe.points
            notes.append(
                f"- {probe.title}: client CPU per streamed run of `{probe.model(low)}` and "
                f"`{probe.model(high)}` (fastest of {probe.slices} interleaved slices), "
                f"(CPU({high}) - CPU({low})) / {high - low}; time to first token is the median wall "
                f"time from the start of a `{probe.model(low)}` run (its tool round included) to its "
                "first text delta."
            )
        else:
            notes.append(
                f"- {probe.title}: a fresh interpreter times `import advisorchain, "
                "advisorchain.models.openai` and, alternating, `import openai` alone; median of "
                f"{probe.repeat} each."
            )
    return notes


_PROBE_DETAILS: dict[str, tuple[tuple[str, str, float, int], ...]] = {
    "inflight": (
        ("runs/s", "runs_per_s", 1, 0),
        ("p50 ms", "p50_ms", 1, 0),
        ("p99 ms", "p99_ms", 1, 0),
        ("lag p50 ms", "lag_p50_ms", 1, 2),
        ("lag p99 ms", "lag_p99_ms", 1, 1),
        ("KB per run in flight", "kb_per_run", 1, 1),
        ("client CPU ms/run", "cpu_per_run_s", 1000, 2),
        ("server CPU ms/run", "server_cpu_per_run_s", 1000, 2),
    ),
    "history": (
        ("CPU ms/run, fewer messages", "cpu_low_per_run_s", 1000, 3),
        ("CPU ms/run, more messages", "cpu_high_per_run_s", 1000, 3),
        ("µs per message per round", "us_per_message", 1, 3),
    ),
    "stream": (
        ("CPU ms/run, fewer chunks", "cpu_low_per_run_s", 1000, 3),
        ("CPU ms/run, more chunks", "cpu_high_per_run_s", 1000, 3),
        ("µs per chunk", "us_per_chunk", 1, 2),
        ("first token ms", "ttft_ms", 1, 2),
        ("first token ms, more chunks", "ttft_high_ms", 1, 2),
    ),
    "import": (
        ("import advisorchain, advisorchain.models.openai s", "import_subject_s", 1, 3),
        ("import openai s", "import_reference_s", 1, 3),
    ),
}
"""Per probe kind, the columns of its details table: (header, metric, scale, decimals)."""


def _probe_details(probe: Probe, got: Mapping[str, Outcome]) -> list[str]:
    columns = _PROBE_DETAILS[probe.kind]
    lines = [
        f"**{probe.title}**",
        "",
        "| implementation | " + " | ".join(c[0] for c in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for label, o in got.items():
        if not o.results:
            lines.append(f"| {label} | failed: {o.error} |" + " |" * (len(columns) - 1))
            continue
        cells = [
            f"{scale * o.median(metric):.{digits}f}" if all(metric in r for r in o.results) else "—"
            for _, metric, scale, digits in columns
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _details(cell: Cell, got: Mapping[str, Outcome]) -> list[str]:
    lines = [
        f"**{cell.title}** — `{cell.scenario}`, {cell.runs} runs, concurrency {cell.concurrency}, "
        f"latency {cell.latency_ms:g} ms" + (f", {cell.stream_chunks} chunks" if cell.stream_chunks else ""),
        "",
        "| implementation | ms/run | p50 ms | p99 ms | runs/s | CPU ms/run | peak RSS MB | import s "
        "| server CPU ms/run |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, o in got.items():
        if not o.results:
            lines.append(f"| {label} | failed: {o.error} |" + " |" * 7)
            continue
        lines.append(
            f"| {label} | {1000 * per_run(o, 'wall'):.2f} | {o.median('p50_ms'):.2f} | "
            f"{o.median('p99_ms'):.2f} | {o.median('runs_per_s'):.0f} | {1000 * per_run(o, 'cpu'):.2f} | "
            f"{o.median('peak_rss_mb'):.0f} | {o.median('import_s'):.2f} | "
            f"{1000 * per_run(o, 'server_cpu'):.2f} |"
        )
    return [*lines, ""]


def _versions(outcomes: Outcomes) -> list[str]:
    seen: dict[str, dict[str, str]] = {}
    for got in outcomes.values():
        for label, o in got.items():
            base = label.split(" +")[0]
            if o.results and base not in seen:
                seen[base] = o.results[0].get("versions", {})
    return [f"- {label}: " + ", ".join(f"{k} {v}" for k, v in vs.items()) for label, vs in seen.items()]


def _failures(outcomes: Outcomes, cells: tuple[Cell | Probe, ...]) -> list[str]:
    lines = []
    for cell in cells:
        for label, o in outcomes[cell.key].items():
            if o.error is not None:
                lines.append(f"- {label}, {cell.title}: {o.error}")
    return lines


def _install_line(requirements: tuple[str, ...]) -> str:
    """The pip command of a benchmark venv, this checkout shown as ``.``."""
    if requirements[:1] == ("-e",):
        extras = requirements[1][requirements[1].index("[") :] if "[" in requirements[1] else ""
        return f"pip install -e '.{extras}'  # this checkout"
    return "pip install " + " ".join(repr(r) for r in requirements)


def machine() -> str:
    """CPU model, CPUs usable, OS and python."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{model}, {cpus} CPUs, {platform.system()} {platform.release()}; load average {load} at the end"


def render(
    cells: tuple[Cell, ...],
    outcomes: Outcomes,
    *,
    reps: int,
    quick: bool,
    seconds: float,
    peers: Mapping[str, tuple[str, ...]],
    probes: tuple[Probe, ...] = (),
) -> str:
    """The whole report."""
    main_cells = tuple(c for c in cells if c.key != "hops")
    labels = [lb for lb in dict.fromkeys(lb for c in main_cells for lb in outcomes[c.key]) if lb != "floor"]
    peer_labels = [lb for lb in labels if lb not in (SUBJECT, SDK_SUBJECT, LIMIT)]
    limit_labels = ["floor", *(lb for lb in labels if lb != LIMIT)]
    has_limit = any(LIMIT in outcomes[c.key] for c in main_cells)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    kind = "quick smoke run (`--quick`): not for conclusions" if quick else "full run"
    out = [
        "# Benchmarks: advisorchain against the floor and its peers",
        "",
        f"`benchmarks/run` — {kind}; {reps} repetition(s) per cell, interleaved, median reported; "
        f"{when}; took {seconds / 60:.1f} min.",
        "",
        f"Machine: {machine()}.",
        "",
        "The floor is a hand-written tool loop on the raw `openai.AsyncOpenAI` client. Every implementation "
        "runs the same agent (an async `get_weather` tool) against the same scripted server on 127.0.0.1, "
        "which runs in its own process, and every answer and request count is checked. Each worker times "
        "its runs in slices and keeps the per-run time of its fastest slice (other processes on a shared "
        "machine only ever slow a slice down); the median of that over the interleaved repetitions is "
        "reported. Ratios are per agent run, implementation / floor: 1.10x is 10 % slower than the floor.",
        "",
        "The aiohttp floor is the limit of a Python client: the same hand-written loop on `aiohttp` + "
        "`orjson`, with no SDK (its own venv). The first two tables are ratios to it; the raw-SDK floor "
        "is the `floor` column there.",
        "",
        "`advisorchain` is the default install for a real model — `pip install 'advisorchain[openai]'` "
        "in a venv of its own (`benchmarks/.venvs/advisorchain`, this checkout, editable), which takes "
        "the aiohttp path (checked at the end of every cell); `advisorchain (sdk)` is the same install "
        "with `ADVISORCHAIN_HTTP=sdk`, every request on the SDK's own httpx2 stack.",
    ]
    if main_cells and has_limit:
        out += ["", "## Client CPU per agent run, ratio to the aiohttp floor (lower is better)", ""]
        out += _ratio_table(main_cells, outcomes, "cpu", limit_labels, LIMIT)
        out += ["", "## Time per agent run, ratio to the aiohttp floor (lower is better)", ""]
        out += _ratio_table(main_cells, outcomes, "wall", limit_labels, LIMIT)
    if main_cells:
        out += ["", "## Time per agent run, ratio to the raw-SDK floor (lower is better)", ""]
        out += _ratio_table(main_cells, outcomes, "wall", labels)
        out += ["", "## Client CPU per agent run, ratio to the raw-SDK floor (lower is better)", ""]
        out += _ratio_table(main_cells, outcomes, "cpu", labels)
        out += ["", "## The bar", "", *_bar_lines(main_cells, outcomes, peer_labels)]
    hops = [c for c in cells if c.key == "hops"]
    if hops:
        out += ["", "## Cost per advisor hop", "", *_hop_section(hops[0], outcomes["hops"])]
    if probes:
        out += ["", "## Scale probes: advisorchain against the aiohttp floor (medians over repetitions)", ""]
        out += [*_probe_table(probes, outcomes), "", *_probe_notes(probes)]
    if cells or probes:
        out += ["", "## Details (medians over repetitions)", ""]
    for cell in cells:
        out += _details(cell, outcomes[cell.key])
    for probe in probes:
        out += _probe_details(probe, outcomes.get(probe.key, {}))
    failures = _failures(outcomes, (*cells, *probes))
    if failures:
        out += ["## Not measured", "", *failures, ""]
    out += ["## Versions", "", *_versions(outcomes)]
    out += [
        "",
        "Benchmark venvs (under `benchmarks/.venvs/`, never project dependencies) are installed with:",
        "",
    ]
    out += [f"- {name}: `{_install_line(reqs)}`" for name, reqs in peers.items()]
    return "\n".join(out) + "\n"
