"""In-process hierarchical decomposition: every decision rule, the digest, synthesis, budget, events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from sleuth.flows.decompose import (
    NOT_RUN_TEXT,
    Budget,
    BudgetPool,
    DeepDecomposer,
    Spend,
    build_digest,
    parse_decision,
)
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.runtime.events import get_event_bus, run_context
from sleuth.tools import tool

DECISION_MARK = "Decide how to handle the task you are given."


def is_decision(call: ModelCall) -> bool:
    return call.system_text.startswith(DECISION_MARK)


def decision_task(call: ModelCall) -> str:
    return call.last_user_text.split("Task: ", 1)[1]


def responder(
    decide: Callable[[str], str], solve: Callable[[ModelCall], object] | None = None
) -> Callable[[ModelCall], object]:
    """A stateless model: decisions by task, leaves answer `answer: <task>`, syntheses `synth: …`."""

    def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        if is_decision(call):
            return text(decide(decision_task(call)))
        if solve is not None:
            custom = solve(call)
            if custom is not None:
                return custom
        prompt = call.messages[-1].content if call.messages[-1].role == "user" else ""
        first_user = next(m.content for m in call.messages if m.role == "user")
        if first_user.startswith("Original task:"):
            return text("synth: " + first_user.splitlines()[0][len("Original task: ") :])
        return text(f"answer: {prompt or first_user}")

    return respond


def split_into(children: dict[str, list[str]]) -> Callable[[str], str]:
    def decide(task: str) -> str:
        if task in children:
            return json.dumps({"direct": False, "subtasks": children[task]})
        return json.dumps({"direct": True})

    return decide


@pytest.mark.parametrize(
    "decision",
    [
        '{"direct": false, "subtasks": ["a", ',
        '{"direct": true}',
        '{"direct": false, "subtasks": []}',
    ],
    ids=["malformed", "direct", "empty-subtasks"],
)
async def test_decision_that_is_not_a_split_solves_directly(decision: str) -> None:
    model = ScriptedModel([text(decision), text("the direct answer")])
    result = await DeepDecomposer(model).arun("What is 2+2?")
    assert result.answer == "the direct answer"
    assert result.tree.mode == "direct" and result.tree.children == []
    assert result.outcome == "completed"
    assert is_decision(model.calls[0]) and not is_decision(model.calls[1])
    assert model.calls[1].last_user_text == "What is 2+2?"
    model.assert_complete()


def test_parse_decision_rules() -> None:
    assert parse_decision('{"direct": false, "subtasks": ["x", " ", "y"]}') == (
        False,
        ["x", "y"],
        "split into 2 subtasks",
    )
    assert parse_decision('```json\n{"direct": false, "subtasks": ["x"]}\n```')[0] is False
    assert parse_decision("Sure! Here is my plan")[0] is True
    assert parse_decision('["x"]')[0] is True
    assert parse_decision('{"subtasks": ["x"]}')[0] is True


async def test_depth_zero_means_three() -> None:
    """A model that always splits in one: decisions at depths 0, 1, 2; depth 3 is solved directly."""
    model = ScriptedModel(
        responder=responder(lambda task: json.dumps({"direct": False, "subtasks": [task + "+"]}))
    )
    agent = DeepDecomposer(model, max_depth=0)
    assert agent.max_depth == 3
    result = await agent.arun("t", max_depth=0)
    decisions = [decision_task(c) for c in model.calls if is_decision(c)]
    assert decisions == ["t", "t+", "t++"]
    leaf = result.tree.children[0].children[0].children[0]
    assert (leaf.task, leaf.depth, leaf.mode) == ("t+++", 3, "direct")


async def test_max_depth_short_circuits_without_a_decision_call() -> None:
    model = ScriptedModel(responder=responder(split_into({"root": ["a", "b"], "a": ["never"]})))
    result = await DeepDecomposer(model, max_depth=1).arun("root")
    decisions = [decision_task(c) for c in model.calls if is_decision(c)]
    assert decisions == ["root"]
    assert [c.mode for c in result.tree.children] == ["direct", "direct"]
    assert [c.children for c in result.tree.children] == [[], []]


async def test_digest_format_feeds_the_synthesis() -> None:
    model = ScriptedModel(responder=responder(split_into({"root": ["alpha", "beta"]})))
    result = await DeepDecomposer(model, max_depth=2).arun("root")
    synthesis = [c for c in model.calls if c.last_user_text.startswith("Original task:")]
    assert len(synthesis) == 1
    assert synthesis[0].last_user_text == (
        "Original task: root\nSubtask results:\n"
        "## Subtask 1: alpha\nanswer: alpha\n\n## Subtask 2: beta\nanswer: beta\n"
        "Synthesize a final comprehensive answer."
    )
    assert build_digest([("alpha", "answer: alpha"), ("beta", "answer: beta")]) == (
        "## Subtask 1: alpha\nanswer: alpha\n\n## Subtask 2: beta\nanswer: beta"
    )
    assert result.answer == "synth: root"
    assert result.tree.mode == "decomposed" and result.tree.status == "done"


async def test_synthesis_is_a_react_loop_with_tools() -> None:
    fetched: list[str] = []

    @tool
    def latest_figure(metric: str) -> str:
        """Fetch the most recent value of a metric."""
        fetched.append(metric)
        return f"{metric}=42"

    def solve(call: ModelCall):  # type: ignore[no-untyped-def]
        first_user = next(m.content for m in call.messages if m.role == "user")
        if not first_user.startswith("Original task:"):
            return None
        if call.messages[-1].role == "user":
            assert "latest_figure" in call.tool_names
            return tool_call("latest_figure", metric="revenue")
        return text("final, verified: " + call.messages[-1].content)

    model = ScriptedModel(responder=responder(split_into({"root": ["a", "b"]}), solve))
    result = await DeepDecomposer(model, tools=[latest_figure]).arun("root")
    assert fetched == ["revenue"]
    assert result.answer == "final, verified: revenue=42"
    assert result.spent.tool_calls == 1


async def test_every_level_emits_a_decompose_event() -> None:
    events = []
    remove = get_event_bus().add_listener(events.append)
    try:
        model = ScriptedModel(responder=responder(split_into({"root": ["a", "b"], "a": ["a1"]})))
        async with run_context() as run_id:
            await DeepDecomposer(model, max_depth=3).arun("root")
    finally:
        remove()
    seen = sorted(
        (e.data["depth"], e.data["task_preview"])
        for e in events
        if e.event_type == "decompose" and e.run_id == run_id
    )
    assert seen == [(0, "root"), (1, "a"), (1, "b"), (2, "a1")]


async def test_fan_out_is_bounded() -> None:
    in_flight = 0
    peak = 0

    async def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        nonlocal in_flight, peak
        if is_decision(call):
            task = decision_task(call)
            subtasks = [f"s{i}" for i in range(7)] if task == "root" else []
            return text(json.dumps({"direct": not subtasks, "subtasks": subtasks}))
        in_flight += 1
        peak = max(peak, in_flight)
        for _ in range(5):  # let the other branches run into this point too
            await asyncio.sleep(0)
        in_flight -= 1
        return text("done")

    result = await DeepDecomposer(ScriptedModel(responder=respond), max_fan_out=2).arun("root")
    assert peak == 2
    assert len(result.tree.children) == 7


def wide_tree_model(tool_name: str, width: int) -> ScriptedModel:
    """Root splits into `width` leaves; each leaf calls the tool once, then answers."""

    def solve(call: ModelCall):  # type: ignore[no-untyped-def]
        first_user = next(m.content for m in call.messages if m.role == "user")
        if first_user.startswith("Original task:"):
            return None
        if call.messages[-1].role == "user":
            return tool_call(tool_name, topic=first_user)
        return text(f"found {call.messages[-1].content}")

    return ScriptedModel(
        responder=responder(split_into({"root": [f"leaf{i}" for i in range(width)]}), solve)
    )


async def test_shared_budget_stops_a_wide_tree_early() -> None:
    calls: list[str] = []

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        calls.append(topic)
        return f"fact about {topic}"

    unlimited = await DeepDecomposer(wide_tree_model("lookup", 10), tools=[lookup]).arun("root")
    assert len(calls) == 10 and unlimited.outcome == "completed"

    calls.clear()
    limited = await DeepDecomposer(
        wide_tree_model("lookup", 10),
        tools=[lookup],
        max_fan_out=3,
        budget=Budget(max_tool_calls=4),
    ).arun("root")
    assert len(calls) <= 4
    assert limited.spent.tool_calls == len(calls)
    assert limited.outcome == "budget_exhausted" and limited.budget_exhausted
    assert limited.tree.count("skipped") >= 6
    assert NOT_RUN_TEXT in limited.answer  # the digest of what is known is the answer


async def test_token_budget_is_shared_by_the_whole_tree() -> None:
    """Calls cost what their prompts weigh; the tree never spends more than its budget."""
    subtasks = [
        f"subtask {i}: " + "check the vendor's pricing page in detail " * 4 for i in range(8)
    ]
    leaves_run: list[str] = []

    def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        weight = sum(len(m.content) for m in call.messages) // 4
        if is_decision(call):
            return text(json.dumps({"direct": False, "subtasks": subtasks}), input_tokens=weight)
        leaves_run.append(call.last_user_text)
        return text("noted", input_tokens=weight)

    limited = await DeepDecomposer(
        ScriptedModel(responder=respond),
        max_depth=1,
        max_fan_out=2,
        budget={"max_input_tokens": 400},
    ).arun("root")
    assert limited.spent.input_tokens <= 400
    assert 2 <= len(leaves_run) < len(subtasks)
    assert limited.outcome == "budget_exhausted"
    assert limited.tree.count("skipped") == len(subtasks) - len(leaves_run)
    assert "The budget ran out before the results could be synthesised" in limited.answer


def test_budget_pool_never_hands_out_more_than_the_allowance() -> None:
    pool = BudgetPool.open(Budget(max_tool_calls=5, max_input_tokens=100), consumers=4)
    grants = [pool.grant() for _ in range(4)]
    handed = sum(g.max_tool_calls or 0 for g in grants if g is not None)
    assert handed <= 5
    pool.settle(grants[0], Spend(tool_calls=0, input_tokens=3))
    assert pool.remaining().max_tool_calls == 5 - handed + (grants[0].max_tool_calls or 0)
    assert BudgetPool.open(Budget(max_tool_calls=0), consumers=1).grant() is None
    unlimited = BudgetPool.open(Budget(), consumers=2).grant()
    assert unlimited == Budget()


async def test_a_loop_stops_before_a_request_that_would_not_fit() -> None:
    """Budget checks happen before each model call: a big tool result ends the loop cleanly,
    and each call's output is capped at the output tokens left."""

    @tool
    def fetch_page(url: str) -> str:
        """Fetch a page."""
        return "pricing table " * 150

    def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        weight = sum(len(m.content) for m in call.messages) // 4
        if call.messages[-1].role == "user":
            return tool_call(
                "fetch_page",
                url="https://acme.example/pricing",
                input_tokens=weight,
                output_tokens=30,
            )
        return text("summary", input_tokens=weight)

    model = ScriptedModel(responder=respond)
    agent = DeepDecomposer(
        model, tools=[fetch_page], budget={"max_input_tokens": 300, "max_output_tokens": 50}
    )
    result = await agent.arun("Acme pricing", max_depth=1)
    solve_calls = [c for c in model.calls if not is_decision(c)]
    assert len(solve_calls) == 1  # the second request would have been ~540 tokens
    assert result.outcome == "budget_exhausted"
    assert result.spent.input_tokens <= 300 and result.spent.tool_calls == 1
    assert "tool results so far" in result.answer and "fetch_page: pricing table" in result.answer
    decision_output_tokens = result.spent.output_tokens - 30  # the leaf's one call wrote 30
    assert model.calls[0].max_output_tokens == 50
    assert solve_calls[0].max_output_tokens == 50 - decision_output_tokens
