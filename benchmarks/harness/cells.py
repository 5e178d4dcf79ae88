"""What is measured: the implementations and the cells (scenario x concurrency x latency)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from harness.scenarios import Scenario


@dataclass(frozen=True, slots=True)
class Implementation:
    """One contender: a module under ``benchmarks/impls`` run by the python of ``env``."""

    label: str
    module: str
    env: str  # "main" (the project venv) or a peer venv name
    options: dict[str, Any] = field(default_factory=dict)
    variants: tuple[tuple[str, dict[str, Any]], ...] = ()
    """Labelled option sets measured in one process, taking turns slice by slice."""

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels this implementation reports under."""
        return tuple(label for label, _ in self.variants) or (self.label,)


FLOOR = Implementation("floor", "floor", "main")
AIOHTTP_FLOOR = Implementation("aiohttp floor", "aiohttp_floor", "aiohttp")
"""The limit of a Python client (issue 13): a hand-written loop on aiohttp + orjson, no SDK."""
ADVISORCHAIN = Implementation("advisorchain", "advisorchain_impl", "advisorchain")
"""advisorchain as a user of a real model installs it (``advisorchain[openai]``, its own venv)."""
ADVISORCHAIN_SDK = Implementation("advisorchain (sdk)", "advisorchain_impl", "advisorchain", {"http": "sdk"})
"""The same install with ``ADVISORCHAIN_HTTP=sdk``: every request on the SDK's own httpx2 stack."""
SUBJECTS = (ADVISORCHAIN, ADVISORCHAIN_SDK)
PEERS = (
    Implementation("pydantic-ai", "pydantic_ai_impl", "pydantic-ai"),
    Implementation("langchain", "langchain_impl", "langchain"),
    Implementation("openai-agents", "openai_agents_impl", "openai-agents"),
)
MAIN_SET = (FLOOR, AIOHTTP_FLOOR, *SUBJECTS, *PEERS)
ADVISOR_COUNTS = (0, 3, 10)
ADVISOR_SET = (
    FLOOR,
    AIOHTTP_FLOOR,
    Implementation(
        "advisorchain +N",
        "advisorchain_impl",
        "advisorchain",
        variants=tuple((f"advisorchain +{n}", {"advisors": n}) for n in ADVISOR_COUNTS),
    ),
)
"""The hop cell: the advisor counts run in one process, so their difference is not process noise."""


@dataclass(frozen=True, slots=True)
class Cell:
    """One row of the table: every implementation does ``runs`` agent runs of ``scenario``."""

    key: str
    title: str
    scenario: str
    runs: int
    concurrency: int = 1
    latency_ms: float = 0.0
    stream_chunks: int | None = None
    impls: tuple[Implementation, ...] = MAIN_SET
    warmup: int = 10
    slices: int = 5
    timeout_s: float = 300
    """How long one worker may take over this cell before it is reported as failed."""

    @property
    def model(self) -> str:
        """The scenario string the server reads from the request's ``model``."""
        return Scenario.name_for(self.scenario, self.stream_chunks, self.latency_ms)

    def worker_spec(self, impl: Implementation) -> dict[str, Any]:
        """This cell in the worker protocol, for ``impl``."""
        spec = {
            "key": self.key,
            "model": self.model,
            "stream": self.stream_chunks is not None,
            "runs": self.runs,
            "concurrency": self.concurrency,
            "warmup": self.warmup,
            "slices": self.slices,
        }
        if impl.variants:
            spec["variants"] = [{"label": label, "options": options} for label, options in impl.variants]
        return spec

    def summary(self, got: dict[str, Any]) -> str:
        """One progress line for a measured repetition."""
        return f"{1000 * got['wall_per_run_s']:8.2f} ms/run"


FULL_CELLS = (
    Cell("seq", "sequential, 0 ms", "weather", runs=200),
    # Concurrent cells warm up with one full wave, so every lane has its pooled connection.
    Cell("c50", "50 concurrent, 0 ms", "weather", runs=300, concurrency=50, warmup=50, slices=3),
    Cell(
        "c200",
        "200 concurrent, 50 ms",
        "weather",
        runs=400,
        concurrency=200,
        latency_ms=50,
        warmup=200,
        slices=1,
    ),
    Cell("stream", "streaming, 200 chunks", "weather", runs=60, stream_chunks=200),
    Cell("loop-1", "loop-1, sequential", "loop-1", runs=200),
    Cell("loop-5", "loop-5, sequential", "loop-5", runs=80),
    Cell("loop-20", "loop-20, sequential", "loop-20", runs=15),
    # A hop is microseconds against milliseconds per model call: many short slices, fastest kept.
    Cell("hops", "loop-5, pass-through advisors", "loop-5", runs=120, slices=12, impls=ADVISOR_SET),
)


QUICK_CONCURRENCY = 10


def quick(cells: tuple[Cell, ...]) -> tuple[Cell, ...]:
    """The same cells with a sliver of the work, one slice and at most ``QUICK_CONCURRENCY`` lanes:
    a smoke run that checks every implementation still does every cell right, not a measurement."""
    return tuple(
        replace(
            c,
            runs=max(2, min(c.runs // 20, 10)),
            concurrency=min(c.concurrency, QUICK_CONCURRENCY),
            warmup=1,
            slices=1,
        )
        for c in cells
    )
