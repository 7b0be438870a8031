"""AgentWorkflow on the time-skipping server: steps as activities, layers across steps, errors."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth import App, create_deepagent
from sleuth.activities.agent import next_step
from sleuth.activities.agent_models import AgentOutcome, AgentProgress, AgentRequest, AgentResume
from sleuth.agent.state import LoopState
from sleuth.models.base import RetryableModelError
from sleuth.models.scripted import ModelCall, ScriptedModel
from sleuth.runtime.artifacts import default_artifact_store, get_json, put_json
from sleuth.workers.worker import build_worker
from sleuth.workflows import AgentWorkflow
from tests.helpers.apps.agent_app import RECORD_ENV, lookup, read_record, submit
from tests.helpers.apps.agent_app import app as market_app


async def run_agent(
    env: WorkflowEnvironment, app: App, request: AgentRequest
) -> tuple[AgentOutcome, object, AgentProgress]:
    """Run to the end; also returns the `progress` query's answer (asked while a worker serves)."""
    task_queue = str(uuid.uuid4())
    async with build_worker(env.client, app, task_queue=task_queue):
        handle = await env.client.start_workflow(
            AgentWorkflow.run, request, id=f"agent-{uuid.uuid4()}", task_queue=task_queue
        )
        outcome = await handle.result()
        progress = await handle.query(AgentWorkflow.progress)
    return outcome, handle, progress


async def scheduled_activities(handle) -> list[tuple[str, str]]:
    found = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            summary = json.loads(event.user_metadata.summary.data)
            found.append((name, summary))
    return found


async def test_a_deep_agent_runs_step_by_step_with_its_layers(
    time_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv(RECORD_ENV, str(record))
    outcome, handle, progress = await run_agent(
        time_env, market_app, AgentRequest(agent="market", prompt="Size CRM and price Acme")
    )
    assert outcome.stop_reason == "tool_called:submit & confidence_met"
    # The file written in one activity was read back in another, and the subagent's answer arrived.
    assert outcome.structured_output == {
        "summary": "CRM market grew 12% in 2024 | Pricing: Acme charges $40 per seat",
        "confidence": 0.9,
    }
    assert outcome.usage.total_tokens == 225  # 90 parent + 135 subagent
    assert [(t.content, t.status) for t in outcome.todos or []] == [
        ("size the market", "completed"),
        ("price Acme", "completed"),
    ]
    assert outcome.workflow_id == handle.id

    activities = await scheduled_activities(handle)
    assert [name for name, _ in activities].count("agent.subagent") == 1
    assert [name for name, _ in activities].count("agent.model_turn") == 6
    assert [name for name, _ in activities].count("agent.tool") == 6
    assert ("agent.subagent", "subagent pricing_analyst: What does Acme charge?") in activities
    assert ("agent.tool", 'tool lookup {"topic": "crm"}') in activities
    assert all(summary for _, summary in activities)
    assert [r["tool"] for r in read_record(record)] == ["lookup", "deep_dive", "submit"]

    final = LoopState.model_validate(get_json(default_artifact_store(), outcome.state_ref))
    assert final.layers["filesystem"] == {"files": {"notes.md": "CRM market grew 12% in 2024"}}
    assert progress.status == "done" and progress.subagent_calls == 1
    memo = await (await handle.describe()).memo()
    assert memo["subagent_calls"] == 1
    assert memo["todos_done"] == "2/2"
    assert memo["total_tokens"] == 225


async def test_a_transient_model_failure_retries_only_that_turn(
    time_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv(RECORD_ENV, str(record))
    failures = []

    def responder(call: ModelCall):
        from sleuth.models.scripted import text, tool_call

        if not any(m.role == "tool" for m in call.messages):
            return tool_call("lookup", topic="crm")
        if not failures:
            failures.append("once")
            raise RetryableModelError("rate limited", status_code=429, retry_after=1)
        return text("done")

    app = App(name="flaky")
    app.agent(
        "flaky",
        lambda: create_deepagent(
            model=ScriptedModel(responder=responder), tools=[lookup, submit], grounding=False
        ),
    )
    outcome, _, _ = await run_agent(time_env, app, AgentRequest(agent="flaky", prompt="go"))
    assert outcome.message == "done"
    assert failures == ["once"]
    assert [r["tool"] for r in read_record(record)] == ["lookup"]


async def test_an_unknown_agent_fails_at_once_naming_the_registered_ones(
    time_env: WorkflowEnvironment,
) -> None:
    with pytest.raises(WorkflowFailureError) as caught:
        await run_agent(time_env, market_app, AgentRequest(agent="nobody", prompt="go"))
    cause = caught.value.cause  # the unknown name is the run's own failure, not one level down
    assert "unknown agent 'nobody'; registered: market" in str(cause)
    assert cause.non_retryable


async def test_unknown_step_kind_in_overrides_is_a_config_error(
    time_env: WorkflowEnvironment,
) -> None:
    with pytest.raises(WorkflowFailureError) as caught:
        await run_agent(
            time_env,
            market_app,
            AgentRequest(agent="market", prompt="go", steps={"planner": {"heartbeat_seconds": 1}}),
        )
    assert "unknown step kind(s) in 'steps': planner" in str(caught.value.cause)


async def test_a_run_carried_over_continue_as_new_resumes_where_it_was(
    time_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv(RECORD_ENV, str(record))
    agent = market_app.new_agent("market")
    state = agent.initial_state("Size CRM and price Acme")
    while next_step(agent, state).kind != "subagent":
        await agent.step(state)  # up to the subagent dispatch, as a run's first history had it
    agent.capture_layers(state)
    carried = AgentResume(
        state_ref=put_json(default_artifact_store(), state),
        next=next_step(agent, state),
        progress=AgentProgress(agent="market", steps_run=7, iterations=state.iterations),
    )
    assert carried.next.kind == "subagent"
    outcome, handle, progress = await run_agent(
        time_env,
        market_app,
        AgentRequest(agent="market", prompt="Size CRM and price Acme", resume=carried),
    )
    assert outcome.structured_output is not None
    assert outcome.structured_output["summary"].startswith("CRM market grew 12%")
    assert [r["tool"] for r in read_record(record)] == ["lookup", "deep_dive", "submit"]
    activities = [name for name, _ in await scheduled_activities(handle)]
    assert activities[0] == "sleuth.search_attributes"
    activities = activities[1:]
    assert activities[0] == "agent.subagent" and "agent.tool" in activities
    assert progress.steps_run == 7 + len(activities)


async def test_a_rate_limited_subagent_is_retried_as_its_own_activity(
    time_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sleuth.deepagent import SubAgentDef
    from sleuth.models.scripted import text, tool_call

    record = tmp_path / "record.jsonl"
    monkeypatch.setenv(RECORD_ENV, str(record))
    child_failures: list[str] = []

    def parent(call: ModelCall):
        tools_done = [m.name for m in call.messages if m.role == "tool"]
        if "lookup" not in tools_done:
            return tool_call("lookup", topic="crm")
        if "task" not in tools_done:
            return tool_call("task", subagent_type="pricer", description="Price Acme")
        answer = next(m.content for m in call.messages if m.role == "tool" and m.name == "task")
        return text(f"final: {answer}")

    def child(call: ModelCall):
        if not child_failures:
            child_failures.append("429")
            raise RetryableModelError("rate limited", status_code=429, retry_after=1)
        return text("Acme charges $40 per seat")

    app = App(name="subagent-retry")
    app.agent(
        "market",
        lambda: create_deepagent(
            model=ScriptedModel(responder=parent),
            tools=[lookup],
            grounding=False,
            reflexion=False,
            subagents=[
                SubAgentDef(
                    name="pricer",
                    description="Prices one company.",
                    system_prompt="Find the price.",
                    tools=[],
                    model=ScriptedModel(responder=child),
                )
            ],
        ),
    )
    outcome, handle, _ = await run_agent(time_env, app, AgentRequest(agent="market", prompt="go"))

    assert outcome.message == "final: Acme charges $40 per seat"
    assert child_failures == ["429"]
    assert [r["tool"] for r in read_record(record)] == ["lookup"]
    # The server retries an activity without new events: the started event of the attempt that
    # completed carries its number.
    subagent_events: set[int] = set()
    starts = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            if (
                event.activity_task_scheduled_event_attributes.activity_type.name
                == "agent.subagent"
            ):
                subagent_events.add(event.event_id)
        elif event.HasField("activity_task_started_event_attributes"):
            started = event.activity_task_started_event_attributes
            starts.append((started.scheduled_event_id in subagent_events, started.attempt))
    assert [s for s in starts if s[1] > 1] == [(True, 2)]
