"""OpenTelemetry spans, through ``opentelemetry-api`` only.

The chain opens the spans, so advisor authors write no tracing code:

* ``advisorchain request`` — one per client request;
* ``advisor <name>`` — one per advisor invocation (nested through the recursion);
* ``chat <model>`` — one per model call, with the GenAI semantic-convention attributes;
* ``execute_tool <name>`` — one per tool execution.

When no tracer provider is installed (the API's default proxy), spans are skipped entirely, so an
untraced application pays nothing for them.

Spans never hold prompt, completion or tool-argument text unless the application opts in with the
OpenTelemetry GenAI switch ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``: an error
on a span names the exception's type only, since its message may quote what the model sent (a
tool's failure text often repeats argument values). With the switch on, the messages are kept.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ._streams import close_stream
from .model import ChatClientMessageAggregator, ChatResponse

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "TRACER_NAME",
    "Span",
    "SpanKind",
    "Status",
    "StatusCode",
    "capture_content",
    "tracing_enabled",
]

TRACER_NAME = "advisorchain"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
T = TypeVar("T")


def capture_content() -> bool:
    """True when the application opted in to message content on spans (``CAPTURE_CONTENT_ENV=true``)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"


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
    with _tracer().start_as_current_span(
        name,
        kind=kind,
        attributes=dict(attributes or {}),
        record_exception=False,  # the SDK would store the message; _record_error decides what goes
        set_status_on_exception=False,
    ) as s:
        try:
            yield s
        except Exception as exc:
            _record_error(s, exc)
            raise


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
    if capture_content():
        s.record_exception(exc)
        record_failure(s, type(exc).__qualname__, f"{type(exc).__name__}: {exc}")
    else:
        s.add_event("exception", {"exception.type": type(exc).__qualname__})
        record_failure(s, type(exc).__qualname__, None)


def record_failure(s: Span, error_type: str, text: str | None) -> None:
    """Mark ``s`` failed with ``error_type``; ``text`` (which may quote prompt or argument values)
    becomes the status description only when the application opted in to content capture."""
    s.set_attribute("error.type", error_type)
    s.set_status(Status(StatusCode.ERROR, text if text is not None and capture_content() else error_type))


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
