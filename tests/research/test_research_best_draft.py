"""The final report is never worse than the best judged draft, in both runners."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from temporalio.testing import WorkflowEnvironment

from sleuth import create_research_workflow
from sleuth.activities.research_models import ResearchOutcome, ResearchRequest
from sleuth.apps.app import App
from sleuth.research import (
    ClaimRecord,
    Draft,
    QuestionPart,
    ResearchReport,
    ResearchSpec,
    ResearchState,
    best_draft_index,
    better_draft,
    finish,
)
from sleuth.workers.cli_runs import _grounding
from sleuth.workers.worker import build_worker
from sleuth.workflows.research import ResearchWorkflow
from tests.helpers.coverage_scripts import FACTS, QUESTION, REWORDED, DocsSearch, three_part_script
from tests.helpers.research_scripts import scripted_model


async def in_both_runners(
    env: WorkflowEnvironment, make_spec: Callable[[], ResearchSpec], inputs: dict[str, Any]
) -> list[ResearchReport]:
    """The report of one run in-process and of one durable run (`ResearchWorkflow` on the
    time-skipping server), each with a fresh spec."""
    in_process = (await make_spec().execute(inputs)).final_state
    app = App()
    app.research("loop", make_spec())
    task_queue = str(uuid.uuid4())
    async with build_worker(env.client, app, task_queue=task_queue):
        outcome: ResearchOutcome = await env.client.execute_workflow(
            ResearchWorkflow.run,
            ResearchRequest.model_validate({**inputs, "research": "loop"}),
            id=f"research-{uuid.uuid4()}",
            task_queue=task_queue,
        )
    return [in_process, outcome.final_state]


def _draft(index: int, score: float, answered: float, summary: str) -> Draft:
    return Draft(
        index=index,
        node="summarize" if index == 1 else "regenerate",
        grounding_score=score,
        parts_answered=answered,
        summary=summary,
        claims=[ClaimRecord(claim=summary, score=score, grounded=score >= 0.5)],
        parts=[QuestionPart(text="What is X?", state="answered" if answered else "not_stated")],
    )


def test_a_later_draft_replaces_the_best_only_when_better() -> None:
    first = _draft(1, 1.0, 1, "X is one thing.")
    assert better_draft(first, None)
    assert not better_draft(_draft(2, 0.0, 1, "X is two."), first)
    assert not better_draft(_draft(2, 1.0, 1, "X is the same."), first), "equal keeps the earlier"
    assert better_draft(_draft(2, 1.0, 2, "X, and Y."), first), "same score, more parts"
    assert not better_draft(_draft(2, 0.9, 3, "X, Y, Z."), first), "the score comes first"
    drafts = [_draft(1, 0.5, 1, "a"), _draft(2, 1.0, 0, "b"), _draft(3, 0.0, 1, "c")]
    assert best_draft_index(drafts) == 2
    assert best_draft_index([]) == 0


def test_finish_ends_with_the_best_draft_not_the_last() -> None:
    drafts = [_draft(1, 1.0, 1, "X is one thing."), _draft(2, 0.0, 0, "X is made up.")]
    state = ResearchState(
        prompt="What is X?",
        summary=drafts[1].summary,
        claims=drafts[1].claims,
        drafts=drafts,
        grounding_score=0.0,
    )
    done = finish(state, "max_replans")
    assert done.summary == "X is one thing." and done.best_draft == 1
    assert done.grounding_score == 1.0 and done.end_reason == "max_replans"
    assert done.end_detail.startswith("draft 1 of 2 (summarize) is the final report")
    assert "draft 2: 0%" in done.end_detail
    assert done.status == "grounded" and done.confidence == 1.0


async def test_a_grounded_report_is_kept_when_the_replan_after_it_is_worse(
    time_env: WorkflowEnvironment,
) -> None:
    """The issue's case: a complete, 100 % grounded report; the run replans (one part has no
    evidence) and the replan's report is judged 0 %. The grounded report is the final one, in
    both runners."""
    first = f"{FACTS['receive']} {FACTS['suppress']}"

    def make_spec() -> ResearchSpec:
        script = three_part_script(verdicts=[True, False])
        script.summary, script.rewrite = first, f"{REWORDED['receive']} {REWORDED['suppress']}"
        return create_research_workflow(
            model=scripted_model(script),
            tools=[DocsSearch(withheld="finally", withheld_calls=10).tool()],
            max_replans=1,
            max_regenerations=0,
        )

    for report in await in_both_runners(time_env, make_spec, {"prompt": QUESTION}):
        assert report.replan_count == 1 and report.score_history == [1.0, 0.0]
        assert [d.grounding_score for d in report.drafts] == [1.0, 0.0]
        assert report.best_draft == 1 and report.grounding_score == 1.0
        assert report.summary.startswith(first)
        assert REWORDED["receive"] not in report.summary
        assert all(claim.grounded for claim in report.claims)
        assert report.end_reason == "max_replans"
        assert report.end_detail.startswith("draft 1 of 2 (summarize) is the final report")
        # The part the sources never answered is said so, in words.
        assert [p.state for p in report.parts] == ["answered", "answered", "not_stated"]
        assert report.parts[2].statement in report.summary
        assert report.status == "partial"


async def test_the_memo_and_sleuth_runs_show_the_final_report_not_the_last_draft(
    time_env: WorkflowEnvironment,
) -> None:
    """After a worse replan the durable run's memo (what `sleuth runs` reads) holds the final
    report's score and status, never the last draft's 0 %."""
    script = three_part_script(verdicts=[True, False])
    script.summary = f"{FACTS['receive']} {FACTS['suppress']}"
    script.rewrite = f"{REWORDED['receive']} {REWORDED['suppress']}"
    app = App()
    app.research(
        "loop",
        create_research_workflow(
            model=scripted_model(script),
            tools=[DocsSearch(withheld="finally", withheld_calls=10).tool()],
            max_replans=1,
            max_regenerations=0,
        ),
    )
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        handle = await time_env.client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt=QUESTION, research="loop"),
            id=f"research-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        outcome = await handle.result()
        progress = await handle.query(ResearchWorkflow.progress)
    assert outcome.final_state.score_history == [1.0, 0.0]
    memo = await (await handle.describe()).memo()
    assert memo["grounding_score"] == 1.0 and memo["best_draft"] == 1
    assert memo["research_status"] == "partial" and memo["evaluations"] == 2
    assert _grounding(None, memo) == 1.0
    assert progress.grounding_score == 1.0 and progress.research_status == "partial"
