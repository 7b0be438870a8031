"""`AgentWorkflow`: a registered agent run durably, one activity per model turn, tool call and
subagent dispatch, with the loop state checkpointed in the artifact store between steps.

Start it from anywhere with plain JSON:
`temporal workflow start --task-queue sleuth --type AgentWorkflow --input '{"agent": "analyst", "prompt": "…"}'`.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ApplicationError

from workflows.streams import state_for_continue

with workflow.unsafe.imports_passed_through():
    from activities.agent import AgentActivities
    from activities.agent_models import (
        AgentOutcome,
        AgentProgress,
        AgentRequest,
        AgentResume,
        AgentStepConfig,
        NextStep,
        StepInput,
        StepOutput,
    )

_ACTIVITIES = {
    "model": AgentActivities.model_turn,
    "tool": AgentActivities.tool,
    "subagent": AgentActivities.subagent,
}


@workflow.defn(name="AgentWorkflow")
class AgentWorkflow:
    """Runs one registered agent; counters are in the `progress` query and the memo."""

    @workflow.init
    def __init__(self, request: AgentRequest) -> None:
        self._progress = AgentProgress()
        self._stream = WorkflowStream(request.resume.stream if request.resume else None)

    @workflow.query
    def progress(self) -> AgentProgress:
        """The step running now, the counters and the todo list."""
        return self._progress

    @workflow.run
    async def run(self, request: AgentRequest) -> AgentOutcome:
        try:
            config = AgentStepConfig.with_overrides(request.steps)
        except ValueError as exc:
            raise ApplicationError(str(exc), type="ConfigError", non_retryable=True) from exc
        state_ref: str | None = None
        step = NextStep(kind="model", summary=f"{request.agent}: model turn 1")
        if request.resume is not None:
            state_ref, step = request.resume.state_ref, request.resume.next
            self._progress = request.resume.progress
        self._progress.agent = request.agent
        while True:
            if step.kind == "done":
                raise ApplicationError(
                    "the agent run is finished but no outcome was returned; the activities and "
                    "the workflow disagree (are the worker's sleuth versions mixed?)",
                    type="ConfigError",
                    non_retryable=True,
                )
            self._progress.step, self._progress.step_summary = step.kind, step.summary
            output: StepOutput = await workflow.execute_activity_method(
                _ACTIVITIES[step.kind],
                StepInput(
                    agent=request.agent,
                    kind=step.kind,
                    state_ref=state_ref,
                    prompt=request.prompt if state_ref is None else None,
                    call_id=step.call_id,
                ),
                summary=step.summary,
                **config.for_kind(step.kind).activity_options(),
            )
            state_ref, step = output.state_ref, output.next
            self._record(output)
            if output.outcome is not None:
                info = workflow.info()
                return output.outcome.model_copy(
                    update={"workflow_id": info.workflow_id, "run_id": info.run_id}
                )
            if workflow.info().is_continue_as_new_suggested():
                resume = AgentResume(
                    state_ref=state_ref,
                    next=step,
                    progress=self._progress,
                    stream=await state_for_continue(self._stream),
                )
                workflow.continue_as_new(request.model_copy(update={"resume": resume}))

    def _record(self, output: StepOutput) -> None:
        progress = self._progress
        progress.steps_run += 1
        progress.iterations = output.iterations
        progress.tool_calls = output.tool_calls
        progress.subagent_calls = output.subagent_calls
        progress.total_tokens = output.usage.total_tokens
        progress.todos = output.todos
        memo: dict[str, object] = {
            "agent": progress.agent,
            "iterations": progress.iterations,
            "tool_calls": progress.tool_calls,
            "subagent_calls": progress.subagent_calls,
            "total_tokens": progress.total_tokens,
        }
        if output.todos is not None:
            done = sum(1 for t in output.todos if t.status == "completed")
            memo["todos_done"] = f"{done}/{len(output.todos)}"
        if output.outcome is not None:
            progress.status, progress.stop_reason = "done", output.outcome.stop_reason
            progress.step, progress.step_summary = "done", f"finished: {progress.stop_reason}"
            memo["stop_reason"] = progress.stop_reason
        workflow.upsert_memo(memo)
