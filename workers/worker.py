"""Build and run a worker that serves an App's workflows and activities on its task queue."""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass

from temporalio.client import Client
from temporalio.worker import Worker

from activities import build_activities
from sleuth.app import App, set_current_app
from workflows import ALL_WORKFLOWS


@dataclass
class WorkerSettings:
    """How much one worker process takes on at once."""

    max_concurrent_activities: int = 16
    """Activities (node runs, per-item scans) executing at once in this process."""
    max_concurrent_workflow_tasks: int = 64
    """Workflow tasks processed at once."""
    activity_threads: int = 16
    """Threads for synchronous activities."""
    graceful_shutdown_seconds: float = 30.0
    """On shutdown, running activities get this long to finish before they are cancelled."""


def build_worker(
    client: Client,
    app: App,
    *,
    task_queue: str | None = None,
    settings: WorkerSettings | None = None,
) -> Worker:
    """A worker for `app` (every Sleuth workflow and every activity bound to the app)."""
    from datetime import timedelta

    settings = settings or WorkerSettings()
    set_current_app(app)
    return Worker(
        client,
        task_queue=task_queue or app.task_queue,
        workflows=list(ALL_WORKFLOWS),
        activities=build_activities(app),
        activity_executor=concurrent.futures.ThreadPoolExecutor(
            max_workers=settings.activity_threads
        ),
        max_concurrent_activities=settings.max_concurrent_activities,
        max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
        graceful_shutdown_timeout=timedelta(seconds=settings.graceful_shutdown_seconds),
    )
