"""Replay committed `ResearchWorkflow` histories: a non-deterministic workflow change fails here.

`research_replan.json` was recorded before the plan node existed; it replays because the workflow
runs `research.plan` only behind its `research-plan` patch marker. `research_plan.json` is a run
with the plan node: three sub-questions, one execute step each, a replan for the uncovered one.
"""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from workflows.research import ResearchWorkflow

HISTORIES = Path(__file__).parent / "histories"


def scheduled(raw: str) -> list[str]:
    return [
        event["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for event in json.loads(raw)["events"]
        if "activityTaskScheduledEventAttributes" in event
    ]


async def replay(raw: str, workflow_id: str) -> None:
    replayer = Replayer(workflows=[ResearchWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(WorkflowHistory.from_json(workflow_id, raw))
    assert result.replay_failure is None


async def test_replays_committed_history_from_before_the_plan_node() -> None:
    raw = (HISTORIES / "research_replan.json").read_text()
    activity_types = scheduled(raw)
    assert "research.replan" in activity_types and "research.regenerate" in activity_types
    assert "research.plan" not in activity_types
    assert activity_types[-1] == "research.finish"
    await replay(raw, "research-replay-fixture")


async def test_replays_committed_history_with_the_plan_node() -> None:
    raw = (HISTORIES / "research_plan.json").read_text()
    activity_types = scheduled(raw)
    assert activity_types[:4] == ["research.plan", *["research.execute"] * 3]
    assert activity_types.count("research.execute") == 4 and "research.replan" in activity_types
    assert activity_types[-1] == "research.finish"
    await replay(raw, "research-plan-replay-fixture")
