"""`ResearchWorkflow`: the research graph, every node an activity, routed by `sleuth.research.next_node`.

Start it from anywhere with plain JSON:
`temporal workflow start --task-queue sleuth --type ResearchWorkflow --input '{"prompt": "…"}'`.

The workflow is the only place that decides: it asks `next_node` which node runs next, and when
that says `done` it asks `end_reason` why and calls `research.finish`, which writes the report.
Past its history budget it continues as new, carrying the state reference and the digest.

When `next_node` says `review`, the run waits durably for its `review` Update (a
`ReviewDecision`); the `pending_review` Query shows what waits, the memo says "awaiting review"
and the `SleuthReviewState` search attribute is `awaiting`. Counters, score, tokens and cost are
upserted as search attributes as the run goes (see `sleuth.workflows.attributes`); at the end the memo
and the attributes (`SleuthResearchStatus`, `SleuthGrounded`, `SleuthGroundingScore`) describe
the final report, the best judged draft, not the last one.

The plan node came later than the others: runs started before it (no `research-plan` marker in
their history) go straight to execute, so their histories still replay.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError

from sleuth.workflows.streams import publish, publish_carried, state_for_continue

with workflow.unsafe.imports_passed_through():
    from sleuth.activities.research import ResearchActivities
    from sleuth.activities.research_models import (
        FinishInput,
        FinishOutput,
        NodeInput,
        NodeOutput,
        ResearchNodeConfig,
        ResearchOutcome,
        ResearchProgress,
        ResearchRequest,
        ResearchResume,
        ReviewSubjectInput,
    )
    from sleuth.flows.review import PendingReview, ReviewDecision, record_of
    from sleuth.research import (
        Node,
        ResearchDigest,
        end_reason,
        is_grounded,
        next_node,
        record_review,
        review_point,
        revise_refusal,
    )

from sleuth.workflows import attributes, metrics
from sleuth.workflows.review import REVIEW_STATES, ReviewGate

PLAN_PATCH = "research-plan"
"""The patch marker of the plan node (see the module docstring)."""

_ACTIVITIES = {
    Node.PLAN: ResearchActivities.plan,
    Node.EXECUTE: ResearchActivities.execute,
    Node.CAUSAL_INFERENCE: ResearchActivities.causal_inference,
    Node.SUMMARIZE: ResearchActivities.summarize,
    Node.GROUNDING_EVAL: ResearchActivities.grounding_eval,
    Node.REGENERATE: ResearchActivities.regenerate,
    Node.REPLAN: ResearchActivities.replan,
}


@workflow.defn(name="ResearchWorkflow")
class ResearchWorkflow:
    """Runs one research config durably; counters are in the `progress` query and the memo."""

    @workflow.init
    def __init__(self, request: ResearchRequest) -> None:
        self._progress = ResearchProgress()
        self._gate = ReviewGate()
        self._remark: str | None = None
        self._attributes = attributes.RunAttributes([])
        self._stream = WorkflowStream(request.resume.stream if request.resume else None)

    @workflow.query
    def progress(self) -> ResearchProgress:
        """The node running now, the counters and the score history."""
        return self._progress

    @workflow.query(name="pending_review")
    def pending_review(self) -> PendingReview | None:
        """The plan or summary waiting for a person's decision (None when nothing waits)."""
        return self._gate.pending

    @workflow.update(name="review")
    def review(self, decision: ReviewDecision) -> PendingReview:
        """Decide the pending review: approve, revise (with a remark) or reject. Returns the
        review it answered."""
        return self._gate.answer(decision)

    @review.validator
    def _validate_review(self, decision: ReviewDecision) -> None:
        self._gate.validate(decision)

    @workflow.run
    async def run(self, request: ResearchRequest) -> ResearchOutcome:
        try:
            config = ResearchNodeConfig.with_overrides(request.nodes)
        except ValueError as exc:
            raise ApplicationError(str(exc), type="ConfigError", non_retryable=True) from exc
        digest = ResearchDigest()
        state_ref: str | None = None
        if request.resume is not None:
            digest, state_ref = request.resume.digest, request.resume.state_ref
            self._progress = request.resume.progress
            self._progress.runs += 1
            self._remark = request.resume.review_remark
        self._progress.research = request.research
        self._attributes = await attributes.for_this_run(request.research)
        self._attributes.upsert({attributes.RESEARCH: request.research})
        nodes_this_run = 0
        while (node := next_node(digest)) != Node.DONE:
            if node == Node.PLAN and not workflow.patched(PLAN_PATCH):
                digest = digest.model_copy(update={"node": Node.PLAN})
                continue
            if state_ref is not None and nodes_this_run and self._history_budget_spent(request):
                workflow.logger.info(
                    "research continues as new after %d events",
                    workflow.info().get_current_history_length(),
                )
                resume = ResearchResume(
                    state_ref=state_ref,
                    digest=digest,
                    progress=self._progress,
                    review_remark=self._remark,
                    stream=await state_for_continue(self._stream),
                )
                workflow.continue_as_new(request.model_copy(update={"resume": resume}))
            if node == Node.REVIEW:
                assert state_ref is not None
                digest = await self._review(request, digest, state_ref, config)
                nodes_this_run += 1
                continue
            self._progress.node = node
            workflow.logger.info("research node %s starts", node)
            summary = self._summary(node, request.research, digest)
            reason = _reason(node, digest)
            publish(self._stream, "research.node.started", research=request.research, node=node)
            self._show_details(digest, running=node)
            first = state_ref is None
            output = await self._run_node(
                node,
                NodeInput(
                    research=request.research,
                    state_ref=state_ref,
                    prompt=request.prompt if first else None,
                    grounding_threshold=request.grounding_threshold if first else None,
                    max_replans=request.max_replans if first else None,
                    max_regenerations=request.max_regenerations if first else None,
                    max_cost_usd=request.max_cost_usd if first else None,
                    review=request.review if first else None,
                    causal_inference=request.causal_inference if first else None,
                    review_remark=self._remark,
                    claim_threshold=request.claim_threshold if first else None,
                ),
                config,
                summary,
            )
            publish_carried(self._stream, output.live_events)
            self._remark = None
            tokens_before = digest.total_tokens
            digest, state_ref = output.digest, output.state_ref
            nodes_this_run += 1
            self._record(node, digest)
            publish(
                self._stream,
                "research.node.finished",
                research=request.research,
                node=node,
                evidence_count=digest.evidence_count,
                grounding_score=digest.grounding_score,
                grounding_threshold=digest.grounding_threshold,
                replan_count=digest.replan_count,
                regeneration_count=digest.regeneration_count,
                reason=reason,
            )
            self._show_details(digest)
            metrics.record_tokens("research", request.research, digest.total_tokens - tokens_before)
        # `next_node` never ends a run before its first execute, so the state exists here.
        assert state_ref is not None
        finished = await self._finish(
            FinishInput(
                research=request.research,
                state_ref=state_ref,
                end_reason=end_reason(digest),
                reviews=self._progress.reviews,
            ),
            config,
        )
        report = finished.report
        self._progress.status = "done"
        self._progress.end_reason = report.end_reason
        self._progress.research_status = report.status
        self._progress.best_draft = report.best_draft
        self._progress.grounding_score = report.grounding_score
        self._show_details(digest.model_copy(update={"grounding_score": report.grounding_score}))
        # The memo and attributes end on the final report (the best draft), not on the last
        # draft judged: a worse replan's score never stands for the run.
        workflow.upsert_memo(
            {
                "status": "done",
                "end_reason": report.end_reason,
                "research_status": report.status,
                "grounding_score": report.grounding_score,
                "best_draft": report.best_draft,
                "confidence": report.confidence,
            }
        )
        self._attributes.upsert(
            {
                attributes.END_REASON: report.end_reason,
                attributes.GROUNDED: report.status == "grounded",
                attributes.RESEARCH_STATUS: report.status,
                attributes.GROUNDING_SCORE: report.grounding_score,
            }
        )
        metrics.record_run_end("research", request.research, report.end_reason, report.cost_usd)
        publish(
            self._stream,
            "research.finished",
            research=request.research,
            end_reason=self._progress.end_reason,
            status=report.status,
            grounding_score=report.grounding_score,
        )
        info = workflow.info()
        return ResearchOutcome(
            final_state=finished.report,
            state_ref=finished.state_ref,
            research=request.research,
            workflow_id=info.workflow_id,
            run_id=info.run_id,
        )

    async def _review(
        self,
        request: ResearchRequest,
        digest: ResearchDigest,
        state_ref: str,
        config: ResearchNodeConfig,
    ) -> ResearchDigest:
        """Wait for a person's decision on the plan or summary, and record it in the digest."""
        assert digest.review is not None
        point = review_point(digest)
        review_id = f"{point}-{len(self._progress.reviews) + 1}"
        try:
            subject = await workflow.execute_activity_method(
                ResearchActivities.review_subject,
                ReviewSubjectInput(research=request.research, state_ref=state_ref),
                summary=f"{request.research}: show the {point} to a reviewer ({review_id})",
                **config.review_subject.activity_options(),
            )
        except ActivityError as exc:
            self._fail("review", exc)
            raise
        settings = digest.review
        pending = subject.pending(review_id, workflow.now(), settings.timeout_seconds)
        self._progress.status = "awaiting review"
        self._show_details(digest, running=f"awaiting review {review_id} of the {point}")
        workflow.upsert_memo({"status": "awaiting review", "review": pending.subject})
        self._attributes.upsert({attributes.REVIEW_STATE: "awaiting"})
        publish(
            self._stream,
            "research.review.awaiting",
            research=request.research,
            review_id=review_id,
            kind=pending.kind,
            subject=pending.subject,
        )
        try:
            decision, timed_out = await self._gate.wait(
                pending,
                settings.timeout_seconds,
                settings.on_timeout,
                revise_refusal=revise_refusal(digest),
            )
        except ApplicationError:
            self._progress.status = "failed"
            self._attributes.upsert({attributes.REVIEW_STATE: "timed_out"})
            raise
        record = record_of(pending, decision, timed_out=timed_out)
        self._progress.reviews.append(record)
        self._progress.status = "running"
        self._show_details(digest)
        self._remark = decision.remark if decision.decision == "revise" else None
        outcome = "timed_out" if timed_out else REVIEW_STATES[decision.decision]
        workflow.upsert_memo(
            {"status": "running", "review": f"{review_id} {outcome}: {decision.remark or ''}"}
        )
        self._attributes.upsert({attributes.REVIEW_STATE: outcome})
        publish(
            self._stream,
            "research.review",
            research=request.research,
            review_id=review_id,
            kind=pending.kind,
            decision=decision.decision,
            timed_out=timed_out,
        )
        metrics.record_review(point, decision.decision)
        workflow.logger.info("review %s decided: %s", review_id, decision.decision)
        return record_review(digest, decision.decision)

    async def _run_node(
        self, node: Node, node_input: NodeInput, config: ResearchNodeConfig, summary: str
    ) -> NodeOutput:
        try:
            return await workflow.execute_activity_method(
                _ACTIVITIES[node],
                node_input,
                summary=summary,
                **config.for_node(node).activity_options(),
            )
        except ActivityError as exc:
            self._fail(node.value, exc)
            raise

    async def _finish(self, finish_input: FinishInput, config: ResearchNodeConfig) -> FinishOutput:
        try:
            return await workflow.execute_activity_method(
                ResearchActivities.finish,
                finish_input,
                summary=f"{finish_input.research}: report ({finish_input.end_reason})",
                **config.finish.activity_options(),
            )
        except ActivityError as exc:
            self._fail("finish", exc)
            raise

    def _fail(self, step: str, exc: ActivityError) -> None:
        """Mark the run failed; a non-retryable cause surfaces itself as the run's failure
        (e.g. "unknown research config 'x'; registered: …"), anything else is re-raised as is."""
        self._progress.status = "failed"
        cause = exc.cause
        error = cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
        publish(self._stream, "research.node.failed", node=step, error=error)
        workflow.set_current_details(f"**Failed:** {step.replace('_', ' ')}: {error}")
        if isinstance(cause, ApplicationError) and cause.non_retryable:
            raise ApplicationError(
                f"{step} failed: {cause.message}", type=cause.type, non_retryable=True
            ) from exc

    def _history_budget_spent(self, request: ResearchRequest) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= request.history_event_budget
        )

    def _record(self, node: Node, digest: ResearchDigest) -> None:
        progress = self._progress
        progress.nodes_run.append(node)
        progress.replan_count = digest.replan_count
        progress.regeneration_count = digest.regeneration_count
        progress.grounding_score = digest.grounding_score
        if node == Node.GROUNDING_EVAL and digest.grounding_score is not None:
            progress.score_history.append(digest.grounding_score)
        progress.evidence_count = digest.evidence_count
        progress.total_tokens = digest.total_tokens
        progress.cost_usd = digest.cost_usd
        progress.revision_count = digest.revision_count
        progress.best_draft = digest.best_draft
        if node == Node.GROUNDING_EVAL and digest.grounding_score is not None:
            metrics.record_grounding("research", progress.research, digest.grounding_score)
        workflow.upsert_memo(
            {
                "research": progress.research,
                "node": node.value,
                "replan_count": digest.replan_count,
                "regeneration_count": digest.regeneration_count,
                "grounding_score": digest.grounding_score,
                "evaluations": digest.draft_count,
                "best_draft": digest.best_draft,
                "best_score": digest.best_score,
                "total_tokens": digest.total_tokens,
                "cost_usd": round(digest.cost_usd, 6),
            }
        )
        self._attributes.upsert(
            {
                attributes.GROUNDING_SCORE: digest.grounding_score,
                attributes.REPLAN_COUNT: digest.replan_count,
                attributes.REGENERATION_COUNT: digest.regeneration_count,
                attributes.TOTAL_TOKENS: digest.total_tokens,
                attributes.COST_USD: digest.cost_usd,
            }
        )

    def _show_details(self, digest: ResearchDigest, running: Node | str | None = None) -> None:
        """The Web UI's "current details": the step running now, the latest score, the counts."""
        progress = self._progress
        if running is not None:
            step = running.value if isinstance(running, Node) else running
            head = f"**Running:** {step.replace('_', ' ')}"
        elif progress.status == "done":
            ending = progress.research_status or progress.end_reason
            head = f"**Done:** {ending} ({progress.end_reason})"
        else:
            head = f"**Between steps** ({len(progress.nodes_run)} run)"
        score = (
            f"{digest.grounding_score:.0%} (needs {digest.grounding_threshold:.0%})"
            if digest.grounding_score is not None
            else "not evaluated yet"
        )
        workflow.set_current_details(
            f"{head}\n\n"
            f"- grounding score: {score}\n"
            f"- steps: {len(progress.nodes_run)}, evidence items: {digest.evidence_count}\n"
            f"- replans: {digest.replan_count}/{digest.max_replans}, "
            f"regenerations: {digest.regeneration_count}/{digest.max_regenerations}\n"
            f"- tokens: {digest.total_tokens}, cost: ${digest.cost_usd:.4f}"
        )

    def _summary(self, node: Node, research: str, digest: ResearchDigest) -> str:
        """The line the Web UI shows for each activity call."""
        score = f"score {digest.grounding_score or 0:.0%} < {digest.grounding_threshold:.0%}"
        match node:
            case Node.PLAN:
                return f"{research}: plan (split the question into sub-questions)"
            case Node.EXECUTE if digest.pending_count and digest.sub_question_count:
                part = f"sub-question {digest.next_sub_question}/{digest.sub_question_count}"
                if digest.replan_count:
                    return f"{research}: execute {part} again after replan {digest.replan_count}"
                return f"{research}: execute {part} (agent tool loop gathers evidence)"
            case Node.EXECUTE if digest.replan_count:
                return f"{research}: execute (research again after replan {digest.replan_count})"
            case Node.EXECUTE:
                return f"{research}: execute (agent tool loop gathers evidence)"
            case Node.CAUSAL_INFERENCE:
                return f"{research}: causal inference over {digest.evidence_count} evidence items"
            case Node.SUMMARIZE if digest.evidence_count == 0:
                return f"{research}: summarize with no evidence (execute gathered none)"
            case Node.SUMMARIZE:
                return f"{research}: summarize {digest.evidence_count} evidence items"
            case Node.GROUNDING_EVAL:
                evaluation = len(self._progress.score_history) + 1
                return f"{research}: grounding eval #{evaluation}"
            case Node.REGENERATE if digest.node == Node.REVIEW:
                return f"{research}: regenerate the summary as the reviewer asked"
            case Node.REGENERATE:
                why = _why(digest, score, digest.unanswered_count, "unanswered")
                done = digest.regeneration_count
                return f"{research}: regenerate {done + 1}/{digest.max_regenerations} ({why})"
            case _ if digest.node == Node.REVIEW:
                return f"{research}: replan as the reviewer asked"
            case _:
                why = _why(digest, score, digest.uncovered_count, "not found")
                return f"{research}: replan {digest.replan_count + 1}/{digest.max_replans} ({why})"


def _reason(node: Node, digest: ResearchDigest) -> str | None:
    """Why a replan or regenerate runs (None for other nodes): read before it runs, since its
    output digest no longer says."""
    if node not in (Node.REPLAN, Node.REGENERATE):
        return None
    if digest.node == Node.REVIEW:
        return "the reviewer asked"
    score = f"score {digest.grounding_score or 0:.0%} < {digest.grounding_threshold:.0%}"
    if node == Node.REPLAN:
        return _why(digest, score, digest.uncovered_count, "not found")
    return _why(digest, score, digest.unanswered_count, "unanswered")


def _why(digest: ResearchDigest, score: str, parts: int, state: str) -> str:
    """Why a regenerate or replan runs: the score when the report is not grounded, and how many
    parts of the question itself are in `state` (unanswered, not found) when any are."""
    reasons = [] if is_grounded(digest) else [score]
    if parts:
        noun = "part of the question" if parts == 1 else "parts of the question"
        reasons.append(f"{parts} {noun} {state}")
    return "; ".join(reasons)
