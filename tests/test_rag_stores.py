"""Every store honours one contract: add, replace, delete, count, get, BM25 search with filters.

The OpenSearch store runs against osmem-server (an in-memory OpenSearch-compatible server from
PyPI, started by its pytest plugin on a free port). osmem has no k-NN plugin, so the knn and hybrid
query paths of `OpenSearchVectorStore` are exercised on SQLite and in memory only.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sleuth.rag.stores import (
    BaseVectorStore,
    Document,
    InMemoryVectorStore,
    OpenSearchVectorStore,
    SQLiteStore,
)
from sleuth.rag.stores.base import fuse_rankings

CORPUS = [
    Document(
        id="with-1",
        text="The with statement wraps a block with methods of a context manager.",
        source="with.md",
        location="chars 0-70",
        metadata={"lang": "en", "part": 1},
    ),
    Document(
        id="with-2",
        text="If __exit__ returns true, the exception raised in the block is suppressed.",
        source="with.md",
        location="chars 60-140",
        metadata={"lang": "en", "part": 2},
    ),
    Document(
        id="try-1",
        text="The finally clause of a try statement always runs, even when an exception escapes.",
        source="try.md",
        location="chars 0-80",
        metadata={"lang": "en", "part": 1},
    ),
    Document(
        id="bananas",
        text="Bananen sind gelb und wachsen in Büscheln.",
        source="fruit.md",
        location="chars 0-40",
        metadata={"lang": "de", "part": 1},
    ),
]


@pytest.fixture(params=["memory", "sqlite", "opensearch"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BaseVectorStore:
    if request.param == "memory":
        return InMemoryVectorStore()
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "store.sqlite")
    clone = request.getfixturevalue("osmem_clone")
    return OpenSearchVectorStore("chunks", hosts=[clone.url])


def ids(chunks: list) -> list[str]:
    return [c.id for c in chunks]


def test_bm25_search_ranks_matching_chunks_with_source_and_location(store: BaseVectorStore):
    store.add(CORPUS)
    hits = store.search("exception suppressed by __exit__", top_k=3)
    assert hits[0].id == "with-2"
    assert hits[0].source == "with.md" and hits[0].location == "chars 60-140"
    assert hits[0].metadata["part"] == 2
    assert all(h.score > 0 for h in hits)
    assert "bananas" not in ids(hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_filters_on_source_and_metadata(store: BaseVectorStore):
    store.add(CORPUS)
    assert set(ids(store.search("exception", top_k=10, where={"source": "try.md"}))) == {"try-1"}
    assert set(ids(store.search("exception", top_k=10, where={"part": 2}))) == {"with-2"}
    assert store.search("exception", top_k=10, where={"lang": "de"}) == []
    either = store.search("statement", top_k=10, where={"source": ["with.md", "try.md"]})
    assert set(ids(either)) == {"with-1", "try-1"}
    assert store.count(where={"lang": "en"}) == 3
    assert store.count(where={"lang": ["en", "de"]}) == 4


def test_adding_an_existing_id_replaces_it(store: BaseVectorStore):
    store.add(CORPUS)
    store.add([CORPUS[0].model_copy(update={"text": "Context managers pair setup and teardown."})])
    assert store.count() == 4
    assert ids(store.search("teardown", top_k=5)) == ["with-1"]
    assert "with-1" not in ids(store.search("wraps", top_k=5))
    assert store.get(["with-1"])[0].text == "Context managers pair setup and teardown."


def test_delete_by_ids_by_filter_and_both(store: BaseVectorStore):
    store.add(CORPUS)
    assert store.delete(["bananas"]) == 1
    assert store.count() == 3
    assert store.delete(["with-1", "try-1"], where={"source": "with.md"}) == 1
    assert {d.id for d in store.get(["with-1", "with-2", "try-1"])} == {"with-2", "try-1"}
    assert store.delete(where={"source": "with.md"}) == 1
    assert store.count() == 1
    with pytest.raises(ValueError, match="needs ids or where"):
        store.delete()


def test_replace_source_swaps_every_chunk_of_a_source(store: BaseVectorStore):
    store.add(CORPUS)
    store.replace_source(
        "with.md", [Document(id="with-new", text="Async with uses __aenter__.", source="with.md")]
    )
    assert store.count(where={"source": "with.md"}) == 1
    assert ids(store.search("__aenter__", top_k=5)) == ["with-new"]
    assert store.count() == 3


def test_bad_filters_are_rejected_with_a_reason(store: BaseVectorStore):
    with pytest.raises(ValueError, match="filter 'lang'"):
        store.search("x", where={"lang": {"nested": 1}})


def test_query_without_words_finds_nothing(store: BaseVectorStore):
    store.add(CORPUS)
    assert store.search("?!", top_k=5) == []


# -- vectors (memory and SQLite; osmem has no knn) ----------------------------------------------


def vector_corpus() -> list[Document]:
    axes = {"with-1": [1, 0, 0], "with-2": [0.9, 0.1, 0], "try-1": [0, 1, 0], "bananas": [0, 0, 1]}
    return [d.model_copy(update={"embedding": axes[d.id]}) for d in CORPUS]


@pytest.fixture(params=["memory", "sqlite"])
def vector_store(request: pytest.FixtureRequest, tmp_path: Path) -> BaseVectorStore:
    if request.param == "memory":
        return InMemoryVectorStore()
    return SQLiteStore(tmp_path / "vectors.sqlite")


def test_vector_only_query_ranks_by_cosine(vector_store: BaseVectorStore):
    vector_store.add(vector_corpus())
    # No query word occurs in the corpus, so only the vectors can rank.
    hits = vector_store.search("zzz", embedding=[0, 0, 1], top_k=2)
    assert hits[0].id == "bananas"
    assert hits[0].score == pytest.approx(1.0)


def test_hybrid_fuses_bm25_and_cosine(vector_store: BaseVectorStore):
    vector_store.add(vector_corpus())
    # BM25 alone puts try-1 first ("finally"); the vector points at with-1. Fusion ranks a chunk
    # that both rankings place high above one only a single ranking likes.
    text_only = vector_store.search("finally exception", top_k=4)
    assert text_only[0].id == "try-1"
    hybrid = vector_store.search("finally exception", embedding=[0.2, 1, 0], top_k=4)
    assert hybrid[0].id == "try-1"
    assert hybrid[0].score == pytest.approx(1.0)  # first in both rankings
    assert all(0 < h.score <= 1.0 for h in hybrid)
    filtered = vector_store.search(
        "finally exception", embedding=[0.2, 1, 0], top_k=4, where={"source": "with.md"}
    )
    assert set(ids(filtered)) <= {"with-1", "with-2"}


def test_fuse_rankings_scales_first_everywhere_to_one():
    fused = fuse_rankings([["a", "b", "c"], ["a", "c"]], top_k=3)
    assert fused[0] == ("a", pytest.approx(1.0))
    assert [doc_id for doc_id, _ in fused] == ["a", "c", "b"]


# -- SQLite specifics -----------------------------------------------------------------------------


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


# -- OpenSearch specifics -------------------------------------------------------------------------


def test_opensearch_index_mapping_is_created(osmem_clone):
    store = OpenSearchVectorStore("mapped", hosts=[osmem_clone.url], dimension=4)
    store.add([CORPUS[0].model_copy(update={"embedding": [0.1, 0.2, 0.3, 0.4]})])
    mapping = store.client.indices.get_mapping(index="mapped")["mapped"]["mappings"]
    assert mapping["properties"]["embedding"]["type"] == "knn_vector"
    assert mapping["properties"]["embedding"]["dimension"] == 4
    assert mapping["properties"]["source"]["type"] == "keyword"
    # Vectors are stored with the chunk even where the server cannot search them.
    assert store.get(["with-1"])[0].embedding == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_opensearch_bulk_ingest_of_many_chunks(osmem_clone):
    store = OpenSearchVectorStore("bulk", hosts=[osmem_clone.url], refresh=False)
    store.add(
        [
            Document(id=f"d{i}", text=f"chunk number {i} about topic{i % 7}", source=f"s{i % 3}")
            for i in range(1200)
        ]
    )
    store.refresh()
    assert store.count() == 1200
    assert store.count(where={"source": "s1"}) == 400
    hits = store.search("topic3", top_k=5)
    assert len(hits) == 5 and all("topic3" in h.text for h in hits)


def test_opensearch_rejects_vectors_without_a_dimension(osmem_clone):
    store = OpenSearchVectorStore("novec", hosts=[osmem_clone.url])
    with pytest.raises(ValueError, match="without dimension"):
        store.add([CORPUS[0].model_copy(update={"embedding": [1.0]})])


def test_opensearch_replace_source_that_fails_keeps_the_old_chunks(osmem_clone):
    """A replacement the index cannot take (here: vectors without a vector field) must not leave
    the source without chunks, nor with half of the new ones."""
    store = OpenSearchVectorStore("keep", hosts=[osmem_clone.url])
    store.add(CORPUS[:2])
    replacement = [
        Document(id="with-new-1", text="New text one.", source="with.md"),
        Document(id="with-new-2", text="New text two.", source="with.md", embedding=[1.0]),
    ]
    with pytest.raises(ValueError, match="without dimension"):
        store.replace_source("with.md", replacement)
    assert sorted(d.id for d in store.get(["with-1", "with-2", "with-new-1", "with-new-2"])) == [
        "with-1",
        "with-2",
    ]
    assert store.count(where={"source": "with.md"}) == 2


def test_opensearch_replace_source_swaps_and_removes_only_old_chunks(osmem_clone):
    store = OpenSearchVectorStore("swap", hosts=[osmem_clone.url])
    store.add(CORPUS)
    store.replace_source(
        "with.md",
        [
            Document(id="with-1", text="Kept id, new text.", source="with.md"),
            Document(id="with-3", text="A new chunk.", source="with.md"),
        ],
    )
    assert store.count(where={"source": "with.md"}) == 2
    assert store.get(["with-1"])[0].text == "Kept id, new text."
    assert store.get(["with-2"]) == []
    assert store.count() == 4
