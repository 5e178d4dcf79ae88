"""Retrieval in a durable run: each vector store an agent's advisors search (a
``QuestionAnswerAdvisor``'s store, the store of a retriever such as ``VectorStoreDocumentRetriever``)
is a seam, ``<agent>.store.search`` (``<agent>.store<i>.search`` when there are several), so a search
— the query's embedding included — is an activity (Temporal) or a step (DBOS): recorded, and never
repeated on resume.

The workflow side keeps everything that does no I/O (the filter a retriever computes from the
request context, query transformers' plumbing, the joiner, the augmenter); only the search crosses
the seam, as a JSON-safe request (query, ``top_k``, threshold, the filter's text) and its documents.
A store's failure (``VectorStoreError``) or its embedding model's (``ModelError``) is the recorded
outcome, raised again in workflow code as it would be outside a durable run. ``retrieval_tool`` is a
tool, and so already an activity/step of its own.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from ..errors import ModelError, VectorStoreError
from ._codec import model_error_from_dict, model_error_to_dict

__all__ = ["StoreSeams", "stores_of"]

Dispatch = Callable[[str, Any], Awaitable[Any]]


def _is_store(value: object) -> bool:
    return not isinstance(value, type) and callable(getattr(value, "asimilarity_search", None))


def _holders(advisor: object) -> Iterable[tuple[object, str, object]]:
    """``(holder, field, store)`` for each store an advisor holds, directly or through a retriever."""
    for key, value in (getattr(advisor, "__dict__", None) or {}).items():
        if _is_store(value):
            yield advisor, key, value
        elif callable(getattr(value, "retrieve", None)):
            for inner_key, inner in (getattr(value, "__dict__", None) or {}).items():
                if _is_store(inner):
                    yield value, inner_key, inner


def stores_of(advisors: Iterable[object]) -> list[Any]:
    """The distinct vector stores the advisors search."""
    found: list[Any] = []
    for advisor in advisors:
        for _, _, store in _holders(advisor):
            if not any(store is s for s in found):
                found.append(store)
    return found


class StoreSeams:
    """An agent's vector stores under seam names: the handlers activities/steps run, and advisors
    whose stores are proxies dispatching to them."""

    def __init__(self, agent: str, stores: Sequence[Any]) -> None:
        self.stores = list(stores)
        self.names = [
            f"{agent}.store.search" if len(stores) == 1 else f"{agent}.store{i}.search"
            for i in range(len(stores))
        ]

    def handlers(self) -> dict[str, Callable[[Any], Awaitable[Any]]]:
        """Each store's seam name with the function its activity/step runs."""
        return {name: _search_handler(store) for name, store in zip(self.names, self.stores, strict=True)}

    def advised(self, advisor: object, dispatch: Dispatch) -> object:
        """``advisor`` with its stores (and its retriever's) replaced by seam proxies; a copy, the
        agent's own advisor is untouched. An advisor holding no store is returned as it is."""
        holders = list(_holders(advisor))
        if not holders:
            return advisor
        twin = copy.copy(advisor)
        retrievers: dict[int, object] = {}
        for holder, key, store in holders:
            proxy = _StoreSeam(self.names[self._index(store)], dispatch, store)
            if holder is advisor:
                setattr(twin, key, proxy)
                continue
            if id(holder) not in retrievers:
                retrievers[id(holder)] = copy.copy(holder)
                field = next(k for k, v in vars(advisor).items() if v is holder)
                setattr(twin, field, retrievers[id(holder)])
            setattr(retrievers[id(holder)], key, proxy)
        return twin

    def _index(self, store: object) -> int:
        return next(i for i, s in enumerate(self.stores) if s is store)


def _search_handler(store: Any) -> Callable[[Any], Awaitable[Any]]:
    async def run(payload: Any) -> dict[str, Any]:
        from ..rag.search import SearchRequest

        request = SearchRequest(
            payload["query"], payload["top_k"], payload["similarity_threshold"], payload["filter"]
        )
        try:
            found = await store.asimilarity_search(request)
        except ModelError as exc:
            return {"error": {"kind": "model", "model_error": model_error_to_dict(exc)}}
        except Exception as exc:
            message = str(exc) if isinstance(exc, VectorStoreError) else f"{type(exc).__name__}: {exc}"
            return {"error": {"kind": "store", "message": message}}
        return {
            "documents": [
                {"text": d.text, "metadata": dict(d.metadata), "id": d.id, "score": d.score} for d in found
            ]
        }

    return run


class _StoreSeam:
    """A vector store whose searches are its seam (workflow code: no I/O of its own). Writes are
    refused: a durable run's advisors only search."""

    def __init__(self, seam: str, dispatch: Dispatch, real: Any) -> None:
        self._seam = seam
        self._dispatch = dispatch
        self._real = real

    def __repr__(self) -> str:
        return repr(self._real)

    async def asimilarity_search(self, request: Any) -> list[Any]:
        from ..rag.documents import Document
        from ..rag.search import as_search_request

        request = as_search_request(request)
        payload = {
            "query": request.query,
            "top_k": request.top_k,
            "similarity_threshold": request.similarity_threshold,
            "filter": None if request.filter is None else str(request.filter),
        }
        outcome = await self._dispatch(self._seam, payload)
        error = outcome.get("error")
        if error is not None:
            if error["kind"] == "model":
                raise model_error_from_dict(error["model_error"])
            raise VectorStoreError(error["message"], store=self._real)
        return [Document(d["text"], d["metadata"], d["id"], d["score"]) for d in outcome["documents"]]
