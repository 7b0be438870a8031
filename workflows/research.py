"""`ResearchWorkflow`: the research graph, every node an activity, routed by `sleuth.research.next_node`.

Start it from anywhere with plain JSON:
`temporal workflow start --task-queue sleuth --type ResearchWorkflow --input '{"prompt": "…"}'`.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.research import ResearchActivities
    from activities.research_models import (
        NodeInput,
        NodeOutput,
        ResearchNodeConfig,
        ResearchOutcome,
        ResearchProgress,
        ResearchRequest,
    )
    from sleuth.research import DONE, ResearchDigest, next_node

_ACTIVITIES = {
    "execute": ResearchActivities.execute,
    "causal_inference": ResearchActivities.causal_inference,
    "summarize": ResearchActivities.summarize,
    "grounding_eval": ResearchActivities.grounding_eval,
    "regenerate": ResearchActivities.regenerate,
    "replan": ResearchActivities.replan,
}


@workflow.defn(name="ResearchWorkflow")
class ResearchWorkflow:
    """Runs one research config durably; counters are in the `progress` query and the memo."""

    def __init__(self) -> None:
        self._progress = ResearchProgress()

    @workflow.query
    def progress(self) -> ResearchProgress:
        """The node running now, the counters and the score history."""
        return self._progress

    @workflow.run
    async def run(self, request: ResearchRequest) -> ResearchOutcome:
        try:
            config = ResearchNodeConfig.with_overrides(request.nodes)
        except ValueError as exc:
            raise ApplicationError(str(exc), type="ConfigError", non_retryable=True) from exc
        self._progress.research = request.research
        digest = ResearchDigest()
        state_ref: str | None = None
        final_state = None
        while (node := next_node(digest)) != DONE:
            self._progress.node = node
            workflow.logger.info("research node %s starts", node)
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
                ),
                config,
                digest,
            )
            digest, state_ref, final_state = output.digest, output.state_ref, output.final_state
            self._record(node, digest)
        if final_state is None or state_ref is None:
            raise ApplicationError(
                "the research run ended without a final state; the activities and the workflow "
                "disagree about routing (are the worker's sleuth versions mixed?)",
                type="ConfigError",
                non_retryable=True,
            )
        self._progress.status = "done"
        self._progress.end_reason = final_state.get("end_reason")
        workflow.upsert_memo({"status": "done", "end_reason": self._progress.end_reason})
        info = workflow.info()
        return ResearchOutcome(
            final_state=final_state,
            state_ref=state_ref,
            research=request.research,
            workflow_id=info.workflow_id,
            run_id=info.run_id,
        )

    async def _run_node(
        self, node: str, node_input: NodeInput, config: ResearchNodeConfig, digest: ResearchDigest
    ) -> NodeOutput:
        try:
            return await workflow.execute_activity_method(
                _ACTIVITIES[node],
                node_input,
                summary=_summary(node, node_input.research, digest),
                **config.for_node(node).activity_options(),
            )
        except ActivityError as exc:
            self._progress.status = "failed"
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.non_retryable:
                # Surface the cause itself (e.g. "unknown research config 'x'; registered: …").
                raise ApplicationError(
                    f"{node} failed: {cause.message}", type=cause.type, non_retryable=True
                ) from exc
            raise

    def _record(self, node: str, digest: ResearchDigest) -> None:
        progress = self._progress
        progress.nodes_run.append(node)
        progress.replan_count = digest.replan_count
        progress.regeneration_count = digest.regeneration_count
        progress.grounding_score = digest.grounding_score
        progress.score_history = list(digest.score_history)
        progress.evidence_count = digest.evidence_count
        progress.total_tokens = digest.total_tokens
        workflow.upsert_memo(
            {
                "research": progress.research,
                "node": node,
                "replan_count": digest.replan_count,
                "regeneration_count": digest.regeneration_count,
                "grounding_score": digest.grounding_score,
                "total_tokens": digest.total_tokens,
            }
        )


def _summary(node: str, research: str, digest: ResearchDigest) -> str:
    """The line the Web UI shows for each activity call."""
    if node == "execute":
        if digest.replan_count:
            return f"{research}: execute (research again after replan {digest.replan_count})"
        return f"{research}: execute (agent tool loop gathers evidence)"
    if node == "causal_inference":
        return f"{research}: causal inference over {digest.evidence_count} evidence items"
    if node == "summarize":
        return f"{research}: summarize {digest.evidence_count} evidence items"
    if node == "grounding_eval":
        return f"{research}: grounding eval #{len(digest.score_history) + 1}"
    if node == "regenerate":
        return (
            f"{research}: regenerate {digest.regeneration_count + 1}/{digest.max_regenerations} "
            f"(score {digest.grounding_score or 0:.0%} < {digest.grounding_threshold:.0%})"
        )
    return (
        f"{research}: replan {digest.replan_count + 1}/{digest.max_replans} "
        f"(score {digest.grounding_score or 0:.0%} < {digest.grounding_threshold:.0%})"
    )
