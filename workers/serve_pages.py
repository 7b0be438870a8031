"""The pages of `sleuth serve`: `/` lists recent runs with the filters of `sleuth runs`, and a
browser asking for `/runs/{id}` gets the run's page: its steps live over the run's event stream,
its pending review to approve, revise or reject (the same `review` Update as the API), and its
report once it has one (`sleuth.research.render`).

Plain HTML with a little inline script: no build step, nothing fetched from elsewhere. Every
value is escaped by Jinja2; the script reads the run's id from a data attribute and writes text
only, never markup.
"""

from __future__ import annotations

from functools import cache
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from temporalio.client import Client, WorkflowExecutionStatus

from sleuth.research.render import render_html_fragment
from sleuth.runtime.paths import workflow_link
from sleuth.usage.pricing import usd
from sleuth.workers.cli_runs import MAX_LIMIT
from sleuth.workers.reports import RESEARCH_WORKFLOW, RunNotReadable, research_outcome
from sleuth.workers.serve_runs import runs_of, status_of


@cache
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("workers", "templates"),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def add_pages(api: FastAPI, client: Client, task_queue: str) -> None:
    """Add `/` (the runs page) to `api`; the run page answers `/runs/{id}` (see `run_page`)."""

    @api.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def runs_page(
        ungrounded: bool = False,
        since: str = Query(default="", max_length=40),
        research: str = Query(default="", max_length=200),
        awaiting_review: bool = False,
        limit: int = Query(default=20, ge=1, le=MAX_LIMIT),
    ) -> HTMLResponse:
        filters = {
            "ungrounded": ungrounded,
            "since": since,
            "research": research,
            "awaiting_review": awaiting_review,
            "limit": limit,
        }
        rows: list[Any] = []
        problem = None
        try:
            rows = await runs_of(
                client,
                task_queue,
                ungrounded=ungrounded,
                since=since or None,
                research=research or None,
                awaiting_review=awaiting_review,
                limit=limit,
            )
        except HTTPException as exc:
            problem = str(exc.detail)
        page = (
            _environment()
            .get_template("runs.html.j2")
            .render(
                rows=[_row(row) for row in rows],
                filters=filters,
                problem=problem,
                task_queue=task_queue,
            )
        )
        return HTMLResponse(page, status_code=200 if problem is None else 422)


def _row(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "href": "/runs/" + quote(row.id, safe=""),
        "kind": row.kind,
        "name": row.name or "",
        "status": row.status,
        "started": row.started.astimezone().strftime("%Y-%m-%d %H:%M:%S") if row.started else "",
        "grounding": f"{row.grounding_score:.0%}" if row.grounding_score is not None else "–",
        "replans": "–" if row.replans is None else row.replans,
        "tokens": "–" if row.tokens is None else f"{row.tokens:,}",
        "cost": "–" if row.cost_usd is None else usd(row.cost_usd),
    }


async def run_page(client: Client, description: Any) -> HTMLResponse:
    """The page of the run `description` describes (already checked to be one of ours)."""
    run_id = description.id
    status = description.status or WorkflowExecutionStatus.RUNNING
    finished = status != WorkflowExecutionStatus.RUNNING
    report_html = None
    problem = None
    if finished and description.workflow_type == RESEARCH_WORKFLOW:
        try:
            outcome = await research_outcome(client, run_id)
        except RunNotReadable as exc:
            problem = str(exc)
        else:
            report_html = render_html_fragment(
                outcome.final_state,
                workflow_id=run_id,
                web_ui=workflow_link(run_id, namespace=client.namespace),
            )
    elif finished:
        answer = await status_of(client, description)
        problem = answer.error
    page = (
        _environment()
        .get_template("run.html.j2")
        .render(
            run_id=run_id,
            base="/runs/" + quote(run_id, safe=""),
            workflow=description.workflow_type,
            status=status.name.lower().replace("_", " "),
            finished=finished,
            web_ui=workflow_link(run_id, namespace=client.namespace),
            report_html=report_html,
            problem=problem,
        )
    )
    return HTMLResponse(page)
