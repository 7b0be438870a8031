"""What a research run knows: the full state, and the records it and the report carry.

`ResearchState` is everything one run knows; the durable runner stores it in the artifact store
and passes its reference. It extends `ResearchDigest`, the part the router reads (defined with
the router, which reads nothing else).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from sleuth.grounding.verdicts import Citation
from sleuth.models.base import Usage
from sleuth.record import Record
from sleuth.research.router import EndReason, Node, ResearchDigest
from sleuth.review import ReviewRecord
from sleuth.state import EvidenceItem

__all__ = ["Citation", "ClaimRecord", "Record", "ResearchDigest", "ResearchState"]


class ClaimRecord(Record):
    """One claim of the report: the judge's verdict, its score, and the passages it rests on."""

    claim: str
    score: float
    """P(supported) from the claim-level judge (see `sleuth.grounding.ground_claims`)."""
    grounded: bool
    """Whether `score` met the run's claim threshold (`ResearchReport.claim_threshold`)."""
    evidence: list[int] = Field(default_factory=list)
    """1-based indices into the run's evidence trail; empty when the claim is not grounded."""
    evidence_text: list[str] = Field(default_factory=list)
    """The quoted span of each citation, in order: a sentence or two, never the whole tool
    output."""
    rationale: str = ""
    """Why: the judge's P(supported) and how it was scored, and each check that found a problem."""
    citations: list[Citation] = Field(default_factory=list)
    """The passages the verdict rests on, each with its source, location and quoted span; for a
    claim that is not grounded, the passages closest to it (what the evidence says instead)."""
    checks: list[str] = Field(default_factory=list)
    """Names of the deterministic checks that found a problem (`numbers`, `names`, `negation`,
    `swapped_roles`, `unsupported_content`)."""
    model_score: float | None = None
    """The judge model's own P(supported) before the checks (None: no judge model asked)."""


class ResearchState(ResearchDigest):
    """Everything one research run knows. Serialisable: the durable runner stores it by reference."""

    prompt: str
    focused_prompt: str = ""
    """The replan node's prompt for the next execute round ("" before any replan)."""
    focused_prompts: list[str] = Field(default_factory=list)
    evidence: list[EvidenceItem] = Field(default_factory=list)
    findings: str = ""
    """The execute agent's own answer(s), one paragraph per execute round."""
    causal_chain: str = ""
    summary: str = ""
    structured_output: dict[str, Any] | None = None
    """The report as JSON data validated against the spec's output schema (None without one)."""
    output_error: str | None = None
    """Why the summary did not validate against the output schema, if it did not."""
    grounding_method: str = "none"
    """How the last grounding eval scored claims (see `sleuth.grounding.verdicts.Method`)."""
    grounding_judge: str = ""
    """The judge model's name ("" when the checks alone judged)."""
    claim_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    """The score a claim needs to count as grounded, as configured (None: the judge's calibrated
    default)."""
    claim_threshold_used: float | None = None
    """The claim threshold the last grounding eval applied (the calibrated one when
    `claim_threshold` is None)."""
    passage_references: list[str] = Field(default_factory=list)
    """`source#location` of each numbered passage the report's writer was given last: what an
    inline `[n]` of the summary refers to."""
    claims: list[ClaimRecord] = Field(default_factory=list)
    score_history: list[float] = Field(default_factory=list)
    """The grounding score of every grounding eval so far, in order."""
    usage: Usage = Field(default_factory=Usage)
    nodes: list[Node] = Field(default_factory=list)
    """The path taken so far, node by node."""
    agent_stop_reasons: list[str] = Field(default_factory=list)
    end_reason: EndReason | None = None
    """Set by the finish step: why the run ended (see `sleuth.research.end_reason`)."""
    review_remark: str | None = None
    """A reviewer's remark for the next node to act on (a `revise` decision); the node that
    writes the plan or summary again consumes it."""
    reviews: list[ReviewRecord] = Field(default_factory=list)
    """The reviews decided so far, in order."""

    def digest(self) -> ResearchDigest:
        """The router's view, without the (possibly large) evidence."""
        return ResearchDigest.model_validate(
            {name: getattr(self, name) for name in ResearchDigest.model_fields}
        )
