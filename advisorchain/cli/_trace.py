"""``--trace``: collect the run's OpenTelemetry spans in memory and render them as a tree.

The collector and the shape of the tree (request, advisor hops, tool-loop rounds, model calls, tool
calls) live in ``advisorchain._span_tree``, shared with the web page; this module draws it with rich.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from opentelemetry.sdk.trace import ReadableSpan
from rich.text import Text
from rich.tree import Tree

from .._span_tree import SpanCollector, SpanNode, span_tree
from ._display import shorten

__all__ = ["SpanCollector", "render_tree", "shorten"]

_STYLES = {"model": "bold cyan", "tool": "bold green", "advisor": "yellow", "round": "bold blue"}


def _label(node: SpanNode) -> Text:
    text = Text()
    text.append(node.name, style=_STYLES.get(node.kind, "bold"))
    if node.kind == "round":
        return text
    if node.ms is not None:
        text.append(f"  {node.ms:.0f} ms", style="dim")
    if node.kind in ("model", "request"):
        if node.tokens_in is not None or node.tokens_out is not None:
            text.append(f"  tokens {node.tokens_in} in / {node.tokens_out} out", style="magenta")
        elif node.kind == "request":  # no response reported usage: as the summary under the answer says
            text.append("  tokens n/a", style="magenta")
        if node.cost is not None or node.kind == "request":
            cost = "n/a" if node.cost is None else f"${Decimal(repr(node.cost)):f}"
            text.append(f"  cost {cost}", style="magenta")
    if node.kind == "model" and node.finish_reasons:
        text.append(f"  {', '.join(node.finish_reasons)}", style="dim")
    if node.arguments is not None:
        text.append(f"  {shorten(node.arguments, 40)}")
    if node.result is not None:
        text.append(" → ", style="dim")
        text.append(shorten(node.result, 40))
    if node.error is not None:
        text.append(f"  error: {node.error}", style="bold red")
    return text


def _add(tree: Tree, node: SpanNode) -> None:
    branch = tree.add(_label(node))
    for child in node.children:
        _add(branch, child)


def render_tree(spans: Sequence[ReadableSpan]) -> Tree:
    """The spans as a tree: request, advisor hops, loop rounds, model calls, tool calls."""
    tree = Tree(Text("trace", style="bold"), guide_style="dim")
    for root in span_tree(spans):
        _add(tree, root)
    return tree
