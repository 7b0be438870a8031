"""The research nodes as activities: each loads the run's state by reference, runs the node
function from `sleuth.research`, and stores the new state.

Every node heartbeats on a timer, so a dead worker is noticed within the heartbeat timeout.
`research.execute` makes a checkpoint durable in its journal after every model turn and tool call
(`activities.checkpoints`); a retried attempt resumes the agent loop from it, so completed tool
calls are not run again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.errors import ConfigError, mapped_errors
from activities.heartbeat import checkpointing, heartbeating
from activities.research_models import FINAL_EVIDENCE_CHARS, NodeInput, NodeOutput
from sleuth.app import App
from sleuth.artifacts import ArtifactStore, default_artifact_store, get_json, put_json
from sleuth.log import get_logger
from sleuth.research import DONE, ResearchSpec, ResearchState, finish, next_node

log = get_logger(__name__)


class ResearchActivities:
    """The six research nodes, bound to the App whose research configs they run."""

    def __init__(self, app: App, store: ArtifactStore | None = None):
        self.app = app
        self._store = store

    @property
    def store(self) -> ArtifactStore:
        return self._store or default_artifact_store()

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.execute,
            self.causal_inference,
            self.summarize,
            self.grounding_eval,
            self.regenerate,
            self.replan,
        ]

    @activity.defn(name="research.execute")
    @mapped_errors
    async def execute(self, request: NodeInput) -> NodeOutput:
        """The agent tool loop; resumes from the checkpoint of a failed earlier attempt."""
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
                "execute", state, app=self.app, checkpoint=checkpoint, on_checkpoint=save
            )
        return await self._store_result(updated)

    @activity.defn(name="research.causal_inference")
    @mapped_errors
    async def causal_inference(self, request: NodeInput) -> NodeOutput:
        """Build the causal chain from the evidence."""
        return await self._run("causal_inference", request)

    @activity.defn(name="research.summarize")
    @mapped_errors
    async def summarize(self, request: NodeInput) -> NodeOutput:
        """Distil the evidence into the summary."""
        return await self._run("summarize", request)

    @activity.defn(name="research.grounding_eval")
    @mapped_errors
    async def grounding_eval(self, request: NodeInput) -> NodeOutput:
        """Score the summary's claims against the evidence; attach the result when the run is done."""
        return await self._run("grounding_eval", request)

    @activity.defn(name="research.regenerate")
    @mapped_errors
    async def regenerate(self, request: NodeInput) -> NodeOutput:
        """Rewrite the summary without new tool calls."""
        return await self._run("regenerate", request)

    @activity.defn(name="research.replan")
    @mapped_errors
    async def replan(self, request: NodeInput) -> NodeOutput:
        """Write a prompt focused on the ungrounded claims."""
        return await self._run("replan", request)

    # -- shared steps -----------------------------------------------------------------------

    async def _run(self, node: str, request: NodeInput) -> NodeOutput:
        spec, state = await self._load(request)
        async with heartbeating():
            updated = await spec.run_node(node, state, app=self.app)
        return await self._store_result(updated)

    async def _load(self, request: NodeInput) -> tuple[ResearchSpec, ResearchState]:
        spec = self.app.get_research(request.research)
        if not isinstance(spec, ResearchSpec):
            raise ConfigError(
                f"research config {request.research!r} is a {type(spec).__name__}, not a "
                "ResearchSpec; register one built with create_research_workflow(...)"
            )
        if request.state_ref is None:
            if not request.prompt:
                raise ConfigError("the first research node needs a prompt")
            try:
                state = spec.initial_state(
                    request.prompt,
                    grounding_threshold=request.grounding_threshold,
                    max_replans=request.max_replans,
                    max_regenerations=request.max_regenerations,
                )
            except ValueError as exc:
                raise ConfigError(str(exc)) from exc
            return spec, state
        raw = await asyncio.to_thread(get_json, self.store, request.state_ref)
        return spec, ResearchState.model_validate(raw)

    async def _store_result(self, state: ResearchState) -> NodeOutput:
        final_state = None
        if state.node == "grounding_eval" and next_node(state) == DONE:
            state = finish(state)
            final_state = state.final_state(evidence_chars=FINAL_EVIDENCE_CHARS)
        ref = await asyncio.to_thread(put_json, self.store, state)
        return NodeOutput(state_ref=ref, digest=state.digest(), final_state=final_state)
