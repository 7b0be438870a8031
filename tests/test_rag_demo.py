"""The demo corpus (CPython's language reference topics) and a research run over it.

The scripted model writes its report only from the evidence it is shown, quoting retrieved lines
and citing the evidence numbers; the test then checks every quote against the store itself.
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


def quoted_lines(evidence_block: str) -> list[str]:
    """One report line per evidence item: a retrieved line about the question, cited `[n]`."""
    lines = []
    for match in re.finditer(r"(?m)^\[(\d+)\] search_python-docs\(.*$", evidence_block):
        number, rendered = match.group(1), match.group(0)
        for fragment in _TEXT_FIELD.findall(rendered):
            # The evidence may be cut mid-escape; drop a dangling backslash before decoding.
            chunk_text = json.loads('"' + re.sub(r"\\+$", "", fragment) + '"')
            candidates = [
                line.strip()
                for line in chunk_text.splitlines()
                if len(line.strip()) > 30
                and any(k in line for k in KEYWORDS)
                and not re.search(r'[.!?"\[\]]', line)
            ]
            if candidates:
                lines.append(f"{candidates[0]} [{number}].")
                break
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
    evidence = {item["index"]: item for item in final["evidence"]}
    store = retriever.store
    for quote, number in cited:
        item = evidence[int(number)]
        assert item["tool"] == "search_python-docs"
        chunks = json.loads(item["output"])
        holding = [c for c in chunks if quote in c["text"]]
        assert holding, f"[{number}] does not contain {quote!r}"
        # The chunk is really in the store, under that id, with that text and source.
        [stored] = store.get([holding[0]["id"]])
        assert quote in stored.text and stored.source == holding[0]["source"]

    assert final["grounding_score"] == 1.0
    assert len(final["sources"]) >= 2
    for cited_source in final["sources"]:
        source, _, location = cited_source.partition("#")
        assert source.startswith(SOURCE_PREFIX) and location.startswith("chars ")
        found = store.count(where={"source": source, "location": location})
        assert found == 1, f"{cited_source} is not in the store"
