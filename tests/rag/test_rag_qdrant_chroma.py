"""QdrantVectorStore and ChromaVectorStore beyond the shared contract: persistence, local-mode
sharing inside one process, odd metadata keys, and the errors for what they cannot do."""

from __future__ import annotations

from pathlib import Path

import pytest

from sleuth.rag.stores import ChromaVectorStore, Document, QdrantVectorStore, StoreError
from tests.helpers.rag_corpus import CORPUS, ids, vector_corpus


def test_qdrant_local_folder_persists_and_is_shared_inside_one_process(tmp_path: Path):
    first = QdrantVectorStore("docs", 3, path=tmp_path / "q")
    second = QdrantVectorStore("other", path=tmp_path / "q")  # same folder, same process
    first.add(vector_corpus())
    second.add(CORPUS[:1])
    first.close()
    assert second.count() == 1  # closing one store leaves the shared client open
    second.close()
    reopened = QdrantVectorStore("docs", path=tmp_path / "q")
    assert reopened.count() == 4 and reopened.dimension == 3
    assert ids(reopened.search("", embedding=[0, 0, 1], top_k=1)) == ["bananas"]
    reopened.close()


def test_qdrant_in_memory_mode():
    store = QdrantVectorStore("scratch", 3, location=":memory:")
    store.add(vector_corpus())
    assert ids(store.search("finally", embedding=[0, 1, 0], top_k=1)) == ["try-1"]
    store.close()


def test_qdrant_filters_on_metadata_keys_with_dots_and_refuses_quotes(tmp_path: Path):
    store = QdrantVectorStore("keys", path=tmp_path / "q")
    store.add([Document(id="a", text="dotted key", metadata={"team.name": "docs"})])
    assert store.count(where={"team.name": "docs"}) == 1
    with pytest.raises(StoreError, match="contains a"):
        store.count(where={'say "hi"': "x"})
    store.close()


def test_qdrant_accepts_only_one_place_to_connect(tmp_path: Path):
    with pytest.raises(StoreError, match="one of url=, path=, location= or client="):
        QdrantVectorStore("docs", path=tmp_path, location=":memory:")


def test_chroma_collection_persists_with_its_dimension(tmp_path: Path):
    store = ChromaVectorStore("docs", 3, path=tmp_path / "c")
    store.add(vector_corpus())
    store.close()
    reopened = ChromaVectorStore("docs", path=tmp_path / "c")
    assert reopened.dimension == 3 and reopened.count() == 4
    assert ids(reopened.search("büscheln", embedding=[0, 0, 1], top_k=1)) == ["bananas"]


def test_chroma_names_its_rules_for_collection_names(tmp_path: Path):
    with pytest.raises(StoreError, match="3-512 characters"):
        ChromaVectorStore("x", path=tmp_path / "c")


def test_chroma_text_search_uses_whole_words_not_substrings(tmp_path: Path):
    store = ChromaVectorStore("words", path=tmp_path / "c")
    store.add(
        [
            Document(id="cat", text="The cat sat."),
            Document(id="catalog", text="A catalog of parts."),
        ]
    )
    assert ids(store.search("cat", top_k=5)) == ["cat"]
