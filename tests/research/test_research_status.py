"""What a finished run says about itself: rejected claims kept out of the answer, a confidence
derived from the grounding, one citation numbering everywhere, the end state, and the exit codes
of `sleuth research`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from sleuth import create_research_workflow
from sleuth.activities.research_models import ResearchOutcome
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import Node, ResearchReport, ResearchSpec, node_of_request
from sleuth.tools import tool
from sleuth.workers.cli_research import EXIT_UNGROUNDED, exit_code, format_report
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled
from tests.research.test_research_best_draft import in_both_runners

ROOT = Path(__file__).resolve().parents[2]
ROWS = [
    {"text": "Alpha ships red widgets in 2024.", "source": "alpha.md"},
    {"text": "Beta ships blue widgets in 2023.", "source": "beta.md"},
    {"text": "Gamma ships green widgets in 2022.", "source": "gamma.md"},
]
QUESTION = "Which widgets do Alpha and Gamma ship?"
WRONG = "Beta ships blue widgets in 2019 [2]."


class Answer(BaseModel):
    summary: str
    key_findings: list[str]
    sources: list[str]
    confidence: float


@tool
def search_widgets(query: str) -> str:
    """Search the widget catalogue."""
    return json.dumps(ROWS)


def writer(answer: dict[str, object]) -> ScriptedModel:
    """A model whose execute agent searches once, whose writers answer `answer` (as JSON), and
    whose judge doubts only a claim with a year the catalogue does not hold (2019)."""

    def respond(call: ModelCall) -> ModelResponse:
        node = node_of_request(call.messages)
        if node == Node.PLAN:
            return text(json.dumps([QUESTION]))
        if node == Node.EXECUTE:
            if any(m.role == "tool" for m in call.messages):
                return text("Found the catalogue.")
            return tool_call("search_widgets", query="widgets")
        if node == Node.GROUNDING_EVAL:
            return text("No" if "2019" in call.messages[-1].content else "Yes")
        if node == Node.CAUSAL_INFERENCE:
            return text("")
        return text(json.dumps(answer))

    return ScriptedModel(responder=respond)


def spec_answering(answer: dict[str, object]) -> ResearchSpec:
    return create_research_workflow(
        model=writer(answer),
        tools=[search_widgets],
        output_schema=Answer,
        max_replans=0,
        max_regenerations=0,
        causal_inference=False,
    )


def marks(text: str) -> list[int]:
    return [int(n) for group in re.findall(r"\[([\d, ]+)\]", text) for n in group.split(",")]


async def test_one_citation_numbering_across_summary_sources_and_structured_output(
    time_env: WorkflowEnvironment,
) -> None:
    """The writer cites its passages [3] and [1]; the report's Sources list is what it cites, in
    order, and every `[n]` of the summary, the structured output, the CLI and the JSON is a
    number of that list. The empty `key_findings` and `sources` are filled, and the writer's
    confidence (0.99) is replaced by the derived one."""
    answer = {
        "summary": "Gamma ships green widgets in 2022 [3]. Alpha ships red widgets in 2024 [1].",
        "key_findings": [],
        "sources": [],
        "confidence": 0.99,
    }
    runs = await in_both_runners(time_env, lambda: spec_answering(answer), {"prompt": QUESTION})
    for report in runs:
        assert [s.split("#")[0] for s in report.sources] == ["gamma.md", "alpha.md"]
        assert report.summary == (
            "Gamma ships green widgets in 2022 [1]. Alpha ships red widgets in 2024 [2]."
        )
        typed = report.parsed(Answer)
        assert typed is not None
        assert typed.summary == report.summary and typed.sources == report.sources
        assert typed.key_findings == [c.claim for c in report.claims if c.grounded]
        assert all(set(marks(f)) <= {1, 2} for f in typed.key_findings)
        assert typed.confidence == report.confidence == 1.0
        assert report.status == "grounded"
        outcome = ResearchOutcome(
            final_state=report, state_ref="-", research="loop", workflow_id="-", run_id="-"
        )
        printed = format_report(outcome, "http://ui")
        assert f"Sources\n-------\n[1] {report.sources[0]}\n[2] {report.sources[1]}\n" in printed
        for claim in report.claims:
            for citation in claim.citations:
                number = report.sources.index(citation.reference) + 1
                assert f"[{number}] {citation.reference}: " in printed
        data = json.loads(outcome.model_dump_json())["final_state"]
        assert data["sources"] == data["structured_output"]["sources"] == report.sources
        assert max(marks(data["summary"])) <= len(data["sources"])


async def test_rejected_claims_are_kept_out_of_the_answer(time_env: WorkflowEnvironment) -> None:
    answer = {
        "summary": f"Alpha ships red widgets in 2024 [1]. {WRONG}",
        "key_findings": ["Alpha ships red widgets in 2024 [1].", WRONG],
        "sources": ["alpha.md", "beta.md"],
        "confidence": 0.9,
    }
    runs = await in_both_runners(time_env, lambda: spec_answering(answer), {"prompt": QUESTION})
    for report in runs:
        [rejected] = [c for c in report.claims if not c.grounded]
        assert "2019" in rejected.claim
        assert "2019" not in report.summary
        typed = report.parsed(Answer)
        assert typed is not None and not any("2019" in f for f in typed.key_findings)
        assert "2019" not in typed.summary
        assert any("2019" in removed for removed in report.removed_claims)
        # Nothing cites beta.md any more: the list holds what the answer cites.
        assert [s.split("#")[0] for s in report.sources] == ["alpha.md"]
        assert typed.sources == report.sources
        assert report.grounding_score == 0.5
        # Derived: half the claims grounded; the question's one part answered.
        assert report.confidence == typed.confidence == 0.5
        assert report.status == "partial"


async def test_an_unanswerable_question_ends_not_found_with_no_confidence() -> None:
    answer = {"summary": WRONG, "key_findings": [WRONG], "sources": ["beta.md"], "confidence": 1}
    report = (await spec_answering(answer).execute("What colour are Delta's widgets?")).final_state
    assert report.status == "not_found" and report.confidence == 0.0
    assert report.grounding_score == 0.0 and report.sources == []
    [part] = report.parts
    assert part.state == "not_stated"
    assert report.summary == "The indexed documents do not say what colour are Delta's widgets."
    typed = report.parsed(Answer)
    assert typed is not None and typed.confidence == 0.0 and typed.key_findings == []
    assert exit_code(report) == EXIT_UNGROUNDED and exit_code(report, allow_ungrounded=True) == 0


def test_exit_codes_follow_the_status() -> None:
    base = {"prompt": "q", "grounding_threshold": 0.65, "end_reason": "grounded"}
    for status, code in (("grounded", 0), ("partial", 3), ("not_found", 3)):
        report = ResearchReport.model_validate({**base, "status": status})
        assert exit_code(report) == code
        assert exit_code(report, allow_ungrounded=True) == 0
    # A report stored before runs had a status (a durable history's outcome) gets one.
    older = ResearchReport.model_validate({**base, "end_reason": "max_replans"})
    assert older.status == "partial"


@pytest.mark.slow
async def test_sleuth_research_exits_3_when_ungrounded_unless_allowed(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    address = dev_env.client.service_client.config.target_host
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "PYTHONPATH": str(ROOT),
        "RESEARCH_TOOL_LOG": str(tmp_path / "tools.txt"),
    }
    env.pop("RESEARCH_HOLD", None)
    app = ["--app", "tests.helpers.apps.research_app:app", "--research", "crash"]

    def research(prompt: str, *flags: str) -> subprocess.CompletedProcess[str]:
        queue = ["--task-queue", str(uuid.uuid4())]
        return run_sleuth(
            ["research", prompt, *app, *queue, *flags], cwd=ROOT, env=env, timeout=scaled(120)
        )

    grounded = research("How many widgets did Acme ship in 2024?")
    assert grounded.returncode == 0, grounded.stdout + grounded.stderr
    assert "Status: grounded" in grounded.stdout
    unanswerable = "Who founded Acme, and what colour are its widgets?"
    ungrounded = research(unanswerable, "--json")
    assert ungrounded.returncode == EXIT_UNGROUNDED, ungrounded.stderr
    outcome = ResearchOutcome.model_validate(json.loads(ungrounded.stdout))
    assert outcome.final_state.status == "not_found"
    assert "The indexed documents do not say who founded Acme." in outcome.final_state.summary
    allowed = research(unanswerable, "--allow-ungrounded")
    assert allowed.returncode == 0, allowed.stderr
    assert "Status: not_found" in allowed.stdout


async def test_the_answer_has_no_dangling_references_and_no_repeated_findings() -> None:
    answer = {
        "summary": "Alpha ships red widgets in 2024 (see section 4.2) [1]. Gamma ships green "
        "widgets in 2022, as described in section 3 [3]. Alpha ships red widgets in 2024 [1].",
        "key_findings": ["Alpha ships red widgets in 2024 [1].", "See the table below."],
        "sources": [],
        "confidence": 0.5,
    }
    report = (await spec_answering(answer).execute(QUESTION)).final_state
    assert report.summary == (
        "Alpha ships red widgets in 2024 [1]. Gamma ships green widgets in 2022 [2]."
    )
    typed = report.parsed(Answer)
    assert typed is not None and typed.summary == report.summary
    assert not any("below" in finding or "section" in finding for finding in typed.key_findings)
