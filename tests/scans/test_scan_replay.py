"""Replay committed KnowledgeScanWorkflow histories: a non-deterministic change fails here.

Recorded by `tests/scans/histories/make_scan_history.py`: the first run of a scan (ends in
continue-as-new) and its last run (starts from the carried cursor and counters).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from sleuth.workflows.scan import KnowledgeScanWorkflow

HISTORIES = Path(__file__).parent / "histories"


def activity_types(raw: str) -> set[str]:
    return {
        event["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for event in json.loads(raw)["events"]
        if "activityTaskScheduledEventAttributes" in event
    }


def test_the_histories_cover_listing_items_failures_and_continue_as_new():
    first = (HISTORIES / "scan_first_run.json").read_text()
    last = (HISTORIES / "scan_last_run.json").read_text()
    assert (
        json.loads(first)["events"][-1]["eventType"]
        == "EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW"
    )
    assert json.loads(last)["events"][-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
    assert activity_types(first) | activity_types(last) == {
        "scan.list_page",
        "scan.research_item",
        "scan.record_failure",
    }


@pytest.mark.parametrize("name", ["scan_first_run.json", "scan_last_run.json"])
async def test_replays_committed_history(name: str) -> None:
    replayer = Replayer(workflows=[KnowledgeScanWorkflow], data_converter=pydantic_data_converter)
    history = WorkflowHistory.from_json("scan-replay", (HISTORIES / name).read_text())
    result = await replayer.replay_workflow(history)
    assert result.replay_failure is None
