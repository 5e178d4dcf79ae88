"""The spans of a run, collected in memory and shaped as a tree: the machinery behind
``advisorchain chat --trace`` and the trace tree of ``advisorchain web``.

``SpanCollector`` is one span processor on the global OpenTelemetry SDK tracer provider (installed
when the application has none). It keeps spans two ways: the command line's single collection
(``start()`` … ``take()``), and per run (``with collector.collecting() as spans:``), where only the
spans of the traces started inside the block are kept, so runs that overlap (two conversations of
the web page) never mix their spans. ``span_tree`` turns spans into ``SpanNode``s: request → advisor
hops → tool-loop rounds → model calls → tool calls, each with its duration and tokens.

Needs the OpenTelemetry SDK (the ``otel`` extra).
"""

from __future__ import annotations

import contextvars
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan

from .observability import OPERATION_COST, RUN_COST, RUN_INPUT_TOKENS, RUN_OUTPUT_TOKENS
from .observability import TOOL_CALL_ARGUMENTS as ARGUMENTS
from .observability import TOOL_CALL_RESULT as RESULT

__all__ = ["ARGUMENTS", "RESULT", "SpanCollector", "SpanNode", "span_tree"]


_RUN: contextvars.ContextVar[list[ReadableSpan] | None] = contextvars.ContextVar(
    "advisorchain_span_run", default=None
)
"""The span list of the run collecting in this context (``SpanCollector.collecting``)."""


class SpanCollector(SpanProcessor):
    """Keeps the spans that end while it is collecting: all of them between ``start()`` and
    ``take()``, and per run those of the traces started inside ``collecting()``."""

    _installed: SpanCollector | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._spans: list[ReadableSpan] = []
        self._active = False
        self._runs: dict[int, list[ReadableSpan]] = {}  # trace id -> the list of the run it belongs to
        self._runs_lock = threading.Lock()

    @classmethod
    def install(cls) -> SpanCollector:
        """The process's collector, added once to the global SDK tracer provider."""
        with cls._lock:
            if cls._installed is None:
                provider = trace.get_tracer_provider()
                if not isinstance(provider, TracerProvider):
                    provider = TracerProvider()
                    trace.set_tracer_provider(provider)
                    provider = trace.get_tracer_provider()
                if not isinstance(provider, TracerProvider):
                    raise RuntimeError(
                        f"collecting spans needs the OpenTelemetry SDK's TracerProvider, but the "
                        f"application installed {type(provider).__name__!r}"
                    )
                collector = cls()
                provider.add_span_processor(collector)
                cls._installed = collector
            return cls._installed

    def start(self) -> None:
        """Forget earlier spans and keep the ones that end from now on."""
        self._spans = []
        self._active = True

    def take(self) -> list[ReadableSpan]:
        """Stop collecting and return the spans kept."""
        self._active = False
        spans, self._spans = self._spans, []
        return spans

    @contextmanager
    def collecting(self) -> Iterator[list[ReadableSpan]]:
        """A list that receives, as they end, the spans of every trace started inside the block (in
        this task and the tasks and threads it starts); spans of other runs never reach it."""
        spans: list[ReadableSpan] = []
        token = _RUN.set(spans)
        try:
            yield spans
        finally:
            _RUN.reset(token)
            with self._runs_lock:
                for trace_id in [t for t, kept in self._runs.items() if kept is spans]:
                    del self._runs[trace_id]

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        """A trace started inside ``collecting()`` belongs to that run."""
        run = _RUN.get()
        if run is not None and span.context is not None:
            with self._runs_lock:
                self._runs.setdefault(span.context.trace_id, run)

    def on_end(self, span: ReadableSpan) -> None:
        """Keep ``span`` while collecting, and in the list of the run its trace belongs to."""
        if self._active:
            self._spans.append(span)
        if self._runs and span.context is not None:
            with self._runs_lock:
                run = self._runs.get(span.context.trace_id)
            if run is not None:
                run.append(span)

    def shutdown(self) -> None:
        """Stop collecting."""
        self._active = False

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered."""
        return True


NodeKind = Literal["request", "advisor", "model", "tool", "round", "handoff", "span"]


@dataclass(frozen=True, slots=True)
class SpanNode:
    """One node of the tree: a span (its name, duration, tokens, finish reasons, a watched tool
    call's arguments and result, the error it ended with, a tool call's id) or a tool-loop round
    grouping spans."""

    name: str
    kind: NodeKind
    ms: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    finish_reasons: tuple[str, ...] = ()
    arguments: str | None = None
    result: str | None = None
    error: str | None = None
    call_id: str | None = None
    children: tuple[SpanNode, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The node and its children as JSON-ready values (None fields left out)."""
        data: dict[str, Any] = {"name": self.name, "kind": self.kind}
        for key in ("ms", "tokens_in", "tokens_out", "cost", "arguments", "result", "error", "call_id"):
            value = getattr(self, key)
            if value is not None:
                data[key] = round(value, 3) if key == "ms" else value
        if self.finish_reasons:
            data["finish_reasons"] = list(self.finish_reasons)
        data["children"] = [child.to_dict() for child in self.children]
        return data


def span_tree(spans: Sequence[ReadableSpan]) -> tuple[SpanNode, ...]:
    """The spans as trees (one per root): request, advisor hops, tool-loop rounds, model calls, tool
    calls. Under an advisor that ran tools, every model call opens a round and the tool calls it
    asked for follow it."""
    ids = {_id(s) for s in spans}
    children: dict[int, list[ReadableSpan]] = {}
    roots: list[ReadableSpan] = []
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        parent = s.parent.span_id if s.parent is not None else None
        if parent is not None and parent in ids:
            children.setdefault(parent, []).append(s)
        else:
            roots.append(s)
    return tuple(_node(root, children) for root in roots)


def _node(span: ReadableSpan, children: dict[int, list[ReadableSpan]]) -> SpanNode:
    kids = children.get(_id(span), [])
    kind = _kind(span.name)
    if kind == "advisor" and any(_kind(k.name) == "tool" for k in kids):
        nodes: tuple[SpanNode, ...] = _rounds(kids, children)
    else:
        nodes = tuple(_node(kid, children) for kid in kids)
    reasons = _attr(span, "gen_ai.response.finish_reasons")
    return SpanNode(
        name=span.name,
        kind=kind,
        ms=_ms(span),
        tokens_in=_int(_attr(span, "gen_ai.usage.input_tokens", RUN_INPUT_TOKENS)),
        tokens_out=_int(_attr(span, "gen_ai.usage.output_tokens", RUN_OUTPUT_TOKENS)),
        cost=_float(_attr(span, OPERATION_COST, RUN_COST)),
        finish_reasons=tuple(str(r) for r in reasons) if isinstance(reasons, Sequence) else (),
        arguments=_text(_attr(span, ARGUMENTS), compact=True),
        result=_text(_attr(span, RESULT)),
        error=None if span.status.is_ok else (span.status.description or "error"),
        call_id=_text(_attr(span, "gen_ai.tool.call.id")),
        children=nodes,
    )


def _rounds(kids: list[ReadableSpan], children: dict[int, list[ReadableSpan]]) -> tuple[SpanNode, ...]:
    """The tool loop: every model hop opens a round, the tools it asked for follow it."""
    rounds: list[list[ReadableSpan]] = []
    for kid in kids:
        if not (_kind(kid.name) == "tool" and rounds):
            rounds.append([])
        rounds[-1].append(kid)
    return tuple(
        SpanNode(
            name=f"round {i}",
            kind="round",
            ms=_ms_of(spans),
            children=tuple(_node(s, children) for s in spans),
        )
        for i, spans in enumerate(rounds, 1)
    )


def _kind(name: str) -> NodeKind:
    if name.startswith("chat "):
        return "model"
    if name.startswith("execute_tool "):
        return "tool"
    if name.startswith("advisor "):
        return "advisor"
    if name == "advisorchain request":
        return "request"
    if name.startswith("handoff "):
        return "handoff"
    return "span"


def _id(span: ReadableSpan) -> int:
    return span.context.span_id if span.context is not None else 0


def _ms(span: ReadableSpan) -> float | None:
    if span.start_time is None or span.end_time is None:
        return None
    return (span.end_time - span.start_time) / 1e6


def _ms_of(spans: Sequence[ReadableSpan]) -> float | None:
    """From the first span's start to the last one's end."""
    starts = [s.start_time for s in spans if s.start_time is not None]
    ends = [s.end_time for s in spans if s.end_time is not None]
    return (max(ends) - min(starts)) / 1e6 if starts and ends else None


def _attr(span: ReadableSpan, key: str, alternative: str | None = None) -> Any:
    """The span's attribute ``key`` (else ``alternative``: a request span's run totals)."""
    attributes = span.attributes or {}
    value = attributes.get(key)
    return attributes.get(alternative) if value is None and alternative is not None else value


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any, *, compact: bool = False) -> str | None:
    if value is None:
        return None
    text = str(value)
    if compact:
        try:
            return json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
        except ValueError:
            return text
    return text
