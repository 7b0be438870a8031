"""The typed report of a finished run, and how its findings are cited, deduplicated and ordered.

`ResearchReport` is what both runners return as `final_state`: a pydantic model whose fields are
the keys of the dict it replaces, so `report.grounding_score` and `report["grounding_score"]`
both work. In-process, `structured_output` is an instance of the spec's output schema; after the
wire (a durable run's outcome) it is JSON data, and `report.parsed(Schema)` gives the instance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from sleuth.flows.review import ReviewRecord
from sleuth.grounding.passages import text_key
from sleuth.research.router import EndReason, Node
from sleuth.research.state import (
    ClaimRecord,
    Record,
    ResearchState,
    SubQuestionCoverage,
)

SchemaT = TypeVar("SchemaT", bound=BaseModel)

_CITATION_MARK = re.compile(r"\[\s*\d+(?:\s*[,;\-–]\s*\d+)*\s*\]")
_PUNCTUATION = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")


class EvidenceRecord(Record):
    """One tool call of the run's evidence trail, as the report shows it."""

    index: int
    """1-based: what claims' `evidence` lists refer to."""
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    output: str = ""
    """The tool's output (trimmed in a durable outcome; the full text is in the stored state)."""
    success: bool = True
    error: str | None = None


class TokenUsage(Record):
    """Tokens the run spent on every model request, the judge's included."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


class ResearchReport(Record):
    """What a finished research run produced: `result.final_state` in-process, and
    `ResearchOutcome.final_state` durably (the same fields, as JSON on the wire)."""

    prompt: str
    """The question the run answered."""
    structured_output: Any = None
    """The report as an instance of the spec's `output_schema` in-process; JSON data after a
    durable run's outcome crossed the wire (`parsed(Schema)` gives the instance). None without a
    schema, or when the model's answer did not validate (see `output_error`)."""
    output_schema: str | None = None
    """The name of the schema `structured_output` was validated against (None without one)."""
    summary: str = ""
    """The report's prose: the schema's `summary` field when it has one, else the answer text."""
    output_error: str | None = None
    """Why the answer did not validate against the output schema, if it did not."""
    findings: str = ""
    """The execute agent's own answers, one paragraph per execute step."""
    coverage: list[SubQuestionCoverage] = Field(default_factory=list)
    """The plan's sub-questions, each with the evidence items and passages that answer it
    (`covered` false: "not found")."""
    causal_chain: str = ""
    grounding_score: float | None = None
    """The share of claims the judge found grounded at the last grounding eval."""
    grounding_threshold: float
    """The share of grounded claims the run needed to finish without regenerating or replanning."""
    grounding_method: str = "none"
    """How the claims were scored: `logprobs` (the judge's token probabilities), `verdict` (its
    generated Yes/No), `checks` (the deterministic checks alone: no judge model, or no claim had
    evidence), `none` (no claims); see `sleuth.grounding.verdicts.Method`."""
    grounding_judge: str = ""
    """The judge model's name ("" when the checks alone judged)."""
    claim_threshold: float | None = None
    """The score a claim needed to count as grounded at the last grounding eval: the judge's
    calibrated threshold unless the config or the run set one."""
    claims: list[ClaimRecord] = Field(default_factory=list)
    """The report's findings, each once (see `dedupe_findings`), with verdict, score and quoted
    citations."""
    passage_references: list[str] = Field(default_factory=list)
    """`source#location` of each numbered passage the writer was given: what an inline `[n]` of
    the summary refers to (`passage_references[n - 1]`)."""
    removed_claims: list[str] = Field(default_factory=list)
    """Claims the run took out of the report because the judge found no support for them (the
    last regeneration replaced each by the quote of the evidence closest to it, or dropped it)."""
    sources: list[str] = Field(default_factory=list)
    """What the grounded claims cite, each once, in the order they are first cited."""
    score_history: list[float] = Field(default_factory=list)
    replan_count: int = 0
    regeneration_count: int = 0
    focused_prompts: list[str] = Field(default_factory=list)
    """The replan node's prompts, one per replan."""
    evidence: list[EvidenceRecord] = Field(default_factory=list)
    evidence_count: int = 0
    nodes: list[Node] = Field(default_factory=list)
    """The path the run took, node by node."""
    end_reason: EndReason
    """`grounded`, `max_replans`, `max_regenerations`, `rejected` (by a reviewer) or
    `budget_exhausted` (the cost budget was spent)."""
    usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float = 0.0
    """What the run's model calls cost in USD at the models' prices (`sleuth.usage.pricing`)."""
    max_cost_usd: float | None = None
    """The run's cost budget (None: it had none)."""
    revision_count: int = 0
    """Plans and summaries written again because a reviewer asked."""
    reviews: list[ReviewRecord] = Field(default_factory=list)
    """Every review decided during the run, in order."""

    def parsed(self, schema: type[SchemaT]) -> SchemaT | None:
        """`structured_output` as an instance of `schema` (None when the run produced none; see
        `output_error`). The way back to the typed report after a durable run:
        `outcome.final_state.parsed(Report)`."""
        data = self.structured_output
        if data is None or isinstance(data, schema):
            return data
        if isinstance(data, BaseModel):
            data = data.model_dump(mode="json")
        try:
            return schema.model_validate(data)
        except ValidationError as exc:
            written = (
                f" (it was written against {self.output_schema})" if self.output_schema else ""
            )
            raise ValueError(
                f"the report's structured output does not fit {schema.__name__}{written}; pass "
                f"the research config's output_schema: {exc}"
            ) from exc


def build_final_state(
    state: ResearchState,
    *,
    output_schema: type[BaseModel] | None = None,
    evidence_chars: int | None = None,
) -> ResearchReport:
    """The report of a finished run. `output_schema` makes `structured_output` an instance of it;
    `evidence_chars` caps the evidence text kept in total (a durable outcome keeps only a preview
    inline; the full trail stays in the artifact store)."""
    if state.end_reason is None:
        raise ValueError(
            "the research run has not finished: run the finish step (sleuth.research.finish) "
            "with the end reason the runner decided before building its report"
        )
    per_item = None
    if evidence_chars is not None:
        per_item = max(80, evidence_chars // max(1, len(state.evidence)))
    structured: Any = state.structured_output
    if output_schema is not None and structured is not None:
        structured = output_schema.model_validate(structured)
    return ResearchReport(
        prompt=state.prompt,
        structured_output=structured,
        output_schema=output_schema.__name__ if output_schema is not None else None,
        summary=state.summary,
        output_error=state.output_error,
        findings=state.findings,
        coverage=list(state.coverage),
        causal_chain=state.causal_chain,
        grounding_score=state.grounding_score,
        grounding_threshold=state.grounding_threshold,
        grounding_method=state.grounding_method,
        grounding_judge=state.grounding_judge,
        claim_threshold=state.claim_threshold_used,
        claims=list(state.claims),
        passage_references=list(state.passage_references),
        removed_claims=list(state.removed_claims),
        sources=sources(state),
        score_history=list(state.score_history),
        replan_count=state.replan_count,
        regeneration_count=state.regeneration_count,
        focused_prompts=list(state.focused_prompts),
        evidence=[
            EvidenceRecord(
                index=item.index,
                tool=item.tool,
                arguments=item.arguments,
                output=item.output if per_item is None else trim(item.output, per_item),
                success=item.success,
                error=item.error,
            )
            for item in state.evidence
        ],
        evidence_count=len(state.evidence),
        nodes=list(state.nodes),
        end_reason=state.end_reason,
        usage=TokenUsage(
            input_tokens=state.usage.input_tokens,
            output_tokens=state.usage.output_tokens,
            total_tokens=state.usage.total_tokens,
        ),
        cost_usd=state.usage.cost_usd,
        max_cost_usd=state.max_cost_usd,
        revision_count=state.revision_count,
        reviews=list(state.reviews),
    )


def finish(state: ResearchState, reason: EndReason) -> ResearchState:
    """`state` marked as ended for `reason`. The runner that decided the run is over (with
    `next_node`) gives the reason (from `end_reason`); this step never routes."""
    return state.model_copy(update={"end_reason": reason})


# -- sources ---------------------------------------------------------------------------------------


def sources(state: ResearchState) -> list[str]:
    """What the grounded claims cite (`source#location`), each once, in order of first citation."""
    found: list[str] = []
    for claim in state.claims:
        if not claim.grounded:
            continue
        for citation in claim.citations:
            if citation.reference not in found:
                found.append(citation.reference)
    return found


def trim(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[:limit] + " …"


def report_text(structured: Mapping[str, Any]) -> str:
    """The prose of a structured report: its text fields and lists of text, one claim per line,
    each distinct text once."""
    lines: list[str] = []
    seen: set[str] = set()
    for value in structured.values():
        texts = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for text in texts:
            key = text_key(text) if isinstance(text, str) else ""
            if key and key not in seen:
                seen.add(key)
                lines.append(text.strip() if isinstance(value, str) else f"- {text.strip()}")
    return "\n".join(lines)


# -- deduplicate ----------------------------------------------------------------------------------


def normalise(text: str) -> str:
    """`text` as compared for duplicates: citation marks dropped, lower case, punctuation as
    space, runs of space as one."""
    text = _PUNCTUATION.sub(" ", _CITATION_MARK.sub(" ", text).lower())
    return _SPACE.sub(" ", text).strip()


def within(inner: str, outer: str) -> bool:
    """Whether normalised `inner` is `outer` or a run of whole words inside it."""
    return f" {inner} " in f" {outer} "


def dedupe_findings(findings: Iterable[str]) -> list[str]:
    """`findings` with each finding once: two are one when one equals or is contained in the
    other after `normalise`. The longer wording is kept, where the first of them stood."""
    kept: list[tuple[str, str]] = []
    for text in findings:
        key = normalise(text)
        if not key or any(within(key, other) for _, other in kept):
            continue
        covered = [i for i, (_, other) in enumerate(kept) if within(other, key)]
        if covered:
            kept[covered[0]] = (text, key)
            kept = [entry for i, entry in enumerate(kept) if i not in covered[1:]]
        else:
            kept.append((text, key))
    return [text for text, _ in kept]


def dedupe_text_lists(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with every top-level list of strings deduplicated by `dedupe_findings` (a
    report's `key_findings` or `sources` listing one thing twice)."""
    return {
        key: dedupe_findings(value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value)
        else value
        for key, value in data.items()
    }
