"""OpenSearchVectorStore beyond the shared contract.

Against osmem-server (bulk loads, the index mapping, replace_source's write-then-delete), and, as no
OpenSearch with the k-NN plugin can run here, the knn and hybrid requests checked against recorded
request bodies in OpenSearch's documented k-NN query format: a change of shape fails here.
"""

from __future__ import annotations

from typing import Any

import pytest

from sleuth.rag.stores import Document, OpenSearchVectorStore
from tests.helpers.rag_corpus import CORPUS


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


# -- knn and hybrid: recorded request bodies ------------------------------------------------------


class RecordingClient:
    """Stands in for `opensearchpy.OpenSearch`: records each request body, answers from a script."""

    def __init__(self, answers: list[list[str]]):
        self.bodies: list[dict[str, Any]] = []
        self.created: list[dict[str, Any]] = []
        self._answers = answers
        self.indices = self

    def exists(self, index: str) -> bool:
        return bool(self.created)

    def create(self, index: str, body: dict[str, Any]) -> None:
        self.created.append(body)

    def search(self, index: str, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        ranked = self._answers.pop(0)
        return {
            "hits": {
                "hits": [
                    {
                        "_id": doc_id,
                        "_score": 10.0 - rank,
                        "_source": {"text": doc_id, "source": "with.md", "metadata": {}},
                    }
                    for rank, doc_id in enumerate(ranked)
                ]
            }
        }


KNN_MAPPING = {
    "settings": {"index": {"knn": True}},
    "mappings": {
        "dynamic_templates": [
            {
                "metadata_strings": {
                    "path_match": "metadata.*",
                    "match_mapping_type": "string",
                    "mapping": {"type": "keyword"},
                }
            }
        ],
        "properties": {
            "text": {"type": "text"},
            "source": {"type": "keyword"},
            "location": {"type": "keyword"},
            "metadata": {"type": "object"},
            "embedding": {
                "type": "knn_vector",
                "dimension": 3,
                "method": {"name": "hnsw", "space_type": "cosinesimil", "engine": "lucene"},
            },
        },
    },
}

SOURCE_FILTER = [{"terms": {"source": ["with.md"]}}, {"terms": {"metadata.part": [2, "2"]}}]

HYBRID_TEXT_BODY = {
    "query": {
        "bool": {"must": [{"match": {"text": "finally exception"}}], "filter": SOURCE_FILTER}
    },
    "size": 50,
    "_source": {"excludes": ["embedding"]},
}

HYBRID_KNN_BODY = {
    "query": {
        "knn": {
            "embedding": {
                "vector": [0.2, 1.0, 0.0],
                "k": 50,
                "filter": {"bool": {"filter": SOURCE_FILTER}},
            }
        }
    },
    "size": 50,
    "_source": {"excludes": ["embedding"]},
}


def test_knn_index_mapping_matches_the_recorded_body():
    client = RecordingClient([])
    store = OpenSearchVectorStore("chunks", client=client, dimension=3)
    store.ensure_index()
    assert client.created == [KNN_MAPPING]


def test_hybrid_search_sends_the_recorded_match_and_knn_bodies_and_fuses_them():
    client = RecordingClient([["try-1", "with-1"], ["with-1", "with-2", "try-1"]])
    store = OpenSearchVectorStore("chunks", client=client, dimension=3)
    hits = store.search(
        "finally exception",
        embedding=[0.2, 1.0, 0.0],
        top_k="3",
        where={"source": "with.md", "part": 2},
    )
    assert client.bodies == [HYBRID_TEXT_BODY, HYBRID_KNN_BODY]
    # with-1 is second for text and first for vectors; try-1 first and third.
    assert [h.id for h in hits] == ["with-1", "try-1", "with-2"]
    assert hits[0].score == pytest.approx((1 / 62 + 1 / 61) / (2 / 61))


def test_vector_only_search_sends_only_the_knn_body_and_keeps_its_scores():
    client = RecordingClient([["with-2", "with-1"]])
    store = OpenSearchVectorStore("chunks", client=client, dimension=3)
    hits = store.search(
        "", embedding=[0.2, 1.0, 0.0], top_k=2, where={"source": "with.md", "part": 2}
    )
    assert client.bodies == [HYBRID_KNN_BODY]
    assert [(h.id, h.score) for h in hits] == [("with-2", 10.0), ("with-1", 9.0)]
