"""One contract, six stores: every test here runs unchanged against each of them.

- `InMemoryVectorStore` and `SQLiteStore`;
- `OpenSearchVectorStore` on osmem-server (an in-memory OpenSearch-compatible server from PyPI,
  started by its pytest plugin on a free port). osmem has no k-NN plugin and no OpenSearch with
  one can run here, so the vector tests skip OpenSearch; tests/rag/test_rag_opensearch.py checks the
  knn and hybrid request bodies instead;
- `QdrantVectorStore` in Qdrant's local mode on disk;
- `ChromaVectorStore` on Chroma's embedded persistent client, and through its HTTP client on a
  Chroma server (`chroma run`, from the chromadb package) started for the session;
- `PgVectorStore` on a real PostgreSQL with pgvector, started for the session on a free loopback
  port (tests/helpers/pg_server.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import uuid4

import numpy as np
import pytest

from sleuth.rag.stores import (
    BaseVectorStore,
    ChromaVectorStore,
    Document,
    InMemoryVectorStore,
    OpenSearchVectorStore,
    PgVectorStore,
    QdrantVectorStore,
    SQLiteStore,
)
from sleuth.rag.stores.base import StoreError, fuse_rankings
from sleuth.rag.text import cosine_scores
from tests.helpers.rag_corpus import CORPUS, ids, vector_corpus

STORES = ["memory", "sqlite", "opensearch", "qdrant", "chroma", "chroma-server", "pgvector"]

MakeStore = Callable[..., BaseVectorStore]


@pytest.fixture(params=STORES)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """Builds empty stores of one kind; `make_store(dimension=3)` for one that holds vectors."""
    kind = request.param
    made: list[BaseVectorStore] = []

    def make(dimension: int | None = None) -> BaseVectorStore:
        name = f"c{uuid4().hex[:12]}"
        store: BaseVectorStore
        if kind == "memory":
            store = InMemoryVectorStore()
        elif kind == "sqlite":
            store = SQLiteStore(tmp_path / f"{name}.sqlite")
        elif kind == "opensearch":
            url = request.getfixturevalue("osmem_clone").url
            store = OpenSearchVectorStore(name, hosts=[url], dimension=dimension)
        elif kind == "qdrant":
            store = QdrantVectorStore(name, dimension, path=tmp_path / "qdrant")
        elif kind == "chroma":
            store = ChromaVectorStore(name, dimension, path=tmp_path / "chroma")
        elif kind == "chroma-server":
            store = ChromaVectorStore(name, dimension, url=request.getfixturevalue("chroma_url"))
        else:
            store = PgVectorStore(name, dimension, dsn=request.getfixturevalue("pg_uri"))
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture
def store(make_store: MakeStore) -> BaseVectorStore:
    return make_store()


@pytest.fixture
def vector_store(make_store: MakeStore, request: pytest.FixtureRequest) -> BaseVectorStore:
    if request.node.callspec.params["make_store"] == "opensearch":
        pytest.skip("osmem-server has no k-NN; test_rag_opensearch.py checks the knn requests")
    return make_store(dimension=3)


# -- text search, filters, writes -------------------------------------------------------------------


def test_text_search_ranks_matching_chunks_with_source_and_location(store: BaseVectorStore):
    store.add(CORPUS)
    hits = store.search("exception suppressed by __exit__", top_k=3)
    assert hits[0].id == "with-2"
    assert hits[0].source == "with.md" and hits[0].location == "chars 60-140"
    assert hits[0].metadata == {"lang": "en", "part": 2}
    assert all(h.score > 0 for h in hits)
    assert "bananas" not in ids(hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_filters_on_source_and_metadata_with_lists(store: BaseVectorStore):
    store.add(CORPUS)
    assert set(ids(store.search("exception", top_k=10, where={"source": "try.md"}))) == {"try-1"}
    assert set(ids(store.search("exception", top_k=10, where={"part": 2}))) == {"with-2"}
    assert store.search("exception", top_k=10, where={"lang": "de"}) == []
    either = store.search("statement", top_k=10, where={"source": ["with.md", "try.md"]})
    assert set(ids(either)) == {"with-1", "try-1"}
    assert store.count(where={"lang": "en"}) == 3
    assert store.count(where={"lang": ["en", "de"]}) == 4
    assert store.count(where={"lang": "en", "part": [2, 3]}) == 1
    assert store.count(where={"nothing-here": "x"}) == 0


def test_string_numbers_match_numbers_and_top_k_may_be_a_string(store: BaseVectorStore):
    store.add(
        [
            *CORPUS,
            Document(id="y1", text="Annual report", metadata={"year": "2024", "final": True}),
            Document(id="y2", text="Annual report", metadata={"year": 2023, "ratio": 0.5}),
        ]
    )
    assert len(store.search("statement exception", top_k="2")) == 2
    assert set(ids(store.search("exception", top_k=10, where={"part": "2"}))) == {"with-2"}
    assert store.count(where={"year": 2024}) == 1
    assert store.count(where={"year": ["2023", 2024]}) == 2
    assert store.count(where={"ratio": "0.5"}) == 1
    assert store.count(where={"final": True}) == 1
    assert store.count(where={"final": False}) == 0


def test_adding_an_existing_id_replaces_it(store: BaseVectorStore):
    store.add(CORPUS)
    store.add([CORPUS[0].model_copy(update={"text": "Context managers pair setup and teardown."})])
    assert store.count() == 4
    assert ids(store.search("teardown", top_k=5)) == ["with-1"]
    assert "with-1" not in ids(store.search("wraps", top_k=5))
    assert store.get(["with-1"])[0].text == "Context managers pair setup and teardown."


def test_an_id_is_one_chunk_even_across_sources(store: BaseVectorStore):
    store.add([Document(id="shared", text="Old walrus text.", source="a.md")])
    store.add([Document(id="shared", text="New pelican text.", source="b.md")])
    assert store.count() == 1
    assert store.count(where={"source": "a.md"}) == 0
    assert [d.source for d in store.get(["shared"])] == ["b.md"]
    assert store.search("walrus", top_k=5) == []
    # Replacing source a.md must not take b.md's chunk with it.
    store.replace_source("a.md", [Document(id="a-1", text="Another walrus.", source="a.md")])
    assert {d.id for d in store.get(["shared", "a-1"])} == {"shared", "a-1"}
    assert ids(store.search("pelican", top_k=5, where={"source": "b.md"})) == ["shared"]


def test_delete_by_ids_by_filter_and_both(store: BaseVectorStore):
    store.add(CORPUS)
    assert store.delete(["bananas"]) == 1
    assert store.count() == 3
    assert store.delete(["with-1", "try-1"], where={"source": "with.md"}) == 1
    assert {d.id for d in store.get(["with-1", "with-2", "try-1"])} == {"with-2", "try-1"}
    assert store.delete(where={"source": "with.md"}) == 1
    assert store.count() == 1
    assert store.delete(["missing"]) == 0
    with pytest.raises(ValueError, match="needs ids or where"):
        store.delete()
    assert store.delete(where={}) == 1
    assert store.count() == 0


def test_replace_source_swaps_every_chunk_of_a_source(store: BaseVectorStore):
    store.add(CORPUS)
    store.replace_source(
        "with.md", [Document(id="with-new", text="Async with uses __aenter__.", source="with.md")]
    )
    assert store.count(where={"source": "with.md"}) == 1
    assert ids(store.search("__aenter__", top_k=5)) == ["with-new"]
    assert store.count() == 3
    store.replace_source("with.md", [])
    assert store.count(where={"source": "with.md"}) == 0 and store.count() == 2


def test_get_keeps_the_order_asked_skips_missing_ids_and_returns_metadata_exactly(
    store: BaseVectorStore,
):
    nested = {"tags": ["a", "b"], "owner": {"team": "docs"}, "score": 0.25, "draft": False}
    store.add([*CORPUS, Document(id="nested", text="Nested metadata.", metadata=nested)])
    assert ids(store.get(["try-1", "missing", "with-1"])) == ["try-1", "with-1"]
    assert store.get(["nested"])[0].metadata == nested
    assert store.get([]) == []


def test_an_empty_store_answers_with_nothing(store: BaseVectorStore):
    assert store.count() == 0
    assert store.count(where={"source": "a.md"}) == 0
    assert store.search("anything at all", top_k=5) == []
    assert store.get(["x"]) == []
    assert store.delete(["x"]) == 0
    assert store.delete(where={"source": "a.md"}) == 0
    store.replace_source("a.md", [])
    assert store.count() == 0


def test_unicode_text_ids_and_metadata(store: BaseVectorStore):
    documents = [
        Document(
            id="dokument-ü-1",
            text="Bananen wachsen in Büscheln am Zürichsee. 🍌",
            source="früchte/obst.md",
            metadata={"stadt": "Zürich"},
        ),
        Document(id="ελ-1", text="Η σύνοψη του εγγράφου αναφέρει ωκεανούς.", source="ελ.md"),
    ]
    store.add([*CORPUS, *documents])
    assert ids(store.search("ZÜRICHSEE", top_k=3)) == ["dokument-ü-1"]
    assert ids(store.search("σύνοψη", top_k=3)) == ["ελ-1"]
    assert store.count(where={"stadt": "Zürich"}) == 1
    assert store.count(where={"source": "früchte/obst.md"}) == 1
    [got] = store.get(["dokument-ü-1"])
    assert got.text == documents[0].text and got.metadata == {"stadt": "Zürich"}


def test_bad_filters_are_rejected_with_a_reason(store: BaseVectorStore):
    with pytest.raises(ValueError, match="filter 'lang'"):
        store.search("x", where={"lang": {"nested": 1}})


def test_query_without_words_finds_nothing(store: BaseVectorStore):
    store.add(CORPUS)
    assert store.search("?!", top_k=5) == []
    assert store.search("statement", top_k=0) == []


def test_question_words_do_not_outrank_what_the_question_is_about(store: BaseVectorStore):
    """Reference text seldom asks questions, so "what" and "purpose" are rare in it; ranked like
    any rare word, they put a passage that merely holds them first."""
    store.add(
        [
            Document(id="naming", text="What a name is for: the purpose of binding.", source="n"),
            Document(
                id="chaining",
                text="The from clause of a raise statement chains the new exception to the cause.",
                source="r",
            ),
            Document(id="raise", text="A raise statement raises an exception.", source="r"),
            Document(id="try", text="The except clause of a try statement matches.", source="t"),
            Document(id="import", text="Names are imported from a module.", source="i"),
            Document(id="else", text="The else clause of a loop statement runs last.", source="e"),
        ]
    )
    hits = store.search("What is the purpose of the from clause in a raise statement?", top_k=2)
    assert hits[0].id == "chaining"
    # A query of question words alone still finds what holds them.
    assert store.search("what for", top_k=1)[0].id == "naming"


# -- vectors (OpenSearch's knn is checked by its request bodies) -----------------------------------


def test_vector_only_query_ranks_by_cosine(vector_store: BaseVectorStore):
    vector_store.add(vector_corpus())
    # No query word occurs in the corpus, so only the vectors can rank.
    hits = vector_store.search("zzz", embedding=[0, 0, 1], top_k=2)
    assert hits[0].id == "bananas"
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    near = vector_store.search("", embedding=[1, 0.05, 0], top_k=2)
    assert ids(near) == ["with-1", "with-2"]
    assert near[0].score > near[1].score


def test_hybrid_fuses_text_and_cosine(vector_store: BaseVectorStore):
    vector_store.add(vector_corpus())
    # Text alone puts try-1 first ("finally"); the vector points at with-1. Fusion ranks a chunk
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
    assert set(ids(filtered)) <= {"with-1", "with-2"} and filtered


def test_vector_search_honours_filters(vector_store: BaseVectorStore):
    vector_store.add(vector_corpus())
    hits = vector_store.search("", embedding=[0, 0, 1], top_k=3, where={"lang": "en"})
    assert "bananas" not in ids(hits) and len(hits) == 3
    assert ids(vector_store.search("", embedding=[0, 0, 1], top_k=3, where={"part": "2"})) == [
        "with-2"
    ]


def test_embeddings_round_trip_and_chunks_without_one_are_found_by_text_only(
    vector_store: BaseVectorStore,
):
    vector_store.add(
        [*vector_corpus(), Document(id="plain", text="A chunk with no vector about walruses.")]
    )
    [with_vector, plain] = vector_store.get(["with-2", "plain"])
    # Same direction; Qdrant keeps cosine vectors scaled to length 1.
    assert with_vector.embedding is not None
    assert cosine_scores([0.9, 0.1, 0], np.asarray([with_vector.embedding]))[0] == pytest.approx(1)
    assert plain.embedding is None
    assert "plain" not in ids(vector_store.search("zzz", embedding=[1, 1, 1], top_k=10))
    assert ids(vector_store.search("walruses", embedding=[0, 0, 1], top_k=1)) == ["plain"]


def test_an_empty_vector_store_answers_with_nothing(vector_store: BaseVectorStore):
    assert vector_store.search("x", embedding=[1, 0, 0], top_k=3) == []
    assert vector_store.search("", embedding=[1, 0, 0], top_k=3) == []


def test_fuse_rankings_scales_first_everywhere_to_one():
    fused = fuse_rankings([["a", "b", "c"], ["a", "c"]], top_k=3)
    assert fused[0] == ("a", pytest.approx(1.0))
    assert [doc_id for doc_id, _ in fused] == ["a", "c", "b"]


# -- what a store cannot do, it says ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["opensearch", "qdrant", "chroma", "pgvector"])
def test_vectors_in_a_store_made_without_a_dimension_are_refused(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
):
    name = f"c{uuid4().hex[:12]}"
    store: BaseVectorStore
    if kind == "opensearch":
        store = OpenSearchVectorStore(name, hosts=[request.getfixturevalue("osmem_clone").url])
    elif kind == "qdrant":
        store = QdrantVectorStore(name, path=tmp_path / "q")
    elif kind == "chroma":
        store = ChromaVectorStore(name, path=tmp_path / "c")
    else:
        store = PgVectorStore(name, dsn=request.getfixturevalue("pg_uri"))
    with pytest.raises(ValueError, match="without dimension"):
        store.add([CORPUS[0].model_copy(update={"embedding": [1.0, 0.0, 0.0]})])
    assert store.count() == 0
    store.close()


@pytest.mark.parametrize("kind", ["qdrant", "chroma", "pgvector"])
def test_a_wrong_dimension_is_refused_for_chunks_queries_and_reopening(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
):
    name = f"c{uuid4().hex[:12]}"

    def open_store(dimension: int | None) -> BaseVectorStore:
        if kind == "qdrant":
            return QdrantVectorStore(name, dimension, path=tmp_path / "q")
        if kind == "chroma":
            return ChromaVectorStore(name, dimension, path=tmp_path / "c")
        return PgVectorStore(name, dimension, dsn=request.getfixturevalue("pg_uri"))

    store = open_store(3)
    store.add(vector_corpus())
    with pytest.raises(StoreError, match="2-dimensional embedding"):
        store.add([CORPUS[0].model_copy(update={"id": "x", "embedding": [1.0, 0.0]})])
    with pytest.raises(StoreError, match="query embedding has 2 dimensions"):
        store.search("", embedding=[1.0, 0.0])
    store.close()
    with pytest.raises(StoreError, match="3-dimensional vectors, not 5"):
        open_store(5)
    reopened = open_store(None)  # an existing store keeps its dimension
    assert getattr(reopened, "dimension", None) == 3
    assert ids(reopened.search("", embedding=[0, 0, 1], top_k=1)) == ["bananas"]
    reopened.close()
