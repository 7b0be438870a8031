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
the same pipeline runs durably as `workflows.PipelineWorkflow`, built from the helper functions
below so both runners compose prompts and merge outputs identically.

Events (`sleuth.events`): `composition.pipeline.start/.end`, `composition.stage.start/.end`,
`composition.fanout`, `composition.merge` and `composition.loop.iteration`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from sleuth.events import emit

MergeMode = Literal["concat", "last"]
LoopCondition = Callable[[str], bool | Awaitable[bool]]


class PipelineResult(BaseModel):
    """What a pipeline run produced."""

    final_output: str = ""
    """The answer: the last stage's output, the merged branches, or the loop's last output."""
    outputs: list[str] = Field(default_factory=list)
    """Every stage's output in order (branches in list order; one per loop run)."""
    success: bool = True
    """False when an agent raised; `error` says which and why."""
    error: str | None = None
    stop_reason: str = "completed"
    """`completed`, `error`, or for a loop `condition_met` / `max_loops`."""

    @property
    def message(self) -> str:
        return self.final_output


class PipelineStageError(RuntimeError):
    """A nested pipeline failed; the outer pipeline reports it as its own failure."""


# -- helpers shared with the durable runner ---------------------------------------------------


def follow_up_prompt(task: str, previous_output: str) -> str:
    """The input of a sequential stage after the first, and of every loop run after the first."""
    return f"Original task: {task}\n\nOutput of the previous step:\n{previous_output}"


def merge_outputs(outputs: Sequence[str], merge: MergeMode) -> str:
    """`concat`: the non-empty outputs joined by blank lines; `last`: the last agent's output."""
    if merge == "last":
        return outputs[-1] if outputs else ""
    return "\n\n".join(o for o in outputs if o.strip())


def branch_task(task: str, task_map: Mapping[int | str, str] | None, index: int, name: str) -> str:
    """A parallel branch's task: its own from `task_map` (by position or by name), else `task`."""
    if task_map:
        if index in task_map:
            return task_map[index]
        if name in task_map:
            return task_map[name]
    return task


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
        from sleuth.app import current_app

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
        raise TypeError(
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


def describe_error(stage: str, exc: BaseException) -> str:
    return f"stage {stage!r} failed: {type(exc).__name__}: {exc}"


# -- the pipelines ----------------------------------------------------------------------------


class Pipeline:
    """Base class: `run`/`arun`/`run_sync` around a subclass's `_run`."""

    kind = "pipeline"

    def __init__(self, agents: Sequence[Any], *, name: str | None = None):
        self.agents = list(agents)
        self.name = name or self.kind

    async def run(self, task: str, *, app: Any | None = None) -> PipelineResult:
        """Run the pipeline on `task`. Never raises for an agent's error: see `success`/`error`."""
        emit(
            "composition.pipeline.start",
            pipeline=self.name,
            kind=self.kind,
            stages=[stage_name(a, i) for i, a in enumerate(self.agents)],
        )
        outputs: list[str] = []
        try:
            result = await self._run(task, app, outputs)
        except _StageFailed as failed:
            result = PipelineResult(
                final_output="",
                outputs=outputs,
                success=False,
                error=failed.message,
                stop_reason="error",
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

    async def _stage(self, index: int, agent: Any, task: str, app: Any | None) -> str:
        name = stage_name(agent, index)
        emit("composition.stage.start", pipeline=self.name, index=index, stage=name)
        try:
            output = await call_stage(agent, task, app)
        except Exception as exc:
            emit(
                "composition.stage.end",
                pipeline=self.name,
                index=index,
                stage=name,
                success=False,
                error=str(exc),
            )
            raise _StageFailed(describe_error(name, exc)) from exc
        emit(
            "composition.stage.end",
            pipeline=self.name,
            index=index,
            stage=name,
            success=True,
            output_preview=output[:200],
        )
        return output

    async def _run(self, task: str, app: Any | None, outputs: list[str]) -> PipelineResult:
        raise NotImplementedError


class _StageFailed(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class SequentialPipeline(Pipeline):
    """Agent N+1 gets agent N's output plus the original task; the last output is the answer."""

    kind = "sequential"

    def __init__(self, agents: Sequence[Any], *, name: str | None = None):
        if not agents:
            raise ValueError("SequentialPipeline needs at least one agent")
        super().__init__(agents, name=name)

    async def _run(self, task: str, app: Any | None, outputs: list[str]) -> PipelineResult:
        prompt = task
        for index, agent in enumerate(self.agents):
            output = await self._stage(index, agent, prompt, app)
            outputs.append(output)
            prompt = follow_up_prompt(task, output)
        return PipelineResult(final_output=outputs[-1], outputs=outputs)


class ParallelPipeline(Pipeline):
    """Every agent runs at once on the task (or its `task_map` entry); outputs are merged.

    `task_map` maps a branch's position or name to its own task. `merge="concat"` joins the
    non-empty outputs; `merge="last"` keeps the last agent's output.
    """

    kind = "parallel"

    def __init__(
        self,
        agents: Sequence[Any],
        *,
        task_map: Mapping[int | str, str] | None = None,
        merge: MergeMode = "concat",
        name: str | None = None,
    ):
        if not agents:
            raise ValueError("ParallelPipeline needs at least one agent")
        if merge not in ("concat", "last"):
            raise ValueError(f"merge must be 'concat' or 'last', not {merge!r}")
        super().__init__(agents, name=name)
        self.task_map = dict(task_map or {})
        self.merge: MergeMode = merge

    def branch_tasks(self, task: str) -> list[str]:
        return [
            branch_task(task, self.task_map, i, stage_name(a, i)) for i, a in enumerate(self.agents)
        ]

    async def _run(self, task: str, app: Any | None, outputs: list[str]) -> PipelineResult:
        tasks = self.branch_tasks(task)
        emit("composition.fanout", pipeline=self.name, branches=len(self.agents))
        settled = await asyncio.gather(
            *(
                self._stage(i, a, t, app)
                for i, (a, t) in enumerate(zip(self.agents, tasks, strict=True))
            ),
            return_exceptions=True,
        )
        errors = [s.message for s in settled if isinstance(s, _StageFailed)]
        for item in settled:
            if isinstance(item, BaseException) and not isinstance(item, _StageFailed):
                raise item
        outputs.extend(s if isinstance(s, str) else "" for s in settled)
        if errors:
            raise _StageFailed("; ".join(errors))
        emit("composition.merge", pipeline=self.name, merge=self.merge, branches=len(outputs))
        return PipelineResult(final_output=merge_outputs(outputs, self.merge), outputs=outputs)


class LoopAgent(Pipeline):
    """Rerun `agent` on its own output plus the task until `condition(output)` or `max_loops`.

    `condition` is a function of the latest output (sync or async); without one the agent runs
    `max_loops` times. `stop_reason` says which ended the loop.
    """

    kind = "loop"

    def __init__(
        self,
        agent: Any,
        condition: LoopCondition | None = None,
        max_loops: int = 3,
        *,
        name: str | None = None,
    ):
        if max_loops < 1:
            raise ValueError(f"max_loops must be at least 1, not {max_loops}")
        super().__init__([agent], name=name)
        self.agent = agent
        self.condition = condition
        self.max_loops = max_loops

    async def _run(self, task: str, app: Any | None, outputs: list[str]) -> PipelineResult:
        prompt = task
        for loop in range(1, self.max_loops + 1):
            output = await self._stage(0, self.agent, prompt, app)
            outputs.append(output)
            try:
                met = await check_condition(self.condition, output)
            except Exception as exc:
                raise _StageFailed(describe_error("condition", exc)) from exc
            emit("composition.loop.iteration", pipeline=self.name, loop=loop, condition_met=met)
            if met:
                return PipelineResult(
                    final_output=output, outputs=outputs, stop_reason="condition_met"
                )
            prompt = follow_up_prompt(task, output)
        return PipelineResult(final_output=outputs[-1], outputs=outputs, stop_reason="max_loops")


def stage_at(pipeline: Pipeline, path: Sequence[int]) -> Any:
    """The stage reached from `pipeline` by following stage indexes (for nested inline pipelines)."""
    current: Any = pipeline
    for depth, index in enumerate(path):
        if not isinstance(current, Pipeline) or not 0 <= index < len(current.agents):
            raise LookupError(
                f"pipeline {pipeline.name!r} has no stage at path {list(path[: depth + 1])}"
            )
        current = current.agents[index]
    return current
