"""Build a worker that serves an App's workflows and activities on its task queue."""

from __future__ import annotations

import concurrent.futures
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from sleuth.apps.app import App
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.settings import SleuthSettings, env_name, load_settings
from sleuth.workers.plugin import SleuthPlugin, client_plugin
from sleuth.workers.versioning import deployment_config

WORKER_SETTINGS = (
    "max_concurrent_activities",
    "max_concurrent_workflow_tasks",
    "activity_threads",
    "graceful_shutdown_seconds",
)
"""The fields of `SleuthSettings` that tune one worker process."""
ENV_VARIABLES = tuple(env_name(field) for field in WORKER_SETTINGS)
"""Their environment variables (deployments set these per worker pool)."""


def build_worker(
    client: Client,
    app: App | None = None,
    *,
    task_queue: str | None = None,
    settings: SleuthSettings | None = None,
) -> Worker:
    """A worker for every Sleuth workflow and `app`'s activities, on `task_queue` (default: the
    App's queue), tuned by the `SLEUTH_*` worker settings (`settings`, else the environment):
    concurrency, activity rate limits (per worker and across the queue) and Worker Versioning.

    A client connected with `SleuthPlugin` hands its plugin (and App) to the worker: leave `app`
    out. Any other client gets `SleuthPlugin(app)` on this worker alone.
    """
    settings = settings or load_settings()
    plugin = client_plugin(client.config()["plugins"])
    plugins: list[SleuthPlugin] = []
    if plugin is None:
        if app is None:
            raise InvalidSettingError(
                "build_worker needs an App: pass app=..., or connect the client with "
                "plugins=[SleuthPlugin(app)]"
            )
        plugin = SleuthPlugin(app, settings=settings)
        plugins.append(plugin)
    elif app is not None and app is not plugin.app:
        raise InvalidSettingError(
            "the client's SleuthPlugin serves another App; build the worker without app=, or on a "
            "client connected without the plugin"
        )
    task_queue = task_queue or plugin.app.task_queue
    return Worker(
        client,
        task_queue=task_queue,
        plugins=plugins,
        activity_executor=concurrent.futures.ThreadPoolExecutor(
            max_workers=settings.activity_threads
        ),
        max_concurrent_activities=settings.max_concurrent_activities,
        max_activities_per_second=settings.max_activities_per_second,
        max_task_queue_activities_per_second=settings.max_task_queue_activities_per_second,
        deployment_config=deployment_config(settings, task_queue),
        max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
        graceful_shutdown_timeout=timedelta(seconds=settings.graceful_shutdown_seconds),
        sticky_queue_schedule_to_start_timeout=timedelta(
            seconds=settings.sticky_queue_timeout_seconds
        ),
        max_heartbeat_throttle_interval=timedelta(seconds=settings.heartbeat_throttle_seconds),
    )
