"""Sleuth inside a user's own workflow, on a real dev server with a plain `Worker` and
`SleuthPlugin`, as docs/your-workflows.md shows: research as a child workflow with a typed
outcome and report, and a Sleuth agent's model turns and tool calls as activities of the user's
workflow (`sleuth.temporal.run_agent`)."""

from __future__ import annotations

import concurrent.futures
import uuid

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sleuth.temporal import (
    ResearchOutcome,
    ResearchReport,
    ResearchWorkflow,
    SleuthPlugin,
)
from tests.helpers.apps.user_workflows import (
    Brief,
    MarketTriageWorkflow,
    Triage,
    build_app,
)


async def user_client(dev_env: WorkflowEnvironment) -> Client:
    """What a user writes: their own client, with the plugin."""
    return await Client.connect(
        dev_env.client.service_client.config.target_host,
        namespace=dev_env.client.namespace,
        plugins=[SleuthPlugin(build_app())],
    )


def user_worker(client: Client, task_queue: str) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[MarketTriageWorkflow],
        activity_executor=concurrent.futures.ThreadPoolExecutor(max_workers=4),
    )


async def test_research_as_a_child_and_an_agent_as_activities_of_your_own_workflow(
    dev_env: WorkflowEnvironment,
) -> None:
    client = await user_client(dev_env)
    task_queue = f"user-workflows-{uuid.uuid4().hex[:8]}"
    workflow_id = f"triage-{uuid.uuid4().hex[:8]}"
    async with user_worker(client, task_queue):
        result = await client.execute_workflow(
            MarketTriageWorkflow.run, "How fast did the CRM market grow?", id=workflow_id,
            task_queue=task_queue,
        )  # fmt: skip
        # Typed all the way: the user's own model, holding Sleuth's typed report.
        assert isinstance(result, Triage) and isinstance(result.brief, Brief)
        assert result.brief.growth_percent == 12
        assert result.report_status == "grounded"
        assert result.analyst_note.startswith("Analyst: growth is 12 percent")

        # The research ran as a child workflow; its outcome reads back as typed models.
        child = client.get_workflow_handle_for(ResearchWorkflow.run, f"{workflow_id}-research")
        outcome = await child.result()
        assert isinstance(outcome, ResearchOutcome)
        assert isinstance(outcome.final_state, ResearchReport)
        assert outcome.final_state.parsed(Brief) == result.brief

        # The agent's steps are activities in the user's own history, not a child workflow.
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        scheduled = [
            event.activity_task_scheduled_event_attributes.activity_type.name
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        ]
        assert scheduled == ["agent.model_turn", "agent.tool", "agent.model_turn"]
        children = [
            event.start_child_workflow_execution_initiated_event_attributes.workflow_type.name
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
        ]
        assert children == ["ResearchWorkflow"]
