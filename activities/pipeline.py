"""Pipeline activities: read a registered pipeline's shape, run one agent stage, check a loop's condition.

Stages run the same `sleuth.flows.composition.call_stage` the in-process pipelines use; a stage that
raises fails its activity, which Temporal retries per the stage's policy. Stages and conditions
heartbeat on a timer. A stage that is a `sleuth.Agent` makes a checkpoint durable in its journal
after every model turn and tool call (`sleuth.activities.checkpoints`), and a retried attempt resumes
from it, so its completed tool calls are not run again; other stages (functions, decomposers)
start over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from sleuth.activities.errors import ConfigError, mapped_errors
from sleuth.activities.events import streams_events
from sleuth.activities.heartbeat import checkpointing, heartbeating
from sleuth.activities.pipeline_models import (
    ConditionInput,
    ConditionOutput,
    DescribeInput,
    PipelineSpec,
    StageInput,
    StageOutput,
    StageSpec,
)
from sleuth.agent import Agent
from sleuth.apps.app import App, UnknownNameError
from sleuth.flows.composition import (
    LoopAgent,
    ParallelPipeline,
    Pipeline,
    call_stage,
    check_condition,
    output_text,
    resolve_stage,
    stage_at,
    stage_name,
)
from sleuth.runtime.artifacts import default_artifact_store


def pipeline_at(app: App, name: str, path: list[int]) -> Pipeline:
    """The registered pipeline `name`, or the inline pipeline nested in it at `path`."""
    root = app.get_pipeline(name)
    if not isinstance(root, Pipeline):
        raise ConfigError(
            f"pipeline {name!r} is a {type(root).__name__}; register a SequentialPipeline, "
            "ParallelPipeline or LoopAgent (or a function returning one)"
        )
    target = stage_at(root, path)
    if not isinstance(target, Pipeline):
        raise ConfigError(f"stage {path} of pipeline {name!r} is not a pipeline")
    return target


def _stage_spec(app: App, pipeline: Pipeline, index: int, agent: Any) -> StageSpec:
    name = stage_name(agent, index)
    task = pipeline.own_task(index) if isinstance(pipeline, ParallelPipeline) else None
    if isinstance(agent, Pipeline):
        return StageSpec(index=index, name=name, kind="pipeline", task=task)
    if isinstance(agent, str):
        if agent in app.agent_names:
            return StageSpec(index=index, name=name, kind="agent", task=task)
        if agent in app.pipeline_names:
            return StageSpec(index=index, name=name, kind="named_pipeline", task=task)
        raise UnknownNameError("agent or pipeline", agent, [*app.agent_names, *app.pipeline_names])
    return StageSpec(index=index, name=name, kind="agent", task=task)


class PipelineActivities:
    """The activities `PipelineWorkflow` schedules, bound to one App."""

    def __init__(self, app: App):
        self.app = app

    @activity.defn(name="pipeline.describe")
    @mapped_errors
    @streams_events
    async def describe(self, request: DescribeInput) -> PipelineSpec:
        pipeline = pipeline_at(self.app, request.pipeline, request.path)
        return PipelineSpec(
            kind=pipeline.kind,
            name=pipeline.name,
            stages=[
                _stage_spec(self.app, pipeline, i, agent) for i, agent in enumerate(pipeline.agents)
            ],
            merge=pipeline.merge if isinstance(pipeline, ParallelPipeline) else "concat",
            max_loops=pipeline.max_loops if isinstance(pipeline, LoopAgent) else 1,
            has_condition=isinstance(pipeline, LoopAgent) and pipeline.condition is not None,
        )

    @activity.defn(name="pipeline.stage")
    @mapped_errors
    @streams_events
    async def stage(self, request: StageInput) -> StageOutput:
        pipeline = pipeline_at(self.app, request.pipeline, request.path)
        agent = resolve_stage(stage_at(pipeline, [request.index]), self.app)
        if not isinstance(agent, Agent):
            async with heartbeating(every_seconds=request.heartbeat_every_seconds):
                return StageOutput(output=await call_stage(agent, request.task, self.app))
        async with checkpointing(
            default_artifact_store(), every_seconds=request.heartbeat_every_seconds
        ) as (checkpoint, save):
            result = await agent.arun(request.task, checkpoint=checkpoint, on_checkpoint=save)
        return StageOutput(output=output_text(result))

    @activity.defn(name="pipeline.condition")
    @mapped_errors
    @streams_events
    async def condition(self, request: ConditionInput) -> ConditionOutput:
        pipeline = pipeline_at(self.app, request.pipeline, request.path)
        if not isinstance(pipeline, LoopAgent):
            raise ConfigError(f"pipeline {request.pipeline!r} at {request.path} is not a LoopAgent")
        async with heartbeating():
            return ConditionOutput(met=await check_condition(pipeline.condition, request.output))

    def all(self) -> list[Callable[..., Any]]:
        return [self.describe, self.stage, self.condition]
