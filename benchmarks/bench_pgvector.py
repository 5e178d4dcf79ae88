"""PostgresVectorStore at scale: 100,000 chunks on PostgreSQL 16 with pgvector, against
SQLiteVectorStore at 10,000 chunks, in one run.

    scripts/services.sh run .venv/bin/python benchmarks/bench_pgvector.py          # ~6 min on 2 busy cores
    scripts/services.sh run .venv/bin/python benchmarks/bench_pgvector.py --quick  # 20,000 / 2,000 chunks

(or with ``ADVISORCHAIN_TEST_PGVECTOR_DSN`` pointing at a server with pgvector; the benchmark uses
tables of its own and drops them at the end.)

- inserts per second: ``add`` in batches of 1,000 by one writer (10,000 chunks, both stores, a
  ratio), then the 100,000 chunks loaded by 4 writer processes at once;
- top-5 latency (median, p95) and recall against an exact scan: unfiltered, filtered to 1% of the
  chunks (``topic == 't7'``) and to 50% (``even == true``), vector-only (recall is the share of the
  exact top 5, computed with numpy over the same vectors, that the store returned) and hybrid
  (latency only: its ranking is not a vector ranking); "short" counts searches that returned fewer
  than 5 though 5 matched. pgvector's defaults (no iterative scan, ``ef_search`` 40) are measured
  on the same table for comparison;
- 4 processes querying at once: throughput and median latency against one process;
- the ratio of each PostgreSQL figure at 100,000 chunks to SQLite's at 10,000.

Vectors are 384-d, clustered like real embeddings (2,000 centres, each chunk its centre plus noise;
queries a chunk's vector plus noise), precomputed: the figures are the stores' own cost, not a
model's. Figures are medians over the queries; the machine is shared, so compare within one run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_rag import corpus, row

from advisorchain.rag import Document, PostgresVectorStore, SearchRequest, SQLiteVectorStore

DIMS = 384
LATENT = 24
QUICK = "--quick" in sys.argv
QUICK_FLAG = ["--quick"] if QUICK else []
BIG, SMALL = (20_000, 2_000) if QUICK else (100_000, 10_000)
QUERIES = 60 if QUICK else 200
WRITERS = 4
TOPICS = 100
FILTERS = {"unfiltered": None, "filtered 1%": "topic == 't7'", "filtered 50%": "even == true"}


def vectors(n: int, seed: int = 3) -> np.ndarray:
    """``n`` unit vectors of low intrinsic dimension, as sentence embeddings are: points of a 24-d
    mixture of 2,000 clusters, mapped into 384 dimensions, plus a little noise (the same seed gives
    the same vectors in every process)."""
    rng = np.random.default_rng(seed)
    latent_centres = rng.standard_normal((2000, LATENT)).astype(np.float32)
    latent = latent_centres[rng.integers(0, 2000, n)] + 0.5 * rng.standard_normal((n, LATENT)).astype(
        np.float32
    )
    projection = rng.standard_normal((LATENT, DIMS)).astype(np.float32)
    matrix = latent @ projection + 0.5 * rng.standard_normal((n, DIMS)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def metadata(i: int) -> dict[str, Any]:
    return {"i": i, "topic": f"t{i % TOPICS}", "even": i % 2 == 0}


def matches(i: int, name: str) -> bool:
    return {"unfiltered": True, "filtered 1%": i % TOPICS == 7, "filtered 50%": i % 2 == 0}[name]


class Precomputed:
    """Chunk vectors looked up by text; a query's vector looked up by its text (``q<k>``)."""

    name = "precomputed-384"
    dimensions = DIMS

    def __init__(self, texts: list[str], matrix: np.ndarray, queries: np.ndarray) -> None:
        self.by_text = dict(zip(texts, matrix, strict=True))
        self.queries = queries

    def embed_documents(self, texts: list[str]) -> Any:
        return np.stack([self.by_text[t] for t in texts])

    def embed_query(self, text: str) -> Any:
        return self.queries[int(text[1:])]


def query_vectors(matrix: np.ndarray, count: int, seed: int = 5) -> np.ndarray:
    """Queries near chunks, as a question is near its passage: a chunk's vector plus noise of about
    its own length (cosine similarity to the chunk about 0.7)."""
    rng = np.random.default_rng(seed)
    picked = matrix[rng.integers(0, len(matrix), count)]
    noisy = picked + 0.05 * rng.standard_normal((count, DIMS)).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def masks(n: int) -> dict[str, np.ndarray]:
    """Per filter, which of the ``n`` chunks match it."""
    return {name: np.array([matches(i, name) for i in range(n)]) for name in FILTERS}


def exact_top5(matrix: np.ndarray, query: np.ndarray, mask: np.ndarray) -> set[int]:
    scores = np.where(mask, matrix @ query, -np.inf)
    return {int(i) for i in np.argpartition(-scores, 5)[:5]}


def pct(samples: list[float], q: float) -> float:
    return float(np.percentile(samples, q)) * 1000


# -- building ---------------------------------------------------------------------------------------


def make_model(n: int) -> tuple[Precomputed, list[Document]]:
    texts = corpus(n)
    matrix = vectors(n)
    model = Precomputed(texts, matrix, query_vectors(matrix, QUERIES))
    return model, [Document(t, metadata(i), id=f"c{i}") for i, t in enumerate(texts)]


def query_model(n: int) -> Precomputed:
    """A model that only embeds the queries over ``n`` chunks (no corpus built)."""
    return Precomputed([], np.empty((0, DIMS), np.float32), query_vectors(vectors(n), QUERIES))


def timed_add(store: Any, docs: list[Document]) -> float:
    start = time.perf_counter()
    for i in range(0, len(docs), 1000):
        store.add(docs[i : i + 1000])
    return time.perf_counter() - start


def writer_child(dsn: str, table: str, n: int, part: int, parts: int) -> None:
    """Run in a process of its own: add this writer's share of the ``n`` chunks; print the seconds."""
    model, docs = make_model(n)
    store = PostgresVectorStore(dsn, model, table=table, hybrid=False)
    mine = docs[part * n // parts : (part + 1) * n // parts]
    print(json.dumps({"seconds": timed_add(store, mine)}))


def load_with_writers(dsn: str, table: str, n: int) -> float:
    """Load ``n`` chunks with ``WRITERS`` processes at once; inserts per second overall."""
    PostgresVectorStore(dsn, query_model(1), table=table).close()  # the table exists before they race
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--writer", dsn, table, str(n), str(k), str(WRITERS), *QUICK_FLAG],
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(WRITERS)
    ]
    for p in procs:
        out, _ = p.communicate()
        assert p.returncode == 0, f"a writer failed: {out}"
    return n / (time.perf_counter() - start)


# -- searching --------------------------------------------------------------------------------------


def search_rows(store: Any, matrix: np.ndarray, queries: np.ndarray) -> dict[str, dict[str, float]]:
    """Per filter: median and p95 latency, recall@5 against the exact scan (vector-only stores) and
    how many searches came back short."""
    out = {}
    matching = masks(len(matrix))
    for name, text in FILTERS.items():
        times, recall, short = [], [], 0
        for k in range(len(queries)):
            start = time.perf_counter()
            found = store.similarity_search(SearchRequest(f"q{k}", top_k=5, filter=text))
            times.append(time.perf_counter() - start)
            short += len(found) < 5
            if not store.hybrid:
                got = {int(d.id[1:]) for d in found}
                recall.append(len(got & exact_top5(matrix, queries[k], matching[name])) / 5)
        out[name] = {
            "median": pct(times, 50),
            "p95": pct(times, 95),
            "recall": statistics.mean(recall) if recall else float("nan"),
            "short": short,
        }
    return out


def pgvector_defaults(dsn: str, table: str, queries: np.ndarray) -> dict[str, int]:
    """The same filtered top-5 as plain SQL with pgvector's defaults: how many came back short."""
    import psycopg

    short = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET hnsw.iterative_scan = off; SET hnsw.ef_search = 40")
        for name, where in (
            ("filtered 1%", "metadata->>'topic' = 't7'"),
            ("filtered 50%", "metadata->'even' = 'true'"),
        ):
            short[name] = 0
            for q in queries:
                literal = "[" + ",".join(f"{x:.7f}" for x in q) + "]"
                rows = conn.execute(
                    f'SELECT id FROM "{table}" WHERE {where} ORDER BY embedding <=> %s::vector LIMIT 5',
                    (literal,),
                ).fetchall()
                short[name] += len(rows) < 5
    return short


def query_child(dsn: str, table: str, n: int, seconds: float) -> None:
    """Run in a process of its own: top-5 searches (filters in turn) for ``seconds``; print latencies."""
    store = PostgresVectorStore(dsn, query_model(n), table=table, hybrid=False)
    times, k = [], 0
    names = list(FILTERS.values())
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        store.similarity_search(SearchRequest(f"q{k % QUERIES}", top_k=5, filter=names[k % len(names)]))
        times.append(time.perf_counter() - start)
        k += 1
    print(json.dumps({"times": times}))


def concurrent_queries(dsn: str, table: str, n: int, processes: int, seconds: float) -> tuple[float, float]:
    """Queries per second over all processes and the median latency, ``processes`` querying at once."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--query", dsn, table, str(n), str(seconds), *QUICK_FLAG],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    times: list[float] = []
    for p in procs:
        out, _ = p.communicate()
        assert p.returncode == 0
        times += json.loads(out.strip().splitlines()[-1])["times"]
    return len(times) / seconds, pct(times, 50)


# -- the run ----------------------------------------------------------------------------------------


def main() -> None:
    dsn = os.environ.get("ADVISORCHAIN_TEST_PGVECTOR_DSN")
    if not dsn:
        sys.exit("ADVISORCHAIN_TEST_PGVECTOR_DSN is not set: run under scripts/services.sh run ...")
    began = time.perf_counter()
    run = f"bench_{os.getpid()}"
    small_model, small_docs = make_model(SMALL)
    big_model = query_model(BIG)
    folder = tempfile.mkdtemp()

    # Inserts by one writer, 10,000 chunks each.
    sqlite = SQLiteVectorStore(Path(folder) / "kb.db", small_model, hybrid=False)
    pg_small = PostgresVectorStore(dsn, small_model, table=f"{run}_small", hybrid=False)
    sqlite_rate = SMALL / timed_add(sqlite, small_docs)
    pg_rate = SMALL / timed_add(pg_small, small_docs)
    pg_small.close()
    # 100,000 chunks by 4 writers at once.
    big_rate = load_with_writers(dsn, f"{run}_big", BIG)

    big_vector = PostgresVectorStore(dsn, big_model, table=f"{run}_big", hybrid=False)
    big_hybrid = PostgresVectorStore(dsn, big_model, table=f"{run}_big")
    sqlite_hybrid = SQLiteVectorStore(Path(folder) / "kb.db", small_model)
    small_matrix, big_matrix = vectors(SMALL), vectors(BIG)
    rows = {
        ("PostgreSQL", "vector-only"): search_rows(big_vector, big_matrix, big_model.queries),
        ("PostgreSQL", "hybrid"): search_rows(big_hybrid, big_matrix, big_model.queries),
        ("SQLite", "vector-only"): search_rows(sqlite, small_matrix, small_model.queries),
        ("SQLite", "hybrid"): search_rows(sqlite_hybrid, small_matrix, small_model.queries),
    }
    defaults = pgvector_defaults(dsn, f"{run}_big", big_model.queries)
    seconds = 10.0 if QUICK else 20.0
    one_qps, one_median = concurrent_queries(dsn, f"{run}_big", BIG, 1, seconds)
    four_qps, four_median = concurrent_queries(dsn, f"{run}_big", BIG, 4, seconds)

    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in (f"{run}_small", f"{run}_big"):
            conn.execute(f'DROP TABLE IF EXISTS "{table}", "{table}_store"')
    load = os.getloadavg()
    print(
        f"## PostgresVectorStore at scale ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, took "
        f"{time.perf_counter() - began:.0f} s; {os.cpu_count()} CPUs, load average {load[0]:.1f} at the end; "
        "PostgreSQL 16 + pgvector 0.8 on loopback, stock settings but fsync=off)\n"
    )
    print(f"### Inserts (batches of 1,000; {DIMS}-d vectors precomputed)\n")
    print(row("store", "chunks", "writers", "inserts/s", "ratio to SQLite"))
    print(row("---", "---:", "---:", "---:", "---:"))
    print(row("SQLiteVectorStore", f"{SMALL:,}", 1, f"{sqlite_rate:,.0f}", "1.00x"))
    print(
        row("PostgresVectorStore (HNSW)", f"{SMALL:,}", 1, f"{pg_rate:,.0f}", f"{pg_rate / sqlite_rate:.2f}x")
    )
    print(
        row(
            "PostgresVectorStore (HNSW)",
            f"{BIG:,}",
            WRITERS,
            f"{big_rate:,.0f}",
            f"{big_rate / sqlite_rate:.2f}x",
        )
    )
    print(f"\n### Top-5 search ({QUERIES} queries each; recall against an exact scan)\n")
    print(
        row(
            "store",
            "chunks",
            "search",
            "filter",
            "median",
            "p95",
            "recall@5",
            "short",
            "median ratio to SQLite",
        )
    )
    print(row("---", "---:", "---", "---", "---:", "---:", "---:", "---:", "---:"))
    for (store, mode), results in rows.items():
        chunks = BIG if store == "PostgreSQL" else SMALL
        for name, r in results.items():
            base = rows[("SQLite", mode)][name]["median"]
            recall = "-" if mode == "hybrid" else f"{r['recall']:.3f}"
            print(
                row(
                    store,
                    f"{chunks:,}",
                    mode,
                    name,
                    f"{r['median']:.2f} ms",
                    f"{r['p95']:.2f} ms",
                    recall,
                    f"{r['short']}/{QUERIES}",
                    f"{r['median'] / base:.2f}x",
                )
            )
    print(
        f"\npgvector's defaults on the same {BIG:,} chunks (no iterative scan, ef_search 40), the same "
        "filtered top-5 as plain SQL: short in "
        + ", ".join(f"{v}/{QUERIES} {k} queries" for k, v in defaults.items())
        + "."
    )
    print(
        f"\n### Processes querying at once ({BIG:,} chunks, vector-only, the three filters in turn, "
        f"{seconds:.0f} s)\n"
    )
    print(row("processes", "queries/s (all)", "median latency", "throughput ratio"))
    print(row("---:", "---:", "---:", "---:"))
    print(row(1, f"{one_qps:.0f}", f"{one_median:.2f} ms", "1.00x"))
    print(row(4, f"{four_qps:.0f}", f"{four_median:.2f} ms", f"{four_qps / one_qps:.2f}x"))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        writer_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--query":
        query_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
    else:
        main()
