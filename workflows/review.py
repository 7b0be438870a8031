"""The durable side of a review: one pending review at a time, answered by the `review` Update.

A workflow opens the gate with a `PendingReview` and waits on a durable timer
(`workflow.wait_condition` with the policy's timeout), which costs nothing while it waits. The
Update's validator refuses a decision that does not answer what waits (the caller gets the
reason); the handler records the decision and returns the review it answered.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from sleuth.flows.review import (
        ApprovalTimeoutAction,
        PendingReview,
        ReviewDecision,
        ReviewError,
        ReviewTimedOut,
        ReviewTimeoutAction,
        check_decision,
        timeout_decision,
    )

REVIEW_STATES = {"approve": "approved", "revise": "revised", "reject": "rejected"}
"""The review-state search attribute after each decision (`timed_out` when the timeout decided)."""


class ReviewGate:
    """What waits for a person in one workflow run, and the decision that answers it."""

    def __init__(self) -> None:
        self.pending: PendingReview | None = None
        self.revise_refusal: str | None = None
        """Why the pending review cannot be revised (a run out of revisions or budget)."""
        self._decision: ReviewDecision | None = None

    def validate(self, decision: ReviewDecision) -> None:
        """Refuse (with the reason) a decision that does not answer the pending review."""
        try:
            check_decision(self.pending, decision, revise_refusal=self.revise_refusal)
        except ReviewError as exc:
            raise ApplicationError(str(exc), type="ReviewError", non_retryable=True) from None

    def answer(self, decision: ReviewDecision) -> PendingReview:
        """Record `decision` (validated) and return the review it answered."""
        answered = self.pending
        assert answered is not None
        self._decision = decision
        self.pending = None
        return answered

    async def wait(
        self,
        pending: PendingReview,
        timeout_seconds: float | None,
        on_timeout: ReviewTimeoutAction | ApprovalTimeoutAction,
        *,
        revise_refusal: str | None = None,
    ) -> tuple[ReviewDecision, bool]:
        """Wait durably for the decision on `pending`; on timeout `on_timeout` decides (`fail`
        fails the run). Returns the decision and whether the timeout made it."""
        self.pending, self.revise_refusal, self._decision = pending, revise_refusal, None
        try:
            await workflow.wait_condition(
                lambda: self._decision is not None,
                timeout=timedelta(seconds=timeout_seconds) if timeout_seconds else None,
                timeout_summary=f"review {pending.review_id} times out ({on_timeout})",
            )
        except TimeoutError:
            self.pending = None
            try:
                return timeout_decision(pending, on_timeout), True
            except ReviewTimedOut as exc:
                raise ApplicationError(
                    str(exc), type="ReviewTimedOut", non_retryable=True
                ) from None
        assert self._decision is not None
        return self._decision, False
