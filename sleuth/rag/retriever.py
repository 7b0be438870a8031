"""`RAGRetriever`: embed the query (when there is an embedder) and search a store."""

from __future__ import annotations

import asyncio
from typing import Any

from sleuth.rag.embeddings import Embedder
from sleuth.rag.stores.base import BaseVectorStore, Where
from sleuth.rag.text import near_duplicates
from sleuth.rag.tools import coerce_number
from sleuth.rag.types import RetrievedChunk


class RAGRetriever:
    """Search `store` for a query; with an `embedder`, vector/hybrid search, else BM25 only.

    `retrieve` blocks (call it from plain code); `aretrieve` runs it in a worker thread so an
    agent's event loop is never held up by the store or the embedding request. Numbers given as
    strings ("5", "0.5") are accepted, as some models send them that way.
    """

    def __init__(
        self,
        *,
        store: BaseVectorStore,
        embedder: Embedder | None = None,
        where: Where | None = None,
    ):
        self.store = store
        self.embedder = embedder
        self.where = dict(where or {})

    def retrieve(
        self,
        query: str,
        top_k: int | str = 5,
        min_score: float | str | None = None,
        *,
        where: Where | None = None,
    ) -> list[RetrievedChunk]:
        """The best `top_k` chunks scoring at least `min_score` (see `BaseVectorStore` for scales)."""
        k = coerce_number(top_k, "top_k", int)
        floor = coerce_number(min_score, "min_score")
        if not query or not query.strip() or not k or k <= 0:
            return []
        embedding = self.embedder.embed([query])[0] if self.embedder is not None else None
        # Ask for more than k: a passage stored twice (a section that is also its own page, cut
        # at other boundaries) is returned once, and its copies should not crowd out others.
        found = self.store.search(
            query, embedding=embedding, top_k=k * 3, where={**self.where, **(where or {})}
        )
        chunks: list[RetrievedChunk] = []
        for chunk in found:
            if floor is not None and chunk.score < floor:
                continue
            if any(near_duplicates(chunk.text, kept.text) for kept in chunks):
                continue
            chunks.append(chunk)
            if len(chunks) == k:
                break
        return chunks

    async def aretrieve(
        self,
        query: str,
        top_k: int | str = 5,
        min_score: float | str | None = None,
        *,
        where: Where | None = None,
    ) -> list[RetrievedChunk]:
        return await asyncio.to_thread(self.retrieve, query, top_k, min_score, where=where)

    def __repr__(self) -> str:
        embedder: Any = type(self.embedder).__name__ if self.embedder else None
        return f"RAGRetriever(store={type(self.store).__name__}, embedder={embedder})"
