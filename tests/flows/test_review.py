"""Review in-process: research runs pause after a plan and a summary, named tool calls wait for
approval; a callback decides (approve, revise, reject) or the timeout does."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from sleuth import Agent, create_research_workflow
from sleuth.flows.review import (
    ApprovalPolicy,
    ApprovalRequired,
    PendingReview,
    ReviewDecision,
    ReviewError,
    ReviewPolicy,
    ReviewSettings,
    ReviewSubject,
    ReviewTimedOut,
    check_decision,
    utc_now,
)
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import Node, ResearchDigest, end_reason, next_node, node_of_request
from sleuth.research import record_review as record
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.events import Event, capture_events
from tests.helpers.research_scripts import ResearchScript, lookup, scripted_model

Decide = Callable[[PendingReview], ReviewDecision]


class Reviewer:
    """A review callback answering with `answers` in order (the last one repeats)."""

    def __init__(self, *answers: str, remark: str = "Name the source of every figure."):
        self.answers = list(answers)
        self.remark = remark
        self.seen: list[PendingReview] = []

    async def __call__(self, pending: PendingReview) -> ReviewDecision:
        self.seen.append(pending)
        answer = self.answers[min(len(self.seen), len(self.answers)) - 1]
        remark = self.remark if answer == "revise" else None
        return ReviewDecision(review_id=pending.review_id, decision=answer, remark=remark)  # type: ignore[arg-type]


class RecordingScript(ResearchScript):
    """A research script that also keeps the user message of every regenerate and replan."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.rewrites: list[tuple[str, str]] = []
        self.plans: list[str] = []

    def __call__(self, call: ModelCall):  # type: ignore[no-untyped-def]
        node = node_of_request(call.messages)
        if node in ("regenerate", "replan"):
            self.rewrites.append((node, call.messages[-1].content))
        if node == "plan":
            self.plans.append(call.messages[-1].content)
        return super().__call__(call)


def spec_with(script: ResearchScript, reviewer: Reviewer, **review: object):  # type: ignore[no-untyped-def]
    return create_research_workflow(
        model=scripted_model(script),
        tools=[lookup],
        review=ReviewPolicy(callback=reviewer, **review),  # type: ignore[arg-type]
    )


# -- the router ------------------------------------------------------------------------------


def test_the_router_pauses_where_the_review_settings_say_and_routes_on_the_decision() -> None:
    summary = ReviewSettings(points=["summary"])
    both = ReviewSettings()
    done = ResearchDigest(node=Node.GROUNDING_EVAL, grounding_score=0.9, review=summary)
    assert next_node(done) == Node.REVIEW
    assert next_node(done.model_copy(update={"review": None})) == Node.DONE
    # An ungrounded summary with loops left is not reviewed yet: the run still works on it.
    working = done.model_copy(update={"grounding_score": 0.1})
    assert next_node(working) == Node.REGENERATE
    assert next_node(record(done, "approve")) == Node.DONE
    assert next_node(record(done, "revise")) == Node.REGENERATE
    assert next_node(record(done, "reject")) == Node.DONE
    assert end_reason(record(done, "reject")) == "rejected"
    assert end_reason(record(done, "approve")) == "grounded"

    plan = ResearchDigest(node=Node.REPLAN, review=both)
    assert next_node(plan) == Node.REVIEW
    assert next_node(plan.model_copy(update={"review": summary})) == Node.EXECUTE
    assert next_node(record(plan, "approve")) == Node.EXECUTE
    assert next_node(record(plan, "revise")) == Node.REPLAN
    assert end_reason(record(plan, "reject")) == "rejected"
    with pytest.raises(ValueError, match="not due for review"):
        record(ResearchDigest(node=Node.EXECUTE, review=both), "approve")


def test_a_spent_budget_ends_the_run_before_any_review() -> None:
    spent = ResearchDigest(
        node=Node.GROUNDING_EVAL,
        grounding_score=0.9,
        cost_usd=1.0,
        max_cost_usd=1.0,
        review=ReviewSettings(),
    )
    assert next_node(spent) == Node.DONE
    assert next_node(spent.model_copy(update={"node": Node.EXECUTE})) == Node.DONE
    assert end_reason(spent.model_copy(update={"grounding_score": 0.1})) == "budget_exhausted"


def test_a_decision_must_answer_the_pending_review() -> None:
    approve = ReviewDecision(review_id="summary-1", decision="approve")
    with pytest.raises(ReviewError, match="no review is pending"):
        check_decision(None, approve)
    pending = ReviewSubject(kind="tool", subject="call x").pending("tool-1", utc_now(), 60)
    with pytest.raises(ReviewError, match="'tool-1' waits"):
        check_decision(pending, approve)
    revise = ReviewDecision(review_id="tool-1", decision="revise", remark="shorter")
    with pytest.raises(ReviewError, match="not revised"):
        check_decision(pending, revise)
    summary = pending.model_copy(update={"kind": "summary"})
    with pytest.raises(ReviewError, match="budget"):
        check_decision(summary, revise, revise_refusal="the budget is spent")
    check_decision(summary, revise)
    assert pending.timeout_at is not None
    assert (pending.timeout_at - pending.requested_at).total_seconds() == 60


def test_decisions_are_validated() -> None:
    with pytest.raises(ValidationError, match="needs a remark"):
        ReviewDecision(review_id="summary-1", decision="revise")
    with pytest.raises(ValidationError):
        ReviewDecision(review_id="summary-1", decision="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        ReviewDecision(review_id="summary-1", decision="approve", remark="x" * 4001)
    with pytest.raises(ValidationError):
        ReviewSettings(points=[])


# -- research runs -----------------------------------------------------------------------------


def review_events(queue: asyncio.Queue[Event], prefix: str) -> list[tuple[str, dict]]:
    """The captured events whose type starts with `prefix`, in order."""
    events = []
    while not queue.empty():
        event = queue.get_nowait()
        if event.event_type.startswith(prefix):
            events.append((event.event_type, event.data))
    return events


async def test_approve_a_summary_finishes_the_run() -> None:
    reviewer = Reviewer("approve")
    spec = spec_with(ResearchScript(verdicts=[True]), reviewer, points=["summary"])
    with capture_events() as queue:
        result = await spec.execute("How fast did the CRM market grow?")
    [pending] = reviewer.seen
    assert review_events(queue, "research.review") == [
        (
            "research.review.awaiting",
            {
                "research": spec.name,
                "review_id": "summary-1",
                "kind": "summary",
                "subject": pending.subject,
            },
        ),
        (
            "research.review",
            {
                "research": spec.name,
                "review_id": "summary-1",
                "kind": "summary",
                "decision": "approve",
                "timed_out": False,
            },
        ),
    ]
    report = result.final_state
    assert report.end_reason == "grounded"
    [pending] = reviewer.seen
    assert pending.review_id == "summary-1" and pending.kind == "summary"
    assert pending.details["summary"] == report.summary
    assert pending.details["grounding_score"] == 1.0
    assert "grounding 100%" in pending.subject and pending.timeout_at is None
    assert [(r.review_id, r.decision, r.timed_out) for r in report.reviews] == [
        ("summary-1", "approve", False)
    ]
    assert report.nodes == ["plan", "execute", "causal_inference", "summarize", "grounding_eval"]


async def test_revise_a_summary_regenerates_it_with_the_remark() -> None:
    script = RecordingScript(verdicts=[True])
    reviewer = Reviewer("revise", "approve", remark="Say which analyst firm measured it.")
    result = await spec_with(script, reviewer, points=["summary"]).execute("CRM growth?")
    report = result.final_state
    [(node, message)] = script.rewrites
    assert node == "regenerate" and "Say which analyst firm measured it." in message
    assert report.revision_count == 1 and report.regeneration_count == 0
    assert report.nodes[-2:] == ["regenerate", "grounding_eval"]
    assert [r.decision for r in report.reviews] == ["revise", "approve"]
    assert [p.review_id for p in reviewer.seen] == ["summary-1", "summary-2"]
    assert report.end_reason == "grounded"
    assert result.state.review_remark is None


async def test_reject_ends_the_run_rejected() -> None:
    reviewer = Reviewer("reject")
    result = await spec_with(ResearchScript(verdicts=[True]), reviewer).execute("CRM growth?")
    assert result.final_state.end_reason == "rejected"
    assert result.final_state.reviews[0].decision == "reject"


async def test_an_ungrounded_final_summary_is_reviewed_once_its_loops_are_spent() -> None:
    reviewer = Reviewer("approve")
    spec = create_research_workflow(
        model=scripted_model(ResearchScript(verdicts=[False])),
        tools=[lookup],
        max_replans=0,
        review=ReviewPolicy(points=["summary"], callback=reviewer),
    )
    report = (await spec.execute("CRM growth?")).final_state
    assert report.end_reason == "max_regenerations"
    assert len(reviewer.seen) == 1 and reviewer.seen[0].details["ungrounded_claims"]


async def test_a_plan_is_reviewed_revised_with_the_remark_and_approved() -> None:
    # plan-1: the plan node's sub-questions (approved); plan-2: the replan's focused prompt
    # (revised with a remark); plan-3: that prompt written again (approved); then the summary.
    script = RecordingScript(verdicts=[False, False, True])
    reviewer = Reviewer("approve", "revise", "approve", remark="Only use the 2024 Gartner report.")
    report = (await spec_with(script, reviewer).execute("CRM growth?")).final_state
    kinds = [(p.kind, p.review_id) for p in reviewer.seen]
    assert kinds == [
        ("plan", "plan-1"),
        ("plan", "plan-2"),
        ("plan", "plan-3"),
        ("summary", "summary-4"),
    ]
    assert reviewer.seen[0].details["sub_questions"] == ["How fast did the CRM market grow?"]
    assert reviewer.seen[1].details["plan"] == "Look up the CRM market growth figure for 2024."
    replans = [message for node, message in script.rewrites if node == "replan"]
    assert len(replans) == 2 and "Only use the 2024 Gartner report." in replans[1]
    assert "Current plan:" in replans[1]
    assert report.replan_count == 1 and report.revision_count == 1
    assert len(report.focused_prompts) == 1
    assert report.end_reason == "grounded"


async def test_the_plan_nodes_sub_questions_are_revised_with_the_remark() -> None:
    script = RecordingScript(verdicts=[True])
    reviewer = Reviewer("revise", "approve", remark="Ask about 2023 as well.")
    result = await spec_with(script, reviewer, points=["plan"]).execute("CRM growth?")
    report = result.final_state
    assert [(p.kind, p.review_id) for p in reviewer.seen] == [
        ("plan", "plan-1"),
        ("plan", "plan-2"),
    ]
    assert len(script.plans) == 2 and "Ask about 2023 as well." not in script.plans[0]
    assert "Ask about 2023 as well." in script.plans[1]
    assert "Current sub-questions:\n- How fast did the CRM market grow?" in script.plans[1]
    assert report.nodes[:3] == ["plan", "plan", "execute"]
    assert report.revision_count == 1 and report.replan_count == 0
    assert report.end_reason == "grounded" and result.state.review_remark is None


async def test_reject_a_plan_ends_the_run_before_any_research() -> None:
    reviewer = Reviewer("reject")
    report = (
        await spec_with(
            ResearchScript(verdicts=[False, False, True]), reviewer, points=["plan"]
        ).execute("CRM growth?")
    ).final_state
    assert report.end_reason == "rejected"
    assert report.nodes == ["plan"] and not report.evidence


async def never_answers(pending: PendingReview) -> ReviewDecision:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


@pytest.mark.parametrize(("on_timeout", "end"), [("approve", "grounded"), ("reject", "rejected")])
async def test_a_review_that_times_out_is_decided_by_on_timeout(on_timeout: str, end: str) -> None:
    spec = create_research_workflow(
        model=scripted_model(ResearchScript(verdicts=[True])),
        tools=[lookup],
        review=ReviewPolicy(
            points=["summary"],
            timeout_seconds=0.01,
            on_timeout=on_timeout,
            callback=never_answers,  # type: ignore[arg-type]
        ),
    )
    report = (await spec.execute("CRM growth?")).final_state
    assert report.end_reason == end
    assert report.reviews[0].timed_out and "timed out" in (report.reviews[0].remark or "")


async def test_a_review_that_times_out_with_fail_fails_the_run() -> None:
    spec = create_research_workflow(
        model=scripted_model(ResearchScript(verdicts=[True])),
        tools=[lookup],
        review=ReviewPolicy(timeout_seconds=0.01, on_timeout="fail", callback=never_answers),
    )
    with pytest.raises(ReviewTimedOut, match="on_timeout is 'fail'"):
        await spec.execute("CRM growth?")


async def test_a_decision_for_another_review_is_refused() -> None:
    async def wrong_id(pending: PendingReview) -> ReviewDecision:
        return ReviewDecision(review_id="summary-9", decision="approve")

    spec = create_research_workflow(
        model=scripted_model(ResearchScript()),
        tools=[lookup],
        review=ReviewPolicy(callback=wrong_id),
    )
    with pytest.raises(ReviewError, match="'plan-1' waits"):
        await spec.execute("CRM growth?")


async def test_a_run_that_pauses_without_a_callback_says_how_to_review_it() -> None:
    spec = create_research_workflow(model=scripted_model(ResearchScript()), tools=[lookup])
    with pytest.raises(ReviewError, match="sleuth review RUN_ID"):
        await spec.execute({"prompt": "CRM growth?", "review": {"points": ["summary"]}})


async def test_revisions_are_bounded() -> None:
    reviewer = Reviewer("revise")
    spec = spec_with(ResearchScript(verdicts=[True]), reviewer, points=["summary"])
    with pytest.raises(ReviewError, match="already revised 10 times"):
        await spec.execute("CRM growth?")
    assert len(reviewer.seen) == 11


# -- tool approval ------------------------------------------------------------------------------


SENT: list[str] = []


def send_email(to: str) -> str:
    """Send the report by email."""
    SENT.append(to)
    return f"sent to {to}"


def approval_agent(callback: object = None, **policy: object) -> Agent:
    SENT.clear()
    model = ScriptedModel([tool_call("send_email", to="cfo@example.com"), text("Done.")])
    return Agent(
        model,
        tools=[send_email, lookup],
        approval=ApprovalPolicy(tools=["send_email"], callback=callback, **policy),  # type: ignore[arg-type]
    )


async def test_an_approved_tool_call_runs() -> None:
    reviewer = Reviewer("approve")
    agent = approval_agent(reviewer)
    with capture_events() as queue:
        result = await agent.arun("Mail the report to the CFO.")
    assert SENT == ["cfo@example.com"]
    [pending] = reviewer.seen
    assert review_events(queue, "agent.approval") == [
        (
            "agent.approval.awaiting",
            {"agent": agent.name, "tool": "send_email", "review_id": pending.review_id},
        ),
        (
            "agent.approval",
            {"agent": agent.name, "tool": "send_email", "decision": "approve", "timed_out": False},
        ),
    ]
    assert pending.kind == "tool" and pending.review_id.startswith("tool-call_")
    assert pending.details["tool"] == "send_email"
    assert pending.details["arguments"] == {"to": "cfo@example.com"}
    assert "call send_email(" in pending.subject
    assert result.state.approvals[pending.details["call_id"]].decision == "approve"


async def test_a_denied_tool_call_does_not_run_and_the_model_is_told() -> None:
    async def deny(pending: PendingReview) -> ReviewDecision:
        return ReviewDecision(review_id=pending.review_id, decision="reject", remark="not now")

    result = await approval_agent(deny).arun("Mail the report to the CFO.")
    assert SENT == []
    [item] = result.evidence
    assert not item.success and item.error == "denied"
    denial = next(m for m in result.state.messages if m.role == "tool")
    assert denial.kind == "approval_denied" and "not now" in denial.content
    assert result.stop_reason == "completed"


async def test_a_tool_approval_that_times_out_is_denied_by_default() -> None:
    result = await approval_agent(never_answers, timeout_seconds=0.01).arun("Mail it.")
    assert SENT == [] and result.evidence[0].error == "denied"
    assert next(iter(result.state.approvals.values())).timed_out


async def test_a_tool_approval_cannot_be_revised() -> None:
    with pytest.raises(ReviewError, match="not revised"):
        await approval_agent(Reviewer("revise")).arun("Mail it.")


async def test_tool_approval_without_a_callback_in_process_says_what_to_do() -> None:
    with pytest.raises(ApprovalRequired, match="AgentWorkflow"):
        await approval_agent(None).arun("Mail it.")


def test_an_approval_policy_naming_a_missing_tool_is_refused() -> None:
    with pytest.raises(InvalidSettingError, match="'send_fax'"):
        Agent(ScriptedModel([]), tools=[send_email], approval=ApprovalPolicy(tools=["send_fax"]))
