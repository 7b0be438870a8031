"""Composition pipelines: run agents one after another, side by side, or in a loop.

`SequentialPipeline(agents=[a, b, c])` feeds each agent the previous output plus the original task;
`ParallelPipeline(agents=[...], task_map=None, merge="concat"|"last")` runs every agent at once on
the task (or its own task from `task_map`) and merges; `LoopAgent(agent, condition, max_loops)`
reruns one agent on its own output until `condition(output)` holds or `max_loops` runs are done.
Each `run(task)` returns a `PipelineResult`; an agent that raises makes it `success=False` with
the error, never an exception.

A stage is anything agent-shaped: an object with `arun(task)` (a `sleuth.Agent`, a
`DeepDecomposer`, or another pipeline — pipelines nest), one with `run_sync(task)`, a plain
(async) function of the task, or the *name* of an agent or pipeline registered in an `App`.
Registered in an App (`app.pipeline("report", SequentialPipeline(agents=["research", "draft"]))`)
the same pipeline runs durably as `workflows.PipelineWorkflow`. Both runners drive the same
control flow, `sleuth.flows.pipeline.drive_pipeline` over `next_pipeline_step`, so they compose
prompts, merge outputs and stop identically; this module runs each step in-process.

Events (`sleuth.runtime.events`): `composition.pipeline.start/.end`, `composition.stage.start/.end`,
`composition.fanout`, `composition.merge` and `composition.loop.iteration`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sleuth.flows.pipeline import (
    CheckCondition,
    MergeMode,
    PipelineKind,
    PipelineResult,
    PipelineRun,
    StageCall,
    StageOutcome,
    drive_pipeline,
    follow_up_prompt,
    merge_outputs,
    stage_failure,
)
from sleuth.runtime.errors import InvalidSettingError, SleuthError, UnsupportedArgumentError
from sleuth.runtime.events import emit

__all__ = [
    "LoopAgent",
    "LoopCondition",
    "MergeMode",
    "ParallelPipeline",
    "Pipeline",
    "PipelineResult",
    "PipelineStageError",
    "SequentialPipeline",
    "StageNotFoundError",
    "call_stage",
    "check_condition",
    "follow_up_prompt",
    "merge_outputs",
    "output_text",
    "resolve_stage",
    "stage_at",
    "stage_name",
]

LoopCondition = Callable[[str], bool | Awaitable[bool]]


class PipelineStageError(SleuthError, RuntimeError):
    """A nested pipeline failed; the outer pipeline reports it as its own failure."""


class StageNotFoundError(SleuthError, LookupError):
    """A stage path that leads nowhere in a pipeline (a worker with a different App?)."""


def stage_name(agent: Any, index: int) -> str:
    """A readable name for a stage: a registered name, the agent's `name`, or its type."""
    if isinstance(agent, str):
        return agent
    name = getattr(agent, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(agent, "__name__", None) or f"{type(agent).__name__}[{index}]"


def output_text(result: Any) -> str:
    """The text of whatever a stage returned (a failed nested pipeline raises)."""
    if isinstance(result, PipelineResult):
        if not result.success:
            raise PipelineStageError(result.error or "the nested pipeline failed")
        return result.final_output
    if isinstance(result, str):
        return result
    for attribute in ("message", "final_output", "answer"):
        value = getattr(result, attribute, None)
        if isinstance(value, str):
            return value
    return "" if result is None else str(result)


def resolve_stage(agent: Any, app: Any | None) -> Any:
    """A name becomes the registered agent (fresh from its factory) or pipeline; objects pass."""
    if not isinstance(agent, str):
        return agent
    if app is None:
        from sleuth.apps.app import current_app

        app = current_app()
    if agent in app.pipeline_names and agent not in app.agent_names:
        return app.get_pipeline(agent)
    return app.new_agent(agent)


async def call_stage(agent: Any, task: str, app: Any | None = None) -> str:
    """Run one stage on `task` and return its output text."""
    agent = resolve_stage(agent, app)
    if isinstance(agent, Pipeline):
        result: Any = await agent.run(task, app=app)
    elif hasattr(agent, "arun"):
        result = await agent.arun(task)
    elif hasattr(agent, "run_sync"):
        result = await asyncio.to_thread(agent.run_sync, task)
    elif callable(agent):
        result = agent(task)
        if inspect.isawaitable(result):
            result = await result
    else:
        raise UnsupportedArgumentError(
            f"{type(agent).__name__} is not agent-shaped: give it arun(task) or run_sync(task), "
            "or pass a function of the task"
        )
    return output_text(result)


async def check_condition(condition: LoopCondition | None, output: str) -> bool:
    """Evaluate a loop condition (sync or async); no condition never holds."""
    if condition is None:
        return False
    verdict = condition(output)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    return bool(verdict)


# -- the pipelines ----------------------------------------------------------------------------


class Pipeline:
    """Base class: a list of stages and how they run (`kind`); `run`/`arun`/`run_sync`."""

    kind: PipelineKind = "sequential"

    def __init__(self, agents: Sequence[Any], *, name: str | None = None):
        if not agents:
            raise InvalidSettingError(f"{type(self).__name__} needs at least one agent")
        self.agents = list(agents)
        self.name = name or self.kind

    def plan(self, task: str) -> PipelineRun:
        """A run of this pipeline on `task`, before any stage ran."""
        return PipelineRun(
            kind=self.kind,
            task=task,
            stages=[stage_name(a, i) for i, a in enumerate(self.agents)],
        )

    async def run(self, task: str, *, app: Any | None = None) -> PipelineResult:
        """Run the pipeline on `task`. Never raises for an agent's error: see `success`/`error`."""
        emit(
            "composition.pipeline.start",
            pipeline=self.name,
            kind=self.kind,
            stages=[stage_name(a, i) for i, a in enumerate(self.agents)],
        )
        planned = self.plan(task)
        if planned.kind == "parallel":
            emit("composition.fanout", pipeline=self.name, branches=len(self.agents))
        result = await drive_pipeline(planned, _InProcess(self, app))
        if planned.kind == "parallel" and result.success:
            emit(
                "composition.merge",
                pipeline=self.name,
                merge=planned.merge,
                branches=len(result.outputs),
            )
        emit(
            "composition.pipeline.end",
            pipeline=self.name,
            kind=self.kind,
            success=result.success,
            error=result.error,
            stop_reason=result.stop_reason,
        )
        return result

    async def arun(self, task: str, *, app: Any | None = None) -> PipelineResult:
        """Same as `run`: a pipeline is agent-shaped, so it can be a stage of another pipeline."""
        return await self.run(task, app=app)

    def run_sync(self, task: str, *, app: Any | None = None) -> PipelineResult:
        return asyncio.run(self.run(task, app=app))

    @property
    def loop_condition(self) -> LoopCondition | None:
        """The condition that ends a loop (None: a pipeline that is not a loop, or runs them all)."""
        return None


@dataclass
class _InProcess:
    """Carries out `drive_pipeline`'s steps in this process (a `PipelineRunner`)."""

    pipeline: Pipeline
    app: Any | None

    async def run_stage(self, call: StageCall) -> StageOutcome:
        pipeline = self.pipeline
        emit("composition.stage.start", pipeline=pipeline.name, index=call.index, stage=call.name)
        try:
            output = await call_stage(pipeline.agents[call.index], call.task, self.app)
        except Exception as exc:
            emit(
                "composition.stage.end",
                pipeline=pipeline.name,
                index=call.index,
                stage=call.name,
                success=False,
                error=str(exc),
            )
            reason = str(exc) if isinstance(exc, PipelineStageError) else _raised(exc)
            return StageOutcome(error=stage_failure(call.name, reason))
        emit(
            "composition.stage.end",
            pipeline=pipeline.name,
            index=call.index,
            stage=call.name,
            success=True,
            output_preview=output[:200],
        )
        return StageOutcome(output=output)

    async def check_condition(self, step: CheckCondition) -> tuple[bool, str | None]:
        try:
            met = await check_condition(self.pipeline.loop_condition, step.output)
        except Exception as exc:
            return False, stage_failure("condition", _raised(exc))
        emit(
            "composition.loop.iteration",
            pipeline=self.pipeline.name,
            loop=step.loop,
            condition_met=met,
        )
        return met, None


def _raised(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class SequentialPipeline(Pipeline):
    """Agent N+1 gets agent N's output plus the original task; the last output is the answer."""

    kind: PipelineKind = "sequential"


class ParallelPipeline(Pipeline):
    """Every agent runs at once on the task (or its `task_map` entry); outputs are merged.

    `task_map` maps a branch's position or name to its own task. `merge="concat"` joins the
    non-empty outputs; `merge="last"` keeps the last agent's output.
    """

    kind: PipelineKind = "parallel"

    def __init__(
        self,
        agents: Sequence[Any],
        *,
        task_map: Mapping[int | str, str] | None = None,
        merge: MergeMode = "concat",
        name: str | None = None,
    ):
        if merge not in ("concat", "last"):
            raise InvalidSettingError(f"merge must be 'concat' or 'last', not {merge!r}")
        super().__init__(agents, name=name)
        self.task_map = dict(task_map or {})
        self.merge: MergeMode = merge

    def own_task(self, index: int) -> str | None:
        """Branch `index`'s own task from `task_map` (by position, then by name), if any."""
        return self.task_map.get(index, self.task_map.get(stage_name(self.agents[index], index)))

    def plan(self, task: str) -> PipelineRun:
        planned = super().plan(task)
        planned.branch_tasks = [self.own_task(i) for i in range(len(self.agents))]
        planned.merge = self.merge
        return planned


class LoopAgent(Pipeline):
    """Rerun `agent` on its own output plus the task until `condition(output)` or `max_loops`.

    `condition` is a function of the latest output (sync or async); without one the agent runs
    `max_loops` times. `stop_reason` says which ended the loop.
    """

    kind: PipelineKind = "loop"

    def __init__(
        self,
        agent: Any,
        condition: LoopCondition | None = None,
        max_loops: int = 3,
        *,
        name: str | None = None,
    ):
        if max_loops < 1:
            raise InvalidSettingError(f"max_loops must be at least 1, not {max_loops}")
        super().__init__([agent], name=name)
        self.agent = agent
        self.condition = condition
        self.max_loops = max_loops

    def plan(self, task: str) -> PipelineRun:
        planned = super().plan(task)
        planned.max_loops = self.max_loops
        return planned

    @property
    def loop_condition(self) -> LoopCondition | None:
        return self.condition


def stage_at(pipeline: Pipeline, path: Sequence[int]) -> Any:
    """The stage reached from `pipeline` by following stage indexes (for nested inline pipelines)."""
    current: Any = pipeline
    for depth, index in enumerate(path):
        if not isinstance(current, Pipeline) or not 0 <= index < len(current.agents):
            raise StageNotFoundError(
                f"pipeline {pipeline.name!r} has no stage at path {list(path[: depth + 1])}; "
                "a nested pipeline's path counts stage indexes from 0"
            )
        current = current.agents[index]
    return current
