"""The demo corpus: CPython's own language-reference topics, in the SQLite store `python-docs`.

The text is `pydoc_data.topics` — the pages `help("with")`, `help("try")`, ... show — which ships
with every CPython, so the demo works offline. It is the Python documentation, © Python Software
Foundation, under the PSF licence (https://docs.python.org/3/license.html). Nobody on this project
wrote it; we only chunk and index it.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from sleuth.rag.embeddings import Embedder
from sleuth.rag.ingest import IngestReport, Section, ingest_sections
from sleuth.rag.retriever import RAGRetriever
from sleuth.rag.stores.base import BaseVectorStore
from sleuth.rag.stores.sqlite import SQLiteStore

DEMO_STORE = "python-docs"

DEMO_DESCRIPTION = (
    "the Python language reference (statements, expressions, the data model, built-in types), "
    "as help() shows it"
)

DEMO_QUESTION = (
    "When the body of a with statement raises an exception, what does the __exit__ method of "
    "the context manager receive, how can it suppress the exception, and how does this compare "
    "with a try/finally statement?"
)
"""Answering it takes several topics: the `with` statement, context managers, and `try`.
Plain text (no backticks, quotes or dollar signs) so it pastes into any shell in double quotes."""

SOURCE_PREFIX = "python-docs/"


def demo_topics() -> dict[str, str]:
    """Topic name -> text, from this interpreter's `pydoc_data.topics`."""
    from pydoc_data.topics import topics

    return dict(topics)


def ingest_demo(store: BaseVectorStore, *, embedder: Embedder | None = None) -> IngestReport:
    """Ingest every topic (source `python-docs/<topic>`); unchanged topics are skipped."""
    from sleuth.rag.ingest import FileResult

    report = IngestReport()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for topic, text in sorted(demo_topics().items()):
        source = SOURCE_PREFIX + topic
        outcome, chunks = ingest_sections(
            source,
            [Section(text)],
            store,
            content_sha256=hashlib.sha256(text.encode()).hexdigest(),
            embedder=embedder,
            metadata={"topic": topic, "python": version},
        )
        report.files.append(FileResult(source, outcome, chunks=chunks))
    return report


def ensure_demo_store(
    home: Path | None = None, *, embedder: Embedder | None = None
) -> RAGRetriever:
    """Open (ingesting once) `$SLEUTH_HOME/stores/python-docs.sqlite`, and a retriever over it.

    Idempotent: a second call finds every topic unchanged and writes nothing. Without an embedder
    the retriever ranks by BM25.
    """
    store = SQLiteStore.named(DEMO_STORE, home)
    ingest_demo(store, embedder=embedder)
    return RAGRetriever(store=store, embedder=embedder)
