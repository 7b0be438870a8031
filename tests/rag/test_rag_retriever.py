"""RAGRetriever: BM25 without an embedder, hybrid with one, string numbers, and the App wiring."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from sleuth import App
from sleuth.agent import Agent
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.rag import (
    Document,
    InMemoryVectorStore,
    LocalEmbeddings,
    RAGRetriever,
    SQLiteStore,
    create_rag_tool,
)
from sleuth.rag.tools import wire_datastores
from sleuth.tools import Tool

DOCS = [
    Document(id="a", text="The with statement calls __enter__ and __exit__.", source="with.md"),
    Document(id="b", text="A for loop iterates over an iterable object.", source="for.md"),
    Document(id="c", text="Closing files promptly avoids leaking handles.", source="files.md"),
]


@pytest.fixture
def retriever(tmp_path: Path) -> RAGRetriever:
    store = SQLiteStore(tmp_path / "r.sqlite")
    store.add(DOCS)
    return RAGRetriever(store=store)


def test_bm25_only_retrieval_without_an_embedder(retriever: RAGRetriever):
    chunks = retriever.retrieve("what does a with statement call", top_k=2)
    assert chunks[0].id == "a" and chunks[0].source == "with.md"
    assert retriever.embedder is None


def test_string_numbers_are_coerced(retriever: RAGRetriever):
    everything = retriever.retrieve("statement loop files", top_k="3")
    assert len(everything) == 3
    floor = (everything[0].score + everything[-1].score) / 2
    kept = retriever.retrieve("statement loop files", top_k="3", min_score=str(floor))
    assert 0 < len(kept) < 3 and all(c.score >= floor for c in kept)
    with pytest.raises(ValueError, match="min_score must be a number"):
        retriever.retrieve("x", min_score="high")


def test_empty_query_or_zero_k_returns_nothing(retriever: RAGRetriever):
    assert retriever.retrieve("   ") == []
    assert retriever.retrieve("statement", top_k=0) == []


def test_retriever_filters_are_applied(retriever: RAGRetriever):
    assert [c.id for c in retriever.retrieve("statement loop", where={"source": "for.md"})] == ["b"]
    narrowed = RAGRetriever(store=retriever.store, where={"source": "files.md"})
    assert [c.id for c in narrowed.retrieve("statement files loop")] == ["c"]


async def test_aretrieve_runs_off_the_event_loop(retriever: RAGRetriever):
    seen: list[str] = []

    class RecordingStore(InMemoryVectorStore):
        def search(self, *args, **kwargs):
            seen.append(threading.current_thread().name)
            return super().search(*args, **kwargs)

    store = RecordingStore()
    store.add(DOCS)
    chunks = await RAGRetriever(store=store).aretrieve("loop", top_k="1")
    assert [c.id for c in chunks] == ["b"]
    assert seen and seen[0] != threading.main_thread().name


def test_local_embedder_finds_a_paraphrase_bm25_misses(tmp_path: Path):
    embedder = LocalEmbeddings()
    store = SQLiteStore(tmp_path / "v.sqlite")
    store.add(
        [
            d.model_copy(update={"embedding": v})
            for d, v in zip(DOCS, embedder.embed([d.text for d in DOCS]), strict=True)
        ]
    )
    # No word of the question occurs in the corpus: BM25 finds nothing, the vectors still answer.
    question = "shutting resources down promptly"
    assert RAGRetriever(store=store).retrieve("shutting resources down", top_k=1) == []
    semantic = RAGRetriever(store=store, embedder=embedder).retrieve("shutting resources down")
    assert semantic[0].id == "c"
    # With a shared word too, the hybrid ranking still puts the right chunk first.
    hybrid = RAGRetriever(store=store, embedder=embedder).retrieve(question, top_k=1)
    assert hybrid[0].id == "c"


async def test_search_tool_uses_the_retriever_with_string_arguments(retriever: RAGRetriever):
    tool = create_rag_tool("docs", retriever, description="Python notes", top_k=1, max_top_k=2)
    result = await tool.invoke({"query": "for loop", "top_k": "2", "min_score": "0"})
    assert result.ok, result.error
    assert '"source": "for.md"' in result.content


async def test_a_search_returns_no_more_passages_than_the_store_allows(retriever: RAGRetriever):
    """A model asking for ten passages gets the store's cap: each passage is read again on every
    later turn, so the store's owner bounds what a search costs."""

    async def count(tool: Tool, **arguments: object) -> int:
        result = await tool.invoke({"query": "for loop with statement", **arguments})
        assert result.ok, result.error
        return len(json.loads(result.content))

    capped = create_rag_tool("docs", retriever, top_k=1)
    assert await count(capped, top_k=10) == 1
    assert "up to 1 passages" in capped.description
    roomy = create_rag_tool("docs", retriever, top_k=1, max_top_k=2)
    assert await count(roomy) == 1
    assert await count(roomy, top_k="10") == 2
    # The same cap comes through an App's datastore and a research config's map.
    app = App()
    app.datastore("docs", retriever, top_k=1)
    [via_app], _ = wire_datastores(app.datastore_configs(["docs"]))
    assert await count(via_app, top_k=10) == 1
    [via_map], _ = wire_datastores({"docs": {"retriever": retriever, "top_k": 1, "max_top_k": 2}})
    assert await count(via_map, top_k=10) == 2


async def test_app_datastore_gives_agents_a_search_tool(retriever: RAGRetriever):
    app = App()
    app.datastore("docs", retriever, description="Python language notes", top_k=2)

    def respond(call: ModelCall):
        if not any(m.role == "tool" for m in call.messages):
            assert "search_docs: Python language notes" in call.system_text
            return tool_call("search_docs", query="with statement")
        return text("done")

    from sleuth.rag.tools import wire_datastores

    tools, routing = wire_datastores(app.datastore_configs(["docs"]))
    agent = Agent(model=ScriptedModel(responder=respond), tools=tools, system_prompt=routing)
    result = await agent.arun("What does with call?")
    [evidence] = result.state.evidence
    assert evidence.tool == "search_docs" and '"id": "a"' in evidence.output


def test_identical_passages_under_two_sources_are_returned_once() -> None:
    store = InMemoryVectorStore()
    shared = "The with statement calls __exit__ with the exception type, value and traceback."
    store.add(
        [
            Document(id="page-with#1", text=shared, source="with"),
            Document(id="page-compound#7", text=shared, source="compound"),
            Document(
                id="page-try#1",
                text="The try statement: finally clauses run on the way out of the exception.",
                source="try",
            ),
        ]
    )
    chunks = RAGRetriever(store=store).retrieve("exit exception traceback", top_k=2)
    assert len(chunks) == 2
    assert len({chunk.text for chunk in chunks}) == 2
    assert {chunk.source for chunk in chunks} & {"with", "compound"}
    assert "try" in {chunk.source for chunk in chunks}


def test_a_passage_stored_twice_under_other_boundaries_is_returned_once() -> None:
    """A section that is also its own page is chunked at other boundaries in each: the copies
    differ at their ends, and one of them is enough."""
    section = (
        "The with statement calls __exit__ with the exception type, value and traceback. "
        "If __exit__ returns a true value the exception is suppressed, and execution goes on "
        "with the statement after the with statement. Otherwise the exception propagates."
    )
    store = InMemoryVectorStore()
    store.add(
        [
            Document(id="page", text=section, source="with"),
            Document(id="chapter", text="8.5. Compound statements. " + section[:-30], source="c"),
            Document(
                id="try",
                text="The try statement: a finally clause runs on the way out of an exception.",
                source="try",
            ),
        ]
    )
    chunks = RAGRetriever(store=store).retrieve("exception suppressed statement", top_k=2)
    assert len(chunks) == 2
    assert len({chunk.source for chunk in chunks} & {"with", "c"}) == 1
    assert "try" in {chunk.source for chunk in chunks}
