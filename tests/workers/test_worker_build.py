"""`build_worker` hands the `SLEUTH_*` worker settings to the Temporal SDK's worker."""

from __future__ import annotations

from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from sleuth.apps.app import App
from sleuth.runtime.settings import SleuthSettings
from sleuth.workers.worker import build_worker


async def test_heartbeats_reach_the_server_well_inside_their_timeout(
    dev_env: WorkflowEnvironment,
) -> None:
    # The SDK alone sends a 20 s heartbeat timeout's beats every 16 s: a worker slowed by load
    # for 4 s has its live attempts declared dead, and their steps run twice.
    worker = build_worker(dev_env.client, App(name="throttle"), task_queue="throttle")
    assert worker.config()["max_heartbeat_throttle_interval"] == timedelta(seconds=2)

    settings = SleuthSettings(heartbeat_throttle_seconds=0.5, sticky_queue_timeout_seconds=3)
    tuned = build_worker(dev_env.client, App(name="throttle"), task_queue="t", settings=settings)
    assert tuned.config()["max_heartbeat_throttle_interval"] == timedelta(seconds=0.5)
    assert tuned.config()["sticky_queue_schedule_to_start_timeout"] == timedelta(seconds=3)
