"""OpenTelemetry spans, through ``opentelemetry-api`` only.

The chain opens the spans, so advisor authors write no tracing code:

* ``advisorchain request`` — one per client request;
* ``advisor <name>`` — one per advisor invocation (nested through the recursion);
* ``chat <model>`` — one per model call, with the GenAI semantic-convention attributes;
* ``execute_tool <name>`` — one per tool execution;
* ``evaluate <evaluator name>`` — one per evaluation of an answer (``advisorchain.evaluation``).

Every model call also records the GenAI client metrics through the OpenTelemetry metrics API:
``gen_ai.client.operation.duration`` (seconds) and ``gen_ai.client.token.usage`` (tokens, by
``gen_ai.token.type``).

When neither a tracer provider nor a meter provider is installed (the API's default proxies), spans
and metrics are skipped entirely, so an uninstrumented application pays nothing for them.

Spans never hold prompt, completion or tool-argument text unless the application opts in with the
OpenTelemetry GenAI switch ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` or
``set_content_capture(True)``: an error on a span names the exception's type only, since its
message may quote what the model sent (a tool's failure text often repeats argument values).
With the switch on, the messages are kept.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as _metrics_globals
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ._streams import close_stream
from .model import ChatClientMessageAggregator, ChatOptions, ChatResponse
from .usage import RunUsage

__all__ = [
    "AGENT_NAME",
    "CAPTURE_CONTENT_ENV",
    "OPERATION_DURATION",
    "TOKEN_USAGE",
    "TOOL_CALL_ARGUMENTS",
    "TOOL_CALL_RESULT",
    "TRACER_NAME",
    "Span",
    "SpanKind",
    "Status",
    "StatusCode",
    "content_capture_enabled",
    "current_span",
    "metrics_enabled",
    "set_content_capture",
    "telemetry_enabled",
    "tracing_enabled",
]

TRACER_NAME = "advisorchain"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
AGENT_NAME = "gen_ai.agent.name"
"""The agent a model call was made for (API.md §18), on its model span."""
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
"""The span attribute a watched tool call's arguments go in (``chat --trace``, the web page only)."""
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
"""The span attribute a watched tool call's result goes in."""
T = TypeVar("T")


_PROVIDER_FROM_ENV = {
    "tracing": "OTEL_PYTHON_TRACER_PROVIDER" in os.environ,
    "metrics": "OTEL_PYTHON_METER_PROVIDER" in os.environ,
}
"""Whether OpenTelemetry would load a provider named in the environment (read at import)."""

_installed = {"tracing": False, "metrics": False}
"""Which real providers were seen: OpenTelemetry sets a global provider once and never takes it
back, so once seen the answer is kept, and the checks on every call cost a dict read."""


def tracing_enabled() -> bool:
    """True once an application has installed a real tracer provider."""
    if _installed["tracing"]:
        return True
    if getattr(trace, "_TRACER_PROVIDER", True) is None and not _PROVIDER_FROM_ENV["tracing"]:
        return False  # none set yet, and none for the environment to load (read in OTel's globals)
    installed = _installed["tracing"] = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return installed


def metrics_enabled() -> bool:
    """True once an application has installed a real meter provider."""
    if _installed["metrics"]:
        return True
    if getattr(_metrics_globals, "_METER_PROVIDER", True) is None and not _PROVIDER_FROM_ENV["metrics"]:
        return False
    installed = _installed["metrics"] = type(metrics.get_meter_provider()).__name__ != "_ProxyMeterProvider"
    return installed


def telemetry_enabled() -> bool:
    """True when spans or metrics go somewhere."""
    return tracing_enabled() or metrics_enabled()


_capture_override: bool | None = None


def set_content_capture(enabled: bool | None) -> None:
    """Record (True) or never record (False) message and tool-argument text on spans; None defers
    to the ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` environment variable."""
    global _capture_override
    _capture_override = enabled


def content_capture_enabled() -> bool:
    """Whether spans may hold prompt, answer and tool-argument text (off unless opted in)."""
    if _capture_override is not None:
        return _capture_override
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in {"true", "1", "yes"}


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


def current_span() -> Span | None:
    """The span the chain opened for the advisor now running (``advisor <name>``), for the advisor
    to add events or attributes to; None when tracing is off.

    The chain makes an advisor's span current while the advisor's own code runs (on the stream
    path: while it computes its next chunk), so an advisor calls this from its own code."""
    if not tracing_enabled():
        return None
    s = trace.get_current_span()
    return s if s.is_recording() else None


def _record_error(s: Span, exc: BaseException) -> None:
    if content_capture_enabled():
        s.record_exception(exc)
        record_failure(s, type(exc).__qualname__, f"{type(exc).__name__}: {exc}")
    else:
        s.add_event("exception", {"exception.type": type(exc).__qualname__})
        record_failure(s, type(exc).__qualname__, None)


def record_failure(s: Span, error_type: str, text: str | None) -> None:
    """Mark ``s`` failed with ``error_type``; ``text`` (which may quote prompt or argument values)
    becomes the status description only when the application opted in to content capture."""
    s.set_attribute("error.type", error_type)
    s.set_status(
        Status(StatusCode.ERROR, text if text is not None and content_capture_enabled() else error_type)
    )


def model_span_attributes(
    model_name: str | None,
    provider: str | None,
    options: ChatOptions | None = None,
    server_url: str | None = None,
) -> dict[str, Any]:
    """GenAI request attributes for a ``chat <model>`` span: model, provider, the request's
    parameters and the server's address and port."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
    if model_name:
        attrs["gen_ai.request.model"] = model_name
    if provider:
        attrs["gen_ai.provider.name"] = provider
    if options is not None:
        for key, value in (
            ("gen_ai.request.temperature", options.temperature),
            ("gen_ai.request.max_tokens", options.max_tokens),
            ("gen_ai.request.top_p", options.top_p),
        ):
            if value is not None:
                attrs[key] = value
        if options.stop:
            attrs["gen_ai.request.stop_sequences"] = list(options.stop)
    if server_url:
        parts = urlsplit(server_url)
        if parts.hostname:
            attrs["server.address"] = parts.hostname
            port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
            if port is not None:
                attrs["server.port"] = port
    return attrs


def server_url_of(model: object) -> str | None:
    """The base URL of a provider model's SDK client (``model.client.base_url``), when it has one."""
    url = getattr(getattr(model, "client", None), "base_url", None)
    return str(url) if url is not None else None


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
    usage = meta.usage
    if usage is not None:
        s.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
        s.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
        if usage.cache_read_tokens:
            s.set_attribute(CACHE_READ_TOKENS, usage.cache_read_tokens)
        if usage.cache_write_tokens:
            s.set_attribute(CACHE_WRITE_TOKENS, usage.cache_write_tokens)
        if usage.cost is not None:
            s.set_attribute(OPERATION_COST, float(usage.cost))


OPERATION_COST = "operation.cost"
"""The model span's cost in USD (a float), when the response was priced (§17)."""
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
RUN_REQUESTS = "advisorchain.run.requests"
RUN_TOOL_CALLS = "advisorchain.run.tool_calls"
RUN_COST = "advisorchain.run.cost"
RUN_INPUT_TOKENS = "advisorchain.run.input_tokens"
RUN_OUTPUT_TOKENS = "advisorchain.run.output_tokens"


def record_run(s: Span | None, run: RunUsage) -> None:
    """A run's totals on its request span: model calls sent, tool calls run, tokens (left out when
    no response reported any, as the CLI's summary then says ``n/a``), and the cost in USD (a
    float; left out while unknown)."""
    if s is None:
        return
    s.set_attribute(RUN_REQUESTS, run.requests)
    s.set_attribute(RUN_TOOL_CALLS, run.tool_calls)
    cost = run.usage.cost
    if run.usage.total_tokens or cost is not None:
        s.set_attribute(RUN_INPUT_TOKENS, run.usage.prompt_tokens)
        s.set_attribute(RUN_OUTPUT_TOKENS, run.usage.completion_tokens)
    if cost is not None:
        s.set_attribute(RUN_COST, float(cost))


EVALUATION_PASSED = "advisorchain.evaluation.passed"
EVALUATION_SCORE = "advisorchain.evaluation.score"
EVALUATION_FEEDBACK = "advisorchain.evaluation.feedback"


def record_evaluation(s: Span | None, passed: bool, score: float | None, feedback: str) -> None:
    """An evaluation's verdict on its ``evaluate <name>`` span: passed and score (when it has one);
    the feedback only with content capture on, since it may quote the answer."""
    if s is None:
        return
    s.set_attribute(EVALUATION_PASSED, passed)
    if score is not None:
        s.set_attribute(EVALUATION_SCORE, score)
    if feedback and content_capture_enabled():
        s.set_attribute(EVALUATION_FEEDBACK, feedback)


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


# -- GenAI client metrics ----------------------------------------------------------------------------

OPERATION_DURATION = "gen_ai.client.operation.duration"
TOKEN_USAGE = "gen_ai.client.token.usage"
_METRIC_KEYS = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "server.address",
    "server.port",
)
# the bucket boundaries the GenAI semantic conventions advise
_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
_instruments: tuple[object, metrics.Histogram, metrics.Histogram] | None = None


def _histograms() -> tuple[metrics.Histogram, metrics.Histogram]:
    global _instruments
    provider = metrics.get_meter_provider()
    if _instruments is None or _instruments[0] is not provider:
        meter = metrics.get_meter(TRACER_NAME)
        duration = meter.create_histogram(
            OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS),
        )
        tokens = meter.create_histogram(
            TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=list(_TOKEN_BUCKETS),
        )
        _instruments = (provider, duration, tokens)
    return _instruments[1], _instruments[2]


def record_model_metrics(
    attributes: Mapping[str, Any],
    seconds: float,
    response: ChatResponse | None,
    error: BaseException | None = None,
) -> None:
    """One model call's duration and token usage on the GenAI client histograms."""
    if not metrics_enabled():
        return
    duration, tokens = _histograms()
    attrs: dict[str, Any] = {k: attributes[k] for k in _METRIC_KEYS if k in attributes}
    if response is not None and response.metadata.model:
        attrs["gen_ai.response.model"] = response.metadata.model
    if error is not None:
        attrs["error.type"] = type(error).__qualname__
    duration.record(seconds, attrs)
    usage = response.metadata.usage if response is not None else None
    if usage is not None and error is None:
        tokens.record(usage.prompt_tokens, {**attrs, "gen_ai.token.type": "input"})
        tokens.record(usage.completion_tokens, {**attrs, "gen_ai.token.type": "output"})


class _ModelCall:
    """What ``model_call`` yields: hand it the response once the model answered."""

    __slots__ = ("response", "span")

    def __init__(self, s: Span | None) -> None:
        self.span = s
        self.response: ChatResponse | None = None

    def __call__(self, response: ChatResponse | None) -> None:
        self.response = response
        record_response(self.span, response)


@contextmanager
def model_call(name: str, attributes: Mapping[str, Any]) -> Iterator[_ModelCall]:
    """The ``chat <model>`` span of a blocking model call, and its GenAI metrics."""
    start = time.perf_counter()
    with span(name, attributes, SpanKind.CLIENT) as s:
        call = _ModelCall(s)
        try:
            yield call
        except Exception as exc:
            record_model_metrics(attributes, time.perf_counter() - start, None, exc)
            raise
    record_model_metrics(attributes, time.perf_counter() - start, call.response)


async def model_stream(
    name: str,
    source: AsyncIterator[T],
    attributes: Mapping[str, Any],
    responses: Callable[[list[T]], list[ChatResponse]],
) -> AsyncIterator[T]:
    """The ``chat <model>`` span of a streamed model call (open for the whole stream), and its GenAI
    metrics once the stream ended."""
    start = time.perf_counter()
    done: list[ChatResponse | None] = []

    def complete(s: Span, items: list[T]) -> None:
        aggregated = ChatClientMessageAggregator.aggregate(responses(items))
        record_response(s, aggregated)
        done.append(aggregated)

    stream = traced_stream(name, source, attributes, SpanKind.CLIENT, complete)
    try:
        async for item in stream:
            yield item
    except Exception as exc:
        record_model_metrics(attributes, time.perf_counter() - start, None, exc)
        raise
    finally:
        await close_stream(stream)
    if done:
        record_model_metrics(attributes, time.perf_counter() - start, done[0])


# -- retrieval (advisorchain.rag) --------------------------------------------------------------------


def embedding_span_attributes(model_name: str, inputs: int) -> dict[str, Any]:
    """GenAI attributes for an ``embeddings <model>`` span."""
    return {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.request.model": model_name,
        "advisorchain.rag.inputs": inputs,
    }


def retrieve_span_attributes(top_k: int, filter_text: str | None) -> dict[str, Any]:
    """Attributes for a ``retrieve <store>`` span (the documents found are added when it ends)."""
    attrs: dict[str, Any] = {"advisorchain.rag.top_k": top_k}
    if filter_text is not None:
        attrs["advisorchain.rag.filter"] = filter_text
    return attrs


def add_span_event(name: str, attributes: Mapping[str, Any]) -> None:
    """An event on the current span (nothing when tracing is off)."""
    if tracing_enabled():
        trace.get_current_span().add_event(name, dict(attributes))
