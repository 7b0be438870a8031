"""`QdrantVectorStore`: chunks in a Qdrant collection, BM25 as sparse vectors, cosine on dense ones.

Needs the `qdrant` extra (`pip install 'sleuth[qdrant]'`). Three ways to reach Qdrant:

- local mode on disk (the default: `$SLEUTH_HOME/qdrant`, or `path=`), for one machine and tests;
- local mode in memory (`location=":memory:"`), gone when the process ends;
- a Qdrant server (`url=`), with its API key from `api_key=` or `$QDRANT_API_KEY`.

Text search is BM25: each chunk carries a sparse vector of its words' term-frequency weights, and
the collection's IDF modifier supplies each word's rarity, so the score is BM25 with a fixed
average chunk length (`average_length`). With a dense vector and a query embedding the two
rankings are fused exactly as `SQLiteStore` fuses them, so scores mean the same on every store.
Local mode searches vectors exactly; a server uses its HNSW index (`hnsw_ef` widens the search).
Qdrant keeps cosine vectors scaled to length 1, so `get` returns them that way.

Qdrant has no transactions: `replace_source` writes the new chunks before removing the old ones,
and a local folder serves one process at a time (a second one waits for it, see `lock_timeout`).
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sleuth.rag.stores.base import (
    BaseVectorStore,
    Document,
    StoreError,
    Where,
    as_top_k,
    check_where,
    fuse_rankings,
    replace_without_transactions,
)
from sleuth.rag.text import bm25_term_weights, query_words, term_id
from sleuth.rag.types import RetrievedChunk
from sleuth.runtime.errors import MissingExtraError
from sleuth.runtime.paths import sleuth_home

API_KEY_ENV = "QDRANT_API_KEY"
DENSE = "dense"
SPARSE = "bm25"
DEFAULT_AVERAGE_LENGTH = 180.0
"""Words in an average chunk (1,200 characters of English prose is about 180 words)."""

_CANDIDATES_PER_RANKING = 4
_WRITE_BATCH = 256
_SCROLL_PAGE = 1000
_ID_NAMESPACE = uuid.UUID("5b1e07c4-7f4e-4a55-9d8e-2f1a3c6b9e10")
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_]+$")

_local_clients: dict[Path, tuple[Any, int]] = {}
_local_clients_lock = threading.Lock()


def point_id(doc_id: str) -> str:
    """Qdrant ids are UUIDs or integers: a document id maps to a stable UUID."""
    return str(uuid.uuid5(_ID_NAMESPACE, doc_id))


class QdrantVectorStore(BaseVectorStore):
    """Chunks in the Qdrant collection `collection_name` (created on the first write).

    `dimension` turns on dense vectors (cosine); without it the collection holds text only. An
    existing collection keeps the dimension it was made with. Give at most one of `url`, `path`,
    `location` or a ready `client`; with none, local mode on disk under `$SLEUTH_HOME/qdrant`.
    """

    def __init__(
        self,
        collection_name: str,
        dimension: int | None = None,
        *,
        url: str | None = None,
        path: str | Path | None = None,
        location: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        average_length: float = DEFAULT_AVERAGE_LENGTH,
        hnsw_ef: int | None = None,
        lock_timeout: float | None = None,
        on_wait: Callable[[str], None] | None = None,
    ):
        if not collection_name:
            raise StoreError("QdrantVectorStore needs a collection_name")
        if sum(x is not None for x in (url, path, location, client)) > 1:
            raise StoreError("give QdrantVectorStore one of url=, path=, location= or client=")
        self.collection_name = collection_name
        self.average_length = average_length
        self.hnsw_ef = hnsw_ef
        self._lock = threading.RLock()
        self._local_path: Path | None = None
        if client is None:
            client = self._connect(url, path, location, api_key, lock_timeout, on_wait)
        self.client = client
        self.dimension = dimension
        self._ready = False
        existing = self._existing_dimension()
        if existing is not None:
            self._ready = True
            stored = existing or None
            if dimension is not None and stored != dimension:
                raise StoreError(
                    f"Qdrant collection {collection_name!r} holds "
                    f"{f'{stored}-dimensional vectors' if stored else 'no vectors'}, not "
                    f"{dimension}; use the embedder it was filled with, or a new collection"
                )
            self.dimension = stored

    # -- connection -------------------------------------------------------------------------------

    def _connect(
        self,
        url: str | None,
        path: str | Path | None,
        location: str | None,
        api_key: str | None,
        lock_timeout: float | None,
        on_wait: Callable[[str], None] | None,
    ) -> Any:
        try:
            from qdrant_client import QdrantClient
        except ImportError as exc:
            raise MissingExtraError(
                "QdrantVectorStore needs the qdrant extra: pip install 'sleuth[qdrant]'"
            ) from exc
        if url is not None:
            return QdrantClient(url=url, api_key=api_key or os.environ.get(API_KEY_ENV) or None)
        if location is not None:
            return QdrantClient(location=location)
        folder = Path(path) if path is not None else sleuth_home() / "qdrant"
        folder.mkdir(parents=True, exist_ok=True)
        self._local_path = folder.resolve()
        return _open_local(self._local_path, lock_timeout, on_wait)

    def close(self) -> None:
        with self._lock:
            if self._local_path is not None:
                _release_local(self._local_path)
                self._local_path = None
            else:
                self.client.close()

    # -- schema -----------------------------------------------------------------------------------

    def _existing_dimension(self) -> int | None:
        """The collection's dense dimension, 0 for a text-only one, None when it does not exist."""
        with self._lock:
            if not self.client.collection_exists(self.collection_name):
                return None
            vectors = self.client.get_collection(self.collection_name).config.params.vectors
        if isinstance(vectors, dict) and DENSE in vectors:
            return int(vectors[DENSE].size)
        return 0

    def _ensure_collection(self) -> None:
        if self._ready:
            return
        from qdrant_client import models

        with self._lock:
            if not self.client.collection_exists(self.collection_name):
                dense = (
                    {
                        DENSE: models.VectorParams(
                            size=self.dimension, distance=models.Distance.COSINE
                        )
                    }
                    if self.dimension
                    else {}
                )
                self.client.create_collection(
                    self.collection_name,
                    vectors_config=dense,
                    sparse_vectors_config={
                        SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)
                    },
                )
            self._ready = True

    def _exists(self) -> bool:
        if not self._ready:
            self._ready = self._existing_dimension() is not None
        return self._ready

    # -- writes -----------------------------------------------------------------------------------

    def add(self, documents: Sequence[Document]) -> None:
        from qdrant_client import models

        points = [self._point(document, models) for document in documents]
        if not points:
            return
        self._ensure_collection()
        with self._lock:
            for first in range(0, len(points), _WRITE_BATCH):
                self.client.upsert(
                    self.collection_name, points[first : first + _WRITE_BATCH], wait=True
                )

    def _point(self, document: Document, models: Any) -> Any:
        weights = bm25_term_weights(document.text, average_length=self.average_length)
        vector: dict[str, Any] = {
            SPARSE: models.SparseVector(indices=list(weights), values=list(weights.values()))
        }
        if document.embedding is not None:
            if not self.dimension:
                raise StoreError(
                    f"document {document.id!r} has an embedding but Qdrant collection "
                    f"{self.collection_name!r} was made without dimension=N, so it holds no "
                    "vectors; create the store with the embedder's dimension"
                )
            if len(document.embedding) != self.dimension:
                raise StoreError(
                    f"document {document.id!r} has a {len(document.embedding)}-dimensional "
                    f"embedding; collection {self.collection_name!r} holds {self.dimension}"
                )
            vector[DENSE] = list(document.embedding)
        return models.PointStruct(
            id=point_id(document.id),
            vector=vector,
            payload={
                "doc_id": document.id,
                "text": document.text,
                "source": document.source,
                "location": document.location,
                "metadata": document.metadata,
            },
        )

    def replace_source(self, source: str, documents: Sequence[Document]) -> None:
        """Replace every chunk of `source`: new chunks are written before old ones go, and a failed
        write is taken back, so the source is never left without chunks."""
        replace_without_transactions(
            self, source, documents, lambda: self._doc_ids({"source": source})
        )

    def delete(self, ids: Sequence[str] | None = None, *, where: Where | None = None) -> int:
        from qdrant_client import models

        if ids is None and where is None:
            raise StoreError("delete() needs ids or where; to empty the store pass where={}")
        if (ids is not None and not ids) or not self._exists():
            return 0
        doomed = self._point_ids(_filter(where, ids))
        if doomed:
            with self._lock:
                self.client.delete(
                    self.collection_name, models.PointIdsList(points=doomed), wait=True
                )
        return len(doomed)

    # -- reads ------------------------------------------------------------------------------------

    def count(self, where: Where | None = None) -> int:
        query_filter = _filter(where)
        if not self._exists():
            return 0
        with self._lock:
            return int(
                self.client.count(self.collection_name, count_filter=query_filter, exact=True).count
            )

    def get(self, ids: Sequence[str]) -> list[Document]:
        id_list = list(ids)
        if not id_list or not self._exists():
            return []
        with self._lock:
            records = self.client.retrieve(
                self.collection_name,
                ids=[point_id(doc_id) for doc_id in id_list],
                with_payload=True,
                with_vectors=[DENSE] if self.dimension else False,
            )
        by_id = {}
        for record in records:
            payload = record.payload or {}
            vectors = record.vector if isinstance(record.vector, dict) else {}
            dense = vectors.get(DENSE)
            by_id[payload["doc_id"]] = Document(
                id=payload["doc_id"],
                text=payload.get("text", ""),
                source=payload.get("source", ""),
                location=payload.get("location", ""),
                metadata=payload.get("metadata") or {},
                embedding=list(dense) if dense is not None else None,
            )
        return [by_id[doc_id] for doc_id in id_list if doc_id in by_id]

    def search(
        self,
        query: str,
        *,
        embedding: Sequence[float] | None = None,
        top_k: int | str = 5,
        where: Where | None = None,
    ) -> list[RetrievedChunk]:
        top_k = as_top_k(top_k)
        query_filter = _filter(where)
        if top_k <= 0 or not self._exists():
            return []
        use_vectors = embedding is not None and bool(self.dimension)
        depth = max(top_k * _CANDIDATES_PER_RANKING, 50) if use_vectors else top_k
        text_hits = self._text_hits(query, depth, query_filter)
        if not use_vectors:
            return [_chunk(hit, hit.score) for hit in text_hits]
        assert embedding is not None
        if len(embedding) != self.dimension:
            raise StoreError(
                f"query embedding has {len(embedding)} dimensions but the store holds "
                f"{self.dimension}; embed queries with the model the store was filled with"
            )
        vector_hits = self._query(list(embedding), DENSE, depth, query_filter)
        if not text_hits:
            return [_chunk(hit, hit.score) for hit in vector_hits[:top_k]]
        by_id = {hit.id: hit for hit in [*vector_hits, *text_hits]}
        fused = fuse_rankings(
            [[str(hit.id) for hit in text_hits], [str(hit.id) for hit in vector_hits]], top_k
        )
        return [_chunk(by_id[point], score) for point, score in fused]

    def _text_hits(self, query: str, limit: int, query_filter: Any) -> list[Any]:
        from qdrant_client import models

        terms = sorted({term_id(word) for word in query_words(query)})
        if not terms:
            return []
        sparse = models.SparseVector(indices=terms, values=[1.0] * len(terms))
        return self._query(sparse, SPARSE, limit, query_filter)

    def _query(self, query: Any, using: str, limit: int, query_filter: Any) -> list[Any]:
        from qdrant_client import models

        params = models.SearchParams(hnsw_ef=self.hnsw_ef) if self.hnsw_ef else None
        with self._lock:
            response = self.client.query_points(
                self.collection_name,
                query=query,
                using=using,
                limit=limit,
                query_filter=query_filter,
                search_params=params,
                with_payload=True,
            )
        return list(response.points)

    def _point_ids(self, query_filter: Any) -> list[Any]:
        return [record.id for record in self._scroll(query_filter, payload=False)]

    def _doc_ids(self, where: Where) -> list[str]:
        if not self._exists():
            return []
        records = self._scroll(_filter(where), payload=True)
        return [(record.payload or {})["doc_id"] for record in records]

    def _scroll(self, query_filter: Any, *, payload: bool) -> list[Any]:
        records: list[Any] = []
        offset = None
        with self._lock:
            while True:
                page, offset = self.client.scroll(
                    self.collection_name,
                    scroll_filter=query_filter,
                    limit=_SCROLL_PAGE,
                    offset=offset,
                    with_payload=["doc_id"] if payload else False,
                    with_vectors=False,
                )
                records.extend(page)
                if offset is None:
                    return records


def _filter(where: Where | None, ids: Sequence[str] | None = None) -> Any:
    """A Qdrant `Filter` for a metadata filter (and ids), or None for everything."""
    from qdrant_client import models

    must: list[Any] = []
    for key, values in check_where(where).items():
        path = key if key in ("source", "location") else f"metadata.{_path_part(key)}"
        alternatives: list[Any] = []
        strings = [value for value in values if isinstance(value, str)]
        if strings:
            alternatives.append(models.FieldCondition(key=path, match=models.MatchAny(any=strings)))
        for value in values:
            if type(value) is bool:
                alternatives.append(
                    models.FieldCondition(key=path, match=models.MatchValue(value=value))
                )
            elif not isinstance(value, str):
                # A range matches integer and float payloads alike (MatchValue takes no floats).
                alternatives.append(
                    models.FieldCondition(key=path, range=models.Range(gte=value, lte=value))
                )
        must.append(models.Filter(should=alternatives))
    if ids is not None:
        must.append(models.HasIdCondition(has_id=[point_id(doc_id) for doc_id in ids]))
    return models.Filter(must=must) if must else None


def _path_part(key: str) -> str:
    if _PLAIN_KEY.match(key):
        return key
    if '"' in key:
        raise StoreError(f"Qdrant cannot filter on metadata key {key!r}: it contains a '\"'")
    return f'"{key}"'


def _chunk(hit: Any, score: float) -> RetrievedChunk:
    payload = hit.payload or {}
    return RetrievedChunk(
        id=payload.get("doc_id", str(hit.id)),
        text=payload.get("text", ""),
        score=float(score),
        source=payload.get("source", ""),
        location=payload.get("location", ""),
        metadata=payload.get("metadata") or {},
    )


# -- local mode: one client per folder in this process, waiting for other processes --------------


def _open_local(
    folder: Path, lock_timeout: float | None, on_wait: Callable[[str], None] | None
) -> Any:
    from qdrant_client import QdrantClient

    with _local_clients_lock:
        if folder in _local_clients:
            client, users = _local_clients[folder]
            _local_clients[folder] = (client, users + 1)
            return client
        waited_since: float | None = None
        while True:
            try:
                client = QdrantClient(path=str(folder))
                break
            except RuntimeError as exc:
                if "already accessed" not in str(exc):
                    raise
                now = time.monotonic()
                if waited_since is None:
                    waited_since = now
                    if on_wait is not None:
                        on_wait(
                            f"waiting for the Qdrant folder {folder}: another process has it open "
                            "(local mode serves one process at a time; a Qdrant server serves many)"
                        )
                elif lock_timeout is not None and now - waited_since > lock_timeout:
                    raise StoreError(
                        f"the Qdrant folder {folder} stayed open in another process for "
                        f"{lock_timeout:g} s; close that process, or use a Qdrant server (url=)"
                    ) from exc
                time.sleep(0.2)
        _local_clients[folder] = (client, 1)
        return client


def _release_local(folder: Path) -> None:
    with _local_clients_lock:
        client, users = _local_clients[folder]
        if users > 1:
            _local_clients[folder] = (client, users - 1)
            return
        del _local_clients[folder]
        client.close()
