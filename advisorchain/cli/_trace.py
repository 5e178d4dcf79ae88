"""``--trace``: collect the run's OpenTelemetry spans in memory and render them as a tree.

The CLI installs one span processor on the global SDK tracer provider (installing the provider when
the application has none); it keeps spans only while a collection is active.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from rich.text import Text
from rich.tree import Tree

from ._display import ARGUMENTS, RESULT, shorten

__all__ = ["SpanCollector", "render_tree", "shorten"]


class SpanCollector(SpanProcessor):
    """Keeps the spans that end while it is collecting (between ``start()`` and ``take()``)."""

    _installed: SpanCollector | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._spans: list[ReadableSpan] = []
        self._active = False

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
                        f"--trace needs the OpenTelemetry SDK's TracerProvider, but the application "
                        f"installed {type(provider).__name__!r}"
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

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts."""

    def on_end(self, span: ReadableSpan) -> None:
        """Keep ``span`` while collecting."""
        if self._active:
            self._spans.append(span)

    def shutdown(self) -> None:
        """Stop collecting."""
        self._active = False

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered."""
        return True


def _ms(span: ReadableSpan) -> str:
    if span.start_time is None or span.end_time is None:
        return ""
    return f"{(span.end_time - span.start_time) / 1e6:.0f} ms"


def _attr(span: ReadableSpan, key: str) -> Any:
    return (span.attributes or {}).get(key)


def _label(span: ReadableSpan) -> Text:
    name = span.name
    text = Text()
    style = "bold"
    if name.startswith("chat "):
        style = "bold cyan"
    elif name.startswith("execute_tool "):
        style = "bold green"
    elif name.startswith("advisor "):
        style = "yellow"
    text.append(name, style=style)
    text.append(f"  {_ms(span)}", style="dim")
    if name.startswith("chat "):
        tokens_in = _attr(span, "gen_ai.usage.input_tokens")
        tokens_out = _attr(span, "gen_ai.usage.output_tokens")
        if tokens_in is not None or tokens_out is not None:
            text.append(f"  tokens {tokens_in} in / {tokens_out} out", style="magenta")
        reasons = _attr(span, "gen_ai.response.finish_reasons")
        if reasons:
            text.append(f"  {', '.join(reasons)}", style="dim")
    arguments = _attr(span, ARGUMENTS)
    if arguments is not None:
        text.append(f"  {shorten(_compact(str(arguments)), 40)}")
    result = _attr(span, RESULT)
    if result is not None:
        text.append(" → ", style="dim")
        text.append(shorten(str(result), 40))
    if not span.status.is_ok:
        text.append(f"  error: {span.status.description}", style="bold red")
    return text


def _compact(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return arguments


def _add(tree: Tree, span: ReadableSpan, children: dict[int, list[ReadableSpan]]) -> None:
    node = tree.add(_label(span))
    kids = children.get(_id(span), [])
    if span.name.startswith("advisor ") and any(k.name.startswith("execute_tool ") for k in kids):
        # the tool loop: every model hop opens a round, the tools it asked for follow it
        rounds: list[Tree] = []
        for kid in kids:
            if kid.name.startswith("execute_tool ") and rounds:
                _add(rounds[-1], kid, children)
            else:
                rounds.append(node.add(Text(f"round {len(rounds) + 1}", style="bold blue")))
                _add(rounds[-1], kid, children)
        return
    for kid in kids:
        _add(node, kid, children)


def _id(span: ReadableSpan) -> int:
    return span.context.span_id if span.context is not None else 0


def render_tree(spans: Sequence[ReadableSpan]) -> Tree:
    """The spans as a tree: request, advisor hops, loop rounds, model calls, tool calls."""
    ids = {_id(s) for s in spans}
    children: dict[int, list[ReadableSpan]] = {}
    roots: list[ReadableSpan] = []
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        parent = s.parent.span_id if s.parent is not None else None
        if parent is not None and parent in ids:
            children.setdefault(parent, []).append(s)
        else:
            roots.append(s)
    tree = Tree(Text("trace", style="bold"), guide_style="dim")
    for root in roots:
        _add(tree, root, children)
    return tree
