"""PgVectorStore beyond the shared contract, on a real PostgreSQL with pgvector: idempotent schema
creation from many processes at once, the text-only -> vectors migration, HNSW and IVFFlat,
narrow filters on the vector index, and atomic source replacement."""

from __future__ import annotations

import threading
from uuid import uuid4

import psycopg
import pytest

from sleuth.rag.stores import Document, PgVectorStore, StoreError
from tests.helpers.rag_corpus import CORPUS, ids, vector_corpus


def table() -> str:
    return f"t_{uuid4().hex[:12]}"


def test_schema_creation_is_idempotent_even_from_threads_at_once(pg_uri: str):
    name = table()
    errors: list[BaseException] = []
    stores: list[PgVectorStore] = []

    def open_one() -> None:
        try:
            stores.append(PgVectorStore(name, 3, dsn=pg_uri))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(stores) == 6
    stores[0].add(vector_corpus())
    again = PgVectorStore(name, 3, dsn=pg_uri)
    assert again.count() == 4
    with psycopg.connect(pg_uri) as conn:
        indexes = {
            row[0]
            for row in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = %s", (name,)
            )
        }
    assert indexes == {f"{name}_pkey", f"{name}_source", f"{name}_tsv", f"{name}_metadata"} | {
        f"{name}_embedding"
    }
    for store in [*stores, again]:
        store.close()


def test_a_text_only_table_gains_vectors_when_opened_with_a_dimension(pg_uri: str):
    name = table()
    text_only = PgVectorStore(name, dsn=pg_uri)
    text_only.add(CORPUS)
    assert text_only.dimension is None
    text_only.close()
    with_vectors = PgVectorStore(name, 3, dsn=pg_uri)
    assert with_vectors.count() == 4  # the data stayed
    with_vectors.add([vector_corpus()[3]])
    assert ids(with_vectors.search("", embedding=[0, 0, 1], top_k=1)) == ["bananas"]
    with_vectors.close()


def test_ivfflat_index_searches_too(pg_uri: str):
    store = PgVectorStore(table(), 3, dsn=pg_uri, index="ivfflat", lists=1, probes=1)
    store.add(vector_corpus())
    assert ids(store.search("", embedding=[0, 1, 0], top_k=1)) == ["try-1"]
    store.close()


def test_a_narrow_filter_still_fills_top_k_from_the_vector_index(pg_uri: str):
    """HNSW returns ef_search neighbours before filtering; iterative scans keep going until the
    filter has enough, so a filter matching few chunks far from the query still finds them."""
    store = PgVectorStore(table(), 2, dsn=pg_uri, ef_search=10)
    near = [
        Document(id=f"near-{i}", text="near", source="common", embedding=[1.0, i / 1000])
        for i in range(300)
    ]
    far = [
        Document(id=f"far-{i}", text="far", source="rare", embedding=[-1.0, i / 1000])
        for i in range(3)
    ]
    store.add(near + far)
    hits = store.search("", embedding=[1.0, 0.0], top_k=3, where={"source": "rare"})
    assert sorted(ids(hits)) == ["far-0", "far-1", "far-2"]
    store.close()


def test_a_failed_replacement_leaves_the_old_chunks(pg_uri: str):
    store = PgVectorStore(table(), 3, dsn=pg_uri)
    store.add(vector_corpus())
    with pytest.raises(StoreError, match="2-dimensional"):
        store.replace_source(
            "with.md",
            [
                Document(id="new-1", text="new", source="with.md", embedding=[1, 0, 0]),
                Document(id="new-2", text="bad", source="with.md", embedding=[1, 0]),
            ],
        )
    assert sorted(ids(store.get(["with-1", "with-2", "new-1"]))) == ["with-1", "with-2"]
    store.close()


def test_text_with_nul_characters_is_refused_not_altered(pg_uri: str):
    store = PgVectorStore(table(), dsn=pg_uri)
    with pytest.raises(StoreError, match="NUL"):
        store.add([Document(id="nul", text="a\x00b")])
    assert store.count() == 0
    store.close()


def test_a_dropped_connection_is_reopened(pg_uri: str):
    store = PgVectorStore(table(), dsn=pg_uri)
    store.add(CORPUS)
    with psycopg.connect(pg_uri, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid() AND datname = current_database()"
            " AND application_name = '' AND backend_type = 'client backend'"
        )
    with pytest.raises(psycopg.OperationalError):
        store.count()  # the call that meets the dropped connection fails
    assert store.count() == 4  # the next one reconnects
    store.close()
