"""`AgentWorkflow`: a registered agent run durably, one activity per model turn, tool call and
subagent dispatch, with the loop state checkpointed in the artifact store between steps.

Start it from anywhere with plain JSON:
`temporal workflow start --task-queue sleuth --type AgentWorkflow --input '{"agent": "analyst", "prompt": "…"}'`.

A tool call the agent's `ApprovalPolicy` names waits durably for the `review` Update
(`approve` runs it, `reject` denies it); the `pending_review` Query shows the call.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ApplicationError

from sleuth.workflows.streams import publish, state_for_continue

with workflow.unsafe.imports_passed_through():
    from sleuth.activities.agent import AgentActivities
    from sleuth.activities.agent_models import (
        AgentOutcome,
        AgentProgress,
        AgentRequest,
        AgentResume,
        AgentStepConfig,
        ApprovalRequest,
        NextStep,
        StepInput,
        StepOutput,
    )
    from sleuth.flows.review import PendingReview, ReviewDecision, ReviewRecord, record_of

from sleuth.workflows import attributes, metrics
from sleuth.workflows.review import REVIEW_STATES, ReviewGate

_ACTIVITIES = {
    "model": AgentActivities.model_turn,
    "tool": AgentActivities.tool,
    "subagent": AgentActivities.subagent,
    "mcp": AgentActivities.mcp_tool,
}


@workflow.defn(name="AgentWorkflow")
class AgentWorkflow:
    """Runs one registered agent; counters are in the `progress` query and the memo."""

    @workflow.init
    def __init__(self, request: AgentRequest) -> None:
        self._progress = AgentProgress()
        self._gate = ReviewGate()
        self._attributes = attributes.RunAttributes([])
        self._stream = WorkflowStream(request.resume.stream if request.resume else None)

    @workflow.query
    def progress(self) -> AgentProgress:
        """The step running now, the counters and the todo list."""
        return self._progress

    @workflow.query(name="pending_review")
    def pending_review(self) -> PendingReview | None:
        """The tool call waiting for approval (None when nothing waits)."""
        return self._gate.pending

    @workflow.update(name="review")
    def review(self, decision: ReviewDecision) -> PendingReview:
        """Approve or reject (deny) the pending tool call. Returns the review it answered."""
        return self._gate.answer(decision)

    @review.validator
    def _validate_review(self, decision: ReviewDecision) -> None:
        self._gate.validate(decision)

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
        self._attributes = await attributes.for_this_run(request.agent)
        while True:
            if step.kind == "done":
                raise ApplicationError(
                    "the agent run is finished but no outcome was returned; the activities and "
                    "the workflow disagree (are the worker's sleuth versions mixed?)",
                    type="ConfigError",
                    non_retryable=True,
                )
            approval = await self._approve(step.approval) if step.approval else None
            self._progress.step, self._progress.step_summary = step.kind, step.summary
            output: StepOutput = await workflow.execute_activity_method(
                _ACTIVITIES[step.kind],
                StepInput(
                    agent=request.agent,
                    kind=step.kind,
                    state_ref=state_ref,
                    prompt=request.prompt if state_ref is None else None,
                    call_id=step.call_id,
                    approval=approval,
                    mcp_servers=request.mcp_servers,
                ),
                summary=step.summary,
                **config.for_kind(step.kind).activity_options(),
            )
            tokens_before = self._progress.total_tokens
            state_ref, step = output.state_ref, output.next
            self._record(output)
            metrics.record_tokens("agent", request.agent, output.usage.total_tokens - tokens_before)
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

    async def _approve(self, request: ApprovalRequest) -> ReviewRecord:
        """Wait durably for a person to approve or deny a tool call."""
        pending = request.subject.pending(
            request.review_id, workflow.now(), request.timeout_seconds
        )
        self._progress.status = "awaiting review"
        workflow.upsert_memo({"status": "awaiting review", "review": pending.subject})
        self._attributes.upsert({attributes.REVIEW_STATE: "awaiting"})
        tool = pending.details.get("tool")
        publish(
            self._stream,
            "agent.approval.awaiting",
            agent=self._progress.agent,
            tool=tool,
            review_id=pending.review_id,
        )
        try:
            decision, timed_out = await self._gate.wait(
                pending, request.timeout_seconds, request.on_timeout
            )
        except ApplicationError:
            self._progress.status = "failed"
            self._attributes.upsert({attributes.REVIEW_STATE: "timed_out"})
            raise
        record = record_of(pending, decision, timed_out=timed_out)
        self._progress.approvals.append(record)
        self._progress.status = "running"
        outcome = "timed_out" if timed_out else REVIEW_STATES[decision.decision]
        workflow.upsert_memo({"status": "running", "review": f"{pending.review_id} {outcome}"})
        self._attributes.upsert({attributes.REVIEW_STATE: outcome})
        publish(
            self._stream,
            "agent.approval",
            agent=self._progress.agent,
            tool=tool,
            decision=decision.decision,
            timed_out=timed_out,
        )
        metrics.record_review("tool", decision.decision)
        return record

    def _record(self, output: StepOutput) -> None:
        progress = self._progress
        progress.steps_run += 1
        progress.iterations = output.iterations
        progress.tool_calls = output.tool_calls
        progress.subagent_calls = output.subagent_calls
        progress.total_tokens = output.usage.total_tokens
        progress.cost_usd = output.usage.cost_usd
        progress.todos = output.todos
        memo: dict[str, object] = {
            "agent": progress.agent,
            "iterations": progress.iterations,
            "tool_calls": progress.tool_calls,
            "subagent_calls": progress.subagent_calls,
            "total_tokens": progress.total_tokens,
            "cost_usd": round(progress.cost_usd, 6),
        }
        if output.todos is not None:
            done = sum(1 for t in output.todos if t.status == "completed")
            memo["todos_done"] = f"{done}/{len(output.todos)}"
        if output.outcome is not None:
            progress.status, progress.stop_reason = "done", output.outcome.stop_reason
            progress.step, progress.step_summary = "done", f"finished: {progress.stop_reason}"
            memo["stop_reason"] = progress.stop_reason
            memo["status"] = "done"
        workflow.upsert_memo(memo)
        self._attributes.upsert(
            {
                attributes.TOTAL_TOKENS: progress.total_tokens,
                attributes.COST_USD: progress.cost_usd,
                attributes.END_REASON: progress.stop_reason,
                attributes.GROUNDING_SCORE: output.outcome.grounding_score
                if output.outcome
                else None,
            }
        )
        if output.outcome is not None:
            metrics.record_run_end(
                "agent", progress.agent, output.outcome.stop_reason, progress.cost_usd
            )
