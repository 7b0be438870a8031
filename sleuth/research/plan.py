"""Plan before searching: the question's sub-questions, and which of them the evidence answers.

The plan node asks the model for the parts of the question (a JSON array of sub-questions; the
question itself when the answer has none). The execute node then researches them one per step,
naming the sub-question in its prompt, and after every step `coverage` matches each sub-question
against the passages of the evidence trail (BM25 over `sleuth.grounding.PassageIndex`). A
sub-question no passage answers is uncovered: the router replans for it as for an ungrounded claim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sleuth._util.jsontext import json_from_text
from sleuth.agent.state import EvidenceItem, LoopState
from sleuth.agent.termination import CustomCondition
from sleuth.grounding import content_words
from sleuth.grounding.claims import stem
from sleuth.grounding.passages import (
    PassageIndex,
    distinct_positions,
    split_passages,
    text_key,
)
from sleuth.models.base import Message, Model
from sleuth.research.report import normalise
from sleuth.research.state import CoveragePassage, ResearchState, SubQuestionCoverage

if TYPE_CHECKING:
    from sleuth.research.spec import ResearchSpec

PLAN_PROMPT = (
    "You are a research planner. Split the question into the separate parts a complete answer "
    "must cover: one short, self-contained sub-question per part, in the order the question asks "
    "them. A question with one part is one sub-question. Reply with a JSON array of strings only, "
    'for example ["What does X receive?", "How does X compare with Y?"].'
)
MAX_SUB_QUESTIONS = 8
"""The most sub-questions a spec may ask for."""
COVERAGE_SHARE = 0.5
"""A passage answers a sub-question when it contains at least this share of the sub-question's
content words (rounded up, at least one), compared by their crude stems (`stem`: `receives`,
`received` and `receive` match, and so do `grow` and `grew`)."""
COVERED = "covered"
"""An execute agent's stop reason when the results of its tool calls cover its sub-question."""
COVERAGE_PASSAGES = 3
"""Answering passages kept per sub-question."""


def plan_request(state: ResearchState, limit: int) -> list[Message]:
    """The plan node's request: the question and the most sub-questions to write; after a
    reviewer's `revise`, the current sub-questions and the reviewer's remark too."""
    content = f"Question:\n{state.prompt}\n\nWrite at most {limit} sub-questions."
    if state.review_remark:
        current = "\n".join(f"- {question}" for question in state.sub_questions)
        content += (
            f"\n\nCurrent sub-questions:\n{current}\n\nA reviewer read them and asked for a "
            f"change:\n{state.review_remark}"
        )
    return [Message(role="system", content=PLAN_PROMPT), Message(role="user", content=content)]


def parse_sub_questions(text: str, question: str, limit: int) -> list[str]:
    """The sub-questions in the planner's answer: the first JSON array of strings in `text` (or
    the first such list inside a JSON object), duplicates dropped, at most `limit`. Falls back to
    `[question]` when the answer holds none."""
    data: Any = json_from_text(text)
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), None)
    found: list[str] = []
    seen: set[str] = set()
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict):
            item = next((v for v in item.values() if isinstance(v, str)), None)
        if not isinstance(item, str) or not (key := normalise(item)) or key in seen:
            continue
        seen.add(key)
        found.append(" ".join(item.split()))
    return found[:limit] or [question]


async def write_sub_questions(spec: ResearchSpec, state: ResearchState, model: Model) -> list[str]:
    """The question's sub-questions, asked of `model` (at most `spec.max_sub_questions`). With
    `max_sub_questions=1` the question is its own single sub-question and no model is asked."""
    limit = spec.max_sub_questions
    if limit == 1:
        return [state.prompt]
    response = await model.request(
        plan_request(state, limit), max_output_tokens=spec.max_output_tokens
    )
    return parse_sub_questions(response.text, state.prompt, limit)


def _stems(text: str) -> set[str]:
    return {stem(word) for word in content_words(text)}


def coverage(
    sub_questions: Sequence[str],
    evidence: Sequence[EvidenceItem],
    previous: Sequence[SubQuestionCoverage] = (),
) -> list[SubQuestionCoverage]:
    """Which passages of `evidence` answer each sub-question (see `COVERAGE_SHARE`), best BM25
    match first. `previous` carries each sub-question's `researched` count over."""
    index = PassageIndex(split_passages(evidence))
    passage_stems = [_stems(p.text) for p in index.passages]
    result = []
    for position, question in enumerate(sub_questions):
        stems = _stems(question)
        needed = max(1, math.ceil(COVERAGE_SHARE * len(stems)))
        scores = index.bm25(" ".join(content_words(question)))
        answering = [
            i
            for i in range(len(index.passages))
            if stems and len(stems & passage_stems[i]) >= needed and scores[i] > 0
        ]
        ranked = sorted(answering, key=lambda i: -scores[i])
        # Each text once (its best-ranked occurrence): two searches returning the same chunk, or
        # one text under two pages, list it once.
        distinct = distinct_positions([index.passages[i] for i in ranked])
        best = [ranked[j] for j in distinct][:COVERAGE_PASSAGES]
        researched = previous[position].researched if position < len(previous) else 0
        result.append(
            SubQuestionCoverage(
                question=question,
                covered=bool(best),
                evidence=sorted({index.passages[i].evidence for i in answering}),
                passages=[
                    CoveragePassage(
                        evidence=index.passages[i].evidence,
                        source=index.passages[i].source,
                        location=index.passages[i].location,
                        text=index.passages[i].text,
                    )
                    for i in best
                ],
                researched=researched,
            )
        )
    return result


def step_done(state: ResearchState, position: int | None) -> CustomCondition:
    """The exit condition of the execute step that researches sub-question `position`: it holds
    once the evidence the step gathered (its own tool results, not the run's earlier ones)
    covers the sub-question, as `coverage` decides. With no sub-question (`None`: the whole
    question, after a replan whose parts were all covered) it holds once the step's results
    hold a passage the run's evidence does not: something new on the replan's focus. The stop
    reason is `COVERED`."""
    if position is not None:
        question = state.sub_questions[position]

        def check(loop: LoopState) -> bool:
            return bool(loop.evidence) and coverage([question], loop.evidence)[0].covered

        return CustomCondition(check, reason=COVERED)
    known = {text_key(p.text) for p in split_passages(state.evidence)}

    def found_new(loop: LoopState) -> bool:
        return any(text_key(p.text) not in known for p in split_passages(loop.evidence))

    return CustomCondition(found_new, reason=COVERED)


def uncovered(state: ResearchState) -> list[int]:
    """0-based indices of the sub-questions no evidence passage answers yet."""
    return [i for i, entry in enumerate(state.coverage) if not entry.covered]


def answers(claim: str, question: str) -> bool:
    """Whether `claim` states something on `question`: it holds the share of the question's
    content words a passage needs to cover it (`COVERAGE_SHARE`, same crude stems)."""
    stems = _stems(question)
    needed = max(1, math.ceil(COVERAGE_SHARE * len(stems)))
    return bool(stems) and len(stems & _stems(claim)) >= needed


def with_answered(
    coverage: Sequence[SubQuestionCoverage], grounded_claims: Sequence[str]
) -> list[SubQuestionCoverage]:
    """`coverage` with `answered` set: whether one of the report's grounded claims answers the
    sub-question (`answers`)."""
    return [
        entry.model_copy(
            update={"answered": any(answers(claim, entry.question) for claim in grounded_claims)}
        )
        for entry in coverage
    ]


def unanswered(state: ResearchState) -> list[int]:
    """0-based indices of the covered sub-questions the last judged report left unanswered."""
    return [
        i for i, entry in enumerate(state.coverage) if entry.covered and entry.answered is False
    ]


def sub_question_prompt(state: ResearchState, position: int) -> str:
    """The execute agent's prompt for one sub-question: the part alone (the planner writes each
    self-contained), then the replan's focus after a replan.

    The whole question is left out on purpose: given it (or a list of the searches already
    made), the local 1.5B searched with the whole question's words, or repeated an earlier
    query, for every part, so the parts after the first found nothing new."""
    total = len(state.sub_questions)
    parts = [
        f"Research this part of the question (part {position + 1} of {total}):\n"
        f"{state.sub_questions[position]}",
        "Call a tool now to find evidence for this part, then answer this part from the tool "
        "results.",
    ]
    if state.focused_prompt:
        parts.append(
            f"Follow-up research (earlier findings lacked evidence):\n{state.focused_prompt}"
        )
    return "\n\n".join(parts)
