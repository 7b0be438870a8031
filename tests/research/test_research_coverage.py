"""Plan before searching, in-process: sub-questions, one search each, coverage, replan on an
uncovered part, the round's budget, and coverage in the report and the CLI's report."""

from __future__ import annotations

import json

import pytest

from sleuth import create_research_workflow, next_node
from sleuth.activities.research_models import ResearchOutcome
from sleuth.agent.state import EvidenceItem
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import (
    ResearchDigest,
    coverage,
    end_reason,
    node_of_request,
    parse_sub_questions,
)
from sleuth.research.parts import question_parts
from sleuth.research.plan import answers, sub_question_prompt, unanswered, with_answered
from sleuth.research.state import ResearchState, SubQuestionCoverage
from sleuth.workers.cli_research import format_report
from tests.helpers.coverage_scripts import (
    FACTS,
    QUESTION,
    REWORDED,
    SUB_QUESTIONS,
    DocsSearch,
    named_part,
    search_turn,
    three_part_script,
)
from tests.helpers.research_scripts import FACT, ResearchScript, lookup, scripted_model, tool_rounds


def asking(script: ResearchScript, node: str) -> tuple[ScriptedModel, list[str]]:
    """`script` as a model, and the list of the user texts its `node` requests carry, in order."""
    asked: list[str] = []

    def responder(call: ModelCall) -> ModelResponse:
        if node_of_request(call.messages) == node:
            asked.append(call.last_user_text)
        return script(call)

    return ScriptedModel(responder=responder), asked


def test_sub_questions_are_parsed_from_the_planners_json() -> None:
    assert parse_sub_questions('["A?", "B?"]', "Q", 4) == ["A?", "B?"]
    fenced = 'Here you go:\n```json\n{"sub_questions": ["A?", " b ?", "a?"]}\n```'
    assert parse_sub_questions(fenced, "Q", 4) == ["A?", "b ?"]
    assert parse_sub_questions('[{"question": "A?"}, 3, ""]', "Q", 4) == ["A?"]
    assert parse_sub_questions('["1?", "2?", "3?"]', "Q", 2) == ["1?", "2?"]
    assert parse_sub_questions("I cannot split this.", "Q", 4) == ["Q"]
    assert parse_sub_questions("[]", "Q", 4) == ["Q"]


def test_a_sub_question_is_covered_by_a_passage_holding_half_its_words() -> None:
    evidence = [
        EvidenceItem(index=1, tool="search_docs", output=FACTS["finally"]),
        EvidenceItem(index=2, tool="search_docs", output="", success=False, error="boom"),
    ]
    found = coverage(SUB_QUESTIONS, evidence)
    # "with statement ... try/finally" holds three of the third part's four content words; the
    # first two parts share none with it.
    assert [entry.covered for entry in found] == [False, False, True]
    assert found[2].evidence == [1] and found[2].passages[0].text == FACTS["finally"]
    assert found[0].passages == [] and found[1].evidence == []


def test_a_passage_found_twice_is_listed_once_under_its_sub_question() -> None:
    """The same chunk from two searches, and the same text under another page, are one passage
    in the coverage (the report printed each twice); every evidence item still counts."""
    copy = " ".join(FACTS["finally"].upper().split())
    evidence = [
        EvidenceItem(index=1, tool="search_docs", output=FACTS["finally"]),
        EvidenceItem(index=2, tool="search_docs", output=FACTS["finally"]),
        EvidenceItem(index=3, tool="search_docs", output=json.dumps({"text": copy, "source": "b"})),
    ]
    entry = coverage(SUB_QUESTIONS, evidence)[2]
    assert entry.covered and entry.evidence == [1, 2, 3]
    assert [p.evidence for p in entry.passages] == [1]


def test_a_parts_prompt_names_the_part_alone() -> None:
    """Given the whole question or the earlier queries, the local 1.5B searched with those words
    for every part; the part's prompt holds the part and what to do, and the replan's focus."""
    state = ResearchState(
        prompt=QUESTION,
        sub_questions=SUB_QUESTIONS,
        evidence=[EvidenceItem(index=1, tool="search_docs", arguments={"query": "exceptions"})],
    )
    second = sub_question_prompt(state, 1)
    assert second.startswith(
        f"Research this part of the question (part 2 of 3):\n{SUB_QUESTIONS[1]}"
    )
    assert QUESTION not in second and "exceptions" not in second
    focused = sub_question_prompt(state.model_copy(update={"focused_prompt": "Look up X."}), 1)
    assert focused.endswith("Follow-up research (earlier findings lacked evidence):\nLook up X.")


async def test_the_writers_are_given_the_parts_to_answer() -> None:
    """The report answers each part: the writers' request lists the plan's sub-questions (the
    1.5B left the last part of the demo question out without them)."""
    script, docs = three_part_script(), DocsSearch()
    requests: list[str] = []

    def respond(call: ModelCall) -> ModelResponse:
        if node_of_request(call.messages) == "summarize":
            requests.append(call.last_user_text)
        return script(call)

    spec = create_research_workflow(model=ScriptedModel(responder=respond), tools=[docs.tool()])
    await spec.execute(QUESTION)
    [summarize] = requests
    listed = "\n".join(f"{n}. {q}" for n, q in enumerate(SUB_QUESTIONS, start=1))
    assert f"Its parts (answer each one the passages answer):\n{listed}" in summarize


def test_the_router_replans_for_an_uncovered_sub_question() -> None:
    grounded = {"node": "grounding_eval", "grounding_score": 1.0}
    assert next_node(ResearchDigest(**grounded)) == "done"  # type: ignore[arg-type]
    uncovered = ResearchDigest(**grounded, uncovered_count=1)  # type: ignore[arg-type]
    # Regenerating cannot find evidence: an uncovered part goes straight to a replan.
    assert next_node(uncovered) == "replan"
    spent = uncovered.model_copy(update={"replan_count": 2})
    assert next_node(spent) == "done" and end_reason(spent) == "max_replans"
    no_replans = uncovered.model_copy(update={"max_replans": 0})
    assert next_node(no_replans) == "done" and end_reason(no_replans) == "max_replans"
    assert end_reason(ResearchDigest(**grounded)) == "grounded"  # type: ignore[arg-type]


def test_the_router_regenerates_for_a_covered_part_the_report_leaves_unanswered() -> None:
    grounded = {"node": "grounding_eval", "grounding_score": 1.0}
    unanswered = ResearchDigest(**grounded, unanswered_count=1)  # type: ignore[arg-type]
    # The evidence is there, the report left it out: writing again (not searching) is the fix.
    assert next_node(unanswered) == "regenerate"
    spent = unanswered.model_copy(update={"regeneration_count": 1})
    assert next_node(spent) == "done" and end_reason(spent) == "grounded"
    # An uncovered part still needs evidence first.
    both = unanswered.model_copy(update={"uncovered_count": 1})
    assert next_node(both) == "replan"


def test_a_claim_answers_a_part_when_it_holds_half_the_parts_words() -> None:
    assert answers(FACTS["finally"], SUB_QUESTIONS[2])
    assert answers(FACTS["suppress"], SUB_QUESTIONS[1])
    assert not answers(FACTS["receive"], SUB_QUESTIONS[2])
    assert not answers("", SUB_QUESTIONS[0]) and not answers(FACTS["receive"], "How?")
    entries = [SubQuestionCoverage(question=question, covered=True) for question in SUB_QUESTIONS]
    marked = with_answered(entries, [FACTS["receive"], FACTS["suppress"]])
    assert [entry.answered for entry in marked] == [True, True, False]
    state = ResearchState(prompt=QUESTION, sub_questions=SUB_QUESTIONS, coverage=marked)
    assert unanswered(state) == [2]
    # An uncovered part is not "unanswered": it has no evidence to answer it from.
    uncovered_part = marked[2].model_copy(update={"covered": False})
    assert unanswered(state.model_copy(update={"coverage": [*marked[:2], uncovered_part]})) == []


async def test_a_part_the_report_leaves_unanswered_is_answered_by_quoting_its_passage() -> None:
    script, docs = three_part_script(), DocsSearch()
    # The writer answers two of the three parts; the evidence covers all three. The part left
    # out asks for a single fact, so quoting its passage answers it.
    script.summary = f"{FACTS['receive']} {FACTS['finally']}"
    script.rewrite = script.summary
    spec = create_research_workflow(model=scripted_model(script), tools=[docs.tool()])
    report = (await spec.execute(QUESTION)).final_state
    assert report.nodes[-3:] == ["grounding_eval", "regenerate", "grounding_eval"]
    assert script.seen.count("regenerate") == 0, "the repair quotes; the writer is not asked"
    assert report.regeneration_count == 1 and report.score_history == [1.0, 1.0]
    # The second part's passage, quoted with its number among the report's sources.
    quoted = FACTS["suppress"][:-1]
    assert quoted in report.summary
    number = next(n for n, s in enumerate(report.sources, 1) if s.startswith("reference#suppress"))
    assert f"{quoted} [{number}]." in report.summary
    assert [entry.answered for entry in report.coverage] == [True, True, True]
    assert report.end_reason == "grounded" and report.removed_claims == []
    assert report.status == "grounded" and report.best_draft == 2
    # Without a regeneration left the run ends there, and the report says which part it left out.
    script.seen.clear()
    no_regeneration = create_research_workflow(
        model=scripted_model(script), tools=[docs.tool()], max_regenerations=0
    )
    left_out = (await no_regeneration.execute(QUESTION)).final_state
    assert left_out.end_reason == "grounded" and left_out.regeneration_count == 0
    assert [entry.answered for entry in left_out.coverage] == [True, False, True]
    assert [part.state for part in left_out.parts] == ["answered", "not_stated", "answered"]
    assert left_out.status == "partial"
    assert "The indexed documents do not say how does it suppress an exception." in (
        left_out.summary
    )
    outcome = ResearchOutcome(
        final_state=left_out, state_ref="ref", research="docs", workflow_id="w", run_id="r"
    )
    printed = format_report(outcome, "http://ui").split("Coverage\n--------\n", 1)[1]
    assert "✗ 2. " + SUB_QUESTIONS[1] not in printed
    assert "found, but no grounded claim of the report answers it" in printed.split("\n\n", 1)[0]


async def test_a_comparison_the_report_leaves_unanswered_is_rewritten_not_quoted() -> None:
    """A part that asks for a comparison is answered in the writer's words from the passages it
    combines: a quoted sentence is no comparison, so the regeneration asks the writer."""
    script, docs = three_part_script(), DocsSearch()
    script.summary = f"{FACTS['receive']} {FACTS['suppress']}"
    compared = (
        "Like try/finally, a with statement always runs its exit code, and its __exit__ can "
        "also suppress the exception [3]."
    )
    script.rewrite = f"{script.summary} {compared}"
    model, prompts = asking(script, "regenerate")
    spec = create_research_workflow(model=model, tools=[docs.tool()])
    report = (await spec.execute(QUESTION)).final_state
    assert len(prompts) == 1, "the writer rewrites; the comparison is not quoted"
    assert "ask for a comparison or a reason" in prompts[0]
    assert question_parts(QUESTION)[2] + " (combine passages" in prompts[0]
    assert report.parts[2].state == "answered" and report.best_draft == 2
    assert "Like try/finally" in report.summary


async def test_a_rewrite_is_told_the_parts_the_report_leaves_unanswered() -> None:
    script, docs = three_part_script(), DocsSearch()
    script.summary = f"{FACTS['receive']} {FACTS['suppress']}"
    script.rewrite = everything = " ".join(FACTS.values())
    model, prompts = asking(script, "regenerate")
    spec = create_research_workflow(model=model, tools=[docs.tool()], regenerate="rewrite")
    report = (await spec.execute(QUESTION)).final_state
    assert len(prompts) == 1
    # The question's own part is named (not the planner's wording of it).
    assert (
        "Parts of the question the report leaves unanswered:\n- " + question_parts(QUESTION)[2]
        in prompts[0]
    )
    assert question_parts(QUESTION)[0] not in prompts[0].split("leaves unanswered:", 1)[1]
    assert report.summary == everything and report.end_reason == "grounded"
    assert [entry.answered for entry in report.coverage] == [True, True, True]


async def test_a_three_part_question_gets_three_searches_and_full_coverage() -> None:
    script, docs = three_part_script(), DocsSearch()
    spec = create_research_workflow(model=scripted_model(script), tools=[docs.tool()])
    result = await spec.execute(QUESTION)
    report = result.final_state
    assert report.nodes[:4] == ["plan", "execute", "execute", "execute"]
    assert docs.queries == SUB_QUESTIONS
    assert [e.tool for e in report.evidence] == ["search_docs"] * 3
    assert [entry.question for entry in report.coverage] == SUB_QUESTIONS
    assert all(entry.covered for entry in report.coverage)
    # The first fact (what __exit__ receives) names __exit__ and the exception too: it answers
    # the second part as well.
    assert [entry.evidence for entry in report.coverage] == [[1], [1, 2], [3]]
    assert [entry.researched for entry in report.coverage] == [1, 1, 1]
    assert report.coverage[2].passages[0].source == "reference#finally"
    assert report.end_reason == "grounded" and report.replan_count == 0
    assert result.state.sub_questions == SUB_QUESTIONS and result.state.pending == []
    # Each search's results cover its part, so the step ends there: no model turn restates them.
    assert result.state.agent_stop_reasons == ["covered"] * 3
    assert result.state.round_iterations == 3 and report.findings == ""


async def test_a_part_its_first_search_leaves_uncovered_is_researched_on() -> None:
    """The step of a part whose first search found nothing goes on: the agent reads the empty
    result and searches again, and the second search, which covers it, ends the step."""

    def search_until_found(call: ModelCall) -> ModelResponse:
        return tool_call("search_docs", query=f"{named_part(call)} #{tool_rounds(call) + 1}")

    script = three_part_script()
    script.execute_turn = search_until_found
    docs = DocsSearch(withheld="finally")
    spec = create_research_workflow(model=scripted_model(script), tools=[docs.tool()])
    result = await spec.execute(QUESTION)
    assert docs.queries == [
        f"{SUB_QUESTIONS[0]} #1",
        f"{SUB_QUESTIONS[1]} #1",
        f"{SUB_QUESTIONS[2]} #1",
        f"{SUB_QUESTIONS[2]} #2",
    ]
    assert result.state.agent_stop_reasons == ["covered"] * 3
    assert all(entry.covered for entry in result.final_state.coverage)


async def test_without_stop_when_covered_the_agent_answers_each_part() -> None:
    script, docs = three_part_script(), DocsSearch()
    spec = create_research_workflow(
        model=scripted_model(script), tools=[docs.tool()], stop_when_covered=False
    )
    result = await spec.execute(QUESTION)
    assert docs.queries == SUB_QUESTIONS
    assert result.state.agent_stop_reasons == ["completed"] * 3
    assert result.state.round_iterations == 6
    for part in SUB_QUESTIONS:
        assert f"{part}\nAnswered from the search result." in result.final_state.findings


async def test_an_uncovered_part_produces_a_replan_that_names_it() -> None:
    script, docs = three_part_script(), DocsSearch(withheld="finally")
    model, replans = asking(script, "replan")
    spec = create_research_workflow(model=model, tools=[docs.tool()])
    report = (await spec.execute(QUESTION)).final_state
    # The first report's claim about the withheld part has no evidence, so it is not grounded
    # (2 of 3 still meet the threshold): the replan is for the uncovered part alone, and the
    # second round researches only that part.
    assert report.regeneration_count == 0 and report.replan_count == 1
    assert report.nodes.count("execute") == 4
    assert docs.queries == [*SUB_QUESTIONS, SUB_QUESTIONS[2]]
    assert len(replans) == 1
    # The replan names the question's own part that has no evidence (not the planner's wording).
    parts = question_parts(QUESTION)
    assert "Parts of the question with no evidence yet:\n- " + parts[2] in replans[0]
    assert parts[0] not in replans[0] and SUB_QUESTIONS[0] not in replans[0]
    assert report.score_history == [pytest.approx(2 / 3, abs=1e-3), 1.0]
    assert all(entry.covered for entry in report.coverage)
    assert report.coverage[2].evidence == [4] and report.coverage[2].researched == 2
    assert report.end_reason == "grounded"


async def test_the_replan_prompt_names_ungrounded_claims_beside_uncovered_parts() -> None:
    script = three_part_script(verdicts=[False, False, True])
    docs = DocsSearch(withheld="finally")
    model, replans = asking(script, "replan")
    spec = create_research_workflow(model=model, tools=[docs.tool()], causal_inference=False)
    report = (await spec.execute(QUESTION)).final_state
    assert report.regeneration_count == 1 and report.replan_count == 1
    assert "Parts of the question with no evidence yet:" in replans[0]
    # The replan follows the regeneration, whose report said the facts in other words.
    assert "Unsupported claims:\n- " + REWORDED["receive"] in replans[0]


async def test_a_part_never_found_ends_the_run_with_it_uncovered() -> None:
    docs = DocsSearch(withheld="finally", withheld_calls=10)
    spec = create_research_workflow(
        model=scripted_model(three_part_script()), tools=[docs.tool()], max_replans=1
    )
    result = await spec.execute(QUESTION)
    report = result.final_state
    assert report.replan_count == 1 and report.end_reason == "max_replans"
    assert [entry.covered for entry in report.coverage] == [True, True, False]
    assert report.coverage[2].passages == [] and report.coverage[2].researched == 2
    outcome = ResearchOutcome(
        final_state=report, state_ref="ref", research="docs", workflow_id="w", run_id="r"
    )
    printed = format_report(outcome, "http://ui")
    coverage_section = printed.split("Coverage\n--------\n", 1)[1].split("\n\n", 1)[0]
    assert f"✓ 1. {SUB_QUESTIONS[0]}" in coverage_section
    assert "[1] reference#receive#chars 0-86: " + FACTS["receive"] in coverage_section
    assert coverage_section.endswith(f"✗ 3. {SUB_QUESTIONS[2]}\n     not found")


async def test_the_rounds_iteration_budget_drops_the_parts_it_cannot_reach() -> None:
    script, docs = three_part_script(), DocsSearch()
    spec = create_research_workflow(
        model=scripted_model(script), tools=[docs.tool()], max_iterations=2, max_replans=0
    )
    result = await spec.execute(QUESTION)
    # Two turns for three parts: each of the first two steps gets one turn (a search), then the
    # round's budget is spent, so the third part is never researched and stays uncovered.
    assert result.state.nodes[:3] == ["plan", "execute", "execute"]
    assert result.state.nodes[3] != "execute"
    assert docs.queries == SUB_QUESTIONS[:2]
    assert [entry.researched for entry in result.final_state.coverage] == [1, 1, 0]
    assert result.final_state.end_reason == "max_replans"


async def test_a_part_that_keeps_searching_leaves_the_later_parts_their_share() -> None:
    def search_forever(call):  # type: ignore[no-untyped-def]
        # A new query every turn (repeating one would trip the agent's loop detection).
        return tool_call("search_docs", query=f"{named_part(call)} #{tool_rounds(call) + 1}")

    script = ResearchScript(sub_questions=list(SUB_QUESTIONS), execute_turn=search_forever)
    docs = DocsSearch()
    spec = create_research_workflow(
        model=scripted_model(script),
        tools=[docs.tool()],
        max_iterations=6,
        max_replans=0,
        stop_when_covered=False,
    )
    await spec.execute(QUESTION)
    # Six turns over three parts: two searches each, however eager the agent is.
    assert docs.queries == [f"{part} #{n}" for part in SUB_QUESTIONS for n in (1, 2)]


async def test_the_rounds_token_budget_ends_it_too() -> None:
    docs = DocsSearch()
    spec = create_research_workflow(
        model=scripted_model(three_part_script()),
        tools=[docs.tool()],
        execute_token_budget=1,
        max_replans=0,
    )
    result = await spec.execute(QUESTION)
    assert docs.queries == SUB_QUESTIONS[:1]
    assert result.state.nodes.count("execute") == 1


async def test_one_sub_question_plans_without_a_model_call() -> None:
    script = ResearchScript()
    spec = create_research_workflow(
        model=scripted_model(script), tools=[lookup], max_sub_questions=1
    )
    result = await spec.execute("How fast did the CRM market grow?")
    assert "plan" not in script.seen
    assert result.state.sub_questions == ["How fast did the CRM market grow?"]
    assert result.final_state.coverage[0].covered
    assert result.final_state.nodes[:2] == ["plan", "execute"]


async def test_a_planner_answer_without_json_falls_back_to_the_question() -> None:
    script = ResearchScript()

    def responder(call):  # type: ignore[no-untyped-def]
        if node_of_request(call.messages) == "plan":
            return text("Sure! The question has several parts.")
        return script(call)

    spec = create_research_workflow(model=ScriptedModel(responder=responder), tools=[lookup])
    result = await spec.execute("How fast did the CRM market grow?")
    assert result.state.sub_questions == ["How fast did the CRM market grow?"]


def test_sub_question_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="max_sub_questions must be within 1..8"):
        create_research_workflow(model=scripted_model(ResearchScript()), max_sub_questions=9)
    with pytest.raises(ValueError, match="execute_token_budget must be within"):
        create_research_workflow(model=scripted_model(ResearchScript()), execute_token_budget=0)


async def test_after_a_replan_the_whole_question_step_ends_on_new_evidence() -> None:
    """Every part covered but the claims doubted: the replan's execute step researches the whole
    question, and ends at the first result holding a passage the run did not have (a search
    that finds only known text is read, and the agent searches again)."""
    calls: list[str] = []

    def notes(topic: str) -> str:
        """Look a topic up in the market notes."""
        calls.append(topic)
        found = FACT if len(calls) <= 2 else f"Gartner's note {len(calls)}: {FACT}"
        return json.dumps({"topic": topic, "text": found, "source": "gartner-2024.pdf"})

    def search(call: ModelCall) -> ModelResponse:
        return tool_call("notes", topic=f"crm growth {len(calls) + 1}")

    script = ResearchScript(tool_name="notes", verdicts=[False, False, True], execute_turn=search)
    spec = create_research_workflow(model=scripted_model(script), tools=[notes])
    result = await spec.execute("How fast did the CRM market grow?")
    report = result.final_state
    assert report.regeneration_count == 1 and report.replan_count == 1
    assert len(calls) == 3 and report.evidence_count == 3
    assert result.state.agent_stop_reasons == ["covered", "covered"]
    assert report.end_reason == "grounded"


async def test_a_step_its_results_end_leaves_no_note_of_its_call_turns_text() -> None:
    """A model may write a line beside its call ("Let me search ..."); a step that its results
    ended wrote no answer, so nothing of that reaches the writers as a research note."""

    def chatty_search(call: ModelCall) -> ModelResponse:
        response = search_turn(call)
        return response.model_copy(update={"text": "Let me search the reference for this."})

    script = three_part_script()
    script.execute_turn = chatty_search
    spec = create_research_workflow(model=scripted_model(script), tools=[DocsSearch().tool()])
    result = await spec.execute(QUESTION)
    assert result.state.agent_stop_reasons == ["covered"] * 3
    assert result.final_state.findings == ""
