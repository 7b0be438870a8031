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


REVIEW_HISTORY = Path(__file__).parent / "histories" / "research_review.json"


async def test_replays_a_reviewed_run_with_search_attributes() -> None:
    """A run that paused four times (a plan and a summary, each revised then approved), with the
    search-attribute lookup and its upserts (tests/histories/make_research_review_history.py)."""
    raw = REVIEW_HISTORY.read_text()
    kinds = [event["eventType"] for event in json.loads(raw)["events"]]
    assert kinds.count("EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED") == 4
    assert "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES" in kinds
    assert kinds.count("EVENT_TYPE_MARKER_RECORDED") == 2  # the patch and the local activity
    replayer = Replayer(workflows=[ResearchWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(
        WorkflowHistory.from_json("research-review-replay-fixture", raw)
    )
    assert result.replay_failure is None
