"""Deterministic research models for tests and benchmarks: a responder per research node.

`ResearchScript` answers every node of the research graph from the request alone, so it is stateless
across worker restarts. The judge's verdict for each grounding eval comes from `verdicts`, a list
consumed in order (True = every claim grounded); once exhausted the last entry repeats.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, structured, text, tool_call
from sleuth.research import node_of_request

FACT = "The CRM market grew 12 percent in 2024 according to Gartner."


def tool_rounds(call: ModelCall) -> int:
    """How many tool results the execute agent has seen in this conversation."""
    return sum(1 for m in call.messages if m.role == "tool")


@dataclass
class ResearchScript:
    """Answers each research node; records which nodes asked, in order."""

    verdicts: list[bool] = field(default_factory=lambda: [True])
    tool_name: str = "lookup"
    tool_argument: str = "topic"
    """The name of the tool's argument the execute agent fills in."""
    tool_calls_per_round: int = 1
    summary: str = "The CRM market grew 12 percent in 2024 according to Gartner."
    execute_turn: Callable[[ModelCall], ModelResponse] | None = None
    sub_questions: list[str] = field(default_factory=lambda: ["How fast did the CRM market grow?"])
    """What the plan node answers (a JSON array of these)."""
    seen: list[str] = field(default_factory=list)
    _judged: int = 0

    def __call__(self, call: ModelCall) -> ModelResponse:
        node = node_of_request(call.messages)
        self.seen.append(node)
        if node == "execute":
            if self.execute_turn is not None:
                return self.execute_turn(call)
            done = tool_rounds(call)
            if done < self.tool_calls_per_round:
                topic = f"crm-{done + 1}-{len(call.messages)}"
                return tool_call(self.tool_name, **{self.tool_argument: topic})
            return text("Findings: " + FACT)
        if node == "causal_inference":
            return text("Vendor consolidation -> CRM growth [1]")
        if node in ("summarize", "regenerate"):
            return text(self.summary)
        if node == "replan":
            return text("Look up the CRM market growth figure for 2024.")
        if node == "plan":
            return text(json.dumps(self.sub_questions))
        verdict = self.verdicts[min(self._judged, len(self.verdicts) - 1)]
        self._judged += 1
        claims = call.messages[-1].content.split("Claims:\n", 1)[1].splitlines()
        return structured(
            {
                "verdicts": [
                    {
                        "claim": n,
                        "supported": verdict,
                        "score": 1.0 if verdict else 0.0,
                        "evidence": [1] if verdict else [],
                    }
                    for n in range(1, len(claims) + 1)
                ]
            }
        )


def scripted_model(script: ResearchScript) -> ScriptedModel:
    return ScriptedModel(responder=script)


def lookup(topic: str) -> str:
    """Look a topic up in the market notes."""
    return json.dumps({"topic": topic, "text": FACT, "source": "gartner-2024.pdf"})
