"""`OpenSearchVectorStore`: chunks in an OpenSearch index. BM25 `match`, knn when vectors exist.

For when one machine's SQLite file is outgrown. Needs the `opensearch` extra
(`pip install 'sleuth[opensearch]'`). Vectors need the k-NN plugin (bundled with OpenSearch): the
index is created with `index.knn: true` and a `knn_vector` field when a `dimension` is given. With
vectors and a query embedding, the BM25 and knn rankings are fused client-side (reciprocal rank
fusion), exactly as `SQLiteStore` does, so scores mean the same on both stores.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from sleuth.rag.stores.base import (
    BaseVectorStore,
    Document,
    StoreError,
    Where,
    as_top_k,
    check_where,
    fuse_rankings,
)
from sleuth.rag.text import query_words
from sleuth.rag.types import RetrievedChunk
from sleuth.runtime.errors import MissingExtraError

_CANDIDATES_PER_RANKING = 4


class OpenSearchVectorStore(BaseVectorStore):
    """Chunks in the OpenSearch index `index` (created on first use).

    Give a ready `client` (an `opensearchpy.OpenSearch`) or `hosts` (e.g. "http://localhost:9200").
    `dimension` turns on vector storage and knn search. `refresh=True` makes each write visible to
    the next search (what an agent expects); pass False for bulk loads and call `refresh()` after.
    """

    def __init__(
        self,
        index: str,
        *,
        client: Any = None,
        hosts: str | list[str] | None = None,
        dimension: int | None = None,
        refresh: bool = True,
        bulk_chunk_size: int = 500,
    ):
        if client is None:
            try:
                from opensearchpy import OpenSearch
            except ImportError as exc:
                raise MissingExtraError(
                    "OpenSearchVectorStore needs the opensearch extra: "
                    "pip install 'sleuth[opensearch]'"
                ) from exc
            client = OpenSearch(hosts=hosts or ["http://localhost:9200"])
        self.client = client
        self.index = index
        self.dimension = dimension
        self.refresh_writes = refresh
        self.bulk_chunk_size = bulk_chunk_size
        self._index_ready = False

    def mapping(self) -> dict[str, Any]:
        """The index body this store creates: settings plus mappings."""
        properties: dict[str, Any] = {
            "text": {"type": "text"},
            "source": {"type": "keyword"},
            "location": {"type": "keyword"},
            "metadata": {"type": "object"},
        }
        settings: dict[str, Any] = {}
        if self.dimension:
            properties["embedding"] = {
                "type": "knn_vector",
                "dimension": self.dimension,
                "method": {"name": "hnsw", "space_type": "cosinesimil", "engine": "lucene"},
            }
            settings = {"index": {"knn": True}}
        return {
            "settings": settings,
            "mappings": {
                # Metadata strings are exact-match filter values, not analysed text.
                "dynamic_templates": [
                    {
                        "metadata_strings": {
                            "path_match": "metadata.*",
                            "match_mapping_type": "string",
                            "mapping": {"type": "keyword"},
                        }
                    }
                ],
                "properties": properties,
            },
        }

    def ensure_index(self) -> None:
        """Create the index with `mapping()` unless it exists."""
        if self._index_ready:
            return
        if not self.client.indices.exists(index=self.index):
            self.client.indices.create(index=self.index, body=self.mapping())
        self._index_ready = True

    def refresh(self) -> None:
        self.ensure_index()
        self.client.indices.refresh(index=self.index)

    def add(self, documents: Sequence[Document]) -> None:
        from opensearchpy import helpers

        self.ensure_index()
        actions = []
        for document in documents:
            source: dict[str, Any] = {
                "text": document.text,
                "source": document.source,
                "location": document.location,
                "metadata": document.metadata,
            }
            if document.embedding is not None:
                if not self.dimension:
                    raise StoreError(
                        f"document {document.id!r} has an embedding but this store was made "
                        "without dimension=N, so its index has no vector field"
                    )
                if len(document.embedding) != self.dimension:
                    raise StoreError(
                        f"document {document.id!r} has a {len(document.embedding)}-dimensional "
                        f"embedding; index {self.index!r} holds {self.dimension}"
                    )
                source["embedding"] = list(document.embedding)
            actions.append({"_index": self.index, "_id": document.id, "_source": source})
        if not actions:
            return
        _, errors = helpers.bulk(
            self.client,
            actions,
            chunk_size=self.bulk_chunk_size,
            refresh=self.refresh_writes,
            raise_on_error=False,
        )
        if errors:
            raise RuntimeError(
                f"OpenSearch rejected {len(errors)} of {len(actions)} chunks; first: {errors[0]}"
            )

    def replace_source(self, source: str, documents: Sequence[Document]) -> None:
        """Replace every chunk of `source`. OpenSearch has no transactions, so the new chunks are
        written first and the old ones removed only after that succeeded; a write that fails is
        taken back (chunks it overwrote are restored) and the old chunks stay in place."""
        new_ids = [document.id for document in documents]
        overwritten = self.get(new_ids) if new_ids else []
        try:
            self.add(documents)
        except BaseException:
            with contextlib.suppress(Exception):
                before = {document.id for document in overwritten}
                added = [i for i in new_ids if i not in before]
                if added:
                    self.delete(added)
                if overwritten:
                    self.add(overwritten)
            raise
        query: dict[str, Any] = {"bool": {"filter": _filters({"source": source})}}
        if new_ids:
            query["bool"]["must_not"] = [{"ids": {"values": new_ids}}]
        self.client.delete_by_query(
            index=self.index,
            body={"query": query},
            refresh=self.refresh_writes,
            conflicts="proceed",
        )

    def delete(self, ids: Sequence[str] | None = None, *, where: Where | None = None) -> int:
        if ids is None and where is None:
            raise StoreError("delete() needs ids or where; to empty the store pass where={}")
        self.ensure_index()
        filters = _filters(where)
        if ids is not None:
            if not ids:
                return 0
            filters.append({"ids": {"values": list(ids)}})
        response = self.client.delete_by_query(
            index=self.index,
            body={"query": {"bool": {"filter": filters}}},
            refresh=self.refresh_writes,
            conflicts="proceed",
        )
        return int(response.get("deleted", 0))

    def count(self, where: Where | None = None) -> int:
        self.ensure_index()
        response = self.client.count(
            index=self.index, body={"query": {"bool": {"filter": _filters(where)}}}
        )
        return int(response["count"])

    def get(self, ids: Sequence[str]) -> list[Document]:
        self.ensure_index()
        if not ids:
            return []
        response = self.client.mget(index=self.index, body={"ids": list(ids)})
        return [
            Document(
                id=hit["_id"],
                text=hit["_source"].get("text", ""),
                source=hit["_source"].get("source", ""),
                location=hit["_source"].get("location", ""),
                metadata=hit["_source"].get("metadata") or {},
                embedding=hit["_source"].get("embedding"),
            )
            for hit in response["docs"]
            if hit.get("found")
        ]

    def search(
        self,
        query: str,
        *,
        embedding: Sequence[float] | None = None,
        top_k: int | str = 5,
        where: Where | None = None,
    ) -> list[RetrievedChunk]:
        self.ensure_index()
        top_k = as_top_k(top_k)
        if top_k <= 0:
            return []
        use_vectors = embedding is not None and bool(self.dimension)
        depth = max(top_k * _CANDIDATES_PER_RANKING, 50) if use_vectors else top_k
        filters = _filters(where)
        text_hits = (
            self._hits(
                {
                    "bool": {
                        "must": [{"match": {"text": " ".join(query_words(query))}}],
                        "filter": filters,
                    }
                },
                depth,
            )
            if query.strip()
            else []
        )
        if not use_vectors:
            return [_chunk(hit, float(hit["_score"])) for hit in text_hits]
        assert embedding is not None
        knn: dict[str, Any] = {"vector": list(embedding), "k": depth}
        if filters:
            knn["filter"] = {"bool": {"filter": filters}}
        vector_hits = self._hits({"knn": {"embedding": knn}}, depth)
        if not text_hits:
            return [_chunk(hit, float(hit["_score"])) for hit in vector_hits[:top_k]]
        by_id = {hit["_id"]: hit for hit in [*vector_hits, *text_hits]}
        fused = fuse_rankings(
            [[hit["_id"] for hit in text_hits], [hit["_id"] for hit in vector_hits]], top_k
        )
        return [_chunk(by_id[doc_id], score) for doc_id, score in fused]

    def _hits(self, query: dict[str, Any], size: int) -> list[dict[str, Any]]:
        response = self.client.search(
            index=self.index,
            body={"query": query, "size": size, "_source": {"excludes": ["embedding"]}},
        )
        return list(response["hits"]["hits"])

    def close(self) -> None:
        self.client.close()


def _filters(where: Where | None) -> list[dict[str, Any]]:
    return [
        {"terms": {key if key in ("source", "location") else f"metadata.{key}": values}}
        for key, values in check_where(where).items()
    ]


def _chunk(hit: dict[str, Any], score: float) -> RetrievedChunk:
    source = hit["_source"]
    return RetrievedChunk(
        id=hit["_id"],
        text=source.get("text", ""),
        score=score,
        source=source.get("source", ""),
        location=source.get("location", ""),
        metadata=source.get("metadata") or {},
    )
