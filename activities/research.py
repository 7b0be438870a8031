"""The research nodes as activities: each loads the run's state by reference, runs the node
function from `sleuth.research`, and stores the new state. None of them routes: the workflow
decides which node runs next and when the run is over, then calls `research.finish`.

Every node heartbeats on a timer, so a dead worker is noticed within the heartbeat timeout.
`research.execute` makes a checkpoint durable in its journal after every model turn and tool call
(`sleuth.activities.checkpoints`); a retried attempt resumes the agent loop from it, so completed tool
calls are not run again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import activity

from sleuth.activities.errors import ConfigError, mapped_errors
from sleuth.activities.events import streams_events
from sleuth.activities.heartbeat import checkpointing, heartbeating
from sleuth.activities.metrics import record_tool_errors
from sleuth.activities.research_models import (
    FINAL_EVIDENCE_CHARS,
    FinishInput,
    FinishOutput,
    NodeInput,
    NodeOutput,
    ReviewSubjectInput,
)
from sleuth.apps.app import App
from sleuth.flows.review import ReviewSubject
from sleuth.research import Node, ResearchSpec, ResearchState, review_subject
from sleuth.runtime.artifacts import ArtifactStore, default_artifact_store, get_json, put_json
from sleuth.runtime.log import get_logger

log = get_logger(__name__)


class ResearchActivities:
    """The seven research nodes and the finish step, bound to the App whose research configs they run."""

    def __init__(self, app: App, store: ArtifactStore | None = None):
        self.app = app
        self._store = store

    @property
    def store(self) -> ArtifactStore:
        return self._store or default_artifact_store()

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.plan,
            self.execute,
            self.causal_inference,
            self.summarize,
            self.grounding_eval,
            self.regenerate,
            self.replan,
            self.finish,
            self.review_subject,
        ]

    @activity.defn(name="research.plan")
    @mapped_errors
    @streams_events
    async def plan(self, request: NodeInput) -> NodeOutput:
        """Write the question's sub-questions (the first node: it creates the run's state)."""
        return await self._run(Node.PLAN, request)

    @activity.defn(name="research.execute")
    @mapped_errors
    @streams_events
    async def execute(self, request: NodeInput) -> NodeOutput:
        """The agent tool loop on the next pending sub-question; resumes from the checkpoint of a
        failed earlier attempt."""
        spec, state = await self._load(request)
        async with checkpointing(self.store) as (checkpoint, save):
            if checkpoint is not None:
                log.info(
                    "research.execute.resume",
                    research=request.research,
                    iterations=checkpoint.iterations,
                    evidence=len(checkpoint.evidence),
                )
            updated = await spec.run_node(
                Node.EXECUTE, state, app=self.app, checkpoint=checkpoint, on_checkpoint=save
            )
        record_tool_errors(updated.evidence[len(state.evidence) :])
        return await self._store_result(updated)

    @activity.defn(name="research.causal_inference")
    @mapped_errors
    @streams_events
    async def causal_inference(self, request: NodeInput) -> NodeOutput:
        """Build the causal chain from the evidence."""
        return await self._run(Node.CAUSAL_INFERENCE, request)

    @activity.defn(name="research.summarize")
    @mapped_errors
    @streams_events
    async def summarize(self, request: NodeInput) -> NodeOutput:
        """Distil the evidence into the summary."""
        return await self._run(Node.SUMMARIZE, request)

    @activity.defn(name="research.grounding_eval")
    @mapped_errors
    @streams_events
    async def grounding_eval(self, request: NodeInput) -> NodeOutput:
        """Score the summary's claims against the evidence."""
        return await self._run(Node.GROUNDING_EVAL, request)

    @activity.defn(name="research.regenerate")
    @mapped_errors
    @streams_events
    async def regenerate(self, request: NodeInput) -> NodeOutput:
        """Rewrite the summary without new tool calls."""
        return await self._run(Node.REGENERATE, request)

    @activity.defn(name="research.replan")
    @mapped_errors
    @streams_events
    async def replan(self, request: NodeInput) -> NodeOutput:
        """Write a prompt focused on the uncovered sub-questions and the ungrounded claims."""
        return await self._run(Node.REPLAN, request)

    @activity.defn(name="research.finish")
    @mapped_errors
    @streams_events
    async def finish(self, request: FinishInput) -> FinishOutput:
        """Record the end reason the workflow decided and write the run's report.

        A step of its own rather than part of the last node: the report is built from the full
        state in the artifact store (the evidence trail), which the workflow never holds, and
        only the workflow knows the run is over.
        """
        spec = self._spec(request.research)
        state = await self._load_state(request.state_ref)
        state = state.model_copy(update={"reviews": request.reviews})
        async with heartbeating():
            state, report = spec.finish(
                state, request.end_reason, evidence_chars=FINAL_EVIDENCE_CHARS
            )
        ref = await asyncio.to_thread(put_json, self.store, state)
        return FinishOutput(state_ref=ref, report=report)

    @activity.defn(name="research.review_subject")
    @mapped_errors
    async def review_subject(self, request: ReviewSubjectInput) -> ReviewSubject:
        """What a reviewer is shown: the plan, or the summary and its grounding (the workflow
        holds only the digest)."""
        self._spec(request.research)
        state = await self._load_state(request.state_ref)
        return review_subject(state)

    # -- shared steps -----------------------------------------------------------------------

    async def _run(self, node: Node, request: NodeInput) -> NodeOutput:
        spec, state = await self._load(request)
        if request.review_remark:
            state = state.model_copy(update={"review_remark": request.review_remark})
        async with heartbeating():
            updated = await spec.run_node(node, state, app=self.app)
        return await self._store_result(updated)

    def _spec(self, research: str) -> ResearchSpec:
        spec = self.app.get_research(research)
        if not isinstance(spec, ResearchSpec):
            raise ConfigError(
                f"research config {research!r} is a {type(spec).__name__}, not a "
                "ResearchSpec; register one built with create_research_workflow(...)"
            )
        return spec

    async def _load(self, request: NodeInput) -> tuple[ResearchSpec, ResearchState]:
        spec = self._spec(request.research)
        if request.state_ref is None:
            if not request.prompt:
                raise ConfigError("the first research node needs a prompt")
            try:
                state = spec.initial_state(
                    request.prompt,
                    grounding_threshold=request.grounding_threshold,
                    max_replans=request.max_replans,
                    max_regenerations=request.max_regenerations,
                    max_cost_usd=request.max_cost_usd,
                    review=request.review,
                    causal_inference=request.causal_inference,
                    claim_threshold=request.claim_threshold,
                )
            except ValueError as exc:
                raise ConfigError(str(exc)) from exc
            return spec, state
        return spec, await self._load_state(request.state_ref)

    async def _load_state(self, state_ref: str) -> ResearchState:
        raw = await asyncio.to_thread(get_json, self.store, state_ref)
        return ResearchState.model_validate(raw)

    async def _store_result(self, state: ResearchState) -> NodeOutput:
        ref = await asyncio.to_thread(put_json, self.store, state)
        return NodeOutput(state_ref=ref, digest=state.digest())
