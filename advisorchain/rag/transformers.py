"""Pre-retrieval: query transformers turn the user's query into a better one for search (Spring
AI's ``RewriteQueryTransformer``, ``CompressionQueryTransformer``, ``TranslationQueryTransformer``).
An empty answer from the model keeps the query as it was."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ._clients import ask, plain_client
from .query import Query, render_history

__all__ = [
    "CompressionQueryTransformer",
    "QueryTransformer",
    "RewriteQueryTransformer",
    "TranslationQueryTransformer",
]


@runtime_checkable
class QueryTransformer(Protocol):
    """``transform(query) -> Query`` (a plain or ``async`` method)."""

    def transform(self, query: Query) -> Any: ...


REWRITE_TEMPLATE = """Given a user query, rewrite it to provide better results when querying a {target}.
Remove any irrelevant information, and ensure the query is concise and specific.
Answer with the rewritten query only.

Original query:
{query}

Rewritten query:"""

COMPRESSION_TEMPLATE = """Given the following conversation history and a follow-up query, your task is to
synthesize a concise, standalone query that incorporates the context from the history.
Ensure the standalone query is clear, specific, and maintains the user's intent.
Answer with the standalone query only.

Conversation history:
{history}

Follow-up query:
{query}

Standalone query:"""

TRANSLATION_TEMPLATE = """Given a user query, translate it to {target_language}.
If the query is already in {target_language}, return it unchanged.
If you don't know the language of the query, return it unchanged.
Do not add explanations nor any other text.

Original query: {query}

Translated query:"""


def _fill(template: str, **values: str) -> str:
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


class RewriteQueryTransformer:
    """Asks the model to rewrite the query for search (``target`` names what is searched)."""

    def __init__(self, client: Any, *, target: str = "vector store") -> None:
        self._client = plain_client(client)
        self.target = target

    async def transform(self, query: Query) -> Query:
        answer = await ask(self._client, _fill(REWRITE_TEMPLATE, target=self.target, query=query.text))
        return query.copy(text=answer) if answer else query


class CompressionQueryTransformer:
    """Asks the model to turn the history and a follow-up question into one standalone question
    (the history is what the round saw, tool results included). No history: the query as it is."""

    def __init__(self, client: Any) -> None:
        self._client = plain_client(client)

    async def transform(self, query: Query) -> Query:
        history = render_history(query.history)
        if not history:
            return query
        answer = await ask(self._client, _fill(COMPRESSION_TEMPLATE, history=history, query=query.text))
        return query.copy(text=answer) if answer else query


class TranslationQueryTransformer:
    """Asks the model to translate the query to ``target_language`` (the documents' language)."""

    def __init__(self, client: Any, target_language: str) -> None:
        if not isinstance(target_language, str) or not target_language.strip():
            raise ValueError(f"target_language must name a language, got {target_language!r}")
        self._client = plain_client(client)
        self.target_language = target_language

    async def transform(self, query: Query) -> Query:
        text = _fill(TRANSLATION_TEMPLATE, target_language=self.target_language, query=query.text)
        answer = await ask(self._client, text)
        return query.copy(text=answer) if answer else query
