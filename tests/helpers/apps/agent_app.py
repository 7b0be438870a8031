"""A deep agent with every durable-relevant layer, for `AgentWorkflow` tests
(`--app tests.helpers.apps.agent_app:app`).

Its models are deterministic functions of the conversation, so a restarted worker process
answers exactly as the one that died. Every tool appends one JSON line to the file named by
`$SLEUTH_TEST_AGENT_RECORD`; with `$SLEUTH_TEST_AGENT_GATE` set to a folder, the subagent's tool
drops a `started-N` marker there and waits until a `release` file appears.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from sleuth import App, create_deepagent, tool
from sleuth.agent import Agent
from sleuth.deepagent import SubAgentDef
from sleuth.models.base import ModelResponse, ToolCall, Usage
from sleuth.models.scripted import ModelCall, ScriptedModel, text

RECORD_ENV = "SLEUTH_TEST_AGENT_RECORD"
GATE_ENV = "SLEUTH_TEST_AGENT_GATE"
NOTES = "CRM market grew 12% in 2024"


def record(name: str, **arguments: Any) -> None:
    path = os.environ.get(RECORD_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"tool": name, **arguments}) + "\n")


def read_record(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@tool
def lookup(topic: str) -> str:
    """Look a topic up in the market database."""
    record("lookup", topic=topic)
    return f"{topic}: {NOTES}"


@tool
def submit(summary: str, confidence: float) -> str:
    """Submit the finished answer with your confidence (0-1)."""
    record("submit", summary=summary)
    return "accepted"


@tool
async def deep_dive(company: str) -> str:
    """Pricing details of one company."""
    record("deep_dive", company=company)
    gate = os.environ.get(GATE_ENV)
    if gate:
        folder = Path(gate)
        started = len(list(folder.glob("started-*")))
        (folder / f"started-{started + 1}").touch()
        while not (folder / "release").exists():
            await asyncio.sleep(0.05)
    return f"{company} charges $40 per seat"


def calls(prefix: str, step: int, *pairs: tuple[str, dict[str, Any]]) -> ModelResponse:
    """A tool-call turn with ids that depend only on the step (stable across processes)."""
    return ModelResponse(
        tool_calls=[
            ToolCall(id=f"{prefix}{step}-{n}", name=name, arguments=arguments)
            for n, (name, arguments) in enumerate(pairs)
        ],
        usage=Usage(input_tokens=10, output_tokens=5),
    )


def tool_outputs(call: ModelCall) -> dict[str, str]:
    return {m.name or "": m.content for m in call.messages if m.role == "tool"}


def parent_turn(call: ModelCall) -> ModelResponse:
    step = sum(1 for m in call.messages if m.role == "assistant" and m.tool_calls)
    todos_open = [
        {"content": "size the market", "status": "completed"},
        {"content": "price Acme", "status": "in_progress"},
    ]
    todos_done = [{"content": t["content"], "status": "completed"} for t in todos_open]
    plan = [
        lambda: calls("p", 0, ("lookup", {"topic": "crm"})),
        lambda: calls(
            "p",
            1,
            ("write_file", {"path": "notes.md", "content": NOTES}),
            ("write_todos", {"todos": todos_open}),
        ),
        lambda: calls(
            "p",
            2,
            (
                "task",
                {"subagent_type": "pricing_analyst", "description": "What does Acme charge?"},
            ),
        ),
        lambda: calls("p", 3, ("read_file", {"path": "notes.md"})),
        lambda: calls("p", 4, ("write_todos", {"todos": todos_done})),
    ]
    if step < len(plan):
        return plan[step]()
    outputs = tool_outputs(call)
    summary = f"{outputs.get('read_file', 'no notes')} | {outputs.get('task', 'no pricing')}"
    return calls("p", step, ("submit", {"summary": summary, "confidence": 0.9}))


def child_turn(call: ModelCall) -> ModelResponse:
    outputs = tool_outputs(call)
    if "deep_dive" not in outputs:
        return calls("c", 0, ("deep_dive", {"company": "Acme"}))
    return text(f"Pricing: {outputs['deep_dive']}", input_tokens=100, output_tokens=20)


def build_market_agent() -> Agent:
    return create_deepagent(
        model=ScriptedModel(responder=parent_turn, name="parent"),
        tools=[lookup, submit],
        system_prompt="You research markets.",
        submit_tool="submit",
        enable_filesystem=True,
        enable_todos=True,
        subagents=[
            SubAgentDef(
                name="pricing_analyst",
                description="Finds one company's pricing.",
                system_prompt="Find the pricing of the company you are given.",
                tools=[deep_dive],
                model=ScriptedModel(responder=child_turn, name="child"),
            )
        ],
        grounding=False,
        name="market",
    )


app = App(task_queue="sleuth-agent-test", name="agent-test")
app.agent("market", build_market_agent)
