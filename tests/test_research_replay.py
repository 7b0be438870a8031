"""Replay a committed `ResearchWorkflow` history: a non-deterministic workflow change fails here."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from workflows.research import ResearchWorkflow

HISTORY = Path(__file__).parent / "histories" / "research_replan.json"


async def test_replays_committed_history() -> None:
    raw = HISTORY.read_text()
    activity_types = [
        event["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for event in json.loads(raw)["events"]
        if "activityTaskScheduledEventAttributes" in event
    ]
    assert "research.replan" in activity_types and "research.regenerate" in activity_types
    assert activity_types[-1] == "research.finish"
    replayer = Replayer(workflows=[ResearchWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(
        WorkflowHistory.from_json("research-replay-fixture", raw)
    )
    assert result.replay_failure is None
