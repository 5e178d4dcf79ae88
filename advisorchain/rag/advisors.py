"""The retrieval advisors: ``QuestionAnswerAdvisor`` (one search, a template) and
``RetrievalAugmentationAdvisor`` (the modular pipeline), as in Spring AI.

Both retrieve once, before the rest of the chain runs, and put what they found in the request
context: the documents (``AdvisorParams.RETRIEVED_DOCUMENTS``), their texts for evaluators
(``EVALUATION_CONTEXT``) and the context text (``RETRIEVAL_CONTEXT``), which the model link appends
to the last user message at each model call. The user's message itself is never rewritten, so every
tool-loop round sees the same documents and memory keeps the user's own text. On the way back the
response context gets the citations the answer makes (``CITATIONS``).

Placed inside the tool loop (an order greater than the tool advisor's), an advisor runs on every
round, and its query transformers see the round's history.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .._streams import closing
from ..chain import CallAdvisorChain, StreamAdvisorChain, is_end_of_answer
from ..chain.vocabulary import AdvisorParams, Ordered, check_order
from ..model import ChatClientMessageAggregator, ChatClientRequest, ChatClientResponse
from ._calls import call
from ._templates import check_template, fill
from .augmenters import ContextualQueryAugmenter, QueryAugmenter
from .citations import Ledger, citations_in, format_numbered, using_ledger
from .documents import Document, document_id
from .expanders import QueryExpander
from .filters import as_filter
from .joiners import ConcatenationDocumentJoiner, DocumentJoiner
from .postprocessing import DocumentPostProcessor
from .query import Query, query_of
from .retrievers import DocumentRetriever, search
from .search import SearchRequest
from .transformers import QueryTransformer

__all__ = [
    "DEFAULT_ORDER",
    "QUESTION_ANSWER_TEMPLATE",
    "QuestionAnswerAdvisor",
    "RetrievalAugmentationAdvisor",
]

DEFAULT_ORDER = Ordered.HIGHEST_PRECEDENCE + 240
"""Inside a memory advisor at its default order, outside SelfRefineEvaluationAdvisor and the tool loop."""

QUESTION_ANSWER_TEMPLATE = """Context information is below, as numbered passages between the lines.

---------------------
{documents}
---------------------

Given the context and provided history information and not prior knowledge,
reply to the user comment. If the answer is not in the context, inform
the user that you can't answer the question. Cite the passages you use by
their number in square brackets, e.g. [1]."""

QUESTION_ANSWER_EMPTY_CONTEXT = """The knowledge base has nothing on this question: no document matched it.
Inform the user that you can't answer the question from the knowledge base."""

_NO_DOCUMENTS = "(none: the knowledge base has nothing on this question)"


@dataclass(frozen=True, slots=True)
class _Found:
    """What one retrieval found: the documents (numbered 1..n in this order) and the context text."""

    documents: tuple[Document, ...]
    text: str
    extra: Mapping[str, Any] = field(default_factory=dict)


def _unique(documents: Sequence[Document]) -> tuple[Document, ...]:
    kept: dict[str, Document] = {}
    for doc in documents:
        kept.setdefault(doc.id if doc.id is not None else document_id(doc.text, doc.metadata), doc)
    return tuple(kept.values())


def _answer_text(response: ChatClientResponse) -> str:
    chat = response.chat_response
    return (chat.text or "") if chat is not None else ""


class _RetrievalAdvisor(ABC):
    """What both advisors share: their default order, retrieving before the chain goes on, carrying
    the documents, reading the citations back. A subclass says how it retrieves (``_retrieve``)."""

    DEFAULT_ORDER: ClassVar[int] = DEFAULT_ORDER
    _name: ClassVar[str]

    def __init__(self, order: int) -> None:
        self.order = check_order(order)

    @property
    def name(self) -> str:
        return self._name

    @abstractmethod
    async def _retrieve(self, request: ChatClientRequest) -> _Found:
        """Search for the request (before any model call); failures propagate."""

    def _extra(self, documents: tuple[Document, ...]) -> dict[str, Any]:
        return {}

    def _advised(self, request: ChatClientRequest, found: _Found) -> ChatClientRequest:
        context = {
            **request.context,
            AdvisorParams.RETRIEVED_DOCUMENTS: found.documents,
            AdvisorParams.EVALUATION_CONTEXT: tuple(d.text for d in found.documents),
            AdvisorParams.RETRIEVAL_CONTEXT: found.text,
            **self._extra(found.documents),
        }
        return request.copy(context=context)

    def _finished(self, context: Mapping[str, Any], ledger: Ledger, text: str) -> dict[str, Any]:
        documents = ledger.documents
        return {
            **context,
            AdvisorParams.RETRIEVED_DOCUMENTS: documents,
            AdvisorParams.EVALUATION_CONTEXT: tuple(d.text for d in documents),
            AdvisorParams.CITATIONS: citations_in(text, ledger.numbered),
            **self._extra(documents),
        }

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        found = await self._retrieve(request)
        advised = self._advised(request, found)
        ledger = Ledger(found.documents, advised.context)
        with using_ledger(chain.run, ledger):
            response = await chain.next_call(advised)
        return response.copy(context=self._finished(response.context, ledger, _answer_text(response)))

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        found = await self._retrieve(request)  # before the first chunk
        advised = self._advised(request, found)
        ledger = Ledger(found.documents, advised.context)
        chunks: list[ChatClientResponse] = []
        held: list[ChatClientResponse] = []
        async with closing(chain.next_stream(advised)) as stream:
            while True:
                with using_ledger(
                    chain.run, ledger
                ):  # current while the rest of the chain works (tools included)
                    try:
                        chunk = await anext(stream)
                    except StopAsyncIteration:
                        break
                chunks.append(chunk)
                if held or is_end_of_answer(chunk):
                    held.append(chunk)  # the end of the answer: the citations ride on its last chunk
                else:
                    yield chunk
        answer = ChatClientMessageAggregator.aggregate_responses(chunks) if chunks else None
        last_context = held[-1].context if held else (chunks[-1].context if chunks else advised.context)
        context = self._finished(last_context, ledger, _answer_text(answer) if answer is not None else "")
        for chunk in held[:-1]:
            yield chunk
        if held:
            yield ChatClientResponse(held[-1].chat_response, context)
        else:
            yield ChatClientResponse(None, context)  # no chunk to carry the context


class QuestionAnswerAdvisor(_RetrievalAdvisor):
    """Answers from a vector store (Spring AI's ``QuestionAnswerAdvisor``): one search with the last
    user message's text, the documents numbered ``[1]``…``[n]`` in ``template`` (``{documents}``
    required, ``{query}`` allowed; other braces literal).

    >>> client = ChatClient(model, default_advisors=[QuestionAnswerAdvisor(store)])
    >>> client.prompt("What does E1054 mean?").call().content()
    """

    FILTER_EXPRESSION: ClassVar[str] = "qa_filter_expression"
    _name = "Question Answer Advisor"

    def __init__(
        self,
        store: Any,
        search_request: SearchRequest | None = None,
        *,
        template: str = QUESTION_ANSWER_TEMPLATE,
        order: int = DEFAULT_ORDER,
    ) -> None:
        super().__init__(order)
        if search_request is not None and not isinstance(search_request, SearchRequest):
            raise TypeError(f"search_request must be a SearchRequest or None, got {search_request!r}")
        self.store = store
        self.search_request = search_request if search_request is not None else SearchRequest("")
        self.template = check_template(template, "QuestionAnswerAdvisor template")

    async def _retrieve(self, request: ChatClientRequest) -> _Found:
        query = query_of(request.prompt, request.context)
        override = request.context.get(self.FILTER_EXPRESSION)
        search_request = self.search_request.copy(
            query=query.text, filter=as_filter(override) if override is not None else None
        )
        documents = _unique(await search(self.store, search_request))
        return _Found(documents, self._context_text(documents, query.text))

    def _context_text(self, documents: tuple[Document, ...], query: str) -> str:
        if not documents and self.template is QUESTION_ANSWER_TEMPLATE:
            return QUESTION_ANSWER_EMPTY_CONTEXT
        listed = format_numbered(enumerate(documents, 1)) if documents else _NO_DOCUMENTS
        return fill(self.template, documents=listed, query=query)


class RetrievalAugmentationAdvisor(_RetrievalAdvisor):
    """The modular retrieval pipeline (Spring AI's ``RetrievalAugmentationAdvisor``): query
    transformers, an expander, one retrieval per expanded query (concurrently), a joiner, document
    post-processors and an augmenter that writes the context text.

    >>> RetrievalAugmentationAdvisor(VectorStoreDocumentRetriever(store, top_k=5),
    ...     query_transformers=[CompressionQueryTransformer(model)])
    """

    DOCUMENT_CONTEXT: ClassVar[str] = "rag_document_context"
    _name = "Retrieval Augmentation Advisor"

    def __init__(
        self,
        retriever: DocumentRetriever,
        *,
        query_transformers: Sequence[QueryTransformer] = (),
        query_expander: QueryExpander | None = None,
        document_joiner: DocumentJoiner | None = None,
        document_post_processors: Sequence[DocumentPostProcessor] = (),
        query_augmenter: QueryAugmenter | None = None,
        order: int = DEFAULT_ORDER,
    ) -> None:
        super().__init__(order)
        _need(retriever, "retrieve", "retriever")
        self.retriever = retriever
        self.query_transformers = tuple(query_transformers)
        for t in self.query_transformers:
            _need(t, "transform", "query transformer")
        self.query_expander = query_expander
        if query_expander is not None:
            _need(query_expander, "expand", "query_expander")
        self.document_joiner: DocumentJoiner = document_joiner or ConcatenationDocumentJoiner()
        _need(self.document_joiner, "join", "document_joiner")
        self.document_post_processors = tuple(document_post_processors)
        for p in self.document_post_processors:
            _need(p, "process", "document post-processor")
        self.query_augmenter: QueryAugmenter = query_augmenter or ContextualQueryAugmenter()
        _need(self.query_augmenter, "augment", "query_augmenter")

    def _extra(self, documents: tuple[Document, ...]) -> dict[str, Any]:
        return {self.DOCUMENT_CONTEXT: documents}

    async def _retrieve(self, request: ChatClientRequest) -> _Found:
        original = query_of(request.prompt, request.context)
        query = original
        for transformer in self.query_transformers:
            query = _checked_query(await call(transformer.transform, query), transformer)
        queries = [query]
        if self.query_expander is not None:
            queries = [
                _checked_query(q, self.query_expander) for q in await call(self.query_expander.expand, query)
            ]
        found = await asyncio.gather(*(call(self.retriever.retrieve, q) for q in queries))
        by_query: dict[Query, list[Document]] = {}
        for q, documents in zip(queries, found, strict=True):
            by_query.setdefault(q, []).extend(documents)
        documents = list(await call(self.document_joiner.join, by_query, thread=False))
        for processor in self.document_post_processors:
            documents = list(await call(processor.process, original, documents, thread=False))
        unique = _unique(documents)
        text = await call(self.query_augmenter.augment, original, list(unique), thread=False)
        if not isinstance(text, str):
            raise TypeError(
                f"query augmenter {self.query_augmenter!r} returned {text!r}; it must return the context str"
            )
        return _Found(unique, text)


def _need(piece: object, method: str, what: str) -> None:
    if not callable(getattr(piece, method, None)):
        raise TypeError(f"{what} {piece!r} has no {method}() method")


def _checked_query(value: object, piece: object) -> Query:
    if isinstance(value, Query):
        return value
    raise TypeError(f"{piece!r} returned {value!r}; it must return a Query")
