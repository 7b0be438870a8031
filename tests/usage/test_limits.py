"""`UsageLimits`: checked by the agent before each model request and each tool call."""

from __future__ import annotations

import pytest

from sleuth.agent import Agent
from sleuth.deepagent import SubAgentDef, create_deepagent
from sleuth.models.base import Message, Usage
from sleuth.models.scripted import ScriptedModel, text, tool_call
from sleuth.tools import tool
from sleuth.usage.limits import (
    BUDGET_EXHAUSTED,
    UsageAccount,
    UsageLimitExceeded,
    UsageLimits,
    estimate_tokens,
)

ran: list[str] = []


@pytest.fixture(autouse=True)
def clear_ran() -> None:
    ran.clear()


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    ran.append(url)
    return f"page {url}"


def test_check_before_request_refuses_what_would_not_fit_and_caps_the_answer() -> None:
    limits = UsageLimits(max_input_tokens=100, max_output_tokens=50)
    messages = [Message(role="user", content="x" * 200)]  # about 50 tokens
    assert estimate_tokens(messages) == 50
    assert limits.check_before_request(Usage(input_tokens=40, output_tokens=20), messages) == 30
    with pytest.raises(UsageLimitExceeded, match="does not fit in the 40 input tokens left"):
        limits.check_before_request(Usage(input_tokens=60), messages)
    with pytest.raises(UsageLimitExceeded, match="no output tokens are left"):
        limits.check_before_request(Usage(output_tokens=50), messages)
    assert UsageLimits().check_before_request(Usage(input_tokens=10**9), messages) is None


def test_check_before_tool_call_refuses_the_call_past_the_limit() -> None:
    UsageLimits(max_tool_calls=2).check_before_tool_call(1)
    with pytest.raises(UsageLimitExceeded, match="tool-call budget is spent"):
        UsageLimits(max_tool_calls=2).check_before_tool_call(2)


async def test_a_refused_request_is_never_sent_and_ends_the_run_with_what_is_known() -> None:
    model = ScriptedModel([tool_call("fetch", url="a", input_tokens=90), text("unused")])
    agent = Agent(model, tools=[fetch], limits=UsageLimits(max_input_tokens=100))
    result = await agent.arun("read the pricing page")
    assert len(model.calls) == 1  # the second request was refused before it was made
    assert result.stop_reason == BUDGET_EXHAUSTED
    assert "fetch: page a" in result.message


async def test_each_answer_is_capped_at_the_output_tokens_left() -> None:
    model = ScriptedModel(
        [tool_call("fetch", url="a", output_tokens=30), text("done", output_tokens=5)]
    )
    agent = Agent(
        model, tools=[fetch], max_output_tokens=100, limits=UsageLimits(max_output_tokens=80)
    )
    await agent.arun("q")
    assert [c.max_output_tokens for c in model.calls] == [80, 50]
    assert agent.max_output_tokens == 100  # the limits are asked, the agent is not patched


async def test_a_refused_tool_call_does_not_run_and_a_second_one_stops_the_run() -> None:
    model = ScriptedModel(
        [
            tool_call("fetch", url="a"),
            tool_call("fetch", url="b"),
            tool_call("fetch", url="c"),
            text("unused"),
        ]
    )
    agent = Agent(model, tools=[fetch], limits=UsageLimits(max_tool_calls=1))
    result = await agent.arun("q")
    assert ran == ["a"]
    refusal = [m for m in model.calls[2].messages if m.role == "tool"][-1]
    assert refusal.kind == "limit_refusal"
    assert refusal.content.startswith("Not run: the tool-call budget is spent")
    assert result.stop_reason == BUDGET_EXHAUSTED and len(model.calls) == 3
    assert agent.tools["fetch"] is fetch  # the agent's own tools, not wrappers


async def test_a_subagent_charges_its_parent_through_the_usage_account() -> None:
    analyst = SubAgentDef(
        name="analyst",
        description="Researches one question.",
        system_prompt="Answer the question.",
        model=ScriptedModel([text("a long answer", input_tokens=5000, output_tokens=100)]),
    )
    parent = ScriptedModel(
        [tool_call("task", subagent_type="analyst", description="go", input_tokens=20)]
    )
    agent = create_deepagent(
        model=parent,
        subagents=[analyst],
        grounding=False,
        reflexion=False,
        limits=UsageLimits(max_input_tokens=1000),
    )
    result = await agent.arun("research")
    # The parent's next request is checked with the child's tokens included, so it never runs.
    assert len(parent.calls) == 1
    assert result.usage == Usage(input_tokens=5020, output_tokens=105)
    assert result.stop_reason == BUDGET_EXHAUSTED


async def test_a_tool_declaring_a_usage_account_charges_the_calling_run() -> None:
    @tool
    def helper(question: str, account: UsageAccount) -> str:
        """Ask a helper model."""
        account.charge(Usage(input_tokens=700))
        return "helped"

    assert "account" not in helper.parameters["properties"]
    standalone = await helper.invoke({"question": "q"})  # outside a run: an account of its own
    assert standalone.ok and standalone.content == "helped"

    model = ScriptedModel([tool_call("helper", question="q", input_tokens=10), text("unused")])
    agent = Agent(model, tools=[helper], limits=UsageLimits(max_input_tokens=500))
    result = await agent.arun("q")
    assert result.usage.input_tokens == 710
    assert result.stop_reason == BUDGET_EXHAUSTED and len(model.calls) == 1
