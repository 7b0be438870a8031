"""The research graph in-process: the router, every path through it, and the final state."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from pydantic import BaseModel

from sleuth import App, create_research_workflow, next_node
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import ResearchDigest, ResearchReport, end_reason, node_of_request
from tests.helpers.research_scripts import FACT, ResearchScript, lookup, scripted_model


def route(node: str, **fields: object) -> str:
    return next_node(ResearchDigest(node=node, **fields))  # type: ignore[arg-type]


def test_router_follows_the_graph() -> None:
    assert route("start") == "plan"
    assert route("plan") == "execute"
    assert route("execute", pending_count=2) == "execute"
    assert route("execute") == "causal_inference"
    assert route("execute", causal_inference=False) == "summarize"
    assert route("causal_inference") == "summarize"
    assert route("summarize") == "grounding_eval"
    assert route("regenerate") == "grounding_eval"
    assert route("replan") == "execute"


def test_router_spends_regenerations_then_replans_then_stops() -> None:
    low = {"grounding_score": 0.5, "grounding_threshold": 0.65}
    assert route("grounding_eval", grounding_score=0.65, grounding_threshold=0.65) == "done"
    assert route("grounding_eval", **low) == "regenerate"
    assert route("grounding_eval", regeneration_count=1, **low) == "replan"
    assert route("grounding_eval", regeneration_count=1, replan_count=2, **low) == "done"
    assert next_node({"node": "grounding_eval", "max_regenerations": 0, **low}) == "replan"
    assert end_reason({"grounding_score": 0.9}) == "grounded"
    assert end_reason({"grounding_score": 0.1, "max_replans": 0}) == "max_regenerations"
    assert end_reason({"grounding_score": 0.1, "max_replans": 2}) == "max_replans"
    with pytest.raises(ValueError, match="unknown research node"):
        route("typo")


async def test_grounded_at_once() -> None:
    script = ResearchScript(verdicts=[True])
    spec = create_research_workflow(model=scripted_model(script), tools=[lookup])
    result = await spec.execute({"prompt": "How fast did the CRM market grow?"})
    state = result.final_state
    assert state["end_reason"] == "grounded"
    assert state["grounding_score"] == 1.0
    assert state["replan_count"] == 0 and state["regeneration_count"] == 0
    assert state["nodes"] == ["plan", "execute", "causal_inference", "summarize", "grounding_eval"]
    assert state["summary"] == script.summary
    assert state["causal_chain"].startswith("Vendor consolidation")
    assert [e["tool"] for e in state["evidence"]] == ["lookup"]
    claim = state["claims"][0]
    assert claim["grounded"] and claim["evidence"] == [1]
    # The claim cites the sentence it rests on, quoted from the row's text with its location.
    assert claim["evidence_text"] == [FACT]
    (citation,) = claim["citations"]
    assert (citation.source, citation.location, citation.quote) == (
        "gartner-2024.pdf",
        f"chars 0-{len(FACT)}",
        FACT,
    )
    assert state["sources"] == [f"gartner-2024.pdf#chars 0-{len(FACT)}"]
    assert state["grounding_method"] == "verdict" and state["claim_threshold"] is not None
    assert state["usage"]["total_tokens"] > 0


async def test_regenerate_then_grounded() -> None:
    script = ResearchScript(verdicts=[False, True])
    spec = create_research_workflow(model=scripted_model(script), tools=[lookup])
    state = (await spec.execute({"prompt": "CRM growth?"})).final_state
    assert state["nodes"][-3:] == ["grounding_eval", "regenerate", "grounding_eval"]
    assert (state["regeneration_count"], state["replan_count"]) == (1, 0)
    assert state["score_history"] == [0.0, 1.0]
    assert state["end_reason"] == "grounded"


async def test_replan_then_grounded_gathers_more_evidence() -> None:
    script = ResearchScript(verdicts=[False, False, True])
    spec = create_research_workflow(model=scripted_model(script), tools=[lookup])
    state = (await spec.execute("CRM growth?")).final_state
    assert state["replan_count"] == 1 and state["regeneration_count"] == 1
    assert state["nodes"].count("execute") == 2
    assert [e["index"] for e in state["evidence"]] == [1, 2]
    assert state["focused_prompts"] == ["Look up the CRM market growth figure for 2024."]
    assert state["end_reason"] == "grounded"


async def test_both_exhausted_ends_the_run() -> None:
    script = ResearchScript(verdicts=[False])
    spec = create_research_workflow(
        model=scripted_model(script), tools=[lookup], max_replans=2, max_regenerations=1
    )
    state = (await spec.execute("CRM growth?")).final_state
    assert (state["replan_count"], state["regeneration_count"]) == (2, 1)
    assert state["end_reason"] == "max_replans"
    assert state["score_history"] == [0.0, 0.0, 0.0, 0.0]
    only_regenerations = create_research_workflow(
        model=scripted_model(ResearchScript(verdicts=[False])), tools=[lookup], max_replans=0
    )
    assert (await only_regenerations.execute("q?")).final_state["end_reason"] == "max_regenerations"


async def test_per_run_overrides_and_no_causal_inference() -> None:
    script = ResearchScript(verdicts=[False])
    spec = create_research_workflow(
        model=scripted_model(script), tools=[lookup], causal_inference=False
    )
    state = (
        await spec.execute({"prompt": "q?", "max_replans": 0, "max_regenerations": 0})
    ).final_state
    assert state["nodes"] == ["plan", "execute", "summarize", "grounding_eval"]
    assert "causal_inference" not in script.seen


class Report(BaseModel):
    summary: str
    key_findings: list[str]
    confidence: float


async def test_output_schema_is_validated_and_repaired() -> None:
    good = {
        "summary": FACT,
        "key_findings": ["Gartner reported 12 percent growth in 2024."],
        "confidence": 0.8,
    }
    answers = iter([text("not json at all"), text(json.dumps(good))])
    script = ResearchScript()

    def responder(call):  # type: ignore[no-untyped-def]
        if node_of_request(call.messages) == "summarize":
            assert call.output_schema is not None and call.output_schema.name == "Report"
            return next(answers)
        return script(call)

    spec = create_research_workflow(
        model=ScriptedModel(responder=responder), tools=[lookup], output_schema=Report
    )
    result = await spec.execute("q?")
    state = result.final_state
    report: Report = state["structured_output"]
    # The writer's confidence (0.8) is replaced by the one derived from the grounding.
    assert state.confidence == 1.0 and state.status == "grounded"
    assert isinstance(report, Report)
    assert report == Report.model_validate({**good, "confidence": 1.0})
    assert report.key_findings == good["key_findings"]
    assert state.structured_output is report and result.parsed is report
    assert state.output_schema == "Report"
    assert state["summary"] == FACT
    assert [c["claim"] for c in state["claims"]] == [FACT, good["key_findings"][0]]


async def _one_pass_report(summarize: Callable[[ModelCall], ModelResponse]) -> ResearchReport:
    """The final state of a run with the `Report` schema whose summarize requests `summarize`
    answers (no regeneration or replan)."""
    script = ResearchScript()

    def responder(call: ModelCall) -> ModelResponse:
        return summarize(call) if node_of_request(call.messages) == "summarize" else script(call)

    spec = create_research_workflow(
        model=ScriptedModel(responder=responder),
        tools=[lookup],
        output_schema=Report,
        max_replans=0,
        max_regenerations=0,
    )
    return (await spec.execute("q?")).final_state


async def test_when_the_repair_fails_too_the_first_answers_prose_is_the_report() -> None:
    # Both answers are JSON objects that break the schema (confidence at most 1 is not enforced
    # by `Report`, so a list where text belongs stands in); the repair talks about the error.
    first = {"summary": FACT, "key_findings": "not a list", "confidence": 0.8}
    repair = {"summary": "The key findings field should be a list.", "confidence": "high"}
    answers = iter([text(json.dumps(first)), text("Sure: " + json.dumps(repair))])

    def summarize(call: ModelCall) -> ModelResponse:
        if call.messages[-1].content.startswith("That does not match"):
            assert "fix only what the error names" in call.messages[-1].content
        return next(answers)

    state = await _one_pass_report(summarize)
    assert state["structured_output"] is None and state["output_error"]
    assert state["summary"] == FACT + "\nnot a list"
    assert [c["claim"] for c in state["claims"]] == [FACT]


async def test_a_report_cut_at_the_output_cap_is_read_for_what_it_completed() -> None:
    """A small writer repeats a finding until its output cap cuts the JSON: the report is the
    complete summary and findings, each once, not the raw JSON text."""
    finding = "Gartner reported 12 percent growth in 2024."
    repeated = f'"{finding}", ' * 12
    looping = f'{{"summary": "{FACT}", "key_findings": [{repeated} "Gartner rep'
    state = await _one_pass_report(lambda call: text(looping))
    assert state["structured_output"] is None and "confidence" in state["output_error"]
    assert state["summary"] == f"{FACT}\n- {finding}"
    assert [c["claim"] for c in state["claims"]] == [FACT, finding]


async def test_the_repair_turn_names_each_failed_field_and_what_was_given() -> None:
    """The 0.5B (json_object mode on llama.cpp's server) wrote `"key_findings": [[1], 2]`; the
    repair turn says which fields failed, what they should be and what they were, without
    pydantic's documentation links."""
    bad = {"summary": FACT, "key_findings": [[1], 2], "confidence": 0.5}
    calls: list[ModelCall] = []

    def summarize(call: ModelCall) -> ModelResponse:
        calls.append(call)
        return text(json.dumps(bad if len(calls) == 1 else {"summary": FACT}))

    state = await _one_pass_report(summarize)
    repair = calls[1].messages[-1].content
    assert repair.startswith(
        "That does not match the required schema: key_findings.0: Input should be a valid "
        "string, not [1]; key_findings.1: Input should be a valid string, not 2."
    )
    assert "pydantic.dev" not in repair
    assert state["output_error"].startswith("key_findings: missing; confidence: missing")


@pytest.mark.parametrize("reason", ["repetition", "length"])
async def test_a_cut_answer_is_asked_again_shorter_without_its_runaway_text(reason: str) -> None:
    """The 1.5B wrote one sentence over and over in its summary until the answer was cut (by the
    local model's loop guard, or the output cap). Shown that text with the schema error, it wrote
    it again; so the task is asked again, unchanged up to a note to state each fact once."""
    loop = " Lambda expressions are described in section Compound." * 3
    cut = text(f'{{"summary": "{FACT}{loop}')
    cut.finish_reason = reason
    good = {
        "summary": FACT,
        "key_findings": ["Gartner reported 12 percent growth."],
        "confidence": 1,
    }
    calls: list[ModelCall] = []

    def summarize(call: ModelCall) -> ModelResponse:
        calls.append(call)
        return cut if len(calls) == 1 else text(json.dumps(good))

    state = await _one_pass_report(summarize)
    # The confidence is the run's own, derived from the grounding (the writer's is replaced),
    # and the key finding the judge rejected is out of the answer: the key findings left empty
    # are filled from the grounded claims.
    assert state.confidence == round(state.grounding_score or 0, 2)
    assert state.removed_claims == good["key_findings"]
    assert state["structured_output"] == Report.model_validate(
        {**good, "key_findings": [FACT], "confidence": state.confidence}
    )
    assert state["output_error"] is None
    first, again = calls
    assert [m.role for m in again.messages] == [m.role for m in first.messages]
    assert not any("Lambda" in m.content for m in again.messages)
    task = first.messages[-1].content
    assert again.messages[-1].content.startswith(task + "\n\n")
    assert (
        "cut off" in again.messages[-1].content and "state each fact once" in again.last_user_text
    )


async def test_without_a_judge_model_the_checks_alone_judge() -> None:
    script = ResearchScript(summary=FACT + " Pigs can fly over the moon every Tuesday.")
    spec = create_research_workflow(
        model=scripted_model(script),
        tools=[lookup],
        judge_model=False,
        max_replans=0,
        max_regenerations=0,
    )
    state = (await spec.execute("q?")).final_state
    assert state["grounding_method"] == "checks" and state["grounding_judge"] == ""
    assert state["grounding_score"] == 0.5
    assert [c["grounded"] for c in state["claims"]] == [True, False]
    assert "grounding_eval" not in script.seen


async def test_an_answer_that_is_neither_yes_nor_no_grounds_nothing() -> None:
    script = ResearchScript()

    def responder(call):  # type: ignore[no-untyped-def]
        if node_of_request(call.messages) == "grounding_eval":
            return text("I think it's mostly fine!")
        return script(call)

    spec = create_research_workflow(
        model=ScriptedModel(responder=responder), tools=[lookup], max_replans=0
    )
    state = (await spec.execute("q?")).final_state
    assert state["grounding_method"] == "verdict"
    assert state["score_history"] == [0.0, 0.0]
    assert state["end_reason"] == "max_regenerations"


async def test_concurrent_runs_of_one_spec_do_not_share_state() -> None:
    def execute_turn(call):  # type: ignore[no-untyped-def]
        topic = call.messages[1].content
        if not any(m.role == "tool" for m in call.messages):
            return tool_call("lookup", topic=topic)
        return text("done")

    spec = create_research_workflow(
        model=scripted_model(ResearchScript(execute_turn=execute_turn)), tools=[lookup]
    )
    prompts = [f"topic {n}" for n in range(8)]
    results = await asyncio.gather(*(spec.execute(p) for p in prompts))
    for prompt, result in zip(prompts, results, strict=True):
        evidence = result.final_state["evidence"]
        assert [e["arguments"]["topic"] for e in evidence] == [prompt]
        assert result.final_state["prompt"] == prompt


async def test_datastore_names_resolve_through_the_app() -> None:
    class Retriever:
        def retrieve(self, query, top_k=5, min_score=None):  # type: ignore[no-untyped-def]
            return [{"id": "c1", "text": FACT, "score": 0.9, "source": "notes.md"}]

    app = App()
    app.datastore("notes", Retriever(), description="market notes")

    def execute_turn(call):  # type: ignore[no-untyped-def]
        assert "search_notes" in call.tool_names and "market notes" in call.system_text
        if not any(m.role == "tool" for m in call.messages):
            return tool_call("search_notes", query="crm growth")
        return text("done")

    spec = create_research_workflow(
        model=scripted_model(ResearchScript(execute_turn=execute_turn)), datastores=["notes"]
    )
    state = (await spec.execute("q?", app=app)).final_state
    assert state["sources"] == [f"notes.md#chars 0-{len(FACT)}"]


async def test_a_separate_judge_model_scores_the_claims() -> None:
    writer_script, judge_script = ResearchScript(verdicts=[False]), ResearchScript(verdicts=[True])
    spec = create_research_workflow(
        model=scripted_model(writer_script),
        judge_model=scripted_model(judge_script),
        tools=[lookup],
    )
    state = (await spec.execute("q?")).final_state
    assert state["end_reason"] == "grounded"
    assert "grounding_eval" not in writer_script.seen
    assert judge_script.seen == ["grounding_eval"]
