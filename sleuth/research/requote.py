"""Regenerating a report without a writer: every claim the judge did not ground is replaced by
the sentence of the evidence closest to it, quoted and cited, or dropped when none is close.

Why not ask the writer again: a small local writer asked to repair its report mostly wrote the
same report back (over the 22 questions of `bench.research_quality`, one run of nineteen
regenerations ended grounded), and each rewrite cost it a minute of decoding. The passage the judge
found closest to a doubted claim says what the evidence does say; quoting it keeps the fact the
claim was after where there is one, and adds nothing the evidence does not state. A writer still
regenerates when a reviewer's remark asks for a change, or when the config asks for it
(`regenerate="rewrite"`), or when the repair would leave no claim.

A part of the question the evidence covers but no grounded claim answers (`plan.unanswered`) is
answered the same way: by the sentence of its covering passages that holds most of the part's
words, quoted and cited.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from sleuth.grounding.checks import content_stems
from sleuth.grounding.claims import BULLET, SENTENCE_END, split_claims
from sleuth.grounding.passages import Passage
from sleuth.research.citations import writer_passages
from sleuth.research.parts import part_aids
from sleuth.research.plan import answers, unanswered
from sleuth.research.report import normalise, report_text, within
from sleuth.research.state import (
    ClaimRecord,
    CoveragePassage,
    ResearchState,
    SubQuestionCoverage,
)

FILL_MIN_WORDS = 5
FILL_MAX_WORDS = 60
"""A sentence quoted to answer an unanswered part has this many words (fewer: a fragment; more:
a code block read as one sentence)."""
PROSE_SHARE = 0.7
"""The share of a quoted sentence's tokens that must be plain words (quoted or punctuated)."""
_WORDLIKE = re.compile(r"^[\"'‘“(]*[A-Za-z][A-Za-z'’-]*[\"'’”),.;:]*$")
REQUOTE_OVERLAP = 0.4
"""The share of a doubted claim's content words its closest quote must hold to replace it (less:
the quote is about something else, and the claim is dropped)."""


def requoted(state: ResearchState, schema: type[BaseModel] | None) -> dict[str, Any] | None:
    """The state update of a report repaired by quoting (`summary`, `structured_output`,
    `removed_claims`), or None when there is nothing to repair, when the repair would leave no
    claim, or when the repaired report no longer fits `schema`. `removed_claims` lists the
    doubted claims the repair found in the report and replaced or dropped."""
    fixes = _fixes(state)
    fills = _fills(state, [new for _, new in fixes if new])
    if not fixes and not fills:
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
        structured = _valid(_with_fills(repaired, fills), schema) or _valid(repaired, schema)
        if structured is None:
            return None
        text = report_text(structured)
        summary = structured.get("summary")
        if not isinstance(summary, str):
            summary = text
    else:
        summary = "\n\n".join(
            part for part in (_repaired_text(state.summary, fixes, used, matched), *fills) if part
        )
        text = summary
    # Doubted claims the repair cannot find in the report are the writer's to fix.
    if (fixes and not matched) or not split_claims(text):
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


def _valid(data: dict[str, Any], schema: type[BaseModel] | None) -> dict[str, Any] | None:
    if schema is None:
        return data
    try:
        return schema.model_validate(data).model_dump(mode="json")
    except ValidationError:
        return None


def _with_fills(data: dict[str, Any], fills: list[str]) -> dict[str, Any]:
    """`data` with the quotes answering the unanswered parts added: to its first list of
    sentences (the findings; a list of names, such as sources, is not one), else to its
    `summary` (else its first string)."""
    if not fills:
        return data
    lists = [
        k
        for k, v in data.items()
        if isinstance(v, list)
        and all(isinstance(i, str) for i in v)
        and any(split_claims(i) for i in v)
    ]
    if lists:
        return {**data, lists[0]: [*data[lists[0]], *fills]}
    texts = [k for k, v in data.items() if isinstance(v, str)]
    key = "summary" if "summary" in texts else next(iter(texts), None)
    if key is None:
        return data
    return {**data, key: " ".join([data[key], *fills]).strip()}


def _fills(state: ResearchState, replacements: list[str]) -> list[str]:
    """For each part of the question that the evidence covers and the report leaves unanswered
    (and none of the quotes `replacements` answers), the sentence of its covering passages that
    holds most of the part's content words, with the writer's `[n]` for its passage. None for a
    part whose best sentence the report already states (or stated and had doubted), or that
    shares no content word with the part."""
    passages = writer_passages(state)
    stated = [normalise(c.claim) for c in state.claims] + [normalise(r) for r in replacements]
    fills: list[str] = []
    for question, covering in _unanswered_parts(state):
        if any(answers(quote, question) for quote in replacements):
            continue
        entry = SubQuestionCoverage(question=question, passages=covering)
        wanted = set(content_stems(entry.question))
        best, best_rank = "", (0, 0.0)
        for passage in entry.passages:
            for sentence, share in _prose_sentences(passage.text):
                shared = len(wanted & set(content_stems(sentence)))
                rank = (shared, share)
                if shared and rank > best_rank:
                    best, best_rank = sentence, rank
        key = normalise(best)
        if not key or any(within(key, other) or within(other, key) for other in stated):
            continue
        stated.append(key)
        fills.append(_cited(best, passages))
    return fills


def _unanswered_parts(state: ResearchState) -> list[tuple[str, list[CoveragePassage]]]:
    """Each part of the question that the last judged draft does not answer, with the passages
    that cover it (those of the sub-questions that research it); the sub-questions the report
    leaves unanswered in a run whose parts were never judged."""
    if not state.parts or not state.drafts:
        return [(state.coverage[i].question, state.coverage[i].passages) for i in unanswered(state)]
    aids = part_aids([p.text for p in state.parts], state.sub_questions)
    found = []
    for part, researched in zip(state.parts, aids, strict=True):
        covering = [
            p for j in researched if j < len(state.coverage) for p in state.coverage[j].passages
        ]
        if part.state != "answered" and covering:
            found.append((part.text, covering))
    return found


def _prose_sentences(text: str) -> list[tuple[str, float]]:
    """The sentences of a passage that read as prose, each with its share of plain words: each
    paragraph's sentences (a sentence never runs across a blank line) of `FILL_MIN_WORDS` to
    `FILL_MAX_WORDS` words, mostly words (`PROSE_SHARE`) and no interpreter prompt: an example's
    code is no answer."""
    sentences = []
    for paragraph in re.split(r"\n\s*\n", text):
        for sentence in split_claims(" ".join(paragraph.split()), min_words=FILL_MIN_WORDS):
            if len(sentence.split()) > FILL_MAX_WORDS or ">>>" in sentence or "..." in sentence:
                continue
            share = _prose_share(sentence)
            if share >= PROSE_SHARE:
                sentences.append((sentence, share))
    return sentences


def _prose_share(sentence: str) -> float:
    tokens = sentence.split()
    return sum(1 for token in tokens if _WORDLIKE.match(token)) / len(tokens) if tokens else 0.0


def _cited(quote: str, passages: Sequence[Passage | None]) -> str:
    """`quote` with the `[n]` of the writer's passage that holds it (as it is, without one);
    None stands for a passage that may not be cited."""
    spaced = " ".join(quote.split())
    number = next(
        (
            n
            for n, p in enumerate(passages, start=1)
            if p is not None and spaced in " ".join(p.text.split())
        ),
        None,
    )
    if number is None:
        return spaced
    end = len(spaced) - 1 if spaced[-1] in ".!?" else len(spaced)
    return f"{spaced[:end]} [{number}]{spaced[end:]}"


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
    return _cited(quote, [p if p.source == citation.source else None for p in passages])


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
