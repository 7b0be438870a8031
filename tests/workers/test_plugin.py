"""`SleuthPlugin` on a plain temporalio `Client` and `Worker` — no Sleuth helpers — runs Sleuth."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio import activity
from temporalio import client as temporal_client
from temporalio import worker as temporal_worker
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from sleuth import App, create_research_workflow
from sleuth.activities.research_models import ResearchOutcome, ResearchRequest
from sleuth.models.scripted import ScriptedModel
from sleuth.runtime.errors import SleuthError
from sleuth.runtime.settings import SleuthSettings
from sleuth.workers.client import connect
from sleuth.workers.codec import new_key
from sleuth.workers.plugin import SleuthPlugin, SleuthPluginError
from sleuth.workers.telemetry import has_tracing
from sleuth.workflows import ALL_WORKFLOWS
from sleuth.workflows.research import ResearchWorkflow
from tests.helpers.apps.ping_app import PingWorkflow
from tests.helpers.research_scripts import ResearchScript, lookup

HISTORY = Path(__file__).resolve().parents[1] / "research" / "histories" / "research_replan.json"


def research_app() -> App:
    app = App()
    app.research(
        "market",
        create_research_workflow(
            model=ScriptedModel(responder=ResearchScript(verdicts=[True])), tools=[lookup]
        ),  # type: ignore[arg-type]
    )
    return app


def address(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


async def research(
    client: Client, task_queue: str, workflow_id: str | None = None
) -> dict[str, Any]:
    outcome: ResearchOutcome = await client.execute_workflow(
        ResearchWorkflow.run,
        ResearchRequest(prompt="How fast did the CRM market grow?", research="market"),
        id=workflow_id or f"plugin-{uuid.uuid4()}",
        task_queue=task_queue,
        execution_timeout=timedelta(minutes=5),
    )
    return outcome.model_dump(mode="json")["final_state"]


async def test_three_lines_add_sleuth_to_a_plain_client_and_worker(
    dev_env: WorkflowEnvironment,
) -> None:
    task_queue = str(uuid.uuid4())
    client = await Client.connect(address(dev_env), plugins=[SleuthPlugin(research_app())])
    async with Worker(client, task_queue=task_queue, workflows=[PingWorkflow]):
        report = await research(client, task_queue)
        # The worker's own workflows run beside Sleuth's.
        pong = await client.execute_workflow(
            PingWorkflow.run, "hi", id=f"ping-{uuid.uuid4()}", task_queue=task_queue
        )
    assert report["end_reason"] == "grounded" and report["grounding_score"] == 1.0
    assert report["nodes"] == ["plan", "execute", "causal_inference", "summarize", "grounding_eval"]
    assert [e["tool"] for e in report["evidence"]] == ["lookup"]
    assert pong == "pong: hi"


async def test_a_worker_takes_the_plugin_when_its_client_already_speaks_pydantic(
    dev_env: WorkflowEnvironment,
) -> None:
    task_queue = str(uuid.uuid4())
    async with Worker(
        dev_env.client, task_queue=task_queue, plugins=[SleuthPlugin(research_app())]
    ):
        report = await research(dev_env.client, task_queue)
    assert report["end_reason"] == "grounded"


async def test_a_client_without_the_pydantic_converter_is_refused_with_what_to_do(
    dev_env: WorkflowEnvironment,
) -> None:
    plain = await Client.connect(address(dev_env))
    with pytest.raises(SleuthPluginError, match=r"connect it with plugins=\[SleuthPlugin\(app\)\]"):
        Worker(plain, task_queue="never-polled", plugins=[SleuthPlugin(App())])


async def test_the_worker_gets_workflows_activities_failure_types_passthroughs_and_throttle(
    dev_env: WorkflowEnvironment,
) -> None:
    client = await Client.connect(address(dev_env), plugins=[SleuthPlugin(research_app())])
    worker = Worker(
        client, task_queue="never-polled", max_heartbeat_throttle_interval=timedelta(seconds=60)
    )
    config = worker.config(active_config=True)
    assert set(ALL_WORKFLOWS) <= set(config["workflows"])
    names = {activity._Definition.must_from_callable(a).name for a in config["activities"]}
    assert {"research.execute", "agent.tool", "scan.research_item", "pipeline.stage"} <= names
    assert {ValidationError, SleuthError} <= set(config["workflow_failure_exception_types"])
    runner = config["workflow_runner"]
    assert isinstance(runner, SandboxedWorkflowRunner)
    passed = runner.restrictions.passthrough_modules
    # The SDK and activities pass through; the workflow modules and names outside the sleuth
    # namespace (a user's own `activities`) do not (the sandbox matches by prefix).
    assert {"sleuth.agent", "sleuth.research", "sleuth.activities", "sleuth.models"} <= passed
    assert not {"sleuth", "sleuth.workflows", "activities", "workflows"} & passed
    # SLEUTH_HEARTBEAT_THROTTLE_SECONDS' default, as `sleuth worker` has it.
    assert config["max_heartbeat_throttle_interval"] == timedelta(seconds=2)


async def test_a_worker_built_as_a_user_builds_one_follows_the_heartbeat_setting(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = await Client.connect(address(dev_env), data_converter=pydantic_data_converter)
    monkeypatch.setenv("SLEUTH_HEARTBEAT_THROTTLE_SECONDS", "0.5")
    worker = Worker(
        plain, task_queue=f"never-polled-{uuid.uuid4()}", plugins=[SleuthPlugin(research_app())]
    )
    assert worker.config(active_config=True)["max_heartbeat_throttle_interval"] == timedelta(
        seconds=0.5
    )
    # The setting is read when the worker is built, from the same settings `sleuth worker` reads.
    monkeypatch.setenv("SLEUTH_HEARTBEAT_THROTTLE_SECONDS", "7")
    client = await Client.connect(address(dev_env), plugins=[SleuthPlugin(research_app())])
    later = Worker(client, task_queue=f"never-polled-{uuid.uuid4()}")
    assert later.config(active_config=True)["max_heartbeat_throttle_interval"] == timedelta(
        seconds=7
    )
    # Settings given to the plugin win over the environment's; a shorter interval the worker
    # was given stays.
    given = SleuthPlugin(research_app(), settings=SleuthSettings(heartbeat_throttle_seconds=3))
    tuned = Worker(plain, task_queue=f"never-polled-{uuid.uuid4()}", plugins=[given])
    assert tuned.config(active_config=True)["max_heartbeat_throttle_interval"] == timedelta(
        seconds=3
    )
    shorter = Worker(
        plain,
        task_queue=f"never-polled-{uuid.uuid4()}",
        plugins=[SleuthPlugin(research_app())],
        max_heartbeat_throttle_interval=timedelta(seconds=1),
    )
    assert shorter.config(active_config=True)["max_heartbeat_throttle_interval"] == timedelta(
        seconds=1
    )


class CountingInterceptor(temporal_client.Interceptor, temporal_worker.Interceptor):
    """Counts workflow starts (client side) and activity executions (worker side)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.activities: list[str] = []

    def intercept_client(
        self, next: temporal_client.OutboundInterceptor
    ) -> temporal_client.OutboundInterceptor:
        return _CountStarts(next, self)

    def intercept_activity(
        self, next: temporal_worker.ActivityInboundInterceptor
    ) -> temporal_worker.ActivityInboundInterceptor:
        return _CountActivities(next, self)


class _CountStarts(temporal_client.OutboundInterceptor):
    def __init__(self, next: temporal_client.OutboundInterceptor, owner: CountingInterceptor):
        super().__init__(next)
        self.owner = owner

    async def start_workflow(self, input: temporal_client.StartWorkflowInput) -> Any:
        self.owner.started.append(input.workflow)
        return await super().start_workflow(input)


class _CountActivities(temporal_worker.ActivityInboundInterceptor):
    def __init__(
        self, next: temporal_worker.ActivityInboundInterceptor, owner: CountingInterceptor
    ) -> None:
        super().__init__(next)
        self.owner = owner

    async def execute_activity(self, input: temporal_worker.ExecuteActivityInput) -> Any:
        self.owner.activities.append(activity.info().activity_type)
        return await super().execute_activity(input)


async def test_interceptors_given_to_the_plugin_wrap_the_client_and_its_workers(
    dev_env: WorkflowEnvironment,
) -> None:
    counting = CountingInterceptor()
    plugin = SleuthPlugin(research_app(), interceptors=[counting])
    client = await Client.connect(address(dev_env), plugins=[plugin])
    task_queue = str(uuid.uuid4())
    workflow_id = f"intercepted-{uuid.uuid4()}"
    async with Worker(client, task_queue=task_queue):
        await research(client, task_queue, workflow_id)
    history = await dev_env.client.get_workflow_handle(workflow_id).fetch_history()
    scheduled = [
        event.activity_task_scheduled_event_attributes.activity_type.name
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert counting.started == ["ResearchWorkflow"]
    assert scheduled[:2] == ["sleuth.search_attributes", "research.plan"]
    assert counting.activities == scheduled


async def test_the_plugin_traces_a_client_and_its_workers_once(
    dev_env: WorkflowEnvironment,
) -> None:
    traced = await Client.connect(address(dev_env), plugins=[SleuthPlugin(research_app())])
    [tracing] = [
        i
        for i in traced.config(active_config=True)["interceptors"]
        if isinstance(i, TracingInterceptor)
    ]
    worker = Worker(traced, task_queue="never-polled")
    # The worker inherits the client's tracing; a second interceptor would trace every call twice.
    assert not has_tracing(worker.config(active_config=True)["interceptors"])

    # A client that does not trace (connected without the plugin) gets tracing on its workers.
    plain = await Client.connect(address(dev_env), data_converter=pydantic_data_converter)
    assert not has_tracing(plain.config(active_config=True)["interceptors"])
    worker = Worker(plain, task_queue="never-polled", plugins=[SleuthPlugin(research_app())])
    assert has_tracing(worker.config(active_config=True)["interceptors"])

    untraced = Worker(
        plain, task_queue="never-polled-untraced", plugins=[SleuthPlugin(App(), tracing=False)]
    )
    assert not has_tracing(untraced.config(active_config=True)["interceptors"])

    # Sleuth's own `connect` traces, and its plugin adds no second interceptor.
    ours = await connect(address(dev_env), plugins=[SleuthPlugin(research_app())])
    assert (
        sum(
            isinstance(i, TracingInterceptor)
            for i in ours.config(active_config=True)["interceptors"]
        )
        == 1
    )


async def test_with_a_key_the_plugin_encrypts_and_a_worker_on_a_clear_client_is_refused(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", new_key())
    client = await Client.connect(address(dev_env), plugins=[SleuthPlugin(App())])
    handle = await client.start_workflow(
        ResearchWorkflow.run,
        ResearchRequest(prompt="secret question", research="market"),
        id=f"sealed-{uuid.uuid4()}",
        task_queue=str(uuid.uuid4()),
    )
    history = await dev_env.client.get_workflow_handle(handle.id).fetch_history()
    sealed = history.events[0].workflow_execution_started_event_attributes.input.payloads[0]
    assert sealed.metadata["encoding"] == b"binary/encrypted"
    assert b"secret question" not in sealed.data
    await handle.terminate()

    with pytest.raises(SleuthPluginError, match="does not encrypt"):
        Worker(dev_env.client, task_queue="never-polled", plugins=[SleuthPlugin(App())])


async def test_a_replayer_with_the_plugin_replays_history_without_loading_the_app() -> None:
    def no_app() -> App:
        raise AssertionError("replaying needs no App")

    replayer = Replayer(workflows=[], plugins=[SleuthPlugin(no_app)])
    result = await replayer.replay_workflow(
        WorkflowHistory.from_json("plugin-replay", HISTORY.read_text())
    )
    assert result.replay_failure is None
