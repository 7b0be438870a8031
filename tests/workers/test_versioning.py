"""Worker Versioning: a rolling upgrade beside a build without the `plan` node fails no run.

The incident this guards against: a worker from before the plan node, started beside the current
one on the same queue, took workflow tasks of runs that had planned and failed them ("unknown
research node 'plan'"), 5 runs of 30. Here both builds are `sleuth worker` processes in one
worker deployment on one queue: the old build is current first, 15 runs start on it and are held
mid-execute, the new build is promoted, 15 more runs start on it, and only then are the old runs
released. Every run must complete, and its history must show that every workflow task and every
activity was done by the build that started it.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import VersioningBehavior
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker, WorkerDeploymentVersion

import sleuth
from sleuth.activities.research_models import ResearchRequest
from sleuth.apps.app import App
from sleuth.runtime.settings import SleuthSettings
from sleuth.workers.plugin import SleuthPlugin
from sleuth.workers.versioning import current_build_id, deployment_config, describe_deployment
from tests.helpers.apps.versioned_app import RESEARCH
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import start_sleuth_worker, stop, wait_for

RUNS_PER_BUILD = 15
OLD_APP = "tests.helpers.apps.versioned_app_old:app"
NEW_APP = "tests.helpers.apps.versioned_app:app"


async def _current_build(client: Client, deployment: str) -> str | None:
    return current_build_id(await describe_deployment(client, deployment))


async def _start_runs(client: Client, task_queue: str, prefix: str) -> list[WorkflowHandle]:
    return [
        await client.start_workflow(
            "ResearchWorkflow",
            ResearchRequest(
                prompt=f"How many widgets did Acme ship? ({prefix} {i})", research=RESEARCH
            ),
            id=f"{prefix}-{i}-{uuid.uuid4().hex[:6]}",
            task_queue=task_queue,
        )
        for i in range(RUNS_PER_BUILD)
    ]


async def _held_in_execute(handles: list[WorkflowHandle]) -> bool:
    for handle in handles:
        pending = (await handle.describe()).raw_description.pending_activities
        if not any(activity.activity_type.name == "research.execute" for activity in pending):
            return False
    return True


async def _builds_that_ran(handle: WorkflowHandle) -> tuple[set[str], list[str]]:
    """The build ids that completed the run's workflow tasks and started its activities, and the
    activity types it ran."""
    builds: set[str] = set()
    activities: list[str] = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            builds.add(event.workflow_task_completed_event_attributes.deployment_version.build_id)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            activities.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            builds.add(event.activity_task_started_event_attributes.worker_version.build_id)
    return builds, activities


async def test_a_rolling_upgrade_finishes_every_run_on_the_build_that_started_it(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    task_queue = f"versioning-{uuid.uuid4()}"
    deployment = f"sleuth-{uuid.uuid4().hex[:8]}"
    hold = tmp_path / "hold-old-runs"
    hold.touch()
    common = {"SLEUTH_DEPLOYMENT_NAME": deployment}
    old = start_sleuth_worker(
        OLD_APP,
        address,
        task_queue,
        env={**common, "SLEUTH_BUILD_ID": "old", "VERSIONING_HOLD": str(hold)},
        log=tmp_path / "old-worker.log",
    )
    new = None
    try:
        # The first build of a deployment makes itself current.
        await wait_for(
            lambda: _current_build_is(client, deployment, "old"),
            "the old build to become current",
            detail=lambda: (tmp_path / "old-worker.log").read_text(),
        )
        old_runs = await _start_runs(client, task_queue, "old")
        await wait_for(lambda: _held_in_execute(old_runs), "the old build's runs to reach execute")

        new = start_sleuth_worker(
            NEW_APP,
            address,
            task_queue,
            env={**common, "SLEUTH_BUILD_ID": "new"},
            log=tmp_path / "new-worker.log",
            args=("--promote",),
        )
        await wait_for(
            lambda: _current_build_is(client, deployment, "new"),
            "`--promote` to make the new build current",
            detail=lambda: (tmp_path / "new-worker.log").read_text(),
        )
        new_runs = await _start_runs(client, task_queue, "new")
        await asyncio.wait_for(
            asyncio.gather(*(handle.result() for handle in new_runs)), scaled(180)
        )
        hold.unlink()
        await asyncio.wait_for(
            asyncio.gather(*(handle.result() for handle in old_runs)), scaled(180)
        )

        for build, handles in (("old", old_runs), ("new", new_runs)):
            for handle in handles:
                description = await handle.describe()
                assert description.status == WorkflowExecutionStatus.COMPLETED, handle.id
                builds, activities = await _builds_that_ran(handle)
                assert builds == {build}, f"{handle.id} ran on builds {builds}"
                assert ("research.plan" in activities) == (build == "new"), activities
        assert await _current_build(client, deployment) == "new"
    finally:
        stop(old)
        stop(new)


async def _current_build_is(client: Client, deployment: str, build: str) -> bool:
    # The server rate-limits requests per worker deployment: ask a few times a second at most.
    await asyncio.sleep(0.3)
    try:
        return await _current_build(client, deployment) == build
    except RPCError as exc:
        if exc.status == RPCStatusCode.RESOURCE_EXHAUSTED:
            return False
        raise


def test_versioning_is_off_by_default_and_defaults_from_the_version_and_queue() -> None:
    assert deployment_config(SleuthSettings(), "sleuth") is None
    config = deployment_config(SleuthSettings(worker_versioning=True), "reports")
    assert config is not None and config.use_worker_versioning
    assert config.version == WorkerDeploymentVersion("reports", sleuth.__version__)
    assert config.default_versioning_behavior == VersioningBehavior.PINNED

    named = deployment_config(
        SleuthSettings(build_id="abc123", versioning_behavior="auto_upgrade"), "reports"
    )
    assert named is not None
    assert named.version == WorkerDeploymentVersion("reports", "abc123")
    assert named.default_versioning_behavior == VersioningBehavior.AUTO_UPGRADE


async def test_the_plugin_takes_a_deployment_name_and_build_id(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = SleuthPlugin(App(name="versioned"), deployment_name="research", build_id="b7")
    worker = Worker(dev_env.client, task_queue=f"v-{uuid.uuid4()}", plugins=[plugin])
    config = worker.config(active_config=True)["deployment_config"]
    assert config is not None
    assert config.version == WorkerDeploymentVersion("research", "b7")

    monkeypatch.setenv("SLEUTH_WORKER_VERSIONING", "true")
    queue = f"v-{uuid.uuid4()}"
    from_env = Worker(dev_env.client, task_queue=queue, plugins=[SleuthPlugin(App(name="v"))])
    config = from_env.config(active_config=True)["deployment_config"]
    assert config is not None
    assert config.version == WorkerDeploymentVersion(queue, sleuth.__version__)
