"""A worker process killed inside a subagent: only the subagent is redone, the run completes.

Real dev server, `sleuth worker` as a separate process serving `tests.helpers.apps.agent_app`, SIGKILL
while the subagent's tool is running, then a fresh worker process.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections import Counter
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.agent_models import AgentRequest
from sleuth.workflows import AgentWorkflow
from tests.helpers.apps.agent_app import GATE_ENV, NOTES, RECORD_ENV, read_record
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import start_sleuth_worker, stop, wait_for

pytestmark = pytest.mark.slow

APP = "tests.helpers.apps.agent_app:app"


async def test_killing_the_worker_inside_a_subagent_redoes_only_the_subagent(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    address = dev_env.client.service_client.config.target_host
    task_queue = f"agent-crash-{uuid.uuid4()}"
    gate, record, log = tmp_path / "gate", tmp_path / "record.jsonl", tmp_path / "worker.log"
    gate.mkdir()
    extra = {
        GATE_ENV: str(gate),
        RECORD_ENV: str(record),
        # The run's next workflow task waits this long for the killed worker's sticky queue.
        "SLEUTH_STICKY_QUEUE_TIMEOUT_SECONDS": str(scaled(1)),
    }
    first = start_sleuth_worker(APP, address, task_queue, env=extra, log=log)
    second = None
    try:
        handle = await dev_env.client.start_workflow(
            AgentWorkflow.run,
            AgentRequest(
                agent="market",
                prompt="Size the CRM market and price Acme",
                steps={
                    "subagent": {"heartbeat_seconds": 2, "retry": {"initial_interval_seconds": 0.5}}
                },
            ),
            id=f"agent-crash-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        await wait_for((gate / "started-1").exists, "started-1", detail=log.read_text)
        stop(first, signal.SIGKILL)
        assert [r["tool"] for r in read_record(record)] == ["lookup", "deep_dive"]

        second = start_sleuth_worker(APP, address, task_queue, env=extra, log=log)
        await wait_for((gate / "started-2").exists, "started-2", detail=log.read_text)
        (gate / "release").touch()
        outcome = await asyncio.wait_for(handle.result(), timeout=scaled(120))
    finally:
        stop(first, signal.SIGKILL)
        stop(second)

    # The parent's tool calls before the crash ran once; only the subagent's work was redone.
    assert [r["tool"] for r in read_record(record)] == [
        "lookup",
        "deep_dive",
        "deep_dive",
        "submit",
    ]
    scheduled: Counter[str] = Counter()
    subagent_attempts = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled[event.activity_task_scheduled_event_attributes.activity_type.name] += 1
        if event.HasField("activity_task_started_event_attributes"):
            subagent_attempts.append(event.activity_task_started_event_attributes.attempt)
    assert scheduled == {
        "sleuth.search_attributes": 1,
        "agent.model_turn": 6,
        "agent.tool": 6,
        "agent.subagent": 1,
    }
    assert max(subagent_attempts) == 2

    # Files and todos written before the crash were still there after it.
    assert outcome.structured_output is not None
    assert outcome.structured_output["summary"] == f"{NOTES} | Pricing: Acme charges $40 per seat"
    assert [t.status for t in outcome.todos or []] == ["completed", "completed"]
    assert outcome.stop_reason == "tool_called:submit & confidence_met"
