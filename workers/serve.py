"""`sleuth serve`: a small HTTP API (FastAPI on uvicorn) for applications that embed Sleuth.

| method and path | what it does |
| --- | --- |
| `GET /` | a page listing recent runs, with the filters of `sleuth runs` |
| `GET /runs` | the same list as JSON (`?ungrounded=true&since=24h&research=…&awaiting_review=true&limit=N`) |
| `POST /runs` | start a run: `{"workflow": "ResearchWorkflow", "input": {...}, "id"?: "..."}` |
| `GET /runs/{id}` | its status, and its result once it has one (or its error); a browser gets the run's page: its steps live, its review, its report |
| `GET /runs/{id}/events` | its events as server-sent events, live, from `?from=N` or `Last-Event-ID` |
| `GET /runs/{id}/review` | the review it waits for, if any (the `pending_review` query) |
| `POST /runs/{id}/review` | answer it: `{"review_id", "decision", "remark"?}` (the `review` update); a 409 says why a run refused it |

A run's input is checked against its workflow's input model before the run starts (a 422 names
the field); names in it are the worker's, as with any other client. Each event is one SSE
message: `id` is its offset in the run's stream, `event` its type (every message is the default
`message` event with `?event_names=false`, for a browser's `EventSource.onmessage`), `data` the
event as JSON with `line`, the line `sleuth research` prints for it; a last `event: end` message
says the run is over. An idle stream gets a keep-alive comment every
`SLEUTH_SERVE_SSE_PING_SECONDS`; a client that goes away stops its stream.

Only runs of Sleuth's workflow types on this server's task queue (the App's) are read; any other
id is "no run". `sleuth.workers.serve_guard` adds the token, Host, body and id checks.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field, ValidationError, field_validator
from sse_starlette import EventSourceResponse, ServerSentEvent
from temporalio.client import (
    Client,
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
from sleuth.runtime.settings import load_settings
from sleuth.workers.cli_events import describe_event
from sleuth.workers.cli_runs import KINDS, MAX_LIMIT
from sleuth.workers.events import follow_events
from sleuth.workers.serve_guard import MAX_RUN_ID_CHARS, ServeGuard, check_run_id
from sleuth.workers.serve_pages import add_pages
from sleuth.workers.serve_runs import RunStatus, runs_of, status_of

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
    id: str | None = Field(default=None, min_length=1, max_length=MAX_RUN_ID_CHARS)
    """The workflow id (default: `<workflow>-<random>`): letters, digits and `. _ : @ = + -`."""

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str | None) -> str | None:
        return None if value is None else check_run_id(value)


class RunStarted(BaseModel):
    id: str
    run_id: str | None
    workflow: str
    status_url: str
    events_url: str


def create_api(client: Client, task_queue: str, guard: ServeGuard | None = None) -> FastAPI:
    """The HTTP API over `client`; runs start on `task_queue`, and only runs there are read.
    `guard` checks every request (default: loopback only, no token, the configured body cap)."""
    api = FastAPI(title="Sleuth", summary="Start durable research runs and follow them live.")
    (guard or ServeGuard.from_settings("127.0.0.1")).install(api)
    ping_seconds = load_settings().serve_sse_ping_seconds

    @api.get("/runs")
    async def recent_runs(
        ungrounded: bool = False,
        since: str | None = Query(default=None, max_length=40),
        research: str | None = Query(default=None, max_length=200),
        awaiting_review: bool = False,
        limit: int = Query(default=20, ge=1, le=MAX_LIMIT),
    ) -> list[dict[str, Any]]:
        rows = await runs_of(
            client,
            task_queue,
            ungrounded=ungrounded,
            since=since,
            research=research,
            awaiting_review=awaiting_review,
            limit=limit,
        )
        return [row.to_json() for row in rows]

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

    @api.get("/runs/{run_id}", response_model=None)
    async def run_status(run_id: str, request: Request) -> RunStatus | HTMLResponse:
        description = await _describe(client, task_queue, run_id)
        if "text/html" in request.headers.get("accept", ""):
            from sleuth.workers.serve_pages import run_page

            return await run_page(client, description)
        return await status_of(client, description)

    @api.get("/runs/{run_id}/events")
    async def run_events(
        run_id: str,
        from_offset: int = Query(default=0, ge=0, alias="from"),
        event_names: bool = True,
        last_event_id: str | None = Header(default=None),
    ) -> EventSourceResponse:
        await _describe(client, task_queue, run_id)
        start = from_offset
        if last_event_id is not None and last_event_id.isdigit():
            start = max(start, int(last_event_id) + 1)
        return EventSourceResponse(
            _sse(client, run_id, start, event_names),
            ping=ping_seconds,
            sep="\n",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @api.get("/runs/{run_id}/review")
    async def pending_review(run_id: str) -> Any:
        await _describe(client, task_queue, run_id)
        try:
            pending = await client.get_workflow_handle(run_id).query(PENDING_REVIEW_QUERY)
        except RPCError as exc:
            raise HTTPException(
                409, detail=f"run {run_id!r} takes no reviews: {exc.message}"
            ) from None
        return pending

    @api.post("/runs/{run_id}/review")
    async def answer_review(run_id: str, body: ReviewDecision) -> Any:
        await _describe(client, task_queue, run_id)
        handle = client.get_workflow_handle(run_id)
        try:
            return await handle.execute_update(REVIEW_UPDATE, body.model_dump())
        except WorkflowUpdateFailedError as exc:
            raise HTTPException(409, detail=str(unwrap_cause(exc))) from None
        except RPCError as exc:
            raise HTTPException(
                409, detail=f"run {run_id!r} takes no reviews: {exc.message}"
            ) from None

    add_pages(api, client, task_queue)
    return api


async def _describe(client: Client, task_queue: str, run_id: str) -> Any:
    """The run's description: 422 for an id no run can have, 404 for one that is not a Sleuth
    run of this task queue (the same answer as for no run at all, so nothing else leaks)."""
    try:
        check_run_id(run_id)
    except ValueError as exc:
        raise HTTPException(422, detail=f"run id {run_id[:80]!r}: {exc}") from None
    try:
        description = await client.get_workflow_handle(run_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise HTTPException(404, detail=f"no run {run_id!r}") from None
        raise
    if description.workflow_type not in KINDS or description.task_queue != task_queue:
        raise HTTPException(404, detail=f"no run {run_id!r}")
    return description


async def _sse(
    client: Client, run_id: str, start: int, event_names: bool
) -> AsyncIterator[ServerSentEvent]:
    async for offset, event in follow_events(client, run_id, start):
        data = {**event.model_dump(mode="json"), "line": describe_event(event).strip()}
        yield ServerSentEvent(
            data=json.dumps(data, ensure_ascii=False),
            id=str(offset),
            event=event.event_type if event_names else None,
        )
    yield ServerSentEvent(data="{}", event="end")


def _problems(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"field": ".".join(str(p) for p in error["loc"]) or "input", "message": error["msg"]}
        for error in exc.errors(include_url=False, include_input=False)
    ]
