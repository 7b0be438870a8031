"""`BaseVectorStore`: the interface every store implements, and the record it stores.

A store keeps `Document`s (a chunk of text, where it came from, free-form metadata and an optional
embedding) and answers `search(query, embedding=..., top_k=..., where=...)` with scored
`RetrievedChunk`s. Scores are the store's own relevance numbers, higher is better:

- text only (BM25): the BM25 score, unbounded above;
- vectors only: cosine similarity, in [-1, 1];
- both (hybrid): reciprocal rank fusion of the two rankings, scaled so that a chunk ranked first by
  both gets 1.0.

`where` filters on `source` and on metadata keys: `{"source": "a.md", "lang": ["en", "de"]}` keeps
chunks whose source is `a.md` and whose `lang` metadata is `en` or `de`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from sleuth.rag.types import RetrievedChunk

Where = Mapping[str, Any]

RRF_K = 60
"""Reciprocal rank fusion's damping constant (the usual 60): rank r contributes 1 / (RRF_K + r)."""


class Document(BaseModel):
    """One chunk to store. `id` is unique in the store: adding an existing id replaces it."""

    id: str
    text: str
    source: str = ""
    location: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    embedding: list[float] | None = None


class BaseVectorStore(ABC):
    """Add, delete and search documents, with metadata filters."""

    @abstractmethod
    def add(self, documents: Sequence[Document]) -> None:
        """Insert or replace `documents` (by id)."""

    @abstractmethod
    def delete(self, ids: Sequence[str] | None = None, *, where: Where | None = None) -> int:
        """Delete by ids and/or by filter (both given: both must match); returns how many went."""

    @abstractmethod
    def search(
        self,
        query: str,
        *,
        embedding: Sequence[float] | None = None,
        top_k: int = 5,
        where: Where | None = None,
    ) -> list[RetrievedChunk]:
        """The `top_k` best chunks for `query` (and `embedding`, when the store holds vectors)."""

    @abstractmethod
    def count(self, where: Where | None = None) -> int:
        """How many documents match `where` (all of them without it)."""

    def get(self, ids: Sequence[str]) -> list[Document]:
        """The stored documents with these ids (missing ids are skipped)."""
        raise NotImplementedError(f"{type(self).__name__} does not support get()")

    def replace_source(self, source: str, documents: Sequence[Document]) -> None:
        """Replace every chunk of `source` with `documents`. Stores with transactions do it atomically."""
        self.delete(where={"source": source})
        if documents:
            self.add(documents)

    def close(self) -> None:  # noqa: B027 - optional hook, most stores hold nothing to release
        """Release connections; the default holds none."""


def check_where(where: Where | None) -> dict[str, list[Any]]:
    """Normalise a filter to `{key: [accepted values]}` and reject what no store can match."""
    normalised: dict[str, list[Any]] = {}
    for key, value in (where or {}).items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"filter keys must be non-empty strings, got {key!r}")
        values = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
        for item in values:
            if not isinstance(item, str | int | float | bool):
                raise ValueError(
                    f"filter {key!r}: values must be strings, numbers or booleans, got {item!r}"
                )
        normalised[key] = values
    return normalised


def field_value(document: Document, key: str) -> Any:
    """What a filter key reads: `source` and `location` are fields, anything else is metadata."""
    if key in ("source", "location"):
        return getattr(document, key)
    return document.metadata.get(key)


def matches(document: Document, where: Mapping[str, list[Any]]) -> bool:
    return all(field_value(document, key) in values for key, values in where.items())


def fuse_rankings(
    rankings: Sequence[Sequence[str]], top_k: int, *, k: int = RRF_K
) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of id rankings, scaled so first place in every ranking scores 1.0."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, start=1):
            fused[doc_id] = fused.get(doc_id, 0.0) + 1.0 / (k + rank)
    best_possible = len(rankings) / (k + 1)
    ordered = sorted(fused.items(), key=lambda item: item[1], reverse=True)[:top_k]
    return [(doc_id, score / best_possible) for doc_id, score in ordered]


def to_chunk(document: Document, score: float) -> RetrievedChunk:
    return RetrievedChunk(
        id=document.id,
        text=document.text,
        score=float(score),
        source=document.source,
        location=document.location,
        metadata=dict(document.metadata),
    )
