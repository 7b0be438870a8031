"""The demo corpus (CPython's language reference topics) and a research run over it.

The scripted model writes its report only from the numbered passages it is shown, quoting a
sentence of each and citing the passage's number; the test then checks every quote, and every
citation the judge made, against the store itself.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from sleuth import App, create_research_workflow
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.rag.demo import (
    DEMO_DESCRIPTION,
    DEMO_QUESTION,
    DEMO_STORE,
    SOURCE_PREFIX,
    demo_topics,
    ensure_demo_store,
)
from sleuth.rag.stores import SQLiteStore
from sleuth.research import node_of_request

SEARCHES = [
    "with statement __exit__ exception suppress",
    "try finally clause exception",
]
KEYWORDS = ("__exit__", "finally", "suppress", "exception")
_TEXT_FIELD = re.compile(r'"text": "((?:[^"\\]|\\.)*)')
_CITED = re.compile(r"(?m)^(.+?) \[(\d+)\]\.$")


def test_demo_store_is_built_once_from_the_python_reference(sleuth_home: Path):
    retriever = ensure_demo_store()
    store = retriever.store
    assert isinstance(store, SQLiteStore)
    assert store.path == sleuth_home / "stores" / f"{DEMO_STORE}.sqlite"
    topics = demo_topics()
    assert {"with", "try", "context-managers"} <= set(topics)
    assert store.count() > len(topics)
    before = store.count()
    again = ensure_demo_store()
    assert again.store.count() == before
    hits = retriever.retrieve(DEMO_QUESTION, top_k=8)
    assert len({h.source for h in hits}) >= 2  # the answer spans several topics
    assert all(h.source.startswith(SOURCE_PREFIX) for h in hits)


def quoted_lines(prompt: str) -> list[str]:
    """One report line per passage that speaks to the question: a sentence of it, cited `[n]`."""
    lines = []
    for number, passage in re.findall(r"(?m)^\[(\d+)\] (.*)$", prompt.split("Passages:")[1]):
        candidates = [
            sentence.strip()
            for sentence in re.split(r"(?<=[.!?])\s+", passage)
            if len(sentence.strip()) > 30
            and any(k in sentence for k in KEYWORDS)
            and not re.search(r'[!?"\[\]]', sentence)
        ]
        if candidates:
            lines.append(f"{candidates[0].rstrip('.')} [{number}].")
    return lines


def respond(call: ModelCall) -> ModelResponse:
    node = node_of_request(call.messages)
    if node == "execute":
        done = sum(1 for m in call.messages if m.role == "tool")
        if done < len(SEARCHES):
            return tool_call("search_python-docs", query=SEARCHES[done], top_k="3")
        return text("Findings: see the retrieved reference passages.")
    if node in ("summarize", "regenerate"):
        return text("\n".join(quoted_lines(call.last_user_text)))
    if node == "replan":
        return text("Look up the with statement and try statement topics.")
    if node == "plan":
        return text(json.dumps([DEMO_QUESTION]))  # one part: the searches above cover it all
    raise AssertionError(f"unexpected node {node}")


async def test_research_over_the_demo_corpus_cites_real_chunks(sleuth_home: Path):
    retriever = ensure_demo_store()
    app = App()
    app.datastore(DEMO_STORE, retriever, description=DEMO_DESCRIPTION, top_k=3)
    spec = create_research_workflow(
        model=ScriptedModel(responder=respond),
        datastores=[DEMO_STORE],
        judge_model=False,
        causal_inference=False,
    )
    result = await spec.execute({"prompt": DEMO_QUESTION}, app=app)
    final = result.final_state

    cited = _CITED.findall(final["summary"])
    assert len(cited) >= 2, final["summary"]
    store = retriever.store

    def stored_text(reference: str, evidence: int | None = None) -> tuple[str, int, int]:
        """The stored chunk text a `source#chars a-b` reference points into, and a, b as offsets
        in that text (the chunk's row is found in the evidence the run gathered)."""
        source, _, location = reference.partition("#")
        start, end = map(int, location.removeprefix("chars ").split("-"))
        for item in final["evidence"]:
            if evidence is not None and item["index"] != evidence:
                continue
            for row in json.loads(item["output"]):
                low, high = map(int, row["location"].removeprefix("chars ").split("-"))
                if row["source"] == source and low <= start and end <= high:
                    [chunk] = store.get([row["id"]])
                    assert chunk.source == source and chunk.location == row["location"]
                    return chunk.text, start - low, end - low
        raise AssertionError(f"{reference} is in no chunk the run retrieved")

    # Each `[n]` of the summary is source n of the report (one numbering): its sentence is in
    # the store.
    for quote, number in cited:
        reference = final["sources"][int(number) - 1]
        assert reference.startswith(SOURCE_PREFIX)
        text_of_chunk, start, end = stored_text(reference)
        shown = " ".join(text_of_chunk[start:end].split())  # the prompt joins lines
        assert quote in shown, f"[{number}] {reference} lacks {quote!r}"

    assert final["grounding_score"] == 1.0 and final["grounding_method"] == "checks"
    assert len(final["sources"]) >= 2
    # Every citation's quote is the stored chunk's text at the cited location, character for
    # character.
    for claim in final["claims"]:
        for citation in claim["citations"]:
            text_of_chunk, start, end = stored_text(citation.reference, citation.evidence)
            assert text_of_chunk[start:end] == citation.quote
