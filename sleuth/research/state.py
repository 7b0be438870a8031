"""What a research run knows: the full state, and the records it and the report carry.

`ResearchState` is everything one run knows; the durable runner stores it in the artifact store
and passes its reference. It extends `ResearchDigest`, the part the router reads (defined with
the router, which reads nothing else).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from sleuth.models.base import Usage
from sleuth.research.router import EndReason, Node, ResearchDigest
from sleuth.state import EvidenceItem

__all__ = [
    "Citation",
    "ClaimRecord",
    "CoveragePassage",
    "Record",
    "ResearchDigest",
    "ResearchState",
    "SubQuestionCoverage",
]


class Record(BaseModel):
    """A typed record that also reads like the dict it replaces: `record["field"]` is
    `record.field`, and an unknown key is a KeyError that lists the fields."""

    def __getitem__(self, key: str) -> Any:
        if key in type(self).model_fields:
            return getattr(self, key)
        known = ", ".join(type(self).model_fields)
        raise KeyError(f"{type(self).__name__} has no field {key!r}; fields: {known}")


class Citation(Record):
    """Where in the evidence a claim rests: the evidence item and the source it came from.

    The fields match the passage-level citations of `sleuth.grounding`; today's judge cites
    whole evidence items, so `quote` stays empty until it returns quoted spans.
    """

    evidence: int
    """1-based index of the cited evidence item (tool call)."""
    tool: str
    """The tool that produced it."""
    source: str
    """Where the text comes from: the `source` (or `url`) of the retrieved row that best matches
    the claim, else the tool call itself, `tool({"arg": ...})`."""
    location: str = ""
    """Where in the source: the row's own `location`, or `chars a-b` of the tool output."""
    quote: str = ""
    """The span of the evidence the judge quoted verbatim ("" when it quoted none)."""

    @property
    def reference(self) -> str:
        """`source#location` (or just the source when there is no location)."""
        return f"{self.source}#{self.location}" if self.location else self.source


class ClaimRecord(Record):
    """One claim of the summary, its score, and the evidence it rests on."""

    claim: str
    score: float
    grounded: bool
    evidence: list[int] = Field(default_factory=list)
    """1-based indices into the run's evidence trail."""
    evidence_text: list[str] = Field(default_factory=list)
    """For each cited item, a short excerpt of its output around what matches the claim (not the
    whole output: a claim cites a passage, and every claim citing one item would repeat it)."""
    rationale: str = ""
    citations: list[Citation] = Field(default_factory=list)
    """One per cited evidence item, with the source it names."""


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
    claims: list[ClaimRecord] = Field(default_factory=list)
    score_history: list[float] = Field(default_factory=list)
    """The grounding score of every grounding eval so far, in order."""
    usage: Usage = Field(default_factory=Usage)
    nodes: list[Node] = Field(default_factory=list)
    """The path taken so far, node by node."""
    agent_stop_reasons: list[str] = Field(default_factory=list)
    end_reason: EndReason | None = None
    """Set by the finish step: why the run ended (see `sleuth.research.end_reason`)."""

    def digest(self) -> ResearchDigest:
        """The router's view, without the (possibly large) evidence."""
        return ResearchDigest.model_validate(
            {name: getattr(self, name) for name in ResearchDigest.model_fields}
        )
