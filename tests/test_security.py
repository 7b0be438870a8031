"""A workflow input can never take over a worker: the probes of issue #14, one test each.

Who may start a workflow is whoever can reach the Temporal frontend (the dev server has no
authentication), so every input is untrusted: it names things the worker was configured with and
never chooses a path, URL or host; its numbers are bounded; a bad one fails the run at once.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from activities.errors import unwrap_cause
from sleuth.app import App
from workers.worker import build_worker

# -- bad inputs fail the run at once ---------------------------------------------------------

BAD_INPUTS: list[tuple[str, dict[str, Any], str]] = [
    # A scan's input chose where the worker writes: a shell start-up file, another store's
    # database, a relative path, any host.
    ("KnowledgeScanWorkflow", {"provider": "p", "sink": "jsonl:///root/.bashrc"}, "sink"),
    (
        "KnowledgeScanWorkflow",
        {"provider": "p", "sink": "sqlite:///root/.sleuth/stores/python-docs.sqlite"},
        "sink",
    ),
    ("KnowledgeScanWorkflow", {"provider": "p", "sink": "sqlite://relative/x.db"}, "sink"),
    ("KnowledgeScanWorkflow", {"provider": "p", "sink": "opensearch://evil:9200/i"}, "sink"),
    ("KnowledgeScanWorkflow", {"provider": "p", "scan_id": "$(touch /tmp/pwned)"}, "scan id"),
    # Bad settings hung runs forever (the workflow task was retried instead of the run failing).
    (
        "KnowledgeScanWorkflow",
        {"provider": "p", "settings": {"item_timeout_seconds": 0}},
        "item_timeout_seconds",
    ),
    (
        "KnowledgeScanWorkflow",
        {"provider": "p", "settings": {"item_max_attempts": -1}},
        "item_max_attempts",
    ),
    (
        "AgentWorkflow",
        {"agent": "a", "prompt": "p", "steps": {"model": {"heartbeat_seconds": -3}}},
        "heartbeat_seconds",
    ),
    (
        "AgentWorkflow",
        {"agent": "a", "prompt": "p", "steps": {"tool": {"retry": {"maximum_attempts": -1}}}},
        "maximum_attempts",
    ),
    (
        "AgentWorkflow",
        {"agent": "a", "prompt": "p", "steps": {"tool": {"retry": {"backoff_coefficient": 0.5}}}},
        "backoff_coefficient",
    ),
    (
        "AgentWorkflow",
        {"agent": "a", "prompt": "p", "steps": {"model": {"start_to_close_seconds": 0}}},
        "start_to_close_seconds",
    ),
    ("DecomposeWorkflow", {"agent": "a", "task": "t", "max_depth": -1}, "max_depth"),
    ("DecomposeWorkflow", {"agent": "a", "task": "t", "max_fan_out": -2}, "max_fan_out"),
    (
        "DecomposeWorkflow",
        {"agent": "a", "task": "t", "config": {"decide": {"start_to_close_seconds": 0}}},
        "start_to_close_seconds",
    ),
    (
        "DecomposeWorkflow",
        {"agent": "a", "task": "t", "budget": {"max_tool_calls": -5}},
        "max_tool_calls",
    ),
    (
        "PipelineWorkflow",
        {"pipeline": "p", "task": "t", "config": {"stage": {"start_to_close_seconds": 0}}},
        "start_to_close_seconds",
    ),
    (
        "PipelineWorkflow",
        {"pipeline": "p", "task": "t", "config": {"heartbeat_every_seconds": -1}},
        "heartbeat_every_seconds",
    ),
    # The research node settings share the same ActivitySettings model.
    (
        "ResearchWorkflow",
        {"prompt": "p", "nodes": {"execute": {"start_to_close_seconds": -1}}},
        "start_to_close_seconds",
    ),
]


@pytest.mark.parametrize(
    ("workflow_type", "payload", "named"),
    BAD_INPUTS,
    ids=[f"{w}-{named}-{i}" for i, (w, _, named) in enumerate(BAD_INPUTS)],
)
async def test_a_bad_input_fails_the_run_at_once_naming_what_is_wrong(
    dev_env: WorkflowEnvironment, workflow_type: str, payload: dict[str, Any], named: str
) -> None:
    task_queue = str(uuid.uuid4())
    # A workflow id is user input too: the scan-id probe relies on the default (the workflow id).
    workflow_id = payload.pop("scan_id") if "scan_id" in payload else f"bad-{uuid.uuid4()}"
    # An empty App: the run must fail on the input alone, before any name is looked up.
    async with build_worker(dev_env.client, App(), task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            workflow_type, payload, id=workflow_id, task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), timeout=60)
    message = str(unwrap_cause(failure.value))
    assert named in message
    assert "unknown" not in message, "the input must be refused before any name is looked up"
    # Exactly one workflow task ran: it failed the run instead of being retried.
    history = await handle.fetch_history()
    assert sum(1 for e in history.events if e.HasField("workflow_task_failed_event_attributes")) == 0
