"""Todos, subagents, memory files, summarisation, datastores, events and layer checkpoints."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sleuth import create_deepagent, get_event_bus, run_context, tool
from sleuth.agent.state import LoopState
from sleuth.deepagent import StateBackend, SubAgentDef, TodoState
from sleuth.deepagent.summarize import SUMMARY_PREFIX, split_for_summary
from sleuth.models.base import Message, ToolCall
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call, tool_calls


async def test_todos_give_the_caller_a_live_view() -> None:
    todo_state = TodoState()
    seen_mid_run: list[list[str]] = []

    def check(call: ModelCall):
        seen_mid_run.append([t.status for t in todo_state.snapshot()])
        return text("all done")

    model = ScriptedModel(
        [
            tool_call(
                "write_todos",
                todos=[{"content": "find sizing"}, {"content": "find pricing"}],
            ),
            tool_call(
                "write_todos",
                todos=[
                    {"content": "find sizing", "status": "completed"},
                    {"content": "find pricing", "status": "in_progress"},
                ],
            ),
            tool_call("read_todos"),
            check,
        ]
    )
    agent = create_deepagent(model=model, enable_todos=True, todo_state=todo_state, grounding=False)
    events: list[tuple[str, str]] = []
    async with run_context():
        remove = get_event_bus().add_listener(
            lambda e: (
                events.append((e.event_type, e.data["content"]))
                if e.event_type.startswith("deepagent.todo")
                else None
            )
        )
        try:
            result = await agent.arun("plan")
        finally:
            remove()
    assert seen_mid_run == [["completed", "in_progress"]]
    assert [(t.content, t.status) for t in todo_state.snapshot()] == [
        ("find sizing", "completed"),
        ("find pricing", "in_progress"),
    ]
    assert events == [
        ("deepagent.todo.added", "find sizing"),
        ("deepagent.todo.added", "find pricing"),
        ("deepagent.todo.completed", "find sizing"),
    ]
    assert '"status": "in_progress"' in model.calls[3].messages[-1].content
    assert result.state.layers["todos"]["todos"][0]["status"] == "completed"


@tool
def inspect_competitor(name: str) -> str:
    """Details about one competitor."""
    return f"{name}: list price $40 per seat, launched an AI assistant in March"


def competitor_def(model: ScriptedModel, **extra) -> SubAgentDef:
    return SubAgentDef(
        name="competitor_analyst",
        description="Deep-dives on one competitor.",
        system_prompt="Research the competitor you are given.",
        tools=[inspect_competitor],
        max_iterations=4,
        model=model,
        **extra,
    )


async def test_subagent_answer_enters_the_parent_and_its_tokens_count() -> None:
    child = ScriptedModel(
        [
            tool_call("inspect_competitor", {"name": "Acme"}, input_tokens=200, output_tokens=30),
            text("Acme charges $40 per seat.", input_tokens=300, output_tokens=20),
        ]
    )
    parent = ScriptedModel(
        [
            tool_call(
                "task",
                subagent_type="competitor_analyst",
                description="Price of Acme CRM?",
                input_tokens=50,
                output_tokens=10,
            ),
            text("Acme costs $40.", input_tokens=60, output_tokens=10),
        ]
    )
    agent = create_deepagent(
        model=parent, subagents=[competitor_def(child)], grounding=False, reflexion=False
    )
    result = await agent.arun("How much is Acme?")
    child_messages = child.calls[0].messages
    assert [m.role for m in child_messages] == ["system", "user"]
    assert child_messages[1].content == "Price of Acme CRM?"
    parent_view = parent.calls[1].messages
    assert (
        parent_view[-1].role == "tool" and parent_view[-1].content == "Acme charges $40 per seat."
    )
    assert not any("inspect_competitor" in (m.name or "") for m in parent_view)
    assert result.usage.total_tokens == (50 + 10 + 60 + 10) + (200 + 30 + 300 + 20)
    assert (
        "competitor_analyst: Deep-dives on one competitor." in parent.calls[0].tools[0].description
    )


async def test_subagent_tokens_spend_the_parent_budget() -> None:
    child = ScriptedModel([text("expensive answer", input_tokens=5000, output_tokens=100)])
    parent = ScriptedModel(
        [tool_call("task", subagent_type="competitor_analyst", description="go")]
    )
    agent = create_deepagent(
        model=parent, subagents=[competitor_def(child)], total_token_budget=1000, grounding=False
    )
    result = await agent.arun("research")
    assert result.stop_reason == "token_limit"
    assert result.iterations == 1


async def test_a_failed_subagent_still_charges_the_tokens_it_spent() -> None:
    from sleuth.models.base import NonRetryableModelError

    # A non-retryable failure (a retryable one propagates to the runner, which retries the step).
    child = ScriptedModel(
        [
            tool_call("inspect_competitor", {"name": "acme"}, input_tokens=4000, output_tokens=100),
            NonRetryableModelError("prompt too long for the context window"),
        ]
    )
    parent = ScriptedModel(
        [
            tool_call("task", subagent_type="competitor_analyst", description="go"),
            text("I could not find out."),
        ]
    )
    agent = create_deepagent(
        model=parent, subagents=[competitor_def(child)], total_token_budget=1000, grounding=False
    )
    result = await agent.arun("research")
    assert result.evidence[0].success is False  # the parent saw the failure as a tool error
    assert result.usage.total_tokens >= 4100
    assert result.stop_reason == "token_limit"


async def test_subagent_nesting_is_bounded() -> None:
    grandchild = ScriptedModel([text("deep answer")])
    child = ScriptedModel(
        responder=lambda call: (
            text("child gave up: " + call.messages[-1].content)
            if call.messages[-1].role == "tool"
            else tool_call("task", subagent_type="grandchild", description="deeper")
        )
    )
    inner = SubAgentDef("grandchild", "goes deeper", "answer", model=grandchild)
    parent = ScriptedModel(
        [tool_call("task", subagent_type="competitor_analyst", description="go"), text("ok")]
    )
    agent = create_deepagent(
        model=parent,
        subagents=[competitor_def(child, subagents=[inner])],
        max_subagent_depth=1,
        grounding=False,
    )
    await agent.arun("research")
    assert "subagent nesting limit reached (1 levels)" in parent.calls[1].messages[-1].content
    assert grandchild.calls == []

    grandchild2 = ScriptedModel([text("deep answer")])
    inner2 = SubAgentDef("grandchild", "goes deeper", "answer", model=grandchild2)
    parent2 = ScriptedModel(
        [tool_call("task", subagent_type="competitor_analyst", description="go"), text("ok")]
    )
    allowed = create_deepagent(
        model=parent2,
        subagents=[competitor_def(child, subagents=[inner2])],
        max_subagent_depth=2,
        grounding=False,
    )
    await allowed.arun("research")
    assert len(grandchild2.calls) == 1
    assert parent2.calls[1].messages[-1].content == "child gave up: deep answer"


async def test_unknown_subagent_type_lists_the_available_ones() -> None:
    parent = ScriptedModel([tool_call("task", subagent_type="nobody", description="x"), text("ok")])
    agent = create_deepagent(
        model=parent, subagents=[competitor_def(ScriptedModel())], grounding=False
    )
    await agent.arun("go")
    assert "available: competitor_analyst" in parent.calls[1].messages[-1].content


async def test_memory_files_are_prepended_and_missing_ones_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "AGENTS.md").write_text("Always cite sources.")
    (tmp_path / "notes.md").write_text("Fiscal year starts in April.")
    monkeypatch.setenv("HOME", str(home))
    model = ScriptedModel([text("ok")])
    agent = create_deepagent(
        model=model,
        system_prompt="You are a research agent.",
        memory_files=["~/AGENTS.md", str(tmp_path / "missing.md"), str(tmp_path / "notes.md")],
        grounding=False,
    )
    await agent.arun("go")
    system = model.calls[0].system_text
    assert system.index("Always cite sources.") < system.index("Fiscal year starts in April.")
    assert system.index("Fiscal year starts in April.") < system.index("You are a research agent.")
    assert "missing" not in system


def test_summary_split_never_separates_a_tool_call_from_its_results() -> None:
    call_a, call_b = ToolCall(id="a", name="s", arguments={}), ToolCall(id="b", name="s")
    messages = [
        Message(role="system", content="sys"),
        Message(role="user", content="task"),
        Message(role="assistant", content="thinking"),
        Message(role="assistant", tool_calls=[call_a, call_b]),
        Message(role="tool", content="ra", tool_call_id="a"),
        Message(role="tool", content="rb", tool_call_id="b"),
    ]
    head, older, recent = split_for_summary(messages, keep_recent=1)
    assert [m.content for m in head] == ["sys", "task"]
    assert [m.content for m in older] == ["thinking"]
    assert recent[0].tool_calls == [call_a, call_b]
    assert [m.content for m in recent[1:]] == ["ra", "rb"]


async def test_summarisation_condenses_older_turns_and_keeps_recent_ones() -> None:
    turns = 0

    def researcher(call: ModelCall):
        nonlocal turns
        turns += 1
        if turns > 8:
            return text("finished")
        return tool_calls(("lookup_page", {"page": turns}), ("lookup_page", {"page": turns + 100}))

    @tool
    def lookup_page(page: int) -> str:
        """A page of results."""
        return f"page {page} results"

    summaries = 0

    def condense_or_research(call: ModelCall):
        nonlocal summaries
        if call.messages[0].content.startswith("You condense"):
            summaries += 1
            return text(f"summary #{summaries}", input_tokens=7, output_tokens=3)
        return researcher(call)

    model = ScriptedModel(responder=condense_or_research)
    agent = create_deepagent(
        model=model,
        tools=[lookup_page],
        system_prompt="Page through the results.",
        summarize_after_messages=8,
        summarize_keep_recent=4,
        grounding=False,
        reflexion=False,
    )
    result = await agent.arun("page through everything")
    assert summaries >= 2
    research_calls = [
        c for c in model.calls if not c.messages[0].content.startswith("You condense")
    ]
    for call in research_calls:
        assert len(call.messages) <= 8 + 2
        answered = {c.id for m in call.messages if m.role == "assistant" for c in m.tool_calls}
        for message in call.messages:
            if message.role == "tool":
                assert message.tool_call_id in answered
        assert call.messages[1].content == "page through everything"
    last = research_calls[-1].messages
    assert last[2].content.startswith(SUMMARY_PREFIX) and last[2].kind == "summary"
    assert result.message == "finished"
    assert result.usage.total_tokens >= summaries * 10


async def test_datastores_wire_a_search_tool_and_coerce_string_numbers() -> None:
    received: list[tuple[str, object, object]] = []

    class Reports:
        def retrieve(self, query: str, top_k: int = 5, min_score: float | None = None):
            received.append((query, top_k, min_score))
            return [{"id": "r1", "text": "CRM market is $80B", "score": 0.9, "source": "r.pdf"}]

    model = ScriptedModel(
        [
            tool_call("search_reports", query="crm size", top_k="3", min_score="0.5"),
            tool_call("search_reports", query="crm growth"),
            text("done"),
        ]
    )
    agent = create_deepagent(
        model=model,
        system_prompt="Research agent.",
        datastores={
            "reports": {"retriever": Reports(), "description": "analyst reports", "top_k": "6"}
        },
        grounding=False,
    )
    await agent.arun("how big is CRM")
    assert received == [("crm size", 3, 0.5), ("crm growth", 6, None)]
    assert "- search_reports: analyst reports" in model.calls[0].system_text
    assert "CRM market is $80B" in model.calls[1].messages[-1].content


async def test_events_stream_to_a_subscriber_inside_run_context() -> None:
    child = ScriptedModel([text("Acme charges $40 per seat.")])
    model = ScriptedModel(
        [
            tool_call("write_todos", todos=[{"content": "price Acme"}]),
            tool_call("task", subagent_type="competitor_analyst", description="Price Acme"),
            tool_call("write_file", path="acme.md", content="$40"),
            tool_call("read_file", path="acme.md"),
            tool_call("write_todos", todos=[{"content": "price Acme", "status": "completed"}]),
            text("Acme costs $40 per seat."),
        ]
    )
    agent = create_deepagent(
        model=model,
        enable_filesystem=True,
        enable_todos=True,
        subagents=[competitor_def(child)],
        grounding=False,
    )
    received: list[tuple[str, dict]] = []

    async def watch(rid: str) -> None:
        async for event in get_event_bus().subscribe(rid):
            received.append((event.event_type, event.data))

    async with run_context() as rid:
        watcher = asyncio.create_task(watch(rid))
        await asyncio.sleep(0)
        await agent.arun("price Acme")
        await get_event_bus().close_stream(rid)
        await watcher
    kinds = [
        kind + (f"[{data['agent']}]" if kind == "agent.terminate" else "")
        for kind, data in received
        if kind.startswith("deepagent.") or kind == "agent.terminate"
    ]
    assert kinds == [
        "deepagent.todo.added",
        "deepagent.subagent.spawned",
        "agent.terminate[competitor_analyst]",
        "deepagent.subagent.completed",
        "deepagent.fs.write",
        "deepagent.fs.read",
        "deepagent.todo.completed",
        "agent.terminate[deepagent]",
    ]
    data = dict(received)
    assert data["deepagent.subagent.spawned"]["subagent_type"] == "competitor_analyst"
    assert data["agent.terminate"]["final_message_preview"] == "Acme costs $40 per seat."


async def test_layer_state_travels_in_checkpoints_to_a_fresh_agent() -> None:
    def build(model: ScriptedModel) -> tuple:
        backend, todos = StateBackend(), TodoState()
        agent = create_deepagent(
            model=model, backend=backend, todo_state=todos, grounding=False, reflexion=False
        )
        return agent, backend, todos

    first_model = ScriptedModel(
        [
            tool_call("write_file", path="plan.md", content="step 1"),
            tool_call("write_todos", todos=[{"content": "step 1", "status": "in_progress"}]),
            RuntimeError("worker died"),
        ]
    )
    saved: list[LoopState] = []
    agent, _, _ = build(first_model)
    with pytest.raises(RuntimeError):
        await agent.arun("plan", on_checkpoint=lambda s: saved.append(s.model_copy(deep=True)))
    checkpoint = saved[-1]
    assert checkpoint.layers["filesystem"] == {"files": {"plan.md": "step 1"}}

    second_model = ScriptedModel([tool_call("read_file", path="plan.md"), text("resumed")])
    fresh, backend, todos = build(second_model)
    result = await fresh.arun("plan", checkpoint=checkpoint)
    assert result.message == "resumed"
    assert second_model.calls[1].messages[-1].content == "step 1"
    assert [t.status for t in todos.snapshot()] == ["in_progress"]
    assert backend.files == {"plan.md": "step 1"}
