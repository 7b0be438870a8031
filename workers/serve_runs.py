"""The runs `sleuth serve` reads: the filtered run list and one run's status, shared by the API
(`sleuth.workers.serve`) and its pages (`sleuth.workers.serve_pages`)."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException
from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from sleuth.activities.errors import unwrap_cause
from sleuth.workers.cli_runs import RunRow, build_query, list_runs, parse_since


class RunStatus(BaseModel):
    id: str
    workflow: str
    status: str
    """RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED, CONTINUED_AS_NEW or TIMED_OUT."""
    result: Any = None
    error: str | None = None


async def runs_of(
    client: Client,
    task_queue: str,
    *,
    ungrounded: bool = False,
    since: str | None = None,
    research: str | None = None,
    awaiting_review: bool = False,
    limit: int = 20,
) -> list[RunRow]:
    """The recent runs on `task_queue` the filters of `sleuth runs` select (422 for a bad one)."""
    from datetime import UTC, datetime

    try:
        query = build_query(
            ungrounded=ungrounded,
            since=parse_since(since, datetime.now(UTC)) if since else None,
            research=research or None,
            awaiting_review=awaiting_review,
        )
    except ValueError as exc:
        raise HTTPException(422, detail=str(exc).removeprefix("--")) from None
    try:
        return await list_runs(client, f"{query} AND TaskQueue = '{task_queue}'", limit)
    except RPCError as exc:
        if exc.status == RPCStatusCode.INVALID_ARGUMENT and "Sleuth" in exc.message:
            raise HTTPException(
                409,
                detail=f"the namespace lacks Sleuth's search attributes these filters use "
                f"({exc.message}); register them with `sleuth setup`",
            ) from None
        raise


async def status_of(client: Client, description: Any) -> RunStatus:
    """The status of the run `description` describes, with its result or error once it ended."""
    run_id = description.id
    handle = client.get_workflow_handle(run_id)
    status = description.status or WorkflowExecutionStatus.RUNNING
    answer = RunStatus(id=run_id, workflow=description.workflow_type, status=status.name)
    if status == WorkflowExecutionStatus.COMPLETED:
        result = await handle.result()
        answer.result = result.model_dump(mode="json") if isinstance(result, BaseModel) else result
    elif status != WorkflowExecutionStatus.RUNNING:
        try:
            await handle.result()
        except WorkflowFailureError as exc:
            answer.error = str(unwrap_cause(exc))
    return answer
