"""Regeneration by quoting (`sleuth.research.requote`, the regenerate node's default): each claim
the judge did not ground is replaced by the evidence's sentence closest to it, with the writer's
`[n]`, or dropped when that sentence is about something else; the writer is asked only when the
repair would leave nothing, break the output schema, or a reviewer asked for a change."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from sleuth import create_research_workflow
from sleuth.agent.state import EvidenceItem
from sleuth.models.scripted import ModelCall, ScriptedModel, text
from sleuth.research import Citation, Node, ResearchState, node_of_request, regenerate_node
from sleuth.research.requote import requoted
from sleuth.research.state import ClaimRecord, CoveragePassage, SubQuestionCoverage
from sleuth.runtime.errors import InvalidSettingError

RETURN_TRUE = "If the return value was true, the exception is suppressed."
RETURN_FALSE = "If the return value was false, the exception is reraised."
PASSAGE = f"{RETURN_TRUE} {RETURN_FALSE}"
OTHER = "The with statement wraps a block with methods of a context manager."
WRONG = "If __exit__ returns False, the exception is propagated to the next with statement [2]."
ADDED = "The try/finally statement is more flexible and can be used in any context [1]."
TRUE_CLAIM = "A with statement wraps a block with a context manager's methods [1]."


def evidence() -> list[EvidenceItem]:
    rows = [
        {"text": OTHER, "source": "docs/with"},
        {"text": PASSAGE, "source": "docs/exit"},
    ]
    return [EvidenceItem(index=1, tool="search", output=json.dumps(rows))]


def claim(text_: str, grounded: bool, quote: str, source: str) -> ClaimRecord:
    cited = Citation(evidence=1, tool="search", source=source, quote=quote)
    return ClaimRecord(
        claim=text_, score=0.9 if grounded else 0.1, grounded=grounded, citations=[cited]
    )


def state(summary: str, claims: list[ClaimRecord], **extra: object) -> ResearchState:
    return ResearchState.model_validate(
        {
            "prompt": "What does __exit__ do with an exception?",
            "evidence": evidence(),
            "summary": summary,
            "claims": claims,
            **extra,
        }
    )


TRUE = claim(TRUE_CLAIM, True, OTHER, "docs/with")
WRONG_CLAIM = claim(WRONG, False, RETURN_FALSE, "docs/exit")
ADDED_CLAIM = claim(ADDED, False, OTHER, "docs/with")


def test_a_doubted_claim_becomes_its_closest_quote_with_the_writers_number() -> None:
    repaired = requoted(state(f"{TRUE_CLAIM} {WRONG}", [TRUE, WRONG_CLAIM]), None)
    assert repaired is not None
    # docs/with is passage [1] of the writer's prompt, docs/exit passage [2].
    assert repaired["summary"] == f"{TRUE_CLAIM} {RETURN_FALSE[:-1]} [2]."
    assert repaired["removed_claims"] == [WRONG] and repaired["structured_output"] is None


def test_a_claim_its_closest_quote_does_not_state_is_dropped() -> None:
    repaired = requoted(state(f"{TRUE_CLAIM}\n{ADDED}", [TRUE, ADDED_CLAIM]), None)
    assert repaired is not None
    assert repaired["summary"] == TRUE_CLAIM and repaired["removed_claims"] == [ADDED]


def test_a_doubted_claim_that_is_its_own_quote_is_dropped() -> None:
    verbatim = claim(f"{RETURN_FALSE[:-1]} [2].", False, RETURN_FALSE, "docs/exit")
    repaired = requoted(state(f"{TRUE_CLAIM} {RETURN_FALSE[:-1]} [2].", [TRUE, verbatim]), None)
    assert repaired is not None and repaired["summary"] == TRUE_CLAIM
    # Written after the sentence's end, its marks go with it.
    after_end = claim(RETURN_FALSE, False, RETURN_FALSE, "docs/exit")
    repaired = requoted(state(f"{TRUE_CLAIM} {RETURN_FALSE} [2]", [TRUE, after_end]), None)
    assert repaired is not None and repaired["summary"] == TRUE_CLAIM


class Report(BaseModel):
    summary: str
    key_findings: list[str]


class StrictReport(BaseModel):
    summary: str
    key_findings: list[str] = Field(min_length=1)


def test_a_structured_report_is_repaired_field_by_field_each_quote_once() -> None:
    structured = {
        "summary": f"{TRUE_CLAIM} {WRONG}",
        # The shorter repetition of the doubted sentence goes with it; the quote is written once.
        "key_findings": ["If __exit__ returns False, the exception is propagated", ADDED],
    }
    before = state("", [TRUE, WRONG_CLAIM, ADDED_CLAIM], structured_output=structured)
    repaired = requoted(before, Report)
    assert repaired is not None
    assert repaired["structured_output"] == {
        "summary": f"{TRUE_CLAIM} {RETURN_FALSE[:-1]} [2].",
        "key_findings": [],
    }
    assert repaired["summary"] == f"{TRUE_CLAIM} {RETURN_FALSE[:-1]} [2]."
    # A schema the repaired report no longer fits: no repair (the writer rewrites instead).
    assert requoted(before, StrictReport) is None


def test_nothing_to_repair_or_nothing_left_is_no_repair() -> None:
    assert requoted(state(TRUE_CLAIM, [TRUE]), None) is None
    assert requoted(state(ADDED, [ADDED_CLAIM]), None) is None
    # A doubted claim the report no longer holds (nothing found to replace) is no repair either.
    assert requoted(state(TRUE_CLAIM, [TRUE, WRONG_CLAIM]), None) is None


SUPPRESS_PART = "When is the exception suppressed on return?"


def unanswered_part(**extra: object) -> ResearchState:
    """A state whose second part is covered by the docs/exit passage and left unanswered."""
    covering = CoveragePassage(evidence=1, source="docs/exit", text=PASSAGE)
    coverage = [
        SubQuestionCoverage(question="What does a with statement wrap?", covered=True),
        SubQuestionCoverage(
            question=SUPPRESS_PART, covered=True, passages=[covering], answered=False
        ),
    ]
    extra = {"summary": TRUE_CLAIM, "claims": [TRUE], **extra}
    return state(
        extra.pop("summary"),  # type: ignore[arg-type]
        extra.pop("claims"),  # type: ignore[arg-type]
        sub_questions=[entry.question for entry in coverage],
        coverage=coverage,
        **extra,
    )


def test_an_unanswered_part_gets_the_sentence_of_its_passage_holding_most_of_its_words() -> None:
    repaired = requoted(unanswered_part(), None)
    assert repaired is not None
    # "the exception is suppressed" and "return" are both in the first sentence of the passage.
    assert repaired["summary"] == f"{TRUE_CLAIM}\n\n{RETURN_TRUE[:-1]} [2]."
    assert repaired["removed_claims"] == []
    # Structured: the quote joins the findings (the first list of strings).
    structured = {"summary": TRUE_CLAIM, "key_findings": [TRUE_CLAIM]}
    with_findings = requoted(unanswered_part(structured_output=structured), Report)
    assert with_findings is not None and with_findings["structured_output"]["key_findings"] == [
        TRUE_CLAIM,
        f"{RETURN_TRUE[:-1]} [2].",
    ]
    # A list of names (sources) is no list of findings: with no findings, the summary gets it.
    named = {"sources": ["docs/with"], "summary": TRUE_CLAIM, "key_findings": []}
    in_summary = requoted(unanswered_part(structured_output=named), None)
    assert in_summary is not None and in_summary["structured_output"] == {
        "sources": ["docs/with"],
        "summary": f"{TRUE_CLAIM} {RETURN_TRUE[:-1]} [2].",
        "key_findings": [],
    }


def test_no_quote_for_a_part_already_stated_or_answered_by_a_repair() -> None:
    stated = claim(RETURN_TRUE, True, RETURN_TRUE, "docs/exit")
    assert (
        requoted(
            unanswered_part(summary=f"{TRUE_CLAIM} {RETURN_TRUE}", claims=[TRUE, stated]), None
        )
        is None
    )
    # The quote replacing a doubted claim answers the part: it is not quoted a second time.
    doubted = claim(
        "If __exit__ returns a true value, the exception is suppressed forever [2].",
        False,
        RETURN_TRUE,
        "docs/exit",
    )
    repaired = requoted(
        unanswered_part(summary=f"{TRUE_CLAIM} {doubted.claim}", claims=[TRUE, doubted]), None
    )
    assert repaired is not None
    assert repaired["summary"] == f"{TRUE_CLAIM} {RETURN_TRUE[:-1]} [2]."


class Writer:
    """Writes the report the test gives; records which nodes asked."""

    def __init__(self, report: str) -> None:
        self.report = report
        self.asked: list[Node] = []

    def __call__(self, call: ModelCall) -> object:
        self.asked.append(node_of_request(call.messages))
        return text(self.report)


async def test_the_node_quotes_without_a_model_call_and_counts_a_regeneration() -> None:
    writer = Writer("unused")
    spec = create_research_workflow(model=ScriptedModel(responder=writer))
    after = await regenerate_node(spec, state(f"{TRUE_CLAIM} {WRONG}", [TRUE, WRONG_CLAIM]))
    assert writer.asked == [] and after.regeneration_count == 1
    assert after.summary == f"{TRUE_CLAIM} {RETURN_FALSE[:-1]} [2]." and after.removed_claims == [
        WRONG
    ]


@pytest.mark.parametrize(
    ("options", "before"),
    [
        ({"regenerate": "rewrite"}, state(f"{TRUE_CLAIM} {WRONG}", [TRUE, WRONG_CLAIM])),
        ({}, state(ADDED, [ADDED_CLAIM])),  # quoting would leave no claim
        ({}, state(f"{TRUE_CLAIM} {WRONG}", [TRUE, WRONG_CLAIM], review_remark="Shorter.")),
    ],
    ids=["configured", "nothing-left", "reviewer-remark"],
)
async def test_the_writer_rewrites_when_configured_when_nothing_is_left_or_a_reviewer_asked(
    options: dict[str, str], before: ResearchState
) -> None:
    writer = Writer(TRUE_CLAIM)
    spec = create_research_workflow(model=ScriptedModel(responder=writer), **options)  # type: ignore[arg-type]
    after = await regenerate_node(spec, before)
    assert writer.asked == [Node.REGENERATE]
    assert after.summary == TRUE_CLAIM and after.removed_claims == []


def test_an_unknown_regenerate_mode_says_which_there_are() -> None:
    with pytest.raises(InvalidSettingError, match="'requote', 'rewrite'"):
        create_research_workflow(regenerate="redo")  # type: ignore[arg-type]
