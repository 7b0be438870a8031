"""What a research run knows: the full state, and the records it and the report carry.

`ResearchState` is everything one run knows; the durable runner stores it in the artifact store
and passes its reference. It extends `ResearchDigest`, the part the router reads (defined with
the router, which reads nothing else).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from sleuth._util.record import Record
from sleuth.agent.state import EvidenceItem
from sleuth.flows.review import ReviewRecord
from sleuth.grounding.verdicts import Citation, JudgeAnswer
from sleuth.models.base import Usage
from sleuth.research.router import EndReason, Node, ResearchDigest

__all__ = [
    "Citation",
    "ClaimRecord",
    "CoveragePassage",
    "Record",
    "ResearchDigest",
    "ResearchState",
    "SubQuestionCoverage",
]


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
    quote_score: float | None = None
    """The judge model's P(Yes) that the claim's quoted sentence says what it says (its second
    question; None when not asked)."""
    answer: JudgeAnswer | None = None
    """The judge model's answers behind `model_score` and `quote_score`: the next grounding eval
    of the run reuses them for a claim it would ask about against the same passages."""


class CoveragePassage(Record):
    """A passage of the evidence that answers a sub-question."""

    evidence: int
    """1-based index of the evidence item (tool call) it is cut from."""
    source: str
    """The search row's source, else the tool call."""
    location: str = ""
    text: str
    """The passage itself (a few sentences)."""


class SubQuestionCoverage(Record):
    """One sub-question of the plan and the evidence that answers it (none: "not found")."""

    question: str
    covered: bool = False
    """Whether at least one evidence passage answers it (see `sleuth.research.plan.coverage`)."""
    evidence: list[int] = Field(default_factory=list)
    """1-based indices of the evidence items with a passage that answers it."""
    passages: list[CoveragePassage] = Field(default_factory=list)
    """The best-matching answering passages, best first (at most three)."""
    researched: int = 0
    """Execute steps that researched this sub-question by name."""
    answered: bool | None = None
    """Whether a grounded claim of the last judged report states it (`sleuth.research.plan.
    answers`; None before any grounding eval). A covered sub-question the report leaves
    unanswered is a reason to regenerate."""


class ResearchState(ResearchDigest):
    """Everything one research run knows. Serialisable: the durable runner stores it by reference."""

    prompt: str
    focused_prompt: str = ""
    """The replan node's prompt for the next execute round ("" before any replan)."""
    focused_prompts: list[str] = Field(default_factory=list)
    sub_questions: list[str] = Field(default_factory=list)
    """The parts of the question the plan node wrote, in order (empty in runs begun without it)."""
    pending: list[int] = Field(default_factory=list)
    """0-based indices of the sub-questions the current execute round has still to research."""
    coverage: list[SubQuestionCoverage] = Field(default_factory=list)
    """One entry per sub-question: the evidence items and passages that answer it."""
    round_iterations: int = Field(default=0, ge=0)
    """Model turns the current execute round has spent (its budget is `max_iterations`)."""
    round_tokens: int = Field(default=0, ge=0)
    """Tokens the current execute round has spent (its budget is `execute_token_budget`)."""
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
    removed_claims: list[str] = Field(default_factory=list)
    """The claims the last regeneration took out of the report as unsupported (each replaced by
    the quote of the evidence closest to it, or dropped); empty once a writer writes again."""
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
