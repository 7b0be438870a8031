"""`run_agent`: a registered Sleuth agent run inside *your own* workflow, one activity per model
turn, tool call and subagent dispatch, in your workflow's history.

```python
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sleuth.temporal import AgentOutcome, run_agent

@workflow.defn
class TriageWorkflow:
    @workflow.run
    async def run(self, ticket: str) -> str:
        outcome: AgentOutcome = await run_agent("analyst", f"Triage: {ticket}")
        return outcome.message
```

The worker needs `SleuthPlugin(app)` (the App registers `"analyst"`; the plugin registers the
agent's activities). The steps are the very activities `AgentWorkflow` runs, with the same
timeouts and retries (`AgentStepConfig`, overridable with `steps=`), so a crash resumes from the
last finished step. What `AgentWorkflow` adds on top (a `progress` query, memo, search
attributes, human approval of tool calls, continue-as-new) belongs to a workflow of its own: for
those, run `AgentWorkflow` as a child workflow instead. An agent whose approval policy names a
tool fails here with a message saying so.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from sleuth.activities.agent import AgentActivities
    from sleuth.activities.agent_models import (
        AgentOutcome,
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
MAX_STEPS = 1000
"""A guard against a loop the agent's own limits should have ended long before."""


async def run_agent(
    agent: str, prompt: str, *, steps: dict[str, Any] | None = None
) -> AgentOutcome:
    """Run the App's agent `agent` on `prompt` from workflow code and return its typed outcome
    (`message`, `structured_output`, `stop_reason`, `usage`, …; `workflow_id` is the calling
    workflow's). `steps` overrides the activity options per step kind, as `AgentRequest.steps`
    does: `{"model": {"start_to_close_seconds": 120}}`."""
    try:
        config = AgentStepConfig.with_overrides(steps)
    except ValueError as exc:
        raise ApplicationError(str(exc), type="ConfigError", non_retryable=True) from exc
    state_ref: str | None = None
    step = NextStep(kind="model", summary=f"{agent}: model turn 1")
    for _ in range(MAX_STEPS):
        if step.kind == "done":
            break
        if step.approval is not None:
            raise ApplicationError(
                f"agent {agent!r} wants a person to approve a tool call ({step.summary}); "
                "run_agent cannot wait for one: run AgentWorkflow as a child workflow instead",
                type="ConfigError",
                non_retryable=True,
            )
        output: StepOutput = await workflow.execute_activity_method(
            _ACTIVITIES[step.kind],
            StepInput(
                agent=agent,
                kind=step.kind,
                state_ref=state_ref,
                prompt=prompt if state_ref is None else None,
                call_id=step.call_id,
            ),
            summary=step.summary,
            **config.for_kind(step.kind).activity_options(),
        )
        state_ref, step = output.state_ref, output.next
        if output.outcome is not None:
            info = workflow.info()
            return output.outcome.model_copy(
                update={"workflow_id": info.workflow_id, "run_id": info.run_id}
            )
    raise ApplicationError(
        f"agent {agent!r} took {MAX_STEPS} steps without finishing; give it a tighter "
        "max_iterations or UsageLimits",
        type="ConfigError",
        non_retryable=True,
    )
