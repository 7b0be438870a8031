"""What grounding returns: a verdict per claim, the passages it rests on, and the share grounded."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from sleuth._util.record import Record

Method = Literal["llm", "lexical", "mixed", "none", "logprobs", "verdict", "checks"]
"""How claims were scored. The batched judge: `llm`, `lexical` (no judge, or its answer did not
parse), `mixed`. The claim-level judge: `logprobs` (P(supported) from the answer token's
probabilities), `verdict` (the judge's generated yes/no; providers without token probabilities),
`checks` (no judge model: the deterministic checks and word overlap alone). `none`: no claims."""


class Citation(Record):
    """A passage of the evidence a verdict rests on, and the span of it quoted verbatim.

    The one citation type: grounding verdicts carry it, and so do the research report's claims
    (`sleuth.research.Citation` is this class). It reads like a dict too (`citation["quote"]`).
    """

    evidence: int
    """1-based index of the evidence item (tool call) the passage comes from."""
    tool: str
    """The tool that produced it."""
    source: str
    """Where the text comes from: a retrieved chunk's source (`python-docs/compound`), else the
    tool call (`read_licence(name=Apache-2.0)`)."""
    location: str = ""
    """Where in the source: `chars 15432-16526` (a chunk's own location narrowed to the passage),
    or character offsets in the tool output."""
    quote: str = ""
    """The sentence(s) of the passage closest to the claim, exactly as they appear in the
    evidence (in the tool output, or in the text field of the retrieved chunk)."""

    @property
    def reference(self) -> str:
        """`source#location`, e.g. `python-docs/compound#chars 15432-16526`."""
        return f"{self.source}#{self.location}" if self.location else self.source


class JudgeAnswer(BaseModel):
    """What the judge model answered about one claim, keyed by the questions it was asked.

    A later grounding of the same run (after a regeneration or a replan) that would ask the
    same question, the same claim against the same passages, reuses the answer instead of
    asking again (`ground_claims(earlier=...)`): a claim a rewrite kept costs nothing twice.
    """

    key: str
    """Digest of the judge's name and the first question's messages (passages, then claim)."""
    probability: float
    """P(supported) from token probabilities, or 1.0/0.0 for a generated Yes/No."""
    method: Literal["logprobs", "verdict"]
    cited: list[int] = Field(default_factory=list)
    """Passage numbers the judge named (only a judge without token probabilities names any)."""
    quote_key: str = ""
    """Digest of the judge's name and the second question's messages (empty: not asked)."""
    quote: float | None = None
    """The judge's P(Yes) for the second question, when asked."""


class ClaimVerdict(BaseModel):
    """How well one claim is supported, and by which evidence items (1-based indices)."""

    claim: str
    score: float
    """P(supported) for the claim-level judge (calibrated: the model's probability combined with
    the deterministic checks); the share of matched words for the lexical judge."""
    grounded: bool
    evidence: list[int] = Field(default_factory=list)
    """Evidence items the claim rests on; empty when it is not grounded."""
    rationale: str = ""
    citations: list[Citation] = Field(default_factory=list)
    """The passages the claim rests on with their quoted spans; for a claim that is not grounded,
    the passages closest to it, so a reader sees what the evidence says instead."""
    checks: list[str] = Field(default_factory=list)
    """Names of the deterministic checks that found a problem (see `sleuth.grounding.checks`)."""
    model_score: float | None = None
    """The judge model's own P(supported) (or 1/0 for a generated verdict), before the checks."""
    quote_score: float | None = None
    """The judge model's P(Yes) that the claim's quoted sentence says what the claim says (its
    second question; asked only of judges with token probabilities whose calibration weighs
    it)."""
    features: dict[str, float] = Field(default_factory=dict)
    """The checks' measures that `score` combines with `model_score` (see `CheckReport.features`)."""
    answer: JudgeAnswer | None = None
    """The judge model's answers behind `model_score` and `quote_score`, for reuse by a later
    grounding of the same claim against the same passages (None: no judge model asked)."""


class GroundingReport(BaseModel):
    """The share of grounded claims, with a verdict per claim."""

    score: float
    claims: list[ClaimVerdict] = Field(default_factory=list)
    method: Method = "none"
    threshold: float | None = None
    """The per-claim threshold on `ClaimVerdict.score` the claim-level judge used."""
    judge: str = ""
    """The judge model's name (empty without one)."""

    @property
    def ungrounded(self) -> list[ClaimVerdict]:
        return [c for c in self.claims if not c.grounded]
