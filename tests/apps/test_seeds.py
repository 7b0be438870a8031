"""Every code block of the four SDK pages in `shared/seeds/`, ported as a user would port them:
`tulip`/`locus` renamed to `sleuth`, models swapped for scripted ones, a provider Sleuth does not
ship swapped for one it does. Each runs, and asserts what its page says happens — or, where Sleuth
deliberately differs (docs/differences.md), what Sleuth does instead.

Seeds: 000 and 001 (deep agents and the research workflow; 000 is the newer page), 003 (deep
decomposition in YAML), 004 (composition pipelines).
"""

from __future__ import annotations

import asyncio
import hashlib
import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, Field
from temporalio.testing import WorkflowEnvironment

from sleuth.grounding.scoring import JUDGE_SYSTEM
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from tests.helpers.research_scripts import FACT, REWORDED, ResearchScript

# -- shared seed fixtures: the knowledge base the pages' tools read --------------------------

KB = {
    "crm": ["Acme CRM: $40 per seat, 12% share", "Globex CRM: $55 per seat, 9% share"],
    "pipeline": ["Q3 pipeline coverage is 3.1x"],
}


class _KB:
    def query(self, query: str) -> list[str]:
        return [row for key, rows in KB.items() if key in query.lower() for row in rows]


kb = _KB()


def scripted(respond) -> ScriptedModel:  # type: ignore[no-untyped-def]
    """The pages' model, scripted. It is also the agents' grounding judge (the pages set none):
    asked whether passages state a claim, it answers Yes, and the judge's deterministic checks
    still test the claim against the evidence."""

    def answer(call: ModelCall) -> ModelResponse:
        if call.system_text == JUDGE_SYSTEM:
            return text("Yes")
        return respond(call)

    return ScriptedModel(responder=answer)


def tool_results(call: ModelCall) -> int:
    return sum(1 for m in call.messages if m.role == "tool")


class ResearchResult(BaseModel):
    """The quickstart's schema (the pages define it at module level, where `@tool` resolves it)."""

    summary: str
    sources: list[str]
    confidence: float = Field(ge=0.0, le=1.0)


# == Seed 000 / 001: create_deepagent ========================================================


def test_000_exit_condition_block() -> None:
    """The termination expressions compose, and create_deepagent builds the same condition."""
    from sleuth.agent.state import LoopState
    from sleuth.agent.termination import ConfidenceMet, MaxIterations, TokenLimit, ToolCalled
    from sleuth.deepagent import create_deepagent, exit_condition

    submit_tool, min_confidence, max_iterations = "submit", 0.85, 20
    for total_token_budget in (None, 1_000):
        base = ToolCalled(submit_tool, require_success=True) & ConfidenceMet(min_confidence)
        if total_token_budget is not None:
            termination = base | TokenLimit(total_token_budget) | MaxIterations(max_iterations)
        else:
            termination = base | MaxIterations(max_iterations)
        state = LoopState(iterations=3)
        assert termination.check(state)[0] is False
        built = exit_condition(submit_tool, min_confidence, total_token_budget)
        assert built is not None and built.check(state)[0] is False
        state.usage.input_tokens = 5_000
        assert termination.check(state)[0] is (total_token_budget is not None)
        assert built.check(state)[0] is (total_token_budget is not None)

    # "create_deepagent rejects max_tokens= with a TypeError" (seed 000, the newer page).
    with pytest.raises(TypeError, match="use max_output_tokens="):
        create_deepagent(model=ScriptedModel([]), max_tokens=100)


def test_001_exit_condition_block_with_token_limit_is_rejected() -> None:
    """Seed 001 writes `TokenLimit(max_tokens)`; seed 000, newer, renamed it: Sleuth follows 000."""
    from sleuth.deepagent import create_deepagent

    with pytest.raises(TypeError, match="total_token_budget"):
        create_deepagent(model=ScriptedModel([]), max_tokens=10_000)


def _quickstart_responder(submit_name: str):  # type: ignore[no-untyped-def]
    def respond(call: ModelCall) -> ModelResponse:
        if tool_results(call) == 0:
            return tool_call("search_kb", query="crm vendors")
        return tool_call(
            submit_name,
            result={
                "summary": "Acme CRM costs $40 per seat. Globex CRM costs $55 per seat.",
                "sources": ["Acme CRM", "Globex CRM"],
                "confidence": 0.9,
            },
        )

    return respond


def test_000_quickstart() -> None:
    from sleuth.deepagent import create_deepagent
    from sleuth.tools import tool

    @tool
    def search_kb(query: str) -> list[str]:
        """Search the knowledge base."""
        return kb.query(query)

    @tool
    def submit_research(result: ResearchResult) -> str:
        """Submit the completed report. Call when confidence ≥ 0.85."""
        return "submitted"

    agent = create_deepagent(
        model=scripted(_quickstart_responder("submit_research")),  # was "openai:gpt-4o-mini"
        tools=[search_kb, submit_research],
        system_prompt="You are a market-research agent. Submit when confident.",
        output_schema=ResearchResult,
        submit_tool="submit_research",
        min_confidence=0.85,
        max_iterations=20,
    )

    result = agent.run_sync("Summarise the competitive landscape for mid-market CRM platforms.")
    report: ResearchResult = result.parsed  # Pydantic-typed structured output
    assert isinstance(report, ResearchResult)
    assert report.confidence == 0.9
    assert result.stop_reason == "tool_called:submit_research & confidence_met"


def test_001_quickstart() -> None:
    from sleuth import create_deepagent, tool

    @tool
    def search_kb(query: str) -> list[str]:
        """Search the knowledge base."""
        return kb.query(query)

    @tool
    def submit_research(result: ResearchResult) -> str:
        """Submit the completed report. Call when confidence ≥ 0.85."""
        return "submitted"

    def respond(call: ModelCall) -> ModelResponse:
        if tool_results(call) == 0:
            return tool_call("search_kb", query="pipeline coverage")
        return tool_call(
            "submit_research",
            result={
                "summary": "Q3 pipeline coverage is 3.1x.",
                "sources": ["pipeline"],
                "confidence": 0.95,
            },
        )

    agent = create_deepagent(
        model=scripted(respond),  # was "oci:openai.gpt-5.5"
        tools=[search_kb, submit_research],
        system_prompt="You are a research agent. Submit when confident.",
        output_schema=ResearchResult,
        submit_tool="submit_research",
        min_confidence=0.85,
        max_iterations=20,
    )

    result = agent.run_sync("Summarise our Q3 pipeline coverage.")
    report: ResearchResult = result.structured_output
    assert report == ResearchResult(
        summary="Q3 pipeline coverage is 3.1x.", sources=["pipeline"], confidence=0.95
    )


def test_000_filesystem_scratchspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sleuth.deepagent import FilesystemBackend, create_deepagent

    def respond(call: ModelCall) -> ModelResponse:
        if tool_results(call) == 0:
            return tool_call("write_file", path="notes/crm.md", content="Acme: $40")
        return text("Saved my notes.")

    agent = create_deepagent(model=scripted(respond), enable_filesystem=True)
    assert {"write_file", "read_file", "ls", "edit_file", "glob", "grep"} <= set(agent.tools)
    agent.run_sync("Take notes")
    assert agent.layers["filesystem"].read("notes/crm.md") == "Acme: $40"  # StateBackend

    monkeypatch.chdir(tmp_path)
    on_disk = create_deepagent(
        model=scripted(respond), backend=FilesystemBackend(root=Path("./scratch"))
    )
    on_disk.run_sync("Take notes")
    assert (tmp_path / "scratch" / "notes" / "crm.md").read_text() == "Acme: $40"


def test_000_todo_tracking(capsys: pytest.CaptureFixture[str]) -> None:
    from sleuth.deepagent import TodoState, create_deepagent

    def respond(call: ModelCall) -> ModelResponse:
        if tool_results(call) == 0:
            return tool_call(
                "write_todos",
                todos=[
                    {"content": "size the market", "status": "completed"},
                    {"content": "price Acme", "status": "in_progress"},
                ],
            )
        return text("Working on it.")

    todo_state = TodoState()
    agent = create_deepagent(
        model=scripted(respond),
        enable_todos=True,
        todo_state=todo_state,  # inspect after the run
    )

    agent.run_sync("...")
    for todo in todo_state.snapshot():
        print(f"[{todo.status}] {todo.content}")
    assert capsys.readouterr().out == "[completed] size the market\n[in_progress] price Acme\n"


@pytest.mark.parametrize("seed", ["000", "001"])
def test_subagent_dispatch(seed: str) -> None:
    from sleuth.deepagent import SubAgentDef, create_deepagent
    from sleuth.tools import tool

    @tool
    def search_kb(query: str) -> list[str]:
        """Search the knowledge base."""
        return kb.query(query)

    @tool
    def inspect_module(module: str) -> list[str]:
        """The public symbols of a module."""
        return ["run_context", "get_event_bus"]

    if seed == "000":
        child = SubAgentDef(
            name="competitor_analyst",
            description="Deep-dives on a single competitor's product and pricing.",
            system_prompt="Research the given competitor and return its positioning, pricing, and recent launches.",
            tools=[search_kb],
            max_iterations=4,
        )
        child_tool, child_args, answer = "search_kb", {"query": "crm"}, "Acme: $40 per seat."
    else:
        child = SubAgentDef(
            name="symbol_analyst",
            description="Deep-dives on a single module's public API.",
            system_prompt="Inspect the given module and return its public symbols.",
            tools=[inspect_module],
            max_iterations=4,
        )
        child_tool, child_args, answer = (
            "inspect_module",
            {"module": "observability"},
            "run_context",
        )

    def respond(call: ModelCall) -> ModelResponse:
        if call.system_text.startswith(child.system_prompt):  # the child's own loop
            return tool_call(child_tool, **child_args) if tool_results(call) == 0 else text(answer)
        if tool_results(call) == 0:
            return tool_call("task", subagent_type=child.name, description="Look at one thing")
        return text("Done: " + call.messages[-1].content)

    model = scripted(respond)
    agent = create_deepagent(model=model, subagents=[child], grounding=False)
    result = agent.run_sync("Dispatch the specialist")
    assert result.message == f"Done: {answer}"
    # Only the child's final answer reaches the parent, not its trajectory.
    parent_turns = [c for c in model.calls if not c.system_text.startswith(child.system_prompt)]
    assert all(
        child_tool not in m.content for c in parent_turns for m in c.messages if m.role == "tool"
    )


def test_000_memory_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sleuth.deepagent import create_deepagent

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # ~/AGENTS.md does not exist: skipped
    monkeypatch.chdir(tmp_path)
    (tmp_path / "project-notes.md").write_text("Prices are per seat per month.")
    model = ScriptedModel([text("ok")])
    agent = create_deepagent(model=model, memory_files=["~/AGENTS.md", "./project-notes.md"])
    agent.run_sync("go")
    # Sleuth heads each file with where it came from.
    assert model.calls[0].system_text.startswith(
        "# Memory from ./project-notes.md\nPrices are per seat per month."
    )


class HashEmbeddings:
    """Stands in for `OpenAIEmbeddings(model="text-embedding-3-small")` (1536 dimensions): a
    deterministic bag-of-words hash, so the seed's Qdrant collection keeps its dimension."""

    dimension = 1536

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = []
        for item in texts:
            vector = [0.0] * self.dimension
            for word in item.lower().split():
                vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
            vectors.append(vector)
        return vectors


def test_000_datastore_auto_wiring(sleuth_home: Path) -> None:
    from sleuth.deepagent import create_deepagent
    from sleuth.rag import RAGRetriever
    from sleuth.rag.stores import Document
    from sleuth.rag.stores.qdrant import QdrantVectorStore

    retriever = RAGRetriever(
        embedder=HashEmbeddings(),  # was OpenAIEmbeddings(model="text-embedding-3-small")
        store=QdrantVectorStore(collection_name="industry_reports", dimension=1536),
    )
    embedded = HashEmbeddings().embed(["CRM market sizing: $80B in 2024"])[0]
    retriever.store.add(
        [
            Document(
                id="r1",
                text="CRM market sizing: $80B in 2024",
                source="gartner.pdf",
                vector=embedded,
            )
        ]
    )

    def respond(call: ModelCall) -> ModelResponse:
        if tool_results(call) == 0:
            return tool_call("search_industry_reports", query="CRM market sizing")
        return text("The CRM market was $80B in 2024.")

    model = scripted(respond)
    agent = create_deepagent(
        model=model,
        grounding=False,
        datastores={
            "industry_reports": {
                "retriever": retriever,
                "description": "analyst reports: market sizing, competitor "
                "pricing, launch timelines",
                "top_k": 6,
            },
        },
    )
    try:
        result = agent.run_sync("How big is the CRM market?")
    finally:
        retriever.store.close()
    assert "search_industry_reports" in agent.tools
    assert "analyst reports: market sizing" in model.calls[0].system_text
    assert "$80B" in result.evidence[0].output


async def test_000_from_async_code_use_agent_run() -> None:
    """ "From inside an async def use `async for event in agent.run(...)`"."""
    from sleuth.deepagent import create_deepagent

    agent = create_deepagent(model=ScriptedModel([text("hello")]), grounding=False)
    events = [event async for event in agent.run("Say hello")]
    assert [e.event_type for e in events] == ["agent.iteration", "agent.terminate", "agent.result"]
    assert events[-1].message == "hello"


def test_000_conversation_summarisation() -> None:
    from sleuth.deepagent import create_deepagent
    from sleuth.deepagent.summarize import SUMMARY_PREFIX

    def respond(call: ModelCall) -> ModelResponse:
        if call.system_text.startswith("You condense"):
            return text("Searched pages 1 to 20; every page lists CRM vendors.")
        last = call.messages[-1]
        done = int(last.content.split(":")[0].split()[-1]) if last.role == "tool" else 0
        return tool_call("page", n=done + 1) if done < 25 else text("All pages read.")

    from sleuth.tools import tool

    @tool
    def page(n: int) -> str:
        """One page of results."""
        return f"page {n}: CRM vendors"

    model = scripted(respond)
    agent = create_deepagent(
        model=model,
        tools=[page],
        grounding=False,
        reflexion=False,
        max_iterations=40,
        summarize_after_messages=40,  # trigger threshold
        summarize_keep_recent=10,  # always preserve last 10 verbatim
    )
    result = agent.run_sync("Read every page")
    assert result.message == "All pages read."
    condensed = [m for m in result.state.messages if m.kind == "summary"]
    assert condensed and condensed[0].content.startswith(SUMMARY_PREFIX)
    assert max(len(c.messages) for c in model.calls) <= 41


def _observed_agent():  # type: ignore[no-untyped-def]
    from sleuth.deepagent import SubAgentDef, create_deepagent

    helper = SubAgentDef(
        name="pricing", description="Finds prices.", system_prompt="Find prices.", max_iterations=2
    )

    def respond(call: ModelCall) -> ModelResponse:
        if call.system_text.startswith("Find prices."):
            return text("Acme: $40")
        steps = [
            tool_call("task", subagent_type="pricing", description="Acme"),
            tool_call("write_file", path="notes.md", content="Acme $40"),
            tool_call("write_todos", todos=[{"content": "check Globex", "status": "pending"}]),
        ]
        done = tool_results(call)
        return steps[done] if done < len(steps) else text("Acme charges $40 per seat.")

    return create_deepagent(
        model=scripted(respond),
        enable_filesystem=True,
        enable_todos=True,
        subagents=[helper],
        grounding=False,
    )


async def test_000_observability(capsys: pytest.CaptureFixture[str]) -> None:
    from sleuth.observability import get_event_bus, run_context

    agent = _observed_agent()

    async def watch(rid: str) -> None:
        async for ev in get_event_bus().subscribe(rid):
            match ev.event_type:
                case "deepagent.subagent.spawned":
                    print("↳ subagent:", ev.data["subagent_type"])
                case "deepagent.fs.write":
                    print("  📝", ev.data["path"])
                case "deepagent.todo.added":
                    print("  ☐", ev.data["content"])
                case "agent.terminate":
                    print("  ✓", ev.data["final_message_preview"])

    async with run_context() as rid:
        watcher = asyncio.create_task(watch(rid))
        await asyncio.sleep(0)  # let the subscriber register
        await agent.arun("Research the pricing history for this product line.")
        await get_event_bus().close_stream(rid)  # ends the subscriber's iterator
        await watcher

    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "↳ subagent: pricing"
    assert "  ✓ Acme: $40" in printed  # the subagent's own terminate
    assert printed[-3:] == ["  📝 notes.md", "  ☐ check Globex", "  ✓ Acme charges $40 per seat."]


async def test_001_observability_order_sleuth_differs() -> None:
    """Seed 001 calls `run_sync` and only then subscribes. Two things differ in Sleuth (seed 000 is
    the newer page): a subscription sees only events published after it, so subscribe first; and
    Sleuth's `run_sync` carries the run context onto its thread, so a subscriber that was there
    does get the events (seed 000 says nothing is published)."""
    from sleuth.observability import get_event_bus, run_context

    async with run_context() as rid:
        early = get_event_bus().subscribe(rid)
        agent = _observed_agent()
        await asyncio.to_thread(agent.run_sync, "Research the observability module.")
        late = get_event_bus().subscribe(rid)
        await get_event_bus().close_stream(rid)
        seen_early = [ev.event_type async for ev in early]
        seen_late = [ev.event_type async for ev in late]
    assert "deepagent.subagent.spawned" in seen_early and seen_early[-1] == "agent.terminate"
    assert seen_late == []


def _asset_provider():  # type: ignore[no-untyped-def]
    from sleuth.deepagent import ItemRef, KnowledgeProvider, KnowledgeRow

    class Inventory:
        def list_hosts(self) -> list[str]:
            return ["web-1", "db-1"]

        def describe_host(self, name: str) -> str:
            return f"Assess host {name}"

    inventory = Inventory()

    class AssetInventoryProvider(KnowledgeProvider):
        def list_items(self) -> list[ItemRef]:
            return [ItemRef(name=h, provider="asset_inventory") for h in inventory.list_hosts()]

        def describe_item(self, ref: ItemRef) -> str:
            return inventory.describe_host(ref.name)

        def to_row(self, ref: ItemRef, result: ResearchResult) -> KnowledgeRow:
            return KnowledgeRow(id=ref.name, data=result.model_dump())

    return AssetInventoryProvider


def _host_agent_factory():  # type: ignore[no-untyped-def]
    from sleuth.deepagent import create_deepagent
    from sleuth.tools import tool

    @tool
    def submit_research(result: ResearchResult) -> str:
        """Submit the report."""
        return "submitted"

    def respond(call: ModelCall) -> ModelResponse:
        first_user = next(m.content for m in call.messages if m.role == "user")
        host = first_user.split()[-1]
        return tool_call(
            "submit_research",
            result={"summary": f"{host} is patched", "sources": [host], "confidence": 0.9},
        )

    return lambda: create_deepagent(
        model=scripted(respond),
        tools=[submit_research],
        output_schema=ResearchResult,
        submit_tool="submit_research",
        grounding=False,
    )


async def test_000_knowledge_provider_each_item_gets_its_own_agent_run(
    dev_env: WorkflowEnvironment,
) -> None:
    from sleuth import App
    from sleuth.activities.scan_models import ScanRequest
    from sleuth.scans.knowledge import agent_item
    from sleuth.scans.sinks import SQLiteRowSink
    from sleuth.workers.worker import build_worker
    from sleuth.workflows import KnowledgeScanWorkflow

    provider = _asset_provider()()
    make_agent = _host_agent_factory()

    # In-process: one item, one agent run, one typed row.
    row = await agent_item(provider, make_agent(), provider.list_items()[0])
    assert row.id == "web-1"
    assert row.data == {"summary": "web-1 is patched", "sources": ["web-1"], "confidence": 0.9}

    # Durably: a scan of the provider whose items each run the registered agent.
    app = App()
    app.provider("assets", provider)
    app.agent("host-analyst", make_agent)
    task_queue = str(uuid.uuid4())
    async with build_worker(dev_env.client, app, task_queue=task_queue):
        outcome = await dev_env.client.execute_workflow(
            KnowledgeScanWorkflow.run,
            ScanRequest(provider="assets", agent="host-analyst", scan_id="assets-seed"),
            id=f"scan-{uuid.uuid4()}",
            task_queue=task_queue,
        )
    assert outcome.rows_written == 2
    rows = {r.item_id: r.data for r in SQLiteRowSink().records("assets-seed")}
    assert rows["db-1"] == {"summary": "db-1 is patched", "sources": ["db-1"], "confidence": 0.9}


async def test_001_schema_provider_scans_with_a_research_config() -> None:
    from sleuth import create_research_workflow
    from sleuth.deepagent import ItemRef, KnowledgeProvider, KnowledgeRow
    from sleuth.scans.knowledge import research_item

    class Database:
        def list_tables(self) -> list[str]:
            return ["AP_INVOICES_ALL", "AR_RECEIPTS"]

        def describe_table(self, table: str) -> str:
            return f"Describe the table {table}"

    db = Database()

    class SchemaProvider(KnowledgeProvider):
        def list_items(self) -> list[ItemRef]:
            return [ItemRef(id=t, label=t) for t in db.list_tables()]

        def describe_item(self, ref: ItemRef) -> str:
            return db.describe_table(ref.id)

        def to_row(self, ref: ItemRef, result) -> KnowledgeRow:  # type: ignore[no-untyped-def]
            return KnowledgeRow(id=ref.id, data=result.model_dump())

    research = create_research_workflow(
        model=scripted(ResearchScript(tool_name="lookup")), tools=[_lookup_tool()]
    )
    provider = SchemaProvider()
    rows = [await research_item(provider, research, ref) for ref in provider.list_items()]
    assert [r.id for r in rows] == ["AP_INVOICES_ALL", "AR_RECEIPTS"]
    assert rows[0].data["summary"] == FACT
    assert rows[0].data["end_reason"] == "grounded"


def _lookup_tool():  # type: ignore[no-untyped-def]
    from sleuth.tools import tool

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return FACT

    return lookup


class Report(BaseModel):
    summary: str
    key_findings: list[str]
    confidence: float


REPORT_JSON = json.dumps({"summary": FACT, "key_findings": [FACT], "confidence": 0.8})
REWORDED_JSON = json.dumps({"summary": REWORDED, "key_findings": [REWORDED], "confidence": 0.8})


@pytest.mark.parametrize("seed", ["000", "001"])
async def test_create_research_workflow(seed: str, capsys: pytest.CaptureFixture[str]) -> None:
    from sleuth.deepagent.workflow import create_research_workflow
    from sleuth.tools import tool

    @tool
    def search_kb(query: str) -> list[str]:
        """Search the knowledge base."""
        return [FACT]

    @tool
    def enrich_indicator(value: str) -> str:
        """Threat intel about an indicator."""
        return f"{value}: seen in 3 campaigns"

    @tool
    def inspect_record(name: str) -> str:
        """Describe a database record."""
        return f"{name}: 42 columns"

    @tool
    def submit_research(summary: str) -> str:
        """Submit the report."""
        return "submitted"

    script = ResearchScript(
        verdicts=[False, True],
        tool_name="search_kb",
        tool_argument="query",
        summary=REPORT_JSON,
        rewrite=REWORDED_JSON,
    )

    def get_model() -> ScriptedModel:
        return ScriptedModel(responder=script)  # it answers the judge itself

    middle = enrich_indicator if seed == "000" else inspect_record
    workflow = create_research_workflow(
        model=get_model(),
        tools=[search_kb, middle, submit_research],
        output_schema=Report,
        grounding_threshold=0.65,  # accept summary when ≥ 65% claims grounded
        max_replans=2,  # retry up to 2× with focused re-plan
    )
    prompt = (
        "Investigate indicator 198.51.100.7"
        if seed == "000"
        else "Investigate FUSION.AP_INVOICES_ALL"
    )
    result = await workflow.execute({"prompt": prompt})
    report: Report = result.final_state["structured_output"]
    print(f"grounding: {result.final_state['grounding_score']:.0%}")
    print(f"replans used: {result.final_state['replan_count']}")

    # The regenerated report (the fact in other words) is the one grounded.
    assert isinstance(report, Report) and report.key_findings == [REWORDED]
    # Below the threshold, regenerations are spent first (seed 000, the newer page), then the
    # run is grounded: no replan needed.
    assert capsys.readouterr().out == "grounding: 100%\nreplans used: 0\n"
    assert result.final_state.nodes == [
        "plan",
        "execute",
        "causal_inference",
        "summarize",
        "grounding_eval",
        "regenerate",
        "grounding_eval",
    ]


async def test_000_research_workflow_datastores() -> None:
    from sleuth.deepagent.workflow import create_research_workflow
    from sleuth.rag import InMemoryVectorStore, RAGRetriever
    from sleuth.rag.stores import Document

    store = InMemoryVectorStore()
    store.add([Document(id="t1", text=f"Threat intel: {FACT}", source="intel.md")])
    threat_intel_retriever = RAGRetriever(store=store)

    def execute_turn(call: ModelCall) -> ModelResponse:
        if tool_results(call) == 0:
            return tool_call("search_threat_intel", query="CRM market grew")
        return text("Findings: " + FACT)

    script = ResearchScript(summary=REPORT_JSON, execute_turn=execute_turn)
    workflow = create_research_workflow(
        model=ScriptedModel(responder=script),
        tools=[],
        output_schema=Report,
        datastores={"threat_intel": {"retriever": threat_intel_retriever, "top_k": 6}},
        grounding_threshold=0.65,
    )
    result = await workflow.execute({"prompt": "What do we know about the CRM market?"})
    assert result.final_state.evidence[0].tool == "search_threat_intel"
    assert result.final_state.end_reason == "grounded"


# == Seed 003: deep decomposition in YAML ====================================================


def test_003_type_identifier_block(tmp_path: Path) -> None:
    from sleuth import App, DeepDecomposer
    from sleuth.apps.yaml_agents import YamlConfigError, load_agents_into

    literal = """\
agents:
  - id: deep-researcher
    type: deep
    model: { ... }
    deep_max_depth: 3
    tools: [ ... ]
"""
    path = tmp_path / "agents.yaml"
    path.write_text(literal)
    # The page's `{ ... }` placeholders are not a model or a tool: each is named, with its line.
    with pytest.raises(YamlConfigError) as error:
        load_agents_into(App(), path)
    assert ":4: model.provider: Field required" in str(error.value)

    app = App()
    app.model("scripted", ScriptedModel([]))
    app.tool(_lookup_tool())
    path.write_text(
        literal.replace("{ ... }", "{ provider: app, model: scripted }").replace(
            "[ ... ]", "[lookup]"
        )
    )
    load_agents_into(app, path)
    agent = app.new_agent("deep-researcher")
    assert isinstance(agent, DeepDecomposer) and agent.max_depth == 3


def test_003_prompts_and_digest_blocks() -> None:
    from sleuth.flows.decompose import (
        DECISION_PROMPT,
        build_digest,
        decision_prompt,
        parse_decision,
        synthesis_prompt,
    )

    assert '{"direct": true}' in DECISION_PROMPT
    assert '{"direct": false, "subtasks": [' in DECISION_PROMPT
    assert decision_prompt("Compare CRMs") == "Task: Compare CRMs"
    assert parse_decision('{"direct": true}')[:2] == (True, [])
    assert parse_decision("not json")[:2] == (True, [])  # malformed: solve directly
    assert parse_decision('{"direct": false, "subtasks": []}')[:2] == (True, [])
    assert parse_decision('{"direct": false, "subtasks": ["a", "b"]}')[:2] == (False, ["a", "b"])
    assert build_digest([("price Acme", "$40"), ("price Globex", "$55")]) == (
        "## Subtask 1: price Acme\n$40\n\n## Subtask 2: price Globex\n$55"
    )
    assert synthesis_prompt("Compare", "DIGEST") == (
        "Original task: Compare\nSubtask results:\nDIGEST\nSynthesize a final comprehensive answer."
    )


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        body = b"<html><body><p>Acme costs $40.</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def local_page() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/acme"
    finally:
        server.shutdown()
        server.server_close()


async def test_003_example_yaml_runs(tmp_path: Path, sleuth_home: Path, local_page: str) -> None:
    from sleuth import App
    from sleuth.apps.yaml_agents import load_agents_into
    from sleuth.runtime.events import get_event_bus, run_context

    example = """\
agents:
  - id: deep-researcher
    type: deep
    deep_max_depth: 2
    max_iterations: 8
    model:
      provider: anthropic
      model: claude-sonnet-4-7
    system_prompt: |
      You are a research analyst. Break complex questions into the
      smallest meaningful sub-questions, gather sources, then write
      a citation-rich synthesis.
    tools:
      - { name: web-fetch, type: function, function: web.fetch }
      - { name: read-file, type: function, function: fs.read }
    budget:
      max_tool_calls: 60
      max_input_tokens: 800000
"""
    (sleuth_home / "files").mkdir(parents=True)
    (sleuth_home / "files" / "globex.md").write_text("Globex costs $55.")

    def respond(call: ModelCall) -> ModelResponse:
        task = call.messages[-1].content if call.messages[-1].role == "user" else ""
        if call.system_text.startswith("Decide how to handle"):
            if task == "Task: Compare Acme and Globex prices":
                return text('{"direct": false, "subtasks": ["price Acme", "price Globex"]}')
            return text('{"direct": true}')
        first = next(m.content for m in call.messages if m.role == "user")
        if tool_results(call) == 0 and first == "price Acme":
            return tool_call("web-fetch", url=local_page)
        if tool_results(call) == 0 and first == "price Globex":
            return tool_call("read-file", path="globex.md")
        if first.startswith("Original task:"):
            return text("Acme is cheaper.")
        return text(call.messages[-1].content)

    model = scripted(respond)
    app = App()
    app.model("claude", model)  # the provider swap: anthropic -> a scripted model in the App
    path = tmp_path / "agents.yaml"
    path.write_text(
        example.replace("provider: anthropic", "provider: app").replace(
            "model: claude-sonnet-4-7", "model: claude"
        )
    )
    load_agents_into(app, path)
    deep = app.new_agent("deep-researcher")
    async with run_context() as rid:
        stream = get_event_bus().subscribe(rid)
        result = await deep.arun("Compare Acme and Globex prices")
        await get_event_bus().close_stream(rid)
        events = [e async for e in stream]

    assert result.answer == "Acme is cheaper."
    outputs = {m.name: m.content for c in model.calls for m in c.messages if m.role == "tool"}
    # web.fetch refuses loopback unless the tool allows it; fs.read reads $SLEUTH_HOME/files.
    assert "an internal address; web.fetch reads public addresses only" in outputs["web-fetch"]
    assert outputs["read-file"] == "Globex costs $55."
    # The decision prompt is prepended to the system prompt, verbatim.
    decision = model.calls[0]
    assert decision.system_text.startswith("Decide how to handle the task you are given.")
    assert decision.system_text.endswith("then write\na citation-rich synthesis.")
    # Every recursion level emits a decompose event with its depth (Sleuth: `decompose.*`).
    assert {e.data.get("depth") for e in events if e.event_type == "decompose"} >= {0, 1}
    assert result.spent.tool_calls == 2


# == Seed 004: composition pipelines =========================================================


class StageAgent:
    """A tiny agent-shaped stage: `arun(task)` returns its name and what it got."""

    def __init__(self, name: str, *, fail: bool = False, empty: bool = False):
        self.name, self.fail, self.empty, self.got = name, fail, empty, []

    async def arun(self, task: str) -> str:
        self.got.append(task)
        if self.fail:
            raise RuntimeError(f"{self.name} broke")
        return "" if self.empty else f"{self.name} output"


class SyncOnly:
    """An agent without `arun`: the pipeline calls `run_sync`."""

    def run_sync(self, task: str) -> str:
        return "sync output"


async def test_004_code_block() -> None:
    from sleuth.agent.composition import LoopAgent, ParallelPipeline, SequentialPipeline

    research, draft, review, publish = (
        StageAgent(n) for n in ("research", "draft", "review", "publish")
    )
    web_search_agent, data_query_agent = StageAgent("web"), StageAgent("data", empty=True)
    docs_retrieval_agent = StageAgent("docs")
    reviser_agent = StageAgent("reviser")
    initial_draft = "draft v0"

    # Sequential: research → draft → review → publish
    pipeline = SequentialPipeline(agents=[research, draft, review, publish])

    result = await pipeline.run("Why did checkout conversion drop last week?")

    # Parallel: answer one question across web search, a data query, and docs
    parallel = ParallelPipeline(agents=[web_search_agent, data_query_agent, docs_retrieval_agent])
    answers = await parallel.run(
        "Checkout conversion last week: what changed? which deploys? known issues?"
    )

    # Loop: revise the draft until the review clears, max 5 loops
    revise = LoopAgent(agent=reviser_agent, max_loops=5)
    final = await revise.run(initial_draft)

    assert result.success and result.final_output == "publish output"
    assert research.got == ["Why did checkout conversion drop last week?"]
    assert "research output" in draft.got[0] and "Why did checkout" in draft.got[0]
    assert answers.final_output == "web output\n\ndocs output"  # non-empty outputs, concatenated
    assert web_search_agent.got == data_query_agent.got  # the same task for every branch
    assert final.stop_reason == "max_loops" and len(reviser_agent.got) == 5
    assert "reviser output" in reviser_agent.got[1] and initial_draft in reviser_agent.got[1]

    # An agent without arun runs through run_sync; an agent that raises makes success False.
    mixed = await SequentialPipeline(agents=[SyncOnly(), StageAgent("x", fail=True)]).run("t")
    assert mixed.success is False and "x broke" in (mixed.error or "")

    # Sleuth differs: pipelines nest (the page says a nested pipeline never runs).
    nested = await SequentialPipeline(
        agents=[ParallelPipeline(agents=[StageAgent("a")]), StageAgent("b")]
    ).run("t")
    assert nested.success and nested.final_output == "b output"


def test_every_seed_import_path_re_exports_the_same_objects() -> None:
    import sleuth
    import sleuth.flows.composition
    import sleuth.research
    import sleuth.runtime.events
    import sleuth.scans.knowledge
    from sleuth.agent import (
        Agent,  # sleuth.agent is a package now, and still has Agent
        composition,
    )
    from sleuth.deepagent import ItemRef, KnowledgeProvider, KnowledgeRow, workflow
    from sleuth.observability import get_event_bus, run_context
    from sleuth.rag.stores import chroma, opensearch, pgvector, qdrant

    assert Agent is sleuth.Agent
    assert composition.SequentialPipeline is sleuth.flows.composition.SequentialPipeline
    assert composition.ParallelPipeline is sleuth.ParallelPipeline
    assert composition.LoopAgent is sleuth.LoopAgent
    assert workflow.create_research_workflow is sleuth.research.create_research_workflow
    assert (run_context, get_event_bus) == (
        sleuth.runtime.events.run_context,
        sleuth.runtime.events.get_event_bus,
    )
    assert (ItemRef, KnowledgeProvider, KnowledgeRow) == (
        sleuth.scans.knowledge.ItemRef,
        sleuth.scans.knowledge.KnowledgeProvider,
        sleuth.scans.knowledge.KnowledgeRow,
    )
    assert qdrant.QdrantVectorStore is sleuth.QdrantVectorStore
    assert (chroma.ChromaVectorStore, opensearch.OpenSearchVectorStore, pgvector.PgVectorStore) == (
        sleuth.ChromaVectorStore,
        sleuth.OpenSearchVectorStore,
        sleuth.PgVectorStore,
    )
