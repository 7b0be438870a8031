"""How much a tree-wide budget saves on the reference's worst case: every task splits in three
down to depth 3 (1 + 3 + 9 decisions, 27 leaves, 13 syntheses), each leaf one tool call.

    python -m bench.decompose_budget

Runs the same scripted tree with no budget and with budgets of a few sizes, side by side, and
prints model calls, tool calls and input tokens, and each as a share of the unbudgeted run.
"""

from __future__ import annotations

import asyncio
import json

from sleuth.flows.decompose import Budget, DeepDecomposer
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.tools import tool


def build(budget: Budget | None) -> tuple[DeepDecomposer, ScriptedModel, list[str]]:
    looked_up: list[str] = []

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        looked_up.append(topic)
        return f"fact about {topic}"

    def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        weight = sum(len(m.content) for m in call.messages) // 4  # tokens as prompts weigh
        user = next(m.content for m in call.messages if m.role == "user")
        if call.system_text.startswith("Decide how to handle"):
            task = user.split("Task: ", 1)[1]
            split = {"direct": False, "subtasks": [f"{task}.{i}" for i in range(3)]}
            return text(json.dumps(split), input_tokens=weight)
        if user.startswith("Original task:"):
            return text("synthesis", input_tokens=weight)
        if call.messages[-1].role == "user":
            return tool_call("lookup", topic=user, input_tokens=weight)
        return text(f"answer about {user}", input_tokens=weight)

    model = ScriptedModel(responder=respond)
    return DeepDecomposer(model, tools=[lookup], budget=budget, max_fan_out=3), model, looked_up


async def measure(budget: Budget | None) -> tuple[int, int, int, str]:
    agent, model, looked_up = build(budget)
    result = await agent.arun("t", max_depth=3)
    return len(model.calls), len(looked_up), result.spent.input_tokens, result.outcome


async def main() -> None:
    budgets = [
        ("no budget", None),
        ("max_tool_calls=9", Budget(max_tool_calls=9)),
        ("max_tool_calls=3", Budget(max_tool_calls=3)),
        ("max_input_tokens=2000", Budget(max_input_tokens=2000)),
        ("max_input_tokens=800", Budget(max_input_tokens=800)),
    ]
    rows = [(label, *await measure(budget)) for label, budget in budgets]
    base_calls, base_tools, base_tokens = rows[0][1:4]
    print(f"{'budget':<22}{'model calls':>12}{'tool calls':>12}{'input tokens':>14}  outcome")
    for label, calls, tools, tokens, outcome in rows:
        print(
            f"{label:<22}{calls:>6} ({calls / base_calls:4.0%}){tools:>6} ({tools / base_tools:4.0%})"
            f"{tokens:>7} ({tokens / base_tokens:4.0%})  {outcome}"
        )


if __name__ == "__main__":
    asyncio.run(main())
