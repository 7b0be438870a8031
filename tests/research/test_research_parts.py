"""The question's own parts: how a question is split, how sub-questions map to its parts, and
that only those parts (never a planner's addition) make a run replan; a part the sources do not
answer is said so."""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth import create_research_workflow
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel
from sleuth.rag.demo import DEMO_QUESTION
from sleuth.research import (
    ClaimRecord,
    ResearchSpec,
    asks_synthesis,
    judge_parts,
    node_of_request,
    question_parts,
)
from sleuth.research.parts import not_stated_statement, part_aids
from tests.helpers.coverage_scripts import (
    FACTS,
    QUESTION,
    SUB_QUESTIONS,
    DocsSearch,
    three_part_script,
)
from tests.helpers.research_scripts import scripted_model
from tests.research.test_research_best_draft import in_both_runners


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (QUESTION, [
            "What does __exit__ receive?",
            "How does it suppress an exception?",
            "How does a with statement compare with try/finally?",
        ]),
        ("What is a coroutine and why is it cheap?", ["What is a coroutine?", "Why is it cheap?"]),
        ("Who wrote the PEP? When was it accepted?", ["Who wrote the PEP?", "When was it accepted?"]),
        ("Compare lists and tuples.", ["Compare lists and tuples."]),
        ("What are cats and dogs?", ["What are cats and dogs?"]),
        (
            "Give (1) the default, (2) the maximum and (3) the unit of the timeout.",
            ["Give the default", "Give the maximum", "Give the unit of the timeout."],
        ),
        (
            "What did Dr. Smith say in Oct. 2023, e.g. about widths?",
            ["What did Dr. Smith say in Oct. 2023, e.g. about widths?"],
        ),
        ("Summarise the CRM market", ["Summarise the CRM market"]),
        (DEMO_QUESTION, [
            "What does the __exit__ method of the context manager receive?",
            "How can it suppress the exception?",
            "How does this compare with a try/finally statement?",
        ]),
        ("When was it accepted, and who wrote it?", ["When was it accepted?", "Who wrote it?"]),
    ],
)  # fmt: skip
def test_a_question_is_split_into_its_own_clauses(question: str, parts: list[str]) -> None:
    assert question_parts(question) == parts


def test_sub_questions_map_to_the_part_they_research_and_additions_to_none() -> None:
    parts = question_parts(QUESTION)
    added = "What is the history of context managers in Python?"
    assert part_aids(parts, [*SUB_QUESTIONS, added]) == [[0], [1], [2]]
    # The question itself restates every part: no part's aid.
    assert part_aids(parts[:2], [" ".join(parts[:2])]) == [[], []]
    # A question of one part owns every sub-question the planner wrote for it.
    assert part_aids(["How fast did the CRM market grow?"], ["Who sells CRM?"]) == [[0]]


def test_a_comparison_is_answered_only_by_a_claim_that_compares() -> None:
    part = "How does a with statement compare with try/finally?"
    assert asks_synthesis(part) and asks_synthesis("Why is it cheap?")
    assert not asks_synthesis("What does __exit__ receive?")
    beside = ClaimRecord(
        claim="The try/finally statement runs the finally clause after a with statement.",
        score=0.9,
        grounded=True,
    )
    compares = ClaimRecord(claim=FACTS["finally"], score=0.9, grounded=True)
    [only_beside] = judge_parts([part], [], [], [beside])
    assert only_beside.state == "partial" and only_beside.claims == [1]
    assert "do not themselves answer" in only_beside.statement
    [answered] = judge_parts([part], [], [], [beside, compares])
    assert answered.state == "answered" and answered.claims == [2]
    rejected = compares.model_copy(update={"grounded": False})
    [not_stated] = judge_parts([part], [], [], [rejected])
    assert not_stated.state == "not_stated"
    assert not_stated.statement == not_stated_statement(part)
    assert not_stated.statement == (
        "The indexed documents do not say how does a with statement compare with try/finally."
    )


async def test_a_planner_only_sub_question_never_triggers_a_replan(
    time_env: WorkflowEnvironment,
) -> None:
    """The planner adds a sub-question the user never asked, and no evidence answers it; the
    report answers both parts of the question, grounded: the run ends there, in both runners."""
    question = "What does __exit__ receive, and how does it suppress an exception?"
    added = "What is the history of context managers in Python?"

    def make_spec() -> ResearchSpec:
        script = three_part_script()
        script.sub_questions = [*SUB_QUESTIONS[:2], added]
        script.summary = script.rewrite = f"{FACTS['receive']} {FACTS['suppress']}"
        return create_research_workflow(model=scripted_model(script), tools=[DocsSearch().tool()])

    for report in await in_both_runners(time_env, make_spec, {"prompt": question}):
        assert [entry.covered for entry in report.coverage] == [True, True, False]
        assert report.replan_count == 0 and report.regeneration_count == 0
        assert "replan" not in report.nodes
        assert report.end_reason == "grounded" and report.status == "grounded"
        assert [p.text for p in report.parts] == question_parts(question)
        assert [p.state for p in report.parts] == ["answered", "answered"]


async def test_a_part_the_sources_never_answer_is_stated_not_invented(
    time_env: WorkflowEnvironment,
) -> None:
    """The evidence never answers the third part and the writer's claim about it is rejected: the
    final answer leaves the claim out and says the documents do not say it."""
    invented = "A with statement is faster than try/finally by 40 percent."

    def make_spec() -> ResearchSpec:
        script = three_part_script(verdicts=[False])
        script.summary = script.rewrite = f"{FACTS['receive']} {FACTS['suppress']} {invented}"
        return create_research_workflow(
            model=scripted_model(script),
            tools=[DocsSearch(withheld="finally", withheld_calls=10).tool()],
            max_replans=0,
            max_regenerations=0,
            judge_model=False,
        )

    for report in await in_both_runners(time_env, make_spec, {"prompt": QUESTION}):
        assert invented not in report.summary
        assert invented in report.removed_claims
        [part] = [p for p in report.parts if p.state != "answered"]
        assert part.text == question_parts(QUESTION)[2] and part.state == "not_stated"
        assert report.summary.endswith(part.statement)
        assert report.status != "grounded"


async def test_the_writer_is_not_asked_to_answer_a_planner_only_sub_question() -> None:
    question = "What does __exit__ receive, and how does it suppress an exception?"
    added = "What is the history of context managers in Python?"
    script = three_part_script()
    script.sub_questions = [*SUB_QUESTIONS[:2], added]
    requests: list[str] = []

    def respond(call: ModelCall) -> ModelResponse:
        if node_of_request(call.messages) == "summarize":
            requests.append(call.last_user_text)
        return script(call)

    spec = create_research_workflow(
        model=ScriptedModel(responder=respond), tools=[DocsSearch().tool()]
    )
    await spec.execute(question)
    [summarize] = requests
    listed = "\n".join(f"{n}. {q}" for n, q in enumerate(SUB_QUESTIONS[:2], start=1))
    assert f"Its parts (answer each one the passages answer):\n{listed}\n\n" in summarize
    assert added not in summarize.split("Its parts", 1)[1].split("\n\n", 1)[0]


def test_a_claim_that_the_sources_say_nothing_answers_nothing() -> None:
    part = "What is the default port of the server?"
    absent = ClaimRecord(
        claim="The passages do not mention the default port of the server.",
        score=0.9,
        grounded=True,
    )
    [judged] = judge_parts([part], [], [], [absent])
    assert judged.state == "not_stated" and judged.statement.startswith(
        "The indexed documents do not say what is the default port"
    )
    # A fact with a negation is still an answer.
    fact = ClaimRecord(
        claim="The server has no default port unless the port is not specified in a file.",
        score=0.9,
        grounded=True,
    )
    assert judge_parts([part], [], [], [fact])[0].state == "answered"


def test_a_part_asked_with_one_form_of_an_irregular_verb_is_answered_by_another() -> None:
    """ "How fast did the market grow?" is answered by "the market grew 12 percent": the crude
    stem maps an irregular verb's forms to one (before, `grew` and `grow` shared no stem, and
    the answer went on to say the documents do not say how fast the market grew)."""
    from sleuth.grounding.claims import stem
    from sleuth.research.parts import with_answered_parts
    from sleuth.research.state import ClaimRecord, SubQuestionCoverage

    assert stem("grew") == stem("grown") == stem("grow") and stem("bought") == stem("buy")
    entries = [
        SubQuestionCoverage(question="How fast did the CRM market grow?", covered=True),
        SubQuestionCoverage(question="Which penguins buy CRM seats?", covered=False),
    ]
    claim = ClaimRecord(claim="The CRM market grew 12 percent in 2024.", score=0.9, grounded=True)
    answered = with_answered_parts(entries, [claim])
    assert [entry.answered for entry in answered] == [True, False]
