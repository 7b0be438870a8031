"""Client-side helpers for knowledge scans: start one, and read its continue-as-new chain."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from sleuth.activities.scan_models import ScanOutcome, ScanRequest
from sleuth.workflows.scan import KnowledgeScanWorkflow


def scan_workflow_id(request: ScanRequest) -> str:
    """The workflow id of a scan: `scan-<scan id>`, or a fresh one when the request has none."""
    return f"scan-{request.scan_id or uuid.uuid4().hex[:12]}"


async def start_scan(
    client: Client, request: ScanRequest, *, task_queue: str, workflow_id: str | None = None
) -> WorkflowHandle[KnowledgeScanWorkflow, ScanOutcome]:
    """Start `KnowledgeScanWorkflow`; the scan id defaults to the workflow id."""
    return await client.start_workflow(
        KnowledgeScanWorkflow.run,
        request,
        id=workflow_id or scan_workflow_id(request),
        task_queue=task_queue,
    )


@dataclass
class RunStats:
    """One run of a scan's continue-as-new chain."""

    run_id: str
    events: int
    continued_as_new: bool


async def run_chain(client: Client, workflow_id: str) -> list[RunStats]:
    """Every run of the workflow's continue-as-new chain, oldest first, with its history length."""
    chain: list[RunStats] = []
    run_id: str | None = (await client.get_workflow_handle(workflow_id).describe()).run_id
    while run_id:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        history = await handle.fetch_history()
        events = history.events
        started = events[0].workflow_execution_started_event_attributes
        last_type = events[-1].event_type
        chain.append(
            RunStats(
                run_id=run_id,
                events=len(events),
                continued_as_new=(
                    last_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
                ),
            )
        )
        run_id = started.continued_execution_run_id
    return list(reversed(chain))
