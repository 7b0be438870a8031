"""`ResearchWorkflow` on the time-skipping server: every path, retries, config errors, the query,
the typed report, the one end decision and continue-as-new."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from sleuth import App, create_research_workflow
from sleuth.activities.research import ResearchActivities
from sleuth.activities.research_models import (
    FinishInput,
    ResearchNodeConfig,
    ResearchOutcome,
    ResearchProgress,
    ResearchRequest,
)
from sleuth.models.base import ModelResponse, RetryableModelError
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import NODES, Node, ResearchState, node_of_request
from sleuth.runtime.artifacts import default_artifact_store, get_json, put_json
from sleuth.workers.worker import build_worker
from sleuth.workflows.research import ResearchWorkflow
from tests.helpers.coverage_scripts import (
    FACTS,
    QUESTION,
    SUB_QUESTIONS,
    DocsSearch,
    three_part_script,
)
from tests.helpers.research_scripts import FACT, ResearchScript, lookup, scripted_model


def research_app(responder: Callable[[ModelCall], ModelResponse], **options: object) -> App:
    app = App()
    app.research(
        "market",
        create_research_workflow(
            model=ScriptedModel(responder=responder), tools=[lookup], **options
        ),  # type: ignore[arg-type]
    )
    return app


async def run(
    env: WorkflowEnvironment, app: App, request: ResearchRequest
) -> tuple[ResearchOutcome, list[object], ResearchProgress]:
    task_queue = str(uuid.uuid4())
    client: Client = env.client
    async with build_worker(client, app, task_queue=task_queue):
        handle = await client.start_workflow(
            ResearchWorkflow.run, request, id=f"research-{uuid.uuid4()}", task_queue=task_queue
        )
        outcome = await handle.result()
        progress = await handle.query(ResearchWorkflow.progress)
        history = await handle.fetch_history()
    return outcome, list(history.events), progress


def activity_types(events: list[object]) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name  # type: ignore[attr-defined]
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED  # type: ignore[attr-defined]
    ]


def activity_summaries(events: list[object]) -> list[str]:
    return [
        json.loads(e.user_metadata.summary.data)  # type: ignore[attr-defined]
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED  # type: ignore[attr-defined]
    ]


async def test_grounded_at_once(time_env: WorkflowEnvironment) -> None:
    app = research_app(ResearchScript(verdicts=[True]))
    outcome, events, progress = await run(
        time_env, app, ResearchRequest(prompt="CRM?", research="market")
    )
    state = outcome.final_state
    assert state["end_reason"] == "grounded" and state["grounding_score"] == 1.0
    assert state["nodes"] == ["plan", "execute", "causal_inference", "summarize", "grounding_eval"]
    assert [e["tool"] for e in state["evidence"]] == ["lookup"]
    assert state["claims"][0]["evidence"] == [1]
    summaries = activity_summaries(events)
    # The search-attribute lookup, the plan, four nodes and the report.
    assert len(summaries) == 7 and all(s.startswith("market: ") for s in summaries)
    assert summaries[-1] == "market: report (grounded)"
    assert progress.status == "done" and progress.node == "grounding_eval"
    assert progress.nodes_run == state["nodes"] and progress.score_history == [1.0]


async def test_regenerate_then_grounded(time_env: WorkflowEnvironment) -> None:
    app = research_app(ResearchScript(verdicts=[False, True]))
    outcome, events, progress = await run(
        time_env, app, ResearchRequest(prompt="q?", research="market")
    )
    state = outcome.final_state
    assert (state["regeneration_count"], state["replan_count"]) == (1, 0)
    assert state["nodes"][-2:] == ["regenerate", "grounding_eval"]
    assert progress.regeneration_count == 1 and progress.score_history == [0.0, 1.0]
    assert any(s.startswith("market: regenerate 1/1") for s in activity_summaries(events))


async def test_replan_then_grounded_is_in_result_and_history(time_env: WorkflowEnvironment) -> None:
    app = research_app(ResearchScript(verdicts=[False, False, True]))
    outcome, events, progress = await run(
        time_env, app, ResearchRequest(prompt="q?", research="market")
    )
    state = outcome.final_state
    assert state["replan_count"] == 1 and state["end_reason"] == "grounded"
    assert state["nodes"].count("execute") == 2 and len(state["evidence"]) == 2
    assert progress.replan_count == 1
    assert any(s.startswith("market: replan 1/2") for s in activity_summaries(events))
    memo_updates = [
        e.workflow_properties_modified_event_attributes.upserted_memo  # type: ignore[attr-defined]
        for e in events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED  # type: ignore[attr-defined]
    ]
    replan_counts = [
        json.loads(m.fields["replan_count"].data)
        for m in memo_updates
        if "replan_count" in m.fields
    ]
    assert replan_counts[-1] == 1


async def test_both_exhausted(time_env: WorkflowEnvironment) -> None:
    app = research_app(ResearchScript(verdicts=[False]))
    request = ResearchRequest(prompt="q?", research="market", max_replans=1, max_regenerations=1)
    outcome, _, progress = await run(time_env, app, request)
    state = outcome.final_state
    assert (state["replan_count"], state["regeneration_count"]) == (1, 1)
    assert state["end_reason"] == "max_replans" and progress.end_reason == "max_replans"
    assert state["score_history"] == [0.0, 0.0, 0.0]


async def test_transient_model_failure_is_retried(time_env: WorkflowEnvironment) -> None:
    script = ResearchScript()
    failures: list[str] = []

    def flaky(call: ModelCall) -> ModelResponse:
        if node_of_request(call.messages) == "summarize" and not failures:
            failures.append("summarize")
            raise RetryableModelError("provider overloaded (529)", status_code=529)
        return script(call)

    request = ResearchRequest(
        prompt="q?",
        research="market",
        nodes={"summarize": {"retry": {"initial_interval_seconds": 0.1}}},
    )
    outcome, events, _ = await run(time_env, research_app(flaky), request)
    assert failures == ["summarize"]
    assert outcome.final_state["end_reason"] == "grounded"
    attempts = [
        e.activity_task_started_event_attributes.attempt  # type: ignore[attr-defined]
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED  # type: ignore[attr-defined]
    ]
    assert 2 in attempts


async def test_unknown_research_name_fails_at_once(time_env: WorkflowEnvironment) -> None:
    app = research_app(ResearchScript())
    with pytest.raises(WorkflowFailureError) as failure:
        await run(time_env, app, ResearchRequest(prompt="q?", research="nope"))
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.non_retryable
    assert "unknown research config 'nope'; registered: market" in cause.message


async def test_unknown_node_override_fails_at_once(time_env: WorkflowEnvironment) -> None:
    app = research_app(ResearchScript())
    with pytest.raises(WorkflowFailureError) as failure:
        await run(
            time_env, app, ResearchRequest(prompt="q?", research="market", nodes={"exec": {}})
        )
    assert "unknown research node(s) in 'nodes': exec" in str(failure.value.cause)


async def test_five_megabytes_of_evidence_keep_the_history_small(
    time_env: WorkflowEnvironment,
) -> None:
    megabyte = 1_000_000

    def big_lookup(part: int) -> str:
        """Read one part of the bulky market dataset."""
        return FACT + " " + "x" * (megabyte - len(FACT) - 1)

    def execute_turn(call: ModelCall) -> ModelResponse:
        done = sum(1 for m in call.messages if m.role == "tool")
        return tool_call("big_lookup", part=done + 1) if done < 5 else text(FACT)

    app = App()
    app.research(
        "bulky",
        create_research_workflow(
            stop_when_covered=False,  # several tool calls in one execute step
            model=scripted_model(ResearchScript(execute_turn=execute_turn)),
            tools=[big_lookup],
        ),
    )
    outcome, events, _ = await run(time_env, app, ResearchRequest(prompt="q?", research="bulky"))
    full = ResearchState.model_validate(get_json(default_artifact_store(), outcome.state_ref))
    assert sum(len(e.output) for e in full.evidence) >= 5 * megabyte
    history_bytes = sum(e.ByteSize() for e in events)  # type: ignore[attr-defined]
    assert history_bytes < 256 * 1024, f"history is {history_bytes} bytes"
    assert outcome.final_state["evidence_count"] == 5
    assert outcome.final_state["end_reason"] == "grounded"


def completed_results(events: list[object]) -> list[dict[str, object]]:
    """The JSON result of every completed activity, in order."""
    return [
        json.loads(
            e.activity_task_completed_event_attributes.result.payloads[0].data  # type: ignore[attr-defined]
        )
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED  # type: ignore[attr-defined]
    ]


async def test_the_workflow_alone_decides_the_end(time_env: WorkflowEnvironment) -> None:
    app = research_app(ResearchScript(verdicts=[False, False, True]))
    outcome, events, progress = await run(
        time_env, app, ResearchRequest(prompt="q?", research="market")
    )
    # The nodes hand back a state reference and the digest (and the step's last live events),
    # nothing more: no node carries a report, and none decides the run is over.
    # The first result is the search-attribute lookup's, the last the report's.
    node_results = completed_results(events)[1:-1]
    assert len(node_results) == len(outcome.final_state.nodes) == 12
    for result in node_results:
        assert set(result) == {"state_ref", "digest", "live_events"}
        assert "score_history" not in result["digest"]  # type: ignore[operator]
    # After the last grounding eval the workflow called the one finish step, with its reason.
    types = activity_types(events)
    assert types[-2:] == ["research.grounding_eval", "research.finish"]
    assert types.count("research.finish") == 1
    assert outcome.final_state.end_reason == progress.end_reason == "grounded"
    assert outcome.final_state.score_history == progress.score_history == [0.0, 0.0, 1.0]


async def test_finish_records_the_reason_it_is_given_and_never_routes() -> None:
    app = research_app(ResearchScript())
    spec = app.get_research("market")
    # Never judged: the router would send this run to execute, not end it.
    state = spec.initial_state("How fast did the CRM market grow?")  # type: ignore[attr-defined]
    store = default_artifact_store()
    finished = await ActivityEnvironment().run(
        ResearchActivities(app, store).finish,
        FinishInput(research="market", state_ref=put_json(store, state), end_reason="max_replans"),
    )
    assert finished.report.end_reason == "max_replans"
    assert finished.report.prompt == state.prompt and finished.report.nodes == []
    stored = ResearchState.model_validate(get_json(store, finished.state_ref))
    assert stored.end_reason == "max_replans"


def test_the_node_config_has_one_field_per_node_the_finish_step_and_the_review_subject() -> None:
    assert list(ResearchNodeConfig.model_fields) == [*NODES, "finish", "review_subject"]
    config = ResearchNodeConfig.with_overrides({"grounding_eval": {"start_to_close_seconds": 7}})
    assert config.for_node(Node.GROUNDING_EVAL).start_to_close_seconds == 7


class Report(BaseModel):
    summary: str
    key_findings: list[str]
    confidence: float


def report_answer(call: ModelCall) -> ModelResponse:
    if node_of_request(call.messages) in (Node.SUMMARIZE, Node.REGENERATE):
        return text(
            json.dumps(
                {
                    "summary": FACT,
                    "key_findings": ["Gartner measured the growth."],
                    "confidence": 0.9,
                }
            )
        )
    return ResearchScript()(call)


async def test_the_durable_report_comes_back_typed_with_its_schema(
    time_env: WorkflowEnvironment,
) -> None:
    # The writer's own rewrite (not the requote default, which would drop the finding the checks
    # doubt) keeps the list non-empty: the typed report is what is under test.
    app = research_app(report_answer, output_schema=Report, regenerate="rewrite")
    outcome, _, _ = await run(time_env, app, ResearchRequest(prompt="q?", research="market"))
    report = outcome.final_state
    # JSON on the wire; one call gives the instance back.
    assert isinstance(report.structured_output, dict) and report.output_schema == "Report"
    typed = report.parsed(Report)
    # The finding the checks doubt is out of the answer; the list it leaves empty is filled from
    # the grounded claims, and the confidence is derived from the grounding.
    assert isinstance(typed, Report) and typed.key_findings == [FACT]
    assert "Gartner measured the growth." in report.removed_claims
    assert typed.confidence == report.confidence

    class Other(BaseModel):
        verdict: str

    with pytest.raises(ValueError, match="does not fit Other \\(it was written against Report\\)"):
        report.parsed(Other)

    # The in-process runner gives the same report, its structured output already an instance.
    local = await app.get_research("market").execute("q?")  # type: ignore[attr-defined]
    assert isinstance(local.final_state.structured_output, Report)
    assert local.final_state.structured_output == typed
    assert local.final_state.model_dump(mode="json") == report.model_dump(mode="json")


async def test_a_run_past_its_history_budget_continues_as_new(
    time_env: WorkflowEnvironment,
) -> None:
    app = research_app(ResearchScript(verdicts=[False, False, True]))
    request = ResearchRequest(prompt="q?", research="market", history_event_budget=20)
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        handle = await time_env.client.start_workflow(
            ResearchWorkflow.run, request, id=f"research-{uuid.uuid4()}", task_queue=task_queue
        )
        outcome = await handle.result()
        progress = await handle.query(ResearchWorkflow.progress)
        first_run = await time_env.client.get_workflow_handle(
            handle.id, run_id=handle.first_execution_run_id
        ).fetch_history()
    assert outcome.run_id != handle.first_execution_run_id
    last = first_run.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    carried = json.loads(
        last.workflow_execution_continued_as_new_event_attributes.input.payloads[0].data
    )["resume"]
    assert set(carried) == {"state_ref", "digest", "progress", "review_remark", "stream"}
    # The event stream's latest events go along, so a follower keeps its offset.
    assert carried["stream"]["log"][0]["topic"] == "events"
    # Every run stayed near its budget, and the graph went on where the last run stopped.
    assert len(first_run.events) < 40
    assert progress.runs > 2
    assert outcome.final_state.nodes == progress.nodes_run
    assert len(outcome.final_state.nodes) == 12
    assert outcome.final_state.replan_count == 1 and outcome.final_state.end_reason == "grounded"


# -- plan, one execute step per sub-question, coverage --------------------------------------------


def docs_app(script: ResearchScript, docs: DocsSearch) -> App:
    app = App()
    app.research(
        "docs", create_research_workflow(model=scripted_model(script), tools=[docs.tool()])
    )
    return app


async def test_a_three_part_question_runs_a_plan_and_one_execute_per_part(
    time_env: WorkflowEnvironment,
) -> None:
    docs, script = DocsSearch(), three_part_script()
    outcome, events, progress = await run(
        time_env, docs_app(script, docs), ResearchRequest(prompt=QUESTION, research="docs")
    )
    report = outcome.final_state
    assert docs.queries == SUB_QUESTIONS
    # One model turn per part: each search's results cover the part, which ends its step.
    assert script.seen[:4] == ["plan", "execute", "execute", "execute"]
    assert script.seen[4] == "causal_inference"
    # The search-attribute lookup comes first, then the plan and one execute per part.
    types = activity_types(events)[1:]
    assert types[:4] == ["research.plan", *["research.execute"] * 3]
    summaries = activity_summaries(events)[1:]
    assert summaries[0] == "docs: plan (split the question into sub-questions)"
    assert summaries[1:4] == [
        f"docs: execute sub-question {n}/3 (agent tool loop gathers evidence)" for n in (1, 2, 3)
    ]
    assert [entry.question for entry in report.coverage] == SUB_QUESTIONS
    assert all(entry.covered for entry in report.coverage)
    assert report.coverage[0].passages[0].text == FACTS["receive"]
    assert report.end_reason == "grounded" and progress.nodes_run == report.nodes


async def test_an_uncovered_part_replans_durably(time_env: WorkflowEnvironment) -> None:
    docs = DocsSearch(withheld="finally")
    outcome, events, _ = await run(
        time_env,
        docs_app(three_part_script(), docs),
        ResearchRequest(prompt=QUESTION, research="docs"),
    )
    report = outcome.final_state
    assert report.replan_count == 1 and report.regeneration_count == 0
    assert docs.queries == [*SUB_QUESTIONS, SUB_QUESTIONS[2]]
    summaries = activity_summaries(events)
    assert "docs: replan 1/2 (1 part of the question not found)" in summaries
    assert "docs: execute sub-question 3/3 again after replan 1" in summaries
    assert all(entry.covered for entry in report.coverage)
    assert report.end_reason == "grounded"


async def test_a_part_the_report_leaves_unanswered_is_quoted_in_durably(
    time_env: WorkflowEnvironment,
) -> None:
    script = three_part_script()
    # The part left out asks for a single fact: quoting its passage answers it (a comparison
    # would be rewritten by the writer instead).
    script.summary = script.rewrite = f"{FACTS['receive']} {FACTS['finally']}"
    outcome, events, _ = await run(
        time_env,
        docs_app(script, DocsSearch()),
        ResearchRequest(prompt=QUESTION, research="docs"),
    )
    report = outcome.final_state
    assert "docs: regenerate 1/1 (1 part of the question unanswered)" in activity_summaries(events)
    number = next(n for n, s in enumerate(report.sources, 1) if s.startswith("reference#suppress"))
    assert report.summary.endswith(f"{FACTS['suppress'][:-1]} [{number}].")
    assert [entry.answered for entry in report.coverage] == [True, True, True]
    assert report.status == "grounded" and report.best_draft == 2
    assert report.regeneration_count == 1 and report.end_reason == "grounded"


async def test_the_durable_report_lists_each_finding_and_source_once(
    time_env: WorkflowEnvironment,
) -> None:
    repeated = {
        "summary": "The CRM market grew 12 percent in 2024. Gartner measured the growth.",
        "key_findings": [
            "The CRM market grew 12 percent in 2024",
            "the CRM market grew 12 percent in 2024, according to Gartner.",
            "Gartner measured the growth.",
        ],
        "confidence": 0.9,
    }

    def respond(call: ModelCall) -> ModelResponse:
        if node_of_request(call.messages) in (Node.SUMMARIZE, Node.REGENERATE):
            return text(json.dumps(repeated))
        return ResearchScript()(call)

    app = research_app(respond, output_schema=Report, regenerate="rewrite")
    outcome, _, _ = await run(time_env, app, ResearchRequest(prompt="q?", research="market"))
    report = outcome.final_state
    once = [
        "the CRM market grew 12 percent in 2024, according to Gartner.",
        "Gartner measured the growth.",
    ]
    typed = report.parsed(Report)
    # Each finding judged once; the one the judge rejected is kept out of the answer.
    assert typed is not None and typed.key_findings == once[:1]
    assert report.removed_claims == once[1:]
    assert [c.claim for c in report.claims] == once
    # One source, once (located at the quoted sentence: `gartner-2024.pdf#chars a-b`).
    assert [source.split("#")[0] for source in report.sources] == ["gartner-2024.pdf"]
