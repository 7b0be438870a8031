"""Replay a committed `AgentWorkflow` history: a non-deterministic workflow change fails here."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from sleuth.workflows.agent import AgentWorkflow

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


APPROVAL_HISTORY = Path(__file__).parent / "histories" / "agent_approval.json"


async def test_replays_a_run_whose_tool_calls_waited_for_approval() -> None:
    """Two calls of an approval-gated tool, one approved and one denied, with search attributes
    (tests/agent/histories/make_agent_approval_history.py)."""
    raw = APPROVAL_HISTORY.read_text()
    kinds = [event["eventType"] for event in json.loads(raw)["events"]]
    assert kinds.count("EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED") == 2
    assert "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES" in kinds
    replayer = Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(
        WorkflowHistory.from_json("agent-approval-replay-fixture", raw)
    )
    assert result.replay_failure is None
