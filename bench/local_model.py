"""Prompt prefix reuse on the local model: prompt evaluation per turn of a tool loop, with the KV
cache kept from the previous turn and with it cleared, side by side in one run.

    python -m bench.local_model [--model qwen2.5-coder-0.5b] [--turns 6]

Each turn asks for a `search` call (forced, so every run builds the same conversation) and
answers it with a ~150-token tool result. Turn N is requested twice: first as a loop would send
it (the cache holds turn N-1's prompt and answer), then again after `clear_prompt_cache()`. It
prints per turn the prompt tokens, how many were reused, and both prompt-evaluation times; then
the totals and their ratio. Needs the weights (`sleuth models pull NAME`).
"""

from __future__ import annotations

import argparse
import asyncio

from sleuth.models import Message, ToolSpec, resolve
from sleuth.models.local import LocalModel

SEARCH = ToolSpec(
    name="search",
    description="Search the analyst notes and return the best passage.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)
PASSAGE = (
    "Passage {turn}: The CRM market grew 12 percent in 2024, led by mid-market vendors who bundled "
    "analytics with pipeline management. Pricing rose by about five percent on average while "
    "seat counts stayed flat, so most growth came from upsell of add-on modules. Analysts expect "
    "consolidation among the smaller vendors over the next two years, as larger suites absorb "
    "point products for email automation, forecasting and customer support ticketing."
)


async def run(model_name: str, turns: int) -> None:
    model = resolve(f"local:{model_name}")
    assert isinstance(model, LocalModel)
    model.prepare()
    # Warm up (first-touch page faults of the weights) so turn 1 is not charged for them.
    await model.request([Message(role="user", content="Hello")], max_output_tokens=4)
    model.clear_prompt_cache()
    messages = [
        Message(role="system", content="You are a research agent. Search before answering."),
        Message(role="user", content="How did the CRM market change in 2024? Search repeatedly."),
    ]
    print(f"model {model_name}, {turns} turns of a tool loop")
    print("turn  prompt  reused   cached s  uncached s  ratio")
    totals = [0.0, 0.0]
    for turn in range(1, turns + 1):
        response = await model.request(
            messages, tools=[SEARCH], tool_choice="search", max_output_tokens=40
        )
        cached = model.last_stats
        model.clear_prompt_cache()
        await model.request(messages, tools=[SEARCH], tool_choice="search", max_output_tokens=40)
        uncached = model.last_stats
        totals[0] += cached.prompt_seconds
        totals[1] += uncached.prompt_seconds
        print(
            f"{turn:>4}  {cached.prompt_tokens:>6}  {cached.reused_prompt_tokens:>6}  "
            f"{cached.prompt_seconds:>9.2f}  {uncached.prompt_seconds:>10.2f}  "
            f"{uncached.prompt_seconds / max(cached.prompt_seconds, 1e-6):>5.1f}x"
        )
        call = response.tool_calls[0]
        messages += [
            Message(role="assistant", content=response.text, tool_calls=[call]),
            Message(
                role="tool", tool_call_id=call.id, name="search", content=PASSAGE.format(turn=turn)
            ),
        ]
    print(
        f"total prompt evaluation: cached {totals[0]:.2f} s, uncached {totals[1]:.2f} s, "
        f"ratio {totals[1] / max(totals[0], 1e-6):.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--turns", type=int, default=6)
    args = parser.parse_args()
    asyncio.run(run(args.model, args.turns))


if __name__ == "__main__":
    main()
