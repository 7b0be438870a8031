"""The small corpus the store tests share."""

from __future__ import annotations

from sleuth.rag.stores import Document

CORPUS = [
    Document(
        id="with-1",
        text="The with statement wraps a block with methods of a context manager.",
        source="with.md",
        location="chars 0-70",
        metadata={"lang": "en", "part": 1},
    ),
    Document(
        id="with-2",
        text="If __exit__ returns true, the exception raised in the block is suppressed.",
        source="with.md",
        location="chars 60-140",
        metadata={"lang": "en", "part": 2},
    ),
    Document(
        id="try-1",
        text="The finally clause of a try statement always runs, even when an exception escapes.",
        source="try.md",
        location="chars 0-80",
        metadata={"lang": "en", "part": 1},
    ),
    Document(
        id="bananas",
        text="Bananen sind gelb und wachsen in Büscheln.",
        source="fruit.md",
        location="chars 0-40",
        metadata={"lang": "de", "part": 1},
    ),
]


def vector_corpus() -> list[Document]:
    axes = {"with-1": [1, 0, 0], "with-2": [0.9, 0.1, 0], "try-1": [0, 1, 0], "bananas": [0, 0, 1]}
    return [d.model_copy(update={"embedding": axes[d.id]}) for d in CORPUS]


def ids(chunks: list) -> list[str]:
    return [c.id for c in chunks]
