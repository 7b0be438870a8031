"""A worker killed mid-execute: the retried attempt resumes from the checkpoint in its journal."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.research_models import ResearchOutcome, ResearchRequest
from sleuth.workflows.research import ResearchWorkflow
from tests.helpers.apps.research_app import HOLD_AT, TOOL_CALLS
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import pending_journal, start_sleuth_worker, stop, wait_for

pytestmark = pytest.mark.slow
APP = "tests.helpers.apps.research_app:app"


async def checkpointed_evidence(handle: WorkflowHandle) -> int:
    """Evidence items in the execute loop's durable checkpoint (0 before there is one)."""
    journal = await pending_journal(handle, "research.execute")
    return len(journal["loop"]["evidence"]) if journal else 0


async def test_killed_worker_resumes_without_repeating_tool_calls(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    tool_log, hold = tmp_path / "tool-calls.txt", tmp_path / "hold"
    tool_log.touch()
    hold.touch()
    env = {
        "RESEARCH_TOOL_LOG": str(tool_log),
        "RESEARCH_HOLD": str(hold),
        # The run's next workflow task waits this long for the killed worker's sticky queue.
        "SLEUTH_STICKY_QUEUE_TIMEOUT_SECONDS": str(scaled(1)),
    }
    address = dev_env.client.service_client.config.target_host
    task_queue = str(uuid.uuid4())
    first = start_sleuth_worker(APP, address, task_queue, env=env)
    second = None
    try:
        handle = await dev_env.client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(
                prompt="How many widgets did Acme ship?",
                research="crash",
                nodes={
                    "execute": {"heartbeat_seconds": 2, "retry": {"initial_interval_seconds": 0.1}}
                },
            ),
            id=f"research-crash-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        completed = HOLD_AT - 1

        async def blocked_with_checkpoint() -> bool:
            lines = tool_log.read_text().splitlines()
            return len(lines) == completed and await checkpointed_evidence(handle) == completed

        await wait_for(blocked_with_checkpoint, f"{completed} tool calls and their checkpoint")
        stop(first, signal.SIGKILL)
        hold.unlink()
        second = start_sleuth_worker(APP, address, task_queue, env=env)
        outcome: ResearchOutcome = await asyncio.wait_for(handle.result(), timeout=scaled(120))
    finally:
        stop(first, signal.SIGKILL)
        stop(second)
    calls = tool_log.read_text().splitlines()
    assert calls == [f"item-{n}" for n in range(1, TOOL_CALLS + 1)]
    state = outcome.final_state
    assert state["evidence_count"] == TOOL_CALLS and state["end_reason"] == "grounded"
