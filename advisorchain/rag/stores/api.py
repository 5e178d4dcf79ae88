"""The vector store contract, and what the built-in stores share: checking and embedding a batch
before anything is written, the dimension rule, the blocking twins, and failures as
``VectorStoreError``."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from ...errors import AdvisorChainError, ChainConfigurationError, VectorStoreError
from .._calls import run_blocking
from ..documents import Document, prepare_documents
from ..embeddings import LocalEmbeddingModel, aembed_documents, aembed_query, model_dimensions, model_name
from ..filters import Filter, as_filter
from ..search import SearchRequest, as_search_request

__all__ = ["BaseVectorStore", "VectorStore", "check_delete_arguments"]

T = TypeVar("T")


@runtime_checkable
class VectorStore(Protocol):
    """Documents with their vectors: add (upsert by id), delete, and similarity search (best first,
    ``score`` set, at most ``top_k``); each with an ``a``-prefixed async twin, which advisors use."""

    def add(self, documents: Iterable[Document]) -> None: ...

    def delete(self, ids: Iterable[str] | None = None, *, filter: str | Filter | None = None) -> int: ...

    def similarity_search(self, request: SearchRequest | str) -> list[Document]: ...

    async def aadd(self, documents: Iterable[Document]) -> None: ...

    async def adelete(
        self, ids: Iterable[str] | None = None, *, filter: str | Filter | None = None
    ) -> int: ...

    async def asimilarity_search(self, request: SearchRequest | str) -> list[Document]: ...


def check_delete_arguments(
    ids: Iterable[str] | None, filter: str | Filter | None
) -> tuple[list[str] | None, Filter | None]:
    """Exactly one of ``ids`` and ``filter`` (else ValueError); ids as a list, the filter parsed."""
    if (ids is None) == (filter is None):
        raise ValueError(
            "delete() takes exactly one of ids=[...] or filter=...; got "
            + ("neither" if ids is None else "both")
        )
    if ids is not None:
        if isinstance(ids, str):
            raise TypeError(f"delete() takes a list of ids, not one str: pass [{ids!r}]")
        listed = list(ids)
        if not all(isinstance(i, str) for i in listed):
            raise TypeError(f"document ids are str, got {listed!r}")
        for i in listed:
            if "\0" in i:
                raise ValueError(
                    f"document id {i!r} holds a NUL character (\\x00), which no store keeps in an id; "
                    "no document has it"
                )
        return listed, None
    return None, as_filter(filter)


class BaseVectorStore(ABC):
    """What the built-in stores share. A subclass writes, deletes and searches (blocking code, run in
    a worker thread); this class checks and embeds first, so nothing of a bad batch is written."""

    def __init__(self, embedding_model: Any = None) -> None:
        self.embedding_model: Any = embedding_model if embedding_model is not None else LocalEmbeddingModel()
        self._holds_documents = False  # known to hold documents: a search need not ask first

    # -- the contract, async core ------------------------------------------------------------------

    async def aadd(self, documents: Iterable[Document]) -> None:
        """Add ``documents`` (a document with the id of a stored one replaces it). The batch is
        checked and embedded first, then written in one transaction."""
        docs = prepare_documents(documents)
        if not docs:
            return
        self.check_batch(docs)
        vectors = await aembed_documents(self.embedding_model, [d.text for d in docs])
        await self._in_thread(self._write, docs, vectors)
        self._holds_documents = True

    async def adelete(self, ids: Iterable[str] | None = None, *, filter: str | Filter | None = None) -> int:
        """Delete the documents with these ids, or those matching ``filter``; how many were deleted."""
        listed, parsed = check_delete_arguments(ids, filter)
        self._holds_documents = False
        return await self._in_thread(self._delete, listed, parsed)

    async def asimilarity_search(self, request: SearchRequest | str) -> list[Document]:
        """The documents most similar to the request's query, best first (an empty store: [])."""
        request = as_search_request(request)
        if not self._holds_documents:  # an empty store answers without embedding the query
            if await self._in_thread(self._is_empty):
                return []
            self._holds_documents = True
        vector = await aembed_query(self.embedding_model, request.query)
        return await self._in_thread(self._search, request, vector)

    # -- blocking twins ----------------------------------------------------------------------------

    def add(self, documents: Iterable[Document]) -> None:
        """Blocking ``aadd`` (works from any thread, beside a running event loop too)."""
        run_blocking(self.aadd(documents), "add()", "await aadd()")

    def delete(self, ids: Iterable[str] | None = None, *, filter: str | Filter | None = None) -> int:
        """Blocking ``adelete``."""
        return run_blocking(self.adelete(ids, filter=filter), "delete()", "await adelete()")

    def similarity_search(self, request: SearchRequest | str) -> list[Document]:
        """Blocking ``asimilarity_search``."""
        return run_blocking(
            self.asimilarity_search(request), "similarity_search()", "await asimilarity_search()"
        )

    # -- shared rules ------------------------------------------------------------------------------

    def check_dimension(self, recorded: int | None, recorded_model: str | None, found: int) -> None:
        """ChainConfigurationError when vectors of ``found`` dimensions meet a store of ``recorded``,
        or the embedding model is not the one the store was made with (``check_model_name``)."""
        if recorded is not None and recorded != found:
            made_with = f" (made with {recorded_model!r})" if recorded_model else ""
            raise ChainConfigurationError(
                f"{self!r} holds {recorded}-dimensional vectors{made_with}, and the embedding model "
                f"{model_name(self.embedding_model)!r} gives {found}-dimensional ones; open the store with "
                "the model it was made with, or use a new store"
            )
        self.check_model_name(recorded_model)

    def check_model_name(self, recorded_model: str | None) -> None:
        """ChainConfigurationError when the store was made with an embedding model of another name:
        vectors of two models are not comparable, even of the same width (rankings would be noise)."""
        current = model_name(self.embedding_model)
        if recorded_model is not None and recorded_model != current:
            raise ChainConfigurationError(
                f"{self!r} was made with the embedding model {recorded_model!r}, and this one is "
                f"{current!r}: vectors of two models are not comparable, even of the same width, so "
                f"searches would rank by noise; open the store with {recorded_model!r}, or index into a "
                f"new store (or table) with {current!r}, or, if it is the same model under another name, "
                f"name it {recorded_model!r}"
            )

    def check_batch(self, documents: Sequence[Document]) -> None:  # noqa: B027 - a hook, empty by default
        """Refuse (ValueError) what this store cannot keep, before anything is embedded; every
        store keeps what ``Document`` accepts unless it says otherwise here."""

    def check_model(self, recorded: int | None, recorded_model: str | None) -> None:
        """At open: the model's known dimension against the store's recorded one, and its name
        against the recorded name."""
        dims = model_dimensions(self.embedding_model)
        if dims is not None:
            self.check_dimension(recorded, recorded_model, dims)
        self.check_model_name(recorded_model)

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.to_thread(fn, *args)
        except (AdvisorChainError, ValueError, TypeError):
            raise
        except Exception as exc:
            raise VectorStoreError(self.describe_failure(exc), store=self) from exc

    def describe_failure(self, exc: BaseException) -> str:
        """The message of the VectorStoreError that wraps ``exc``."""
        return f"{self!r} failed: {type(exc).__name__}: {exc}"

    # -- what a store implements (blocking; called in a worker thread) ---------------------------

    @abstractmethod
    def _write(self, documents: Sequence[Document], vectors: Sequence[Sequence[float]]) -> None:
        """Upsert the documents (ids set) with their vectors, all or nothing."""

    @abstractmethod
    def _delete(self, ids: list[str] | None, filter: Filter | None) -> int:
        """Delete by ids or by filter; how many were deleted."""

    @abstractmethod
    def _search(self, request: SearchRequest, vector: Sequence[float]) -> list[Document]:
        """The search itself, the query already embedded."""

    @abstractmethod
    def _is_empty(self) -> bool:
        """True when the store holds no document."""
