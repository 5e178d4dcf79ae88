"""OpenTelemetry spans, through ``opentelemetry-api`` only.

The chain opens the spans, so advisor authors write no tracing code:

* ``advisorchain request`` — one per client request;
* ``advisor <name>`` — one per advisor invocation (nested through the recursion);
* ``chat <model>`` — one per model call, with the GenAI semantic-convention attributes;
* ``execute_tool <name>`` — one per tool execution.

When no tracer provider is installed (the API's default proxy), spans are skipped entirely, so an
untraced application pays nothing for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ._streams import close_stream
from .model import ChatClientMessageAggregator, ChatResponse

__all__ = ["TRACER_NAME", "Span", "SpanKind", "Status", "StatusCode", "tracing_enabled"]

TRACER_NAME = "advisorchain"
T = TypeVar("T")


def tracing_enabled() -> bool:
    """True once an application has installed a real tracer provider."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


@contextmanager
def span(
    name: str, attributes: Mapping[str, Any] | None = None, kind: SpanKind = SpanKind.INTERNAL
) -> Iterator[Span | None]:
    """A current span named ``name`` (or nothing when tracing is off); errors are recorded on it."""
    if not tracing_enabled():
        yield None
        return
    with _tracer().start_as_current_span(name, kind=kind, attributes=dict(attributes or {})) as s:
        yield s


async def traced_stream(
    name: str,
    source: AsyncIterator[T],
    attributes: Mapping[str, Any] | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    on_complete: Callable[[Span, list[T]], None] | None = None,
) -> AsyncIterator[T]:
    """Re-yields ``source`` inside a span that stays open for the whole stream.

    The span is made current only while ``source`` computes its next item (never across our own
    ``yield``), so spans opened downstream nest under it without leaking into the consumer.
    ``on_complete`` sees the span and every item once the stream has ended normally.
    """
    s = _tracer().start_span(name, kind=kind, attributes=dict(attributes or {}))
    ctx = trace.set_span_in_context(s)
    items: list[T] | None = [] if on_complete is not None else None
    try:
        while True:
            token = otel_context.attach(ctx)
            try:
                item = await anext(source)
            except StopAsyncIteration:
                break
            finally:
                otel_context.detach(token)
            if items is not None:
                items.append(item)
            yield item
        if on_complete is not None and items is not None:
            on_complete(s, items)
    except Exception as exc:  # not GeneratorExit or cancellation: a consumer may stop early
        _record_error(s, exc)
        raise
    finally:
        await close_stream(source)
        s.end()


def _record_error(s: Span, exc: BaseException) -> None:
    s.record_exception(exc)
    s.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    s.set_attribute("error.type", type(exc).__qualname__)


def model_span_attributes(model_name: str | None, provider: str | None) -> dict[str, Any]:
    """GenAI request attributes for a ``chat <model>`` span."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
    if model_name:
        attrs["gen_ai.request.model"] = model_name
    if provider:
        attrs["gen_ai.provider.name"] = provider
    return attrs


def record_response(s: Span | None, response: ChatResponse | None) -> None:
    """GenAI response attributes (id, model, finish reasons, token usage) on a model span."""
    if s is None or response is None:
        return
    meta = response.metadata
    if meta.id:
        s.set_attribute("gen_ai.response.id", meta.id)
    if meta.model:
        s.set_attribute("gen_ai.response.model", meta.model)
    reasons = [g.finish_reason for g in response.generations if g.finish_reason] or (
        [meta.finish_reason] if meta.finish_reason else []
    )
    if reasons:
        s.set_attribute("gen_ai.response.finish_reasons", reasons)
    if meta.usage is not None:
        s.set_attribute("gen_ai.usage.input_tokens", meta.usage.prompt_tokens)
        s.set_attribute("gen_ai.usage.output_tokens", meta.usage.completion_tokens)


def tool_span_attributes(tool_name: str, call_id: str) -> dict[str, Any]:
    """GenAI attributes for an ``execute_tool <name>`` span."""
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool_name,
        "gen_ai.tool.call.id": call_id,
    }


def record_stream_response(s: Span, chunks: list[ChatResponse]) -> None:
    """GenAI response attributes of a streamed model call, from its aggregated chunks."""
    record_response(s, ChatClientMessageAggregator.aggregate(chunks))
