"""Replay committed DecomposeWorkflow and PipelineWorkflow histories (tests/flows/histories/
make_decompose_history.py): a non-deterministic workflow change fails here, not in production."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from sleuth.workflows.decompose import DecomposeWorkflow
from sleuth.workflows.pipeline import PipelineWorkflow

HISTORIES = Path(__file__).parent / "histories"


def scheduled(raw: str) -> list[str]:
    events = json.loads(raw)["events"]
    activities = [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in events
        if "activityTaskScheduledEventAttributes" in e
    ]
    children = [
        "child:" + e["startChildWorkflowExecutionInitiatedEventAttributes"]["workflowType"]["name"]
        for e in events
        if "startChildWorkflowExecutionInitiatedEventAttributes" in e
    ]
    return activities + children


@pytest.mark.parametrize(
    ("file", "workflow_id", "workflow", "expected"),
    [
        (
            "decompose_tree.json",
            "decompose-replay-fixture",
            DecomposeWorkflow,
            [
                "decompose.settings",
                "decompose.decide",
                "decompose.synthesize",
                "child:DecomposeWorkflow",
                "child:DecomposeWorkflow",
            ],
        ),
        (
            "pipeline_report.json",
            "pipeline-replay-fixture",
            PipelineWorkflow,
            ["pipeline.describe", "pipeline.stage", "pipeline.stage"],
        ),
    ],
)
async def test_replays_committed_history(
    file: str, workflow_id: str, workflow: type, expected: list[str]
) -> None:
    raw = (HISTORIES / file).read_text()
    assert scheduled(raw) == expected
    replayer = Replayer(workflows=[workflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(WorkflowHistory.from_json(workflow_id, raw))
    assert result.replay_failure is None
