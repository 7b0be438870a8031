"""`SQLiteStore`: the embedded default. One SQLite file: FTS5 BM25, optional vectors, hybrid ranking.

Vectors are stored as float32 blobs and searched by brute-force cosine in numpy (this Python cannot
load SQLite extensions, so there is no vector index); that stays fast to tens of thousands of
chunks. When a store holds vectors and the query has an embedding, the BM25 and cosine rankings
are fused (reciprocal rank fusion). Every write is one transaction, so a crash or a failed file
never leaves half a document behind; a writer waits for another process's transaction to end
instead of failing with "database is locked".
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.rag.stores.base import (
    BaseVectorStore,
    Document,
    StoreError,
    Where,
    as_top_k,
    check_where,
    fuse_rankings,
)
from sleuth.rag.text import query_phrases, query_words, unit_rows, unit_rows_cosine
from sleuth.rag.types import RetrievedChunk
from sleuth.runtime.paths import sleuth_home

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    location TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    embedding BLOB
);
CREATE INDEX IF NOT EXISTS chunks_source ON chunks(source);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, content='chunks', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
END;
CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_BUSY_SECONDS = 2.0
"""How long one attempt waits for another writer's lock before `_when_unlocked` tries again."""

_CANDIDATES_PER_RANKING = 4
"""Hybrid search fuses the best `top_k * this` (at least 50) of each ranking."""


def store_path(name: str, home: Path | None = None) -> Path:
    """Where the store called `name` lives: `$SLEUTH_HOME/stores/<name>.sqlite`."""
    if not name or any(c in name for c in "/\\") or name.startswith("."):
        raise StoreError(f"store name {name!r} must be a plain name like 'docs' (no slashes)")
    folder = (home or sleuth_home()) / "stores"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}.sqlite"


class SQLiteStore(BaseVectorStore):
    """A store in one SQLite file. `SQLiteStore.named("docs")` opens `$SLEUTH_HOME/stores/docs.sqlite`.

    Several processes may write one file: a writer waits for another's lock (telling `on_wait`
    once) for up to `lock_timeout` seconds, or for as long as it takes when that is None.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        lock_timeout: float | None = None,
        on_wait: Callable[[str], None] | None = None,
    ):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock_timeout = lock_timeout
        self.on_wait = on_wait
        # One connection shared by threads (retrievers run in worker threads), guarded by a lock;
        # transactions are explicit.
        self._db = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=_BUSY_SECONDS
        )
        self._lock = threading.RLock()
        self._generation = 0
        self._vectors: tuple[tuple[int, int], np.ndarray, np.ndarray] | None = None
        with self._lock:
            self._db.execute(f"PRAGMA busy_timeout={int(_BUSY_SECONDS * 1000)}")
            self._when_unlocked(lambda: self._db.execute("PRAGMA journal_mode=WAL"))
            self._when_unlocked(lambda: self._db.executescript(_SCHEMA))

    @classmethod
    def named(cls, name: str, home: Path | None = None, **options: Any) -> SQLiteStore:
        return cls(store_path(name, home), **options)

    def _when_unlocked(self, statement: Callable[[], object]) -> None:
        """Run `statement`, waiting while another connection holds the write lock."""
        waited_since: float | None = None
        while True:
            try:
                statement()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                now = time.monotonic()
                if waited_since is None:
                    waited_since = now
                    if self.on_wait is not None:
                        self.on_wait(f"waiting for {self.path}: another process is writing it")
                elif self.lock_timeout is not None and now - waited_since >= self.lock_timeout:
                    raise StoreError(
                        f"{self.path} stayed locked by another writer for {self.lock_timeout:g} s;"
                        " let that process finish (or stop it) and try again"
                    ) from exc

    # -- writes -----------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._when_unlocked(lambda: self._db.execute("BEGIN IMMEDIATE"))
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            self._generation += 1

    def add(self, documents: Sequence[Document]) -> None:
        with self._transaction() as db:
            self._insert(db, documents)

    def replace_source(self, source: str, documents: Sequence[Document]) -> None:
        """Replace every chunk of `source` in one transaction: readers see old or new, never half."""
        with self._transaction() as db:
            db.execute("DELETE FROM chunks WHERE source = ?", (source,))
            self._insert(db, documents)

    def _insert(self, db: sqlite3.Connection, documents: Sequence[Document]) -> None:
        dimension = self._dimension(db)
        rows = []
        for document in documents:
            blob = None
            if document.embedding is not None:
                if dimension is None:
                    dimension = len(document.embedding)
                    db.execute(
                        "INSERT INTO store_meta(key, value) VALUES ('dimension', ?)",
                        (str(dimension),),
                    )
                elif len(document.embedding) != dimension:
                    raise StoreError(
                        f"document {document.id!r} has a {len(document.embedding)}-dimensional "
                        f"embedding but {self.path} holds {dimension}-dimensional ones; use the "
                        "same embedder for every ingest, or a new store"
                    )
                blob = np.asarray(document.embedding, dtype=np.float32).tobytes()
            rows.append(
                (
                    document.id,
                    document.text,
                    document.source,
                    document.location,
                    json.dumps(document.metadata, ensure_ascii=False),
                    blob,
                )
            )
        # A replaced id must leave the FTS index through the delete trigger, so no REPLACE here.
        db.executemany("DELETE FROM chunks WHERE id = ?", [(row[0],) for row in rows])
        db.executemany(
            "INSERT INTO chunks(id, text, source, location, metadata, embedding)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )

    def delete(self, ids: Sequence[str] | None = None, *, where: Where | None = None) -> int:
        if ids is None and where is None:
            raise StoreError("delete() needs ids or where; to empty the store pass where={}")
        clause, params = _where_sql(where)
        if ids is not None:
            id_list = list(ids)
            if not id_list:
                return 0
            clause += f" AND c.id IN ({','.join('?' * len(id_list))})"
            params += id_list
        with self._transaction() as db:
            cursor = db.execute(
                f"DELETE FROM chunks WHERE rowid IN (SELECT c.rowid FROM chunks c WHERE {clause})",
                params,
            )
            return cursor.rowcount

    # -- reads ------------------------------------------------------------------------------------

    def count(self, where: Where | None = None) -> int:
        clause, params = _where_sql(where)
        with self._lock:
            row = self._db.execute(
                f"SELECT count(*) FROM chunks c WHERE {clause}", params
            ).fetchone()
        return int(row[0])

    def get(self, ids: Sequence[str]) -> list[Document]:
        id_list = list(ids)
        if not id_list:
            return []
        with self._lock:
            rows = self._db.execute(
                "SELECT id, text, source, location, metadata, embedding FROM chunks"
                f" WHERE id IN ({','.join('?' * len(id_list))})",
                id_list,
            ).fetchall()
        by_id = {
            row[0]: Document(
                id=row[0],
                text=row[1],
                source=row[2],
                location=row[3],
                metadata=json.loads(row[4]),
                embedding=np.frombuffer(row[5], dtype=np.float32).tolist() if row[5] else None,
            )
            for row in rows
        }
        return [by_id[i] for i in id_list if i in by_id]

    @property
    def dimension(self) -> int | None:
        """The dimension of the stored vectors, or None while the store holds none."""
        with self._lock:
            return self._dimension(self._db)

    def search(
        self,
        query: str,
        *,
        embedding: Sequence[float] | None = None,
        top_k: int | str = 5,
        where: Where | None = None,
    ) -> list[RetrievedChunk]:
        top_k = as_top_k(top_k)
        if top_k <= 0:
            return []
        use_vectors = embedding is not None and self.dimension is not None
        depth = max(top_k * _CANDIDATES_PER_RANKING, 50) if use_vectors else top_k
        text_hits = self._text_search(query, depth, where)
        if not use_vectors:
            return self._chunks(text_hits)
        assert embedding is not None
        vector_hits = self._vector_search(embedding, depth, where)
        if not text_hits:
            return self._chunks(vector_hits[:top_k])
        fused = fuse_rankings(
            [[str(r) for r, _ in text_hits], [str(r) for r, _ in vector_hits]], top_k
        )
        return self._chunks([(int(rowid), score) for rowid, score in fused])

    def _text_search(self, query: str, limit: int, where: Where | None) -> list[tuple[int, float]]:
        terms = sorted(set(query_words(query)))
        if not terms:
            return []
        # Each pair of adjacent query words is a phrase too: FTS5 weighs a phrase by its own
        # rarity, so a passage holding "from clause" as the query has it outranks one that holds
        # "from" and "clause" apart.
        match = " OR ".join(f'"{term}"' for term in [*terms, *query_phrases(query)])
        clause, params = _where_sql(where)
        with self._lock:
            rows = self._db.execute(
                "SELECT c.rowid, -bm25(chunks_fts) FROM chunks_fts"
                " JOIN chunks c ON c.rowid = chunks_fts.rowid"
                f" WHERE chunks_fts MATCH ? AND {clause}"
                " ORDER BY bm25(chunks_fts) LIMIT ?",
                [match, *params, limit],
            ).fetchall()
        return [(int(rowid), float(score)) for rowid, score in rows]

    def _vector_search(
        self, embedding: Sequence[float], limit: int, where: Where | None
    ) -> list[tuple[int, float]]:
        rowids, matrix = self._vector_matrix()
        if where:
            clause, params = _where_sql(where)
            with self._lock:
                allowed = [
                    r[0]
                    for r in self._db.execute(
                        f"SELECT c.rowid FROM chunks c WHERE {clause} AND c.embedding IS NOT NULL",
                        params,
                    )
                ]
            keep = np.isin(rowids, np.asarray(allowed, dtype=np.int64))
            rowids, matrix = rowids[keep], matrix[keep]
        similarities = unit_rows_cosine(embedding, matrix)
        if limit < len(similarities):
            top = np.argpartition(-similarities, limit)[:limit]
            best = top[np.argsort(-similarities[top])]
        else:
            best = np.argsort(-similarities)
        return [(int(rowids[i]), float(similarities[i])) for i in best]

    def _vector_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """All stored vectors as unit rows, cached until this or another connection writes."""
        with self._lock:
            version = (int(self._db.execute("PRAGMA data_version").fetchone()[0]), self._generation)
            if self._vectors is None or self._vectors[0] != version:
                rows = self._db.execute(
                    "SELECT rowid, embedding FROM chunks WHERE embedding IS NOT NULL"
                ).fetchall()
                rowids = np.asarray([r[0] for r in rows], dtype=np.int64)
                dimension = self._dimension(self._db) or 0
                matrix = (
                    np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(
                        len(rows), dimension
                    )
                    if rows
                    else np.zeros((0, dimension), dtype=np.float32)
                )
                self._vectors = (version, rowids, unit_rows(matrix))
            return self._vectors[1], self._vectors[2]

    def _chunks(self, scored: Sequence[tuple[int, float]]) -> list[RetrievedChunk]:
        """The chunks of these rowids, in the given order, with the given scores."""
        if not scored:
            return []
        rowids = [rowid for rowid, _ in scored]
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid, id, text, source, location, metadata FROM chunks"
                f" WHERE rowid IN ({','.join('?' * len(rowids))})",
                rowids,
            ).fetchall()
        by_rowid = {row[0]: row for row in rows}
        return [
            RetrievedChunk(
                id=row[1],
                text=row[2],
                score=score,
                source=row[3],
                location=row[4],
                metadata=json.loads(row[5]),
            )
            for rowid, score in scored
            if (row := by_rowid.get(rowid)) is not None
        ]

    @staticmethod
    def _dimension(db: sqlite3.Connection) -> int | None:
        row = db.execute("SELECT value FROM store_meta WHERE key = 'dimension'").fetchone()
        return int(row[0]) if row else None

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _where_sql(where: Where | None) -> tuple[str, list[Any]]:
    """A SQL condition over `chunks c` for a metadata filter, and its parameters."""
    clauses, params = ["1=1"], []
    for key, values in check_where(where).items():
        if key in ("source", "location"):
            clauses.append(f"c.{key} IN ({','.join('?' * len(values))})")
            params.extend(values)
            continue
        # JSON true/false read back as 1/0: match booleans by their JSON type, so 1 and True differ.
        path = '$."' + key.replace('"', '""') + '"'
        alternatives = []
        plain = [value for value in values if type(value) is not bool]
        if plain:
            alternatives.append(
                f"(json_extract(c.metadata, ?) IN ({','.join('?' * len(plain))})"
                " AND json_type(c.metadata, ?) NOT IN ('true', 'false'))"
            )
            params.extend([path, *plain, path])
        for flag in sorted({value for value in values if type(value) is bool}):
            alternatives.append("json_type(c.metadata, ?) = ?")
            params.extend([path, "true" if flag else "false"])
        clauses.append(f"({' OR '.join(alternatives)})")
    return " AND ".join(clauses), params
