"""Review durably, on the time-skipping server: a run waits on its `review` Update (approve,
revise, reject), shows what waits in its `pending_review` Query and memo, and a durable timer
decides when nobody does; named tool calls of `AgentWorkflow` wait for approval the same way."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from sleuth import Agent, App, create_research_workflow
from sleuth.activities.agent_models import AgentOutcome, AgentRequest
from sleuth.activities.errors import unwrap_cause
from sleuth.activities.research_models import ResearchOutcome, ResearchRequest
from sleuth.flows.review import ApprovalPolicy, PendingReview, ReviewDecision, ReviewPolicy
from sleuth.models.scripted import ScriptedModel, text, tool_call
from sleuth.workers.events import follow_events
from sleuth.workers.worker import build_worker
from sleuth.workflows.agent import AgentWorkflow
from sleuth.workflows.research import ResearchWorkflow
from tests.flows.test_review import RecordingScript
from tests.helpers.research_scripts import ResearchScript, lookup, scripted_model
from tests.helpers.timeouts import scaled


def research_app(script: ResearchScript, review: ReviewPolicy | None, **options: Any) -> App:
    app = App()
    app.research(
        "market",
        create_research_workflow(
            model=scripted_model(script), tools=[lookup], review=review, **options
        ),
    )
    return app


@asynccontextmanager
async def started(
    env: WorkflowEnvironment, app: App, workflow: Callable[..., Any], request: Any
) -> AsyncIterator[WorkflowHandle[Any, Any]]:
    task_queue = str(uuid.uuid4())
    async with build_worker(env.client, app, task_queue=task_queue):
        yield await env.client.start_workflow(
            workflow, request, id=f"review-{uuid.uuid4()}", task_queue=task_queue
        )


async def waiting(handle: WorkflowHandle[Any, Any], review_id: str) -> PendingReview:
    """The pending review once the run waits on `review_id` (polls the query: observable state).
    Fails, naming what waits instead, if the run does not get there in time."""
    pending: PendingReview | None = None
    deadline = asyncio.get_running_loop().time() + scaled(60)
    while asyncio.get_running_loop().time() < deadline:
        pending = await handle.query("pending_review", result_type=PendingReview | None)  # type: ignore[arg-type]
        if pending is not None and pending.review_id == review_id:
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError(f"the run never waited on {review_id!r}; pending now: {pending}")


async def decide(
    handle: WorkflowHandle[Any, Any], review_id: str, decision: str, remark: str | None = None
) -> PendingReview:
    answered = await handle.execute_update(
        "review",
        ReviewDecision(review_id=review_id, decision=decision, remark=remark),  # type: ignore[arg-type]
        result_type=PendingReview,
    )
    return answered  # type: ignore[no-any-return]


def request(**fields: Any) -> ResearchRequest:
    return ResearchRequest(prompt="How fast did the CRM market grow?", research="market", **fields)


# -- research runs ------------------------------------------------------------------------------


async def test_a_run_waits_for_approval_of_its_summary(time_env: WorkflowEnvironment) -> None:
    app = research_app(ResearchScript(verdicts=[True]), ReviewPolicy(points=["summary"]))
    async with started(time_env, app, ResearchWorkflow.run, request()) as handle:
        pending = await waiting(handle, "summary-1")
        assert pending.kind == "summary" and pending.details["grounding_score"] == 1.0
        assert "The CRM market grew 12 percent" in pending.details["summary"]
        progress = await handle.query(ResearchWorkflow.progress)
        assert progress.status == "awaiting review"
        memo = await (await handle.describe()).memo()
        assert memo["status"] == "awaiting review" and memo["review"] == pending.subject
        answered = await decide(handle, "summary-1", "approve")
        assert answered.review_id == "summary-1"
        outcome: ResearchOutcome = await handle.result()
        assert await handle.query("pending_review", result_type=PendingReview | None) is None  # type: ignore[arg-type]
        events = [event async for _, event in follow_events(time_env.client, handle.id)]
    # Followers of the run's live events see the wait and the decision, as in-process.
    reviewed = [
        (e.event_type, e.data) for e in events if e.event_type.startswith("research.review")
    ]
    assert reviewed == [
        (
            "research.review.awaiting",
            {
                "research": "market",
                "review_id": "summary-1",
                "kind": "summary",
                "subject": pending.subject,
            },
        ),
        (
            "research.review",
            {
                "research": "market",
                "review_id": "summary-1",
                "kind": "summary",
                "decision": "approve",
                "timed_out": False,
            },
        ),
    ]
    report = outcome.final_state
    assert report.end_reason == "grounded"
    assert [(r.review_id, r.decision) for r in report.reviews] == [("summary-1", "approve")]


async def test_revise_regenerates_the_summary_with_the_remark(
    time_env: WorkflowEnvironment,
) -> None:
    script = RecordingScript(verdicts=[True])
    app = research_app(script, ReviewPolicy(points=["summary"]))
    async with started(time_env, app, ResearchWorkflow.run, request()) as handle:
        await waiting(handle, "summary-1")
        await decide(handle, "summary-1", "revise", "Name the analyst firm.")
        await waiting(handle, "summary-2")
        await decide(handle, "summary-2", "approve")
        outcome: ResearchOutcome = await handle.result()
    assert [node for node, _ in script.rewrites] == ["regenerate"]
    assert "Name the analyst firm." in script.rewrites[0][1]
    report = outcome.final_state
    assert report.revision_count == 1 and report.regeneration_count == 0
    assert [r.decision for r in report.reviews] == ["revise", "approve"]


async def test_reject_ends_the_run_rejected(time_env: WorkflowEnvironment) -> None:
    app = research_app(ResearchScript(verdicts=[True]), ReviewPolicy(points=["summary"]))
    async with started(time_env, app, ResearchWorkflow.run, request()) as handle:
        await waiting(handle, "summary-1")
        await decide(handle, "summary-1", "reject", "Out of scope.")
        outcome: ResearchOutcome = await handle.result()
        memo = await (await handle.describe()).memo()
    assert outcome.final_state.end_reason == "rejected"
    assert memo["end_reason"] == "rejected" and memo["status"] == "done"


async def test_a_plan_is_revised_then_approved(time_env: WorkflowEnvironment) -> None:
    script = RecordingScript(verdicts=[False, False, True])
    app = research_app(script, ReviewPolicy(points=["plan"]))
    async with started(time_env, app, ResearchWorkflow.run, request()) as handle:
        # plan-1: the plan node's sub-questions; plan-2: the replan's focused prompt.
        pending = await waiting(handle, "plan-1")
        assert pending.kind == "plan"
        assert pending.details["sub_questions"] == ["How fast did the CRM market grow?"]
        await decide(handle, "plan-1", "revise", "Ask for the 2023 figure too.")
        await waiting(handle, "plan-2")
        await decide(handle, "plan-2", "approve")
        pending = await waiting(handle, "plan-3")
        assert pending.details["plan"]
        await decide(handle, "plan-3", "revise", "Use only the Gartner report.")
        await waiting(handle, "plan-4")
        await decide(handle, "plan-4", "approve")
        outcome: ResearchOutcome = await handle.result()
    assert len(script.plans) == 2 and "Ask for the 2023 figure too." in script.plans[1]
    replans = [message for node, message in script.rewrites if node == "replan"]
    assert len(replans) == 2 and "Use only the Gartner report." in replans[1]
    report = outcome.final_state
    assert report.replan_count == 1 and report.revision_count == 2
    assert report.end_reason == "grounded"


@pytest.mark.parametrize(("on_timeout", "end"), [("approve", "grounded"), ("reject", "rejected")])
async def test_a_durable_timer_decides_when_nobody_does(
    time_env: WorkflowEnvironment, on_timeout: str, end: str
) -> None:
    review = ReviewPolicy(points=["summary"], timeout_seconds=6 * 3600, on_timeout=on_timeout)  # type: ignore[arg-type]
    app = research_app(ResearchScript(verdicts=[True]), review)
    async with started(time_env, app, ResearchWorkflow.run, request()) as handle:
        outcome: ResearchOutcome = await handle.result()  # time skips over the six hours
    [record] = outcome.final_state.reviews
    assert record.timed_out and outcome.final_state.end_reason == end


async def test_on_timeout_fail_fails_the_run(time_env: WorkflowEnvironment) -> None:
    review = ReviewPolicy(timeout_seconds=3600, on_timeout="fail")
    app = research_app(ResearchScript(verdicts=[True]), review)
    async with started(time_env, app, ResearchWorkflow.run, request()) as handle:
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    assert "on_timeout is 'fail'" in str(unwrap_cause(failure.value))


async def test_the_update_refuses_decisions_that_answer_nothing_waiting(
    time_env: WorkflowEnvironment,
) -> None:
    app = research_app(ResearchScript(verdicts=[True]), ReviewPolicy(points=["summary"]))
    async with started(time_env, app, ResearchWorkflow.run, request()) as handle:
        await waiting(handle, "summary-1")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await decide(handle, "plan-7", "approve")
        assert "'summary-1' waits" in str(refused.value.cause)
        await decide(handle, "summary-1", "approve")
        await handle.result()
        with pytest.raises(RPCError):  # a finished run takes no decision
            await decide(handle, "summary-1", "approve")


async def test_a_run_asks_for_review_per_run_without_a_policy(
    time_env: WorkflowEnvironment,
) -> None:
    app = research_app(ResearchScript(verdicts=[True]), None)
    review = {"points": ["summary"], "timeout_seconds": 60, "on_timeout": "approve"}
    async with started(time_env, app, ResearchWorkflow.run, request(review=review)) as handle:
        pending = await waiting(handle, "summary-1")
        assert pending.timeout_at is not None
        assert (pending.timeout_at - pending.requested_at).total_seconds() == 60
        await decide(handle, "summary-1", "reject")
        outcome: ResearchOutcome = await handle.result()
    assert outcome.final_state.end_reason == "rejected"


# -- tool approval -------------------------------------------------------------------------------


SENT: list[str] = []


def send_email(to: str) -> str:
    """Send the report by email."""
    SENT.append(to)
    return f"sent to {to}"


def agent_app(**policy: Any) -> App:
    SENT.clear()
    app = App()
    app.agent(
        "mailer",
        lambda: Agent(
            ScriptedModel(
                responder=lambda call: (
                    text("Done.")
                    if any(m.role == "tool" for m in call.messages)
                    else tool_call("send_email", to="cfo@example.com")
                )
            ),
            tools=[send_email],
            approval=ApprovalPolicy(tools=["send_email"], **policy),
            name="mailer",
        ),
    )
    return app


async def tool_review_id(handle: WorkflowHandle[Any, Any]) -> PendingReview:
    while True:
        pending = await handle.query("pending_review", result_type=PendingReview | None)  # type: ignore[arg-type]
        if pending is not None:
            return pending  # type: ignore[no-any-return]
        await asyncio.sleep(0.05)


async def test_an_approved_tool_call_runs_durably(time_env: WorkflowEnvironment) -> None:
    job = AgentRequest(agent="mailer", prompt="Mail the report to the CFO.")
    async with started(time_env, agent_app(), AgentWorkflow.run, job) as handle:
        pending = await tool_review_id(handle)
        assert pending.kind == "tool" and pending.details["tool"] == "send_email"
        assert pending.details["arguments"] == {"to": "cfo@example.com"}
        assert SENT == []
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await decide(handle, pending.review_id, "revise", "make it shorter")
        assert "not revised" in str(refused.value.cause)
        await decide(handle, pending.review_id, "approve")
        outcome: AgentOutcome = await handle.result()
        progress = await handle.query(AgentWorkflow.progress)
        events = [event async for _, event in follow_events(time_env.client, handle.id)]
    assert SENT == ["cfo@example.com"] and outcome.message == "Done."
    assert [r.decision for r in progress.approvals] == ["approve"]
    approvals = [
        (e.event_type, e.data) for e in events if e.event_type.startswith("agent.approval")
    ]
    assert approvals == [
        (
            "agent.approval.awaiting",
            {"agent": "mailer", "tool": "send_email", "review_id": pending.review_id},
        ),
        (
            "agent.approval",
            {"agent": "mailer", "tool": "send_email", "decision": "approve", "timed_out": False},
        ),
    ]


async def test_a_denied_tool_call_does_not_run_durably(time_env: WorkflowEnvironment) -> None:
    job = AgentRequest(agent="mailer", prompt="Mail the report to the CFO.")
    async with started(time_env, agent_app(), AgentWorkflow.run, job) as handle:
        pending = await tool_review_id(handle)
        await decide(handle, pending.review_id, "reject", "not before the board meets")
        outcome: AgentOutcome = await handle.result()
    assert SENT == [] and outcome.stop_reason == "completed"


async def test_a_tool_approval_times_out_to_deny(time_env: WorkflowEnvironment) -> None:
    job = AgentRequest(agent="mailer", prompt="Mail the report to the CFO.")
    app = agent_app(timeout_seconds=24 * 3600)
    async with started(time_env, app, AgentWorkflow.run, job) as handle:
        await handle.result()
        progress = await handle.query(AgentWorkflow.progress)
    assert SENT == []
    assert progress.approvals[0].timed_out and progress.approvals[0].decision == "reject"
