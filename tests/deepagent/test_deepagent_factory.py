"""create_deepagent: exit condition, submit rejection, token knobs, reflexion and grounding."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from sleuth import Agent, create_deepagent, get_event_bus, run_context, tool
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call


class Report(BaseModel):
    summary: str
    sources: list[str]
    confidence: float = Field(ge=0.0, le=1.0)


@tool
def submit_report(result: Report) -> str:
    """Submit the finished report."""
    if not result.sources:
        raise ValueError("a report needs at least one source")
    return "submitted"


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"{topic}: the market grew 12% in 2024 according to the analyst survey"


def good_report(confidence: float = 0.9) -> dict:
    return {"result": {"summary": "CRM grew 12%", "sources": ["survey"], "confidence": confidence}}


async def test_returns_a_plain_agent_with_the_documented_exit_condition() -> None:
    agent = create_deepagent(
        model=ScriptedModel(),
        tools=[submit_report],
        submit_tool="submit_report",
        min_confidence=0.8,
        max_iterations=7,
    )
    assert type(agent) is Agent
    assert repr(agent.termination) == (
        "((ToolCalled('submit_report', require_success=True) & ConfidenceMet(0.8))"
        " | MaxIterations(7))"
    )
    budgeted = create_deepagent(
        model=ScriptedModel(),
        tools=[submit_report],
        submit_tool="submit_report",
        total_token_budget=500,
    )
    assert "TokenLimit(500)" in repr(budgeted.termination)


async def test_a_rejected_submission_does_not_end_the_run() -> None:
    model = ScriptedModel(
        [
            tool_call("submit_report", {"result": {**good_report()["result"], "sources": []}}),
            tool_call("submit_report", good_report()),
        ]
    )
    agent = create_deepagent(
        model=model,
        tools=[submit_report],
        submit_tool="submit_report",
        grounding=False,
        output_schema=Report,
    )
    result = await agent.arun("Report on CRM")
    assert result.stop_reason == "tool_called:submit_report & confidence_met"
    assert [e.success for e in result.evidence] == [False, True]
    rejection = [m for m in model.calls[1].messages if m.role == "tool"][0]
    assert "a report needs at least one source" in rejection.content
    assert isinstance(result.parsed, Report) and result.parsed.sources == ["survey"]
    model.assert_complete()


async def test_low_confidence_submission_keeps_the_agent_working() -> None:
    model = ScriptedModel(
        [
            tool_call("submit_report", good_report(0.5)),
            tool_call("submit_report", good_report(0.95)),
        ]
    )
    agent = create_deepagent(
        model=model, tools=[submit_report], submit_tool="submit_report", grounding=False
    )
    result = await agent.arun("Report on CRM")
    assert result.iterations == 2
    assert result.state.confidence == 0.95
    model.assert_complete()


def test_max_tokens_is_rejected_with_a_pointer_to_the_right_knobs() -> None:
    with pytest.raises(TypeError) as caught:
        create_deepagent(model=ScriptedModel(), max_tokens=1000)
    assert "max_output_tokens" in str(caught.value)
    assert "total_token_budget" in str(caught.value)
    with pytest.raises(TypeError, match="max_iteration"):
        create_deepagent(model=ScriptedModel(), max_iteration=3)


async def test_max_output_tokens_caps_each_completion() -> None:
    model = ScriptedModel([text("fine")])
    agent = create_deepagent(model=model, max_output_tokens=256, grounding=False)
    await agent.arun("hi")
    assert model.calls[0].max_output_tokens == 256


async def test_token_budget_ends_the_run_only_when_set() -> None:
    def endless(call: ModelCall) -> ModelResponse:
        turn = len(call.messages)
        return tool_call("lookup", topic=f"topic {turn}", input_tokens=100, output_tokens=20)

    budgeted = create_deepagent(
        model=ScriptedModel(responder=endless),
        tools=[lookup],
        total_token_budget=300,
        max_iterations=10,
        grounding=False,
    )
    result = await budgeted.arun("research")
    assert result.stop_reason == "token_limit"
    assert result.iterations == 3

    unbudgeted = create_deepagent(
        model=ScriptedModel(responder=endless), tools=[lookup], max_iterations=5, grounding=False
    )
    result = await unbudgeted.arun("research")
    assert result.stop_reason == "max_iterations"
    assert result.usage.total_tokens == 600


@tool
def flaky_search(query: str) -> str:
    """Search that fails for one query."""
    if query == "bad":
        raise ConnectionError("index offline")
    return f"results for {query}"


@pytest.mark.parametrize("reflexion", [True, False])
async def test_reflexion_rewrites_the_plan_after_a_failed_step(reflexion: bool) -> None:
    model = ScriptedModel(
        [
            tool_call("flaky_search", query="bad"),
            tool_call("flaky_search", query="good"),
            text("done"),
        ]
    )
    agent = create_deepagent(
        model=model, tools=[flaky_search], reflexion=reflexion, grounding=False
    )
    seen: list[dict] = []
    async with run_context() as rid:
        remove = get_event_bus().add_listener(
            lambda e: seen.append(e.data) if e.event_type == "agent.reflexion" else None
        )
        try:
            await agent.arun("find it")
        finally:
            remove()
    assert rid
    after_failure = model.calls[1].messages[-1]
    after_success = model.calls[2].messages[-1]
    assert after_success.role == "tool"  # nothing to reflect on after a good step
    if reflexion:
        assert after_failure.role == "user"
        assert "Reflection on your last step" in after_failure.content
        assert after_failure.kind == "reflection"
        assert "index offline" in after_failure.content
        assert [e["verdict"] for e in seen] == ["revise", "on_track"]
    else:
        assert after_failure.role == "tool"
        assert seen == []


async def test_grounding_sends_unsupported_claims_back_then_drops_them() -> None:
    answer = (
        "The CRM market grew 12% in 2024 according to the analyst survey.\n"
        "Vendors on Mars hold a quarter of all seats."
    )

    def judge(call: ModelCall) -> ModelResponse:
        # The claim-level judge asks once per claim; this one doubts the Mars claim.
        return text("No" if "Mars" in call.last_user_text.split("Claim: ", 1)[1] else "Yes")

    model = ScriptedModel([tool_call("lookup", topic="crm"), text(answer), text(answer)])
    judge_model = ScriptedModel(responder=judge)
    agent = create_deepagent(
        model=model, tools=[lookup], judge_model=judge_model, grounding_threshold=0.9
    )
    result = await agent.arun("How did CRM grow?")
    assert "Vendors on Mars" in model.calls[2].last_user_text  # sent back for research
    assert model.calls[2].messages[-1].kind == "grounding_feedback"
    assert "Mars" not in result.message
    assert "grew 12%" in result.message
    assert result.grounding is not None and len(result.grounding.ungrounded) == 1
    # Judged after each answer; the Mars claim shares no word with any passage, so only the
    # growth claim is put to the judge (the other has no evidence to rest on).
    assert len(judge_model.calls) == 2
    model.assert_complete()


async def test_an_answer_made_without_evidence_is_not_grounded() -> None:
    """The agent answers from memory (no tool call): the answer is sent back for research once,
    then its claims are dropped; the judge is never asked, as there is nothing to ask about."""
    answer = "The CRM market grew 12% in 2024 according to the analyst survey."
    model = ScriptedModel([text(answer), text(answer)])
    judge_model = ScriptedModel()
    agent = create_deepagent(model=model, tools=[lookup], judge_model=judge_model)
    result = await agent.arun("How did CRM grow?")
    assert model.calls[1].messages[-1].kind == "grounding_feedback"
    assert "no evidence" in model.calls[1].last_user_text
    assert result.grounding is not None and result.grounding.score == 0.0
    assert answer not in result.message
    assert judge_model.calls == []
    model.assert_complete()


async def test_grounding_off_accepts_the_answer_as_is() -> None:
    model = ScriptedModel([tool_call("lookup", topic="crm"), text("Vendors on Mars sell CRM.")])
    agent = create_deepagent(model=model, tools=[lookup], grounding=False)
    result = await agent.arun("q")
    assert result.message == "Vendors on Mars sell CRM."
