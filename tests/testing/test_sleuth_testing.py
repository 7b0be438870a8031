"""`sleuth.testing`, used the way a user's own test suite would: an App with scripted models,
`SleuthTestEnvironment` on the time-skipping server, and the user's own workflow on the same
worker."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowFailureError

from sleuth import App, create_research_workflow
from sleuth.temporal import AgentOutcome, ResearchOutcome, ResearchReport
from sleuth.testing import ScriptedModel, SleuthTestEnvironment, text
from tests.helpers.apps.user_workflows import (
    Brief,
    MarketTriageWorkflow,
    Triage,
    build_app,
)


@workflow.defn(sandboxed=False)
class WaitThenResearchWorkflow:
    """Sleeps a day of workflow time, then researches: the time-skipping server makes the day
    take no wall time."""

    @workflow.run
    async def run(self, question: str) -> str:
        from sleuth.temporal import ResearchRequest, ResearchWorkflow

        await workflow.sleep(timedelta(days=1))
        outcome = await workflow.execute_child_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt=question, research="brief"),
            id=f"{workflow.info().workflow_id}-research",
        )
        return outcome.final_state.summary


async def test_research_and_an_agent_run_with_typed_outcomes() -> None:
    async with SleuthTestEnvironment(build_app()) as env:
        outcome = await env.research("How fast did the CRM market grow?", research="brief")
        assert isinstance(outcome, ResearchOutcome)
        assert isinstance(outcome.final_state, ResearchReport)
        assert outcome.final_state.parsed(Brief) == Brief(
            summary=outcome.final_state.summary, growth_percent=12
        )
        agent = await env.agent("analyst", "What next?")
        assert isinstance(agent, AgentOutcome) and agent.stop_reason == "completed"
        assert agent.message.startswith("Analyst:")


async def test_your_own_workflows_run_beside_sleuths_and_time_skips() -> None:
    async with SleuthTestEnvironment(
        build_app(), workflows=[MarketTriageWorkflow, WaitThenResearchWorkflow]
    ) as env:
        triage = await env.execute_workflow(MarketTriageWorkflow.run, "CRM growth?")
        assert isinstance(triage, Triage) and triage.brief.growth_percent == 12
        started = await env.env.get_current_time()
        summary = await env.execute_workflow(WaitThenResearchWorkflow.run, "CRM growth?")
        assert "12 percent" in summary
        assert await env.env.get_current_time() - started >= timedelta(days=1)


async def test_a_run_that_fails_fails_the_test_with_its_reason() -> None:
    app = App(task_queue="unused")
    app.research("empty", create_research_workflow(model=ScriptedModel(turns=[text("x")])))
    async with SleuthTestEnvironment(app) as env:
        with pytest.raises(WorkflowFailureError) as failure:
            await env.research("q", research="missing")
        assert "unknown research config 'missing'; registered: empty" in str(failure.value.cause)


async def test_the_environment_needs_async_with() -> None:
    env = SleuthTestEnvironment(build_app())
    with pytest.raises(RuntimeError, match="async with"):
        _ = env.client


async def test_the_docs_one_screen_example_runs_as_written() -> None:
    """docs/testing.md's first example, run as its reader would."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    example = page.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {"__name__": "docs_testing_example"}
    exec(compile(example, "docs/testing.md", "exec"), namespace)
    await namespace["test_brief"]()
