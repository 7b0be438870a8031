"""The typed report of a finished run, and how its findings are cited, deduplicated and ordered.

`ResearchReport` is what both runners return as `final_state`: a pydantic model whose fields are
the keys of the dict it replaces, so `report.grounding_score` and `report["grounding_score"]`
both work. In-process, `structured_output` is an instance of the spec's output schema; after the
wire (a durable run's outcome) it is JSON data, and `report.parsed(Schema)` gives the instance.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from sleuth.grounding import content_words
from sleuth.research.router import EndReason, Node
from sleuth.research.state import (
    Citation,
    ClaimRecord,
    Record,
    ResearchState,
    SubQuestionCoverage,
)
from sleuth.state import EvidenceItem

SchemaT = TypeVar("SchemaT", bound=BaseModel)

EXCERPT_CHARS = 300
"""Longest excerpt of a tool output a claim keeps per cited evidence item."""

_CITATION_MARK = re.compile(r"\[\s*\d+(?:\s*[,;\-–]\s*\d+)*\s*\]")
_PUNCTUATION = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")
_SEGMENT = re.compile(r"[^.!?\n]+[.!?]?")


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
    grounding_method: str = "none"
    """`llm`, `lexical`, `mixed` or `none`: how the claims were judged."""
    claims: list[ClaimRecord] = Field(default_factory=list)
    """The report's findings, each once (see `dedupe_findings`), with verdict and citations."""
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
    """`grounded`, `max_replans` or `max_regenerations`."""
    usage: TokenUsage = Field(default_factory=TokenUsage)

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
        claims=list(state.claims),
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
    )


def finish(state: ResearchState, reason: EndReason) -> ResearchState:
    """`state` marked as ended for `reason`. The runner that decided the run is over (with
    `next_node`) gives the reason (from `end_reason`); this step never routes."""
    return state.model_copy(update={"end_reason": reason})


# -- cite -----------------------------------------------------------------------------------------


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


def cite(claim: str, item: EvidenceItem) -> tuple[Citation, str]:
    """The citation of evidence `item` for `claim`, and the excerpt of its output around what
    matches the claim best.

    A tool output that is JSON rows with a `source` (or `url`), as datastore searches return,
    is cited by its best-matching row: that row's source and location, an excerpt of its text.
    Any other output is cited as the tool call, located by the excerpt's character offsets.
    """
    words = content_words(claim)
    rows = _source_rows(item.output)
    if rows:
        row = max(rows, key=lambda r: len(words & content_words(_row_text(r))))
        text = _row_text(row)
        start, end = _best_window(text, words)
        location = row.get("location")
        citation = Citation(
            evidence=item.index,
            tool=item.tool,
            source=str(row.get("source") or row.get("url")),
            location=location if isinstance(location, str) else "",
        )
        return citation, _excerpt(text, start, end)
    start, end = _best_window(item.output, words)
    arguments = json.dumps(item.arguments, ensure_ascii=False, default=str)
    citation = Citation(
        evidence=item.index,
        tool=item.tool,
        source=f"{item.tool}({arguments})",
        location=f"chars {start}-{end}" if item.output else "",
    )
    return citation, _excerpt(item.output, start, end)


def _source_rows(output: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(output)
    except ValueError:
        return []
    rows = data if isinstance(data, list) else [data]
    return [
        row
        for row in rows
        if isinstance(row, dict)
        and isinstance(row.get("source") or row.get("url"), str)
        and (row.get("source") or row.get("url"))
    ]


def _row_text(row: dict[str, Any]) -> str:
    text = row.get("text")
    return text if isinstance(text, str) else json.dumps(row, ensure_ascii=False, default=str)


def _best_window(text: str, words: set[str], limit: int = EXCERPT_CHARS) -> tuple[int, int]:
    """Offsets of at most `limit` characters of `text`, centred on the sentence (or line) that
    shares the most content words with the claim (the first one on a tie)."""
    if len(text) <= limit:
        return 0, len(text)
    best_start, best_end, best_overlap = 0, 0, -1
    for segment in _SEGMENT.finditer(text):
        overlap = len(words & content_words(segment.group(0)))
        if overlap > best_overlap:
            best_start, best_end, best_overlap = segment.start(), segment.end(), overlap
    middle = (best_start + best_end) // 2
    start = max(0, min(middle - limit // 2, len(text) - limit))
    return start, start + limit


def _excerpt(text: str, start: int, end: int) -> str:
    body = text[start:end].strip()
    return ("… " if start > 0 else "") + body + (" …" if end < len(text) else "")


def trim(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[:limit] + " …"


# -- deduplicate ----------------------------------------------------------------------------------


def normalise(text: str) -> str:
    """`text` as compared for duplicates: citation marks dropped, lower case, punctuation as
    space, runs of space as one."""
    text = _PUNCTUATION.sub(" ", _CITATION_MARK.sub(" ", text).lower())
    return _SPACE.sub(" ", text).strip()


def _within(inner: str, outer: str) -> bool:
    """Whether normalised `inner` is `outer` or a run of whole words inside it."""
    return f" {inner} " in f" {outer} "


def dedupe_findings(findings: Iterable[str]) -> list[str]:
    """`findings` with each finding once: two are one when one equals or is contained in the
    other after `normalise`. The longer wording is kept, where the first of them stood."""
    kept: list[tuple[str, str]] = []
    for text in findings:
        key = normalise(text)
        if not key or any(_within(key, other) for _, other in kept):
            continue
        covered = [i for i, (_, other) in enumerate(kept) if _within(other, key)]
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
