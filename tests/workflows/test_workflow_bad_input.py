"""A workflow started with JSON that does not fit its input model fails at once, saying why.

Without this, the SDK turns the input's ValidationError into a workflow *task* failure, which the
server retries forever: a typo in `temporal workflow start --input` left a run that never ends.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.errors import unwrap_cause
from sleuth.apps.app import App
from sleuth.workers.worker import build_worker
from tests.helpers.timeouts import scaled


@pytest.mark.parametrize(
    ("workflow_type", "payload", "field"),
    [
        ("ResearchWorkflow", {"promt": "typo"}, "prompt"),
        ("KnowledgeScanWorkflow", {"provider": "p", "concurrency": 0}, "concurrency"),
        ("AgentWorkflow", {"prompt": "no agent"}, "agent"),
    ],
)
async def test_bad_input_fails_the_workflow_naming_the_field(
    dev_env: WorkflowEnvironment, workflow_type: str, payload: dict[str, object], field: str
) -> None:
    task_queue = str(uuid.uuid4())
    async with build_worker(dev_env.client, App(), task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            workflow_type, payload, id=f"bad-input-{uuid.uuid4()}", task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), timeout=scaled(30))
    assert field in str(unwrap_cause(failure.value))
