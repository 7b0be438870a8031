"""Reflexion that asks the model: a self-evaluation after each tool step, the plan rewritten when
the step did not help, its usage counted against the run's limits; the rule-based form; the
default per model family."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sleuth.agent import Agent
from sleuth.agent.reflexion import (
    REFLEXION_SYSTEM,
    default_reflexion,
    is_reflexion_request,
)
from sleuth.models import ModelResponse, ScriptedModel
from sleuth.models.openai import OpenAIModel
from sleuth.models.scripted import ModelCall, structured, text, tool_call
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.events import get_event_bus, run_context
from sleuth.tools import tool
from sleuth.usage.limits import BUDGET_EXHAUSTED, UsageLimits


@tool
def search(query: str) -> str:
    """Search the index."""
    return "[]" if query == "vague" else f"the answer to {query} is 42"


def verdict(progress: bool, plan_ok: bool, plan: str = "", reason: str = "") -> ModelResponse:
    return structured(
        {"progress": progress, "plan_ok": plan_ok, "reason": reason, "plan": plan},
        input_tokens=100,
        output_tokens=20,
    )


async def run_collecting(agent: Agent, task: str) -> tuple[Any, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    async with run_context():
        remove = get_event_bus().add_listener(
            lambda e: seen.append(e.data) if e.event_type == "agent.reflexion" else None
        )
        try:
            result = await agent.arun(task)
        finally:
            remove()
    return result, seen


async def test_a_step_that_did_not_help_gets_a_rewritten_plan_from_the_model() -> None:
    model = ScriptedModel(
        [
            tool_call("search", query="vague"),
            verdict(False, False, plan="search for 'meaning of life' instead", reason="empty"),
            tool_call("search", query="meaning of life"),
            verdict(True, True, plan="search for 'meaning of life' instead"),
            text("It is 42."),
        ]
    )

    result, seen = await run_collecting(Agent(model, tools=[search], reflexion="model"), "q?")

    model.assert_complete()
    first_reflexion, second_turn = model.calls[1], model.calls[2]
    assert is_reflexion_request(first_reflexion.messages)
    assert first_reflexion.messages[0].content == REFLEXION_SYSTEM
    assert first_reflexion.tools == [] and first_reflexion.output_schema is not None
    assert first_reflexion.output_schema.name == "reflexion"
    assert 'search({"query": "vague"}) -> []' in first_reflexion.last_user_text
    revision = second_turn.messages[-1]
    assert revision.kind == "reflection" and revision.role == "user"
    assert "Revised plan: search for 'meaning of life' instead" in revision.content
    assert not is_reflexion_request(second_turn.messages)
    # A step that helped leaves the conversation as it was.
    assert model.calls[4].messages[-1].role == "tool"
    assert result.message == "It is 42."
    assert result.state.plan == "search for 'meaning of life' instead"
    assert [(e["mode"], e["verdict"]) for e in seen] == [("model", "revise"), ("model", "on_track")]
    assert result.reflexion_requests == 2
    # The self-evaluations' tokens are the run's: 3 turns of the agent + 2 verdicts.
    assert result.usage.input_tokens == 3 * 10 + 2 * 100
    assert result.iterations == 3


async def test_the_self_evaluation_is_counted_in_the_usage_limits() -> None:
    """Without reflexion the run completes inside the limit; the verdict's tokens use it up, so
    the next turn is refused and the run ends with what it knows."""
    turns = [tool_call("search", query="x", output_tokens=5), text("done", output_tokens=5)]
    limits = UsageLimits(max_output_tokens=25)

    plain = await Agent(ScriptedModel(list(turns)), tools=[search], limits=limits).arun("q")
    assert plain.stop_reason == "completed"

    model = ScriptedModel([turns[0], verdict(True, True, plan="answer now")])
    reflecting = Agent(model, tools=[search], limits=limits, reflexion="model")
    result = await reflecting.arun("q")

    model.assert_complete()
    assert result.stop_reason == BUDGET_EXHAUSTED
    assert result.usage.output_tokens == 25


async def test_no_self_evaluation_is_made_when_the_limits_leave_no_room() -> None:
    """The verdict request (its prompt is longer than the conversation's) does not fit in the
    input tokens left: it is skipped, and the run goes on."""
    model = ScriptedModel([tool_call("search", query="x"), text("done")])
    agent = Agent(model, tools=[search], limits=UsageLimits(max_input_tokens=60), reflexion="model")
    result, seen = await run_collecting(agent, "q")
    model.assert_complete()
    assert not any(is_reflexion_request(call.messages) for call in model.calls)
    assert result.stop_reason == "completed"
    assert [e["verdict"] for e in seen] == ["skipped"]
    assert result.reflexion_requests == 0


async def test_an_answer_without_a_verdict_falls_back_to_the_rules() -> None:
    model = ScriptedModel(
        [tool_call("search", query="vague"), text("hmm, hard to say"), text("No answer.")]
    )
    result, seen = await run_collecting(Agent(model, tools=[search], reflexion="model"), "q")
    assert [e["verdict"] for e in seen] == ["revise"]
    assert model.calls[2].messages[-1].kind == "reflection"
    assert "search returned nothing" in model.calls[2].messages[-1].content
    assert result.reflexion_requests == 1


async def test_the_self_evaluation_is_its_own_step_for_durable_runners() -> None:
    model = ScriptedModel(
        [tool_call("search", query="x"), verdict(True, True, plan="answer"), text("42")]
    )
    agent = Agent(model, tools=[search], reflexion="model")
    state = agent.initial_state("q")

    await agent.step(state)  # the model turn
    await agent.step(state)  # the tool call
    assert state.reflexion_due and agent.next_tool_call(state) is None
    assert len(model.calls) == 1
    await agent.step(state)  # the self-evaluation
    assert not state.reflexion_due and len(model.calls) == 2
    assert state.reflexion_requests == 1
    await agent.step(state)
    assert state.finished and state.final_message == "42"


async def test_rules_reflexion_asks_no_model() -> None:
    model = ScriptedModel([tool_call("search", query="vague"), text("nothing found")])
    result, seen = await run_collecting(Agent(model, tools=[search], reflexion="rules"), "q")
    model.assert_complete()
    assert not any(is_reflexion_request(call.messages) for call in model.calls)
    assert [(e["mode"], e["verdict"]) for e in seen] == [("rules", "revise")]
    assert result.reflexion_requests == 0


def test_reflexion_true_picks_by_model_family(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    hosted = OpenAIModel("gpt-4o-mini", api_key="sk-test")
    assert Agent(hosted, reflexion=True).reflexion == "model"
    assert Agent(hosted, reflexion="rules").reflexion == "rules"
    assert Agent(ScriptedModel(), reflexion=True).reflexion == "rules"
    assert Agent(ScriptedModel(), reflexion="model").reflexion == "model"
    assert Agent(ScriptedModel(), reflexion=False).reflexion is None

    class Local:
        provider = "local"

    assert default_reflexion(Local()) == "rules"  # type: ignore[arg-type]
    with pytest.raises(InvalidSettingError, match="reflexion='always'"):
        Agent(ScriptedModel(), reflexion="always")  # type: ignore[arg-type]


async def test_a_responder_tells_reflexion_requests_apart() -> None:
    """How research scripts answer them: by the request's marker, not by call order."""
    answered: list[str] = []

    def respond(call: ModelCall) -> ModelResponse:
        if is_reflexion_request(call.messages):
            answered.append("reflexion")
            return verdict(True, True, plan="done")
        answered.append("agent")
        if any(m.role == "tool" for m in call.messages):
            return text("found")
        return tool_call("search", query="x")

    result = await Agent(ScriptedModel(responder=respond), tools=[search], reflexion="model").arun(
        "q"
    )
    assert answered == ["agent", "reflexion", "agent"]
    assert json.loads(json.dumps(result.model_dump()))["message"] == "found"
