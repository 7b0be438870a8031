"""Build and run a worker that serves an App's workflows and activities on its task queue."""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from pydantic import ValidationError
from temporalio.client import Client
from temporalio.worker import Worker

from activities import build_activities
from sleuth.app import App, set_current_app
from workflows import ALL_WORKFLOWS

HEARTBEAT_THROTTLE_SECONDS = 5.0
"""Longest the worker holds an activity's heartbeat back before sending it to the server."""


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

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WorkerSettings:
        """Defaults overridden by `SLEUTH_<FIELD NAME>` variables, e.g.
        `SLEUTH_MAX_CONCURRENT_ACTIVITIES=4`, `SLEUTH_GRACEFUL_SHUTDOWN_SECONDS=120`.

        Deployments set these per worker pool; see `ENV_VARIABLES` for the full list.
        """
        env = os.environ if environ is None else environ
        values: dict[str, float | int] = {}
        for field in fields(cls):
            variable = f"SLEUTH_{field.name.upper()}"
            raw = env.get(variable)
            if raw is None or not raw.strip():
                continue
            values[field.name] = _positive(
                variable, raw, float if isinstance(field.default, float) else int
            )
        return cls(**values)  # type: ignore[arg-type]


ENV_VARIABLES = tuple(f"SLEUTH_{field.name.upper()}" for field in fields(WorkerSettings))
"""The environment variables `WorkerSettings.from_env` reads."""


def _positive(variable: str, raw: str, kind: type[float] | type[int]) -> float | int:
    try:
        value = kind(raw.strip())
    except ValueError:
        raise ValueError(
            f"{variable}={raw!r} is not a {'number' if kind is float else 'whole number'}"
        ) from None
    if value <= 0:
        raise ValueError(f"{variable}={raw!r} must be greater than zero")
    return value


def build_worker(
    client: Client,
    app: App,
    *,
    task_queue: str | None = None,
    settings: WorkerSettings | None = None,
) -> Worker:
    """A worker for `app` (every Sleuth workflow and every activity bound to the app).

    Without `settings`, `WorkerSettings.from_env()` applies (defaults unless overridden).
    """
    from datetime import timedelta

    settings = settings or WorkerSettings.from_env()
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
        # The SDK holds heartbeats back for up to 0.8 x the heartbeat timeout; sending each timer
        # beat (every third of the timeout) keeps the server's view of a live attempt fresh, so a
        # short server restart does not declare it dead. Checkpoints never depend on it.
        max_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT_THROTTLE_SECONDS),
        # A workflow input that does not fit its model (a typo in `temporal workflow start
        # --input`) fails the run with pydantic's message; otherwise the SDK fails the workflow
        # *task* instead, and the server retries it forever.
        workflow_failure_exception_types=[ValidationError],
    )
