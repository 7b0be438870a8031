"""`PipelineWorkflow`: a registered composition pipeline, one activity per agent stage.

Input `{"pipeline": "report", "task": "..."}`. The workflow reads the pipeline's shape from the
worker's App, then drives the same control flow as the in-process pipeline
(`sleuth.flows.pipeline.drive_pipeline`: same prompts, same merge, same stop): stages one after
another, parallel branches at once, a loop until its condition or `max_loops`. This module only
says how a step runs durably: an agent stage is an activity, a nested pipeline — inline, or a
stage naming another registered pipeline — is a child `PipelineWorkflow`, a loop condition is an
activity. A stage that still fails after its retries makes the result `success=False` with the
error, like an agent raising in-process.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from sleuth._util.text import preview
    from sleuth.activities.errors import unwrap_cause
    from sleuth.activities.pipeline import PipelineActivities
    from sleuth.activities.pipeline_models import (
        ConditionInput,
        DescribeInput,
        PipelineConfig,
        PipelineInput,
        PipelineProgress,
        PipelineSpec,
        StageInput,
    )
    from sleuth.flows.pipeline import (
        CheckCondition,
        PipelineResult,
        PipelineRun,
        StageCall,
        StageOutcome,
        drive_pipeline,
        stage_failure,
    )


@workflow.defn
class PipelineWorkflow:
    """Runs one registered pipeline (or a pipeline nested in it)."""

    def __init__(self) -> None:
        self._stream = WorkflowStream()
        self._progress = PipelineProgress(pipeline="")

    @workflow.query
    def progress(self) -> PipelineProgress:
        """Stages done, stages running, loop count."""
        return self._progress

    @workflow.run
    async def run(self, request: PipelineInput) -> PipelineResult:
        config = request.config or PipelineConfig()
        label = request.pipeline + "".join(f"[{i}]" for i in request.path)
        progress = self._progress = PipelineProgress(pipeline=label)
        spec = await workflow.execute_activity_method(
            PipelineActivities.describe,
            DescribeInput(pipeline=request.pipeline, path=request.path),
            summary=f"read the shape of pipeline {label}",
            **config.describe.activity_options(),
        )
        progress.kind, progress.stages = spec.kind, len(spec.stages)
        _memo(progress)
        planned = PipelineRun(
            kind=spec.kind,
            task=request.task,
            stages=[stage.name for stage in spec.stages],
            branch_tasks=[stage.task for stage in spec.stages],
            merge=spec.merge,
            max_loops=spec.max_loops,
        )
        result = await drive_pipeline(planned, _Durable(request, config, spec, progress))
        if not result.success:
            workflow.logger.info("pipeline %s failed: %s", label, result.error)
        progress.finished = True
        _memo(progress)
        return result


@dataclass
class _Durable:
    """Carries out `drive_pipeline`'s steps durably (a `PipelineRunner`), keeping `progress`."""

    request: PipelineInput
    config: PipelineConfig
    spec: PipelineSpec
    progress: PipelineProgress

    async def run_stage(self, call: StageCall) -> StageOutcome:
        """One stage as an activity, or a nested pipeline as a child workflow."""
        request, config, progress = self.request, self.config, self.progress
        stage, loop = self.spec.stages[call.index], call.loop
        position = f"stage {stage.index + 1}/{len(self.spec.stages)}"
        position += f", run {loop}" if loop else ""
        if loop:
            progress.loops = loop
        progress.running.append(stage.name)
        _memo(progress)
        try:
            if stage.kind == "agent":
                done = await workflow.execute_activity_method(
                    PipelineActivities.stage,
                    StageInput(
                        pipeline=request.pipeline,
                        path=request.path,
                        index=stage.index,
                        task=call.task,
                        heartbeat_every_seconds=config.heartbeat_every_seconds,
                    ),
                    summary=f"{position} {stage.name}: {preview(call.task, 80)}",
                    **config.stage.activity_options(),
                )
                return StageOutcome(output=done.output)
            nested = await workflow.execute_child_workflow(
                PipelineWorkflow.run,
                PipelineInput(
                    pipeline=stage.name if stage.kind == "named_pipeline" else request.pipeline,
                    path=[] if stage.kind == "named_pipeline" else [*request.path, stage.index],
                    task=call.task,
                    config=config,
                ),
                id=f"{workflow.info().workflow_id}.{stage.index + 1}"
                + (f".run{loop}" if loop else ""),
                static_summary=f"{position}: nested pipeline {stage.name}",
            )
            if not nested.success:
                return StageOutcome(error=stage_failure(stage.name, nested.error or "failed"))
            return StageOutcome(output=nested.final_output)
        except (ActivityError, ChildWorkflowError) as exc:
            return StageOutcome(error=stage_failure(stage.name, _reason(exc)))
        finally:
            progress.running.remove(stage.name)
            progress.stages_done += 1
            _memo(progress)

    async def check_condition(self, step: CheckCondition) -> tuple[bool, str | None]:
        """A loop's condition as an activity (a loop without one never meets it)."""
        if not self.spec.has_condition:
            return False, None
        request = self.request
        try:
            checked = await workflow.execute_activity_method(
                PipelineActivities.condition,
                ConditionInput(pipeline=request.pipeline, path=request.path, output=step.output),
                summary=f"check the loop condition after run {step.loop}",
                **self.config.condition.activity_options(),
            )
        except ActivityError as exc:
            return False, stage_failure("condition", _reason(exc))
        return checked.met, None


def _memo(progress: PipelineProgress) -> None:
    workflow.upsert_memo(
        {
            "pipeline": progress.pipeline,
            "kind": progress.kind,
            "stages": progress.stages,
            "stages_done": progress.stages_done,
            "loops": progress.loops,
            "finished": progress.finished,
        }
    )


def _reason(error: BaseException) -> str:
    """`Type: message` of what made an activity or child workflow fail, as in-process."""
    cause = unwrap_cause(error)
    if isinstance(cause, ApplicationError):
        return f"{cause.type or 'Error'}: {cause.message}"
    return f"{type(cause).__name__}: {cause}"
