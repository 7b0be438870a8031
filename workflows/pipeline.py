"""`PipelineWorkflow`: a registered composition pipeline, one activity per agent stage.

Input `{"pipeline": "report", "task": "..."}`. The workflow reads the pipeline's shape from the
worker's App, then runs it as the in-process pipeline would (same prompts, same merge): stages
one after another, parallel branches at once, a loop until its condition or `max_loops`. A
nested pipeline — inline, or a stage naming another registered pipeline — is a child
`PipelineWorkflow`. A stage that still fails after its retries makes the result `success=False`
with the error, like an agent raising in-process.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from activities.errors import unwrap_cause
    from activities.pipeline import PipelineActivities
    from activities.pipeline_models import (
        ConditionInput,
        DescribeInput,
        PipelineConfig,
        PipelineInput,
        PipelineProgress,
        PipelineSpec,
        StageInput,
        StageSpec,
    )
    from sleuth.composition import PipelineResult, follow_up_prompt, merge_outputs
    from sleuth.text import preview


class _StageFailed(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@workflow.defn
class PipelineWorkflow:
    """Runs one registered pipeline (or a pipeline nested in it)."""

    def __init__(self) -> None:
        self._progress = PipelineProgress(pipeline="")

    @workflow.query
    def progress(self) -> PipelineProgress:
        """Stages done, stages running, loop count."""
        return self._progress

    @workflow.run
    async def run(self, request: PipelineInput) -> PipelineResult:
        config = request.config or PipelineConfig()
        label = request.pipeline + "".join(f"[{i}]" for i in request.path)
        self._progress = PipelineProgress(pipeline=label)
        spec = await workflow.execute_activity_method(
            PipelineActivities.describe,
            DescribeInput(pipeline=request.pipeline, path=request.path),
            summary=f"read the shape of pipeline {label}",
            **config.describe.activity_options(),
        )
        self._progress.kind, self._progress.stages = spec.kind, len(spec.stages)
        self._memo()
        outputs: list[str] = []
        try:
            if spec.kind == "sequential":
                result = await self._sequential(request, config, spec, outputs)
            elif spec.kind == "parallel":
                result = await self._parallel(request, config, spec, outputs)
            else:
                result = await self._loop(request, config, spec, outputs)
        except _StageFailed as failed:
            workflow.logger.info("pipeline %s failed: %s", label, failed.message)
            result = PipelineResult(
                outputs=outputs, success=False, error=failed.message, stop_reason="error"
            )
        self._progress.finished = True
        self._memo()
        return result

    async def _sequential(
        self,
        request: PipelineInput,
        config: PipelineConfig,
        spec: PipelineSpec,
        outputs: list[str],
    ) -> PipelineResult:
        prompt = request.task
        for stage in spec.stages:
            output = await self._stage(request, config, spec, stage, prompt)
            outputs.append(output)
            prompt = follow_up_prompt(request.task, output)
        return PipelineResult(final_output=outputs[-1], outputs=outputs)

    async def _parallel(
        self,
        request: PipelineInput,
        config: PipelineConfig,
        spec: PipelineSpec,
        outputs: list[str],
    ) -> PipelineResult:
        settled = await asyncio.gather(
            *(
                self._stage(request, config, spec, stage, stage.task or request.task)
                for stage in spec.stages
            ),
            return_exceptions=True,
        )
        for item in settled:
            if isinstance(item, BaseException) and not isinstance(item, _StageFailed):
                raise item
        outputs.extend(s if isinstance(s, str) else "" for s in settled)
        errors = [s.message for s in settled if isinstance(s, _StageFailed)]
        if errors:
            raise _StageFailed("; ".join(errors))
        return PipelineResult(final_output=merge_outputs(outputs, spec.merge), outputs=outputs)

    async def _loop(
        self,
        request: PipelineInput,
        config: PipelineConfig,
        spec: PipelineSpec,
        outputs: list[str],
    ) -> PipelineResult:
        prompt = request.task
        stage = spec.stages[0]
        for loop in range(1, spec.max_loops + 1):
            self._progress.loops = loop
            output = await self._stage(request, config, spec, stage, prompt, loop=loop)
            outputs.append(output)
            if spec.has_condition:
                try:
                    checked = await workflow.execute_activity_method(
                        PipelineActivities.condition,
                        ConditionInput(pipeline=request.pipeline, path=request.path, output=output),
                        summary=f"check the loop condition after run {loop}",
                        **config.condition.activity_options(),
                    )
                except ActivityError as exc:
                    raise _StageFailed(_failure("condition", exc)) from exc
                if checked.met:
                    return PipelineResult(
                        final_output=output, outputs=outputs, stop_reason="condition_met"
                    )
            prompt = follow_up_prompt(request.task, output)
        return PipelineResult(final_output=outputs[-1], outputs=outputs, stop_reason="max_loops")

    async def _stage(
        self,
        request: PipelineInput,
        config: PipelineConfig,
        spec: PipelineSpec,
        stage: StageSpec,
        task: str,
        *,
        loop: int | None = None,
    ) -> str:
        position = f"stage {stage.index + 1}/{len(spec.stages)}" + (f", run {loop}" if loop else "")
        self._progress.running.append(stage.name)
        self._memo()
        try:
            if stage.kind == "agent":
                done = await workflow.execute_activity_method(
                    PipelineActivities.stage,
                    StageInput(
                        pipeline=request.pipeline,
                        path=request.path,
                        index=stage.index,
                        task=task,
                        heartbeat_every_seconds=config.heartbeat_every_seconds,
                    ),
                    summary=f"{position} {stage.name}: {preview(task, 80)}",
                    **config.stage.activity_options(),
                )
                return done.output
            nested = await workflow.execute_child_workflow(
                PipelineWorkflow.run,
                PipelineInput(
                    pipeline=stage.name if stage.kind == "named_pipeline" else request.pipeline,
                    path=[] if stage.kind == "named_pipeline" else [*request.path, stage.index],
                    task=task,
                    config=config,
                ),
                id=f"{workflow.info().workflow_id}.{stage.index + 1}"
                + (f".run{loop}" if loop else ""),
                static_summary=f"{position}: nested pipeline {stage.name}",
            )
            if not nested.success:
                raise _StageFailed(f"stage {stage.name!r} failed: {nested.error}")
            return nested.final_output
        except (ActivityError, ChildWorkflowError) as exc:
            raise _StageFailed(_failure(stage.name, exc)) from exc
        finally:
            self._progress.running.remove(stage.name)
            self._progress.stages_done += 1
            self._memo()

    def _memo(self) -> None:
        progress = self._progress
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


def _failure(stage: str, error: BaseException) -> str:
    """The same message an in-process pipeline gives: `stage 'x' failed: Type: message`."""
    cause = unwrap_cause(error)
    if isinstance(cause, ApplicationError):
        return f"stage {stage!r} failed: {cause.type or 'Error'}: {cause.message}"
    return f"stage {stage!r} failed: {cause}"
