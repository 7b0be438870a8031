"""What a research run shows a reviewer, and the in-process review step.

Both runners describe the review with `review_subject(state)`: in-process from the run's state,
durably in the `research.review_subject` activity (the workflow holds only the digest, not the
summary), which the workflow then stamps with its own clock. In-process, `ask_reviewer` asks the
policy's callback and records the decision (`decided`); durably the workflow waits for its
`review` Update and records the decision in its digest with the same `record_review`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sleuth._util.text import preview
from sleuth.flows.review import (
    PendingReview,
    ReviewCallback,
    ReviewRecord,
    ReviewSubject,
    ask,
    record_of,
    utc_now,
)
from sleuth.research.nodes import grounded_text
from sleuth.research.router import Node, record_review, review_point, revise_refusal
from sleuth.research.state import ResearchState
from sleuth.runtime.events import emit

SUMMARY_CHARS = 8_000
"""The most summary text a pending review carries (it is part of the workflow's history)."""
PLAN_CHARS = 4_000
CLAIMS_SHOWN = 20


def pending_review(
    state: ResearchState,
    *,
    review_id: str,
    requested_at: datetime,
    timeout_seconds: float | None,
) -> PendingReview:
    """The review `state` is due for (its plan or its summary), for a person to decide."""
    return review_subject(state).pending(review_id, requested_at, timeout_seconds)


def review_subject(state: ResearchState) -> ReviewSubject:
    """What a reviewer of `state` is shown: the plan, or the summary and its grounding."""
    point = review_point(state)
    ungrounded = [c.claim for c in state.claims if not c.grounded][:CLAIMS_SHOWN]
    details: dict[str, Any] = {
        "prompt": preview(state.prompt, 500),
        "ungrounded_claims": ungrounded,
        "replan_count": state.replan_count,
        "regeneration_count": state.regeneration_count,
        "revision_count": state.revision_count,
        "cost_usd": state.usage.cost_usd,
    }
    if point == "plan":
        plan = state.focused_prompt
        if state.node == Node.PLAN:
            # The plan node's plan is the question's sub-questions.
            details["sub_questions"] = list(state.sub_questions)
            plan = "\n".join(f"{i}. {q}" for i, q in enumerate(state.sub_questions, start=1))
        details["plan"] = _cut(plan, PLAN_CHARS)
        subject = f"plan for {preview(state.prompt, 80)!r}: {preview(plan, 160)}"
    else:
        score, threshold = state.grounding_score, state.grounding_threshold
        details |= {
            "summary": _cut(grounded_text(state), SUMMARY_CHARS),
            "grounding_score": score,
            "grounding_threshold": threshold,
            "evidence_count": len(state.evidence),
        }
        grounding = f"grounding {score:.0%}" if score is not None else "not judged"
        subject = (
            f"summary for {preview(state.prompt, 80)!r} ({grounding}, threshold "
            f"{threshold:.0%}): {preview(state.summary, 160)}"
        )
    return ReviewSubject(kind=point, subject=subject, details=details)


async def ask_reviewer(
    callback: ReviewCallback, research: str, state: ResearchState
) -> ResearchState:
    """Ask `callback` to decide the review `state` is due for, and record the decision."""
    assert state.review is not None
    point = review_point(state)
    pending = pending_review(
        state,
        review_id=f"{point}-{len(state.reviews) + 1}",
        requested_at=utc_now(),
        timeout_seconds=state.review.timeout_seconds,
    )
    emit(
        "research.review.awaiting",
        research=research,
        review_id=pending.review_id,
        kind=pending.kind,
        subject=pending.subject,
    )
    decision, timed_out = await ask(
        callback,
        pending,
        timeout_seconds=state.review.timeout_seconds,
        on_timeout=state.review.on_timeout,
        revise_refusal=revise_refusal(state),
    )
    record = record_of(pending, decision, timed_out=timed_out)
    emit(
        "research.review",
        research=research,
        review_id=record.review_id,
        kind=record.kind,
        decision=record.decision,
        timed_out=timed_out,
    )
    return decided(state, record)


def decided(state: ResearchState, record: ReviewRecord) -> ResearchState:
    """`state` after the review `record` decided: at `review`, with the decision, the remark for
    the node that writes again (`revise`), and the record kept for the report."""
    recorded = record_review(state, record.decision)
    return recorded.model_copy(
        update={
            "review_remark": record.remark if record.decision == "revise" else None,
            "reviews": [*state.reviews, record],
        }
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " …"
