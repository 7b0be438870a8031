"""Replay a committed `AgentWorkflow` history: a non-deterministic workflow change fails here."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from workflows.agent import AgentWorkflow

HISTORY = Path(__file__).parent / "histories" / "agent_market.json"


async def test_replays_committed_history() -> None:
    raw = HISTORY.read_text()
    activity_types = [
        event["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for event in json.loads(raw)["events"]
        if "activityTaskScheduledEventAttributes" in event
    ]
    assert {"agent.model_turn", "agent.tool", "agent.subagent"} <= set(activity_types)
    replayer = Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(WorkflowHistory.from_json("agent-replay-fixture", raw))
    assert result.replay_failure is None
