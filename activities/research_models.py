"""Wire payloads of `ResearchWorkflow` and its node activities, and the per-node config model.

Only small models cross the wire: the research state (evidence trail, conversation) lives in the
artifact store and activities pass its reference.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from activities.heartbeat import HEARTBEAT_SECONDS
from activities.policy import ActivitySettings, RetrySettings, with_overrides
from sleuth.research import ResearchDigest

FINAL_EVIDENCE_CHARS = 24_000
"""Evidence text kept inline in a durable run's `final_state` (in total); the full trail stays in
the artifact store under `ResearchOutcome.state_ref`."""


def _execute_defaults() -> ActivitySettings:
    return ActivitySettings(
        start_to_close_seconds=3600.0,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        retry=RetrySettings(initial_interval_seconds=2.0, maximum_attempts=10),
    )


def _node_defaults() -> ActivitySettings:
    return ActivitySettings(heartbeat_seconds=HEARTBEAT_SECONDS)


class ResearchNodeConfig(BaseModel):
    """Timeouts and retry policy of every research node. Override per run with
    `ResearchRequest.nodes`, e.g. `{"execute": {"heartbeat_seconds": 10}}`."""

    execute: ActivitySettings = Field(default_factory=_execute_defaults)
    """The agent tool loop: long, so it checkpoints every step and a retry resumes from there."""
    causal_inference: ActivitySettings = Field(default_factory=_node_defaults)
    """One model call building the causal chain."""
    summarize: ActivitySettings = Field(default_factory=_node_defaults)
    """One model call (two when the output must be repaired to fit the schema)."""
    grounding_eval: ActivitySettings = Field(default_factory=_node_defaults)
    """One judge call over all claims (none with lexical judging)."""
    regenerate: ActivitySettings = Field(default_factory=_node_defaults)
    """One model call rewriting the summary."""
    replan: ActivitySettings = Field(default_factory=_node_defaults)
    """One model call writing the focused prompt."""

    def for_node(self, node: str) -> ActivitySettings:
        settings: ActivitySettings = getattr(self, node)
        return settings

    @classmethod
    def with_overrides(cls, overrides: dict[str, Any] | None) -> ResearchNodeConfig:
        """The defaults with `overrides` merged in field by field (unknown nodes are an error)."""
        return with_overrides(cls, overrides, where="nodes", noun="research node", plural="nodes")


class ResearchRequest(BaseModel):
    """Input of `ResearchWorkflow`. Plain JSON: `{"prompt": "…", "research": "market-report"}`."""

    prompt: str
    """The research question."""
    research: str = "default"
    """The name of a research config registered on the worker's App."""
    grounding_threshold: float | None = None
    """Share of grounded claims needed to finish (default: the config's)."""
    max_replans: int | None = None
    """Replans allowed (default: the config's)."""
    max_regenerations: int | None = None
    """Regenerations allowed (default: the config's)."""
    nodes: dict[str, Any] | None = None
    """Per-node overrides of `ResearchNodeConfig`, e.g. `{"execute": {"heartbeat_seconds": 10}}`."""


class NodeInput(BaseModel):
    """Input of every research node activity."""

    research: str
    """The registered research config to run."""
    state_ref: str | None = None
    """The artifact reference of the run's state; None for the first execute, which creates it."""
    prompt: str | None = None
    """The question (first execute only)."""
    grounding_threshold: float | None = None
    """Per-run limit overrides (first execute only)."""
    max_replans: int | None = None
    max_regenerations: int | None = None


class NodeOutput(BaseModel):
    """Output of every research node activity."""

    state_ref: str
    """The artifact reference of the new state."""
    digest: ResearchDigest
    """The router's view of the new state."""
    final_state: dict[str, Any] | None = None
    """Set by grounding eval when the run is done: the result, evidence text trimmed."""


class ResearchProgress(BaseModel):
    """What the `progress` query returns."""

    research: str = ""
    status: str = "running"
    """`running`, `done` or `failed`."""
    node: str = "start"
    """The node running now (the last one once the run is done)."""
    nodes_run: list[str] = Field(default_factory=list)
    replan_count: int = 0
    regeneration_count: int = 0
    grounding_score: float | None = None
    score_history: list[float] = Field(default_factory=list)
    evidence_count: int = 0
    total_tokens: int = 0
    end_reason: str | None = None


class ResearchOutcome(BaseModel):
    """Output of `ResearchWorkflow`."""

    final_state: dict[str, Any]
    """As `spec.execute(...)` returns it, with evidence text trimmed to keep the history small."""
    state_ref: str
    """The artifact reference of the full final `ResearchState` (complete evidence trail)."""
    research: str
    workflow_id: str
    run_id: str
