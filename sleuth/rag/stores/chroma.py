"""`ChromaVectorStore`: chunks in a Chroma collection, embedded (persistent) or on a Chroma server.

Needs the `chroma` extra (`pip install 'sleuth[chroma]'`). By default the collection lives in
Chroma's embedded persistent client under `$SLEUTH_HOME/chroma` (or `path=`); `url=` points at a
Chroma server over HTTP instead (a bearer token for a proxy in front of it comes from
`$CHROMA_AUTH_TOKEN`).

Chroma ranks by vectors only (its BM25 index runs in Chroma Cloud, not locally), so text search
works like this: each chunk lists its distinct words in metadata, Chroma finds the chunks holding
any query word, and BM25 scores them here, with word rarity counted over the whole collection.
Vector search is cosine on Chroma's HNSW index (`ef_search` sets its breadth); hybrid search fuses
the two rankings as `SQLiteStore` does. Chroma keeps only flat metadata values, so each chunk's
metadata is also stored whole as JSON: `get` and search results return it exactly, and filters
match its strings, numbers and booleans. Chroma has no transactions: `replace_source` writes the
new chunks before removing the old ones.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
from sleuth.rag.text import bm25_scores, query_words, words
from sleuth.rag.types import RetrievedChunk
from sleuth.runtime.errors import MissingExtraError
from sleuth.runtime.paths import sleuth_home

AUTH_TOKEN_ENV = "CHROMA_AUTH_TOKEN"
DEFAULT_EF_SEARCH = 200
"""HNSW search breadth: Chroma's own default (100) finds fewer than 95% of the true top 10."""

_CANDIDATES_PER_RANKING = 4
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")
_TERMS = "sleuth:terms"
_JSON = "sleuth:metadata"
_HAS_VECTOR = "sleuth:vector"
_DIMENSION = "sleuth_dimension"
_USER = "m:"


class ChromaVectorStore(BaseVectorStore):
    """Chunks in the Chroma collection `collection_name` (created on first use).

    `dimension` turns on vectors; an existing collection keeps the dimension it was made with.
    Give at most one of `path` (embedded, on disk), `url` (a Chroma server) or a ready `client`.
    """

    def __init__(
        self,
        collection_name: str,
        dimension: int | None = None,
        *,
        path: str | Path | None = None,
        url: str | None = None,
        client: Any = None,
        ef_search: int = DEFAULT_EF_SEARCH,
    ):
        if not _NAME.match(collection_name or ""):
            raise StoreError(
                f"Chroma collection name {collection_name!r} must be 3-512 characters of letters, "
                "digits, '.', '_' or '-', starting and ending with a letter or digit"
            )
        if sum(x is not None for x in (path, url, client)) > 1:
            raise StoreError("give ChromaVectorStore one of path=, url= or client=")
        self.collection_name = collection_name
        self.client = client if client is not None else _connect(path, url)
        self._lock = threading.RLock()
        self.collection = self._open_collection(dimension, ef_search)
        stored = int((self.collection.metadata or {}).get(_DIMENSION, 0)) or None
        if dimension is not None and stored != dimension:
            raise StoreError(
                f"Chroma collection {collection_name!r} holds "
                f"{f'{stored}-dimensional vectors' if stored else 'no vectors'}, not {dimension}; "
                "use the embedder it was filled with, or a new collection"
            )
        self.dimension = stored

    def _open_collection(self, dimension: int | None, ef_search: int) -> Any:
        from chromadb.errors import NotFoundError

        try:
            return self.client.get_collection(self.collection_name, embedding_function=None)
        except NotFoundError:
            return self.client.get_or_create_collection(
                self.collection_name,
                configuration={"hnsw": {"space": "cosine", "ef_search": ef_search}},
                metadata={_DIMENSION: dimension or 0},
                embedding_function=None,
            )

    # -- writes -----------------------------------------------------------------------------------

    def add(self, documents: Sequence[Document]) -> None:
        if not documents:
            return
        records = [self._record(document) for document in documents]
        batch = max(1, int(self.client.get_max_batch_size()))
        with self._lock:
            for first in range(0, len(records), batch):
                part = records[first : first + batch]
                self.collection.upsert(
                    ids=[r[0] for r in part],
                    documents=[r[1] for r in part],
                    embeddings=[r[2] for r in part],
                    metadatas=[r[3] for r in part],
                )

    def _record(self, document: Document) -> tuple[str, str, list[float], dict[str, Any]]:
        metadata: dict[str, Any] = {
            "source": document.source,
            "location": document.location,
            _JSON: json.dumps(document.metadata, ensure_ascii=False),
            _HAS_VECTOR: document.embedding is not None,
        }
        terms = sorted(set(words(document.text)))
        if terms:
            metadata[_TERMS] = terms
        for key, value in document.metadata.items():
            if isinstance(value, str | int | float | bool):
                metadata[_USER + key] = value
        width = self.dimension or 1
        if document.embedding is None:
            # Chroma needs a vector for every record; this one is never searched (see _HAS_VECTOR).
            return document.id, document.text, [1.0] + [0.0] * (width - 1), metadata
        if not self.dimension:
            raise StoreError(
                f"document {document.id!r} has an embedding but Chroma collection "
                f"{self.collection_name!r} was made without dimension=N, so it holds no vectors; "
                "create the store with the embedder's dimension"
            )
        if len(document.embedding) != self.dimension:
            raise StoreError(
                f"document {document.id!r} has a {len(document.embedding)}-dimensional "
                f"embedding; collection {self.collection_name!r} holds {self.dimension}"
            )
        return document.id, document.text, [float(x) for x in document.embedding], metadata

    def replace_source(self, source: str, documents: Sequence[Document]) -> None:
        """Replace every chunk of `source`: new chunks are written before old ones go, and a failed
        write is taken back, so the source is never left without chunks."""
        replace_without_transactions(self, source, documents, lambda: self._ids({"source": source}))

    def delete(self, ids: Sequence[str] | None = None, *, where: Where | None = None) -> int:
        if ids is None and where is None:
            raise StoreError("delete() needs ids or where; to empty the store pass where={}")
        if ids is not None and not ids:
            return 0
        doomed = self._ids(where, ids)
        if doomed:
            with self._lock:
                self.collection.delete(ids=doomed)
        return len(doomed)

    # -- reads ------------------------------------------------------------------------------------

    def count(self, where: Where | None = None) -> int:
        if not where:
            with self._lock:
                return int(self.collection.count())
        return len(self._ids(where))

    def get(self, ids: Sequence[str]) -> list[Document]:
        id_list = list(ids)
        if not id_list:
            return []
        with self._lock:
            found = self.collection.get(
                ids=id_list, include=["documents", "metadatas", "embeddings"]
            )
        by_id = {}
        for doc_id, text, metadata, vector in zip(
            found["ids"], found["documents"], found["metadatas"], found["embeddings"], strict=True
        ):
            by_id[doc_id] = Document(
                id=doc_id,
                text=text or "",
                source=str(metadata.get("source", "")),
                location=str(metadata.get("location", "")),
                metadata=json.loads(str(metadata.get(_JSON, "{}"))),
                embedding=[float(x) for x in vector] if metadata.get(_HAS_VECTOR) else None,
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
        chroma_where = _where(where)
        if top_k <= 0:
            return []
        use_vectors = embedding is not None and bool(self.dimension)
        depth = max(top_k * _CANDIDATES_PER_RANKING, 50) if use_vectors else top_k
        text_hits = self._text_hits(query, depth, chroma_where)
        if not use_vectors:
            return text_hits
        assert embedding is not None
        if len(embedding) != self.dimension:
            raise StoreError(
                f"query embedding has {len(embedding)} dimensions but the store holds "
                f"{self.dimension}; embed queries with the model the store was filled with"
            )
        vector_hits = self._vector_hits(embedding, depth, chroma_where)
        if not text_hits:
            return vector_hits[:top_k]
        by_id = {hit.id: hit for hit in [*vector_hits, *text_hits]}
        fused = fuse_rankings(
            [[hit.id for hit in text_hits], [hit.id for hit in vector_hits]], top_k
        )
        return [by_id[doc_id].model_copy(update={"score": score}) for doc_id, score in fused]

    def _text_hits(
        self, query: str, limit: int, chroma_where: dict[str, Any] | None
    ) -> list[RetrievedChunk]:
        terms = sorted(set(query_words(query)))
        if not terms:
            return []
        holding = [{_TERMS: {"$contains": term}} for term in terms]
        condition = holding[0] if len(holding) == 1 else {"$or": holding}
        with self._lock:
            found = self.collection.get(
                where=_all_of([condition, chroma_where]), include=["documents", "metadatas"]
            )
            total = int(self.collection.count())
        texts = [text or "" for text in found["documents"]]
        scores = bm25_scores(query, texts, total=total)
        ranked = sorted(
            (i for i, score in enumerate(scores) if score > 0), key=lambda i: -scores[i]
        )[:limit]
        return [_chunk(found["ids"][i], texts[i], found["metadatas"][i], scores[i]) for i in ranked]

    def _vector_hits(
        self, embedding: Sequence[float], limit: int, chroma_where: dict[str, Any] | None
    ) -> list[RetrievedChunk]:
        with self._lock:
            found = self.collection.query(
                query_embeddings=[[float(x) for x in embedding]],
                n_results=limit,
                where=_all_of([{_HAS_VECTOR: True}, chroma_where]),
                include=["documents", "metadatas", "distances"],
            )
        hits = [
            _chunk(doc_id, text or "", metadata, 1.0 - float(distance))
            for doc_id, text, metadata, distance in zip(
                found["ids"][0],
                found["documents"][0],
                found["metadatas"][0],
                found["distances"][0],
                strict=True,
            )
        ]
        return sorted(hits, key=lambda hit: -hit.score)

    def _ids(self, where: Where | None, ids: Sequence[str] | None = None) -> list[str]:
        with self._lock:
            found = self.collection.get(
                ids=list(ids) if ids is not None else None, where=_where(where), include=[]
            )
        return list(found["ids"])

    def close(self) -> None:
        """The client is shared per folder inside chromadb; nothing to release here."""


def _connect(path: str | Path | None, url: str | None) -> Any:
    try:
        import chromadb
    except ImportError as exc:
        raise MissingExtraError(
            "ChromaVectorStore needs the chroma extra: pip install 'sleuth[chroma]'"
        ) from exc
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise StoreError(f"Chroma url {url!r} must look like http://host:8000")
        token = os.environ.get(AUTH_TOKEN_ENV)
        return chromadb.HttpClient(
            host=parts.hostname,
            port=parts.port or (443 if parts.scheme == "https" else 8000),
            ssl=parts.scheme == "https",
            headers={"Authorization": f"Bearer {token}"} if token else None,
        )
    folder = Path(path) if path is not None else sleuth_home() / "chroma"
    folder.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(folder))


def _where(where: Where | None) -> dict[str, Any] | None:
    """A Chroma `where` for a metadata filter (its `$in` lists take one type each)."""
    clauses: list[dict[str, Any] | None] = []
    for key, values in check_where(where).items():
        field = key if key in ("source", "location") else _USER + key
        groups: dict[str, list[Any]] = {}
        for value in values:
            kind = "bool" if type(value) is bool else type(value).__name__
            groups.setdefault(kind, []).append(value)
        alternatives = [{field: {"$in": group}} for group in groups.values()]
        clauses.append(alternatives[0] if len(alternatives) == 1 else {"$or": alternatives})
    return _all_of(clauses)


def _all_of(clauses: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    present = [clause for clause in clauses if clause]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}


def _chunk(doc_id: str, text: str, metadata: Any, score: float) -> RetrievedChunk:
    return RetrievedChunk(
        id=doc_id,
        text=text,
        score=float(score),
        source=str(metadata.get("source", "")),
        location=str(metadata.get("location", "")),
        metadata=json.loads(str(metadata.get(_JSON, "{}"))),
    )
