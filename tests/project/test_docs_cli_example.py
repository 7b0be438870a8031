"""The docs' Temporal CLI example (docs/apps.md, "Starting a run from the Temporal CLI") names a
research config the built-in demo app has, and the `temporal` CLI starts it as written: the run
exists on the server with the workflow type and input the page shows."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from sleuth.apps.demo import build_demo_app
from sleuth.workers.binaries import temporal_cli
from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


def example_command() -> list[str]:
    page = (ROOT / "docs" / "apps.md").read_text()
    section = page.split("## Starting a run from the Temporal CLI", 1)[1]
    [block] = re.findall(r"```bash\n(temporal workflow start.*?)```", section, re.DOTALL)
    return shlex.split(block.replace("\\\n", " "))


async def test_the_docs_temporal_cli_example_starts_a_demo_research_run(
    dev_env: WorkflowEnvironment,
) -> None:
    command = example_command()
    given = json.loads(command[command.index("--input") + 1])
    assert given["research"] in build_demo_app().research_names
    workflow_id = f"docs-example-{uuid.uuid4().hex[:8]}"
    queue = command.index("--task-queue") + 1
    command[queue] = f"docs-{uuid.uuid4().hex[:8]}"  # no worker: the run waits, as started
    address = dev_env.client.service_client.config.target_host
    started = subprocess.run(
        [str(temporal_cli()), *command[1:], "--workflow-id", workflow_id, "--address", address],
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert started.returncode == 0, started.stderr
    described = await dev_env.client.get_workflow_handle(workflow_id).describe()
    assert described.workflow_type == "ResearchWorkflow"
    history = await dev_env.client.get_workflow_handle(workflow_id).fetch_history()
    first = history.events[0].workflow_execution_started_event_attributes
    [payload] = first.input.payloads
    assert json.loads(payload.data) == given
    await dev_env.client.get_workflow_handle(workflow_id).terminate("the test is over")
