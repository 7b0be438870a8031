"""Worker Versioning: a worker joins a Temporal worker deployment as one build, so that during a
rolling upgrade a run stays on the build that started it (docs/deploy.md).

A versioned worker polls for the tasks of its own build only. The server sends a new run to the
deployment's *current* build; a `pinned` run (the default) then has every workflow task and every
activity on its task queue done by that build until it ends, so a worker without a newer node
never receives one. `auto_upgrade` moves a run to the current build at its next workflow task:
safe for Sleuth's workflow code (patch markers, replay tests over committed histories), but the
old build must then still serve the activities that run meanwhile.

A new build serves nothing until it is made current, with
`temporal worker deployment set-current-version --deployment-name NAME --build-id ID`, with
`sleuth worker --promote`, or automatically when the deployment has no current build yet (the
first deploy).
"""

from __future__ import annotations

import asyncio

from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    DescribeWorkerDeploymentResponse,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig, WorkerDeploymentVersion

import sleuth
from sleuth.runtime.errors import NotAvailableError
from sleuth.runtime.settings import SleuthSettings, VersioningSetting

BEHAVIORS: dict[VersioningSetting, VersioningBehavior] = {
    "pinned": VersioningBehavior.PINNED,
    "auto_upgrade": VersioningBehavior.AUTO_UPGRADE,
}
"""`SLEUTH_VERSIONING_BEHAVIOR` → the SDK's default behavior for every Sleuth workflow."""
UNVERSIONED = "__unversioned__"
"""The server's name for "no current build" in a deployment's routing config."""


def default_build_id() -> str:
    """The build id when none is configured: Sleuth's package version."""
    return sleuth.__version__


def deployment_config(settings: SleuthSettings, task_queue: str) -> WorkerDeploymentConfig | None:
    """The SDK's deployment options for a worker on `task_queue`, or None when versioning is off."""
    if not settings.versioned:
        return None
    version = WorkerDeploymentVersion(
        deployment_name=settings.deployment_name or task_queue,
        build_id=settings.build_id or default_build_id(),
    )
    return WorkerDeploymentConfig(
        version=version,
        use_worker_versioning=True,
        default_versioning_behavior=BEHAVIORS[settings.versioning_behavior],
    )


async def describe_deployment(
    client: Client, deployment_name: str
) -> DescribeWorkerDeploymentResponse | None:
    """The deployment as the server sees it, or None before any of its workers polled."""
    try:
        return await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(
                namespace=client.namespace, deployment_name=deployment_name
            )
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


def current_build_id(description: DescribeWorkerDeploymentResponse | None) -> str | None:
    """The build new runs go to, or None while the deployment has none."""
    if description is None:
        return None
    routing = description.worker_deployment_info.routing_config
    if routing.HasField("current_deployment_version"):
        return routing.current_deployment_version.build_id or None
    return None


def has_build(description: DescribeWorkerDeploymentResponse | None, build_id: str) -> bool:
    """Whether a worker of `build_id` has polled the deployment (the server knows the build)."""
    if description is None:
        return False
    return any(
        summary.deployment_version.build_id == build_id
        for summary in description.worker_deployment_info.version_summaries
    )


async def wait_for_build(
    client: Client, version: WorkerDeploymentVersion, timeout: float = 60.0
) -> DescribeWorkerDeploymentResponse:
    """Wait until the server knows `version` (its worker has polled); NotAvailableError after
    `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            description = await describe_deployment(client, version.deployment_name)
        except RPCError as exc:
            # The server rate-limits requests per deployment; a fleet starting at once meets it.
            if exc.status != RPCStatusCode.RESOURCE_EXHAUSTED:
                raise
            description = None
        if description is not None and has_build(description, version.build_id):
            return description
        if loop.time() > deadline:
            raise NotAvailableError(
                f"build {version.build_id!r} of worker deployment {version.deployment_name!r} "
                f"did not reach the Temporal server within {timeout:g} s; is the worker polling?"
            )
        await asyncio.sleep(0.5)


async def set_current_build(
    client: Client,
    version: WorkerDeploymentVersion,
    *,
    only_if_none: bool = False,
    timeout: float = 60.0,
) -> bool:
    """Make `version` the build new runs go to, once the server knows it. With `only_if_none`,
    only when the deployment has no current build yet (the first deploy), never replacing one a
    person chose. Returns whether this call changed the current build."""
    description = await wait_for_build(client, version, timeout)
    current = current_build_id(description)
    if current == version.build_id or (only_if_none and current is not None):
        return False
    try:
        await client.workflow_service.set_worker_deployment_current_version(
            SetWorkerDeploymentCurrentVersionRequest(
                namespace=client.namespace,
                deployment_name=version.deployment_name,
                build_id=version.build_id,
                # Another worker changed the routing since we read it: theirs stands.
                conflict_token=description.conflict_token if only_if_none else b"",
                # Refused when the build does not poll every queue the current one does.
                identity=client.identity,
            )
        )
    except RPCError as exc:
        if only_if_none and exc.status == RPCStatusCode.FAILED_PRECONDITION:
            return False
        raise
    return True
