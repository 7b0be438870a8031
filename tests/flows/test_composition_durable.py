"""PipelineWorkflow: stages as activities (retried), concurrent branches, loops, nested child workflows."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.pipeline_models import PipelineConfig, PipelineInput
from sleuth.activities.policy import ActivitySettings, RetrySettings
from sleuth.apps.app import App
from sleuth.flows.composition import (
    LoopAgent,
    ParallelPipeline,
    SequentialPipeline,
    follow_up_prompt,
)
from sleuth.models import RetryableModelError
from sleuth.workers.worker import build_worker
from sleuth.workflows import PipelineWorkflow
from tests.flows.test_composition import Boom, echo_agent

FAST = PipelineConfig(
    stage=ActivitySettings(
        heartbeat_seconds=30, retry=RetrySettings(initial_interval_seconds=0.1, maximum_attempts=3)
    )
)


async def run_pipeline(env: WorkflowEnvironment, app: App, name: str, task: str):  # type: ignore[no-untyped-def]
    task_queue = str(uuid.uuid4())
    async with build_worker(env.client, app, task_queue=task_queue):
        handle = await env.client.start_workflow(
            PipelineWorkflow.run,
            PipelineInput(pipeline=name, task=task, config=FAST),
            id=f"pipeline-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        result = await handle.result()
        progress = await handle.query(PipelineWorkflow.progress)
    return handle, result, progress


async def test_durable_sequential_with_a_stage_retried_once(time_env: WorkflowEnvironment) -> None:
    attempts: list[str] = []

    async def flaky(task: str) -> str:
        attempts.append(task)
        if len(attempts) == 1:
            raise RetryableModelError("provider overloaded", status_code=529)
        return f"draft({task})"

    app = App()
    app.agent("research", lambda: echo_agent("research"))
    app.agent("draft", lambda: flaky)
    app.agent("review", lambda: echo_agent("review"))
    app.pipeline("report", SequentialPipeline(agents=["research", "draft", "review"]))

    _, result, progress = await run_pipeline(time_env, app, "report", "why?")
    in_process = await app.get_pipeline("report").run("why?", app=app)
    assert len(attempts) == 3  # two durable attempts (the first failed), one in-process run
    assert result.success, result.error
    assert result.outputs[1] == f"draft({follow_up_prompt('why?', 'research(why?)')})"
    assert result == in_process  # same prompts and result as the in-process pipeline
    assert (progress.stages, progress.stages_done, progress.finished) == (3, 3, True)


async def test_durable_parallel_branches_run_concurrently(time_env: WorkflowEnvironment) -> None:
    started: list[str] = []
    both_started = asyncio.Event()

    def branch(name: str):  # type: ignore[no-untyped-def]
        async def run(task: str) -> str:
            started.append(name)
            if len(started) == 2:
                both_started.set()
            await both_started.wait()  # a sequential runner would never get here
            return f"{name}:{task}"

        return run

    app = App()
    app.agent("web", lambda: branch("web"))
    app.agent("docs", lambda: branch("docs"))
    app.pipeline(
        "fan",
        ParallelPipeline(agents=["web", "docs"], task_map={"docs": "search docs"}, merge="last"),
    )
    _, result, _ = await run_pipeline(time_env, app, "fan", "what changed?")
    assert result.success, result.error
    assert result.outputs == ["web:what changed?", "docs:search docs"]
    assert result.final_output == "docs:search docs"


async def test_durable_loop_by_condition_and_by_max_loops(time_env: WorkflowEnvironment) -> None:
    app = App()
    app.agent("reviser", lambda: echo_agent("rev"))
    app.pipeline("until", LoopAgent("reviser", lambda out: out.count("rev(") >= 2, max_loops=5))
    app.pipeline("capped", LoopAgent("reviser", lambda out: False, max_loops=2))

    _, until, progress = await run_pipeline(time_env, app, "until", "t")
    assert until.stop_reason == "condition_met" and len(until.outputs) == 2
    assert progress.loops == 2
    _, capped, _ = await run_pipeline(time_env, app, "capped", "t")
    assert capped.stop_reason == "max_loops" and len(capped.outputs) == 2
    assert capped.final_output == capped.outputs[-1]


async def test_durable_nested_pipelines_are_child_workflows(dev_env: WorkflowEnvironment) -> None:
    app = App()
    for name in ("web", "docs", "writer", "editor"):
        app.agent(name, lambda name=name: echo_agent(name))
    app.pipeline("polish", SequentialPipeline(agents=["editor"]))
    app.pipeline(
        "report",
        SequentialPipeline(agents=[ParallelPipeline(agents=["web", "docs"]), "writer", "polish"]),
    )
    handle, result, _ = await run_pipeline(dev_env, app, "report", "q")
    in_process = await app.get_pipeline("report").run("q", app=app)
    assert result.success, result.error
    assert result == in_process
    inline = await dev_env.client.get_workflow_handle(f"{handle.id}.1").describe()
    named = await dev_env.client.get_workflow_handle(f"{handle.id}.3").describe()
    assert inline.workflow_type == named.workflow_type == "PipelineWorkflow"
    assert await named.static_summary() == "stage 3/3: nested pipeline polish"


async def test_durable_stage_that_keeps_failing_gives_success_false(
    time_env: WorkflowEnvironment,
) -> None:
    app = App()
    app.agent("first", lambda: echo_agent("first"))
    app.agent("boom", lambda: Boom())
    app.pipeline("broken", SequentialPipeline(agents=["first", "boom", "first"]))
    _, result, _ = await run_pipeline(time_env, app, "broken", "task")
    in_process = await app.get_pipeline("broken").run("task", app=app)
    assert result.success is False
    assert (
        result.error
        == in_process.error
        == ("stage 'boom' failed: RuntimeError: the data source is down")
    )
    assert result.outputs == ["first(task)"]


async def test_unknown_stage_name_fails_at_once_listing_what_exists(
    time_env: WorkflowEnvironment,
) -> None:
    app = App()
    app.agent("writer", lambda: echo_agent("writer"))
    app.pipeline("typo", SequentialPipeline(agents=["writer", "wirter"]))
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        with pytest.raises(WorkflowFailureError) as failure:
            await time_env.client.execute_workflow(
                PipelineWorkflow.run,
                PipelineInput(pipeline="typo", task="t"),
                id=f"pipeline-{uuid.uuid4()}",
                task_queue=task_queue,
            )
    cause = failure.value.cause
    assert "unknown agent or pipeline 'wirter'; registered: typo, writer" in str(cause)
