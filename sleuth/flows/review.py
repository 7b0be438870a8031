"""People in the loop: what waits for a person, what they decide, and the policies that pause runs.

A research run can pause after its plan and after its final summary
(`create_research_workflow(review=ReviewPolicy(...))`); an agent's named tool calls can wait for
approval (`Agent(approval=ApprovalPolicy(tools=[...]))`). What waits is a `PendingReview`; a
person answers with a `ReviewDecision`:

- `approve` goes on (for a tool call: the call runs);
- `revise` (plans and summaries only) takes a remark: a plan is written again, a summary is
  regenerated, and the remark reaches the model;
- `reject` ends a research run with `end_reason="rejected"`; for a tool call it denies the call
  (the model is told, and the run goes on).

In-process the policy's `callback` (an async function `PendingReview -> ReviewDecision`) answers.
Durably the workflow waits on its `review` Update (`sleuth review RUN_ID`, or any Temporal
client) and shows what waits in its `pending_review` Query; the wait is a durable timer, so a
run waiting for days costs nothing. A review not answered within `timeout_seconds` is decided
by `on_timeout`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sleuth._util.text import preview
from sleuth.models.base import ToolCall
from sleuth.runtime.errors import SleuthError

ReviewKind = Literal["plan", "summary", "tool"]
"""What waits: a research plan, a research summary, or a tool call."""
ReviewPoint = Literal["plan", "summary"]
"""Where a research run can pause."""
Verdict = Literal["approve", "revise", "reject"]
ReviewTimeoutAction = Literal["approve", "reject", "fail"]
ApprovalTimeoutAction = Literal["deny", "approve", "fail"]

MAX_REMARK_CHARS = 4_000
"""The longest remark a decision may carry (it travels in the workflow's history)."""
MAX_REVIEW_SECONDS = 366 * 24 * 3600
"""The longest review timeout: a year."""
MAX_REVISIONS = 10
"""The most revisions one research run may be sent back for."""
DENIED = "denied"
"""The error of a tool call a reviewer denied (it did not run)."""
REVIEW_POINTS: tuple[ReviewPoint, ...] = ("plan", "summary")


class ReviewError(SleuthError, ValueError):
    """A decision that does not answer what waits (no review pending, another review's id, a
    `revise` where none is possible), or a review that cannot be asked for."""


class ApprovalRequired(ReviewError):
    """A tool call needs approval in-process, but its `ApprovalPolicy` has no callback to ask."""


class ReviewTimedOut(SleuthError, TimeoutError):
    """No decision came within the timeout and the policy says `on_timeout="fail"`."""


class ReviewDecision(BaseModel):
    """A person's answer to the review `review_id` names."""

    model_config = ConfigDict(extra="forbid")

    review_id: str = Field(min_length=1, max_length=200)
    """The `review_id` of the `PendingReview` this answers."""
    decision: Verdict
    """`approve`, `revise` (plans and summaries, with a remark) or `reject` (for a tool call:
    deny it)."""
    remark: str | None = Field(default=None, max_length=MAX_REMARK_CHARS)
    """What to change (required for `revise`, at most 4,000 characters); shown to the model."""

    @model_validator(mode="after")
    def _revise_has_remark(self) -> ReviewDecision:
        if self.decision == "revise" and not (self.remark or "").strip():
            raise ValueError("a revise decision needs a remark: say what should change")
        return self


class PendingReview(BaseModel):
    """What waits for a person."""

    review_id: str
    """Answer with a `ReviewDecision` carrying this id."""
    kind: ReviewKind
    subject: str
    """One line saying what waits, for a person to read."""
    details: dict[str, Any] = Field(default_factory=dict)
    """What a reviewer needs to decide: the summary and its grounding, the plan, or the tool
    and its arguments."""
    requested_at: datetime
    timeout_at: datetime | None = None
    """When `on_timeout` decides, if nobody has (None: the run waits as long as it takes)."""


class ReviewSubject(BaseModel):
    """What a review is about, before it is stamped with a time and an id."""

    kind: ReviewKind
    subject: str
    details: dict[str, Any] = Field(default_factory=dict)

    def pending(
        self, review_id: str, requested_at: datetime, timeout_seconds: float | None
    ) -> PendingReview:
        """The pending review of this subject, requested at `requested_at`."""
        return PendingReview(
            review_id=review_id,
            kind=self.kind,
            subject=self.subject,
            details=self.details,
            requested_at=requested_at,
            timeout_at=timeout_at(requested_at, timeout_seconds),
        )


class ReviewRecord(BaseModel):
    """A review that was decided, as a run's report lists it."""

    review_id: str
    kind: ReviewKind
    decision: Verdict
    remark: str | None = None
    timed_out: bool = False
    """True when `on_timeout` decided, not a person."""


class ReviewSettings(BaseModel):
    """Where a research run pauses and how long it waits: the part of a `ReviewPolicy` that
    travels with a durable run (per run: `{"review": {"points": ["summary"]}}`)."""

    model_config = ConfigDict(extra="forbid")

    points: list[ReviewPoint] = Field(default_factory=lambda: list(REVIEW_POINTS), min_length=1)
    """`plan` (after each plan, before the research it directs) and/or `summary` (after the
    final summary's grounding eval, before the run ends)."""
    timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_REVIEW_SECONDS)
    """How long a review may wait (None: as long as it takes; at most a year)."""
    on_timeout: ReviewTimeoutAction = "reject"
    """What a review that times out decides: `approve`, `reject`, or `fail` the run."""

    def pauses_at(self, point: ReviewPoint) -> bool:
        return point in self.points


ReviewCallback = Callable[[PendingReview], Awaitable[ReviewDecision]]
"""Answers a review in-process: `async def review(pending) -> ReviewDecision`."""


class ReviewPolicy(ReviewSettings):
    """`create_research_workflow(review=ReviewPolicy(points=["summary"], callback=...))`.

    Durably the callback is not used: the run waits for the `review` Update instead.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    callback: ReviewCallback | None = Field(default=None, exclude=True)
    """Answers reviews of in-process runs (`await spec.execute(...)`)."""

    def settings(self) -> ReviewSettings:
        """The policy without its callback (what a durable run carries)."""
        return ReviewSettings.model_validate(self.model_dump())


class ApprovalPolicy(BaseModel):
    """`Agent(approval=ApprovalPolicy(tools=["send_email"]))`: calls of these tools wait for a
    person to approve or deny them."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    tools: list[str] = Field(min_length=1)
    """The names of the tools whose every call needs approval."""
    timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_REVIEW_SECONDS)
    """How long a call may wait (None: as long as it takes; at most a year)."""
    on_timeout: ApprovalTimeoutAction = "deny"
    """What a call that times out gets: `deny` (not run; the model is told), `approve`, or
    `fail` the run."""
    callback: ReviewCallback | None = Field(default=None, exclude=True)
    """Answers approvals of in-process runs; durably the `review` Update does."""

    def covers(self, tool: str) -> bool:
        """Whether calls of `tool` need approval."""
        return tool in self.tools


def check_decision(
    pending: PendingReview | None, decision: ReviewDecision, *, revise_refusal: str | None = None
) -> None:
    """Raise `ReviewError` unless `decision` answers `pending`. `revise_refusal`, when set, is
    why this review cannot be revised (no revisions or budget left)."""
    if pending is None:
        raise ReviewError(
            f"no review is pending, so {decision.review_id!r} cannot be answered; query "
            "`pending_review` (or run `sleuth review RUN_ID`) to see what waits"
        )
    if decision.review_id != pending.review_id:
        raise ReviewError(
            f"review {decision.review_id!r} is not the one waiting: {pending.review_id!r} waits "
            f"({pending.subject}); answer that id"
        )
    if decision.decision == "revise":
        if pending.kind == "tool":
            raise ReviewError(
                "a tool call is approved or rejected (denied), not revised; answer approve or "
                "reject"
            )
        if revise_refusal:
            raise ReviewError(revise_refusal)


def approval_id(call: ToolCall) -> str:
    """The review id of the approval of a tool call (`tool-<call id>`)."""
    return f"tool-{call.id}"


def timeout_at(requested_at: datetime, timeout_seconds: float | None) -> datetime | None:
    """When a review requested at `requested_at` times out (None without a timeout)."""
    if timeout_seconds is None:
        return None
    return requested_at + timedelta(seconds=timeout_seconds)


def timeout_decision(
    pending: PendingReview, action: ReviewTimeoutAction | ApprovalTimeoutAction
) -> ReviewDecision:
    """What `on_timeout` decides for `pending`; raises `ReviewTimedOut` for `fail`."""
    if action == "fail":
        raise ReviewTimedOut(
            f"nobody answered review {pending.review_id!r} ({pending.subject}) by "
            f"{pending.timeout_at:%Y-%m-%d %H:%M:%S} UTC, and on_timeout is 'fail'"
            if pending.timeout_at
            else f"nobody answered review {pending.review_id!r} and on_timeout is 'fail'"
        )
    verdict: Verdict = "approve" if action == "approve" else "reject"
    return ReviewDecision(
        review_id=pending.review_id,
        decision=verdict,
        remark=f"no decision before the review timed out (on_timeout={action})",
    )


def record_of(pending: PendingReview, decision: ReviewDecision, *, timed_out: bool) -> ReviewRecord:
    """What the run keeps of a review once it is answered (or timed out)."""
    return ReviewRecord(
        review_id=pending.review_id,
        kind=pending.kind,
        decision=decision.decision,
        remark=decision.remark,
        timed_out=timed_out,
    )


def utc_now() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)


async def ask(
    callback: ReviewCallback,
    pending: PendingReview,
    *,
    timeout_seconds: float | None,
    on_timeout: ReviewTimeoutAction | ApprovalTimeoutAction,
    revise_refusal: str | None = None,
) -> tuple[ReviewDecision, bool]:
    """Ask `callback` to decide `pending` in-process, within `timeout_seconds`; returns the
    decision and whether the timeout made it. A decision that does not answer `pending` raises
    `ReviewError`."""
    try:
        decision = await asyncio.wait_for(callback(pending), timeout_seconds)
    except TimeoutError:
        return timeout_decision(pending, on_timeout), True
    if not isinstance(decision, ReviewDecision):
        raise ReviewError(
            f"the review callback returned {type(decision).__name__}, not a ReviewDecision; "
            "return ReviewDecision(review_id=pending.review_id, decision=...)"
        )
    check_decision(pending, decision, revise_refusal=revise_refusal)
    return decision, False


def approval_subject(agent: str, call: ToolCall) -> ReviewSubject:
    """What a reviewer is shown for a tool call of `agent`: one line, and the tool, its
    arguments and the call's id."""
    arguments = json.dumps(call.arguments, ensure_ascii=False, default=str)
    return ReviewSubject(
        kind="tool",
        subject=f"{agent}: call {call.name}({preview(arguments, 200)})",
        details={
            "agent": agent,
            "tool": call.name,
            "arguments": call.arguments,
            "call_id": call.id,
        },
    )


async def ask_approval(policy: ApprovalPolicy, agent: str, call: ToolCall) -> ReviewRecord:
    """Ask `policy`'s callback (in-process) whether `agent` may make `call`."""
    if policy.callback is None:
        raise ApprovalRequired(
            f"calls of {call.name!r} need approval, but agent {agent!r} has no approval callback "
            "to ask in-process: pass ApprovalPolicy(callback=...), or run the agent durably "
            "(AgentWorkflow) and answer with `sleuth review RUN_ID`"
        )
    pending = approval_subject(agent, call).pending(
        approval_id(call), utc_now(), policy.timeout_seconds
    )
    decision, timed_out = await ask(
        policy.callback,
        pending,
        timeout_seconds=policy.timeout_seconds,
        on_timeout=policy.on_timeout,
    )
    return record_of(pending, decision, timed_out=timed_out)
