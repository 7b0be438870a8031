"""Your own workflow: Sleuth research as a child workflow, then a Sleuth agent whose model turns
and tool calls are activities of this workflow. Both results come back typed."""

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sleuth.temporal import (
        AgentOutcome,
        ResearchOutcome,
        ResearchRequest,
        ResearchWorkflow,
        run_agent,
    )


class Answer(BaseModel):
    status: str
    summary: str
    analyst: str


@workflow.defn
class PricingQuestionWorkflow:
    @workflow.run
    async def run(self, question: str) -> Answer:
        outcome: ResearchOutcome = await workflow.execute_child_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt=question, research="prices"),
            id=f"{workflow.info().workflow_id}-research",
            execution_timeout=timedelta(minutes=30),
        )
        report = outcome.final_state  # a ResearchReport, not a dict
        note: AgentOutcome = await run_agent("analyst", f"Check this finding: {report.summary}")
        return Answer(status=report.status, summary=report.summary, analyst=note.message)
