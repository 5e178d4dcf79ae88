"""Generation: a query augmenter writes the context text that the model link appends to the last user
message at each model call (Spring AI's ``ContextualQueryAugmenter``; here the user's own message is
never rewritten)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ._templates import check_template, fill
from .citations import format_numbered
from .documents import Document
from .query import Query

__all__ = [
    "DEFAULT_CONTEXT_TEMPLATE",
    "DEFAULT_EMPTY_CONTEXT_TEMPLATE",
    "ContextualQueryAugmenter",
    "QueryAugmenter",
]


@runtime_checkable
class QueryAugmenter(Protocol):
    """``augment(query, documents) -> str``: the context text (a plain or ``async`` method)."""

    def augment(self, query: Query, documents: list[Document]) -> Any: ...


DEFAULT_CONTEXT_TEMPLATE = """Context information is below, as numbered passages between the lines.

---------------------
{documents}
---------------------

Given the context information and no prior knowledge, answer the query above.
Follow these rules:
1. If the answer is not in the context, just say that you don't know.
2. Avoid statements like "Based on the context..." or "The provided information...".
3. Cite the passages you use by their number in square brackets, e.g. [1]."""

DEFAULT_EMPTY_CONTEXT_TEMPLATE = """The knowledge base has nothing on this query: it is outside your knowledge
base.
Politely inform the user that you can't answer it from the knowledge base."""


class ContextualQueryAugmenter:
    """The default augmenter: the documents numbered ``[1]``…``[n]`` in ``template`` (placeholders
    ``{documents}``, ``{query}``). With no documents, ``empty_context_template`` tells the model to
    say that it cannot answer from the knowledge base — or, with ``allow_empty_context``, nothing is
    appended and the model answers on its own."""

    def __init__(
        self,
        template: str = DEFAULT_CONTEXT_TEMPLATE,
        empty_context_template: str = DEFAULT_EMPTY_CONTEXT_TEMPLATE,
        allow_empty_context: bool = False,
    ) -> None:
        self.template = check_template(template, "ContextualQueryAugmenter template")
        self.empty_context_template = check_template(
            empty_context_template, "ContextualQueryAugmenter empty_context_template", required=()
        )
        self.allow_empty_context = bool(allow_empty_context)

    def augment(self, query: Query, documents: list[Document]) -> str:
        if not documents:
            return "" if self.allow_empty_context else fill(self.empty_context_template, query=query.text)
        return fill(self.template, documents=format_numbered(enumerate(documents, 1)), query=query.text)
