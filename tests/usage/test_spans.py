"""§17 on the spans: ``operation.cost`` on each model span, the run's totals on the request span."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from usage_support import PATHS, PRICES, Path, asks, run, says, weather

from advisorchain import ChatClient, ScriptedChatModel, Usage, UsageLimitExceeded, UsageLimits

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    provider.add_span_processor(SimpleSpanProcessor(_exporter))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _exporter.clear()
    yield _exporter


def _named(name: str, finished: tuple[ReadableSpan, ...]) -> list[dict[str, object]]:
    return [dict(s.attributes or {}) for s in finished if s.name == name]


@pytest.mark.parametrize("path", PATHS)
async def test_each_model_call_has_its_cost_and_the_request_the_runs_totals(
    spans: InMemorySpanExporter, path: Path
) -> None:
    model = ScriptedChatModel([asks("Oslo", usage=Usage(100, 10, cache_read_tokens=40)), says("Sunny.")])
    await run(ChatClient(model, default_tools=[weather], prices=PRICES).prompt("W?"), path)
    finished = spans.get_finished_spans()
    models = _named("chat scripted", finished)
    # 60 uncached + 40 cached (at the input rate: no cache price) at $2, 10 out at $10 per million
    assert [m["operation.cost"] for m in models] == [0.0003, 0.0003]
    assert models[0]["gen_ai.usage.cache_read.input_tokens"] == 40
    request = _named("advisorchain request", finished)[0]
    assert request["advisorchain.run.requests"] == 2
    assert request["advisorchain.run.tool_calls"] == 1
    assert request["advisorchain.run.cost"] == pytest.approx(0.0006)


@pytest.mark.parametrize("path", PATHS)
async def test_an_unpriced_run_has_no_cost_attribute_and_a_failed_run_keeps_its_totals(
    spans: InMemorySpanExporter, path: Path
) -> None:
    model = ScriptedChatModel([asks("Oslo"), says("x")])
    with pytest.raises(UsageLimitExceeded):
        await run(
            ChatClient(model, default_tools=[weather], usage_limits=UsageLimits(request_limit=1)).prompt(
                "W?"
            ),
            path,
        )
    finished = spans.get_finished_spans()
    assert all("operation.cost" not in m for m in _named("chat scripted", finished))
    request = _named("advisorchain request", finished)[0]
    assert request["advisorchain.run.requests"] == 1 and request["advisorchain.run.tool_calls"] == 1
    assert "advisorchain.run.cost" not in request
