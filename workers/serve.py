"""`sleuth serve`: a small HTTP API (FastAPI on uvicorn) for applications that embed Sleuth.

| method and path | what it does |
| --- | --- |
| `POST /runs` | start a run: `{"workflow": "ResearchWorkflow", "input": {...}, "id"?: "..."}` |
| `GET /runs/{id}` | its status, and its result once it has one (or its error) |
| `GET /runs/{id}/events` | its events as server-sent events, live, from `?from=N` or `Last-Event-ID` |
| `GET /runs/{id}/review` | the review it waits for, if any (the `pending_review` query) |
| `POST /runs/{id}/review` | answer it: `{"review_id", "decision", "remark"?}` (the `review` update); a 409 says why a run refused it |

A run's input is checked against its workflow's input model before the run starts (a 422 names
the field); names in it are the worker's, as with any other client. Each event is one SSE
message: `id` is its offset in the run's stream, `event` its type, `data` the event as JSON; a
last `event: end` message says the run is over.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import FastAPI, Header, HTTPException, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, ValidationError
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from sleuth._util.strict import StrictInput
from sleuth.activities.agent_models import AgentRequest
from sleuth.activities.decompose_models import DecomposeInput
from sleuth.activities.errors import unwrap_cause
from sleuth.activities.pipeline_models import PipelineInput
from sleuth.activities.research_models import ResearchRequest
from sleuth.flows.review import ReviewDecision
from sleuth.workers.events import follow_events

WORKFLOW_INPUTS: dict[str, type[BaseModel]] = {
    "ResearchWorkflow": ResearchRequest,
    "AgentWorkflow": AgentRequest,
    "PipelineWorkflow": PipelineInput,
    "DecomposeWorkflow": DecomposeInput,
}
"""The workflows a client may start, with the model each one's input must fit."""
REVIEW_UPDATE = "review"
PENDING_REVIEW_QUERY = "pending_review"


class StartRun(StrictInput):
    """Body of `POST /runs`."""

    workflow: Literal["ResearchWorkflow", "AgentWorkflow", "PipelineWorkflow", "DecomposeWorkflow"]
    """The workflow type to start."""
    input: dict[str, Any]
    """Its input, as for `temporal workflow start --input`."""
    id: str | None = Field(default=None, min_length=1, max_length=200)
    """The workflow id (default: `<workflow>-<random>`)."""


class RunStarted(BaseModel):
    id: str
    run_id: str | None
    workflow: str
    status_url: str
    events_url: str


class RunStatus(BaseModel):
    id: str
    workflow: str
    status: str
    """RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED, CONTINUED_AS_NEW or TIMED_OUT."""
    result: Any = None
    error: str | None = None


def create_api(client: Client, task_queue: str) -> FastAPI:
    """The HTTP API over `client`; runs start on `task_queue`."""
    api = FastAPI(title="Sleuth", summary="Start durable research runs and follow them live.")

    @api.post("/runs", status_code=201)
    async def start_run(body: StartRun) -> RunStarted:
        try:
            run_input = WORKFLOW_INPUTS[body.workflow].model_validate(body.input)
        except ValidationError as exc:
            raise HTTPException(422, detail=_problems(exc)) from None
        workflow_id = (
            body.id or f"{body.workflow.removesuffix('Workflow').lower()}-{uuid.uuid4().hex[:12]}"
        )
        try:
            handle = await client.start_workflow(
                body.workflow, run_input, id=workflow_id, task_queue=task_queue
            )
        except WorkflowAlreadyStartedError:
            raise HTTPException(
                409, detail=f"a run with id {workflow_id!r} exists; pick another id"
            ) from None
        return RunStarted(
            id=workflow_id,
            run_id=handle.result_run_id,
            workflow=body.workflow,
            status_url=f"/runs/{workflow_id}",
            events_url=f"/runs/{workflow_id}/events",
        )

    @api.get("/runs/{run_id}")
    async def run_status(run_id: str) -> RunStatus:
        handle = client.get_workflow_handle(run_id)
        description = await _describe(client, run_id)
        status = description.status or WorkflowExecutionStatus.RUNNING
        answer = RunStatus(id=run_id, workflow=description.workflow_type, status=status.name)
        if status == WorkflowExecutionStatus.COMPLETED:
            result = await handle.result()
            answer.result = (
                result.model_dump(mode="json") if isinstance(result, BaseModel) else result
            )
        elif status != WorkflowExecutionStatus.RUNNING:
            try:
                await handle.result()
            except WorkflowFailureError as exc:
                answer.error = str(unwrap_cause(exc))
        return answer

    @api.get("/runs/{run_id}/events")
    async def run_events(
        run_id: str,
        from_offset: int = Query(default=0, ge=0, alias="from"),
        last_event_id: str | None = Header(default=None),
    ) -> StreamingResponse:
        await _describe(client, run_id)
        start = from_offset
        if last_event_id is not None and last_event_id.isdigit():
            start = max(start, int(last_event_id) + 1)
        return StreamingResponse(
            _sse(client, run_id, start),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @api.get("/runs/{run_id}/review")
    async def pending_review(run_id: str) -> Any:
        await _describe(client, run_id)
        try:
            pending = await client.get_workflow_handle(run_id).query(PENDING_REVIEW_QUERY)
        except RPCError as exc:
            raise HTTPException(
                409, detail=f"run {run_id!r} takes no reviews: {exc.message}"
            ) from None
        return pending

    @api.post("/runs/{run_id}/review")
    async def answer_review(run_id: str, body: ReviewDecision) -> Any:
        await _describe(client, run_id)
        handle = client.get_workflow_handle(run_id)
        try:
            return await handle.execute_update(REVIEW_UPDATE, body.model_dump())
        except WorkflowUpdateFailedError as exc:
            raise HTTPException(409, detail=str(unwrap_cause(exc))) from None
        except RPCError as exc:
            raise HTTPException(
                409, detail=f"run {run_id!r} takes no reviews: {exc.message}"
            ) from None

    return api


async def _describe(client: Client, run_id: str) -> Any:
    try:
        return await client.get_workflow_handle(run_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise HTTPException(404, detail=f"no run {run_id!r}") from None
        raise


async def _sse(client: Client, run_id: str, start: int) -> AsyncIterator[str]:
    async for offset, event in follow_events(client, run_id, start):
        yield f"id: {offset}\nevent: {event.event_type}\ndata: {event.model_dump_json()}\n\n"
    yield "event: end\ndata: {}\n\n"


def _problems(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"field": ".".join(str(p) for p in error["loc"]) or "input", "message": error["msg"]}
        for error in exc.errors(include_url=False, include_input=False)
    ]
