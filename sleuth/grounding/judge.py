"""`ground_claims`: the claim-level judge.

For each claim: select the evidence passages that match it best (BM25, fused with embeddings when
an embedder is given), ask the judge model one yes/no question about those of them that match it
nearly as well as the best one, run the deterministic checks on all of them, and combine both
into P(supported) with the calibration of the judge's family. A claim with no passage to rest on
is not grounded, whatever the model would say. Every verdict cites passages with a span quoted
verbatim from the evidence.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sleuth.agent.state import EvidenceItem
from sleuth.grounding.calibration import Calibration, calibration_for
from sleuth.grounding.checks import CheckReport, content_stems, run_checks
from sleuth.grounding.passages import (
    FOCUS_SHARE,
    Passage,
    PassageIndex,
    distinct_passages,
    narrow,
    split_passages,
)
from sleuth.grounding.scoring import (
    ANSWER_TOKENS,
    ModelScore,
    judge_messages,
    quote_messages,
    score_claim,
    score_quote,
)
from sleuth.grounding.sentences import sentence_spans
from sleuth.grounding.verdicts import (
    Citation,
    ClaimVerdict,
    GroundingReport,
    JudgeAnswer,
    Method,
)
from sleuth.models.base import Message, Model
from sleuth.rag.embeddings import Embedder

PASSAGES_PER_CLAIM = 3
NO_EVIDENCE = "no evidence: no passage of the evidence shares anything with the claim"


@dataclass
class _Judged:
    claim: str
    passages: list[Passage]
    """The passages the checks and citations read."""
    shown: list[Passage]
    """Those of them the judge model is shown: the ones matching the claim nearly as well as the
    best (`PassageIndex.select_and_focus`)."""
    checks: CheckReport | None = None
    model: ModelScore | None = None
    quote: float | None = None
    """The judge's P(Yes) for the second question (its quoted sentence), when asked."""
    key: str = ""
    """Digest of the first question (`question_key`), for reusing its answer later."""
    quote_key: str = ""
    """Digest of the second question, once asked (or answered from an earlier answer)."""

    @cached_property
    def closest(self) -> Citation:
        """The sentences of its passages closest to the claim: what the second question asks
        about, and the claim's citation unless a judge without token probabilities named
        passages."""
        return quote(self.claim, self.passages)


async def ground_claims(
    claims: Sequence[str],
    evidence: Sequence[EvidenceItem],
    judge: Model | None,
    *,
    threshold: float | None = None,
    embedder: Embedder | None = None,
    passages_per_claim: int = PASSAGES_PER_CLAIM,
    focus_share: float = FOCUS_SHARE,
    concurrency: int = 4,
    quote_question: bool | None = None,
    earlier: Iterable[JudgeAnswer] = (),
) -> GroundingReport:
    """Judge each claim against the evidence passages that match it best.

    - `judge`: the model asked one yes/no question per claim (token probabilities where the
      provider has them); None judges by the deterministic checks and word overlap alone.
    - `threshold`: the score a claim needs to count as grounded; None uses the calibrated
      default of the judge's family (`report.threshold` says which was used).
    - `embedder`: adds embedding similarity to BM25 when selecting passages.
    - `quote_question`: ask a judge with token probabilities the second question (does the
      claim's quoted sentence say what it says?); None asks it when the judge's calibration
      weighs it (the default local models'), False never (faster, less accurate).
    - `earlier`: the judge's answers from an earlier grounding (`ClaimVerdict.answer`): a
      question asked then (same judge, claim and passages) is answered from them, not asked
      again. The research graph passes the previous grounding eval's answers.
    - `focus_share`: the judge model is shown a selected passage when its BM25 score is at
      least this share of the best one's (and the passages stating what those leave out of
      the claim); 0 shows every selected passage.
    - `concurrency`: requests in flight at once (a local model still runs them one by one, in
      an order that lets claims sharing passages reuse the cached prompt).

    `report.score` is the share of claims that are grounded.
    """
    if not 1 <= passages_per_claim <= 20:
        raise ValueError(f"passages_per_claim must be within 1..20, got {passages_per_claim}")
    if not 0.0 <= focus_share <= 1.0:
        raise ValueError(f"focus_share must be within 0..1, got {focus_share}")
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be within 0..1, got {threshold}")
    judge_name = judge.name if judge is not None else ""
    if not claims:
        return GroundingReport(score=0.0, method="none", judge=judge_name)
    passages = distinct_passages(split_passages(evidence))
    index, claim_vectors = await _index(passages, claims, embedder)
    judged = [
        _Judged(
            claim,
            *index.select_and_focus(
                claim,
                top=passages_per_claim,
                share=focus_share,
                claim_vector=claim_vectors[n] if claim_vectors is not None else None,
            ),
        )
        for n, claim in enumerate(claims)
    ]
    evidence_text = "\n".join(f"{p.source}\n{p.readable}" for p in passages)
    for item in judged:
        if item.passages:
            item.checks = run_checks(item.claim, item.passages, evidence_text)
    known = {answer.key: answer for answer in earlier}
    known_quotes = {a.quote_key: a.quote for a in known.values() if a.quote is not None}
    if judge is not None:
        for item in judged:
            if item.passages:
                item.key = question_key(judge_name, judge_messages(item.claim, item.shown))
                if item.key in known:
                    answer = known[item.key]
                    item.model = ModelScore(answer.probability, answer.method, list(answer.cited))
        await _ask(judge, [j for j in judged if j.passages], concurrency)
    method = _method(judge, judged)
    calibration = calibration_for(judge_name or None, method)
    asks = calibration.asks_quote if quote_question is None else quote_question
    if judge is not None and method == "logprobs" and asks:
        await _ask_quotes(
            judge_name, judge, [j for j in judged if j.passages], known_quotes, concurrency
        )
    cutoff = calibration.threshold if threshold is None else threshold
    verdicts = [_verdict(item, calibration, cutoff) for item in judged]
    score = sum(v.grounded for v in verdicts) / len(verdicts)
    return GroundingReport(
        score=round(score, 4),
        claims=verdicts,
        method=method,
        threshold=cutoff,
        judge=judge_name,
    )


async def _index(
    passages: list[Passage], claims: Sequence[str], embedder: Embedder | None
) -> tuple[PassageIndex, np.ndarray | None]:
    if embedder is None or not passages:
        return PassageIndex(passages), None
    texts = [p.text for p in passages] + list(claims)
    vectors = np.asarray(await asyncio.to_thread(embedder.embed, texts), dtype=np.float32)
    return PassageIndex(passages, vectors[: len(passages)]), vectors[len(passages) :]


def question_key(judge_name: str, messages: list[Message]) -> str:
    """A digest of a question to the judge (its name and the messages it reads): equal keys,
    equal questions, so an earlier answer can stand in (`JudgeAnswer`)."""
    text = json.dumps([judge_name, [[m.role, m.content] for m in messages]])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


async def _ask(judge: Model, judged: list[_Judged], concurrency: int) -> None:
    """Score every claim an earlier answer does not already score. The first answer shows
    whether the judge returns token probabilities; if it does, the others need only the answer
    token. Claims sharing passages are sent one after another, so a local judge reuses their
    cached prompt."""
    order = sorted(
        (j for j in judged if j.model is None),
        key=lambda j: [(p.evidence, p.row or 0, p.start) for p in j.shown],
    )
    if not order:
        return
    methods = {j.model.method for j in judged if j.model is not None}
    if not methods:
        first = order.pop(0)
        first.model = await score_claim(judge, first.claim, first.shown)
        methods = {first.model.method}
    answer_tokens = 1 if methods == {"logprobs"} else ANSWER_TOKENS
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(item: _Judged) -> None:
        async with gate:
            item.model = await score_claim(
                judge, item.claim, item.shown, answer_tokens=answer_tokens
            )

    await asyncio.gather(*(one(item) for item in order))


async def _ask_quotes(
    judge_name: str,
    judge: Model,
    judged: list[_Judged],
    known: Mapping[str, float],
    concurrency: int,
) -> None:
    """The second question for every claim: does its quoted sentence say what it says? An
    earlier answer to the same question stands in for it."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(item: _Judged) -> None:
        item.quote_key = question_key(judge_name, quote_messages(item.claim, item.closest.quote))
        item.quote = known.get(item.quote_key)
        if item.quote is None:
            async with gate:
                item.quote = await score_quote(judge, item.claim, item.closest.quote)

    await asyncio.gather(*(one(item) for item in judged))


def _answer(item: _Judged) -> JudgeAnswer | None:
    """What the judge answered about `item`, for a later grounding to reuse."""
    if item.model is None or not item.key:
        return None
    return JudgeAnswer(
        key=item.key,
        probability=item.model.probability,
        method="verdict" if item.model.method == "verdict" else "logprobs",
        cited=list(item.model.cited),
        quote_key=item.quote_key if item.quote is not None else "",
        quote=item.quote,
    )


def _method(judge: Model | None, judged: list[_Judged]) -> Method:
    """`verdict` if any claim was scored from a generated answer, `logprobs` if all were scored
    from token probabilities, `checks` when the model was not asked (no judge, or no claim had
    passages)."""
    methods = {j.model.method for j in judged if j.model is not None}
    if judge is None or not methods:
        return "checks"
    return "verdict" if "verdict" in methods else "logprobs"


def _verdict(item: _Judged, calibration: Calibration, cutoff: float) -> ClaimVerdict:
    if not item.passages or item.checks is None:
        return ClaimVerdict(claim=item.claim, score=0.0, grounded=False, rationale=NO_EVIDENCE)
    model_probability = item.model.probability if item.model is not None else None
    features = item.checks.features()
    score = calibration.combine(model_probability, features, item.quote)
    grounded = score >= cutoff
    # A judge without token probabilities names the passages it relies on: each is quoted.
    # Otherwise (and when it named none that exist) the closest sentences of all are.
    cited: list[Passage] = []
    if item.model is not None and item.model.method == "verdict":
        cited = [item.shown[n - 1] for n in item.model.cited]
    citations = [quote(item.claim, [p]) for p in cited] or [item.closest]
    return ClaimVerdict(
        claim=item.claim,
        score=round(score, 4),
        grounded=grounded,
        evidence=sorted({c.evidence for c in citations}) if grounded else [],
        rationale=_rationale(item, calibration),
        citations=citations,
        checks=item.checks.fired,
        model_score=round(model_probability, 4) if model_probability is not None else None,
        quote_score=round(item.quote, 4) if item.quote is not None else None,
        features={name: round(value, 4) for name, value in features.items()},
        answer=_answer(item),
    )


MODEL_PART = "judge P(supported)="
QUOTE_PART = "quoted sentence P(same)="
CHECKS_ONLY = "checks only ("
"""How a verdict's rationale opens the parts that state scores rather than findings (the
judge's two probabilities; a verdict from the checks alone); `failure_reason` leaves them out."""


def _rationale(item: _Judged, calibration: Calibration) -> str:
    assert item.checks is not None
    parts = []
    if item.model is not None:
        parts.append(f"{MODEL_PART}{item.model.probability:.2f} ({item.model.method})")
    if item.quote is not None:
        parts.append(f"{QUOTE_PART}{item.quote:.2f}")
    for finding in item.checks.findings:
        if finding.fired:
            parts.append(f"{finding.name}: {finding.detail}" if finding.detail else finding.name)
    return "; ".join(parts) or f"{CHECKS_ONLY}{calibration.family})"


JUDGE_DOUBT = "the judge did not find it stated in the passages"
"""Why a claim failed when no check names a problem, as the writers are told it."""


def failure_reason(rationale: str) -> str:
    """Why a claim was not grounded, for a prompt that asks a writer to fix it: each check's
    finding in a verdict's `rationale` (e.g. a number no passage holds), else `JUDGE_DOUBT`;
    never the judge's probabilities, whose last digits move with llama.cpp's batching (an answer
    reused against one asked again) and would steer the writer."""
    findings = [
        part
        for part in rationale.split("; ")
        if part and not part.startswith((MODEL_PART, QUOTE_PART, CHECKS_ONLY))
    ]
    return "; ".join(findings) or JUDGE_DOUBT


MIN_QUOTE_WORDS = 3
"""A sentence of fewer words is quoted with the rest of its line: a citation is a whole
sentence or a whole line, never a fragment of a few characters."""


def quote(claim: str, passages: Sequence[Passage]) -> Citation:
    """A citation of the one or two consecutive sentences (or lines) of `passages` closest to
    the claim, or of the lines a fact closest to it was read from (a signature, a commented
    line, a table row), cut from a passage's text (so found verbatim in the evidence), with its
    location. Closest: the most content words shared with the claim, less 0.2 for each word the
    claim does not have; a candidate sharing a word always beats one sharing none."""
    wanted = set(content_stems(claim))
    best: tuple[tuple[bool, float], Passage, int, int] | None = None
    for passage in passages:
        for start, end, reading in _quotable(passage):
            stems = set(content_stems(reading))
            shared = len(wanted & stems)
            key = (shared > 0, shared - 0.2 * len(stems - wanted))
            if best is None or key > best[0]:
                best = (key, passage, start, end)
    assert best is not None, "quote needs at least one passage"
    _, passage, start, end = best
    return Citation(
        evidence=passage.evidence,
        tool=passage.tool,
        source=passage.source,
        location=narrow(passage.document_location, passage.start + start, passage.start + end),
        quote=passage.text[start:end],
    )


def _quotable(passage: Passage) -> list[tuple[int, int, str]]:
    """(start, end, what it says) of each span a citation may quote: one or two consecutive
    sentences, each short one widened to its whole line, and each fact's lines (read as the
    fact)."""
    text = passage.text
    spans = [_whole(text, a, b) for a, b in sentence_spans(text)] or [(0, len(text))]
    spans = list(dict.fromkeys(spans))
    found = [(a, b, text[a:b]) for a, b in spans]
    found += [
        (spans[i][0], spans[i + 1][1], text[spans[i][0] : spans[i + 1][1]])
        for i in range(len(spans) - 1)
        if spans[i + 1][0] >= spans[i][1]
    ]
    found += [(f.start, f.end, f.text) for f in passage.facts if f.end > f.start]
    return found


def _whole(text: str, start: int, end: int) -> tuple[int, int]:
    """`[start, end)`, widened to its whole line when it holds fewer than `MIN_QUOTE_WORDS`."""
    if len(text[start:end].split()) >= MIN_QUOTE_WORDS:
        return start, end
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    while line_start < start and text[line_start].isspace():
        line_start += 1
    while line_end > end and text[line_end - 1].isspace():
        line_end -= 1
    return line_start, line_end
