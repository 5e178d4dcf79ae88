"""The spans tests read: one in-memory exporter on this process's tracer provider (OpenTelemetry has
one global provider, so it is installed once, with the exporter, the first time a test asks).
Every test that asks gets the exporter emptied; the ``spans`` fixture is registered suite-wide."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_exporter = InMemorySpanExporter()
_installed: list[TracerProvider] = []


def span_exporter() -> InMemorySpanExporter:
    """The process's in-memory span exporter, emptied (the provider and exporter installed once)."""
    if not _installed:
        if not isinstance(trace.get_tracer_provider(), TracerProvider):
            trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider)
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        _installed.append(provider)
    _exporter.clear()
    return _exporter


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans this test finished (``spans.get_finished_spans()``)."""
    yield span_exporter()
