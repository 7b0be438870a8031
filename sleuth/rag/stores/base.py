"""`BaseVectorStore`: the interface every store implements, and the record it stores.

A store keeps `Document`s (a chunk of text, where it came from, free-form metadata and an optional
embedding) and answers `search(query, embedding=..., top_k=..., where=...)` with scored
`RetrievedChunk`s. Scores are the store's own relevance numbers, higher is better:

- text only (BM25): the BM25 score, unbounded above;
- vectors only: cosine similarity, in [-1, 1];
- both (hybrid): reciprocal rank fusion of the two rankings, scaled so that a chunk ranked first by
  both gets 1.0.

`where` filters on `source` and on metadata keys: `{"source": "a.md", "lang": ["en", "de"]}` keeps
chunks whose source is `a.md` and whose `lang` metadata is `en` or `de`. A number and its text
match each other (`{"year": "2024"}` finds `year: 2024` and the other way round), as models often
send numbers as strings; `top_k` may be a string for the same reason. Booleans match booleans only.

A store that cannot do part of this raises `StoreError` saying what it cannot do, never returns a
wrong answer.
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from sleuth.rag.tools import coerce_number
from sleuth.rag.types import RetrievedChunk
from sleuth.runtime.errors import SleuthError

Where = Mapping[str, Any]

RRF_K = 60
"""Reciprocal rank fusion's damping constant (the usual 60): rank r contributes 1 / (RRF_K + r)."""


class StoreError(SleuthError, ValueError):
    """A store cannot do what was asked (or was set up wrong); the message says what to do."""


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
        top_k: int | str = 5,
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


def as_top_k(top_k: int | str) -> int:
    """`top_k` as an int; a number sent as a string ("5") is accepted."""
    return int(coerce_number(top_k, "top_k", int) or 0)


def check_where(where: Where | None) -> dict[str, list[Any]]:
    """Normalise a filter to `{key: [accepted values]}` and reject what no store can match.

    Each number also brings its text form and each numeric string its number (see the module
    docstring), so every store matches them the same way.
    """
    normalised: dict[str, list[Any]] = {}
    for key, value in (where or {}).items():
        if not isinstance(key, str) or not key:
            raise StoreError(f"filter keys must be non-empty strings, got {key!r}")
        values = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
        accepted: list[Any] = []
        for item in values:
            if not isinstance(item, str | int | float | bool):
                raise StoreError(
                    f"filter {key!r}: values must be strings, numbers or booleans, got {item!r}"
                )
            for alternative in _number_forms(item):
                if not any(_same(alternative, seen) for seen in accepted):
                    accepted.append(alternative)
        normalised[key] = accepted
    return normalised


def _number_forms(value: str | int | float | bool) -> list[Any]:
    """`value` and, for a number or a numeric string, its other form (2 <-> "2")."""
    if isinstance(value, bool):
        return [value]
    if isinstance(value, str):
        text = value.strip()
        try:
            number: int | float = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                return [value]
        return [value, number] if math.isfinite(number) else [value]
    if isinstance(value, float) and not math.isfinite(value):
        return [value]
    forms: list[Any] = [value, str(value)]
    if isinstance(value, float) and value.is_integer():
        forms.append(str(int(value)))
    return forms


def _same(first: Any, second: Any) -> bool:
    """Equal and of the same kind (string, boolean or number), so 1 and True stay apart."""
    return _kind(first) == _kind(second) and first == second


def _kind(value: Any) -> str:
    return "bool" if type(value) is bool else "str" if isinstance(value, str) else "other"


def field_value(document: Document, key: str) -> Any:
    """What a filter key reads: `source` and `location` are fields, anything else is metadata."""
    if key in ("source", "location"):
        return getattr(document, key)
    return document.metadata.get(key)


def matches(document: Document, where: Mapping[str, list[Any]]) -> bool:
    return all(
        any(_same(field_value(document, key), value) for value in values)
        for key, values in where.items()
    )


def replace_without_transactions(
    store: BaseVectorStore,
    source: str,
    documents: Sequence[Document],
    old_ids: Callable[[], list[str]],
) -> None:
    """`replace_source` for a store without transactions: write the new chunks first, then delete
    the old ones (`old_ids()` lists the source's ids). A write that fails is taken back (chunks it
    overwrote are restored) and the old chunks stay, so a source is never left without chunks."""
    new_ids = [document.id for document in documents]
    overwritten = store.get(new_ids) if new_ids else []
    try:
        if documents:
            store.add(documents)
    except BaseException:
        before = {document.id for document in overwritten}
        added = [doc_id for doc_id in new_ids if doc_id not in before]
        with contextlib.suppress(Exception):  # the original failure is the one worth reporting
            if added:
                store.delete(added)
            if overwritten:
                store.add(overwritten)
        raise
    keep = set(new_ids)
    stale = [doc_id for doc_id in old_ids() if doc_id not in keep]
    if stale:
        store.delete(stale)


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
