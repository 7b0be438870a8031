"""Per-turn grounding also guards the submit tool: an ungrounded submission is sent back."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from sleuth import create_deepagent, tool
from sleuth.agent import Agent, GroundingSettings
from sleuth.models.scripted import ScriptedModel, structured, tool_call
from sleuth.termination import ToolCalled

SUPPORTED = "Acme CRM costs forty dollars per seat each month."
INVENTED = "Acme CRM has twelve million paying customers worldwide."


class Report(BaseModel):
    findings: list[str]
    confidence: float


def verdicts(*supported: bool) -> Any:
    return structured(
        {
            "verdicts": [
                {
                    "claim": n,
                    "supported": ok,
                    "score": 1.0 if ok else 0.0,
                    "evidence": [1] if ok else [],
                }
                for n, ok in enumerate(supported, start=1)
            ]
        }
    )


def build(
    model: ScriptedModel, judge: ScriptedModel, submitted: list[Report], rounds: int
) -> Agent:
    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return "Acme CRM pricing: forty dollars per seat each month."

    @tool
    def submit(report: Report) -> str:
        """Submit the report."""
        submitted.append(report)
        return "submitted"

    return Agent(
        model,
        [lookup, submit],
        submit_tool="submit",
        termination=ToolCalled("submit", require_success=True),
        grounding=GroundingSettings(judge=judge, threshold=0.9, max_research_rounds=rounds),
    )


def test_an_ungrounded_submission_is_rejected_and_the_tool_does_not_run() -> None:
    model = ScriptedModel(
        [
            tool_call("lookup", topic="pricing"),
            tool_call("submit", report={"findings": [SUPPORTED, INVENTED], "confidence": 0.9}),
            tool_call("lookup", topic="customers"),
            tool_call("submit", report={"findings": [SUPPORTED], "confidence": 0.9}),
        ]
    )
    judge = ScriptedModel([verdicts(True, False), verdicts(True)])
    submitted: list[Report] = []

    result = build(model, judge, submitted, rounds=1).run_sync("Research Acme CRM.")

    assert [r.findings for r in submitted] == [[SUPPORTED]]
    first_submit = [e for e in result.evidence if e.tool == "submit"][0]
    assert not first_submit.success and first_submit.error == "ungrounded_submission"
    assert INVENTED in first_submit.output and "Submission rejected" in first_submit.output
    assert result.parsed == {"findings": [SUPPORTED], "confidence": 0.9}
    assert result.grounding is not None and result.grounding.score == 1.0
    model.assert_complete()
    judge.assert_complete()


def test_with_no_rounds_left_the_ungrounded_claims_are_dropped_from_the_submission() -> None:
    model = ScriptedModel(
        [
            tool_call("lookup", topic="pricing"),
            tool_call("submit", report={"findings": [SUPPORTED, INVENTED], "confidence": 0.9}),
        ]
    )
    judge = ScriptedModel([verdicts(True, False)])
    submitted: list[Report] = []

    result = build(model, judge, submitted, rounds=0).run_sync("Research Acme CRM.")

    assert [r.findings for r in submitted] == [[SUPPORTED]]
    assert result.parsed == {"findings": [SUPPORTED], "confidence": 0.9}
    assert result.grounding is not None and [c.claim for c in result.grounding.ungrounded] == [
        INVENTED
    ]


def test_create_deepagent_grounds_submissions_by_default() -> None:
    model = ScriptedModel(
        [
            tool_call("lookup", topic="pricing"),
            tool_call("submit", report={"findings": [INVENTED], "confidence": 0.95}),
            tool_call("submit", report={"findings": [SUPPORTED], "confidence": 0.95}),
        ]
    )
    judge = ScriptedModel([verdicts(False), verdicts(True)])
    submitted: list[Report] = []

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return "Acme CRM pricing: forty dollars per seat each month."

    @tool
    def submit(report: Report) -> str:
        """Submit the report."""
        submitted.append(report)
        return "submitted"

    agent = create_deepagent(
        model=model,
        tools=[lookup, submit],
        system_prompt="Research, then submit.",
        submit_tool="submit",
        judge_model=judge,
        reflexion=False,
    )
    result = agent.run_sync("Research Acme CRM.")

    assert [r.findings for r in submitted] == [[SUPPORTED]]
    assert result.stop_reason.startswith("tool_called:submit")
