"""InMemoryVectorStore: documents and vectors in this process (Spring AI's SimpleVectorStore), with
``save``/``load`` to one JSON file. Filters run in Python (``filters.evaluator``); search is an exact
cosine scan."""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import ChainConfigurationError, VectorStoreError
from ..documents import Document
from ..embeddings import model_name
from ..filters import Filter, matches
from ..search import SearchRequest
from .api import BaseVectorStore

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - the rag extra brings numpy
    from ..._extras import missing_extra

    raise missing_extra("advisorchain.rag", "rag", exc) from exc

__all__ = ["InMemoryVectorStore"]

_FORMAT = "advisorchain.rag.InMemoryVectorStore/1"


def _unit(vectors: Any) -> np.ndarray[Any, Any]:
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


def _best(similarity: np.ndarray[Any, Any], k: int) -> np.ndarray[Any, Any]:
    """The positions of the ``k`` highest similarities, best first; a tie keeps the earlier position
    (insertion order). Only the candidates at or above the k-th value are sorted."""
    if k < similarity.size:
        kth = np.partition(similarity, similarity.size - k)[similarity.size - k]
        candidates = np.flatnonzero(similarity >= kth)
    else:
        candidates = np.arange(similarity.size)
    order = np.lexsort((candidates, -similarity[candidates]))
    return candidates[order][:k]


class InMemoryVectorStore(BaseVectorStore):
    """A store in this process's memory; ``embedding_model=None`` means ``LocalEmbeddingModel()``.

    >>> store = InMemoryVectorStore(embedding_model)
    >>> store.add([Document("WAL keeps a log of changes", {"kind": "faq"})])
    >>> store.similarity_search(SearchRequest("write-ahead log", top_k=2, filter="kind == 'faq'"))
    """

    def __init__(self, embedding_model: Any = None) -> None:
        super().__init__(embedding_model)
        self._lock = threading.Lock()
        self._docs: dict[str, Document] = {}
        self._vectors: dict[str, np.ndarray[Any, Any]] = {}
        self._dimensions: int | None = None
        self._model_name: str | None = None
        self._matrix: tuple[list[str], np.ndarray[Any, Any]] | None = None

    def __repr__(self) -> str:
        return f"InMemoryVectorStore({len(self._docs)} documents)"

    def __len__(self) -> int:
        return len(self._docs)

    # -- writes --------------------------------------------------------------------------------------

    def _write(self, documents: Sequence[Document], vectors: Sequence[Sequence[float]]) -> None:
        found = len(vectors[0])
        units = _unit(vectors)
        with self._lock:
            self.check_dimension(self._dimensions, self._model_name, found)
            for doc, vector in zip(documents, units, strict=True):
                assert doc.id is not None
                self._docs.pop(doc.id, None)  # re-added: it moves to the end, as a new row would
                self._docs[doc.id] = doc
                self._vectors[doc.id] = vector
            self._dimensions = found
            self._model_name = self._model_name or model_name(self.embedding_model)
            self._matrix = None

    def _delete(self, ids: list[str] | None, filter: Filter | None) -> int:
        with self._lock:
            if ids is not None:
                doomed = [i for i in dict.fromkeys(ids) if i in self._docs]
            else:
                assert filter is not None
                doomed = [i for i, d in self._docs.items() if matches(filter, d.metadata)]
            for i in doomed:
                del self._docs[i]
                del self._vectors[i]
            if doomed:
                self._matrix = None
            return len(doomed)

    # -- search --------------------------------------------------------------------------------------

    def _is_empty(self) -> bool:
        return not self._docs

    def _snapshot(self) -> tuple[list[str], np.ndarray[Any, Any], dict[str, Document]]:
        with self._lock:
            if self._matrix is None:
                ids = list(self._docs)
                self._matrix = (ids, np.stack([self._vectors[i] for i in ids]) if ids else np.zeros((0, 1)))
            return self._matrix[0], self._matrix[1], dict(self._docs)

    def _search(self, request: SearchRequest, vector: Sequence[float]) -> list[Document]:
        ids, matrix, docs = self._snapshot()
        if not ids:
            return []
        self.check_dimension(matrix.shape[1], self._model_name, len(vector))
        if request.filter is None:
            rows = None
            similarity = matrix @ _unit(vector)
        else:
            rows = np.array(
                [r for r, i in enumerate(ids) if matches(request.filter, docs[i].metadata)], dtype=np.int64
            )
            if rows.size == 0:
                return []
            similarity = matrix[rows] @ _unit(vector)
        found: list[Document] = []
        for position in _best(similarity, request.top_k):
            score = min(max(float(similarity[position]), 0.0), 1.0)
            if score < request.similarity_threshold:
                break
            row = int(position) if rows is None else int(rows[position])
            found.append(docs[ids[row]].with_score(score))
        return found

    # -- one file ------------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write every document and vector to ``path`` (JSON; replaced atomically)."""
        with self._lock:
            body = {
                "format": _FORMAT,
                "model": self._model_name,
                "dimensions": self._dimensions,
                "documents": [
                    {
                        "id": doc_id,
                        "text": doc.text,
                        "metadata": doc.metadata,
                        "vector": base64.b64encode(self._vectors[doc_id].astype("<f4").tobytes()).decode(),
                    }
                    for doc_id, doc in self._docs.items()
                ],
            }
        target = Path(path)
        temporary = target.with_name(target.name + ".tmp")
        temporary.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
        os.replace(temporary, target)

    @classmethod
    def load(cls, path: str | os.PathLike[str], embedding_model: Any = None) -> InMemoryVectorStore:
        """A store with what ``save`` wrote to ``path``; a model of another dimension than the
        saved vectors raises ChainConfigurationError, a missing or damaged file VectorStoreError."""
        try:
            body = json.loads(Path(path).read_text(encoding="utf-8"))
            if not isinstance(body, dict) or body.get("format") != _FORMAT:
                raise ValueError(f"it is not a file InMemoryVectorStore.save wrote (format {_FORMAT})")
            store = cls(embedding_model)
            store.check_model(body.get("dimensions"), body.get("model"))
            for item in body["documents"]:
                vector = np.frombuffer(base64.b64decode(item["vector"]), dtype="<f4").astype(np.float32)
                doc = Document(item["text"], item["metadata"], item["id"])
                store._docs[doc.id] = doc  # type: ignore[index]
                store._vectors[doc.id] = vector  # type: ignore[index]
        except ChainConfigurationError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise VectorStoreError(
                f"cannot load an InMemoryVectorStore from {str(path)!r} (missing or damaged): {exc}"
            ) from exc
        store._dimensions = body.get("dimensions")
        store._model_name = body.get("model")
        return store
