"""Two workers on two data directories share only the Temporal server and an S3 bucket: worker A
is killed inside `execute` right after a tool call, worker B resumes from A's checkpoint in S3,
and no tool call runs twice."""

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
from tests.helpers.s3_server import S3Server
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import pending_journal, start_sleuth_worker, stop, wait_for

pytestmark = pytest.mark.slow
APP = "tests.helpers.apps.research_app:app"


async def checkpointed_evidence(handle: WorkflowHandle) -> int:
    """Evidence items in the execute loop's checkpoint, read from the S3 store (0 before one)."""
    journal = await pending_journal(handle, "research.execute")
    return len(journal["loop"]["evidence"]) if journal else 0


async def test_a_second_machine_resumes_from_the_checkpoint_in_s3(
    dev_env: WorkflowEnvironment, tmp_path: Path, s3_artifacts: str, s3_server: S3Server
) -> None:
    # The tool log and the hold file only observe and pace the run; Sleuth's own state is in S3.
    tool_log, hold = tmp_path / "tool-calls.txt", tmp_path / "hold"
    tool_log.touch()
    hold.touch()
    common = {
        "RESEARCH_TOOL_LOG": str(tool_log),
        "RESEARCH_HOLD": str(hold),
        "SLEUTH_STICKY_QUEUE_TIMEOUT_SECONDS": str(scaled(1)),
    }
    homes = {name: tmp_path / f"machine-{name}" for name in ("a", "b")}
    address = dev_env.client.service_client.config.target_host
    task_queue = str(uuid.uuid4())
    first = start_sleuth_worker(
        APP, address, task_queue, env={**common, "SLEUTH_HOME": str(homes["a"])}
    )
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
            id=f"fleet-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        completed = HOLD_AT - 1

        async def blocked_with_checkpoint() -> bool:
            lines = tool_log.read_text().splitlines()
            return len(lines) == completed and await checkpointed_evidence(handle) == completed

        await wait_for(blocked_with_checkpoint, f"{completed} tool calls and their checkpoint")
        stop(first, signal.SIGKILL)
        hold.unlink()
        second = start_sleuth_worker(
            APP, address, task_queue, env={**common, "SLEUTH_HOME": str(homes["b"])}
        )
        outcome: ResearchOutcome = await asyncio.wait_for(handle.result(), timeout=scaled(120))
    finally:
        stop(first, signal.SIGKILL)
        stop(second)
    calls = tool_log.read_text().splitlines()
    assert calls == [f"item-{n}" for n in range(1, TOOL_CALLS + 1)], "0 repeated tool calls"
    assert outcome.final_state["evidence_count"] == TOOL_CALLS
    for home in homes.values():
        local = home / "artifacts"
        assert not local.exists() or not any(local.iterdir()), f"{local} holds run state"
    bucket, _, prefix = s3_artifacts.removeprefix("s3://").partition("/")
    listing = s3_server.client().list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/pointers/")
    assert listing.get("KeyCount", 0) > 0, "the checkpoint journals are in the bucket"
