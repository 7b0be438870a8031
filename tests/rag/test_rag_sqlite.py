"""SQLiteStore beyond the shared contract: persistence, other connections, dimensions, FTS upkeep,
and waiting for another writer's lock instead of failing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sleuth.rag.stores import Document, SQLiteStore
from tests.helpers.rag_corpus import CORPUS, ids, vector_corpus


def test_sqlite_store_persists_and_sees_other_connections_writes(tmp_path: Path):
    path = tmp_path / "docs.sqlite"
    first = SQLiteStore(path)
    first.add(vector_corpus())
    assert first.search("bananen", embedding=[0, 0, 1], top_k=1)[0].id == "bananas"
    second = SQLiteStore(path)
    assert second.count() == 4 and second.dimension == 3
    second.delete(["bananas"])
    # `first` cached its vectors; another connection's write must invalidate that cache.
    assert "bananas" not in ids(first.search("zzz", embedding=[0, 0, 1], top_k=4))
    first.close()
    second.close()


def test_sqlite_named_store_lives_under_sleuth_home(sleuth_home: Path):
    store = SQLiteStore.named("docs")
    assert store.path == sleuth_home / "stores" / "docs.sqlite"
    with pytest.raises(ValueError, match="plain name"):
        SQLiteStore.named("../escape")


def test_sqlite_rejects_mixed_dimensions_and_keeps_the_batch_out(tmp_path: Path):
    store = SQLiteStore(tmp_path / "s.sqlite")
    store.add([CORPUS[0].model_copy(update={"embedding": [1.0, 0.0]})])
    batch = [
        CORPUS[1].model_copy(update={"embedding": [1.0, 0.0]}),
        CORPUS[2].model_copy(update={"embedding": [1.0, 0.0, 0.0]}),
    ]
    with pytest.raises(ValueError, match="2-dimensional ones"):
        store.add(batch)
    # The failed add was one transaction: nothing of it is stored.
    assert store.count() == 1


def test_sqlite_fts_index_follows_replaced_and_deleted_rows(tmp_path: Path):
    store = SQLiteStore(tmp_path / "s.sqlite")
    store.add(CORPUS)
    store.add([CORPUS[0].model_copy(update={"text": "Completely different words now."})])
    store.delete(["try-1"])
    assert store.search("wraps", top_k=5) == []
    assert store.search("finally", top_k=5) == []
    db = sqlite3.connect(tmp_path / "s.sqlite")
    db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
    db.close()


def test_adjacent_query_words_rank_as_a_phrase(tmp_path: Path):
    """A passage holding "from clause" as the query has it outranks one that holds both words
    apart, and more often."""
    store = SQLiteStore(tmp_path / "p.sqlite")
    store.add(
        [
            Document(
                id="apart",
                text="A clause comes from the grammar: a clause here, one from there.",
                source="a",
            ),
            Document(
                id="together",
                text="In a raise statement the from clause chains the new exception to the one "
                "that caused it, which the traceback then shows first.",
                source="b",
            ),
            Document(id="other", text="A statement without either word.", source="c"),
        ]
    )
    assert [hit.id for hit in store.search("the from clause", top_k=2)] == ["together", "apart"]
