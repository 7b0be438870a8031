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

from pydantic import BaseModel, Field, ValidationError, model_validator

from sleuth.flows.review import ReviewRecord
from sleuth.grounding.claims import BULLET, SENTENCE_END, split_claims
from sleuth.grounding.passages import text_key
from sleuth.research.citations import cited_numbers
from sleuth.research.router import EndReason, Node
from sleuth.research.state import (
    ClaimRecord,
    Draft,
    DraftRecord,
    QuestionPart,
    Record,
    ResearchState,
    ResearchStatus,
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
    """The share of the final report's claims the judge found grounded (the best draft's score;
    `score_history` has every draft's)."""
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
    """`source#location` of each numbered passage the final draft's writer was given: what the
    writer's own `[n]` referred to. The report's text is renumbered to `sources`."""
    removed_claims: list[str] = Field(default_factory=list)
    """Claims the run took out of the report because the judge found no support for them (the
    last regeneration replaced each by the quote of the evidence closest to it, or dropped it)."""
    sources: list[str] = Field(default_factory=list)
    """What the report cites, each once, in the order it is first cited: every inline `[n]` of
    `summary` (and of `structured_output` and `claims`) refers to `sources[n - 1]`."""
    status: ResearchStatus
    """How the final report answers the question: `grounded` (it met the grounding threshold and
    answers every part of the question), `partial` (it answers some of it, or is short of the
    threshold), `not_found` (the sources answer no part of it)."""
    parts: list[QuestionPart] = Field(default_factory=list)
    """The question's own parts (its clauses, not the planner's sub-questions), each answered,
    partly answered or not stated, with the claims that answer it."""
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    """Derived from the grounding, never written by the model: the final report's grounding score
    times the share of the question's parts it answers (a part partly answered counts half)."""
    drafts: list[DraftRecord] = Field(default_factory=list)
    """Every judged draft of the run, in order."""
    best_draft: int = 0
    """The 1-based index (into `drafts`) of the draft that became the final report (0: none was
    judged)."""
    end_detail: str = ""
    """Which draft became the final report, and why."""
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
    """Why the loop stopped: `grounded`, `max_replans`, `max_regenerations`, `rejected` (by a
    reviewer) or `budget_exhausted` (the cost budget was spent). How the final report answers
    the question is `status`; which draft it is, `end_detail`."""
    usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float = 0.0
    """What the run's model calls cost in USD at the models' prices (`sleuth.usage.pricing`)."""
    max_cost_usd: float | None = None
    """The run's cost budget (None: it had none)."""
    revision_count: int = 0
    """Plans and summaries written again because a reviewer asked."""
    reviews: list[ReviewRecord] = Field(default_factory=list)
    """Every review decided during the run, in order."""

    @model_validator(mode="before")
    @classmethod
    def _status_of_older_reports(cls, data: Any) -> Any:
        # A report stored before runs had an end state (a durable history's outcome) says only why
        # it ended; its status follows from that.
        if isinstance(data, dict) and "status" not in data:
            grounded = data.get("end_reason") == "grounded"
            data = {**data, "status": "grounded" if grounded else "partial"}
        return data

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

    def to_markdown(self, *, workflow_id: str | None = None, web_ui: str | None = None) -> str:
        """The report as Markdown to keep or share (`sleuth.research.render`); pass the run's
        workflow id and Web UI link when there is one."""
        from sleuth.research.render import to_markdown

        return to_markdown(self, workflow_id=workflow_id, web_ui=web_ui)

    def to_html(self, *, workflow_id: str | None = None, web_ui: str | None = None) -> str:
        """The report as one self-contained HTML page: offline, printable, dark-mode aware."""
        from sleuth.research.render import to_html

        return to_html(self, workflow_id=workflow_id, web_ui=web_ui)

    def to_json(self, *, workflow_id: str | None = None, web_ui: str | None = None) -> str:
        """The report's sections as JSON (the same sections as the Markdown and HTML)."""
        from sleuth.research.render import to_json

        return to_json(self, workflow_id=workflow_id, web_ui=web_ui)


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
        sources=list(state.sources) if state.status is not None else sources(state),
        status=state.status or "not_found",
        parts=list(state.parts),
        confidence=state.confidence or 0.0,
        drafts=[draft.record() for draft in state.drafts],
        best_draft=state.best_draft,
        end_detail=state.end_detail,
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


def better_draft(draft: Draft, best: Draft | None) -> bool:
    """Whether `draft` replaces `best` as the report the run ends with: a higher grounding score,
    or the same score and more of the question's parts answered. A draft no better keeps the
    earlier one."""
    return best is None or draft.rank() > best.rank()


def best_draft_index(drafts: Iterable[Draft]) -> int:
    """The 1-based index of the best of `drafts` (`better_draft`: the earliest of equals), 0 for
    none."""
    best: Draft | None = None
    for draft in drafts:
        if better_draft(draft, best):
            best = draft
    return best.index if best is not None else 0


def finish(
    state: ResearchState, reason: EndReason, output_schema: type[BaseModel] | None = None
) -> ResearchState:
    """`state` as the run ends for `reason`: the one finishing step both runners take (the runner
    decided the run is over with `next_node` and gives the reason from `end_reason`; this step
    never routes). Pure.

    The final report is the best judged draft (`better_draft`), never a later, worse one. Every
    claim the judge rejected is taken out of its text (and listed in `removed_claims`); each
    part of the question it does not answer is stated as such ("The indexed documents do not
    say …"); dangling references ("see section 3") and repeated sentences are dropped; its
    inline `[n]` marks are renumbered to one list, `sources`; a structured output's empty
    `sources` and `key_findings` are filled from the grounded claims and its `confidence` is
    the derived one. `status`, `confidence` and `end_detail` say how it answers the question."""
    if not state.drafts:
        detail = "no draft of the report was judged before the run ended (its text is unjudged)"
        return state.model_copy(
            update={
                "end_reason": reason,
                "status": "not_found",
                "confidence": 0.0,
                "end_detail": detail,
                "sources": [],
            }
        )
    index = best_draft_index(state.drafts)
    draft = state.drafts[index - 1]
    rejected = [c for c in draft.claims if not c.grounded]
    removed = dedupe_findings([*draft.removed_claims, *(c.claim for c in rejected)])
    statements = [p.statement for p in draft.parts if p.state != "answered" and p.statement]
    structured = draft.structured_output
    summary = draft.summary
    if structured is not None:
        structured = _final_structured(structured, rejected, statements, output_schema)
        if structured is not None:
            field = structured.get("summary")
            summary = field if isinstance(field, str) else report_text(structured)
    if structured is None or not isinstance(structured.get("summary"), str):
        summary = clean_text(without_claims(summary, rejected))
    summary = _with_statements(summary, statements)
    numbering = Renumbering(draft.passage_references)
    numbering.read(summary)
    if structured is not None:
        numbering.read_value(structured)
    cited = numbering.cited_with(draft.claims)
    # Every text the report shows cites by the one numbering; a mark for a passage the final
    # report does not cite (a rejected claim's) is dropped.
    claims = [c.model_copy(update={"claim": numbering.apply(c.claim)}) for c in draft.claims]
    removed = [numbering.apply(claim) for claim in removed]
    summary = numbering.apply(summary)
    status = _status(draft, state.grounding_threshold)
    confidence = derived_confidence(draft)
    if structured is not None:
        structured = numbering.apply_value(structured)
        structured = _filled(structured, claims, cited, confidence, output_schema)
    later = [d for d in state.drafts if d.index > index]
    detail = (
        f"draft {index} of {len(state.drafts)} ({draft.node}) is the final report: grounding "
        f"{draft.grounding_score:.0%}, {_count(draft.parts_answered)} of {len(draft.parts)} "
        "parts of the question answered"
    )
    if later:
        detail += (
            "; no later draft scored better ("
            + ", ".join(
                f"draft {d.index}: {d.grounding_score:.0%}, {_count(d.parts_answered)} parts"
                for d in later
            )
            + ")"
        )
    return state.model_copy(
        update={
            "end_reason": reason,
            "summary": summary,
            "structured_output": structured,
            "output_error": draft.output_error
            if structured is not None or draft.structured_output is None
            else "the writer's structured output held no claim the judge grounded",
            "claims": claims,
            "parts": list(draft.parts),
            "passage_references": list(draft.passage_references),
            "removed_claims": removed,
            "grounding_score": draft.grounding_score,
            "grounding_method": draft.grounding_method,
            "grounding_judge": draft.grounding_judge,
            "claim_threshold_used": draft.claim_threshold_used,
            "coverage": _final_coverage(state.coverage, draft.coverage),
            "best_draft": index,
            "status": status,
            "confidence": confidence,
            "end_detail": detail,
            "sources": cited,
        }
    )


def _final_coverage(
    latest: list[SubQuestionCoverage], judged: list[SubQuestionCoverage]
) -> list[SubQuestionCoverage]:
    """What the run's evidence covers at its end, each sub-question `answered` as the final
    draft answers it."""
    answered = {entry.question: entry.answered for entry in judged}
    return [
        entry.model_copy(update={"answered": answered.get(entry.question, entry.answered)})
        for entry in latest
    ]


def _count(value: float) -> str:
    return f"{value:g}"


def _status(draft: Draft, threshold: float) -> ResearchStatus:
    states = {part.state for part in draft.parts}
    if not draft.parts or states == {"not_stated"}:
        return "not_found"
    if states == {"answered"} and draft.grounding_score >= threshold:
        return "grounded"
    return "partial"


def derived_confidence(draft: Draft) -> float:
    """The confidence of a report, from its grounding alone: its grounding score times the share
    of the question's parts it answers (a part partly answered counts half)."""
    if not draft.parts:
        return 0.0
    return round(draft.grounding_score * draft.parts_answered / len(draft.parts), 2)


def _with_statements(text: str, statements: list[str]) -> str:
    missing = [s for s in statements if normalise(s) not in normalise(text)]
    return "\n\n".join(p for p in (text.strip(), " ".join(missing)) if p)


def _final_structured(
    data: dict[str, Any],
    rejected: list[ClaimRecord],
    statements: list[str],
    schema: type[BaseModel] | None,
) -> dict[str, Any] | None:
    """A structured report without its rejected claims, its statements of what the sources do not
    say added to its `summary` (else its first text field), valid for `schema`; None when
    nothing of it is left that fits."""
    cleaned: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, str):
            cleaned[key] = kept[key] = clean_text(without_claims(value, rejected))
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            items = [i for i in (without_claims(v, rejected) for v in value) if i]
            kept[key] = items
            cleaned[key] = dedupe_findings(clean_text(i) for i in items)
        else:
            cleaned[key] = kept[key] = value
    texts = [k for k, v in cleaned.items() if isinstance(v, str)]
    target = "summary" if "summary" in texts else next(iter(texts), None)
    candidates = []
    for version in (cleaned, kept):  # a schema may need the repeats (a list's minimum length)
        if target is not None and statements:
            candidates.append({**version, target: _with_statements(version[target], statements)})
        candidates.append(version)
    return next((v for c in candidates if (v := _valid(c, schema)) is not None), None)


def _valid(data: dict[str, Any], schema: type[BaseModel] | None) -> dict[str, Any] | None:
    if schema is None:
        return data
    try:
        return schema.model_validate(data).model_dump(mode="json")
    except ValidationError:
        return None


def _filled(
    data: dict[str, Any],
    claims: list[ClaimRecord],
    cited: list[str],
    confidence: float,
    schema: type[BaseModel] | None,
) -> dict[str, Any]:
    """`data` with its empty `key_findings` and `sources` filled from the grounded claims and
    what they cite, and its `confidence` the derived one (each only where the schema takes it)."""
    fills: dict[str, Any] = {}
    if data.get("key_findings") == []:
        fills["key_findings"] = dedupe_findings(c.claim for c in claims if c.grounded)
    listed = data.get("sources")
    # The report's `[n]` marks are numbers of `cited`: a list of its own would contradict them.
    if (
        isinstance(listed, list)
        and all(isinstance(s, str) for s in listed)
        and (not listed or _MARK.search(report_text(data)))
    ):
        fills["sources"] = list(cited)
    if "confidence" in data:
        fills["confidence"] = confidence
    for key, value in fills.items():
        data = _valid({**data, key: value}, schema) or data
    return data


# -- the final text ---------------------------------------------------------------------------

_DANGLING = re.compile(
    r"\s*[(\[]\s*(?:see|cf\.?|refer to|as (?:described|shown|discussed|explained|noted) in)\s+"
    r"[^()\[\]]*?(?:section|chapter|appendix|figure|table|above|below|page|part)\b[^()\[\]]*[)\]]"
    r"|,?\s*\b(?:see|refer to|as (?:described|shown|discussed|explained|noted) in)\s+(?:the\s+)?"
    r"(?:section|chapter|appendix|figure|table|page)s?\s+[\w.§-]+(?:\s+(?:above|below))?"
    r"|,?\s*\b(?:see|as (?:described|shown|discussed|explained|noted))\s+(?:above|below)\b",
    re.IGNORECASE,
)
"""A pointer into a document the reader does not have: `(see section 4.2)`, `see the table
below`, `as described above`."""


def _sentences(line: str) -> list[str]:
    sentences: list[str] = []
    for part in SENTENCE_END.split(line):
        if sentences and not normalise(part):
            sentences[-1] += " " + part
        else:
            sentences.append(part)
    return sentences


def _states(sentence_key: str, claim_key: str) -> bool:
    return bool(sentence_key and claim_key) and (
        within(sentence_key, claim_key) or within(claim_key, sentence_key)
    )


def without_claims(text: str, claims: Iterable[ClaimRecord]) -> str:
    """`text` without each sentence that states one of `claims` (the claim, a sentence holding it,
    or a shorter sentence it holds)."""
    keys = [normalise(c.claim) for c in claims]
    keys = [k for k in keys if k]
    if not keys:
        return text
    lines = []
    for line in text.splitlines():
        bullet = BULLET.match(line)
        lead = bullet.group(0) if bullet else ""
        kept = [
            sentence
            for sentence in _sentences(line[len(lead) :])
            if not any(_states(normalise(sentence), key) for key in keys)
            or not split_claims(sentence)
        ]
        body = " ".join(s.strip() for s in kept if s.strip())
        if body or not line.strip():
            lines.append(lead + body if body else "")
    return "\n".join(lines).strip()


def clean_text(text: str) -> str:
    """`text` without dangling references and without a sentence it already states."""
    seen: list[str] = []
    lines = []
    for line in text.splitlines():
        line = _DANGLING.sub("", line)
        bullet = BULLET.match(line)
        lead = bullet.group(0) if bullet else ""
        kept = []
        for sentence in _sentences(line[len(lead) :]):
            key = normalise(sentence)
            if key and split_claims(sentence) and any(within(key, other) for other in seen):
                continue
            if key:
                seen.append(key)
            kept.append(sentence.strip())
        body = re.sub(r"\s+([.,;:])", r"\1", " ".join(s for s in kept if s))
        if body or not line.strip():
            lines.append(lead + body if body else "")
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def clean_value(value: Any) -> Any:
    """`clean_text` applied to every string of a JSON value; a list item left empty is dropped."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        items = [clean_value(v) for v in value]
        return [i for i in items if not isinstance(i, str) or normalise(i)]
    if isinstance(value, dict):
        return {k: clean_value(v) for k, v in value.items()}
    return value


# -- one citation numbering -------------------------------------------------------------------

_MARK = re.compile(r"\s?\[\s*(\d+(?:\s*[,;\-–]\s*\d+)*)\s*\]")


class Renumbering:
    """The writer's `[n]` marks (numbers of the passages it was given, `references`) renumbered to
    the report's own `sources`, in the order the report first cites them."""

    def __init__(self, references: list[str]):
        self.references = references
        self.sources: list[str] = []

    def _numbers(self, inside: str) -> list[int]:
        return [n for n in cited_numbers(inside) if 1 <= n <= len(self.references)]

    def read(self, text: str) -> None:
        for match in _MARK.finditer(text):
            for number in self._numbers(match.group(1)):
                reference = self.references[number - 1]
                if reference not in self.sources:
                    self.sources.append(reference)

    def read_value(self, value: Any) -> None:
        if isinstance(value, str):
            self.read(value)
        elif isinstance(value, list):
            for item in value:
                self.read_value(item)
        elif isinstance(value, dict):
            for item in value.values():
                self.read_value(item)

    def cited_with(self, claims: Iterable[ClaimRecord]) -> list[str]:
        """The sources: those the text cites, then what the grounded claims rest on."""
        for claim in claims:
            if claim.grounded:
                for citation in claim.citations:
                    if citation.reference not in self.sources:
                        self.sources.append(citation.reference)
        return list(self.sources)

    def apply(self, text: str) -> str:
        def renumber(match: re.Match[str]) -> str:
            numbers = sorted(
                {
                    self.sources.index(self.references[n - 1]) + 1
                    for n in self._numbers(match.group(1))
                    if self.references[n - 1] in self.sources
                }
            )
            if not numbers:
                return ""
            lead = " " if match.group(0).startswith(" ") else ""
            return f"{lead}[{', '.join(str(n) for n in numbers)}]"

        return _MARK.sub(renumber, text)

    def apply_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.apply(value)
        if isinstance(value, list):
            return [self.apply_value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.apply_value(v) for k, v in value.items()}
        return value


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
