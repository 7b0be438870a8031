"""Local embedder throughput: `LocalEmbeddings` (MiniLM-L6 int8 ONNX) on demo-corpus chunks.

    python -m bench.embedders [--chunks 256] [--batch-size 32]

Prints the model load time and texts per second for ~1,000-character chunks of the Python
language reference. Needs the embeddings extra.
"""

from __future__ import annotations

import argparse
import time

from sleuth.rag.demo import demo_topics
from sleuth.rag.embeddings import LocalEmbeddings
from sleuth.rag.ingest import chunk_spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    texts = [
        text[start:end]
        for _, text in sorted(demo_topics().items())
        for start, end in chunk_spans(text, chunk_size=1000, overlap=0)
    ][: args.chunks]
    started = time.perf_counter()
    embedder = LocalEmbeddings(batch_size=args.batch_size)
    embedder.embed(texts[:1])
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    embedder.embed(texts)
    elapsed = time.perf_counter() - started
    average = sum(len(t) for t in texts) / len(texts)
    print(
        f"LocalEmbeddings: load {loaded:.2f} s; {len(texts)} chunks of ~{average:.0f} chars "
        f"in {elapsed:.2f} s = {len(texts) / elapsed:.1f} chunks/s (batch {args.batch_size})"
    )


if __name__ == "__main__":
    main()
