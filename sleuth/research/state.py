"""What a research run knows: the full state, and the records it and the report carry.

`ResearchState` is everything one run knows; the durable runner stores it in the artifact store
and passes its reference. It extends `ResearchDigest`, the part the router reads (defined with
the router, which reads nothing else).
"""

from __future__ import annotations

from typing import Any, Literal

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
    "Draft",
    "DraftRecord",
    "PartState",
    "QuestionPart",
    "ResearchStatus",
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


PartState = Literal["answered", "partial", "not_stated"]
"""How a report answers one part of the question: with grounded claims, in part, or not at all
(the sources do not state it)."""
ResearchStatus = Literal["grounded", "partial", "not_found"]
"""How a finished run answers the question: `grounded` (its report met the grounding threshold
and answers every part), `partial` (something of it is grounded: some parts answered or partly
answered, or the report is short of the threshold), `not_found` (no part is answered: the
sources do not state it)."""


class QuestionPart(Record):
    """One of the question's own parts (a clause the user asked, not a planner's sub-question) and
    how the report answers it."""

    text: str
    state: PartState = "not_stated"
    claims: list[int] = Field(default_factory=list)
    """1-based indices into the report's `claims`: the grounded claims that answer this part."""
    statement: str = ""
    """For a part not stated (or partly answered), the sentence the answer prints about it, e.g.
    "The indexed documents do not say …" ("" for an answered part)."""


class DraftRecord(Record):
    """One judged draft of the report: which node wrote it and how it scored."""

    index: int
    """1-based, in the order the drafts were judged."""
    node: str
    """The node that wrote it (`summarize`, `regenerate`)."""
    grounding_score: float
    parts_answered: float
    """The question's parts it answers: 1 per part answered, ½ per part partly answered."""
    summary: str


class Draft(DraftRecord):
    """A judged draft with everything needed to make it the final report again."""

    structured_output: dict[str, Any] | None = None
    output_error: str | None = None
    claims: list[ClaimRecord] = Field(default_factory=list)
    parts: list[QuestionPart] = Field(default_factory=list)
    passage_references: list[str] = Field(default_factory=list)
    removed_claims: list[str] = Field(default_factory=list)
    grounding_method: str = "none"
    grounding_judge: str = ""
    claim_threshold_used: float | None = None
    coverage: list[SubQuestionCoverage] = Field(default_factory=list)

    def rank(self) -> tuple[float, float]:
        """What makes one draft better than another: its grounding score, then how much of the
        question it answers."""
        return (self.grounding_score, self.parts_answered)

    def record(self) -> DraftRecord:
        return DraftRecord.model_validate(
            {name: getattr(self, name) for name in DraftRecord.model_fields}
        )


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
    parts: list[QuestionPart] = Field(default_factory=list)
    """The question's own parts (`sleuth.research.parts.question_parts`) and how the last judged
    draft answers them."""
    drafts: list[Draft] = Field(default_factory=list)
    """Every judged draft of the report, in order: the run ends with the best of them."""
    status: ResearchStatus | None = None
    """Set by the finish step: how the final report answers the question."""
    confidence: float | None = None
    """Set by the finish step: derived from the final report's grounding."""
    end_detail: str = ""
    """Set by the finish step: which draft became the final report, and why."""
    sources: list[str] = Field(default_factory=list)
    """Set by the finish step: what an inline `[n]` of the final report refers to
    (`sources[n - 1]`)."""

    def digest(self) -> ResearchDigest:
        """The router's view, without the (possibly large) evidence."""
        return ResearchDigest.model_validate(
            {name: getattr(self, name) for name in ResearchDigest.model_fields}
        )
