"""Answers grounded in a folder of Markdown, with citations, offline: the files are split, embedded
by the local model that ships with the `rag` extra and kept in one SQLite file; a
QuestionAnswerAdvisor hands the model the passages numbered [1]..[n], and the answer's [n] come back
as citations. (The model here is scripted; put OpenAIChatModel(...) in its place for a real one.)

Run: python examples/rag_markdown.py [FOLDER]   (default: examples/knowledge)
"""

import sys
import tempfile
from pathlib import Path

from advisorchain import AdvisorParams, ChatClient
from advisorchain.rag import Document, QuestionAnswerAdvisor, SearchRequest, SQLiteVectorStore, TextSplitter
from advisorchain.testing import ScriptedChatModel

folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "knowledge"

with tempfile.TemporaryDirectory() as tmp:
    store = SQLiteVectorStore(Path(tmp) / "kb.db")  # LocalEmbeddingModel(): no network, no server
    paths = sorted(folder.glob("*.md"))
    files = [Document(p.read_text(encoding="utf-8"), {"path": p.name}, id=p.name) for p in paths]
    store.add(TextSplitter(chunk_size=60, chunk_overlap=10).split(files))

    model = ScriptedChatModel(["E1054 means the standby's replication slot is gone: recreate it [1]."])
    client = ChatClient(model, default_advisors=[QuestionAnswerAdvisor(store, SearchRequest("", top_k=3))])
    response = client.prompt("What does E1054 mean?").call().chat_client_response()

    print(response.chat_response.text)
    for citation in response.context[AdvisorParams.CITATIONS]:
        print(f"[{citation.number}] {citation.document.metadata['path']}")  # [1] errors.md
    store.close()
