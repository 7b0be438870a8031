"""A finished research run's outcome, read back from Temporal for `sleuth report` and
`sleuth serve`'s run page."""

from __future__ import annotations

from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.service import RPCError, RPCStatusCode

from sleuth.activities.errors import unwrap_cause
from sleuth.activities.research_models import ResearchOutcome
from sleuth.runtime.errors import SleuthError

RESEARCH_WORKFLOW = "ResearchWorkflow"


class RunNotReadable(SleuthError, LookupError):
    """The run is unknown, still running, not a research run, or ended without a report; the
    message says which and what to do."""


async def research_outcome(client: Client, workflow_id: str) -> ResearchOutcome:
    """The outcome of the finished research run `workflow_id` (its latest run, following
    continue-as-new); `RunNotReadable` when there is none to read."""
    handle: WorkflowHandle[Any, ResearchOutcome] = client.get_workflow_handle(
        workflow_id, result_type=ResearchOutcome
    )
    try:
        description = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise RunNotReadable(
                f"no run {workflow_id!r} in namespace {client.namespace!r}; list runs with "
                "`sleuth runs`"
            ) from None
        raise
    if description.workflow_type != RESEARCH_WORKFLOW:
        raise RunNotReadable(
            f"run {workflow_id!r} is a {description.workflow_type}, not a research run: only "
            "research runs have a report"
        )
    status = description.status
    if status == WorkflowExecutionStatus.RUNNING:
        raise RunNotReadable(
            f"run {workflow_id!r} is still running: wait for it to finish (follow it with "
            f"`temporal workflow show --workflow-id {workflow_id} --follow`), then ask again"
        )
    try:
        return await handle.result()
    except WorkflowFailureError as exc:
        how = status.name.lower().replace("_", " ") if status is not None else "failed"
        raise RunNotReadable(
            f"run {workflow_id!r} ended without a report ({how}): {unwrap_cause(exc)}"
        ) from None
