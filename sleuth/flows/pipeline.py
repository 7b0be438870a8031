"""The one control flow of a composition pipeline: `next_pipeline_step(run)` says what runs next.

`PipelineRun` is a pipeline run's progress as plain data: its shape (kind, stage names, a
parallel branch's own task, merge mode, loop limit) and what happened so far (outputs, loop
verdicts, failures). `next_pipeline_step` is a pure function of it; `record_stages` and
`record_condition` return the run with a result folded in. `drive_pipeline` is the loop over
them, and both runners call it with their own way of running a step (`PipelineRunner`):
`Pipeline.run` runs a stage in-process, `workflows.PipelineWorkflow` as an activity (a nested
pipeline as a child workflow), so both compose prompts, merge outputs and stop identically.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, Field

PipelineKind = Literal["sequential", "parallel", "loop"]
MergeMode = Literal["concat", "last"]


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


def follow_up_prompt(task: str, previous_output: str) -> str:
    """The input of a sequential stage after the first, and of every loop run after the first."""
    return f"Original task: {task}\n\nOutput of the previous step:\n{previous_output}"


def merge_outputs(outputs: Sequence[str], merge: MergeMode) -> str:
    """`concat`: the non-empty outputs joined by blank lines; `last`: the last agent's output."""
    if merge == "last":
        return outputs[-1] if outputs else ""
    return "\n\n".join(o for o in outputs if o.strip())


class StageOutcome(BaseModel):
    """One stage's output, or why it failed (`stage 'x' failed: Type: message`)."""

    output: str = ""
    error: str | None = None


class PipelineRun(BaseModel):
    """Everything `next_pipeline_step` needs about one pipeline run. Plain data."""

    kind: PipelineKind
    task: str
    stages: list[str]
    """The stages' names, in order (a loop has one)."""
    branch_tasks: list[str | None] = Field(default_factory=list)
    """A parallel branch's own task (from `task_map`), by position; None: the pipeline's task."""
    merge: MergeMode = "concat"
    max_loops: int = 1
    outputs: list[str] = Field(default_factory=list)
    verdicts: list[bool] = Field(default_factory=list)
    """A loop's condition on each output so far."""
    errors: list[str] = Field(default_factory=list)


class StageCall(BaseModel):
    """Run stage `index` on `task`; `loop` is the loop run's number (1-based), None elsewhere."""

    index: int
    name: str
    task: str
    loop: int | None = None


class RunStages(BaseModel):
    """Run these stages, all at once when there are several (a parallel pipeline's branches)."""

    kind: Literal["stages"] = "stages"
    calls: list[StageCall]


class CheckCondition(BaseModel):
    """Ask a loop's condition whether `output`, of loop run `loop`, is good enough (a loop
    without a condition: never)."""

    kind: Literal["condition"] = "condition"
    output: str
    loop: int


class Done(BaseModel):
    """The run is over; `result` is what it produced."""

    kind: Literal["done"] = "done"
    result: PipelineResult


PipelineStep = RunStages | CheckCondition | Done


def next_pipeline_step(run: PipelineRun) -> PipelineStep:
    """What runs next. Pure: both runners drive it.

    A failure ends the run with `success=False`. Sequential: the next stage, on the task and then
    on the previous output plus the task. Parallel: every branch at once, then the merge. Loop:
    the agent, then its condition, until the condition holds or `max_loops` runs are done.
    """
    outputs = run.outputs
    if run.errors:
        error = "; ".join(run.errors)
        return Done(
            result=PipelineResult(outputs=outputs, success=False, error=error, stop_reason="error")
        )
    if run.kind == "parallel":
        if outputs:
            merged = merge_outputs(outputs, run.merge)
            return Done(result=PipelineResult(final_output=merged, outputs=outputs))
        calls = [
            StageCall(index=index, name=name, task=_branch_task(run, index))
            for index, name in enumerate(run.stages)
        ]
        return RunStages(calls=calls)
    if run.kind == "sequential":
        if len(outputs) == len(run.stages):
            return Done(result=PipelineResult(final_output=outputs[-1], outputs=outputs))
        index = len(outputs)
        return RunStages(calls=[StageCall(index=index, name=run.stages[index], task=_prompt(run))])
    if outputs and len(run.verdicts) < len(outputs):
        return CheckCondition(output=outputs[-1], loop=len(outputs))
    if run.verdicts and run.verdicts[-1]:
        met = PipelineResult(final_output=outputs[-1], outputs=outputs, stop_reason="condition_met")
        return Done(result=met)
    if len(outputs) >= run.max_loops:
        capped = PipelineResult(final_output=outputs[-1], outputs=outputs, stop_reason="max_loops")
        return Done(result=capped)
    loop = len(outputs) + 1
    call = StageCall(index=0, name=run.stages[0], task=_prompt(run), loop=loop)
    return RunStages(calls=[call])


def record_stages(run: PipelineRun, outcomes: Sequence[StageOutcome]) -> PipelineRun:
    """`run` after the stages of a `RunStages` step ended with `outcomes` (in call order).

    A parallel run keeps one output per branch ("" for a failed one); a sequential stage or a
    loop run adds its output only when it succeeded.
    """
    errors = [o.error for o in outcomes if o.error is not None]
    if run.kind == "parallel":
        outputs = [*run.outputs, *(o.output for o in outcomes)]
    else:
        outputs = [*run.outputs, *(o.output for o in outcomes if o.error is None)]
    return run.model_copy(update={"outputs": outputs, "errors": [*run.errors, *errors]})


def record_condition(run: PipelineRun, met: bool, error: str | None = None) -> PipelineRun:
    """`run` after its loop condition said `met` about the latest output (or failed with `error`)."""
    if error is not None:
        return run.model_copy(update={"errors": [*run.errors, error]})
    return run.model_copy(update={"verdicts": [*run.verdicts, met]})


def stage_failure(stage: str, reason: str) -> str:
    """How a failed stage is reported, in-process and durably alike: `reason` is `Type: message`
    for a stage that raised, the nested pipeline's own error for a nested pipeline."""
    return f"stage {stage!r} failed: {reason}"


class PipelineRunner(Protocol):
    """How one runner carries out the steps `drive_pipeline` hands it."""

    async def run_stage(self, call: StageCall) -> StageOutcome:
        """Run one stage; a failure comes back as `StageOutcome.error`, never raised."""
        ...

    async def check_condition(self, step: CheckCondition) -> tuple[bool, str | None]:
        """(met, error): the loop condition's verdict, or why checking it failed."""
        ...


async def drive_pipeline(run: PipelineRun, runner: PipelineRunner) -> PipelineResult:
    """Run `run` to its end: each step from `next_pipeline_step`, carried out by `runner`
    (the stages of one step at once)."""
    while True:
        step = next_pipeline_step(run)
        if isinstance(step, Done):
            return step.result
        if isinstance(step, RunStages):
            outcomes = await asyncio.gather(*(runner.run_stage(call) for call in step.calls))
            run = record_stages(run, outcomes)
        else:
            met, error = await runner.check_condition(step)
            run = record_condition(run, met, error)


def _branch_task(run: PipelineRun, index: int) -> str:
    own = run.branch_tasks[index] if index < len(run.branch_tasks) else None
    return own if own is not None else run.task


def _prompt(run: PipelineRun) -> str:
    """A sequential stage's or loop run's input: the task, then the last output plus the task."""
    return follow_up_prompt(run.task, run.outputs[-1]) if run.outputs else run.task
