"""The retrieval agent the durable retrieval tests run, built the same way in the test process and
in worker processes: the scripted server's 3-round tool loop (tool ``record``) under a
``QuestionAnswerAdvisor`` over a SQLite knowledge base whose embedding model appends a line to a
file for every query it embeds (so searches can be counted across processes)."""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path

from advisorchain import ChatClient, tool
from advisorchain.models.openai import OpenAIChatModel
from advisorchain.rag import Document, QuestionAnswerAdvisor, SQLiteVectorStore

KNOWLEDGE = [
    Document("The replication slot E1054 holds back old WAL files.", {"path": "slots.md"}, id="slots"),
    Document("Checkpoints are written every five minutes.", {"path": "checkpoints.md"}, id="checkpoints"),
]


class CountingEmbeddingModel:
    """Hashed bags of words (32 buckets); each query embedded is a line in ``query_file``."""

    name = "counting-words"
    dimensions = 32

    def __init__(self, query_file: Path) -> None:
        self.query_file = query_file

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in re.findall(r"\w+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimensions] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        with open(self.query_file, "a", encoding="utf-8") as f:
            f.write(text.replace("\n", " ") + "\n")
        return self._vector(text)


def knowledge_store(knowledge_db: Path, query_file: Path) -> SQLiteVectorStore:
    """The knowledge base (filled when new)."""
    store = SQLiteVectorStore(knowledge_db, CountingEmbeddingModel(query_file))
    store.add(KNOWLEDGE)
    return store


def build_rag_client(base_url: str, model: str, tool_file: Path, knowledge_db: Path, query_file: Path) -> ChatClient:
    @tool
    def record(n: int) -> str:
        """Record a number."""
        with open(tool_file, "a", encoding="utf-8") as f:
            f.write(f"{n}\n")
        return f"recorded {n}"

    return ChatClient(
        OpenAIChatModel(model, base_url=base_url, api_key="test-key"),
        default_tools=[record],
        default_advisors=[QuestionAnswerAdvisor(knowledge_store(knowledge_db, query_file))],
    )


def searches(query_file: Path) -> list[str]:
    """The queries embedded so far (one per search)."""
    return query_file.read_text(encoding="utf-8").splitlines() if query_file.exists() else []
