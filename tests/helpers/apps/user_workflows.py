"""A user's own project, written as docs/your-workflows.md tells one to: an App with a research
config ("brief", a typed `Brief` report) and an agent ("analyst"), and the user's own workflows
that use them: research as a child workflow, the agent's steps as activities of their workflow.
Models are scripted, so runs are deterministic."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sleuth import App, create_research_workflow, tool
    from sleuth.agent import Agent
    from sleuth.temporal import (
        AgentOutcome,
        ResearchOutcome,
        ResearchRequest,
        ResearchWorkflow,
        run_agent,
    )
    from sleuth.testing import ModelCall, ScriptedModel, node_of_request, text, tool_call

FACT = "The CRM market grew 12 percent in 2024 according to Gartner."


class Brief(BaseModel):
    """The research config's typed report."""

    summary: str
    growth_percent: float


class Triage(BaseModel):
    """What the user's workflow returns: its own typed result, built from Sleuth's."""

    brief: Brief
    report_status: str
    analyst_note: str
    analyst_iterations: int


@tool
def market_notes(topic: str) -> str:
    """Look a topic up in the market notes."""
    return FACT


def answer_research(call: ModelCall) -> object:
    node = node_of_request(call.messages)
    if node == "execute" and not any(m.role == "tool" for m in call.messages):
        return tool_call("market_notes", topic="crm")
    if node == "plan":
        return text('["How fast did the CRM market grow?"]')
    if node == "grounding_eval":
        return text("Yes")
    if node in ("summarize", "regenerate"):
        return text(f'{{"summary": "{FACT}", "growth_percent": 12}}')
    return text(FACT)


def answer_analyst(call: ModelCall) -> object:
    if not any(m.role == "tool" for m in call.messages):
        return tool_call("market_notes", topic="crm")
    return text("Analyst: growth is 12 percent, check the pricing pages next.")


def build_analyst() -> Agent:
    return Agent(
        model=ScriptedModel(responder=answer_analyst),
        tools=[market_notes],
        name="analyst",
        max_iterations=4,
    )


def build_app() -> App:
    app = App(task_queue="user-workflows", name="user-workflows")
    app.research(
        "brief",
        create_research_workflow(
            model=ScriptedModel(responder=answer_research),
            tools=[market_notes],
            output_schema=Brief,
            causal_inference=False,
        ),
    )
    app.agent("analyst", build_analyst)
    return app


@workflow.defn
class MarketTriageWorkflow:
    """The user's workflow: research as a child workflow, then the analyst agent's steps as
    this workflow's own activities; returns the user's typed result."""

    @workflow.run
    async def run(self, question: str) -> Triage:
        outcome: ResearchOutcome = await workflow.execute_child_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt=question, research="brief"),
            id=f"{workflow.info().workflow_id}-research",
            execution_timeout=timedelta(minutes=10),
        )
        brief = outcome.final_state.parsed(Brief)
        assert brief is not None, outcome.final_state.output_error
        analyst: AgentOutcome = await run_agent("analyst", f"What next after: {brief.summary}")
        return Triage(
            brief=brief,
            report_status=outcome.final_state.status,
            analyst_note=analyst.message,
            analyst_iterations=analyst.iterations,
        )
