"""Every activity that can run longer than a second or two heartbeats on a timer, and by default
every one of them has a heartbeat timeout of at most 20 s."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from sleuth.activities.agent import AgentActivities
from sleuth.activities.agent_models import StepInput
from sleuth.activities.decompose import DecomposeActivities
from sleuth.activities.decompose_models import DecideInput
from sleuth.activities.pipeline import PipelineActivities
from sleuth.activities.pipeline_models import ConditionInput, StageInput
from sleuth.activities.research import ResearchActivities
from sleuth.activities.research_models import NodeInput
from sleuth.activities.scan import ScanActivities
from sleuth.activities.scan_models import ListPageInput, RecordFailureInput, ResearchItemInput
from sleuth.agent import Agent
from sleuth.agent.state import EvidenceItem
from sleuth.apps.app import App
from sleuth.deepagent import SubAgentDef, create_deepagent
from sleuth.flows.composition import LoopAgent, SequentialPipeline
from sleuth.flows.decompose import Budget, DeepDecomposer
from sleuth.models.base import Message, ModelResponse, ToolCall
from sleuth.models.scripted import ModelCall, ScriptedModel, text
from sleuth.research import create_research_workflow
from sleuth.research.router import Node
from sleuth.runtime.artifacts import default_artifact_store, put_json
from sleuth.scans.knowledge import ItemRef, KnowledgeProvider
from sleuth.scans.sinks import RowRecord, SQLiteRowSink
from sleuth.tools import tool
from tests.helpers.fault_matrix import default_heartbeats

SLOW = 0.6
"""Each case's model, tool, provider or sink call takes this long: over three heartbeat timeouts."""
HEARTBEAT_TIMEOUT = 0.15


async def slow_text(call: ModelCall) -> ModelResponse:
    await asyncio.sleep(SLOW)
    return text("Acme shipped 40 thousand widgets.")


def slow_spec() -> Any:
    return create_research_workflow(model=ScriptedModel(responder=slow_text))


class SlowProvider(KnowledgeProvider):
    def list_items(self) -> list[ItemRef]:
        time.sleep(SLOW)
        return [ItemRef(id="acme")]

    def describe_item(self, ref: ItemRef) -> str:
        return f"What does {ref.id} ship?"


class SlowSink(SQLiteRowSink):
    def put(self, record: RowRecord) -> None:
        time.sleep(SLOW)
        super().put(record)


def research_case(node: str) -> Callable[[], Awaitable[Any]]:
    app = App()
    spec = slow_spec()
    app.research("r", spec)
    state = spec.initial_state("How many widgets did Acme ship?").model_copy(
        update={
            "evidence": [EvidenceItem(index=1, tool="lookup", output="Acme shipped 40 widgets")],
            "summary": "Acme shipped 40 thousand widgets.",
            "node": Node.SUMMARIZE,
        }
    )
    ref = put_json(default_artifact_store(), state)
    activities = ResearchActivities(app)
    return lambda: getattr(activities, node)(NodeInput(research="r", state_ref=ref))


def research_execute_case() -> Callable[[], Awaitable[Any]]:
    app = App()
    app.research("r", slow_spec())
    return lambda: ResearchActivities(app).execute(NodeInput(research="r", prompt="How many?"))


def agent_case(kind: str) -> Callable[[], Awaitable[Any]]:
    @tool
    async def lookup(topic: str) -> str:
        """Look a topic up."""
        await asyncio.sleep(SLOW)
        return f"{topic}: 12%"

    child = SubAgentDef(
        name="slow",
        description="slow",
        system_prompt="Answer.",
        model=ScriptedModel(responder=slow_text),
    )
    app = App()
    app.agent(
        "a",
        lambda: create_deepagent(
            model=ScriptedModel(responder=slow_text),
            tools=[lookup],
            subagents=[child],
            grounding=False,
        ),
    )
    activities = AgentActivities(app)
    if kind == "model":
        return lambda: activities.model_turn(StepInput(agent="a", kind="model", prompt="?"))
    agent = app.new_agent("a")
    assert isinstance(agent, Agent)
    state = agent.initial_state("?")
    call = (
        ToolCall(id="c1", name="lookup", arguments={"topic": "crm"})
        if kind == "tool"
        else ToolCall(id="c1", name="task", arguments={"subagent_type": "slow", "description": "?"})
    )
    state.messages.append(Message(role="assistant", content="", tool_calls=[call]))
    request = StepInput(
        agent="a", kind=kind, state_ref=put_json(default_artifact_store(), state), call_id="c1"
    )
    return lambda: (activities.tool if kind == "tool" else activities.subagent)(request)


def decide_case() -> Callable[[], Awaitable[Any]]:
    app = App()
    app.agent("deep", lambda: DeepDecomposer(ScriptedModel(responder=slow_text)))
    return lambda: DecomposeActivities(app).decide(
        DecideInput(agent="deep", task="t", allowance=Budget())
    )


def condition_case() -> Callable[[], Awaitable[Any]]:
    async def confident(output: str) -> bool:
        await asyncio.sleep(SLOW)
        return "confident" in output

    app = App()
    app.agent("writer", lambda: lambda task: task)
    app.pipeline("loop", LoopAgent("writer", condition=confident, max_loops=2))
    return lambda: PipelineActivities(app).condition(
        ConditionInput(pipeline="loop", output="confident")
    )


def agent_stage_case() -> Callable[[], Awaitable[Any]]:
    app = App()
    app.agent("writer", lambda: Agent(model=ScriptedModel(responder=slow_text)))
    app.pipeline("p", SequentialPipeline(agents=["writer"]))
    return lambda: PipelineActivities(app).stage(
        StageInput(pipeline="p", index=0, task="t", heartbeat_every_seconds=10.0)
    )


def scan_case(step: str) -> Callable[[], Awaitable[Any]]:
    app = App()
    app.provider("slow", SlowProvider())
    app.research(
        "r",
        create_research_workflow(
            model=ScriptedModel(responder=slow_text),
            judge_model=False,
            causal_inference=False,
            max_replans=0,
            max_regenerations=0,
        ),
    )
    app.sink("slow-rows", SlowSink())
    activities = ScanActivities(app)
    item = ItemRef(id="acme")
    if step == "list_page":
        return lambda: activities.list_page(
            ListPageInput(
                provider="slow", research="r", scan_id="s", sink=None, cursor=None, page_size=10
            )
        )
    if step == "research_item":
        return lambda: activities.research_item(
            ResearchItemInput(provider="slow", research="r", scan_id="s", sink=None, item=item)
        )
    return lambda: activities.record_failure(
        RecordFailureInput(scan_id="s", sink="slow-rows", item=item, error="boom")
    )


CASES: dict[str, Callable[[], Callable[[], Awaitable[Any]]]] = {
    "research.execute": research_execute_case,
    **{
        f"research.{node}": (lambda node=node: research_case(node))
        for node in (
            "plan",
            "causal_inference",
            "summarize",
            "grounding_eval",
            "regenerate",
            "replan",
        )
    },
    "agent.model_turn": lambda: agent_case("model"),
    "agent.tool": lambda: agent_case("tool"),
    "agent.subagent": lambda: agent_case("subagent"),
    "decompose.decide": decide_case,
    "pipeline.stage (an agent)": agent_stage_case,
    "pipeline.condition": condition_case,
    "scan.list_page": lambda: scan_case("list_page"),
    "scan.research_item": lambda: scan_case("research_item"),
    "scan.record_failure": lambda: scan_case("record_failure"),
}


@pytest.mark.parametrize("activity_name", sorted(CASES))
async def test_a_slow_call_inside_the_activity_does_not_stop_its_heartbeats(
    activity_name: str,
) -> None:
    call = CASES[activity_name]()
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=HEARTBEAT_TIMEOUT))
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *args: beats.append(args)

    async def run() -> Any:
        return await call()

    await env.run(run)
    # Without a timer nothing beats during the slow call: the server would declare the attempt
    # dead after 0.15 s and retry it, again and again.
    assert len(beats) >= 3, f"{activity_name} heartbeated {len(beats)} times"


def test_every_long_activity_defaults_to_a_heartbeat_timeout_of_at_most_20_seconds() -> None:
    defaults = default_heartbeats()
    assert set(defaults) >= {name.split(" ")[0] for name in CASES} | {
        "decompose.solve",
        "decompose.synthesize",
    }
    too_long = {name: seconds for name, seconds in defaults.items() if not 0 < seconds <= 20}
    assert not too_long


def test_the_crash_recovery_page_shows_the_heartbeat_defaults() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "crash-recovery.md").read_text()
    table = readme.split("**Heartbeat defaults.**", 1)[1].split("\n\n", 2)[1]
    documented: dict[str, str] = {}
    for row in table.splitlines()[2:]:
        activities, _, heartbeat, _ = (cell.strip() for cell in row.strip("|").split("|"))
        documented.update({name: heartbeat for name in re.findall(r"`([a-z_.]+)`", activities)})
    assert documented == {name: f"{seconds:g} s" for name, seconds in default_heartbeats().items()}
