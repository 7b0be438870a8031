"""A project laid out as Temporal's samples are (`workflows.py`, `activities.py` and `worker.py`
at its root) takes Sleuth as a dependency: its own modules are not shadowed by Sleuth's, nor
passed through the workflow sandbox, and one worker runs its workflow and a Sleuth research run.

Before Sleuth had one import name, `from workers.plugin import SleuthPlugin` failed here with
`cannot import name 'build_activities' from 'activities'` (the user's module won)."""

from __future__ import annotations

import importlib
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from tests.workers.test_plugin import address, research, research_app

ACTIVITIES = """
from temporalio import activity


@activity.defn
async def compose_greeting(name: str) -> str:
    return f"Hello, {name}!"
"""

WORKFLOWS = """
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities import compose_greeting


@workflow.defn
class GreetingWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            compose_greeting, name, start_to_close_timeout=timedelta(seconds=30)
        )
"""

WORKER = """
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities import compose_greeting
from sleuth.temporal import SleuthPlugin
from workflows import GreetingWorkflow


def build(client: Client, task_queue: str, app) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[GreetingWorkflow],
        activities=[compose_greeting],
        plugins=[SleuthPlugin(app)],
    )
"""

USER_MODULES = ("activities", "workflows", "worker")


@pytest.fixture
def samples_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name, source in (("activities", ACTIVITIES), ("workflows", WORKFLOWS), ("worker", WORKER)):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in USER_MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield tmp_path
    for name in USER_MODULES:
        sys.modules.pop(name, None)


async def test_a_samples_layout_project_runs_its_workflow_and_sleuth_on_one_worker(
    dev_env: WorkflowEnvironment, samples_project: Path
) -> None:
    worker_module = importlib.import_module("worker")
    # The user's modules are the ones imported under their names.
    assert Path(sys.modules["activities"].__file__ or "").parent == samples_project
    assert Path(sys.modules["workflows"].__file__ or "").parent == samples_project
    task_queue = str(uuid.uuid4())
    client = await Client.connect(address(dev_env), data_converter=pydantic_data_converter)
    worker = worker_module.build(client, task_queue, research_app())
    passed = worker.config(active_config=True)["workflow_runner"].restrictions.passthrough_modules
    assert not {"activities", "workflows", "worker"} & passed
    async with worker:
        greeting = await client.execute_workflow(
            "GreetingWorkflow", "Ada", id=f"greet-{uuid.uuid4()}", task_queue=task_queue
        )
        report = await research(client, task_queue)
    assert greeting == "Hello, Ada!"
    assert report["end_reason"] == "grounded"
    assert [e["tool"] for e in report["evidence"]] == ["lookup"]
