"""The typed research report: item access, each finding once, sources in citation order, short
excerpts, and the report a person reads."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import BaseModel, Field

from sleuth import create_research_workflow
from sleuth.activities.research_models import ResearchOutcome
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import (
    ClaimRecord,
    Node,
    ResearchState,
    build_final_state,
    dedupe_findings,
    node_of_request,
)
from sleuth.workers.cli_research import format_report
from tests.helpers.research_scripts import FACT, ResearchScript, lookup, scripted_model, tool_rounds


class Report(BaseModel):
    summary: str
    key_findings: list[str]
    sources: list[str] = Field(default_factory=list)


def test_dedupe_normalises_case_space_and_punctuation() -> None:
    assert dedupe_findings(
        ["The market grew 12%.", "the  market grew 12 %", "THE MARKET, GREW: 12% [3]"]
    ) == ["The market grew 12%."]


def test_a_finding_contained_in_another_is_one_finding_worded_the_longer_way() -> None:
    findings = [
        "Revenue rose in 2024.",
        "Costs fell.",
        "Revenue rose in 2024 according to the annual report.",
        "costs fell",
    ]
    assert dedupe_findings(findings) == [
        "Revenue rose in 2024 according to the annual report.",
        "Costs fell.",
    ]
    # One finding that covers two earlier ones replaces both, where the first stood.
    assert dedupe_findings(["A grew.", "B shrank.", "Then A grew. B shrank.", "C held."]) == [
        "Then A grew. B shrank.",
        "C held.",
    ]


def test_containment_is_of_whole_words() -> None:
    assert dedupe_findings(["Sales grew 12 percent.", "Sales grew 120 percent."]) == [
        "Sales grew 12 percent.",
        "Sales grew 120 percent.",
    ]
    assert dedupe_findings(["cat", "concatenate files"]) == ["cat", "concatenate files"]


def finished_state(claims: list[ClaimRecord]) -> ResearchState:
    return ResearchState(prompt="q?", claims=claims, end_reason="grounded")


def test_report_reads_by_attribute_and_by_key() -> None:
    report = build_final_state(finished_state([]))
    assert report["end_reason"] == report.end_reason == "grounded"
    assert report["usage"]["total_tokens"] == report.usage.total_tokens == 0
    with pytest.raises(KeyError, match="ResearchReport has no field 'grounding'; fields: prompt"):
        report["grounding"]
    with pytest.raises(ValueError, match="has not finished"):
        build_final_state(ResearchState(prompt="q?"))


def multi_source_model(summary: str, cited_sources: dict[str, list[str]]) -> ScriptedModel:
    """Two lookups, a summary, and a judge that answers Yes for every claim, naming the passages
    of its question that come from `cited_sources[claim]`."""

    def respond(call: ModelCall) -> ModelResponse:
        node = node_of_request(call.messages)
        if node == Node.EXECUTE:
            done = tool_rounds(call)
            if done < 2:
                return tool_call("lookup_source", source=f"report-{done + 1}.pdf")
            return text("done")
        if node == Node.GROUNDING_EVAL:
            question = call.messages[-1].content
            claim = question.split("Claim: ", 1)[1].split("\n", 1)[0]
            numbers = [
                number
                for number, source in re.findall(r"^\[(\d+)\] \((\S+)\)", question, re.MULTILINE)
                if source in cited_sources[claim]
            ]
            return text(f"Yes [{', '.join(numbers)}]")
        return text(summary)

    return ScriptedModel(responder=respond)


def lookup_source(source: str) -> str:
    """Read one analyst report."""
    return json.dumps({"text": f"{FACT} (from {source})", "source": source})


async def test_sources_are_unique_and_in_order_of_first_citation() -> None:
    claims = [
        "Gartner says the CRM market grew 12 percent.",
        "The CRM market grew 12 percent in 2024.",
        "According to Gartner, the CRM market grew 12 percent.",
    ]
    cited = {
        claims[0]: ["report-2.pdf"],
        claims[1]: ["report-1.pdf", "report-2.pdf"],
        claims[2]: ["report-2.pdf"],
    }
    spec = create_research_workflow(
        stop_when_covered=False,  # several tool calls in one execute step
        model=multi_source_model(" ".join(claims), cited),
        tools=[lookup_source],
    )
    report = (await spec.execute("CRM growth?")).final_state
    assert [e.arguments["source"] for e in report.evidence] == ["report-1.pdf", "report-2.pdf"]
    assert all(c.grounded for c in report.claims)
    # A judge without token probabilities names the passages it relies on: those are cited.
    quoted = f"chars 0-{len(FACT)}"
    assert report.sources == [f"report-2.pdf#{quoted}", f"report-1.pdf#{quoted}"]
    assert [c.reference for c in report.claims[1].citations] == [
        f"report-1.pdf#{quoted}",
        f"report-2.pdf#{quoted}",
    ]
    assert report.claims[1].evidence == [1, 2]


async def test_the_report_lists_each_finding_once() -> None:
    repeated = {
        "summary": "The CRM market grew 12 percent in 2024. The market grew according to Gartner.",
        "key_findings": [
            "The CRM market grew 12 percent in 2024",
            "the CRM market grew 12 percent in 2024, according to Gartner.",
            "The market grew according to Gartner.",
        ],
        "sources": ["gartner-2024.pdf", "gartner-2024.pdf"],
    }
    script = ResearchScript()
    judged: list[list[str]] = []

    def respond(call: ModelCall) -> ModelResponse:
        node = node_of_request(call.messages)
        if node == Node.SUMMARIZE:
            return text(json.dumps(repeated))
        if node == Node.GROUNDING_EVAL:
            judged.append(call.messages[-1].content.split("Claim: ", 1)[1].split("\n", 1)[0])
        return script(call)

    spec = create_research_workflow(
        model=ScriptedModel(responder=respond), tools=[lookup], output_schema=Report
    )
    report = (await spec.execute("CRM growth?")).final_state
    once = [
        "the CRM market grew 12 percent in 2024, according to Gartner.",
        "The market grew according to Gartner.",
    ]
    # The schema's own lists lose their repeats; the findings judged and shown are each once.
    assert report.structured_output.key_findings == once
    assert report.structured_output.sources == ["gartner-2024.pdf"]
    assert [c.claim for c in report.claims] == once
    assert sorted(judged) == sorted(once)  # one question per finding, each finding once

    outcome = ResearchOutcome(
        final_state=report,
        state_ref="ref",
        research="market",
        workflow_id="wf",
        run_id="run",
    )
    printed = format_report(outcome, "http://ui")
    assert '"key_findings": [' in printed
    findings = printed.split("Findings\n--------\n", 1)[1].split("\n\n", 1)[0].splitlines()
    cited = report.claims[0].citations[0].reference
    assert cited == f"gartner-2024.pdf#chars 0-{len(FACT)}"
    # Each finding once, with its verdict, score and the quoted sentence it rests on.
    assert findings == [
        line
        for claim in report.claims
        for line in (f"✓ {claim.score:.2f} {claim.claim}", f'    [1] {cited}: "{FACT}"')
    ]
    assert [c.claim for c in report.claims] == once
    # Numbered as the summary's `[n]` marks cite them: one numbering.
    assert f"Sources\n-------\n[1] {cited}\n" in printed
    assert "judge scripted (from its generated yes/no), a claim needs a score of" in printed


async def test_the_printed_report_says_why_a_claim_is_not_supported() -> None:
    def respond(call: ModelCall) -> ModelResponse:
        node = node_of_request(call.messages)
        if node in (Node.SUMMARIZE, Node.REGENERATE):
            return text("The CRM market grew 15 percent in 2024 according to Gartner.")
        return ResearchScript()(call)

    spec = create_research_workflow(
        model=ScriptedModel(responder=respond), tools=[lookup], max_replans=0, max_regenerations=0
    )
    report = (await spec.execute("CRM growth?")).final_state
    outcome = ResearchOutcome(
        final_state=report, state_ref="ref", research="market", workflow_id="wf", run_id="run"
    )
    printed = format_report(outcome, "http://ui")
    findings = printed.split("Findings\n--------\n", 1)[1].split("\n\n", 1)[0].splitlines()
    [claim] = report.claims
    assert not claim.grounded and "numbers" in claim.checks
    assert findings == [
        f"✗ {claim.score:.2f} The CRM market grew 15 percent in 2024 according to Gartner.",
        f"    not supported: {claim.rationale}",
        # The final report cites no passage (its one claim is out), so none has a number.
        f'    closest: gartner-2024.pdf#chars 0-{len(FACT)}: "{FACT}"',
    ]
    assert "numbers: 15" in claim.rationale
    assert "Grounding score: 0% of claims grounded (the run needs 65%)" in printed


async def test_a_schema_that_needs_the_repeats_keeps_them() -> None:
    class TwoFindings(BaseModel):
        summary: str
        key_findings: list[str] = Field(min_length=2)

    answer = {"summary": FACT, "key_findings": [FACT, FACT.upper()]}

    def respond(call: ModelCall) -> ModelResponse:
        if node_of_request(call.messages) == Node.SUMMARIZE:
            return text(json.dumps(answer))
        return ResearchScript()(call)

    spec = create_research_workflow(
        model=ScriptedModel(responder=respond), tools=[lookup], output_schema=TwoFindings
    )
    report = (await spec.execute("q?")).final_state
    assert report.structured_output.key_findings == answer["key_findings"]
    assert report.output_error is None


async def test_a_claim_quotes_the_sentence_it_rests_on_not_the_whole_output() -> None:
    filler = "Unrelated filler about office furniture and parking. " * 400
    output = filler + FACT + " " + filler

    def long_report(topic: str) -> str:
        """Read the whole annual report."""
        return output

    def execute(call: ModelCall) -> ModelResponse:
        return tool_call("long_report", topic="crm") if not tool_rounds(call) else text(FACT)

    spec = create_research_workflow(
        model=scripted_model(ResearchScript(execute_turn=execute)), tools=[long_report]
    )
    report = (await spec.execute("q?")).final_state
    [claim] = report.claims
    assert claim.evidence_text == [FACT]
    [citation] = claim.citations
    assert citation.source == "long_report(topic=crm)" and citation.quote == FACT
    start, end = map(int, citation.location.removeprefix("chars ").split("-"))
    assert output[start:end] == FACT
    assert report.sources == [f"long_report(topic=crm)#chars {start}-{end}"]


def test_one_citation_type_reads_old_and_new_json() -> None:
    import sleuth
    import sleuth.grounding
    import sleuth.research

    assert sleuth.research.Citation is sleuth.grounding.Citation is sleuth.Citation
    # A citation stored before quotes existed (no location or quote) still reads, and reads by
    # key like the rest of the report.
    old = sleuth.Citation.model_validate({"evidence": 1, "tool": "lookup", "source": "a.pdf"})
    assert (old.reference, old["quote"]) == ("a.pdf", "")
    record = ClaimRecord.model_validate(
        {"claim": "c", "score": 1.0, "grounded": True, "citations": [old.model_dump()]}
    )
    assert record.citations == [old] and record.checks == [] and record.model_score is None
