"""The former batched judge: every claim in one request against the numbered evidence trail.

The research graph and agents use `ground_claims` (the claim-level judge); this stays as the
baseline the grounding benchmark compares that judge with.

An LLM judge is used when one is given; its output is parsed leniently (JSON object, bare list,
code fences, stray prose). Claims the judge left unanswered, or every claim when there is no
judge, fall back to a lexical judge: the share of a claim's content words (numbers exactly) found
in its best-matching evidence item.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from sleuth.agent.state import EvidenceItem
from sleuth.grounding.claims import CITATION, content_words
from sleuth.grounding.verdicts import ClaimVerdict, GroundingReport
from sleuth.models.base import Message, Model, OutputSchema


def number_evidence(evidence: list[EvidenceItem], *, max_chars_per_item: int = 1500) -> str:
    """Render the evidence trail as `[n] tool(args) -> output` lines for a judge or summariser."""
    lines = []
    for number, item in enumerate(evidence, start=1):
        arguments = json.dumps(item.arguments, ensure_ascii=False, default=str)
        body = item.output if item.success else f"ERROR: {item.error or item.output}"
        if len(body) > max_chars_per_item:
            body = body[:max_chars_per_item] + " …"
        lines.append(f"[{number}] {item.tool}({arguments}) -> {body}")
    return "\n".join(lines)


def lexical_verdict(
    claim: str, evidence: list[EvidenceItem], *, threshold: float = 0.6
) -> ClaimVerdict:
    """Judge one claim by word overlap with its best-matching evidence item.

    Citation markers (`[3]`, `[1, 12]`) are not part of what the claim says: a summary cites
    evidence numbers in brackets, and a `[12]` must not count as a number the evidence lacks.
    """
    words = content_words(CITATION.sub(" ", claim))
    if not words:
        return ClaimVerdict(claim=claim, score=0.0, grounded=False, rationale="no content words")
    numbers = {w for w in words if any(ch.isdigit() for ch in w)}
    best_score, best_index = 0.0, 0
    for number, item in enumerate(evidence, start=1):
        if not item.success:
            continue
        item_words = content_words(item.output) | content_words(
            json.dumps(item.arguments, default=str)
        )
        if numbers and not numbers <= item_words:
            overlap = len(words & item_words) / len(words) * 0.5
        else:
            overlap = len(words & item_words) / len(words)
        if overlap > best_score:
            best_score, best_index = overlap, number
    grounded = best_score >= threshold
    return ClaimVerdict(
        claim=claim,
        score=round(best_score, 4),
        grounded=grounded,
        evidence=[best_index] if best_index and grounded else [],
        rationale="lexical overlap",
    )


JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "claim": {"type": "integer"},
                    "supported": {"type": "boolean"},
                    "score": {"type": "number"},
                    "evidence": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["claim", "supported", "score", "evidence"],
            },
        }
    },
    "required": ["verdicts"],
}

JUDGE_INSTRUCTIONS = (
    "You are a strict fact-checker. For each numbered claim, decide whether the numbered evidence "
    "directly supports it. A claim is supported only if the evidence states it; plausible is not enough. "
    'Reply with JSON only: {"verdicts": [{"claim": <claim number>, "supported": true|false, '
    '"score": <0.0-1.0>, "evidence": [<evidence numbers>]}]}'
)


def parse_judge_output(text: str, claim_count: int) -> dict[int, dict[str, Any]]:  # noqa: C901 (one case per output shape a judge writes)
    """Pull per-claim verdicts out of whatever the judge wrote; claims it skipped are absent."""
    candidates: list[Any] = []
    stripped = re.sub(r"```(?:json)?", "", text).strip()
    for chunk in (stripped, *re.findall(r"\{.*\}|\[.*\]", stripped, re.DOTALL)):
        try:
            candidates.append(json.loads(chunk))
            break
        except (json.JSONDecodeError, ValueError):
            continue
    if not candidates:
        for match in re.finditer(r"\{[^{}]*\}", stripped):
            try:
                candidates.append(json.loads(match.group(0)))
            except (json.JSONDecodeError, ValueError):
                continue
    entries: list[Any] = []
    for candidate in candidates:
        if isinstance(candidate, dict) and isinstance(candidate.get("verdicts"), list):
            entries.extend(candidate["verdicts"])
        elif isinstance(candidate, list):
            entries.extend(candidate)
        elif isinstance(candidate, dict):
            entries.append(candidate)
    verdicts: dict[int, dict[str, Any]] = {}
    for position, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            continue
        number = _as_int(entry.get("claim", position))
        if number is None or not 1 <= number <= claim_count:
            continue
        supported = entry.get("supported", entry.get("grounded"))
        score = _as_float(entry.get("score"))
        if supported is None and score is None:
            continue
        if isinstance(supported, str):
            supported = supported.strip().lower() in {"true", "yes", "supported", "1"}
        if score is None:
            score = 1.0 if supported else 0.0
        score = min(1.0, max(0.0, score))
        if supported is None:
            supported = score >= 0.5
        cited = entry.get("evidence") or []
        verdicts[number] = {
            "supported": bool(supported),
            "score": score,
            "evidence": [
                i
                for i in (_as_int(c) for c in (cited if isinstance(cited, list) else [cited]))
                if i
            ],
        }
    return verdicts


async def judge_claims(
    claims: list[str],
    evidence: list[EvidenceItem],
    judge: Model | None = None,
    *,
    lexical_threshold: float = 0.6,
    max_output_tokens: int | None = 1024,
) -> GroundingReport:
    """Score `claims` against `evidence` with the LLM `judge`, falling back to lexical judging."""
    if not claims:
        return GroundingReport(score=0.0, claims=[], method="none")
    parsed: dict[int, dict[str, Any]] = {}
    if judge is not None and evidence:
        prompt = (
            "Evidence:\n"
            + number_evidence(evidence)
            + "\n\nClaims:\n"
            + "\n".join(f"{n}. {c}" for n, c in enumerate(claims, start=1))
        )
        response = await judge.request(
            [
                Message(role="system", content=JUDGE_INSTRUCTIONS),
                Message(role="user", content=prompt),
            ],
            output_schema=OutputSchema(name="grounding_verdicts", json_schema=JUDGE_SCHEMA),
            max_output_tokens=max_output_tokens,
        )
        raw = json.dumps(response.structured) if response.structured is not None else response.text
        parsed = parse_judge_output(raw, len(claims))
    verdicts: list[ClaimVerdict] = []
    for number, claim in enumerate(claims, start=1):
        entry = parsed.get(number)
        if entry is None:
            verdicts.append(lexical_verdict(claim, evidence, threshold=lexical_threshold))
            continue
        cited = [i for i in entry["evidence"] if 1 <= i <= len(evidence)]
        verdicts.append(
            ClaimVerdict(
                claim=claim,
                score=entry["score"],
                grounded=entry["supported"],
                evidence=cited,
                rationale="llm judge",
            )
        )
    method: Literal["llm", "lexical", "mixed", "none"]
    if not parsed:
        method = "lexical"
    elif len(parsed) == len(claims):
        method = "llm"
    else:
        method = "mixed"
    score = sum(1 for v in verdicts if v.grounded) / len(verdicts)
    return GroundingReport(score=round(score, 4), claims=verdicts, method=method)


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
