"""Retrieval benchmark: SQLiteStore vs OpenSearchVectorStore on the same 10,000 chunks.

    python -m bench.retrieval [--chunks 10000] [--queries 300]

The chunks are CPython's language-reference topics (`pydoc_data.topics`) cut at several chunk
sizes until there are enough. OpenSearch is osmem-server (an in-memory OpenSearch-compatible
server from PyPI, started here on a free port); it has no k-NN, so both stores are compared on
BM25. A third row adds 384-dimensional vectors to SQLite (random unit vectors, so embedding time is
excluded) to show the cost of its brute-force hybrid search. Ingest throughput counts the whole
write (bulk requests and the final refresh on OpenSearch; transactions on SQLite).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from sleuth.rag.demo import demo_topics
from sleuth.rag.ingest import chunk_spans
from sleuth.rag.stores import BaseVectorStore, Document, OpenSearchVectorStore, SQLiteStore
from sleuth.rag.text import words

BATCH = 500
DIMENSION = 384


def make_chunks(count: int) -> list[Document]:
    topics = sorted(demo_topics().items())
    chunks: list[Document] = []
    for size in range(200, 2000, 50):
        for topic, text in topics:
            for start, end in chunk_spans(text, chunk_size=size, overlap=size // 5):
                chunks.append(
                    Document(
                        id=f"{topic}-{size}-{start}",
                        text=text[start:end],
                        source=f"python-docs/{topic}",
                        location=f"chars {start}-{end}",
                        metadata={"chunk_size": size},
                    )
                )
                if len(chunks) == count:
                    return chunks
    raise SystemExit(f"the corpus yields fewer than {count} chunks")


def make_queries(chunks: list[Document], count: int, rng: random.Random) -> list[str]:
    vocabulary = sorted({w for c in chunks[:2000] for w in words(c.text) if len(w) > 3})
    return [" ".join(rng.sample(vocabulary, 3)) for _ in range(count)]


def with_vectors(chunks: list[Document], rng: np.random.Generator) -> list[Document]:
    vectors = rng.standard_normal((len(chunks), DIMENSION)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [
        c.model_copy(update={"embedding": v.tolist()}) for c, v in zip(chunks, vectors, strict=True)
    ]


def measure(
    store: BaseVectorStore,
    chunks: list[Document],
    queries: list[str],
    *,
    finish_ingest: Callable[[], None] = lambda: None,
    query_vectors: np.ndarray | None = None,
) -> dict[str, float]:
    started = time.perf_counter()
    for first in range(0, len(chunks), BATCH):
        store.add(chunks[first : first + BATCH])
    finish_ingest()
    ingest_seconds = time.perf_counter() - started
    assert store.count() == len(chunks), "the store lost chunks"
    latencies = []
    hits = 0
    for number, query in enumerate(queries):
        embedding = None if query_vectors is None else query_vectors[number].tolist()
        started = time.perf_counter()
        found = store.search(query, embedding=embedding, top_k=10)
        latencies.append((time.perf_counter() - started) * 1000)
        hits += bool(found)
    latencies.sort()
    return {
        "chunks_per_s": len(chunks) / ingest_seconds,
        "p50_ms": statistics.median(latencies),
        "p95_ms": latencies[int(0.95 * (len(latencies) - 1))],
        "answered": hits / len(queries),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()

    from osmem_server import OsmemServer

    chunks = make_chunks(args.chunks)
    queries = make_queries(chunks, args.queries, random.Random(7))
    vector_rng = np.random.default_rng(7)
    vector_chunks = with_vectors(chunks, vector_rng)
    query_vectors = vector_rng.standard_normal((len(queries), DIMENSION)).astype(np.float32)
    print(
        f"{len(chunks)} chunks ({sum(len(c.text) for c in chunks) / 1e6:.1f} MB of text), "
        f"{len(queries)} queries of 3 words, top_k=10, writes in batches of {BATCH}"
    )

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        sqlite_store = SQLiteStore(Path(folder) / "bench.sqlite")
        results["SQLiteStore (BM25)"] = measure(sqlite_store, chunks, queries)
        sqlite_store.close()
        hybrid_store = SQLiteStore(Path(folder) / "hybrid.sqlite")
        results["SQLiteStore (BM25 + 384-d vectors, hybrid)"] = measure(
            hybrid_store, vector_chunks, queries, query_vectors=query_vectors
        )
        hybrid_store.close()
    with OsmemServer.start(japanese=False) as server:
        opensearch = OpenSearchVectorStore("bench", hosts=[server.url], refresh=False)
        results["OpenSearchVectorStore on osmem (BM25)"] = measure(
            opensearch, chunks, queries, finish_ingest=opensearch.refresh
        )
        opensearch.close()

    width = max(len(name) for name in results)
    print(f"{'store':<{width}}  {'ingest chunks/s':>15}  {'p50 ms':>8}  {'p95 ms':>8}  answered")
    for name, row in results.items():
        print(
            f"{name:<{width}}  {row['chunks_per_s']:>15,.0f}  {row['p50_ms']:>8.2f}  "
            f"{row['p95_ms']:>8.2f}  {row['answered']:>7.0%}"
        )
    sqlite_row = results["SQLiteStore (BM25)"]
    opensearch_row = results["OpenSearchVectorStore on osmem (BM25)"]
    print(
        "SQLite / OpenSearch: ingest "
        f"{sqlite_row['chunks_per_s'] / opensearch_row['chunks_per_s']:.2f}x, "
        f"p50 latency {sqlite_row['p50_ms'] / opensearch_row['p50_ms']:.2f}x, "
        f"p95 latency {sqlite_row['p95_ms'] / opensearch_row['p95_ms']:.2f}x"
    )


if __name__ == "__main__":
    main()
