"""Grounding: claims, the lexical judge, lenient parsing of an LLM judge, and per-turn grounding."""

from __future__ import annotations

from collections.abc import Callable

from sleuth.agent import Agent, GroundingSettings
from sleuth.agent.state import EvidenceItem
from sleuth.grounding import (
    judge_claims,
    lexical_verdict,
    number_evidence,
    parse_judge_output,
    split_claims,
)
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, structured, text, tool_call
from sleuth.tools import tool

MARKET = "Analysts report the CRM market was worth 65 billion dollars in 2023."
LEADER = "Salesforce holds the largest share of the CRM market, about 21 percent."


def trail(*outputs: str, failed: str | None = None) -> list[EvidenceItem]:
    items = [
        EvidenceItem(index=n, tool="search", arguments={"query": "crm"}, output=output)
        for n, output in enumerate(outputs, start=1)
    ]
    if failed is not None:
        items.append(
            EvidenceItem(
                index=len(items) + 1, tool="search", output=failed, success=False, error="boom"
            )
        )
    return items


def test_split_claims_handles_prose_bullets_and_skips_headings_and_fragments() -> None:
    answer = (
        "# Findings\n"
        "- The CRM market was worth 65 billion dollars in 2023.\n"
        "- Salesforce leads. It holds about a fifth of the market.\n"
        "2) HubSpot grows quickly among small firms.\n"
        "- related_questions_and_answers\n"
        "- https://example.org/crm-market-size-2023-report\n"
        "Done."
    )
    assert split_claims(answer) == [
        "The CRM market was worth 65 billion dollars in 2023.",
        "It holds about a fifth of the market.",
        "HubSpot grows quickly among small firms.",
    ]


def test_lexical_judge_needs_the_numbers_to_match_exactly() -> None:
    evidence = trail("unrelated page about weather", MARKET)
    supported = lexical_verdict("The CRM market was worth 65 billion dollars in 2023.", evidence)
    assert supported.grounded and supported.evidence == [2] and supported.score == 1.0
    wrong_number = lexical_verdict("The CRM market was worth 80 billion dollars in 2023.", evidence)
    assert not wrong_number.grounded and wrong_number.evidence == []


def test_lexical_judge_ignores_citation_markers() -> None:
    """Summaries cite evidence as `[12]`; that number is a reference, not part of the claim."""
    items = trail(*[f"filler result {n}" for n in range(1, 12)], MARKET)
    for cited in ("[12]", "[1, 12]", "[11][12]"):
        verdict = lexical_verdict(MARKET.rstrip(".") + f" {cited}.", items)
        assert verdict.grounded and verdict.evidence == [12], cited


def test_failed_tool_calls_are_not_evidence() -> None:
    evidence = trail(failed=MARKET)
    assert not lexical_verdict(
        "The CRM market was worth 65 billion dollars in 2023.", evidence
    ).grounded
    assert "ERROR: boom" in number_evidence(evidence)


def test_number_evidence_numbers_and_truncates_items() -> None:
    rendered = number_evidence(trail("a" * 50, "short"), max_chars_per_item=10).splitlines()
    assert rendered[0] == '[1] search({"query": "crm"}) -> ' + "a" * 10 + " …"
    assert rendered[1] == '[2] search({"query": "crm"}) -> short'


def test_judge_output_is_parsed_leniently() -> None:
    fenced = (
        'Sure!\n```json\n{"verdicts": [{"claim": 2, "supported": "yes", "evidence": ["1"]}]}\n```'
    )
    assert parse_judge_output(fenced, 2) == {2: {"supported": True, "score": 1.0, "evidence": [1]}}
    bare_list = '[{"supported": false, "score": 0.2}, {"score": 0.9, "evidence": 3}]'
    assert parse_judge_output(bare_list, 2) == {
        1: {"supported": False, "score": 0.2, "evidence": []},
        2: {"supported": True, "score": 0.9, "evidence": [3]},
    }
    out_of_range = '{"verdicts": [{"claim": 7, "supported": true}, {"claim": 1}]}'
    assert parse_judge_output(out_of_range, 2) == {}
    assert parse_judge_output("I cannot judge this.", 2) == {}


async def test_judge_claims_uses_the_llm_judge_and_falls_back_to_lexical_per_claim() -> None:
    evidence = trail(MARKET, LEADER)
    claims = [
        "The CRM market was worth 65 billion dollars in 2023.",
        "Salesforce holds about 21 percent of the CRM market.",
        "Oracle doubled its CRM revenue last quarter.",
    ]
    judge = ScriptedModel(
        [
            structured(
                {
                    "verdicts": [
                        {"claim": 1, "supported": True, "score": 0.95, "evidence": [1, 9]},
                        {"claim": 3, "supported": False, "score": 0.1, "evidence": []},
                    ]
                }
            )
        ]
    )
    report = await judge_claims(claims, evidence, judge)
    judge.assert_complete()
    assert report.method == "mixed"
    first, second, third = report.claims
    assert (first.grounded, first.evidence, first.rationale) == (True, [1], "llm judge")
    assert second.rationale == "lexical overlap" and second.grounded
    assert not third.grounded
    assert report.score == round(2 / 3, 4)
    assert [c.claim for c in report.ungrounded] == [claims[2]]
    request = judge.calls[0]
    assert request.output_schema is not None and request.output_schema.name == "grounding_verdicts"
    assert "[2] search" in request.last_user_text and "3. Oracle" in request.last_user_text


async def test_judge_claims_without_a_judge_or_claims() -> None:
    lexical = await judge_claims(["The CRM market was worth 65 billion dollars."], trail(MARKET))
    assert lexical.method == "lexical" and lexical.score == 1.0
    empty = await judge_claims([], trail(MARKET), ScriptedModel())
    assert (empty.method, empty.score, empty.claims) == ("none", 0.0, [])


@tool
def search(query: str) -> str:
    """Search market reports."""
    return MARKET


def judge_rejecting(marker: str) -> Callable[[ModelCall], ModelResponse]:
    """A claim-level judge (one claim per request) that supports every claim except the one
    containing `marker`, answering with a generated Yes or No."""

    def respond(call: ModelCall) -> ModelResponse:
        claim = call.last_user_text.split("\nClaim: ", 1)[1].split("\n", 1)[0]
        return text("No" if marker in claim else "Yes")

    return respond


def test_a_poorly_grounded_answer_is_sent_back_once_then_unsupported_claims_are_dropped() -> None:
    answer = (
        "The CRM market was worth 65 billion dollars in 2023.\n"
        "Oracle doubled its CRM revenue last quarter."
    )
    model = ScriptedModel([tool_call("search", query="crm"), text(answer), text(answer)])
    judge = ScriptedModel(responder=judge_rejecting("Oracle"))
    agent = Agent(
        model,
        tools=[search],
        grounding=GroundingSettings(judge=judge, threshold=0.65, max_research_rounds=1),
    )
    result = agent.run_sync("Size the CRM market")
    model.assert_complete()
    # One question per claim, for each of the two answers.
    assert len(judge.calls) == 4
    assert all(len(call.last_user_text.split("\nClaim: ")) == 2 for call in judge.calls)
    assert "Only 50%" in model.calls[2].last_user_text
    assert "Oracle doubled" in model.calls[2].last_user_text
    assert result.message == "The CRM market was worth 65 billion dollars in 2023."
    assert result.grounding is not None and result.grounding.score == 0.5
    assert result.state.grounding_rounds == 1


def test_research_asked_for_after_a_schema_repair_gets_the_tools_back() -> None:
    from pydantic import BaseModel

    class Finding(BaseModel):
        answer: str

    answer = (
        '{"answer": "The CRM market was worth 65 billion dollars in 2023. '
        'Oracle doubled its CRM revenue last quarter."}'
    )
    model = ScriptedModel(
        [tool_call("search", query="crm"), text("not JSON yet"), text(answer), text(answer)]
    )
    judge = ScriptedModel(responder=judge_rejecting("Oracle"))
    agent = Agent(
        model,
        tools=[search],
        output_schema=Finding,
        grounding=GroundingSettings(judge=judge, threshold=0.65, max_research_rounds=1),
    )
    agent.run_sync("Size the CRM market")
    model.assert_complete()
    assert "does not match the required schema" in model.calls[2].last_user_text
    assert model.calls[2].output_schema is not None  # the repair turn asks for the schema
    assert "Research them with your tools" in model.calls[3].last_user_text
    assert model.calls[3].tool_names == ["search"]  # and research is possible again


def test_a_well_grounded_answer_is_accepted_as_is() -> None:
    answer = "The CRM market was worth 65 billion dollars in 2023."
    model = ScriptedModel([tool_call("search", query="crm"), text(answer)])
    judge = ScriptedModel(responder=judge_rejecting("Oracle"))
    result = Agent(model, tools=[search], grounding=GroundingSettings(judge=judge)).run_sync("q")
    assert result.message == answer
    assert result.grounding is not None and result.grounding.score == 1.0
    assert result.state.grounding_rounds == 0
