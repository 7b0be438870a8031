"""`InMemoryVectorStore`: a dict of documents, BM25 and cosine computed on each search.

For tests, notebooks and small corpora; nothing is persisted.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from sleuth.rag.stores.base import (
    BaseVectorStore,
    Document,
    Where,
    as_top_k,
    check_where,
    fuse_rankings,
    matches,
    to_chunk,
)
from sleuth.rag.text import bm25_scores, cosine_scores
from sleuth.rag.types import RetrievedChunk


class InMemoryVectorStore(BaseVectorStore):
    """Documents held in memory. Thread-safe; searches scan every document."""

    def __init__(self) -> None:
        self._documents: dict[str, Document] = {}
        self._lock = threading.Lock()

    def add(self, documents: Sequence[Document]) -> None:
        with self._lock:
            for document in documents:
                self._documents[document.id] = document.model_copy(deep=True)

    def delete(self, ids: Sequence[str] | None = None, *, where: Where | None = None) -> int:
        if ids is None and where is None:
            raise ValueError("delete() needs ids or where; to empty the store pass where={}")
        wanted = check_where(where)
        id_set = set(ids) if ids is not None else None
        with self._lock:
            doomed = [
                doc_id
                for doc_id, document in self._documents.items()
                if (id_set is None or doc_id in id_set) and matches(document, wanted)
            ]
            for doc_id in doomed:
                del self._documents[doc_id]
        return len(doomed)

    def count(self, where: Where | None = None) -> int:
        wanted = check_where(where)
        with self._lock:
            return sum(1 for document in self._documents.values() if matches(document, wanted))

    def get(self, ids: Sequence[str]) -> list[Document]:
        with self._lock:
            return [self._documents[i].model_copy(deep=True) for i in ids if i in self._documents]

    def search(
        self,
        query: str,
        *,
        embedding: Sequence[float] | None = None,
        top_k: int | str = 5,
        where: Where | None = None,
    ) -> list[RetrievedChunk]:
        top_k = as_top_k(top_k)
        wanted = check_where(where)
        with self._lock:
            candidates = [d for d in self._documents.values() if matches(d, wanted)]
        if not candidates or top_k <= 0:
            return []
        text_scores = bm25_scores(query, [d.text for d in candidates])
        text_ranking = sorted(
            (i for i, score in enumerate(text_scores) if score > 0),
            key=lambda i: text_scores[i],
            reverse=True,
        )
        with_vectors = [i for i, d in enumerate(candidates) if d.embedding is not None]
        if embedding is None or not with_vectors:
            return [to_chunk(candidates[i], text_scores[i]) for i in text_ranking[:top_k]]
        matrix = np.asarray([candidates[i].embedding for i in with_vectors], dtype=np.float32)
        similarities = cosine_scores(embedding, matrix)
        vector_ranking = [with_vectors[j] for j in np.argsort(-similarities)]
        if not text_ranking:
            return [
                to_chunk(candidates[with_vectors[j]], float(similarities[j]))
                for j in np.argsort(-similarities)[:top_k]
            ]
        fused = fuse_rankings(
            [[candidates[i].id for i in text_ranking], [candidates[i].id for i in vector_ranking]],
            top_k,
        )
        by_id = {d.id: d for d in candidates}
        return [to_chunk(by_id[doc_id], score) for doc_id, score in fused]
