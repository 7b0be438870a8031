"""Deterministic research models for tests and benchmarks: a responder per research node.

`ResearchScript` answers every node of the research graph from the request alone, so it is stateless
across worker restarts. The judge's verdict for each grounding eval comes from `verdicts`, one
entry per report written (summarize, then each regenerate; True = every claim grounded): the
claim-level judge asks once per claim, and answers `Yes` or `No` as a judge without token
probabilities does. Once exhausted the last entry repeats.

Reports written one after another alternate between `summary` and `rewrite` (the same fact in
other words), as a real rewrite would: a grounding eval does not ask the judge again about a
claim the previous eval asked about against the same passages (it reuses that answer), so a
report repeated word for word would keep its verdict whatever `verdicts` says next.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import node_of_request

FACT = "The CRM market grew 12 percent in 2024 according to Gartner."
REWORDED = "According to Gartner, the CRM market grew 12 percent in 2024."


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
    rewrite: str = REWORDED
    """What the second, fourth, … report says instead of `summary`."""
    execute_turn: Callable[[ModelCall], ModelResponse] | None = None
    sub_questions: list[str] = field(default_factory=lambda: ["How fast did the CRM market grow?"])
    """What the plan node answers (a JSON array of these)."""
    seen: list[str] = field(default_factory=list)
    _written: int = 0

    def __call__(self, call: ModelCall) -> ModelResponse:
        node = node_of_request(call.messages)
        self.seen.append(node)
        if node == "execute":
            if self.execute_turn is not None:
                return self.execute_turn(call)
            done = tool_rounds(call)
            if done < self.tool_calls_per_round:
                value = f"crm-{done + 1}-{len(call.messages)}"
                return tool_call(self.tool_name, **{self.tool_argument: value})
            return text("Findings: " + FACT)
        if node == "causal_inference":
            return text("Vendor consolidation -> CRM growth [1]")
        if node in ("summarize", "regenerate"):
            self._written += 1
            return text(self.summary if self._written % 2 else self.rewrite)
        if node == "replan":
            return text("Look up the CRM market growth figure for 2024.")
        if node == "plan":
            return text(json.dumps(self.sub_questions))
        verdict = self.verdicts[min(max(self._written - 1, 0), len(self.verdicts) - 1)]
        return judge_answer(verdict)


def judge_answer(supported: bool) -> ModelResponse:
    """A claim-level judge's generated verdict, `Yes` or `No` (naming no passage: the citation quotes the sentences closest to the claim)."""
    return text("Yes" if supported else "No")


def scripted_model(script: ResearchScript) -> ScriptedModel:
    return ScriptedModel(responder=script)


def lookup(topic: str) -> str:
    """Look a topic up in the market notes."""
    return json.dumps({"topic": topic, "text": FACT, "source": "gartner-2024.pdf"})
