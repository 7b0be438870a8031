"""One App with every workflow type, for the fault matrix (`--app tests.helpers.apps.fault_app:app`).

Every run carries a cell name in its prompt or task (`[cell:research-summarize-mid]`). The cell
says where the run stops so the harness can kill its worker there (`CELLS`):

- `model:<where>`: inside that model call (a research node, the agent's first turn, a decision);
- `tool:<topic>`: inside that tool call, before it returns;
- `gate:<topic>`: that tool call waits at a gate; once the harness opens it, the tool returns,
  and the next model call of the cell waits instead (so the step is still running at the kill);
- `list`, `sink`, `condition`: inside a provider's listing, a sink write, a loop condition.

A cell waits only until the harness creates `release` in `$SLEUTH_FAULT_DIR`. Markers there tell
the harness what is where: `arrived/<cell>` (with the activity's identity) once a cell stands at
its point, and `ledger.jsonl`, one line per completed tool call, written by the tool as it
returns. All models are deterministic functions of the conversation, so a restarted worker goes
on exactly as the killed one would have.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from temporalio import activity

from sleuth.agent import Agent
from sleuth.apps.app import App
from sleuth.deepagent import SubAgentDef, create_deepagent
from sleuth.flows.composition import LoopAgent, SequentialPipeline
from sleuth.flows.decompose import DeepDecomposer
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import create_research_workflow, node_of_request
from sleuth.scans.knowledge import ItemRef, KnowledgeProvider
from sleuth.scans.sinks import RowRecord, SQLiteRowSink
from sleuth.tools import tool

FAULT_DIR_ENV = "SLEUTH_FAULT_DIR"
FACT = "Acme shipped 40 thousand widgets in 2024 according to its annual report."
POLL_SECONDS = 0.02
_CELL = re.compile(r"\[cell:([a-z0-9-]+)\]")

Workflow = Literal["research", "agent", "scan", "decompose", "pipeline"]


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: a workflow type, the step it is killed in, and how."""

    name: str
    workflow: Workflow
    activity: str
    """The activity type running at the kill."""
    kill: Literal["mid-step", "after-tool"]
    hold: str
    """Where the run stops (see the module docstring)."""
    corrupt: bool = False
    """After the kill the harness damages the step's newest checkpoint (a run must survive it)."""


def _cells() -> list[Cell]:
    cells = [
        Cell("research-execute-mid", "research", "research.execute", "mid-step", "tool:r1q2"),
        Cell("research-execute-after", "research", "research.execute", "after-tool", "gate:r1q1"),
        Cell(
            "research-execute-corrupt",
            "research",
            "research.execute",
            "after-tool",
            "gate:r1q2",
            corrupt=True,
        ),
    ]
    for node in ("plan", "causal_inference", "summarize", "grounding_eval", "regenerate", "replan"):
        name = f"research-{node.replace('_', '-')}-mid"
        cells.append(Cell(name, "research", f"research.{node}", "mid-step", f"model:{node}"))
    return [
        *cells,
        Cell("agent-model-mid", "agent", "agent.model_turn", "mid-step", "model:parent-1"),
        Cell("agent-tool-mid", "agent", "agent.tool", "mid-step", "tool:p1"),
        Cell("agent-tool-after", "agent", "agent.tool", "after-tool", "gate:p1"),
        Cell("agent-subagent-mid", "agent", "agent.subagent", "mid-step", "tool:c2"),
        Cell("agent-subagent-after", "agent", "agent.subagent", "after-tool", "gate:c1"),
        Cell("scan-list-mid", "scan", "scan.list_page", "mid-step", "list"),
        Cell("scan-item-mid", "scan", "scan.research_item", "mid-step", "tool:r1q2"),
        Cell("scan-item-after", "scan", "scan.research_item", "after-tool", "gate:r1q1"),
        Cell("scan-record-mid", "scan", "scan.record_failure", "mid-step", "sink"),
        Cell("decompose-decide-mid", "decompose", "decompose.decide", "mid-step", "model:decide"),
        Cell("decompose-solve-mid", "decompose", "decompose.solve", "mid-step", "tool:part-1q1"),
        Cell(
            "decompose-solve-after", "decompose", "decompose.solve", "after-tool", "gate:part-1q1"
        ),
        Cell(
            "decompose-synthesize-mid",
            "decompose",
            "decompose.synthesize",
            "mid-step",
            "tool:synthq1",
        ),
        Cell(
            "decompose-synthesize-after",
            "decompose",
            "decompose.synthesize",
            "after-tool",
            "gate:synthq1",
        ),
        Cell("pipeline-stage-mid", "pipeline", "pipeline.stage", "mid-step", "tool:w1"),
        Cell("pipeline-stage-after", "pipeline", "pipeline.stage", "after-tool", "gate:w1"),
        Cell("pipeline-condition-mid", "pipeline", "pipeline.condition", "mid-step", "condition"),
    ]


CELLS: dict[str, Cell] = {cell.name: cell for cell in _cells()}


# -- where a cell stops -----------------------------------------------------------------------


def fault_dir() -> Path:
    return Path(os.environ[FAULT_DIR_ENV])


def released() -> bool:
    return (fault_dir() / "release").exists()


def cell_of(text: str) -> Cell | None:
    match = _CELL.search(text)
    return CELLS.get(match.group(1)) if match else None


def cell_in(call: ModelCall) -> Cell | None:
    return next((c for m in call.messages if (c := cell_of(m.content))), None)


def _identity() -> dict[str, Any]:
    """Which activity attempt is running here (a tool runs in the activity's context)."""
    try:
        info = activity.info()
    except RuntimeError:
        return {}
    return {
        "activity_type": info.activity_type,
        "activity_id": info.activity_id,
        "attempt": info.attempt,
        "workflow_id": info.workflow_id,
        "run_id": info.workflow_run_id,
        "namespace": info.workflow_namespace,
    }


def _mark(kind: str, cell: Cell) -> None:
    folder = fault_dir() / kind
    folder.mkdir(exist_ok=True)
    path = folder / cell.name
    if not path.exists():
        # Written whole, then renamed: the test polls these files and must never read half of one.
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps({**_identity(), "at": time.time()}))
        partial.replace(path)


def _stops(cell: Cell | None, point: str) -> bool:
    return cell is not None and cell.hold == point and not released()


async def reach(cell: Cell | None, point: str) -> None:
    """Stop at `point` until released, if it is the cell's stop (async code)."""
    if _stops(cell, point):
        assert cell is not None
        _mark("arrived", cell)
        while not released():
            await asyncio.sleep(POLL_SECONDS)


def reach_blocking(cell: Cell | None, point: str) -> None:
    """`reach` for code that runs in a thread (providers, sinks)."""
    if _stops(cell, point):
        assert cell is not None
        _mark("arrived", cell)
        while not released():
            time.sleep(POLL_SECONDS)


async def after_tool(cell: Cell | None) -> None:
    """A model call of a cell whose gated tool has returned waits until the release."""
    if cell is not None and (fault_dir() / "after" / cell.name).exists():
        while not released():
            await asyncio.sleep(POLL_SECONDS)


# -- the one tool every workflow uses ---------------------------------------------------------


@tool
async def lookup(topic: str) -> str:
    """Look a topic up in the annual report."""
    cell = cell_of(f"[cell:{topic.split('/')[0]}]")
    point = topic.split("/")[-1]
    await reach(cell, f"tool:{point}")
    if _stops(cell, f"gate:{point}"):
        assert cell is not None
        _mark("arrived", cell)
        while not (fault_dir() / "gate").exists() and not released():
            await asyncio.sleep(POLL_SECONDS)
    entry = {"topic": topic, "returned_at": time.time(), **_identity()}
    with open(fault_dir() / "ledger.jsonl", "a", encoding="utf-8") as ledger:
        ledger.write(json.dumps(entry) + "\n")
    if cell is not None and cell.hold == f"gate:{point}":
        _mark("after", cell)
    return f"[cell:{topic.split('/')[0]}] {topic}: {FACT}"


def _topic(cell: Cell | None, point: str) -> str:
    return f"{cell.name if cell else 'none'}/{point}"


def _tool_results(call: ModelCall) -> int:
    return sum(1 for m in call.messages if m.role == "tool")


# -- research and scans -----------------------------------------------------------------------


async def research_model(call: ModelCall) -> ModelResponse:
    cell = cell_in(call)
    node = node_of_request(call.messages)
    await after_tool(cell)
    await reach(cell, f"model:{node}")
    if node == "execute":
        if cell is not None and cell.hold == "sink":
            raise RuntimeError("this item always fails (the scan records the failure)")
        round_ = 2 if "Follow-up research" in call.messages[1].content else 1
        done = _tool_results(call)
        if done < 2:
            return tool_call("lookup", topic=_topic(cell, f"r{round_}q{done + 1}"))
        return text(FACT)
    if node == "grounding_eval":
        # Runs meant to reach regenerate or replan are grounded only after a second round.
        loops = cell is not None and cell.hold in ("model:regenerate", "model:replan")
        supported = not loops or "r2q" in call.messages[-1].content
        return text("Yes" if supported else "No")
    return text(FACT)


class CellProvider(KnowledgeProvider):
    """One item whose question names the cell."""

    def __init__(self, cell: Cell):
        self.cell = cell

    def list_items(self) -> list[ItemRef]:
        reach_blocking(self.cell, "list")
        return [ItemRef(id=self.cell.name, label=self.cell.name)]

    def describe_item(self, ref: ItemRef) -> str:
        return f"[cell:{ref.id}] How many widgets did Acme ship?"


class CellSink(SQLiteRowSink):
    """Rows in `$SLEUTH_FAULT_DIR/rows.sqlite`; writing a failure stops the `sink` cell."""

    def __init__(self) -> None:
        self._ready = False

    def _open(self) -> None:
        if not self._ready:
            super().__init__(fault_dir() / "rows.sqlite")
            self._ready = True

    @property
    def location(self) -> str:
        self._open()
        return super().location

    def put(self, record: RowRecord) -> None:
        self._open()
        if record.status == "failed":
            reach_blocking(CELLS.get(record.item_id), "sink")
        super().put(record)

    def done_ids(self, scan_id: str, item_ids: Any) -> set[str]:
        self._open()
        return super().done_ids(scan_id, item_ids)

    def records(self, scan_id: str) -> list[RowRecord]:
        self._open()
        return super().records(scan_id)


# -- agents -----------------------------------------------------------------------------------


async def parent_model(call: ModelCall) -> ModelResponse:
    cell = cell_in(call)
    turn = 1 + sum(1 for m in call.messages if m.role == "assistant")
    await after_tool(cell)
    await reach(cell, f"model:parent-{turn}")
    if turn == 1:
        return tool_call("lookup", topic=_topic(cell, "p1"))
    if turn == 2:
        name = cell.name if cell else "none"
        return tool_call("task", subagent_type="analyst", description=f"[cell:{name}] Dig deeper")
    return text(FACT)


async def child_model(call: ModelCall) -> ModelResponse:
    cell = cell_in(call)
    await after_tool(cell)
    done = _tool_results(call)
    if done < 2:
        return tool_call("lookup", topic=_topic(cell, f"c{done + 1}"))
    return text(FACT)


def build_agent() -> Agent:
    analyst = SubAgentDef(
        name="analyst",
        description="Digs deeper into one question.",
        system_prompt="Look things up, then answer.",
        tools=[lookup],
        model=ScriptedModel(responder=child_model, name="child"),
    )
    return create_deepagent(
        model=ScriptedModel(responder=parent_model, name="parent"),
        tools=[lookup],
        system_prompt="You research markets.",
        subagents=[analyst],
        grounding=False,
        name="fault-agent",
    )


# -- decomposition ----------------------------------------------------------------------------


async def deep_model(call: ModelCall) -> ModelResponse:
    cell = cell_in(call)
    user = next(m.content for m in call.messages if m.role == "user")
    await after_tool(cell)
    name = cell.name if cell else "none"
    if call.system_text.startswith("Decide how to handle"):
        await reach(cell, "model:decide")
        subtasks = [f"[cell:{name}] part-1", f"[cell:{name}] part-2"]
        return text(json.dumps({"direct": False, "subtasks": subtasks}))
    part = "synth" if "\nSubtask results:\n" in user else user.rsplit(" ", 1)[-1]
    if _tool_results(call) == 0:
        return tool_call("lookup", topic=_topic(cell, f"{part}q1"))
    return text(f"{part}: {FACT}")


# -- pipelines --------------------------------------------------------------------------------


async def writer_model(call: ModelCall) -> ModelResponse:
    cell = cell_in(call)
    await after_tool(cell)
    if _tool_results(call) == 0:
        return tool_call("lookup", topic=_topic(cell, "w1"))
    return text(f"[cell:{cell.name if cell else 'none'}] Report: {FACT}")


async def confident(output: str) -> bool:
    await reach(cell_of(output), "condition")
    return True


def _writer() -> Agent:
    return Agent(model=ScriptedModel(responder=writer_model), tools=[lookup], name="fault-writer")


def build_app() -> App:
    app = App(name="fault-matrix")
    app.research(
        "fault-research",
        create_research_workflow(
            stop_when_covered=False,  # several tool calls in one execute step
            model=ScriptedModel(responder=research_model),
            tools=[lookup],
            regenerate="rewrite",  # a model call, so the regenerate cell can stop inside it
            max_replans=1,
            max_regenerations=1,
        ),
    )
    app.research(
        "fault-scan",
        create_research_workflow(
            stop_when_covered=False,  # several tool calls in one execute step
            model=ScriptedModel(responder=research_model),
            tools=[lookup],
            judge_model=False,
            causal_inference=False,
            max_replans=0,
            max_regenerations=0,
        ),
    )
    app.sink("fault-rows", CellSink())
    for cell in CELLS.values():
        if cell.workflow == "scan":
            app.provider(cell.name, CellProvider(cell))
    app.agent("fault-agent", build_agent)
    app.agent(
        "fault-deep",
        lambda: DeepDecomposer(ScriptedModel(responder=deep_model), tools=[lookup], max_depth=1),
    )
    writer: Callable[[], Agent] = _writer
    app.agent("fault-writer", writer)
    app.pipeline("fault-stages", SequentialPipeline(agents=["fault-writer"], name="fault-stages"))
    app.pipeline(
        "fault-loop", LoopAgent("fault-writer", condition=confident, max_loops=2, name="fault-loop")
    )
    return app


app = build_app()
