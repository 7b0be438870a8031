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

from sleuth.workflows.research import ResearchWorkflow

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


REVIEW_HISTORY = Path(__file__).parent / "histories" / "research_review.json"


async def test_replays_a_reviewed_run_with_search_attributes() -> None:
    """A run that paused four times (a plan and a summary, each revised then approved), with the
    search-attribute lookup and its upserts (tests/research/histories/make_research_review_history.py)."""
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


FOLLOWED_HISTORY = Path(__file__).parent / "histories" / "research_followed.json"


async def test_replays_a_followed_reviewed_run() -> None:
    """A run whose live-event follower polled from the start, so a poll Update was accepted while
    the search-attribute lookup (an activity) was in flight, then a summary review was approved
    (tests/research/histories/make_research_followed_history.py). With the lookup as a local activity,
    such a history could fail to replay: the lookup's result and the Update reached the workflow
    in another order on replay."""
    raw = FOLLOWED_HISTORY.read_text()
    events = json.loads(raw)["events"]
    scheduled = [
        event["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for event in events
        if "activityTaskScheduledEventAttributes" in event
    ]
    assert scheduled[:2] == ["sleuth.search_attributes", "research.execute"]
    updates = [
        event["workflowExecutionUpdateAcceptedEventAttributes"]["acceptedRequest"]["input"]["name"]
        for event in events
        if "workflowExecutionUpdateAcceptedEventAttributes" in event
    ]
    assert "review" in updates and "__temporal_workflow_stream_poll" in updates
    first_update = next(
        i
        for i, event in enumerate(events)
        if "workflowExecutionUpdateAcceptedEventAttributes" in event
    )
    lookup_done = next(
        i for i, event in enumerate(events) if "activityTaskCompletedEventAttributes" in event
    )
    assert first_update < lookup_done, "the fixture must hold an Update accepted during the lookup"
    replayer = Replayer(workflows=[ResearchWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(
        WorkflowHistory.from_json("research-followed-replay-fixture", raw)
    )
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
