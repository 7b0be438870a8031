"""Wire payloads of `ResearchWorkflow` and its node activities, and the per-node config model.

Only small models cross the wire: the research state (evidence trail, conversation) lives in the
artifact store and activities pass its reference.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from temporalio.contrib.workflow_streams import WorkflowStreamState

from sleuth._util.strict import StrictInput
from sleuth.activities.events import CarriesEvents
from sleuth.activities.heartbeat import HEARTBEAT_SECONDS
from sleuth.activities.policy import ActivitySettings, RetrySettings, with_overrides
from sleuth.flows.review import ReviewRecord, ReviewSettings
from sleuth.research import (
    EndReason,
    Node,
    ResearchDigest,
    ResearchInputs,
    ResearchReport,
    ResearchStatus,
)

FINAL_EVIDENCE_CHARS = 24_000
"""Evidence text kept inline in a durable run's `final_state` (in total); the full trail stays in
the artifact store under `ResearchOutcome.state_ref`."""
MAX_HISTORY_EVENT_BUDGET = 40_000
"""Largest history budget: Temporal fails a run whose history passes 51,200 events."""


def _execute_defaults() -> ActivitySettings:
    return ActivitySettings(
        start_to_close_seconds=3600.0,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        retry=RetrySettings(initial_interval_seconds=2.0, maximum_attempts=10),
    )


def _node_defaults() -> ActivitySettings:
    return ActivitySettings(heartbeat_seconds=HEARTBEAT_SECONDS)


class ResearchNodeConfig(StrictInput):
    """Timeouts and retry policy of every research node, one field per `Node`, and of the finish
    step. Override per run with `ResearchRequest.nodes`, e.g. `{"execute": {"heartbeat_seconds": 10}}`."""

    plan: ActivitySettings = Field(default_factory=_node_defaults)
    """One model call writing the question's sub-questions (none with `max_sub_questions=1`)."""
    execute: ActivitySettings = Field(default_factory=_execute_defaults)
    """The agent tool loop on one sub-question: long, so it checkpoints every step and a retry
    resumes from there."""
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
    finish: ActivitySettings = Field(default_factory=_node_defaults)
    """Writing the report of the finished run (no model call)."""
    review_subject: ActivitySettings = Field(default_factory=_node_defaults)
    """Reading the plan or summary a reviewer is shown (no model call)."""

    def for_node(self, node: Node) -> ActivitySettings:
        settings: ActivitySettings = getattr(self, node.value)
        return settings

    @classmethod
    def with_overrides(cls, overrides: dict[str, Any] | None) -> ResearchNodeConfig:
        """The defaults with `overrides` merged in field by field (unknown nodes are an error)."""
        return with_overrides(cls, overrides, where="nodes", noun="research node", plural="nodes")


class ResearchProgress(BaseModel):
    """What the `progress` query returns."""

    research: str = ""
    status: str = "running"
    """`running`, `awaiting review`, `done` or `failed`."""
    node: Node = Node.START
    """The node running now (the last one once the run is done)."""
    nodes_run: list[Node] = Field(default_factory=list)
    replan_count: int = 0
    regeneration_count: int = 0
    grounding_score: float | None = None
    score_history: list[float] = Field(default_factory=list)
    """The score of every grounding eval so far (kept by the workflow, not sent by the nodes)."""
    evidence_count: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    """USD spent so far at the models' prices."""
    revision_count: int = 0
    reviews: list[ReviewRecord] = Field(default_factory=list)
    """The reviews decided so far, in order."""
    end_reason: EndReason | None = None
    research_status: ResearchStatus | None = None
    """How the final report answers the question (set when the run is done)."""
    best_draft: int = 0
    """The 1-based number of the best judged draft so far: the one the run ends with unless a
    later one is better."""
    runs: int = 1
    """Workflow runs so far: 1, plus one per continue-as-new."""


class ResearchResume(StrictInput):
    """What a run carries over `continue_as_new`: where the graph is, and the progress so far."""

    state_ref: str
    """The artifact reference of the run's state."""
    digest: ResearchDigest
    """The router's view of that state."""
    progress: ResearchProgress
    review_remark: str | None = None
    """A reviewer's remark the next node has not acted on yet."""
    stream: WorkflowStreamState | None = None
    """The event stream's offset and latest events."""


class ResearchRequest(ResearchInputs):
    """Input of `ResearchWorkflow`. Plain JSON: `{"prompt": "…", "research": "market-report"}`.

    Besides the fields here: `prompt` (at most 32,000 characters), and the per-run overrides
    `grounding_threshold` (0 to 1), `max_replans` and `max_regenerations` (0 to 10),
    `max_cost_usd` (more than 0), `review` (see `ReviewSettings`), `causal_inference` (true or
    false) and `claim_threshold` (0 to 1). Unknown keys and out-of-bounds values fail the run at
    once, naming the field.
    """

    research: str = Field(default="default", min_length=1, max_length=200)
    """The name of a research config registered on the worker's App."""
    nodes: dict[str, Any] | None = None
    """Per-node overrides of `ResearchNodeConfig`, e.g. `{"execute": {"heartbeat_seconds": 10}}`."""
    history_event_budget: int = Field(default=2000, ge=1, le=MAX_HISTORY_EVENT_BUDGET)
    """Continue-as-new once a run's history holds this many events (or when the server suggests
    it), carrying the state reference over; 1 to 40,000. A run always takes at least one node."""
    resume: ResearchResume | None = None
    """Set by the workflow itself when it continues as new; leave empty."""


class NodeInput(BaseModel):
    """Input of every research node activity."""

    research: str
    """The registered research config to run."""
    state_ref: str | None = None
    """The artifact reference of the run's state; None for the first node (plan), which creates it."""
    prompt: str | None = None
    """The question (first node only)."""
    grounding_threshold: float | None = None
    """Per-run limit overrides (first node only)."""
    max_replans: int | None = None
    max_regenerations: int | None = None
    max_cost_usd: float | None = None
    review: ReviewSettings | None = None
    """Per-run review settings (first execute only)."""
    causal_inference: bool | None = None
    review_remark: str | None = None
    """A reviewer's `revise` remark for this node to act on (the node after a review)."""
    claim_threshold: float | None = None


class NodeOutput(CarriesEvents):
    """Output of every research node activity (with the node's last events: `live_events`)."""

    state_ref: str
    """The artifact reference of the new state."""
    digest: ResearchDigest
    """The router's view of the new state."""


class FinishInput(BaseModel):
    """Input of `research.finish`: the run the workflow decided is over, and why."""

    research: str
    state_ref: str
    end_reason: EndReason
    """Decided by the workflow (`end_reason` of its digest); the activity only records it."""
    reviews: list[ReviewRecord] = Field(default_factory=list)
    """The reviews decided during the run (the workflow waited for them), for the report."""


class FinishOutput(BaseModel):
    """Output of `research.finish`."""

    state_ref: str
    """The artifact reference of the final state (end reason set, full evidence trail)."""
    report: ResearchReport
    """The report, evidence text trimmed to `FINAL_EVIDENCE_CHARS` in total."""


class ReviewSubjectInput(BaseModel):
    """Input of `research.review_subject`: the run whose plan or summary a person reviews."""

    research: str
    state_ref: str


class ResearchOutcome(BaseModel):
    """Output of `ResearchWorkflow`."""

    final_state: ResearchReport
    """As `spec.execute(...)` returns it, with evidence text trimmed to keep the history small.
    Its `structured_output` arrives as JSON data: `final_state.parsed(Report)` is the instance."""
    state_ref: str
    """The artifact reference of the full final `ResearchState` (complete evidence trail)."""
    research: str
    workflow_id: str
    run_id: str
