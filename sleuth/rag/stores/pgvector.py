"""`PgVectorStore`: chunks in a PostgreSQL table, full-text search plus pgvector's cosine index.

Needs the `pgvector` extra (`pip install 'sleuth[pgvector]'`: psycopg 3) and a PostgreSQL server
with the `vector` extension for vectors (text-only tables need no extension). The connection comes
from `dsn=` (a libpq URI or key=value string) or, without one, from libpq's environment variables
(`PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`, and `PGPASSWORD` for the password).

Text search is PostgreSQL full-text search: a generated `tsvector` column with a GIN index, ranked
by `ts_rank` over the OR of the query's words. Vector search is cosine distance on an HNSW index
(or IVFFlat, `index="ivfflat"`); filtered vector searches use pgvector's iterative index scans so a
narrow filter still finds `top_k` chunks. Hybrid search fuses the two rankings as `SQLiteStore`
does. Every write is one transaction; `replace_source` swaps a source's chunks atomically.

Creating the table, its indexes and the extension is idempotent and safe to run from several
processes at once (an advisory lock serialises it). Opening a text-only table with `dimension=N`
adds the vector column and its index: the one migration a table needs when vectors arrive.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

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
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")
_CONFIG = re.compile(r"^[a-z_][a-z0-9_]*$")
_COLUMNS = "id, text, source, location, metadata"


class PgVectorStore(BaseVectorStore):
    """Chunks in the table `collection_name` (created, with its indexes, on first use).

    `dimension` turns on a `vector(N)` column; an existing table keeps the dimension it has.
    `index` picks the vector index: "hnsw" (default; `m` and `ef_construction` shape it when it is
    built, `ef_search` widens each search) or "ivfflat" (`lists` at build time, `probes` at query
    time; build it after loading data). The HNSW defaults (16, 128, 200) find 99% of the exact
    top 10 in `python -m bench.retrieval`; pgvector's own (16, 64, 40) found 79%.
    `text_search_config` is the PostgreSQL text-search configuration ("simple": no stemming, no
    stop words, any language; "english" stems English words).
    """

    def __init__(
        self,
        collection_name: str = "sleuth_chunks",
        dimension: int | None = None,
        *,
        dsn: str | None = None,
        connection: Any = None,
        index: Literal["hnsw", "ivfflat"] = "hnsw",
        m: int = 16,
        ef_construction: int = 128,
        ef_search: int = 200,
        lists: int = 100,
        probes: int = 10,
        text_search_config: str = "simple",
    ):
        if not _NAME.match(collection_name or ""):
            raise StoreError(
                f"PgVectorStore table name {collection_name!r} must be lower-case letters, digits "
                "and '_' (at most 48), starting with a letter or '_'"
            )
        if not _CONFIG.match(text_search_config):
            raise StoreError(f"text_search_config {text_search_config!r} is not a plain name")
        if index not in ("hnsw", "ivfflat"):
            raise StoreError(f"index must be 'hnsw' or 'ivfflat', not {index!r}")
        try:
            import psycopg
        except ImportError as exc:
            raise MissingExtraError(
                "PgVectorStore needs the pgvector extra: pip install 'sleuth[pgvector]'"
            ) from exc
        self._psycopg = psycopg
        self.collection_name = collection_name
        self.dsn = dsn
        self.index = index
        self.m = m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.lists = lists
        self.probes = probes
        self.text_search_config = text_search_config
        self._lock = threading.RLock()
        self._iterative_scan = False
        self._conn = connection if connection is not None else self._connect()
        self.dimension = self._create_schema(dimension)

    # -- connection and schema --------------------------------------------------------------------

    def _connect(self) -> Any:
        return self._psycopg.connect(self.dsn or "", autocommit=True)

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A cursor inside one transaction, on a live connection (reconnecting after a drop)."""
        with self._lock:
            if self._conn.closed or self._conn.broken:
                self._conn = self._connect()
            with self._conn.transaction(), self._conn.cursor() as cursor:
                yield cursor

    def _create_schema(self, dimension: int | None) -> int | None:
        from psycopg import sql

        table = sql.Identifier(self.collection_name)
        config = sql.Literal(self.text_search_config)
        with self._transaction() as cur:
            # One lock for every table: CREATE EXTENSION races between tables too.
            cur.execute("SELECT pg_advisory_xact_lock(hashtext('sleuth:schema'))")
            cur.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {table} ("
                    " id text PRIMARY KEY,"
                    " text text NOT NULL,"
                    " source text NOT NULL DEFAULT '',"
                    " location text NOT NULL DEFAULT '',"
                    " metadata jsonb NOT NULL DEFAULT '{{}}',"
                    " tsv tsvector GENERATED ALWAYS AS (to_tsvector({config}::regconfig, text))"
                    " STORED)"
                ).format(table=table, config=config)
            )
            for suffix, body in (
                ("source", "(source)"),
                ("tsv", "USING gin (tsv)"),
                ("metadata", "USING gin (metadata jsonb_path_ops)"),
            ):
                cur.execute(
                    sql.SQL("CREATE INDEX IF NOT EXISTS {name} ON {table} " + body).format(
                        name=sql.Identifier(f"{self.collection_name}_{suffix}"), table=table
                    )
                )
            stored = self._stored_dimension(cur)
            if dimension is not None and stored is not None and stored != dimension:
                raise StoreError(
                    f"table {self.collection_name!r} holds {stored}-dimensional vectors, not "
                    f"{dimension}; use the embedder it was filled with, or a new table"
                )
            if dimension is not None and stored is None:
                self._add_vectors(cur, dimension)
                stored = dimension
            if stored is not None:
                cur.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
                )
                row = cur.fetchone()
                self._iterative_scan = row is not None and _version(row[0]) >= (0, 8)
        return stored

    def _stored_dimension(self, cur: Any) -> int | None:
        cur.execute(
            "SELECT atttypmod FROM pg_attribute"
            " WHERE attrelid = to_regclass(%s) AND attname = 'embedding' AND NOT attisdropped",
            (self._qualified(),),
        )
        row = cur.fetchone()
        return int(row[0]) if row else None

    def _qualified(self) -> str:
        return '"' + self.collection_name + '"'

    def _add_vectors(self, cur: Any, dimension: int) -> None:
        from psycopg import errors, sql

        try:
            with cur.connection.transaction():
                cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except (errors.InsufficientPrivilege, errors.FeatureNotSupported) as exc:
            raise StoreError(
                "PostgreSQL has no 'vector' extension for this user: install pgvector on the "
                f"server and have an administrator run CREATE EXTENSION vector ({exc})"
            ) from exc
        except errors.UndefinedFile as exc:
            raise StoreError(
                f"the PostgreSQL server has no pgvector installed ({exc}); install it, or use a "
                "text-only table (no dimension)"
            ) from exc
        table = sql.Identifier(self.collection_name)
        cur.execute(
            sql.SQL("ALTER TABLE {table} ADD COLUMN IF NOT EXISTS embedding vector({n})").format(
                table=table, n=sql.Literal(int(dimension))
            )
        )
        method = (
            sql.SQL(
                "hnsw (embedding vector_cosine_ops) WITH (m = {m}, ef_construction = {ef})"
            ).format(m=sql.Literal(int(self.m)), ef=sql.Literal(int(self.ef_construction)))
            if self.index == "hnsw"
            else sql.SQL("ivfflat (embedding vector_cosine_ops) WITH (lists = {lists})").format(
                lists=sql.Literal(int(self.lists))
            )
        )
        cur.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {name} ON {table} USING {method}").format(
                name=sql.Identifier(f"{self.collection_name}_embedding"),
                table=table,
                method=method,
            )
        )

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- writes -----------------------------------------------------------------------------------

    def add(self, documents: Sequence[Document]) -> None:
        with self._transaction() as cur:
            self._upsert(cur, documents)

    def replace_source(self, source: str, documents: Sequence[Document]) -> None:
        """Replace every chunk of `source` in one transaction: readers see old or new, never half."""
        from psycopg import sql

        with self._transaction() as cur:
            cur.execute(
                sql.SQL("DELETE FROM {table} WHERE source = %s").format(
                    table=sql.Identifier(self.collection_name)
                ),
                (source,),
            )
            self._upsert(cur, documents)

    def _upsert(self, cur: Any, documents: Sequence[Document]) -> None:
        from psycopg import sql
        from psycopg.types.json import Jsonb

        if not documents:
            return
        rows: list[tuple[Any, ...]] = []
        for document in documents:
            vector = None
            if document.embedding is not None:
                if self.dimension is None:
                    raise StoreError(
                        f"document {document.id!r} has an embedding but table "
                        f"{self.collection_name!r} was made without dimension=N, so it has no "
                        "vector column; open the store with the embedder's dimension"
                    )
                if len(document.embedding) != self.dimension:
                    raise StoreError(
                        f"document {document.id!r} has a {len(document.embedding)}-dimensional "
                        f"embedding; table {self.collection_name!r} holds {self.dimension}"
                    )
                vector = _vector_text(document.embedding)
            if "\x00" in document.text:
                raise StoreError(
                    f"document {document.id!r}: PostgreSQL text cannot hold NUL characters; "
                    "remove them before storing"
                )
            row = [
                document.id,
                document.text,
                document.source,
                document.location,
                Jsonb(document.metadata),
            ]
            rows.append((*row, vector) if self.dimension is not None else tuple(row))
        # One order for every writer, so two ingests upserting the same ids cannot deadlock.
        rows.sort(key=lambda row: str(row[0]))
        vector_column = sql.SQL(", embedding") if self.dimension is not None else sql.SQL("")
        vector_value = sql.SQL(", %s::vector") if self.dimension is not None else sql.SQL("")
        vector_update = (
            sql.SQL(", embedding = EXCLUDED.embedding")
            if self.dimension is not None
            else sql.SQL("")
        )
        cur.executemany(
            sql.SQL(
                "INSERT INTO {table} (id, text, source, location, metadata{vc})"
                " VALUES (%s, %s, %s, %s, %s{vv})"
                " ON CONFLICT (id) DO UPDATE SET text = EXCLUDED.text, source = EXCLUDED.source,"
                " location = EXCLUDED.location, metadata = EXCLUDED.metadata{vu}"
            ).format(
                table=sql.Identifier(self.collection_name),
                vc=vector_column,
                vv=vector_value,
                vu=vector_update,
            ),
            rows,
        )

    def delete(self, ids: Sequence[str] | None = None, *, where: Where | None = None) -> int:
        from psycopg import sql

        if ids is None and where is None:
            raise StoreError("delete() needs ids or where; to empty the store pass where={}")
        clause, params = self._where_sql(where)
        if ids is not None:
            if not ids:
                return 0
            clause = sql.SQL("{clause} AND id = ANY(%s)").format(clause=clause)
            params.append(list(ids))
        with self._transaction() as cur:
            cur.execute(
                sql.SQL("DELETE FROM {table} WHERE {clause}").format(
                    table=sql.Identifier(self.collection_name), clause=clause
                ),
                params,
            )
            return int(cur.rowcount)

    # -- reads ------------------------------------------------------------------------------------

    def count(self, where: Where | None = None) -> int:
        from psycopg import sql

        clause, params = self._where_sql(where)
        with self._transaction() as cur:
            cur.execute(
                sql.SQL("SELECT count(*) FROM {table} WHERE {clause}").format(
                    table=sql.Identifier(self.collection_name), clause=clause
                ),
                params,
            )
            return int(cur.fetchone()[0])

    def get(self, ids: Sequence[str]) -> list[Document]:
        from psycopg import sql

        id_list = list(ids)
        if not id_list:
            return []
        vector = sql.SQL(", embedding::text") if self.dimension is not None else sql.SQL("")
        with self._transaction() as cur:
            cur.execute(
                sql.SQL("SELECT " + _COLUMNS + "{vector} FROM {table} WHERE id = ANY(%s)").format(
                    vector=vector, table=sql.Identifier(self.collection_name)
                ),
                (id_list,),
            )
            rows = cur.fetchall()
        by_id = {
            row[0]: Document(
                id=row[0],
                text=row[1],
                source=row[2],
                location=row[3],
                metadata=row[4],
                embedding=_parse_vector(row[5]) if len(row) > 5 and row[5] else None,
            )
            for row in rows
        }
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
        clause, params = self._where_sql(where)
        if top_k <= 0:
            return []
        use_vectors = embedding is not None and self.dimension is not None
        depth = max(top_k * _CANDIDATES_PER_RANKING, 50) if use_vectors else top_k
        text_hits = self._text_hits(query, depth, clause, params)
        if not use_vectors:
            return text_hits
        assert embedding is not None
        if len(embedding) != self.dimension:
            raise StoreError(
                f"query embedding has {len(embedding)} dimensions but the store holds "
                f"{self.dimension}; embed queries with the model the store was filled with"
            )
        vector_hits = self._vector_hits(embedding, depth, clause, params)
        if not text_hits:
            return vector_hits[:top_k]
        by_id = {hit.id: hit for hit in [*vector_hits, *text_hits]}
        fused = fuse_rankings(
            [[hit.id for hit in text_hits], [hit.id for hit in vector_hits]], top_k
        )
        return [by_id[doc_id].model_copy(update={"score": score}) for doc_id, score in fused]

    def _text_hits(
        self, query: str, limit: int, clause: Any, params: list[Any]
    ) -> list[RetrievedChunk]:
        from psycopg import sql

        terms = sorted(set(query_words(query)))
        if not terms:
            return []
        config = sql.Literal(self.text_search_config)
        tsquery = sql.SQL(" || ").join(
            sql.SQL("plainto_tsquery({config}::regconfig, %s)").format(config=config) for _ in terms
        )
        with self._transaction() as cur:
            cur.execute(
                sql.SQL(
                    "SELECT " + _COLUMNS + ", ts_rank(tsv, q) AS score"
                    " FROM {table}, (SELECT {tsquery}) AS query(q)"
                    " WHERE tsv @@ q AND {clause} ORDER BY score DESC, id LIMIT %s"
                ).format(
                    table=sql.Identifier(self.collection_name), tsquery=tsquery, clause=clause
                ),
                [*terms, *params, limit],
            )
            rows = cur.fetchall()
        return [_chunk(row) for row in rows]

    def _vector_hits(
        self, embedding: Sequence[float], limit: int, clause: Any, params: list[Any]
    ) -> list[RetrievedChunk]:
        from psycopg import sql

        vector = _vector_text(embedding)
        with self._transaction() as cur:
            if self.index == "hnsw":
                cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(self.ef_search),))
                if self._iterative_scan:
                    cur.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
            else:
                cur.execute("SELECT set_config('ivfflat.probes', %s, true)", (str(self.probes),))
                if self._iterative_scan:
                    cur.execute(
                        "SELECT set_config('ivfflat.iterative_scan', 'relaxed_order', true)"
                    )
            cur.execute(
                sql.SQL(
                    "SELECT " + _COLUMNS + ", 1 - (embedding <=> %s::vector) AS score"
                    " FROM {table} WHERE embedding IS NOT NULL AND {clause}"
                    " ORDER BY embedding <=> %s::vector LIMIT %s"
                ).format(table=sql.Identifier(self.collection_name), clause=clause),
                [vector, *params, vector, limit],
            )
            rows = cur.fetchall()
        # Relaxed-order scans can return neighbours slightly out of order.
        return sorted((_chunk(row) for row in rows), key=lambda hit: -hit.score)

    def _where_sql(self, where: Where | None) -> tuple[Any, list[Any]]:
        """A condition for a metadata filter and its parameters (jsonb compares 2 and 2.0 equal,
        and keeps true apart from 1)."""
        from psycopg import sql
        from psycopg.types.json import Jsonb

        clauses: list[Any] = [sql.SQL("TRUE")]
        params: list[Any] = []
        for key, values in check_where(where).items():
            if key in ("source", "location"):
                clauses.append(sql.SQL("{column} = ANY(%s)").format(column=sql.Identifier(key)))
                params.append([str(value) for value in values if isinstance(value, str)])
            else:
                clauses.append(sql.SQL("(metadata -> %s) = ANY(%s::jsonb[])"))
                params.extend([key, [Jsonb(value) for value in values]])
        return sql.SQL(" AND ").join(clauses), params


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _vector_text(values: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in values) + "]"


def _parse_vector(text: str) -> list[float]:
    return [float(x) for x in text.strip("[]").split(",") if x]


def _chunk(row: Sequence[Any]) -> RetrievedChunk:
    return RetrievedChunk(
        id=row[0],
        text=row[1],
        score=float(row[5]),
        source=row[2],
        location=row[3],
        metadata=row[4],
    )
