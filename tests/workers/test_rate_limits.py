"""Fleet-wide and per-worker activity rate limits reach the worker and the Temporal server.

`SLEUTH_MAX_TASK_QUEUE_ACTIVITIES_PER_SECOND` is enforced by the server across every worker on
the queue: the test asks the dev server which limit it applies to the queue's activities (and
where it came from). The per-worker limits are the SDK worker's own options.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import RateLimitSource, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sleuth.apps.app import App
from sleuth.runtime.settings import SleuthSettings
from sleuth.workers.plugin import SleuthPlugin
from sleuth.workers.worker import build_worker
from tests.helpers.worker_processes import start_sleuth_worker, stop, wait_for


async def _activity_queue_limit(client: Client, task_queue: str) -> tuple[float, int] | None:
    """The activities-per-second limit the server applies to the queue and its source, once a
    worker has polled it with one (None before)."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            report_config=True,
        )
    )
    limit = response.effective_rate_limit
    if limit.rate_limit_source != RateLimitSource.RATE_LIMIT_SOURCE_WORKER:
        return None
    return limit.requests_per_second, limit.rate_limit_source


async def test_sleuth_worker_sets_the_fleet_wide_limit_on_the_server(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client = dev_env.client
    task_queue = f"rate-{uuid.uuid4()}"
    assert await _activity_queue_limit(client, task_queue) is None
    log = tmp_path / "worker.log"
    worker = start_sleuth_worker(
        "tests.helpers.apps.ping_app:app",
        client.service_client.config.target_host,
        task_queue,
        env={"SLEUTH_MAX_TASK_QUEUE_ACTIVITIES_PER_SECOND": "7.5"},
        log=log,
    )
    try:
        await wait_for(
            lambda: _limit_is(client, task_queue, 7.5),
            "the server to apply the worker's task-queue limit of 7.5/s",
            detail=log.read_text,
        )
    finally:
        stop(worker)


async def _limit_is(client: Client, task_queue: str, expected: float) -> bool:
    found = await _activity_queue_limit(client, task_queue)
    return found is not None and found[0] == pytest.approx(expected)


async def test_build_worker_passes_the_limits_to_the_sdk_worker(
    dev_env: WorkflowEnvironment,
) -> None:
    settings = SleuthSettings(
        max_activities_per_second=2.5,
        max_task_queue_activities_per_second=40,
        max_concurrent_activities=3,
    )
    worker = build_worker(
        dev_env.client, App(name="limits"), task_queue=f"q-{uuid.uuid4()}", settings=settings
    )
    config = worker.config(active_config=True)
    assert config["max_activities_per_second"] == 2.5
    assert config["max_task_queue_activities_per_second"] == 40
    assert config["max_concurrent_activities"] == 3
    # Eager activities would bypass the task queue, and with it the server's limit.
    assert config["disable_eager_activity_execution"] is True

    unlimited = build_worker(
        dev_env.client,
        App(name="limits"),
        task_queue=f"q-{uuid.uuid4()}",
        settings=SleuthSettings(),
    )
    assert unlimited.config(active_config=True)["max_activities_per_second"] is None
    assert unlimited.config(active_config=True)["max_task_queue_activities_per_second"] is None
    assert not unlimited.config(active_config=True).get("disable_eager_activity_execution")


async def test_the_plugin_reads_the_limits_from_the_environment(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_MAX_ACTIVITIES_PER_SECOND", "4")
    monkeypatch.setenv("SLEUTH_MAX_TASK_QUEUE_ACTIVITIES_PER_SECOND", "12.5")
    worker = Worker(
        dev_env.client, task_queue=f"q-{uuid.uuid4()}", plugins=[SleuthPlugin(App(name="limits"))]
    )
    assert worker.config(active_config=True)["max_activities_per_second"] == 4
    assert worker.config(active_config=True)["max_task_queue_activities_per_second"] == 12.5

    own = Worker(
        dev_env.client,
        task_queue=f"q-{uuid.uuid4()}",
        plugins=[SleuthPlugin(App(name="limits"))],
        max_task_queue_activities_per_second=1,
    )
    assert own.config(active_config=True)["max_task_queue_activities_per_second"] == 1
