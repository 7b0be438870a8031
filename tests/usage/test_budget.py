"""`budgeted_agent` (a YAML `type: react` agent): its budget holds in-process and step by step."""

from __future__ import annotations

from sleuth.models.scripted import ScriptedModel, text, tool_call
from sleuth.tools import tool
from sleuth.usage.budget import Budget, budgeted_agent
from sleuth.usage.limits import BUDGET_EXHAUSTED


async def test_a_request_that_would_not_fit_ends_the_run_with_what_is_known() -> None:
    @tool
    def fetch_page(url: str) -> str:
        """Fetch a page."""
        return "pricing table " * 150

    model = ScriptedModel([tool_call("fetch_page", url="https://acme.example"), text("unused")])
    agent = budgeted_agent(model, [fetch_page], budget=Budget(max_input_tokens=200))

    result = await agent.arun("Acme pricing")  # a refused request ends the run, never raises

    assert result.stop_reason == BUDGET_EXHAUSTED
    assert "tool results so far" in result.message and "fetch_page: pricing" in result.message
    assert len(model.calls) == 1


async def test_tool_call_budget_holds_when_every_step_builds_a_fresh_agent() -> None:
    """The durable AgentWorkflow builds the agent anew from its factory for every step."""
    ran: list[int] = []

    @tool
    def inspect_item(number: int) -> str:
        """Inspect one item."""
        ran.append(number)
        return f"item {number} is fine"

    model = ScriptedModel(
        [tool_call("inspect_item", number=n) for n in range(1, 6)] + [text("done")]
    )

    def factory():  # type: ignore[no-untyped-def]
        return budgeted_agent(model, [inspect_item], budget=Budget(max_tool_calls=2))

    state = factory().initial_state("inspect the items")
    for _ in range(20):
        if state.finished:
            break
        await factory().step(state)

    assert ran == [1, 2]
    assert state.finished and state.stop_reason == BUDGET_EXHAUSTED


async def test_token_budget_holds_when_every_step_builds_a_fresh_agent() -> None:
    @tool
    def fetch_page(url: str) -> str:
        """Fetch a page."""
        return "pricing " * 100

    model = ScriptedModel(
        [
            tool_call("fetch_page", url="https://acme.example/1", input_tokens=300),
            tool_call("fetch_page", url="https://acme.example/2", input_tokens=300),
            text("unused"),
        ]
    )

    def factory():  # type: ignore[no-untyped-def]
        return budgeted_agent(model, [fetch_page], budget=Budget(max_input_tokens=400))

    state = factory().initial_state("Acme pricing")
    for _ in range(20):
        if state.finished:
            break
        await factory().step(state)

    # 300 of 400 input tokens are spent; the next request (~215 estimated tokens) cannot fit.
    assert len(model.calls) == 1
    assert state.stop_reason == BUDGET_EXHAUSTED
