"""Per-turn grounding also guards the submit tool: an ungrounded submission is sent back."""

from __future__ import annotations

from pydantic import BaseModel

from sleuth import create_deepagent, tool
from sleuth.agent import Agent, GroundingSettings
from sleuth.agent.termination import ToolCalled
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call

SUPPORTED = "Acme CRM costs forty dollars per seat each month."
INVENTED = "Acme CRM has twelve million paying customers worldwide."


class Report(BaseModel):
    findings: list[str]
    confidence: float


def claim_judge() -> ScriptedModel:
    """The claim-level judge, scripted: one question per claim; Yes for the supported claim,
    No for anything else (as a judge without token probabilities answers)."""

    def respond(call: ModelCall) -> ModelResponse:
        claim = call.last_user_text.split("Claim: ", 1)[1].split("\n", 1)[0]
        return text("Yes" if claim == SUPPORTED else "No")

    return ScriptedModel(responder=respond)


def asked(judge: ScriptedModel) -> list[str]:
    """The claims the judge was asked about, in order."""
    return [c.last_user_text.split("Claim: ", 1)[1].split("\n", 1)[0] for c in judge.calls]


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
    judge = claim_judge()
    submitted: list[Report] = []

    result = build(model, judge, submitted, rounds=1).run_sync("Research Acme CRM.")

    assert [r.findings for r in submitted] == [[SUPPORTED]]
    first_submit = [e for e in result.evidence if e.tool == "submit"][0]
    assert not first_submit.success and first_submit.error == "ungrounded_submission"
    assert INVENTED in first_submit.output and "Submission rejected" in first_submit.output
    assert result.parsed == {"findings": [SUPPORTED], "confidence": 0.9}
    assert result.grounding is not None and result.grounding.score == 1.0
    assert sorted(asked(judge)) == sorted([SUPPORTED, INVENTED, SUPPORTED])
    model.assert_complete()


def test_with_no_rounds_left_the_ungrounded_claims_are_dropped_from_the_submission() -> None:
    model = ScriptedModel(
        [
            tool_call("lookup", topic="pricing"),
            tool_call("submit", report={"findings": [SUPPORTED, INVENTED], "confidence": 0.9}),
        ]
    )
    judge = claim_judge()
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
    judge = claim_judge()
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


def test_a_submission_made_without_evidence_is_not_grounded() -> None:
    """No tool call before the submission: there is nothing to ground it in, so it is sent back
    while research rounds are left, and its claims are dropped after that."""
    model = ScriptedModel(
        [
            tool_call("submit", report={"findings": [SUPPORTED], "confidence": 0.9}),
            tool_call("submit", report={"findings": [SUPPORTED], "confidence": 0.8}),
        ]
    )
    judge = claim_judge()
    submitted: list[Report] = []

    result = build(model, judge, submitted, rounds=1).run_sync("Research Acme CRM.")

    first_submit = [e for e in result.evidence if e.tool == "submit"][0]
    assert first_submit.error == "ungrounded_submission" and "no evidence" in first_submit.output
    assert [r.findings for r in submitted] == [[]]
    assert result.grounding is not None and result.grounding.score == 0.0
    assert judge.calls == []  # with no evidence there is nothing to ask the judge
