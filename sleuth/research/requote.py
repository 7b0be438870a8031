"""Regenerating a report without a writer: every claim the judge did not ground is replaced by
the sentence of the evidence closest to it, quoted and cited, or dropped when none is close.

Why not ask the writer again: a small local writer asked to repair its report mostly wrote the
same report back (over the 22 questions of `bench.research_quality`, one run of nineteen
regenerations ended grounded), and each rewrite cost it a minute of decoding. The passage the judge
found closest to a doubted claim says what the evidence does say; quoting it keeps the fact the
claim was after where there is one, and adds nothing the evidence does not state. A writer still
regenerates when a reviewer's remark asks for a change, or when the config asks for it
(`regenerate="rewrite"`), or when the repair would leave no claim.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from sleuth.grounding.checks import content_stems
from sleuth.grounding.claims import BULLET, SENTENCE_END, split_claims
from sleuth.grounding.passages import Passage
from sleuth.research.citations import writer_passages
from sleuth.research.report import normalise, report_text, within
from sleuth.research.state import ClaimRecord, ResearchState

REQUOTE_OVERLAP = 0.4
"""The share of a doubted claim's content words its closest quote must hold to replace it (less:
the quote is about something else, and the claim is dropped)."""


def requoted(state: ResearchState, schema: type[BaseModel] | None) -> dict[str, Any] | None:
    """The state update of a report repaired by quoting (`summary`, `structured_output`,
    `removed_claims`), or None when there is nothing to repair, when the repair would leave no
    claim, or when the repaired report no longer fits `schema`. `removed_claims` lists the
    doubted claims the repair found in the report and replaced or dropped."""
    fixes = _fixes(state)
    if not fixes:
        return None
    used: set[str] = set()
    matched: set[str] = set()
    structured: dict[str, Any] | None = None
    if state.structured_output is not None:
        repaired: dict[str, Any] = {}
        for key, value in state.structured_output.items():
            if isinstance(value, str):
                repaired[key] = _repaired_text(value, fixes, used, matched)
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                items = [_repaired_text(v, fixes, used, matched) for v in value]
                repaired[key] = [item for item in items if item]
            else:
                repaired[key] = value
        if schema is not None:
            try:
                repaired = schema.model_validate(repaired).model_dump(mode="json")
            except ValidationError:
                return None
        structured = repaired
        text = report_text(repaired)
        summary = repaired.get("summary")
        if not isinstance(summary, str):
            summary = text
    else:
        summary = _repaired_text(state.summary, fixes, used, matched)
        text = summary
    if not matched or not split_claims(text):
        return None
    return {
        "summary": summary,
        "structured_output": structured,
        "removed_claims": [
            claim.claim
            for claim in state.claims
            if not claim.grounded and normalise(claim.claim) in matched
        ],
    }


def _fixes(state: ResearchState) -> list[tuple[str, str]]:
    """Each ungrounded claim (normalised) with what replaces it: its closest quote with the
    writer's `[n]` for that passage, or "" (dropped). A quote already in the report, or already
    replacing another claim, is not stated twice."""
    passages = writer_passages(state)
    stated = {normalise(c.claim) for c in state.claims if c.grounded}
    fixes: list[tuple[str, str]] = []
    for claim in state.claims:
        if claim.grounded:
            continue
        replacement = _replacement(claim, passages)
        key = normalise(replacement)
        # A doubted claim that is its own closest quote cannot be repaired by quoting it.
        if (
            key == normalise(claim.claim)
            or key
            and any(within(key, other) or within(other, key) for other in stated)
        ):
            replacement = ""
        elif key:
            stated.add(key)
        fixes.append((normalise(claim.claim), replacement))
    return fixes


def _replacement(claim: ClaimRecord, passages: list[Passage]) -> str:
    """The quote closest to `claim` with its `[n]`, when it holds enough of the claim's words."""
    if not claim.citations:
        return ""
    citation = claim.citations[0]
    quote = " ".join(citation.quote.split())
    wanted = set(content_stems(claim.claim))
    if not quote or not wanted:
        return ""
    if len(wanted & set(content_stems(quote))) / len(wanted) < REQUOTE_OVERLAP:
        return ""
    number = next(
        (
            n
            for n, passage in enumerate(passages, start=1)
            if passage.source == citation.source and citation.quote in passage.text
        ),
        None,
    )
    if number is None:
        return quote
    end = len(quote) - 1 if quote[-1] in ".!?" else len(quote)
    return f"{quote[:end]} [{number}]{quote[end:]}"


def _repaired_text(
    text: str, fixes: list[tuple[str, str]], used: set[str], matched: set[str]
) -> str:
    """`text` with each sentence that states a doubted claim (the claim itself, or a shorter
    sentence the claim holds: a key finding the judged summary sentence repeats) replaced by
    the claim's fix; a claim's replacement is written once, where it first stood. Each claim
    found is added to `matched`."""
    lines = []
    for line in text.splitlines():
        bullet = BULLET.match(line)
        lead = bullet.group(0) if bullet else ""
        kept: list[str] = []
        for sentence in _sentences(line[len(lead) :]):
            key = normalise(sentence)
            fix = next(
                (
                    (claim, new)
                    for claim, new in fixes
                    if key and (key == claim or (within(key, claim) and split_claims(sentence)))
                ),
                None,
            )
            if fix is None:
                kept.append(sentence)
                continue
            matched.add(fix[0])
            if fix[1] and fix[0] not in used:
                used.add(fix[0])
                kept.append(fix[1])
        body = " ".join(s.strip() for s in kept if s.strip())
        if body or not line.strip():
            lines.append(lead + body if body else line)
    return "\n".join(lines).strip()


def _sentences(text: str) -> list[str]:
    """`text` split as `split_claims` splits it, a run of citation marks after a sentence's end
    (`... reraised. [2]`) kept with that sentence."""
    sentences: list[str] = []
    for part in SENTENCE_END.split(text):
        if sentences and not normalise(part):
            sentences[-1] += " " + part
        else:
            sentences.append(part)
    return sentences
